//! Copy-on-write workspaces: the trees of a snapshot and of the sandboxes forked or restored
//! from it share their files' data as hard links of the same inodes, and a sandbox that is
//! about to change a shared file first gets a private copy of it ("copy-up"). A fork of a
//! large workspace thus costs one directory entry per file and memory only for what the
//! fork writes.
//!
//! Which inodes are shared is recorded, not guessed from link counts: a guest's own
//! `ln a b` makes an ordinary hard link that keeps its meaning. A sandbox holds the sets of
//! every snapshot it took or came from; a set is never changed once made.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cap_std::fs::{Dir, MetadataExt as _, OpenOptions, OpenOptionsExt as _, PermissionsExt as _};

/// The files (device and inode) of one snapshot tree, with the number of names each has
/// in the tree (a guest's own hard links).
#[derive(Default, Debug)]
pub(crate) struct Inodes(HashMap<(u64, u64), u32>);

impl Inodes {
    fn names(&self, dev: u64, ino: u64) -> Option<u32> {
        self.0.get(&(dev, ino)).copied()
    }

    pub(crate) fn insert(&mut self, dev: u64, ino: u64) {
        *self.0.entry((dev, ino)).or_insert(0) += 1;
    }
}

/// The shared inodes a sandbox must copy before changing: see the module documentation.
#[derive(Default)]
pub(crate) struct Shared {
    any: AtomicBool,
    sets: Mutex<Vec<Arc<Inodes>>>,
}

impl Shared {
    pub(crate) fn add(&self, set: Arc<Inodes>) {
        let mut sets = self.sets.lock().unwrap_or_else(|e| e.into_inner());
        if !sets.iter().any(|s| Arc::ptr_eq(s, &set)) {
            sets.push(set);
        }
        self.any.store(true, Ordering::Release);
    }

    /// Whether the file `meta` describes is shared with another tree.
    pub(crate) fn holds(&self, meta: &cap_std::fs::Metadata) -> bool {
        meta.is_file() && self.holds_inode(meta.nlink(), meta.dev(), meta.ino())
    }

    /// [`Shared::holds`] for the metadata of an open file.
    pub(crate) fn holds_file(&self, meta: &std::fs::Metadata) -> bool {
        use std::os::unix::fs::MetadataExt as _;
        meta.is_file() && self.holds_inode(meta.nlink(), meta.dev(), meta.ino())
    }

    fn holds_inode(&self, nlink: u64, dev: u64, ino: u64) -> bool {
        // A file with one link left is nobody else's any more.
        if !self.any.load(Ordering::Acquire) || nlink <= 1 {
            return false;
        }
        self.names(dev, ino).is_some()
    }

    /// How many names a shared file has in the trees it is shared from.
    fn names(&self, dev: u64, ino: u64) -> Option<u32> {
        let sets = self.sets.lock().unwrap_or_else(|e| e.into_inner());
        sets.iter().find_map(|s| s.names(dev, ino))
    }

    /// Makes the file at `rel` under `dir` private before it is changed, following symlinks
    /// (`follow`) as the change will, inside `dir` only. Fails when a shared file would be
    /// reached some other way (a symlink leaving `dir`): changing it would change others.
    /// The file's other names in the workspace `root` (a guest's hard links) move to the
    /// private copy with it.
    pub(crate) fn unshare(
        &self,
        root: &Dir,
        dir: &Dir,
        rel: &Path,
        follow: bool,
    ) -> io::Result<()> {
        if !self.any.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut path = rel.to_path_buf();
        for _ in 0..MAX_LINKS {
            let Ok(meta) = dir.symlink_metadata(&path) else {
                return Ok(());
            };
            if meta.is_symlink() && follow {
                match link_target(dir, &path) {
                    Some(next) => {
                        path = next;
                        continue;
                    }
                    None => break,
                }
            }
            if self.holds(&meta) {
                copy_up(dir, &path, &meta)?;
                if self.names(meta.dev(), meta.ino()).unwrap_or(1) > 1 {
                    relink(root, dir, &path, (meta.dev(), meta.ino()), 0)?;
                }
            }
            return Ok(());
        }
        // A chain too long, or one leaving the directory: refused if it ends at a shared file.
        match dir.metadata(rel) {
            Ok(meta) if self.holds(&meta) => Err(io::Error::from_raw_os_error(libc::EACCES)),
            _ => Ok(()),
        }
    }
}

