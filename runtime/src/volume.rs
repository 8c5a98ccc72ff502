//! Volumes: named directories of the node that outlive the sandboxes they are attached to
//! (and the node's restarts), each with a size quota.
//!
//! A store ([`Volumes`]) keeps each volume as `<root>/<name>/` holding `volume.json` (its
//! record: id, limits, access token, when it was made) and `data/` (its files). A volume is
//! attached to a sandbox at a path ([`VolumeMount`]), read-write or read-only; every sandbox
//! that has it attached and the host's own access (a content API) share one open volume
//! ([`OpenVolume`]) whose quota counts what is in `data/` (walked once when it is opened), so
//! that concurrent writers on one node see one POSIX directory and one quota between them.
//! A second process of the node (a `wasbox run` beside a `wasbox serve`) cannot open a volume
//! another holds: it is told the volume is in use.
//!
//! Names are one path component of letters, digits, `.`, `_` and `-` (never `..`), so no
//! name leads out of the store.

use std::collections::HashMap;
use std::io::Write as _;
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

use crate::limits::Quota;
use crate::sync::lock;

/// How long a volume stays open after it was last opened (see `Volumes::recent`).
const LINGER: std::time::Duration = std::time::Duration::from_secs(10);

/// The longest volume name.
pub const MAX_NAME: usize = 63;

/// What the operator allows volumes to hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeLimits {
    /// Volumes the store may hold.
    pub max_volumes: usize,
    /// A new volume's size when its creator names none.
    pub default_bytes: u64,
    /// The largest size a creator may ask for.
    pub max_bytes: u64,
    /// Files and directories one volume may hold.
    pub inodes: u64,
}

impl Default for VolumeLimits {
    fn default() -> Self {
        VolumeLimits {
            max_volumes: 64,
            default_bytes: 1 << 30,
            max_bytes: 10 << 30,
            inodes: 100_000,
        }
    }
}

/// A volume as the store records it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct VolumeRecord {
    pub name: String,
    /// A random id, unique on the node (for APIs that name volumes by id).
    pub id: String,
    /// A random secret that grants access to its files from outside a sandbox.
    pub token: String,
    pub bytes_limit: u64,
    pub inodes_limit: u64,
    /// When it was made, in seconds since the Unix epoch.
    pub created: u64,
}

/// A volume and what it holds now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeInfo {
    pub record: VolumeRecord,
    pub bytes_used: u64,
    pub inodes_used: u64,
    /// Sandboxes that have it attached now (in this process).
    pub attached: usize,
}

/// Why a volume operation was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum VolumeError {
    /// The name (or a mount path) is not acceptable; the message says why.
    Invalid(String),
    NotFound(String),
    Exists(String),
    /// It is attached to a sandbox, or held by another process of the node.
    InUse(String),
    /// The store holds as many volumes as the operator allows.
    Full(usize),
    Io(String),
}

impl std::fmt::Display for VolumeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VolumeError::Invalid(m) => f.write_str(m),
            VolumeError::NotFound(n) => write!(f, "no volume named `{n}`"),
            VolumeError::Exists(n) => write!(f, "a volume named `{n}` exists"),
            VolumeError::InUse(m) => f.write_str(m),
            VolumeError::Full(n) => {
                write!(f, "the node holds {n} volumes, as many as it allows")
            }
            VolumeError::Io(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for VolumeError {}

fn io_error(what: &str, e: impl std::fmt::Display) -> VolumeError {
    VolumeError::Io(format!("{what}: {e}"))
}

/// One mount written `NAME:PATH[:ro|:rw]` (`wasbox run --volume`, the `volumes` of a
/// restore from an uploaded tar): the name checked, the path as written (checked where it is
/// attached, [`check_mounts`]), and whether it is read-only.
pub fn parse_mount(text: &str) -> Result<(String, String, bool), String> {
    let mut parts = text.splitn(3, ':');
    let (Some(name), Some(path)) = (parts.next(), parts.next()) else {
        return Err(format!("`{text}` is not NAME:PATH[:ro]"));
    };
    let read_only = match parts.next() {
        None | Some("rw") => false,
        Some("ro") => true,
        Some(other) => return Err(format!("`{other}` in `{text}` is neither ro nor rw")),
    };
    check_name(name).map_err(|e| e.to_string())?;
    Ok((name.to_string(), path.to_string(), read_only))
}

/// Checks a volume name: see the module documentation.
pub fn check_name(name: &str) -> Result<(), VolumeError> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(VolumeError::Invalid(format!(
            "a volume name has 1 to {MAX_NAME} characters (got {})",
            name.len()
        )));
    }
    if !name.chars().all(ok_char)
        || name.contains("..")
        || !name.starts_with(|c: char| c.is_ascii_alphanumeric())
    {
        return Err(VolumeError::Invalid(format!(
            "volume name {name:?} must start with a letter or digit and hold only letters, digits, `.`, `_` and `-` (no `..`)"
        )));
    }
    Ok(())
}

