//! Copy-on-write workspaces: the trees of a snapshot and of the sandboxes forked or restored
//! from it share their files' data as hard links of the same inodes, and a sandbox that is
//! about to change a shared file first gets a private copy of it ("copy-up"). A fork of a
//! large workspace thus costs one directory entry per file and memory only for what the
//! fork writes.
//!
//! Which inodes are shared is recorded, not guessed from link counts: a guest's own
//! `ln a b` makes an ordinary hard link that keeps its meaning. A sandbox holds the sets of
//! every snapshot it took or came from; a set is never changed once made.

use crate::sync::lock;
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
    /// Whether directories wait to be filled (see [`Shared::fill_lazily`]).
    lazy_any: AtomicBool,
    lazy: Mutex<Option<Lazy>>,
}

/// A tree a workspace is filled from lazily: a frozen snapshot tree and its listing.
pub(crate) trait Tree: Send + Sync {
    fn dir(&self) -> &Dir;
    fn listing(&self) -> &Listing;
}

/// The directories of a workspace made empty, to be filled from `tree` when first reached.
struct Lazy {
    tree: Arc<dyn Tree>,
    /// By device and inode (a rename keeps them), the directory of the listing each is.
    pending: HashMap<(u64, u64), usize>,
}

impl Shared {
    pub(crate) fn add(&self, set: Arc<Inodes>) {
        let mut sets = lock(&self.sets);
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
        let sets = lock(&self.sets);
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
                    // Its other names may be in directories not filled yet.
                    self.fill_all(root)?;
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

    /// Whether directories of the workspace wait to be filled.
    pub(crate) fn waits(&self) -> bool {
        self.lazy_any.load(Ordering::Acquire)
    }

    /// Fills the empty workspace `dst` from `tree` lazily: the top directory now, each
    /// directory below it made empty and filled when a path first reaches it
    /// ([`Shared::reach`]) or the host needs the whole tree ([`Shared::fill_all`]). A fork
    /// or restore thus costs the entries of the top directory, not of the whole tree; a
    /// guest never sees a directory before it is filled.
    pub(crate) fn fill_lazily(&self, tree: Arc<dyn Tree>, dst: &Dir) -> io::Result<()> {
        let src = tree.dir().as_raw_fd();
        let mut lazy = Lazy {
            tree,
            pending: HashMap::new(),
        };
        lazy.fill_from(0, src, dst.as_raw_fd())?;
        if !lazy.pending.is_empty() {
            *lock(&self.lazy) = Some(lazy);
            self.lazy_any.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// Fills every directory on the way of `path` under `base` (a directory of the
    /// workspace), the last one included, following symlinks inside as the kernel will
    /// (a final one only with `follow`). Cheap when nothing waits to be filled.
    pub(crate) fn reach(&self, base: &Dir, path: &Path, follow: bool) -> io::Result<()> {
        if !self.lazy_any.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut guard = lock(&self.lazy);
        let Some(lazy) = guard.as_mut() else {
            return Ok(());
        };
        let fd = base.as_raw_fd();
        let mut todo: Vec<Vec<u8>> = components(path.as_os_str().as_bytes());
        todo.reverse();
        let mut at: Vec<Vec<u8>> = Vec::new();
        let mut links = 0;
        while let Some(c) = todo.pop() {
            if c == b".." {
                if at.pop().is_none() {
                    break;
                }
                continue;
            }
            at.push(c);
            let rel = CString::new(at.join(&b'/'))
                .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            let Ok(st) = stat_at(fd, &rel) else {
                break;
            };
            match st.st_mode & libc::S_IFMT {
                libc::S_IFDIR => {
                    if let Some(index) = lazy.pending.remove(&(st.st_dev, st.st_ino)) {
                        let dir = open_dir_at(fd, &rel)?;
                        lazy.fill(index, &dir)?;
                    }
                }
                libc::S_IFLNK if follow || !todo.is_empty() => {
                    links += 1;
                    let path = Path::new(std::ffi::OsStr::from_bytes(rel.as_bytes()));
                    let target = read_link_at(base, path)?;
                    if links > MAX_LINKS || target.is_absolute() {
                        break;
                    }
                    at.pop();
                    let mut more = components(target.as_os_str().as_bytes());
                    more.reverse();
                    todo.extend(more);
                }
                _ => break,
            }
        }
        self.settle(&mut guard);
        Ok(())
    }

    /// Fills every directory of the workspace `root` still waiting (before the host
    /// walks, lists, watches or snapshots the tree).
    pub(crate) fn fill_all(&self, root: &Dir) -> io::Result<()> {
        if !self.lazy_any.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut guard = lock(&self.lazy);
        let Some(lazy) = guard.as_mut() else {
            return Ok(());
        };
        let top = open_dir_at(root.as_raw_fd(), c".")?;
        let done = lazy.fill_under(top, 0);
        self.settle(&mut guard);
        done
    }

    /// Forgets the tree once nothing waits any more.
    fn settle(&self, lazy: &mut Option<Lazy>) {
        if lazy.as_ref().is_some_and(|l| l.pending.is_empty()) {
            *lazy = None;
            self.lazy_any.store(false, Ordering::Release);
        }
    }
}

impl Lazy {
    /// Fills the waiting directory `dir` (listed as `index`).
    fn fill(&mut self, index: usize, dir: &OwnedFd) -> io::Result<()> {
        let path = &self.tree.listing().0[index].path;
        let filled = open_dir_at(self.tree.dir().as_raw_fd(), path)
            .and_then(|src| self.fill_from(index, src.as_raw_fd(), dir.as_raw_fd()));
        if filled.is_err() {
            // Tried again when next reached (what was made is kept: see `fill_dir`).
            let st = fstat(dir)?;
            self.pending.insert((st.st_dev, st.st_ino), index);
        }
        filled
    }

    /// Makes the entries of the listed directory `index` in `dst` from `src` (see
    /// `fill_dir`), each directory made empty and recorded as waiting.
    fn fill_from(&mut self, index: usize, src: RawFd, dst: RawFd) -> io::Result<()> {
        let pending = &mut self.pending;
        fill_dir(self.tree.listing(), index, src, dst, &mut |child, _, fd| {
            let st = fstat(&fd)?;
            pending.insert((st.st_dev, st.st_ino), child);
            Ok(())
        })
    }

    /// Fills the directory `dir` if it waits, then every directory under it.
    fn fill_under(&mut self, dir: OwnedFd, depth: usize) -> io::Result<()> {
        if self.pending.is_empty() || depth > MAX_DEPTH {
            return Ok(());
        }
        let st = fstat(&dir)?;
        if let Some(index) = self.pending.remove(&(st.st_dev, st.st_ino)) {
            self.fill(index, &dir)?;
        }
        let view = Dir::from_std_file(std::fs::File::from(dir));
        for entry in view.entries()? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                let name = cstr(&entry.file_name())?;
                self.fill_under(open_dir_at(view.as_raw_fd(), &name)?, depth + 1)?;
            }
        }
        Ok(())
    }
}

/// The parts of a path but empty ones and `.`.
fn components(path: &[u8]) -> Vec<Vec<u8>> {
    path.split(|b| *b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .map(<[u8]>::to_vec)
        .collect()
}

fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    // SAFETY: a zeroed stat is a valid value for fstat(2) to fill in.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open and `st` writable.
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st)
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

/// A name beside `name` for a file made and then renamed over it (never one a guest uses).
fn temp_name(name: &std::ffi::OsStr) -> String {
    format!(
        ".{}.wasbox-cow.{}",
        name.to_string_lossy(),
        COPIES.fetch_add(1, Ordering::Relaxed)
    )
}

/// Replaces the shared file at `rel` by a private copy with the same contents, mode and
/// times (written beside it, then renamed over it).
fn copy_up(dir: &Dir, rel: &Path, meta: &cap_std::fs::Metadata) -> io::Result<()> {
    let name = rel
        .file_name()
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EISDIR))?;
    let tmp = rel.with_file_name(temp_name(name));
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
            let tmp = temp_name(&name);
            copy_dir.hard_link(copy, at, &tmp)?;
            at.rename(&tmp, at, &name)?;
        }
    }
    Ok(())
}

