//! Simple commands: expansion into a [`Prepared`] command, then a function, a builtin or a
//! program launched through the process host (found on `PATH` or by path, scripts by their
//! `#!` line).

use crate::io::{In, Io, Out};
use brush_parser::ast;
use guest_support::process::{self, Command as ChildCommand, Error as SpawnError, Stdio};
use std::rc::Rc;

use super::*;

impl Shell {
    /// Expands a simple command and applies its redirections. `None` when it was only
    /// assignments or redirections (already done).
    pub(super) fn prepare_simple(
        &mut self,
        cmd: &ast::SimpleCommand,
        io: &Io,
    ) -> Result<Option<Prepared>, Ctl> {
        self.cur_io = io.clone();
        let mut assigns: Vec<(String, String)> = Vec::new();
        let mut redirects: Vec<&ast::IoRedirect> = Vec::new();
        for item in cmd.prefix.iter().flat_map(|p| p.0.iter()) {
            match item {
                ast::CommandPrefixOrSuffixItem::AssignmentWord(a, _) => {
                    if !self.assign_array_forms(a)? {
                        let (name, value) = self.expand_assignment(a)?;
                        if cmd.word_or_name.is_none() {
                            // Assignments alone take effect one by one, left to right:
                            // `IFS=, a=(...)` splits the array's words with the new IFS.
                            self.set_var(&name, value);
                        } else {
                            assigns.push((name, value));
                        }
                    }
                }
                ast::CommandPrefixOrSuffixItem::IoRedirect(r) => redirects.push(r),
                ast::CommandPrefixOrSuffixItem::Word(w) => {
                    // Should not happen in a prefix; treat as a word.
                    let _ = w;
                }
                ast::CommandPrefixOrSuffixItem::ProcessSubstitution(..) => {}
            }
        }
        let mut argv: Vec<String> = Vec::new();
        if let Some(w) = &cmd.word_or_name {
            argv.extend(self.expand_word(&w.value)?);
        }
        for item in cmd.suffix.iter().flat_map(|s| s.0.iter()) {
            match item {
                ast::CommandPrefixOrSuffixItem::Word(w) => argv.extend(self.expand_word(&w.value)?),
                ast::CommandPrefixOrSuffixItem::AssignmentWord(a, w) => {
                    let array = matches!(a.value, ast::AssignmentValue::Array(_))
                        || matches!(a.name, ast::AssignmentName::ArrayElementName(..));
                    if array {
                        // `local a=(x y)`: the builtin declares `a`, then it is assigned.
                        let name = match &a.name {
                            ast::AssignmentName::VariableName(n)
                            | ast::AssignmentName::ArrayElementName(n, _) => n.clone(),
                        };
                        argv.push(name);
                        self.pending_arrays.push(a.clone());
                    } else {
                        // `export A=$x`: one field, no splitting (a declaration builtin).
                        argv.push(self.expand_single(&w.value)?);
                    }
                }
                ast::CommandPrefixOrSuffixItem::IoRedirect(r) => redirects.push(r),
                ast::CommandPrefixOrSuffixItem::ProcessSubstitution(kind, cmd) => {
                    match self.process_substitution(kind, cmd, io) {
                        Ok(path) => argv.push(path),
                        Err(msg) => {
                            self.error(io, &msg);
                            return Ok(Some(Prepared::Status(1)));
                        }
                    }
                }
            }
        }
        let in_shell = argv
            .first()
            .is_none_or(|a| BUILTINS.contains(&a.as_str()) || self.functions.contains_key(a));
        let owned: Vec<ast::IoRedirect> = redirects.into_iter().cloned().collect();
        let cio = match self.apply_redirects(&owned, io, in_shell) {
            Ok(cio) => cio,
            Err(msg) => {
                self.error(io, &msg);
                self.last_status = 1;
                return Ok(Some(Prepared::Status(1)));
            }
        };
        if argv.is_empty() {
            for (k, v) in assigns {
                self.set_var(&k, v);
            }
            // `$(false)` alone sets the status; plain assignments reset it.
            return Ok(Some(Prepared::Status(
                self.subst_status.take().unwrap_or(0),
            )));
        }
        self.subst_status = None;
        if self.opts.xtrace {
            let mut line = String::from("+");
            for (k, v) in &assigns {
                line.push_str(&format!(" {k}={v}"));
            }
            for a in &argv {
                line.push(' ');
                line.push_str(a);
            }
            line.push('\n');
            cio.stderr.write_str(&line);
        }
        if in_shell {
            return Ok(Some(Prepared::InShell {
                argv,
                assigns,
                io: cio,
            }));
        }
        Ok(Some(Prepared::External {
            argv,
            env: assigns,
            io: cio,
        }))
    }