/// Symlinks followed when finding the file a change reaches (as the kernel's limit).
const MAX_LINKS: usize = 40;

/// Where the symlink `path` points, as a path under the same directory; `None` when it
/// leaves the directory (an absolute target, or too many `..`).
fn link_target(dir: &Dir, path: &Path) -> Option<PathBuf> {
    let target = read_link_at(dir, path).ok()?;
    if target.is_absolute() {
        return None;
    }
    let mut parts: Vec<std::ffi::OsString> = path
        .parent()
        .map(|p| p.iter().map(|c| c.to_os_string()).collect())
        .unwrap_or_default();
    for c in target.components() {
        match c {
            std::path::Component::Normal(n) => parts.push(n.to_os_string()),
            std::path::Component::ParentDir => {
                parts.pop()?;
            }
            _ => {}
        }
    }
    Some(parts.iter().collect())
}

static COPIES: AtomicU64 = AtomicU64::new(0);

/// Replaces the shared file at `rel` by a private copy with the same contents, mode and
/// times (written beside it, then renamed over it).
fn copy_up(dir: &Dir, rel: &Path, meta: &cap_std::fs::Metadata) -> io::Result<()> {
    let name = rel
        .file_name()
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EISDIR))?;
    let tmp_name = format!(
        ".{}.wasbox-cow.{}",
        name.to_string_lossy(),
        COPIES.fetch_add(1, Ordering::Relaxed)
    );
    let tmp = rel.with_file_name(tmp_name);
    let mut from = dir.open_with(rel, OpenOptions::new().read(true).custom_flags(NOFOLLOW))?;
    let mut to = dir.open_with(
        &tmp,
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(meta.permissions().mode() & 0o777),
    )?;
    let copied = io::copy(&mut from, &mut to)
        .and_then(|_| to.set_permissions(meta.permissions()))
        .and_then(|_| {
            let times = std::fs::FileTimes::new()
                .set_accessed(meta.accessed()?.into_std())
                .set_modified(meta.modified()?.into_std());
            to.into_std().set_times(times)
        })
        .and_then(|_| dir.rename(&tmp, dir, rel));
    if copied.is_err() {
        let _ = dir.remove_file(&tmp);
    }
    copied
}

/// Points every other name of the shared file `old` under `at` (the workspace) to the
/// private copy now at `copy` under `copy_dir`.
fn relink(at: &Dir, copy_dir: &Dir, copy: &Path, old: (u64, u64), depth: usize) -> io::Result<()> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    for entry in at.entries()? {
        let entry = entry?;
        let name = entry.file_name();
        let Ok(meta) = at.symlink_metadata(&name) else {
            continue;
        };
        if meta.is_dir() {
            relink(&at.open_dir(&name)?, copy_dir, copy, old, depth + 1)?;
        } else if meta.is_file() && (meta.dev(), meta.ino()) == old {
            let tmp = format!(
                ".{}.wasbox-cow.{}",
                name.to_string_lossy(),
                COPIES.fetch_add(1, Ordering::Relaxed)
            );
            copy_dir.hard_link(copy, at, &tmp)?;
            at.rename(&tmp, at, &name)?;
        }
    }
    Ok(())
}

const NOFOLLOW: i32 = libc::O_NOFOLLOW;

/// What [`list_tree`] found: the shared files, the totals of the tree, and the steps that
/// remake it.
#[derive(Default)]
pub(crate) struct Cloned {
    pub(crate) inodes: Inodes,
    pub(crate) files: u64,
    pub(crate) bytes: u64,
    /// Every entry but the root (files, directories, symlinks): the inodes a quota counts.
    pub(crate) entries: u64,
    pub(crate) listing: Listing,
}

/// A tree as the steps that remake it from the tree it was listed from (depth first; a
/// directory's mode and times are set when it is left, after its entries are made).
#[derive(Default)]
pub(crate) struct Listing(Vec<Step>);

enum Step {
    /// A hard link of the file of that name.
    File(CString),
    Symlink(CString, CString),
    Enter(CString),
    Leave {
        mode: u32,
        times: [libc::timespec; 2],
    },
}

// SAFETY: `timespec` is plain data.
unsafe impl Send for Step {}
unsafe impl Sync for Step {}

/// Directories deeper than this are not copied (a guest cannot make paths this deep
/// through WASI's path length anyway).
const MAX_DEPTH: usize = 256;

