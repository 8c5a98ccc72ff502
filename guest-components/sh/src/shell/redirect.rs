//! Redirections (files, descriptors, here-documents, `exec` without a command) and process
//! substitution.

use brush_parser::ast;

use crate::io::{In, Io, Out};

use super::*;

impl Shell {
    /// Runs `<(cmd)` to completion into a file and returns its path; for `>(cmd)` returns
    /// an empty file that `cmd` reads when the command is done.
    pub fn process_substitution(
        &mut self,
        kind: &ast::ProcessSubstitutionKind,
        cmd: &ast::SubshellCommand,
        io: &Io,
    ) -> Result<String, String> {
        static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = if std::fs::metadata("/tmp").is_ok_and(|m| m.is_dir()) {
            "/tmp".to_string()
        } else {
            self.cwd.clone()
        };
        let path = format!("{dir}/.sh-psub-{nanos:x}-{n}");
        std::fs::write(&path, b"").map_err(|e| format!("{path}: {}", io_message(&e)))?;
        match kind {
            ast::ProcessSubstitutionKind::Read => {
                let sio = Io {
                    stdin: io.stdin.clone(),
                    stdout: Out::File(path.clone()),
                    stderr: io.stderr.clone(),
                };
                let mut sub = self.clone();
                sub.psubs.clear();
                let _ = sub.run_list(&cmd.list, &sio);
                sub.finish_psubs(0, &sio);
                if sub.cwd != self.cwd {
                    let _ = std::env::set_current_dir(&self.cwd);
                }
                self.psubs.push(PSub::Input(path.clone()));
            }
            ast::ProcessSubstitutionKind::Write => {
                self.psubs.push(PSub::Output(path.clone(), cmd.clone()));
            }
        }
        Ok(path)
    }

    /// Ends the process substitutions made since `mark`: feeds `>(cmd)`s, removes files.
    pub fn finish_psubs(&mut self, mark: usize, io: &Io) {
        if self.psubs.len() <= mark {
            return;
        }
        for p in self.psubs.split_off(mark) {
            match p {
                PSub::Input(path) => {
                    let _ = std::fs::remove_file(&path);
                }
                PSub::Output(path, cmd) => {
                    let data = std::fs::read(&path).unwrap_or_default();
                    let _ = std::fs::remove_file(&path);
                    let sio = Io {
                        stdin: In::bytes(data),
                        stdout: io.stdout.clone(),
                        stderr: io.stderr.clone(),
                    };
                    let mut sub = self.clone();
                    sub.psubs.clear();
                    let _ = sub.run_list(&cmd.list, &sio);
                    if sub.cwd != self.cwd {
                        let _ = std::env::set_current_dir(&self.cwd);
                    }
                }
            }
        }
    }

    // -- redirections -------------------------------------------------------------------