/// The node's volumes: see the module documentation.
pub struct Volumes {
    root: PathBuf,
    limits: VolumeLimits,
    /// The volumes open in this process, by name.
    open: Mutex<HashMap<String, Weak<OpenVolume>>>,
    /// Volumes used lately, kept open [`LINGER`] after their last use (so that a content
    /// API's requests, or sessions made one after another, do not walk the tree each time),
    /// by when they were last opened. A thread of the store lets them go.
    recent: Arc<Mutex<Recent>>,
    /// Held while a volume is made or removed, so that the count and names stay true.
    changes: Mutex<()>,
}

/// A store that goes lets its volumes go at once (not when its thread next looks).
impl Drop for Volumes {
    fn drop(&mut self) {
        lock(&self.recent).clear();
    }
}

/// Volumes kept open after their use, by name, with when they were last opened.
type Recent = HashMap<String, (Arc<OpenVolume>, std::time::Instant)>;

/// A volume open in this process: attached to sandboxes, or used by the host.
pub struct OpenVolume {
    record: VolumeRecord,
    data: PathBuf,
    /// What its files hold, and may hold.
    pub(crate) quota: Arc<Quota>,
    /// Sandboxes attached now.
    attached: std::sync::atomic::AtomicUsize,
    /// Holds the volume's lock file locked against other processes while open.
    _lock: std::fs::File,
}

impl OpenVolume {
    pub fn record(&self) -> &VolumeRecord {
        &self.record
    }

    /// The host directory of its files.
    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// Bytes and inodes its files hold.
    pub fn used(&self) -> (u64, u64) {
        self.quota.used()
    }

    /// Its quota (shared by every sandbox it is attached to).
    pub fn quota(&self) -> &Arc<Quota> {
        &self.quota
    }

    /// Opens its directory of files for the host.
    pub fn open_dir(&self) -> std::io::Result<cap_std::fs::Dir> {
        cap_std::fs::Dir::open_ambient_dir(&self.data, cap_std::ambient_authority())
    }

    /// Makes the directory `rel` of `dir` (its [`OpenVolume::open_dir`]), and its missing
    /// parents when `parents`: an inode of the quota each, `ENOSPC` past it.
    pub fn make_dir(
        &self,
        dir: &cap_std::fs::Dir,
        rel: &Path,
        parents: bool,
    ) -> std::io::Result<()> {
        let missing = missing_dirs(dir, rel);
        if !self.quota.reserve_inodes(missing) {
            return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
        }
        let made = if parents {
            dir.create_dir_all(rel)
        } else {
            dir.create_dir(rel)
        };
        if made.is_err() {
            self.quota.release_inodes(missing);
        }
        made
    }

    /// Removes the file, symlink or directory tree `rel` of `dir` (its
    /// [`OpenVolume::open_dir`]) and gives back what it held.
    pub fn remove(&self, dir: &cap_std::fs::Dir, rel: &Path) -> std::io::Result<()> {
        use cap_std::fs::MetadataExt as _;
        let meta = dir.symlink_metadata(rel)?;
        let (bytes, inodes) = if meta.is_dir() {
            let counted = tree_usage(dir, rel, |_| false);
            dir.remove_dir_all(rel)?;
            counted
        } else {
            dir.remove_file(rel)?;
            let last = meta.is_file() && meta.nlink() <= 1;
            (if last { meta.len() } else { 0 }, 1)
        };
        self.quota.release_bytes(bytes);
        self.quota.release_inodes(inodes);
        Ok(())
    }
}