    pub(super) fn run_prepared(&mut self, p: Prepared) -> Status {
        match p {
            Prepared::Status(s) => Ok(s),
            Prepared::InShell { argv, assigns, io } => {
                if let Some(body) = self.functions.get(&argv[0]).cloned() {
                    self.pending_arrays.clear();
                    return self.call_function(&body, argv, assigns, &io);
                }
                // Assignments before a special builtin stay; before others they are
                // temporary. Keep it simple: apply them around the builtin.
                let saved: Vec<(String, Option<Var>)> = assigns
                    .iter()
                    .map(|(k, _)| (k.clone(), self.vars.get(k).cloned()))
                    .collect();
                for (k, v) in &assigns {
                    self.set_var(k, v.clone());
                }
                let pending = std::mem::take(&mut self.pending_arrays);
                let mut r = crate::builtins::run(self, &argv, &io);
                if r.is_ok() {
                    for a in &pending {
                        if let Err(e) = self.assign_array_forms(a) {
                            r = Err(e);
                            break;
                        }
                    }
                }
                let special = matches!(
                    argv[0].as_str(),
                    ":" | "."
                        | "source"
                        | "export"
                        | "readonly"
                        | "set"
                        | "unset"
                        | "eval"
                        | "exec"
                        | "exit"
                        | "return"
                        | "break"
                        | "continue"
                        | "shift"
                        | "local"
                );
                if !special {
                    for (k, v) in saved {
                        match v {
                            Some(v) => {
                                self.vars.insert(k, v);
                            }
                            None => {
                                self.vars.remove(&k);
                            }
                        }
                    }
                }
                r
            }
            Prepared::External { argv, env, io } => match self.launch(&argv, &env, &io) {
                Ok(l) => Ok(self.finish(l)),
                Err(status) => Ok(status),
            },
        }
    }

    pub(super) fn call_function(
        &mut self,
        body: &ast::FunctionBody,
        argv: Vec<String>,
        assigns: Vec<(String, String)>,
        io: &Io,
    ) -> Status {
        let io = match &body.1 {
            Some(r) => match self.apply_redirects(&r.0, io, true) {
                Ok(io) => io,
                Err(msg) => {
                    self.error(io, &msg);
                    return Ok(1);
                }
            },
            None => io.clone(),
        };
        let saved_positional = std::mem::replace(&mut self.positional, argv[1..].to_vec());
        // FUNCNAME: this function first, then its callers.
        let saved_funcname = self.vars.get("FUNCNAME").cloned();
        let mut names = vec![argv[0].clone()];
        names.extend(
            self.array("FUNCNAME")
                .map(|a| a.values())
                .unwrap_or_default(),
        );
        self.set_array(
            "FUNCNAME",
            Array::Indexed(
                names
                    .into_iter()
                    .enumerate()
                    .map(|(i, n)| (i as i64, n))
                    .collect(),
            ),
        );
        self.locals.push(Vec::new());
        for (k, v) in assigns {
            self.make_local(&k);
            self.set_var(&k, v);
        }
        let saved_depth = std::mem::replace(&mut self.loop_depth, 0);
        let result = self.run_compound(&body.0, &io);
        self.loop_depth = saved_depth;
        if let Some(frame) = self.locals.pop() {
            for (k, v) in frame.into_iter().rev() {
                match v {
                    Some(v) => {
                        self.vars.insert(k, v);
                    }
                    None => {
                        self.vars.remove(&k);
                    }
                }
            }
        }
        self.positional = saved_positional;
        match saved_funcname {
            Some(v) => {
                self.vars.insert("FUNCNAME".into(), v);
            }
            None => {
                self.vars.remove("FUNCNAME");
            }
        }
        match result {
            Err(Ctl::Return(s)) => Ok(s),
            other => other,
        }
    }

