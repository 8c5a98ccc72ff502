//! Where fresh sandboxes live: scratch workspaces and private `/tmp` directories. By default
//! in memory (a directory of this process on the `/dev/shm` tmpfs), so that a new sandbox
//! costs a few system calls and no disk I/O; bounded by the per-sandbox disk quota and by a
//! node-wide one taken from the space free there.

use crate::sync::lock;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use crate::limits::Quota;

/// Share of the free space (and inodes) of the scratch file system that all sandboxes of a
/// runtime may use together.
pub const NODE_DISK_SHARE: f64 = 0.8;

const SHM: &str = "/dev/shm";
const TMPFS_MAGIC: i64 = 0x0102_1994;
/// Scratch roots are named `wasbox-<uid>.<pid>.<random>`.
const PREFIX: &str = "wasbox-";

fn statfs(path: &Path) -> Option<libc::statfs> {
    use std::os::unix::ffi::OsStrExt as _;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: a zeroed statfs is a valid value for statfs(2) to fill in.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `s` is writable.
    (unsafe { libc::statfs(c.as_ptr(), &mut s) } == 0).then_some(s)
}

/// Whether `path` lives in memory (a tmpfs or ramfs): its file operations never wait for a
/// device, so they may run on the calling thread.
pub(crate) fn in_memory(path: &Path) -> bool {
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    // `f_type`'s integer type differs between libc targets.
    #[allow(clippy::unnecessary_cast)]
    statfs(path).is_some_and(|s| matches!(s.f_type as i64, TMPFS_MAGIC | RAMFS_MAGIC))
}

/// Where a runtime makes fresh sandboxes, as looked at once when the runtime is built: the
/// canonical path (so that a directory made in it needs no `realpath` of its own) and
/// whether it is in memory (so that a sandbox needs no `statfs` of its own).
pub(crate) struct ScratchRoot {
    pub(crate) path: PathBuf,
    pub(crate) in_memory: bool,
    /// Empty workspaces of ended sandboxes, for new ones (where emptiness can be seen).
    pub(crate) spares: Option<std::sync::Arc<Spares>>,
}

impl ScratchRoot {
    /// `spares`: whether emptied workspaces are kept for new sandboxes (see [`Spares`]).
    pub(crate) fn new(path: &Path, spares: bool) -> Result<ScratchRoot> {
        let path = path
            .canonicalize()
            .with_context(|| format!("opening the scratch directory {}", path.display()))?;
        let in_memory = in_memory(&path);
        let spares = (spares && in_memory)
            .then(|| Spares::new(&path))
            .flatten()
            .map(std::sync::Arc::new);
        Ok(ScratchRoot {
            path,
            in_memory,
            spares,
        })
    }

    /// Removes the spare workspaces (the runtime is going): sandboxes that end later remove
    /// their own.
    pub(crate) fn close(&self) {
        if let Some(s) = &self.spares {
            s.close();
        }
    }
}

/// Spare workspaces kept at most.
const SPARES: usize = 64;

/// A spare workspace: the directory, and its open handle.
type Spare = (tempfile::TempDir, wasmtime_wasi::filesystem::Dir);

/// Empty workspaces of ended sandboxes, kept open for new sandboxes: taking one costs a
/// `futimens`, where a new one costs a `mkdir` and an `open`, and an `rmdir` at its end (a
/// tenth of a short job's cost together). Only on a file system whose directory size counts
/// its entries (tmpfs), so that one `fstat` of the open directory tells that it is empty:
/// a workspace that is not goes as before. A spare is never handed out with anything of
/// the sandbox before it: no entry (it is empty), no descriptor into it (nothing else holds
/// its handle), and its times are set anew; its mode is the one it was made with (a guest
/// cannot change the mode of its mount point).
pub(crate) struct Spares {
    /// `None` once the runtime is gone (its sandboxes then remove their own).
    kept: std::sync::Mutex<Option<Vec<Spare>>>,
    /// The size of an empty directory here.
    empty_size: u64,
}