/// How many directories a `mkdir -p` of `rel` under `dir` makes: `rel` and its ancestors
/// that are not there.
pub(crate) fn missing_dirs(dir: &cap_std::fs::Dir, rel: &Path) -> u64 {
    rel.ancestors()
        .filter(|p| !p.as_os_str().is_empty() && dir.symlink_metadata(p).is_err())
        .count() as u64
}

/// The bytes and inodes a removal of the tree `rel` under `dir` frees, itself included:
/// every entry's inode, and the bytes of files with one link left or that `freed` says go
/// with it (a sandbox's file shared with a snapshot or fork).
pub(crate) fn tree_usage(
    dir: &cap_std::fs::Dir,
    rel: &Path,
    freed: impl Fn(&cap_std::fs::Metadata) -> bool,
) -> (u64, u64) {
    use cap_std::fs::MetadataExt as _;
    let (mut bytes, mut inodes) = (0u64, 1u64);
    let mut pending = vec![rel.to_path_buf()];
    while let Some(p) = pending.pop() {
        let Ok(entries) = dir.read_dir(&p) else {
            continue;
        };
        for e in entries.flatten() {
            let child = p.join(e.file_name());
            let Ok(m) = dir.symlink_metadata(&child) else {
                continue;
            };
            inodes += 1;
            if m.is_dir() {
                pending.push(child);
            } else if m.is_file() && (m.nlink() <= 1 || freed(&m)) {
                bytes += m.len();
            }
        }
    }
    (bytes, inodes)
}

/// Counts an attachment while it lives.
pub(crate) struct Attachment(pub(crate) Arc<OpenVolume>);

impl Attachment {
    pub(crate) fn new(volume: Arc<OpenVolume>) -> Self {
        volume
            .attached
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Attachment(volume)
    }
}

impl Drop for Attachment {
    fn drop(&mut self) {
        self.0
            .attached
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// The most volumes one sandbox may have attached.
pub const MAX_MOUNTS: usize = 8;

/// Top directories of a sandbox's read-only tree, where no volume may be attached.
const SYSTEM_DIRS: [&str; 9] = [
    "bin", "dev", "etc", "lib", "proc", "sbin", "sys", "tmp", "usr",
];

/// The components of an absolute path, refused when it is not one (or holds `..`).
fn components(path: &str) -> Option<Vec<&str>> {
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    (path.starts_with('/') && !parts.is_empty() && !parts.contains(&"..") && !path.contains('\0'))
        .then_some(parts)
}

/// Checks where volumes are attached in a sandbox whose workspace is at `workspace`: each
/// an absolute path (no `..`), not in the system's directories (`/usr`, `/tmp`, `/dev`...),
/// not the workspace or above it, none inside another, at most [`MAX_MOUNTS`]. The paths
/// come back in normal form (`/a/b`).
pub fn check_mounts<'a>(
    paths: impl IntoIterator<Item = &'a str>,
    workspace: &str,
) -> Result<Vec<String>, VolumeError> {
    let ws = components(workspace).unwrap_or_default();
    let inside = |a: &[&str], b: &[&str]| a.len() >= b.len() && a[..b.len()] == *b;
    let mut seen: Vec<Vec<&str>> = Vec::new();
    let mut out = Vec::new();
    for path in paths {
        let invalid =
            |why: &str| VolumeError::Invalid(format!("volume mount path {path:?}: {why}"));
        let parts =
            components(path).ok_or_else(|| invalid("not an absolute path below / without `..`"))?;
        if SYSTEM_DIRS.contains(&parts[0]) {
            return Err(invalid(&format!("/{} belongs to the system", parts[0])));
        }
        if inside(&ws, &parts) {
            return Err(invalid("it would hide the workspace"));
        }
        if seen.iter().any(|o| inside(&parts, o) || inside(o, &parts)) {
            return Err(invalid("inside another volume's mount, or around one"));
        }
        out.push(format!("/{}", parts.join("/")));
        seen.push(parts);
        if out.len() > MAX_MOUNTS {
            return Err(VolumeError::Invalid(format!(
                "at most {MAX_MOUNTS} volumes may be attached to a sandbox"
            )));
        }
    }
    Ok(out)
}

/// A volume to attach to a new sandbox, at `path` inside it.
#[derive(Clone)]
pub struct VolumeMount {
    pub volume: Arc<OpenVolume>,
    pub path: String,
    pub read_only: bool,
}

impl std::fmt::Debug for VolumeMount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VolumeMount")
            .field("volume", &self.volume.record.name)
            .field("path", &self.path)
            .field("read_only", &self.read_only)
            .finish()
    }
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `N` random bytes from the kernel, as hex.
fn random_hex<const N: usize>() -> Result<String, VolumeError> {
    let mut b = [0u8; N];
    // SAFETY: getrandom writes at most `b.len()` bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != N as isize {
        return Err(io_error(
            "reading random bytes",
            std::io::Error::last_os_error(),
        ));
    }
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