    /// Starts an external program. On failure prints the shell's message and returns the
    /// status (127 not found, 126 cannot run).
    pub fn launch(
        &mut self,
        argv: &[String],
        extra_env: &[(String, String)],
        io: &Io,
    ) -> Result<Launched, i32> {
        let mut argv = argv.to_vec();
        // The path a program of the image was started by, when that is a symlink to it.
        let mut started_as = None;
        if argv[0].contains('/') && !is_bin_path(&argv[0]) {
            // A symlink to a program of the image (a venv's `bin/python`) runs the program.
            if let Some(target) = self.link_target(&argv[0]).filter(|t| is_bin_path(t)) {
                started_as = Some(self.abs_path(&argv[0]));
                argv[0] = target;
            } else {
                argv = self.script_argv(&argv, io)?;
            }
        } else if let Some(found) = self.sandbox_command(&argv[0], extra_env) {
            if let Some(target) = self.link_target(&found).filter(|t| is_bin_path(t)) {
                // A venv's `bin/pip` found on PATH: the program it links to.
                started_as = Some(found);
                argv[0] = target;
            } else {
                // A script of the sandbox found on PATH, run by its `#!` line like `./script`.
                argv[0] = found;
                argv = self.script_argv(&argv, io)?;
            }
        }
        // A `#!` line naming a venv's python (`#!/workspace/.venv/bin/python`).
        if started_as.is_none()
            && argv[0].contains('/')
            && !is_bin_path(&argv[0])
            && let Some(target) = self.link_target(&argv[0]).filter(|t| is_bin_path(t))
        {
            started_as = Some(self.abs_path(&argv[0]));
            argv[0] = target;
        }
        // Python (and pip) find their virtual environment from the path they were started by, which the
        // host's program lookup does not keep: it is passed as CPython's
        // `PYTHONEXECUTABLE` (which python3 reads and removes).
        let mut extra_env = extra_env.to_vec();
        if let Some(path) = started_as.filter(|_| {
            argv[0]
                .rsplit('/')
                .next()
                .is_some_and(|n| n.starts_with("python") || n.starts_with("pip"))
        }) {
            extra_env.push(("PYTHONEXECUTABLE".to_string(), path));
        }
        let extra_env = extra_env.as_slice();
        let mut feeds = Vec::new();
        let mut drains = Vec::new();
        let mut to_close = Vec::new();
        let stdin = match io.stdin.as_stdio() {
            Some(s) => s,
            None => {
                let (r, w) = process::pipe();
                if let In::Bytes(feed) = &io.stdin {
                    feeds.push((w, feed.clone()));
                }
                to_close.push(r);
                Stdio::Handle(r)
            }
        };
        let stdout = match io.stdout.as_stdio() {
            Some(s) => s,
            None => {
                let (r, w) = process::pipe();
                if let Out::Buffer(b) = &io.stdout {
                    drains.push((r, b.clone()));
                }
                to_close.push(w);
                Stdio::Handle(w)
            }
        };
        let stderr = match (&io.stderr, &io.stdout) {
            (Out::Buffer(a), Out::Buffer(b)) if Rc::ptr_eq(a, b) => Stdio::SameAsStdout,
            (Out::Stdout, _) => Stdio::InheritStdout,
            (Out::Stderr, _) => Stdio::Inherit,
            (other, _) => match other.as_stdio() {
                Some(s) => s,
                None => {
                    let (r, w) = process::pipe();
                    if let Out::Buffer(b) = other {
                        drains.push((r, b.clone()));
                    }
                    to_close.push(w);
                    Stdio::Handle(w)
                }
            },
        };
        let result = process::spawn(&ChildCommand {
            argv: argv.clone(),
            env: self.child_env(extra_env),
            cwd: self.cwd.clone(),
            stdin,
            stdout,
            stderr,
        });
        for h in to_close {
            process::close(h);
        }
        match result {
            Ok(pid) => Ok(Launched { pid, feeds, drains }),
            Err(e) => {
                for (h, _) in feeds {
                    process::close(h);
                }
                for (h, _) in drains {
                    process::close(h);
                }
                let (msg, status) = match e {
                    SpawnError::NotFound(_) if self.on_path_not_executable(&argv[0], extra_env) => {
                        (format!("{}: Permission denied", argv[0]), 126)
                    }
                    SpawnError::NotFound(_) => (format!("{}: command not found", argv[0]), 127),
                    SpawnError::Limit(m) => (m, 126),
                    SpawnError::Io(m) => (m, 1),
                    SpawnError::BadHandle => ("bad file descriptor".to_string(), 1),
                };
                self.error(io, &msg);
                Err(status)
            }
        }
    }

