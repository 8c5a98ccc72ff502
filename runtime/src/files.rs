//! The host's own file operations on a sandbox's tree (workspace and `/tmp`), for front-ends
//! that manage files without running a program: stat, list, make a directory, remove and
//! move. Every path is a sandbox path (absolute, or relative to the mount point); cap-std
//! keeps each operation inside the directory that holds it, and the sandbox's disk quota is
//! charged for what is made and credited for what is removed, as for the guest's own calls.
//! Files and directories may carry extended attributes in the `user.` namespace (E2B's file
//! metadata), kept by the host's file system with the inode: they follow renames.

use std::collections::BTreeMap;
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use cap_std::fs::{Dir, MetadataExt as _};

use crate::sandbox::{FileError, SandboxState, Tree};

/// What an entry of the sandbox's tree is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    File,
    Directory,
    Symlink,
    /// A socket, fifo or device (never made by the host; a guest may make a fifo).
    Other,
}

/// One entry of the sandbox's tree, as `stat` sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileInfo {
    /// The last component of its path.
    pub name: String,
    /// Its absolute sandbox path.
    pub path: String,
    /// What it is; for a symlink, what it points to (or `Symlink` when dangling).
    pub kind: FileKind,
    pub is_symlink: bool,
    /// The symlink's target as a sandbox path, for a symlink.
    pub symlink_target: Option<String>,
    pub size: u64,
    /// The mode bits with the file type, as `st_mode`.
    pub mode: u32,
    pub modified: Option<SystemTime>,
    /// Its extended attributes in the `user.` namespace, named without it (files and
    /// directories only).
    pub xattrs: BTreeMap<String, Vec<u8>>,
}

/// Most `user.` attributes one entry may be given by [`SandboxState::set_user_xattrs`],
/// and the longest name and value.
pub const MAX_XATTRS: usize = 64;
pub const MAX_XATTR_NAME: usize = 200;
pub const MAX_XATTR_VALUE: usize = 4096;

/// The entry at `rel` opened for its attributes: files and directories only (never a fifo,
/// which an open would wait on, nor a symlink's target).
fn open_for_xattrs(dir: &Dir, rel: &Path) -> std::io::Result<std::fs::File> {
    let meta = dir.symlink_metadata(rel)?;
    if meta.is_dir() {
        Ok(dir.open_dir(rel)?.into_std_file())
    } else if meta.is_file() {
        Ok(dir.open(rel)?.into_std())
    } else {
        Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
    }
}

