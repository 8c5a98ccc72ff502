//! What every wasbox guest program needs: start-up in the right directory, exit codes that
//! survive to the host, and (for programs that start others) the `wasbox:sandbox/process`
//! import.

use std::io::Write;

#[allow(clippy::all, missing_docs)]
mod bindings {
    wit_bindgen::generate!({
        path: "../../wit/sandbox",
        world: "process-user",
    });
}

/// The `wasbox:sandbox/process` import.
pub use bindings::wasbox::sandbox::process;

/// Call first in `main`: moves to the working directory the host gave
/// (`wasi:cli/environment.initial-cwd`, else `PWD`); WASI programs otherwise start in `/`.
pub fn start() {
    let cwd = wasip2::cli::environment::initial_cwd().or_else(|| std::env::var("PWD").ok());
    if let Some(cwd) = cwd {
        let _ = std::env::set_current_dir(&cwd);
    }
}

/// Ends the program with `code`, which reaches the host intact (plain `std::process::exit`
/// turns every non-zero code into 1 on wasm32-wasip2).
pub fn exit(code: i32) -> ! {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    if code == 0 {
        std::process::exit(0);
    }
    wasip2::cli::exit::exit_with_code(code.clamp(1, 255) as u8);
    std::process::exit(1)
}

/// `path` made absolute against the working directory (the host resolves absolute paths).
pub fn absolute(path: &str) -> String {
    if path.starts_with('/') {
        return path.to_string();
    }
    let cwd = std::env::current_dir()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "/".into());
    format!("{}/{path}", cwd.trim_end_matches('/'))
}

/// The permission bits of a file (WASI has none; the host keeps them), `None` if absent.
pub fn file_mode(path: &str) -> Option<u32> {
    process::file_mode(&absolute(path))
}

/// Sets the permission bits of a file; the error carries the shell-style message.
pub fn set_file_mode(path: &str, mode: u32) -> Result<(), String> {
    process::set_file_mode(&absolute(path), mode).map_err(|e| match e {
        process::Error::Io(m) | process::Error::NotFound(m) | process::Error::Limit(m) => m,
        process::Error::BadHandle => format!("{path}: bad handle"),
    })
}