impl Volumes {
    /// The store in `root` (made when missing).
    pub fn at(root: impl Into<PathBuf>, limits: VolumeLimits) -> Result<Volumes> {
        let root = root.into();
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(&root)
            .with_context(|| format!("creating the volume store {}", root.display()))?;
        let root = root.canonicalize()?;
        // Leftovers of a creation or removal cut short.
        if let Ok(entries) = std::fs::read_dir(&root) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with('.') {
                    crate::scratch::remove_all(&e.path());
                }
            }
        }
        let recent: Arc<Mutex<Recent>> = Arc::default();
        let weak = Arc::downgrade(&recent);
        let _ = std::thread::Builder::new()
            .name("wasbox-volumes".into())
            .spawn(move || {
                while let Some(recent) = weak.upgrade() {
                    lock(&recent).retain(|_, (_, used)| used.elapsed() < LINGER);
                    drop(recent);
                    std::thread::sleep(LINGER / 2);
                }
            });
        Ok(Volumes {
            root,
            limits,
            open: Mutex::new(HashMap::new()),
            recent,
            changes: Mutex::new(()),
        })
    }

    pub fn limits(&self) -> &VolumeLimits {
        &self.limits
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Makes an empty volume of `bytes` (the default size when `None`).
    pub fn create(&self, name: &str, bytes: Option<u64>) -> Result<VolumeRecord, VolumeError> {
        check_name(name)?;
        let bytes = bytes.unwrap_or(self.limits.default_bytes);
        if bytes == 0 || bytes > self.limits.max_bytes {
            return Err(VolumeError::Invalid(format!(
                "a volume's size is 1 to {} bytes (got {bytes})",
                self.limits.max_bytes
            )));
        }
        let _changes = lock(&self.changes);
        let dir = self.root.join(name);
        if dir.exists() {
            return Err(VolumeError::Exists(name.to_string()));
        }
        let count = self.names().len();
        if count >= self.limits.max_volumes {
            return Err(VolumeError::Full(count));
        }
        let record = VolumeRecord {
            name: name.to_string(),
            id: format!("vol-{}", random_hex::<8>()?),
            token: random_hex::<24>()?,
            bytes_limit: bytes,
            inodes_limit: self.limits.inodes,
            created: now_secs(),
        };
        // Made beside, then renamed into place: a volume is there whole or not at all.
        let made = (|| -> std::io::Result<()> {
            let t = tempfile::Builder::new()
                .prefix(".new-")
                .tempdir_in(&self.root)?;
            std::fs::create_dir(t.path().join("data"))?;
            let mut f = std::fs::File::create(t.path().join("volume.json"))?;
            f.write_all(&serde_json::to_vec_pretty(&record).map_err(std::io::Error::other)?)?;
            f.sync_all()?;
            std::fs::File::create(t.path().join("lock"))?;
            std::fs::rename(t.keep(), &dir)
        })();
        made.map_err(|e| io_error(&format!("making volume {name}"), e))?;
        Ok(record)
    }

    /// The names in the store, sorted.
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| check_name(n).is_ok())
            .collect();
        names.sort();
        names
    }

    /// The record of `name`.
    pub fn record(&self, name: &str) -> Result<VolumeRecord, VolumeError> {
        check_name(name)?;
        let path = self.root.join(name).join("volume.json");
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(VolumeError::NotFound(name.to_string()));
            }
            Err(e) => return Err(io_error(&format!("reading {}", path.display()), e)),
        };
        serde_json::from_slice(&text)
            .map_err(|e| io_error(&format!("reading {}", path.display()), e))
    }

    /// The volume whose id is `id`.
    pub fn by_id(&self, id: &str) -> Result<VolumeRecord, VolumeError> {
        self.names()
            .iter()
            .filter_map(|n| self.record(n).ok())
            .find(|r| r.id == id)
            .ok_or_else(|| VolumeError::NotFound(id.to_string()))
    }

    /// Every volume, with its use (walked for those not open here).
    pub fn list(&self) -> Vec<VolumeInfo> {
        self.names()
            .iter()
            .filter_map(|n| self.info(n).ok())
            .collect()
    }

    /// One volume with its use.
    pub fn info(&self, name: &str) -> Result<VolumeInfo, VolumeError> {
        let record = self.record(name)?;
        let live = lock(&self.open).get(name).and_then(Weak::upgrade);
        let ((bytes_used, inodes_used), attached) = match live {
            Some(v) => (
                v.used(),
                v.attached.load(std::sync::atomic::Ordering::Acquire),
            ),
            None => (usage(&self.root.join(name).join("data")), 0),
        };
        Ok(VolumeInfo {
            record,
            bytes_used,
            inodes_used,
            attached,
        })
    }

    /// Opens `name` for sandboxes or the host: the one open already, or opened now (its
    /// lock taken, its use walked).
    pub fn open(&self, name: &str) -> Result<Arc<OpenVolume>, VolumeError> {
        let v = self.open_now(name)?;
        lock(&self.recent).insert(name.to_string(), (v.clone(), std::time::Instant::now()));
        Ok(v)
    }

    fn open_now(&self, name: &str) -> Result<Arc<OpenVolume>, VolumeError> {
        let record = self.record(name)?;
        let mut open = lock(&self.open);
        if let Some(v) = open.get(name).and_then(Weak::upgrade) {
            return Ok(v);
        }
        let dir = self.root.join(name);
        let lock_file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join("lock"))
            .map_err(|e| io_error(&format!("opening volume {name}"), e))?;
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(lock_file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(VolumeError::InUse(format!(
                "volume `{name}` is in use by another wasbox process of this node"
            )));
        }
        let data = dir.join("data");
        let (bytes, inodes) = usage(&data);
        let quota = Arc::new(Quota::new(record.bytes_limit, record.inodes_limit));
        quota.charge(bytes, inodes);
        let v = Arc::new(OpenVolume {
            record,
            data,
            quota,
            attached: Default::default(),
            _lock: lock_file,
        });
        open.retain(|_, w| w.strong_count() > 0);
        open.insert(name.to_string(), Arc::downgrade(&v));
        Ok(v)
    }

    /// Removes `name` and its files; refused while it is open (attached to a sandbox, or in
    /// use by the host or another process).
    pub fn remove(&self, name: &str) -> Result<(), VolumeError> {
        let _changes = lock(&self.changes);
        self.record(name)?;
        // Kept open only for a next use: no reason to refuse.
        lock(&self.recent).remove(name);
        if lock(&self.open)
            .get(name)
            .is_some_and(|w| w.strong_count() > 0)
        {
            return Err(VolumeError::InUse(format!(
                "volume `{name}` is attached to a sandbox or in use"
            )));
        }
        let dir = self.root.join(name);
        // Locked against other processes while it is taken away.
        let lock_file = std::fs::File::open(dir.join("lock"))
            .map_err(|e| io_error(&format!("opening volume {name}"), e))?;
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(lock_file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(VolumeError::InUse(format!(
                "volume `{name}` is in use by another wasbox process of this node"
            )));
        }
        let gone = self
            .root
            .join(format!(".gone-{}-{}", name, random_hex::<4>()?));
        std::fs::rename(&dir, &gone)
            .map_err(|e| io_error(&format!("removing volume {name}"), e))?;
        drop(lock_file);
        crate::scratch::remove_all(&gone);
        Ok(())
    }
}

