//! `bouvet-agent`: the default sandbox agent of `wasbox bouvet serve` (world
//! `wasbox:bouvet/agent`), answering what bouvet's guest agent answers, field for field:
//! commands run as `sh -c` children through the process import (their stdout and stderr
//! drained together, each kept up to 1 MiB), files are the sandbox's through WASI. Error
//! messages carry the text a Linux host would (`No such file or directory (os error 2)`),
//! since clients show them to people.
//!
//! It holds no state between calls: every call stands alone, as in the reference.

use std::io::ErrorKind;
use std::path::Path;

wit_bindgen::generate!({
    path: "../../../wit/bouvet",
    world: "agent",
    // `wasbox:sandbox/process` is a package of its own: generate its bindings here too.
    generate_all,
});

use wasbox::sandbox::process::{self, Command, PipeReader, Stdio};

/// JSON-RPC codes the reference agent uses.
const INTERNAL_ERROR: i32 = -32603;
/// Bytes of stdout or stderr kept; the rest is read and dropped.
const MAX_OUTPUT: usize = 1 << 20;
/// Largest file `read_file` returns.
const MAX_READ: u64 = 10 << 20;
const TRUNCATED: &str = "\n... [output truncated]";

struct BouvetAgent;

/// Moves to the working directory the host gave (WASI programs start in `/`).
fn enter_cwd() {
    if let Ok(pwd) = std::env::var("PWD") {
        let _ = std::env::set_current_dir(pwd);
    }
}

fn internal(message: String) -> RpcError {
    RpcError {
        code: INTERNAL_ERROR,
        message,
    }
}

/// An I/O error as a Linux host prints it (`strerror` and errno), whatever WASI's numbers.
fn os_error(e: &std::io::Error) -> String {
    let (text, errno) = match e.kind() {
        ErrorKind::NotFound => ("No such file or directory", 2),
        ErrorKind::PermissionDenied => ("Permission denied", 13),
        ErrorKind::AlreadyExists => ("File exists", 17),
        ErrorKind::NotADirectory => ("Not a directory", 20),
        ErrorKind::IsADirectory => ("Is a directory", 21),
        ErrorKind::InvalidInput => ("Invalid argument", 22),
        ErrorKind::FileTooLarge => ("File too large", 27),
        ErrorKind::StorageFull => ("No space left on device", 28),
        ErrorKind::ReadOnlyFilesystem => ("Read-only file system", 30),
        ErrorKind::DirectoryNotEmpty => ("Directory not empty", 39),
        ErrorKind::InvalidData => return "stream did not contain valid UTF-8".to_string(),
        _ => return e.to_string(),
    };
    format!("{text} (os error {errno})")
}

/// Lossy UTF-8 of what was kept, cut at 1 MiB on a character boundary with the marker when
/// it is longer (or more was written than kept).
fn text(bytes: Vec<u8>, dropped: bool) -> String {
    let mut s = String::from_utf8_lossy(&bytes).into_owned();
    if dropped || s.len() > MAX_OUTPUT {
        let mut end = s.len().min(MAX_OUTPUT);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str(TRUNCATED);
    }
    s
}