fn stat_at(dir: RawFd, name: &CStr) -> io::Result<libc::stat> {
    // SAFETY: a zeroed stat is a valid value for fstatat(2) to fill in.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `dir` is an open directory, `name` NUL-terminated, `st` writable.
    let r = unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    if r == 0 {
        Ok(st)
    } else {
        Err(io::Error::last_os_error())
    }
}

fn open_dir_at(dir: RawFd, name: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: `dir` is an open directory and `name` NUL-terminated.
    let fd = unsafe {
        libc::openat(
            dir,
            name.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Lists the tree `src` (see [`Listing`]). Other kinds of entry than directories, regular
/// files and symlinks (which no guest can make) are left out.
pub(crate) fn list_tree(src: &Dir) -> io::Result<Cloned> {
    let mut out = Cloned::default();
    let root = src.dir_metadata()?;
    list_into(src, &mut out, 0)?;
    out.listing.0.push(Step::Leave {
        mode: root.permissions().mode() & 0o1777,
        times: times_of_meta(&root),
    });
    Ok(out)
}

fn times_of_meta(meta: &cap_std::fs::Metadata) -> [libc::timespec; 2] {
    [
        libc::timespec {
            tv_sec: meta.atime() as _,
            tv_nsec: meta.atime_nsec() as _,
        },
        libc::timespec {
            tv_sec: meta.mtime() as _,
            tv_nsec: meta.mtime_nsec() as _,
        },
    ]
}

fn list_into(src: &Dir, out: &mut Cloned, depth: usize) -> io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(io::Error::other("the workspace is nested too deeply"));
    }
    let fd = src.as_raw_fd();
    for entry in src.entries()? {
        let name = cstr(&entry?.file_name())?;
        let st = stat_at(fd, &name)?;
        match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => {
                out.inodes.insert(st.st_dev, st.st_ino);
                out.files += 1;
                out.bytes += st.st_size as u64;
                out.entries += 1;
                out.listing.0.push(Step::File(name));
            }
            libc::S_IFDIR => {
                let sub = Dir::from_std_file(std::fs::File::from(open_dir_at(fd, &name)?));
                out.listing.0.push(Step::Enter(name));
                list_into(&sub, out, depth + 1)?;
                out.listing.0.push(Step::Leave {
                    mode: st.st_mode & 0o1777,
                    times: [
                        libc::timespec {
                            tv_sec: st.st_atime,
                            tv_nsec: st.st_atime_nsec,
                        },
                        libc::timespec {
                            tv_sec: st.st_mtime,
                            tv_nsec: st.st_mtime_nsec,
                        },
                    ],
                });
                out.entries += 1;
            }
            libc::S_IFLNK => {
                let target =
                    read_link_at(src, Path::new(std::ffi::OsStr::from_bytes(name.as_bytes())))?;
                out.listing
                    .0
                    .push(Step::Symlink(name, cstr(target.as_os_str())?));
                out.entries += 1;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Remakes the tree `listing` describes in `dst` (an empty directory): directories and
/// symlinks anew, regular files as hard links of the files of `src` (the tree listed).
pub(crate) fn replay(listing: &Listing, src: &Dir, dst: &Dir) -> io::Result<()> {
    let mut stack: Vec<(OwnedFd, OwnedFd)> = Vec::new();
    let top = |stack: &Vec<(OwnedFd, OwnedFd)>| match stack.last() {
        Some((s, d)) => (s.as_raw_fd(), d.as_raw_fd()),
        None => (src.as_raw_fd(), dst.as_raw_fd()),
    };
    for step in &listing.0 {
        let (s, d) = top(&stack);
        match step {
            Step::File(name) => {
                // SAFETY: both are open directories; `name` is NUL-terminated.
                check(unsafe { libc::linkat(s, name.as_ptr(), d, name.as_ptr(), 0) })?;
            }
            Step::Symlink(name, target) => {
                // SAFETY: `d` is an open directory; both strings are NUL-terminated.
                check(unsafe { libc::symlinkat(target.as_ptr(), d, name.as_ptr()) })?;
            }
            Step::Enter(name) => {
                // SAFETY: `d` is an open directory; `name` is NUL-terminated.
                check(unsafe { libc::mkdirat(d, name.as_ptr(), 0o700) })?;
                stack.push((open_dir_at(s, name)?, open_dir_at(d, name)?));
            }
            Step::Leave { mode, times } => {
                // The root's descriptor may be an `O_PATH` one, which cannot change it.
                let left = stack.pop();
                let root = match left {
                    Some(_) => None,
                    None => Some(open_dir_at(d, c".")?),
                };
                let d = root.as_ref().map_or(d, |r| r.as_raw_fd());
                // SAFETY: `d` is an open directory; `times` holds two timespecs.
                check(unsafe { libc::futimens(d, times.as_ptr()) })?;
                // SAFETY: as above.
                check(unsafe { libc::fchmod(d, *mode) })?;
                drop(left);
            }
        }
    }
    Ok(())
}

/// Makes `dst` (an empty directory) a copy of the tree `src`: directories and symlinks are
/// made anew (with their modes and times), regular files are hard links of the same inodes.
pub(crate) fn clone_tree(src: &Dir, dst: &Dir) -> io::Result<Cloned> {
    let out = list_tree(src)?;
    replay(&out.listing, src, dst)?;
    Ok(out)
}

fn cstr(name: &std::ffi::OsStr) -> io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt as _;
    std::ffi::CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// The target of the symlink `path` under `dir`, as stored (cap-std refuses to return an
/// absolute one).
pub(crate) fn read_link_at(dir: &Dir, path: &Path) -> io::Result<PathBuf> {
    use std::os::unix::ffi::OsStrExt as _;
    let c = cstr(path.as_os_str())?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: `dir` is an open directory, `c` NUL-terminated, `buf` writable for its length.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            c.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(&buf)))
}

/// A symlink `dst/name` with the given target (stored as it is: it is only data, and the
/// sandbox resolves it inside its own directories).
pub(crate) fn symlink_at(target: &Path, dst: &Dir, name: &std::ffi::OsStr) -> io::Result<()> {
    let t = cstr(target.as_os_str())?;
    let n = cstr(name)?;
    // SAFETY: `dst` is an open directory; both strings are NUL-terminated.
    let r = unsafe { libc::symlinkat(t.as_ptr(), dst.as_raw_fd(), n.as_ptr()) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cap_std::ambient_authority;

    fn dir(p: &Path) -> Dir {
        Dir::open_ambient_dir(p, ambient_authority()).unwrap()
    }

    #[test]
    fn a_clone_shares_files_until_one_side_writes() {
        let t = tempfile::tempdir().unwrap();
        let (a, b) = (t.path().join("a"), t.path().join("b"));
        std::fs::create_dir_all(a.join("sub")).unwrap();
        std::fs::create_dir(&b).unwrap();
        std::fs::write(a.join("sub/f"), b"one").unwrap();
        std::os::unix::fs::symlink("sub/f", a.join("link")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", a.join("abs")).unwrap();
        let cloned = clone_tree(&dir(&a), &dir(&b)).unwrap();
        assert_eq!((cloned.files, cloned.bytes, cloned.entries), (1, 3, 4));
        assert_eq!(std::fs::read(b.join("sub/f")).unwrap(), b"one");
        assert_eq!(
            std::fs::read_link(b.join("abs")).unwrap(),
            Path::new("/etc/passwd")
        );

        let shared = Shared::default();
        shared.add(Arc::new(cloned.inodes));
        // Writing through the symlink copies the file it reaches first.
        shared
            .unshare(&dir(&b), &dir(&b), Path::new("link"), true)
            .unwrap();
        std::fs::write(b.join("sub/f"), b"two").unwrap();
        assert_eq!(std::fs::read(a.join("sub/f")).unwrap(), b"one");
        assert_eq!(std::fs::read(b.join("sub/f")).unwrap(), b"two");
        // The other side's copy is the last link now: nothing to copy.
        let meta = dir(&a).symlink_metadata("sub/f").unwrap();
        assert!(!shared.holds(&meta));
        assert_eq!(std::fs::read_dir(b.join("sub")).unwrap().count(), 1);
    }

    #[test]
    fn a_guests_own_hard_link_is_not_broken() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("f"), b"x").unwrap();
        std::fs::hard_link(t.path().join("f"), t.path().join("g")).unwrap();
        let shared = Shared::default();
        shared.add(Arc::new(Inodes::default()));
        let d = dir(t.path());
        shared.unshare(&d, &d, Path::new("f"), true).unwrap();
        let f = std::fs::metadata(t.path().join("f")).unwrap();
        assert_eq!(std::os::unix::fs::MetadataExt::nlink(&f), 2);
    }
}