    /// Applies redirections to `io`. `in_shell`: the command runs inside the shell, so an
    /// input file is read into memory (its readers then share one position).
    pub fn apply_redirects(
        &mut self,
        redirects: &[ast::IoRedirect],
        io: &Io,
        in_shell: bool,
    ) -> Result<Io, String> {
        let mut io = io.clone();
        for r in redirects {
            match r {
                ast::IoRedirect::File(fd, kind, target) => {
                    use ast::IoFileRedirectKind as K;
                    let default_fd = match kind {
                        K::Read | K::DuplicateInput | K::ReadAndWrite => 0,
                        _ => 1,
                    };
                    let fd = fd.unwrap_or(default_fd);
                    match (kind, target) {
                        (K::DuplicateOutput | K::DuplicateInput, t) => {
                            let src = match t {
                                ast::IoFileRedirectTarget::Fd(n) => n.to_string(),
                                ast::IoFileRedirectTarget::Duplicate(w)
                                | ast::IoFileRedirectTarget::Filename(w) => self
                                    .expand_single(&w.value)
                                    .map_err(|_| "bad substitution".to_string())?,
                                ast::IoFileRedirectTarget::ProcessSubstitution(kind, cmd) => {
                                    self.process_substitution(kind, cmd, &io)?
                                }
                            };
                            let out = match src.as_str() {
                                "1" => Some(io.stdout.clone()),
                                "2" => Some(io.stderr.clone()),
                                "-" if fd > 2 => {
                                    self.fds.remove(&fd);
                                    continue;
                                }
                                "-" => Some(Out::Null),
                                "0" => None,
                                other => {
                                    match other.parse::<i32>().ok().and_then(|n| self.fds.get(&n)) {
                                        Some(o) => Some(o.clone()),
                                        None => {
                                            return Err(format!("{other}: Bad file descriptor"));
                                        }
                                    }
                                }
                            };
                            match (fd, out) {
                                (1, Some(o)) => io.stdout = o,
                                (2, Some(o)) => io.stderr = o,
                                (0, _) => {}
                                (n, Some(o)) if n > 2 => {
                                    self.fds.insert(n, o);
                                }
                                (n, _) if n > 2 => {}
                                _ => return Err(format!("{src}: Bad file descriptor")),
                            }
                        }
                        (
                            _,
                            target @ (ast::IoFileRedirectTarget::Filename(_)
                            | ast::IoFileRedirectTarget::ProcessSubstitution(..)),
                        ) => {
                            let path = match target {
                                ast::IoFileRedirectTarget::Filename(w) => self
                                    .expand_single(&w.value)
                                    .map_err(|_| "bad substitution".to_string())?,
                                ast::IoFileRedirectTarget::ProcessSubstitution(kind, cmd) => {
                                    self.process_substitution(kind, cmd, &io)?
                                }
                                _ => unreachable!(),
                            };
                            if path.is_empty() {
                                return Err(": No such file or directory".into());
                            }
                            match kind {
                                K::Read => {
                                    let input = self.open_input(&path, in_shell)?;
                                    if fd == 0 {
                                        io.stdin = input;
                                    }
                                }
                                K::ReadAndWrite => {
                                    let abs = self.abs_path(&path);
                                    std::fs::OpenOptions::new()
                                        .read(true)
                                        .write(true)
                                        .create(true)
                                        .truncate(false)
                                        .open(&abs)
                                        .map_err(|e| format!("{path}: {}", io_message(&e)))?;
                                    if fd == 0 {
                                        io.stdin = self.open_input(&path, in_shell)?;
                                    }
                                }
                                _ => {
                                    let out = self.open_output(
                                        &path,
                                        matches!(kind, K::Append),
                                        matches!(kind, K::Clobber),
                                        &io,
                                    )?;
                                    match fd {
                                        1 => io.stdout = out,
                                        2 => io.stderr = out,
                                        n => {
                                            self.fds.insert(n, out);
                                        }
                                    }
                                }
                            }
                        }
                        (_, ast::IoFileRedirectTarget::Fd(n)) => {
                            let out = match n {
                                1 => io.stdout.clone(),
                                2 => io.stderr.clone(),
                                n => match self.fds.get(&{ *n }) {
                                    Some(o) => o.clone(),
                                    None => return Err(format!("{n}: Bad file descriptor")),
                                },
                            };
                            match fd {
                                1 => io.stdout = out,
                                2 => io.stderr = out,
                                _ => {}
                            }
                        }
                        (_, ast::IoFileRedirectTarget::Duplicate(_)) => {
                            return Err("unsupported redirection".into());
                        }
                    }
                }
                ast::IoRedirect::HereDocument(fd, doc) => {
                    let mut body = if doc.requires_expansion {
                        self.expand_heredoc(&doc.doc.value)
                            .map_err(|_| "bad substitution".to_string())?
                    } else {
                        doc.doc.value.clone()
                    };
                    if doc.remove_tabs {
                        body = body
                            .split_inclusive('\n')
                            .map(|l| l.trim_start_matches('\t'))
                            .collect();
                    }
                    if fd.unwrap_or(0) == 0 {
                        io.stdin = In::bytes(body.into_bytes());
                    }
                }
                ast::IoRedirect::HereString(fd, word) => {
                    let mut s = self
                        .expand_single(&word.value)
                        .map_err(|_| "bad substitution".to_string())?;
                    s.push('\n');
                    if fd.unwrap_or(0) == 0 {
                        io.stdin = In::bytes(s.into_bytes());
                    }
                }
                ast::IoRedirect::OutputAndError(word, append) => {
                    let path = self
                        .expand_single(&word.value)
                        .map_err(|_| "bad substitution".to_string())?;
                    let out = self.open_output(&path, *append, false, &io)?;
                    io.stdout = out.clone();
                    io.stderr = out;
                }
            }
        }
        Ok(io)
    }

    pub(super) fn open_input(&self, path: &str, in_shell: bool) -> Result<In, String> {
        match path {
            "/dev/null" => return Ok(In::Null),
            "/dev/stdin" => return Ok(self.cur_io.stdin.clone()),
            _ => {}
        }
        let abs = self.abs_path(path);
        match std::fs::metadata(&abs) {
            Err(e) => Err(format!("{path}: {}", io_message(&e))),
            Ok(m) if m.is_dir() => Err(format!("{path}: Is a directory")),
            Ok(_) if in_shell => std::fs::read(&abs)
                .map(In::bytes)
                .map_err(|e| format!("{path}: {}", io_message(&e))),
            Ok(_) => Ok(In::File(abs)),
        }
    }

    pub(super) fn open_output(
        &self,
        path: &str,
        append: bool,
        clobber: bool,
        io: &Io,
    ) -> Result<Out, String> {
        match path {
            "/dev/null" => return Ok(Out::Null),
            "/dev/stdout" => return Ok(io.stdout.clone()),
            "/dev/stderr" => return Ok(io.stderr.clone()),
            _ => {}
        }
        let abs = self.abs_path(path);
        if self.opts.noclobber
            && !append
            && !clobber
            && std::fs::metadata(&abs).is_ok_and(|m| m.is_file())
        {
            return Err(format!("{path}: cannot overwrite existing file"));
        }
        let mut o = std::fs::OpenOptions::new();
        if append {
            o.append(true).create(true);
        } else {
            o.write(true).create(true).truncate(true);
        }
        o.open(&abs)
            .map_err(|e| format!("{path}: {}", io_message(&e)))?;
        Ok(Out::File(abs))
    }
}