const NOFOLLOW: i32 = libc::O_NOFOLLOW;

/// What [`list_tree`] found: the shared files, the totals of the tree, and how to remake it.
#[derive(Default)]
pub(crate) struct Cloned {
    pub(crate) inodes: Inodes,
    pub(crate) files: u64,
    pub(crate) bytes: u64,
    /// Every entry but the root (files, directories, symlinks): the inodes a quota counts.
    pub(crate) entries: u64,
    pub(crate) listing: Listing,
}

/// A tree as the directories that remake it from the tree it was listed from: the root
/// first, each with its entries, its mode and times.
#[derive(Default)]
pub(crate) struct Listing(Vec<DirNode>);

struct DirNode {
    /// Where it is in the tree listed (`.` for the root).
    path: CString,
    mode: u32,
    times: [libc::timespec; 2],
    entries: Vec<Entry>,
}

enum Entry {
    /// A hard link of the file of that name.
    File(CString),
    Symlink(CString, CString),
    /// A directory, by its index in the listing.
    Dir(CString, usize),
}

// SAFETY: `timespec` is plain data.
unsafe impl Send for DirNode {}
unsafe impl Sync for DirNode {}

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

fn times_of(st: &libc::stat) -> [libc::timespec; 2] {
    [
        libc::timespec {
            tv_sec: st.st_atime,
            tv_nsec: st.st_atime_nsec,
        },
        libc::timespec {
            tv_sec: st.st_mtime,
            tv_nsec: st.st_mtime_nsec,
        },
    ]
}