/// The names of a file's extended attributes.
fn xattr_names(file: &std::fs::File) -> std::io::Result<Vec<String>> {
    let fd = file.as_raw_fd();
    // SAFETY: a null buffer of size 0 asks only for the size the list needs.
    let n = unsafe { libc::flistxattr(fd, std::ptr::null_mut(), 0) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut buf = vec![0u8; n as usize];
    // SAFETY: `buf` is writable for its length.
    let n = unsafe { libc::flistxattr(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf
        .split(|b| *b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect())
}

fn xattr_value(file: &std::fs::File, name: &str) -> std::io::Result<Vec<u8>> {
    let fd = file.as_raw_fd();
    let c = std::ffi::CString::new(name).map_err(|_| std::io::ErrorKind::InvalidInput)?;
    let mut buf = vec![0u8; MAX_XATTR_VALUE];
    // SAFETY: `buf` is writable for its length; `c` is NUL-terminated.
    let n = unsafe { libc::fgetxattr(fd, c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// An entry's `user.` attributes, named without the namespace; none where the file system
/// keeps none.
fn user_xattrs(dir: &Dir, rel: &Path) -> BTreeMap<String, Vec<u8>> {
    let Ok(file) = open_for_xattrs(dir, rel) else {
        return BTreeMap::new();
    };
    xattr_names(&file)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|n| {
            let short = n.strip_prefix("user.")?.to_string();
            Some((short, xattr_value(&file, &n).ok()?))
        })
        .collect()
}

/// Most entries one listing returns.
pub const MAX_LIST_ENTRIES: usize = 100_000;

impl SandboxState {
    /// The directory holding `path` and the path inside it, or the error for a path outside
    /// the sandbox's tree.
    fn locate(
        &self,
        path: &str,
    ) -> Result<(crate::sandbox::DirView<'_>, PathBuf, String), FileError> {
        self.locate_in(path)
            .map(|(dir, rel, abs, _)| (dir, rel, abs))
    }

    /// [`SandboxState::locate`] with the tree the path is in.
    fn locate_in(
        &self,
        path: &str,
    ) -> Result<(crate::sandbox::DirView<'_>, PathBuf, String, Tree), FileError> {
        let abs = self.absolute(path);
        // Listings, removals and moves walk the tree below the path.
        self.fill_all().map_err(|e| FileError::from_io(path, &e))?;
        match self.resolve_in(&self.mount, path) {
            Some((dir, rel, tree)) => Ok((dir, rel, abs, tree)),
            None => Err(FileError::OutsideWorkspace(path.to_string())),
        }
    }

    /// [`SandboxState::locate_in`] for a change: refused in a volume attached read-only.
    fn locate_writable(
        &self,
        path: &str,
    ) -> Result<(crate::sandbox::DirView<'_>, PathBuf, String, Tree), FileError> {
        let found = self.locate_in(path)?;
        if self.read_only(found.3) {
            return Err(FileError::ReadOnly(path.to_string()));
        }
        Ok(found)
    }

    /// `path` as an absolute, normalized sandbox path.
    pub(crate) fn absolute(&self, path: &str) -> String {
        let parts = crate::sandbox::normalize(&self.mount, path);
        format!("/{}", parts.join("/"))
    }

    fn info(&self, dir: &Dir, rel: &Path, abs: &str) -> std::io::Result<FileInfo> {
        let meta = dir.symlink_metadata(rel)?;
        let name = abs.rsplit('/').next().unwrap_or("").to_string();
        let is_symlink = meta.file_type().is_symlink();
        let (kind, symlink_target) = if is_symlink {
            let target = dir.read_link_contents(rel).ok().map(|t| {
                let t = t.to_string_lossy().into_owned();
                let base = abs.rsplit_once('/').map_or("/", |(b, _)| b);
                self.absolute(&if t.starts_with('/') {
                    t
                } else {
                    format!("{base}/{t}")
                })
            });
            let kind = match dir.metadata(rel) {
                Ok(m) if m.is_dir() => FileKind::Directory,
                Ok(m) if m.is_file() => FileKind::File,
                Ok(_) => FileKind::Other,
                Err(_) => FileKind::Symlink,
            };
            (kind, target)
        } else if meta.is_dir() {
            (FileKind::Directory, None)
        } else if meta.is_file() {
            (FileKind::File, None)
        } else {
            (FileKind::Other, None)
        };
        Ok(FileInfo {
            name,
            path: abs.to_string(),
            kind,
            is_symlink,
            symlink_target,
            size: meta.len(),
            mode: meta.mode(),
            modified: meta.modified().ok().map(|t| t.into_std()),
            xattrs: if is_symlink {
                BTreeMap::new()
            } else {
                user_xattrs(dir, rel)
            },
        })
    }

    /// Replaces the `user.{prefix}*` extended attributes of the file or directory at `path`
    /// with `attrs` (names given without `user.`, each starting with `prefix`): those not
    /// named are removed. At most [`MAX_XATTRS`], names of [`MAX_XATTR_NAME`] bytes and
    /// values of [`MAX_XATTR_VALUE`].
    pub(crate) fn set_user_xattrs(
        &self,
        path: &str,
        prefix: &str,
        attrs: &BTreeMap<String, Vec<u8>>,
    ) -> Result<(), FileError> {
        let invalid = |why: &str| FileError::Io(format!("{path}: {why}"));
        if attrs.len() > MAX_XATTRS {
            return Err(invalid(&format!("more than {MAX_XATTRS} attributes")));
        }
        for (name, value) in attrs {
            if !name.starts_with(prefix) || name.len() > MAX_XATTR_NAME || name.contains('\0') {
                return Err(invalid(&format!("attribute name {name:?} is not allowed")));
            }
            if value.len() > MAX_XATTR_VALUE {
                return Err(invalid(&format!(
                    "attribute {name:?} is longer than {MAX_XATTR_VALUE} bytes"
                )));
            }
        }
        let (dir, rel, _, _) = self.locate_writable(path)?;
        let meta = dir
            .symlink_metadata(&rel)
            .map_err(|e| FileError::from_io(path, &e))?;
        // A file shared with a snapshot or a fork is theirs too: its attributes are not
        // changed in place.
        if meta.is_file() && meta.nlink() > 1 && self.shared.holds(&meta) {
            return Err(invalid("the file is shared with a snapshot or a fork"));
        }
        let file = open_for_xattrs(&dir, &rel).map_err(|e| FileError::from_io(path, &e))?;
        let fd = file.as_raw_fd();
        let full_prefix = format!("user.{prefix}");
        let io = |e: std::io::Error| FileError::from_io(path, &e);
        for old in xattr_names(&file).map_err(io)? {
            if old.starts_with(&full_prefix) && !attrs.contains_key(&old["user.".len()..]) {
                let c = std::ffi::CString::new(old).map_err(|_| invalid("bad name"))?;
                // SAFETY: `c` is NUL-terminated.
                if unsafe { libc::fremovexattr(fd, c.as_ptr()) } < 0 {
                    return Err(io(std::io::Error::last_os_error()));
                }
            }
        }
        for (name, value) in attrs {
            let c =
                std::ffi::CString::new(format!("user.{name}")).map_err(|_| invalid("bad name"))?;
            // SAFETY: `c` is NUL-terminated and `value` readable for its length.
            let r =
                unsafe { libc::fsetxattr(fd, c.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
            if r < 0 {
                return Err(io(std::io::Error::last_os_error()));
            }
        }
        Ok(())
    }

    /// The entry at `path` (a symlink itself, not what it points to).
    pub(crate) fn stat(&self, path: &str) -> Result<FileInfo, FileError> {
        let (dir, rel, abs) = self.locate(path)?;
        self.info(&dir, &rel, &abs)
            .map_err(|e| FileError::from_io(path, &e))
    }

    /// The entries under the directory `path`, down to `depth` levels (1: its children).
    /// Symlinked directories are listed but not entered.
    pub(crate) fn list_dir(&self, path: &str, depth: u32) -> Result<Vec<FileInfo>, FileError> {
        let (dir, rel, abs) = self.locate(path)?;
        let meta = dir
            .metadata(&rel)
            .map_err(|e| FileError::from_io(path, &e))?;
        if !meta.is_dir() {
            return Err(FileError::NotADirectory(path.to_string()));
        }
        let mut out = Vec::new();
        let mut pending = vec![(rel, abs, 1u32)];
        while let Some((rel, abs, level)) = pending.pop() {
            let entries = dir
                .read_dir(&rel)
                .map_err(|e| FileError::from_io(path, &e))?;
            let mut names: Vec<String> = entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort_unstable();
            for name in names {
                let child_rel = rel.join(&name);
                let child_abs = if abs == "/" {
                    format!("/{name}")
                } else {
                    format!("{abs}/{name}")
                };
                let Ok(info) = self.info(&dir, &child_rel, &child_abs) else {
                    continue;
                };
                if info.kind == FileKind::Directory && !info.is_symlink && level < depth {
                    pending.push((child_rel, child_abs, level + 1));
                }
                out.push(info);
                if out.len() > MAX_LIST_ENTRIES {
                    return Err(FileError::Io(format!(
                        "{path}: more than {MAX_LIST_ENTRIES} entries"
                    )));
                }
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// Makes the directory `path` and its missing parents. `Ok(false)` when it existed.
    pub(crate) fn make_dir(&self, path: &str) -> Result<bool, FileError> {
        let (dir, rel, _, tree) = self.locate_in(path)?;
        match dir.symlink_metadata(&rel) {
            Ok(m) if m.is_dir() => return Ok(false),
            Ok(_) => return Err(FileError::AlreadyExists(path.to_string())),
            Err(_) => {}
        }
        if self.read_only(tree) {
            return Err(FileError::ReadOnly(path.to_string()));
        }
        let quota = self.quota_of(tree);
        // One inode for each directory made.
        let mut missing = 0u64;
        let mut p = rel.as_path();
        loop {
            if dir.symlink_metadata(p).is_ok() {
                break;
            }
            missing += 1;
            match p.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => p = parent,
                _ => break,
            }
        }
        if !quota.reserve_inodes(missing) {
            return Err(FileError::NoSpace(path.to_string()));
        }
        if let Err(e) = dir.create_dir_all(&rel) {
            quota.release_inodes(missing);
            return Err(FileError::from_io(path, &e));
        }
        Ok(true)
    }

    /// Removes the file, symlink or directory tree at `path`; the mount points stay.
    pub(crate) fn remove(&self, path: &str) -> Result<(), FileError> {
        let (dir, rel, abs, tree) = self.locate_writable(path)?;
        if rel == Path::new(".") || abs == "/tmp" {
            return Err(FileError::OutsideWorkspace(path.to_string()));
        }
        let meta = dir
            .symlink_metadata(&rel)
            .map_err(|e| FileError::from_io(path, &e))?;
        let (bytes, inodes) = if meta.is_dir() {
            let counted = crate::volume::tree_usage(&dir, &rel, |m| self.shared.holds(m));
            dir.remove_dir_all(&rel)
                .map_err(|e| FileError::from_io(path, &e))?;
            counted
        } else {
            dir.remove_file(&rel)
                .map_err(|e| FileError::from_io(path, &e))?;
            if meta.is_file() && (meta.nlink() <= 1 || self.shared.holds(&meta)) {
                (meta.len(), 1)
            } else {
                (0, 1)
            }
        };
        self.quota_of(tree).release_bytes(bytes);
        self.quota_of(tree).release_inodes(inodes);
        Ok(())
    }

    /// Moves `from` to `to` (replacing a file there), making `to`'s missing parents.
    pub(crate) fn rename(&self, from: &str, to: &str) -> Result<FileInfo, FileError> {
        let (src, src_rel, _, tree) = self.locate_writable(from)?;
        let (dst, dst_rel, dst_abs, dst_tree) = self.locate_writable(to)?;
        if src_rel == Path::new(".") || dst_rel == Path::new(".") {
            return Err(FileError::OutsideWorkspace(from.to_string()));
        }
        if tree != dst_tree {
            return Err(FileError::Io(format!(
                "{to}: Invalid cross-device link (a move between a volume and another tree)"
            )));
        }
        src.symlink_metadata(&src_rel)
            .map_err(|e| FileError::from_io(from, &e))?;
        if let Some(parent) = dst_rel.parent().filter(|p| !p.as_os_str().is_empty())
            && dst.symlink_metadata(parent).is_err()
        {
            let parent_abs = dst_abs.rsplit_once('/').map_or("/", |(p, _)| p).to_string();
            self.make_dir(&parent_abs)?;
        }
        // Replacing a file gives its bytes back.
        let replaced = dst
            .symlink_metadata(&dst_rel)
            .ok()
            .filter(|m| m.is_file() && (m.nlink() <= 1 || self.shared.holds(m)))
            .map(|m| m.len());
        src.rename(&src_rel, &dst, &dst_rel)
            .map_err(|e| FileError::from_io(to, &e))?;
        if let Some(bytes) = replaced {
            self.quota_of(tree).release_bytes(bytes);
            self.quota_of(tree).release_inodes(1);
        }
        self.info(&dst, &dst_rel, &dst_abs)
            .map_err(|e| FileError::from_io(to, &e))
    }
}

/// `rwxr-xr-x` for the permission bits of `mode`, with the type letter first as `ls`
/// prints it (`-`, `d`, `l`).
pub fn permission_string(mode: u32) -> String {
    let kind = match mode & libc::S_IFMT {
        libc::S_IFDIR => 'd',
        libc::S_IFLNK => 'l',
        libc::S_IFIFO => 'p',
        libc::S_IFSOCK => 's',
        libc::S_IFCHR => 'c',
        libc::S_IFBLK => 'b',
        _ => '-',
    };
    let mut s = String::with_capacity(10);
    s.push(kind);
    for shift in [6u32, 3, 0] {
        let bits = (mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    s
}