    /// The `PATH` a command gets: its own `PATH=dir cmd` assignment, else the shell's.
    pub(super) fn command_path(&self, extra_env: &[(String, String)]) -> String {
        match extra_env.iter().rev().find(|(k, _)| k == "PATH") {
            Some((_, p)) => p.clone(),
            None => self.get_var("PATH").unwrap_or_default(),
        }
    }

    /// An executable file of the sandbox that a command name without a slash finds on
    /// `PATH` before any image program. With only the image's directories on `PATH` (the
    /// default) there is nothing to look for, so the common case costs no host call.
    pub(super) fn sandbox_command(
        &self,
        name: &str,
        extra_env: &[(String, String)],
    ) -> Option<String> {
        let path = self.command_path(extra_env);
        if path
            .split(':')
            .all(|d| guest_support::BIN_DIRS.contains(&d.trim_end_matches('/')))
        {
            return None;
        }
        guest_support::path_lookup(name, &path, &self.cwd).filter(|p| !is_bin_path(p))
    }

    /// Whether a command name that was not found names a file on `$PATH` that is not
    /// executable (bash then answers "Permission denied", status 126).
    pub(super) fn on_path_not_executable(
        &self,
        name: &str,
        extra_env: &[(String, String)],
    ) -> bool {
        if name.contains('/') {
            return false;
        }
        self.command_path(extra_env)
            .split(':')
            .filter(|d| !guest_support::BIN_DIRS.contains(&d.trim_end_matches('/')))
            .any(|d| {
                let dir = if d.is_empty() { "." } else { d };
                std::fs::metadata(self.abs_path(&format!("{dir}/{name}")))
                    .is_ok_and(|m| m.is_file())
            })
    }

    /// Where a command name is found on `$PATH` (see [`guest_support::path_lookup`]).
    pub fn path_lookup(&self, name: &str) -> Option<String> {
        let path = self.get_var("PATH").unwrap_or_default();
        guest_support::path_lookup(name, &path, &self.cwd)
    }