/// Lists the tree `src` (see [`Listing`]). Other kinds of entry than directories, regular
/// files and symlinks (which no guest can make) are left out.
pub(crate) fn list_tree(src: &Dir) -> io::Result<Cloned> {
    let mut out = Cloned::default();
    let fd = open_dir_at(src.as_raw_fd(), c".")?;
    list_into(fd, c".".to_owned(), &mut out, 0)?;
    Ok(out)
}

/// Lists the directory `fd` (at `path` in the tree) into a new node; returns its index.
fn list_into(fd: OwnedFd, path: CString, out: &mut Cloned, depth: usize) -> io::Result<usize> {
    if depth > MAX_DEPTH {
        return Err(io::Error::other("the workspace is nested too deeply"));
    }
    let me = stat_at(fd.as_raw_fd(), c".")?;
    let index = out.listing.0.len();
    out.listing.0.push(DirNode {
        path: path.clone(),
        mode: me.st_mode & 0o1777,
        times: times_of(&me),
        entries: Vec::new(),
    });
    let dir = Dir::from_std_file(std::fs::File::from(fd));
    let raw = dir.as_raw_fd();
    let mut entries = Vec::new();
    for entry in dir.entries()? {
        let name = cstr(&entry?.file_name())?;
        let st = stat_at(raw, &name)?;
        match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => {
                out.inodes.insert(st.st_dev, st.st_ino);
                out.files += 1;
                out.bytes += st.st_size as u64;
                out.entries += 1;
                entries.push(Entry::File(name));
            }
            libc::S_IFDIR => {
                let sub = open_dir_at(raw, &name)?;
                let sub_path = if depth == 0 {
                    name.clone()
                } else {
                    let mut p = path.as_bytes().to_vec();
                    p.push(b'/');
                    p.extend_from_slice(name.as_bytes());
                    CString::new(p).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?
                };
                let child = list_into(sub, sub_path, out, depth + 1)?;
                entries.push(Entry::Dir(name, child));
                out.entries += 1;
            }
            libc::S_IFLNK => {
                let target = read_link_at(
                    &dir,
                    Path::new(std::ffi::OsStr::from_bytes(name.as_bytes())),
                )?;
                entries.push(Entry::Symlink(name, cstr(target.as_os_str())?));
                out.entries += 1;
            }
            _ => {}
        }
    }
    out.listing.0[index].entries = entries;
    Ok(index)
}

/// Makes the entries of the listed directory `index` in `dst` (an empty directory) from
/// `src` (that directory of the tree listed): files as hard links, symlinks anew, and each
/// directory empty, handed to `made` with its index, name and descriptor to be filled. The
/// directory's mode and times are set last.
fn fill_dir(
    listing: &Listing,
    index: usize,
    src: RawFd,
    dst: RawFd,
    made: &mut dyn FnMut(usize, &CStr, OwnedFd) -> io::Result<()>,
) -> io::Result<()> {
    let node = &listing.0[index];
    for entry in &node.entries {
        match entry {
            Entry::File(name) => {
                // SAFETY: both are open directories; `name` is NUL-terminated.
                made_once(unsafe { libc::linkat(src, name.as_ptr(), dst, name.as_ptr(), 0) })?;
            }
            Entry::Symlink(name, target) => {
                // SAFETY: `dst` is an open directory; both strings are NUL-terminated.
                made_once(unsafe { libc::symlinkat(target.as_ptr(), dst, name.as_ptr()) })?;
            }
            Entry::Dir(name, child) => {
                // SAFETY: `dst` is an open directory; `name` is NUL-terminated.
                made_once(unsafe { libc::mkdirat(dst, name.as_ptr(), 0o700) })?;
                made(*child, name, open_dir_at(dst, name)?)?;
            }
        }
    }
    // `dst` may be an `O_PATH` descriptor, which cannot change the directory.
    let own = open_dir_at(dst, c".")?;
    // SAFETY: `own` is an open directory; `times` holds two timespecs.
    check(unsafe { libc::futimens(own.as_raw_fd(), node.times.as_ptr()) })?;
    // SAFETY: as above.
    check(unsafe { libc::fchmod(own.as_raw_fd(), node.mode) })
}