/// Runs `argv` with an empty stdin, reading stdout and stderr as they come.
fn run(argv: &[&str]) -> ExecResult {
    let (out_r, out_w) = process::pipe();
    let (err_r, err_w) = process::pipe();
    let cwd = std::env::current_dir()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "/".into());
    let child = process::spawn(Command {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        env: std::env::vars().collect(),
        cwd,
        stdin: Stdio::Null,
        stdout: Stdio::PipeWriter(out_w),
        stderr: Stdio::PipeWriter(err_w),
    });
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            let message = match e {
                process::Error::NotFound(m) | process::Error::Limit(m) | process::Error::Io(m) => m,
            };
            return ExecResult {
                exit_code: -1,
                stdout: String::new(),
                stderr: format!("failed to execute {}: {message}", argv[0]),
            };
        }
    };
    let readers = [out_r, err_r];
    let mut kept: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
    let mut dropped = [false, false];
    let mut open = vec![0usize, 1];
    while !open.is_empty() {
        let pending: Vec<&PipeReader> = open.iter().map(|&i| &readers[i]).collect();
        let which = open[process::ready(&pending) as usize];
        match readers[which].read(64 << 10) {
            Ok(chunk) if !chunk.is_empty() => {
                // A few bytes past the limit, so that the cut finds whole characters.
                let room = (MAX_OUTPUT + 4).saturating_sub(kept[which].len());
                if chunk.len() > room {
                    dropped[which] = true;
                }
                kept[which].extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            _ => open.retain(|&i| i != which),
        }
    }
    let status = child.wait();
    // A command that a signal ended has no exit status: bouvet's agent answers -1 then
    // (Rust's `ExitStatus::code()` is `None`), not the shell's 128 + signal.
    let exit_code = if child.signal().is_some() { -1 } else { status };
    let [out, err] = kept;
    ExecResult {
        exit_code,
        stdout: text(out, dropped[0]),
        stderr: text(err, dropped[1]),
    }
}

impl Guest for BouvetAgent {
    fn ping() -> Result<bool, RpcError> {
        Ok(true)
    }

    fn exec(cmd: String) -> Result<ExecResult, RpcError> {
        enter_cwd();
        Ok(run(&["sh", "-c", &cmd]))
    }

    fn exec_code(lang: String, code: String) -> Result<ExecResult, RpcError> {
        enter_cwd();
        let argv: [&str; 3] = match lang.to_lowercase().as_str() {
            "python" | "python3" => ["python3", "-c", &code],
            "node" | "javascript" | "js" => ["node", "-e", &code],
            "bash" => ["bash", "-c", &code],
            "sh" => ["sh", "-c", &code],
            _ => {
                return Ok(ExecResult {
                    exit_code: -1,
                    stdout: String::new(),
                    stderr: format!("unsupported language: {lang}"),
                });
            }
        };
        Ok(run(&argv))
    }

    fn read_file(path: String) -> Result<String, RpcError> {
        enter_cwd();
        let meta = std::fs::metadata(&path)
            .map_err(|e| internal(format!("failed to stat '{path}': {}", os_error(&e))))?;
        if meta.len() > MAX_READ {
            return Err(internal(format!(
                "file '{path}' is too large ({} bytes, max {MAX_READ} bytes)",
                meta.len()
            )));
        }
        std::fs::read_to_string(&path)
            .map_err(|e| internal(format!("failed to read '{path}': {}", os_error(&e))))
    }

    fn write_file(path: String, content: String) -> Result<bool, RpcError> {
        enter_cwd();
        if let Some(parent) = Path::new(&path).parent()
            && !parent.as_os_str().is_empty()
            && !parent.exists()
        {
            std::fs::create_dir_all(parent).map_err(|e| {
                internal(format!(
                    "failed to create directories for '{path}': {}",
                    os_error(&e)
                ))
            })?;
        }
        std::fs::write(&path, content)
            .map(|()| true)
            .map_err(|e| internal(format!("failed to write '{path}': {}", os_error(&e))))
    }

    fn list_dir(path: String) -> Result<Vec<FileEntry>, RpcError> {
        enter_cwd();
        let entries = std::fs::read_dir(&path).map_err(|e| {
            internal(format!(
                "failed to read directory '{path}': {}",
                os_error(&e)
            ))
        })?;
        let mut out = Vec::new();
        for entry in entries {
            let entry =
                entry.map_err(|e| internal(format!("failed to read entry: {}", os_error(&e))))?;
            // Like `lstat`: a symlink is neither a directory nor a regular file.
            let meta = entry
                .metadata()
                .map_err(|e| internal(format!("failed to get metadata: {}", os_error(&e))))?;
            out.push(FileEntry {
                name: entry.file_name().to_string_lossy().into_owned(),
                is_dir: meta.is_dir(),
                size: if meta.is_file() { meta.len() } else { 0 },
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

export!(BouvetAgent);
