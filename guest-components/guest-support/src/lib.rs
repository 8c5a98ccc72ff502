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

pub mod cli;
pub mod http;
pub mod process;
pub mod textdiff;

/// Call first in `main`: moves to the working directory the host gave
/// (`wasi:cli/environment.initial-cwd`, else `PWD`); WASI programs otherwise start in `/`.
pub fn start() {
    let cwd = wasip2::cli::environment::initial_cwd().or_else(|| std::env::var("PWD").ok());
    if let Some(cwd) = cwd
        && !adopt_cwd(&cwd)
    {
        let _ = std::env::set_current_dir(&cwd);
    }
}

/// Takes `cwd` as the working directory without asking the host whether it is one, when it
/// is an absolute path in normal form (no `.`, `..` or empty parts). The host starts every
/// process in a directory it checked (the sandbox's mount, a directory a request named and
/// the host found, or the parent's own working directory), so `chdir`'s check, a `stat` and
/// a `metadata-hash` call through the host, is spent only on other forms.
///
/// wasi-libc keeps the working directory in `__wasilibc_cwd` (a path string its `chdir`
/// replaces and frees only when it allocated it itself); this string is never freed.
fn adopt_cwd(cwd: &str) -> bool {
    let normal = cwd.strip_prefix('/').is_some_and(|rest| {
        !rest.is_empty() && rest.split('/').all(|p| !matches!(p, "" | "." | ".."))
    });
    if !normal {
        return cwd == "/";
    }
    let Ok(c) = std::ffi::CString::new(cwd) else {
        return false;
    };
    unsafe extern "C" {
        static mut __wasilibc_cwd: *mut std::ffi::c_char;
    }
    // SAFETY: a guest is single-threaded and nothing else reads or writes the variable
    // during start-up; the string lives for the rest of the program.
    unsafe {
        __wasilibc_cwd = c.into_raw();
    }
    true
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

/// The working directory, an absolute sandbox path (`/` if it cannot be read).
pub fn cwd() -> String {
    std::env::current_dir()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "/".into())
}

/// `path` made absolute against the working directory (the host resolves absolute paths).
pub fn absolute(path: &str) -> String {
    if path.starts_with('/') {
        return path.to_string();
    }
    format!("{}/{path}", cwd().trim_end_matches('/'))
}

/// Starts a program of the sandbox in this process's working directory with `env` as its
/// whole environment. Stdout is flushed first, so that output keeps its order.
pub fn spawn(
    argv: Vec<String>,
    env: Vec<(String, String)>,
    stdin: process::Stdio,
    stdout: process::Stdio,
    stderr: process::Stdio,
) -> Result<process::Pid, process::Error> {
    let _ = std::io::stdout().flush();
    let argv = through_shell(argv)?;
    process::spawn(&process::Command {
        argv,
        env,
        cwd: cwd(),
        stdin,
        stdout,
        stderr,
    })
}

/// The argv that runs `argv`: a script of the sandbox (a path outside the image's program
/// directories, to a file that is there) goes through the shell, which runs it by its `#!`
/// line as `execve` would (`timeout 5 ./x.sh`, `env A=1 ./run.sh`, `xargs ./each.sh`).
/// A script without an execute bit is refused as `execve` refuses it.
fn through_shell(argv: Vec<String>) -> Result<Vec<String>, process::Error> {
    const IMAGE_DIRS: &[&str] = &[
        "/bin/",
        "/usr/bin/",
        "/usr/local/bin/",
        "/sbin/",
        "/usr/sbin/",
    ];
    let Some(first) = argv.first() else {
        return Ok(argv);
    };
    if !first.contains('/')
        || IMAGE_DIRS.iter().any(|d| first.starts_with(d))
        || !std::path::Path::new(&absolute(first)).is_file()
    {
        return Ok(argv);
    }
    if file_mode(first).is_some_and(|m| m & 0o111 == 0) {
        return Err(process::Error::Io("Permission denied".into()));
    }
    let mut v = vec![
        "sh".to_string(),
        "-c".to_string(),
        "\"$0\" \"$@\"".to_string(),
    ];
    v.extend(argv);
    Ok(v)
}

/// Starts `sh -c CMD` with this process's environment (see [`spawn`]).
pub fn spawn_sh(
    cmd: &str,
    stdin: process::Stdio,
    stdout: process::Stdio,
    stderr: process::Stdio,
) -> Result<process::Pid, process::Error> {
    spawn(
        vec!["sh".into(), "-c".into(), cmd.into()],
        std::env::vars().collect(),
        stdin,
        stdout,
        stderr,
    )
}