/// [`check`] for making an entry, where one already there was made by an earlier try that
/// failed part way (nobody else sees a directory being filled).
fn made_once(r: libc::c_int) -> io::Result<()> {
    match check(r) {
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(()),
        other => other,
    }
}

/// Remakes the tree `listing` describes in `dst` (an empty directory): directories and
/// symlinks anew, regular files as hard links of the files of `src` (the tree listed).
pub(crate) fn replay(listing: &Listing, src: &Dir, dst: &Dir) -> io::Result<()> {
    replay_dir(listing, 0, src.as_raw_fd(), dst.as_raw_fd())
}

fn replay_dir(listing: &Listing, index: usize, src: RawFd, dst: RawFd) -> io::Result<()> {
    fill_dir(listing, index, src, dst, &mut |child, name, made| {
        let from = open_dir_at(src, name)?;
        replay_dir(listing, child, from.as_raw_fd(), made.as_raw_fd())
    })
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

    struct Frozen(Dir, Listing);

    impl Tree for Frozen {
        fn dir(&self) -> &Dir {
            &self.0
        }
        fn listing(&self) -> &Listing {
            &self.1
        }
    }

    fn names(p: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// `b` (empty) filled lazily from the tree `a`.
    fn lazily(a: &Path, b: &Path) -> Shared {
        let listed = list_tree(&dir(a)).unwrap();
        let shared = Shared::default();
        shared
            .fill_lazily(Arc::new(Frozen(dir(a), listed.listing)), &dir(b))
            .unwrap();
        shared
    }

    #[test]
    fn a_lazy_fill_makes_what_a_path_reaches_and_all_on_demand() {
        let t = tempfile::tempdir().unwrap();
        let (a, b) = (t.path().join("a"), t.path().join("b"));
        std::fs::create_dir_all(a.join("p/q/r")).unwrap();
        std::fs::create_dir_all(a.join("s/t")).unwrap();
        std::fs::write(a.join("p/q/r/f"), b"f").unwrap();
        std::fs::write(a.join("s/t/g"), b"g").unwrap();
        std::os::unix::fs::symlink("../p/q", a.join("s/link")).unwrap();
        std::fs::create_dir(&b).unwrap();
        let shared = lazily(&a, &b);
        assert!(shared.waits());
        assert_eq!(names(&b), ["p", "s"]);
        assert!(names(&b.join("p")).is_empty(), "filled before reached");
        // Through a symlink and `..`: `s`, then `p`, `p/q` and `p/q/r`, not `s/t`.
        shared
            .reach(&dir(&b), Path::new("s/link/r/../r/f"), true)
            .unwrap();
        assert_eq!(std::fs::read(b.join("p/q/r/f")).unwrap(), b"f");
        assert!(names(&b.join("s/t")).is_empty());
        // A final symlink not followed leaves what it points to alone.
        std::fs::remove_dir_all(&b).unwrap();
        std::fs::create_dir(&b).unwrap();
        let shared = lazily(&a, &b);
        shared.reach(&dir(&b), Path::new("s/link"), false).unwrap();
        assert!(names(&b.join("p")).is_empty());
        shared.fill_all(&dir(&b)).unwrap();
        assert!(!shared.waits());
        assert_eq!(std::fs::read(b.join("s/t/g")).unwrap(), b"g");
        let listed = list_tree(&dir(&a)).unwrap();
        let again = list_tree(&dir(&b)).unwrap();
        assert_eq!((again.files, again.entries), (listed.files, listed.entries));
        // Modes and times are the listed ones, set after the entries were made.
        let (ma, mb) = (
            std::fs::metadata(a.join("p/q")).unwrap(),
            std::fs::metadata(b.join("p/q")).unwrap(),
        );
        assert_eq!(ma.modified().unwrap(), mb.modified().unwrap());
        assert_eq!(ma.permissions(), mb.permissions());
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