/// The bytes (apparent sizes of regular files) and inodes (the directory itself not
/// counted) of a tree, walked without following symlinks.
pub(crate) fn usage(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt as _;
    let (mut bytes, mut inodes) = (0u64, 0u64);
    let mut seen = std::collections::HashSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(p) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&p) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            // A file of several links counts once.
            if m.nlink() > 1 && !m.is_dir() && !seen.insert((m.dev(), m.ino())) {
                continue;
            }
            inodes += 1;
            if m.is_dir() {
                pending.push(e.path());
            } else if m.is_file() {
                bytes += m.len();
            }
        }
    }
    (bytes, inodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_parse() {
        assert_eq!(
            parse_mount("data:/data").unwrap(),
            ("data".into(), "/data".into(), false)
        );
        assert_eq!(
            parse_mount("data:/mnt/d:ro").unwrap(),
            ("data".into(), "/mnt/d".into(), true)
        );
        assert!(parse_mount("data").is_err());
        assert!(parse_mount("../x:/data").is_err());
        assert!(parse_mount("d:/data:rx").is_err());
    }

    #[test]
    fn names_that_could_lead_out_are_refused() {
        for bad in [
            "",
            "..",
            ".",
            "a/b",
            "../x",
            "a..b",
            "-x",
            ".hidden",
            "a b",
            "é",
            &"x".repeat(64),
        ] {
            assert!(
                matches!(check_name(bad), Err(VolumeError::Invalid(_))),
                "{bad:?} accepted"
            );
        }
        for good in ["data", "my-vol_1", "v.2", &"x".repeat(63)] {
            assert!(check_name(good).is_ok(), "{good:?} refused");
        }
    }

    #[test]
    fn mount_paths_are_checked() {
        let ok = check_mounts(["/data/", "/workspace/v", "/mnt//x"], "/workspace").unwrap();
        assert_eq!(ok, ["/data", "/workspace/v", "/mnt/x"]);
        for bad in [
            vec!["data"],
            vec!["/"],
            vec!["/a/../b"],
            vec!["/tmp/x"],
            vec!["/usr"],
            vec!["/proc"],
            vec!["/workspace"],
            vec!["/home"],
            vec!["/a", "/a/b"],
            vec!["/a/b", "/a"],
            vec!["/a", "/a"],
        ] {
            let ws = if bad == ["/home"] {
                "/home/user"
            } else {
                "/workspace"
            };
            assert!(
                matches!(check_mounts(bad.clone(), ws), Err(VolumeError::Invalid(_))),
                "{bad:?} accepted"
            );
        }
        let many: Vec<String> = (0..=MAX_MOUNTS).map(|i| format!("/v{i}")).collect();
        assert!(check_mounts(many.iter().map(String::as_str), "/workspace").is_err());
    }

    #[test]
    fn made_listed_opened_once_and_removed_when_unused() {
        let t = tempfile::tempdir().unwrap();
        let limits = VolumeLimits {
            max_volumes: 2,
            ..VolumeLimits::default()
        };
        let store = Volumes::at(t.path().join("volumes"), limits).unwrap();
        let a = store.create("a", Some(1000)).unwrap();
        assert_eq!(a.bytes_limit, 1000);
        assert_eq!(
            store.create("a", None),
            Err(VolumeError::Exists("a".into()))
        );
        assert!(matches!(
            store.create("b", Some(0)),
            Err(VolumeError::Invalid(_))
        ));
        assert!(matches!(
            store.create("b", Some(u64::MAX)),
            Err(VolumeError::Invalid(_))
        ));
        store.create("b", None).unwrap();
        assert_eq!(store.create("c", None), Err(VolumeError::Full(2)));
        assert_eq!(store.by_id(&a.id).unwrap().name, "a");
        assert_ne!(store.record("b").unwrap().token, a.token);

        std::fs::write(t.path().join("volumes/a/data/f"), b"12345").unwrap();
        std::fs::create_dir(t.path().join("volumes/a/data/d")).unwrap();
        let open = store.open("a").unwrap();
        assert_eq!(open.used(), (5, 2));
        assert!(Arc::ptr_eq(&open, &store.open("a").unwrap()));
        assert!(matches!(store.remove("a"), Err(VolumeError::InUse(_))));
        // A second store on the same directory stands for another process.
        let other = Volumes::at(t.path().join("volumes"), VolumeLimits::default()).unwrap();
        assert!(matches!(other.open("a"), Err(VolumeError::InUse(_))));
        drop(open);
        assert_eq!(store.info("a").unwrap().bytes_used, 5);
        store.remove("a").unwrap();
        assert_eq!(store.record("a"), Err(VolumeError::NotFound("a".into())));
        assert_eq!(
            store
                .list()
                .iter()
                .map(|v| v.record.name.clone())
                .collect::<Vec<_>>(),
            ["b"]
        );
        assert!(matches!(store.remove("../b"), Err(VolumeError::Invalid(_))));
    }
}
