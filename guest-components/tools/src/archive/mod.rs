//! `gzip`/`gunzip`/`zcat`, `bzip2`/`bunzip2`/`bzcat` and `xz`/`unxz`/`xzcat`/`lzma`
//! (one tool over the formats of `codec.rs`), `tar` (the tar crate, compressed by `-z`,
//! `-j`, `-J`, `--lzma` or `-a`, detected by its magic when reading) and `zip`/`unzip` (the zip crate, stored and deflated entries), with GNU's and
//! Info-ZIP's options, messages and exit codes where agents look at them.
//!
//! Archives are untrusted input: members with `..` in their path are skipped, a leading
//! `/` is removed, and permission bits are kept to `0o777` (never setuid, setgid or
//! sticky).

mod compress;
mod tarball;
mod zipfile;

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use guest_support::cli::reason;

pub use compress::{GzipMode, compressor};
pub use tarball::tar;
pub use zipfile::{unzip, zip};

fn mode_of(path: &Path) -> Option<u32> {
    guest_support::file_mode(&path.to_string_lossy())
}

/// Sets permission bits from an archive, never special bits.
fn set_mode(path: &Path, mode: u32) {
    let _ = guest_support::set_file_mode(&path.to_string_lossy(), mode & 0o777);
}

fn mtime_of(meta: &fs::Metadata) -> u64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs())
}

fn set_mtime(path: &Path, secs: u64) {
    if let Ok(f) = fs::File::options().write(true).open(path) {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
        let _ = f.set_times(fs::FileTimes::new().set_modified(t).set_accessed(t));
    }
}

/// A relative path with no `..`, or `None`; leading `/` and `./` are dropped.
fn safe_member_path(name: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in Path::new(name).components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            Component::ParentDir => return None,
        }
    }
    Some(out)
}

/// Makes a symbolic link with the target as the archive has it (the host keeps an absolute
/// one as written: see the runtime's `linktarget`).
pub(crate) fn symlink(target: &str, at: &Path) -> io::Result<()> {
    rustix::fs::symlink(target, at).map_err(io::Error::from)
}

/// Gives the output the input's mode and time, then removes the input unless kept.
fn finish_file(from: &str, to: &str, keep: bool, times: bool) {
    if let Some(m) = mode_of(Path::new(from)) {
        set_mode(Path::new(to), m);
    }
    if times && let Ok(m) = fs::metadata(from) {
        set_mtime(Path::new(to), mtime_of(&m));
    }
    if !keep {
        let _ = fs::remove_file(from);
    }
}

fn short(e: &io::Error) -> String {
    e.to_string()
        .split(" (os error")
        .next()
        .unwrap_or_default()
        .to_string()
}

fn broken(tool: &str, e: &io::Error) -> i32 {
    if e.kind() == io::ErrorKind::BrokenPipe {
        return 141;
    }
    eprintln!("{tool}: stdout: {}", reason(e));
    1
}

/// Every path under `dir` (itself first), directories before their contents, names sorted.
fn walk(dir: &Path, f: &mut dyn FnMut(&Path, bool)) {
    let is_dir = fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir());
    f(dir, is_dir);
    if !is_dir {
        return;
    }
    let mut names: Vec<PathBuf> = match fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok()).map(|e| e.path()).collect(),
        Err(_) => return,
    };
    names.sort();
    for n in names {
        walk(&n, f);
    }
}