    /// Where the path `p` leads when it is a symlink (followed to its end, as absolute sandbox
    /// paths); `None` when it is not one.
    pub(super) fn link_target(&self, p: &str) -> Option<String> {
        let mut path = normalize_path(&self.abs_path(p));
        let mut followed = false;
        for _ in 0..40 {
            let Ok(target) = std::fs::read_link(&path) else {
                break;
            };
            let target = target.to_string_lossy().into_owned();
            let dir = path
                .rsplit_once('/')
                .map_or("/", |(d, _)| if d.is_empty() { "/" } else { d });
            path = if target.starts_with('/') {
                normalize_path(&target)
            } else {
                normalize_path(&format!("{dir}/{target}"))
            };
            followed = true;
        }
        followed.then_some(path)
    }

    /// `./script.sh ARGS`: a file of the workspace run by the interpreter its `#!` line
    /// names (the shell when it has none).
    pub(super) fn script_argv(&self, argv: &[String], io: &Io) -> Result<Vec<String>, i32> {
        let path = self.abs_path(&argv[0]);
        match std::fs::metadata(&path) {
            Err(_) => {
                self.error(io, &format!("{}: No such file or directory", argv[0]));
                Err(127)
            }
            Ok(m) if m.is_dir() => {
                self.error(io, &format!("{}: Is a directory", argv[0]));
                Err(126)
            }
            Ok(_) if guest_support::file_mode(&path).is_some_and(|mode| mode & 0o111 == 0) => {
                self.error(io, &format!("{}: Permission denied", argv[0]));
                Err(126)
            }
            Ok(_) => {
                let head = std::fs::read(&path).unwrap_or_default();
                let first = head.split(|&b| b == b'\n').next().unwrap_or_default();
                let first = String::from_utf8_lossy(first);
                let mut interp = vec!["sh".to_string()];
                if let Some(rest) = first.strip_prefix("#!") {
                    let words: Vec<&str> = rest.split_whitespace().collect();
                    interp = match words.as_slice() {
                        [env, prog, args @ ..] if env.ends_with("/env") => std::iter::once(*prog)
                            .chain(args.iter().copied())
                            .map(String::from)
                            .collect(),
                        [prog, args @ ..] => {
                            // A path of the sandbox (a venv's python) is kept for
                            // `launch`; a system one names a program of the image.
                            let keep = prog.starts_with('/')
                                && !is_bin_path(prog)
                                && self.link_target(prog).is_some_and(|t| is_bin_path(&t));
                            let prog = if keep {
                                *prog
                            } else {
                                prog.rsplit('/').next().unwrap_or(prog)
                            };
                            std::iter::once(prog)
                                .chain(args.iter().copied())
                                .map(String::from)
                                .collect()
                        }
                        [] => interp,
                    };
                }
                interp.extend(argv.iter().cloned());
                Ok(interp)
            }
        }
    }

    pub(super) fn finish_feeds(&self, l: &Launched) {
        for (h, feed) in &l.feeds {
            let _ = process::write(*h, feed.take_rest());
            process::close(*h);
        }
    }

    /// Feeds, drains and waits for a launched child; returns its status.
    pub fn finish(&mut self, mut l: Launched) -> i32 {
        self.finish_feeds(&l);
        l.feeds.clear();
        for (h, buf) in &l.drains {
            loop {
                match process::read(*h, 65536) {
                    Ok(chunk) if !chunk.is_empty() => buf.borrow_mut().extend_from_slice(&chunk),
                    _ => break,
                }
            }
            process::close(*h);
        }
        process::wait(l.pid)
    }
}

/// What a simple command turned out to be after expansion.
pub enum Prepared {
    Status(i32),
    InShell {
        argv: Vec<String>,
        assigns: Vec<(String, String)>,
        io: Io,
    },
    External {
        argv: Vec<String>,
        env: Vec<(String, String)>,
        io: Io,
    },
}

/// `p` (absolute) with `.`, `..` and repeated slashes resolved.
fn normalize_path(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in p.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            x => parts.push(x),
        }
    }
    format!("/{}", parts.join("/"))
}

fn is_bin_path(p: &str) -> bool {
    p.rsplit_once('/')
        .is_some_and(|(dir, _)| guest_support::BIN_DIRS.contains(&dir))
}