/// Reads a pipe's read end to its end, then closes it.
pub fn read_to_end(handle: process::Handle) -> Vec<u8> {
    let mut out = Vec::new();
    while let Ok(chunk) = process::read(handle, 65536) {
        if chunk.is_empty() {
            break;
        }
        out.extend_from_slice(&chunk);
    }
    process::close(handle);
    out
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

/// The directories where the image's programs appear (`/usr/bin/ls` is `ls`).
pub const BIN_DIRS: [&str; 5] = ["/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"];

/// Where a command name without a slash is found on `path` (a `PATH` value), relative to
/// `cwd`, in `PATH` order like a POSIX shell: a program of the image in one of the
/// [`BIN_DIRS`] (answered as `/usr/bin/NAME`, where the image's programs live), or an
/// executable regular file of the sandbox in any other directory (an empty entry is the
/// working directory).
pub fn path_lookup(name: &str, path: &str, cwd: &str) -> Option<String> {
    if name.is_empty() || name.contains('/') {
        return None;
    }
    let mut in_image = None;
    for dir in path.split(':') {
        let dir = dir.trim_end_matches('/');
        if BIN_DIRS.contains(&dir) {
            if *in_image.get_or_insert_with(|| process::has_program(name)) {
                return Some(format!("/usr/bin/{name}"));
            }
            continue;
        }
        let full = match dir {
            "" | "." => format!("{}/{name}", cwd.trim_end_matches('/')),
            d if d.starts_with('/') => format!("{d}/{name}"),
            d => format!("{}/{d}/{name}", cwd.trim_end_matches('/')),
        };
        let is_file = std::fs::metadata(&full).is_ok_and(|m| m.is_file());
        if is_file && process::file_mode(&full).is_none_or(|m| m & 0o111 != 0) {
            return Some(full);
        }
        // A symlink to a program of the image (a venv's `bin/python`) runs it.
        if links_to_program(&full) {
            return Some(full);
        }
    }
    None
}

/// Whether `path` is a symlink (relative, as WASI keeps them) to a program of the image.
fn links_to_program(path: &str) -> bool {
    let Ok(target) = std::fs::read_link(path) else {
        return false;
    };
    let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
    let mut parts: Vec<&str> = Vec::new();
    let target = target.to_string_lossy();
    let joined = if target.starts_with('/') {
        target.to_string()
    } else {
        format!("{dir}/{target}")
    };
    for p in joined.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    let Some((name, dirs)) = parts.split_last() else {
        return false;
    };
    let dir = format!("/{}", dirs.join("/"));
    BIN_DIRS.contains(&dir.as_str()) && process::has_program(name)
}

/// The UTC calendar time of seconds since the epoch: (year, month 1-12, day 1-31, hour,
/// minute, second, weekday 0 = Sunday).
pub fn civil_time(t: i64) -> (i64, u32, u32, u32, u32, u32, u32) {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400) as u32;
    // Days to a civil date (the proleptic Gregorian calendar, eras of 400 years).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + (month <= 2) as i64;
    let weekday = (days + 4).rem_euclid(7) as u32;
    (
        year,
        month,
        day,
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        weekday,
    )
}

/// `path` made absolute against the working directory with `.` and `..` resolved by name
/// (symbolic links are not followed).
pub fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    let full = absolute(path);
    for c in full.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    format!("/{}", parts.join("/"))
}

/// The relative path from directory `from` to `to` (both normalized first), `.` if equal.
pub fn relative_path(from: &str, to: &str) -> String {
    let (from, to) = (normalize(from), normalize(to));
    let a: Vec<&str> = from.split('/').filter(|c| !c.is_empty()).collect();
    let b: Vec<&str> = to.split('/').filter(|c| !c.is_empty()).collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<&str> = vec![".."; a.len() - common];
    parts.extend(&b[common..]);
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

/// The `ls -l` type letter of a special file (`c` character device, `b` block device, `p`
/// FIFO, `s` socket), or `None` for a regular file, directory, symlink or a missing path.
/// Rust's `FileTypeExt` for WASI is not stable; the C library's `stat` has the type.
pub fn special_kind(path: &str, follow: bool) -> Option<char> {
    let c = std::ffi::CString::new(path).ok()?;
    // SAFETY: a zeroed `stat` is a valid value for stat(2) to fill in.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and `st` is writable.
    let r = unsafe {
        if follow {
            libc::stat(c.as_ptr(), &mut st)
        } else {
            libc::lstat(c.as_ptr(), &mut st)
        }
    };
    if r != 0 {
        return None;
    }
    match st.st_mode & libc::S_IFMT {
        libc::S_IFCHR => Some('c'),
        libc::S_IFBLK => Some('b'),
        libc::S_IFIFO => Some('p'),
        libc::S_IFSOCK => Some('s'),
        _ => None,
    }
}