impl Spares {
    /// `None` when the size of a directory in `root` does not tell whether it is empty.
    fn new(root: &Path) -> Option<Spares> {
        let probe = tempfile::Builder::new()
            .prefix("wasbox-probe-")
            .tempdir_in(root)
            .ok()?;
        let empty = std::fs::metadata(probe.path()).ok()?.len();
        std::fs::File::create(probe.path().join("x")).ok()?;
        let one = std::fs::metadata(probe.path()).ok()?.len();
        (one != empty).then(|| Spares {
            kept: std::sync::Mutex::new(Some(Vec::new())),
            empty_size: empty,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Vec<Spare>>> {
        lock(&self.kept)
    }

    /// A spare workspace, its times set to now.
    pub(crate) fn take(&self) -> Option<Spare> {
        use std::os::fd::AsRawFd as _;
        let (dir, handle) = self.lock().as_mut()?.pop()?;
        // SAFETY: null `times` set both times of the open directory to now.
        let set = unsafe { libc::futimens(handle.dir.as_raw_fd(), std::ptr::null()) };
        (set == 0).then_some((dir, handle))
    }

    /// Keeps the workspace `dir`, open as `handle` (which its sandbox, going, no longer
    /// uses), when it is empty and there is room; else gives it back.
    pub(crate) fn give(
        &self,
        dir: tempfile::TempDir,
        handle: wasmtime_wasi::filesystem::Dir,
    ) -> Option<tempfile::TempDir> {
        use std::os::unix::fs::MetadataExt as _;
        let empty = handle
            .dir
            .metadata()
            .is_ok_and(|m| m.is_dir() && m.nlink() == 2 && m.len() == self.empty_size);
        if !empty {
            return Some(dir);
        }
        match self.lock().as_mut() {
            Some(kept) if kept.len() < SPARES => {
                kept.push((dir, handle));
                None
            }
            _ => Some(dir),
        }
    }

    /// Removes the spares, and keeps no more.
    pub(crate) fn close(&self) {
        let kept = self.lock().take();
        drop(kept);
    }
}

/// The scratch root of a new runtime: a fresh directory of this process in
/// `$WASBOX_SCRATCH_DIR`, else on `/dev/shm` (when it is a tmpfs), else in the system's
/// temporary directory. Roots left there by runtimes killed before they could clean up are
/// removed first. Whether the directory was made for this runtime comes with it.
pub(crate) fn default_root() -> Result<(PathBuf, bool)> {
    let configured = std::env::var_os("WASBOX_SCRATCH_DIR").map(PathBuf::from);
    let base = match &configured {
        Some(dir) => {
            private_dir(dir)?;
            dir.clone()
        }
        None => {
            let shm = Path::new(SHM);
            // `f_type`'s integer type differs between libc targets.
            #[allow(clippy::unnecessary_cast)]
            let is_tmpfs = statfs(shm).is_some_and(|s| s.f_type as i64 == TMPFS_MAGIC);
            if is_tmpfs {
                shm.to_path_buf()
            } else {
                std::env::temp_dir()
            }
        }
    };
    sweep(&base);
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    // Made exclusively, with a random tail and mode 0700: /dev/shm and /tmp are shared by
    // every user of the machine, so a name another user could guess and plant is not used.
    let made = tempfile::Builder::new()
        .prefix(&format!("{PREFIX}{uid}.{}.", std::process::id()))
        .rand_bytes(8)
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir_in(&base);
    match made {
        Ok(dir) => Ok((dir.keep(), true)),
        Err(e) if configured.is_some() => {
            Err(e).with_context(|| format!("creating a scratch directory in {}", base.display()))
        }
        Err(_) => Ok((std::env::temp_dir(), false)),
    }
}

/// Makes `dir` (mode 0700) if it is missing.
fn private_dir(dir: &Path) -> Result<()> {
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(dir)
        .with_context(|| format!("creating the scratch directory {}", dir.display()))
}

/// Removes the scratch roots of this user's runtimes whose process is gone (killed before
/// it could clean up), so that memory is not held by a crashed server.
fn sweep(base: &Path) {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
            continue;
        };
        let mut parts = rest.split('.');
        let owner = parts.next().and_then(|p| p.parse::<u32>().ok());
        let pid = parts.next().and_then(|p| p.parse::<i32>().ok());
        let (Some(owner), Some(pid)) = (owner, pid) else {
            continue;
        };
        if owner != uid || pid <= 0 || alive(pid) {
            continue;
        }
        let path = e.path();
        // Only a real directory of ours, never a link planted in a shared directory.
        let ours = std::fs::symlink_metadata(&path).is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt as _;
            m.is_dir() && m.uid() == uid
        });
        if ours {
            remove_all(&path);
        }
    }
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Removes a tree, first giving back the owner's permissions a guest may have taken away
/// (`chmod 0` on a directory would otherwise stop the removal).
pub(crate) fn remove_all(path: &Path) {
    // Most trees are empty directories (a job that wrote nothing): one `rmdir`.
    if std::fs::remove_dir(path).is_ok() || std::fs::remove_dir_all(path).is_ok() {
        return;
    }
    restore_permissions(path);
    let _ = std::fs::remove_dir_all(path);
}

fn restore_permissions(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700));
    if let Ok(entries) = std::fs::read_dir(path) {
        for e in entries.flatten() {
            restore_permissions(&e.path());
        }
    }
}

/// The node-wide disk quota of sandboxes made in `root`: [`NODE_DISK_SHARE`] of the space
/// and inodes free there now.
pub(crate) fn node_quota(root: &Path) -> Quota {
    match statfs(root) {
        Some(s) => {
            let bytes = (s.f_bavail as f64 * s.f_bsize as f64 * NODE_DISK_SHARE) as u64;
            // Some file systems (btrfs) report no inode count: no inode limit from them.
            let inodes = if s.f_files == 0 {
                u64::MAX
            } else {
                (s.f_ffree as f64 * NODE_DISK_SHARE) as u64
            };
            Quota::new(bytes, inodes)
        }
        None => Quota::new(u64::MAX, u64::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_a_guest_locked_is_still_removed() {
        use std::os::unix::fs::PermissionsExt as _;
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("ws");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/f"), b"x").unwrap();
        std::fs::set_permissions(root.join("a/b"), std::fs::Permissions::from_mode(0o000)).unwrap();
        std::fs::set_permissions(root.join("a"), std::fs::Permissions::from_mode(0o000)).unwrap();
        remove_all(&root);
        assert!(!root.exists());
    }

    #[test]
    fn the_node_quota_is_a_share_of_free_space() {
        let t = tempfile::tempdir().unwrap();
        let q = node_quota(t.path());
        assert!(q.limits().0 > 0);
    }
}
