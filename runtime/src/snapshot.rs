//! Snapshots: a sandbox's workspace tree (file contents, modes, times and symlinks), its
//! environment, working directory and limits, frozen so that sandboxes can be restored or
//! forked from it. A snapshot is a tree on the scratch file system whose files are hard
//! links of the sandbox's (see `crate::cow`): taking one costs a directory entry per file,
//! not a copy of the data.
//!
//! The portable form is a tar: first `wasbox-snapshot.json` (the [`Manifest`]), then the
//! workspace under `workspace/`, readable by ordinary tools, optionally compressed with
//! zstd ([`Snapshot::write_tar_zstd`], [`compress`]; `tar --zstd -xf` reads it). Its digest
//! is always the tar's, however it travels. A tar read back is untrusted input: see
//! [`read_tar`]; a compressed one is recognized by its magic number.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt as _, PermissionsExt as _};
use sha2::{Digest as _, Sha256};

use crate::cow::{self, Inodes};
use crate::linktarget;
use crate::sandbox::SandboxState;

/// The version of the tar layout and manifest this runtime writes and reads.
pub const SNAPSHOT_FORMAT: u32 = 1;
/// The manifest's name in a snapshot tar.
pub const MANIFEST_NAME: &str = "wasbox-snapshot.json";
const TREE_PREFIX: &str = "workspace";
/// Longest manifest read from a tar.
const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// What a snapshot holds besides its files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    pub format: u32,
    /// The image its programs come from (a restore needs the same image).
    pub image: String,
    /// That image's digest where the snapshot was taken (`sha256:...` over its programs;
    /// empty when the tar did not say). A restore on a node serving another build of the
    /// same image is allowed: the files do not depend on the programs' build.
    pub image_digest: String,
    /// Where the workspace is mounted.
    pub mount: String,
    /// The working directory of its jobs that name none (the mount unless the sandbox's
    /// config gave another).
    pub cwd: String,
    pub env: Vec<(String, String)>,
    /// The workspace's disk limits (bytes, inodes).
    pub disk_bytes: u64,
    pub disk_inodes: u64,
    /// Regular files and their bytes; every entry of the tree (the quota's inodes).
    pub files: u64,
    pub bytes: u64,
    pub entries: u64,
    /// When it was taken, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// What a front-end keeps with it (a session's own environment, its task).
    pub labels: BTreeMap<String, String>,
}

impl Manifest {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "format": self.format,
            "image": self.image,
            "image_digest": self.image_digest,
            "mount": self.mount,
            "cwd": self.cwd,
            "env": self.env.iter().map(|(k, v)| serde_json::json!([k, v])).collect::<Vec<_>>(),
            "limits": {"disk_bytes": self.disk_bytes, "disk_inodes": self.disk_inodes},
            "files": self.files,
            "bytes": self.bytes,
            "entries": self.entries,
            "created_ms": self.created_ms,
            "labels": self.labels,
        })
    }

    fn from_json(v: &serde_json::Value) -> Result<Manifest, SnapshotError> {
        let bad = |what: &str| SnapshotError::Invalid(format!("manifest: {what}"));
        let u = |k: &str| v.get(k).and_then(serde_json::Value::as_u64);
        let s = |k: &str| v.get(k).and_then(serde_json::Value::as_str);
        let format = u("format").ok_or_else(|| bad("no format"))?;
        if format != u64::from(SNAPSHOT_FORMAT) {
            return Err(SnapshotError::Invalid(format!(
                "snapshot format {format} is not supported (this runtime reads {SNAPSHOT_FORMAT})"
            )));
        }
        let mut env = Vec::new();
        for pair in v
            .get("env")
            .and_then(|e| e.as_array())
            .into_iter()
            .flatten()
        {
            match pair.as_array().map(Vec::as_slice) {
                Some([k, v]) if k.is_string() && v.is_string() => env.push((
                    k.as_str().unwrap_or_default().to_string(),
                    v.as_str().unwrap_or_default().to_string(),
                )),
                _ => return Err(bad("env must be a list of [name, value] pairs")),
            }
        }
        let mut labels = BTreeMap::new();
        if let Some(map) = v.get("labels").and_then(|l| l.as_object()) {
            for (k, val) in map {
                let val = val.as_str().ok_or_else(|| bad("labels must be strings"))?;
                labels.insert(k.clone(), val.to_string());
            }
        }
        let limits = v.get("limits");
        let limit = |k: &str| limits.and_then(|l| l.get(k)).and_then(|x| x.as_u64());
        // A path of the sandbox: absolute, no `..`, no NUL.
        let absolute =
            |p: &str| p.starts_with('/') && !p.split('/').any(|c| c == "..") && !p.contains('\0');
        let mount = s("mount").ok_or_else(|| bad("no mount"))?;
        if !absolute(mount) {
            return Err(bad("mount must be an absolute path"));
        }
        // Written as the mount by snapshots of before it could differ.
        let cwd = s("cwd").unwrap_or(mount);
        if !absolute(cwd) {
            return Err(bad("cwd must be an absolute path"));
        }
        Ok(Manifest {
            format: SNAPSHOT_FORMAT,
            image: s("image").ok_or_else(|| bad("no image"))?.to_string(),
            image_digest: s("image_digest").unwrap_or_default().to_string(),
            mount: mount.to_string(),
            cwd: cwd.to_string(),
            env,
            disk_bytes: limit("disk_bytes").ok_or_else(|| bad("no limits.disk_bytes"))?,
            disk_inodes: limit("disk_inodes").ok_or_else(|| bad("no limits.disk_inodes"))?,
            files: u("files").unwrap_or(0),
            bytes: u("bytes").unwrap_or(0),
            entries: u("entries").unwrap_or(0),
            created_ms: u("created_ms").unwrap_or(0),
            labels,
        })
    }
}

/// Why a snapshot could not be taken, read or restored.
#[derive(Debug)]
pub enum SnapshotError {
    /// Processes run in the sandbox: a snapshot is taken between them.
    Busy(u32),
    /// A tar or manifest that is not a valid snapshot, or a hostile one.
    Invalid(String),
    /// More than the limits allow (bytes, entries).
    TooLarge(String),
    /// Its image is not served here.
    ForeignImage(String),
    /// The host failed (out of space, I/O).
    Io(String),
}

impl std::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotError::Busy(n) => write!(
                f,
                "{n} process(es) run in the sandbox: a snapshot is taken while none runs"
            ),
            SnapshotError::Invalid(m) => write!(f, "not a valid snapshot: {m}"),
            SnapshotError::TooLarge(m) => write!(f, "snapshot too large: {m}"),
            SnapshotError::ForeignImage(i) => {
                write!(f, "the snapshot's image `{i}` is not served here")
            }
            SnapshotError::Io(m) => write!(f, "snapshot: {m}"),
        }
    }
}

impl std::error::Error for SnapshotError {}

fn io_error(what: &str) -> impl Fn(io::Error) -> SnapshotError + '_ {
    move |e| SnapshotError::Io(format!("{what}: {e}"))
}

/// A frozen workspace and what goes with it. Cheap to clone; its tree is removed when the
/// last clone goes and no sandbox restored from it waits for a directory of it (see
/// `crate::cow::Shared::fill_lazily`).
#[derive(Clone)]
pub struct Snapshot {
    inner: Arc<Frozen>,
}

struct Frozen {
    path: PathBuf,
    dir: Dir,
    inodes: Arc<Inodes>,
    /// How to remake its tree (see `crate::cow::Listing`).
    listing: cow::Listing,
    manifest: Manifest,
    /// The sha256 of its tar, when it was read from one.
    digest: Option<String>,
}

impl cow::Tree for Frozen {
    fn dir(&self) -> &Dir {
        &self.dir
    }

    fn listing(&self) -> &cow::Listing {
        &self.listing
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        crate::scratch::remove_all(&self.path);
    }
}

impl Snapshot {
    pub fn manifest(&self) -> &Manifest {
        &self.inner.manifest
    }

    /// `sha256:<hex>` of the tar it was read from (`None` for one taken here: see
    /// [`Snapshot::write_tar`]).
    pub fn digest(&self) -> Option<&str> {
        self.inner.digest.as_deref()
    }

    pub(crate) fn inodes(&self) -> &Arc<Inodes> {
        &self.inner.inodes
    }

    /// Writes the portable form (see the module documentation) and returns its digest,
    /// `sha256:<hex>`. Entries come in name order, so the same tree gives the same tar.
    pub fn write_tar(&self, out: impl Write) -> io::Result<String> {
        let mut hashing = Hashing {
            inner: out,
            hash: Sha256::new(),
        };
        {
            let mut tar = tar::Builder::new(&mut hashing);
            let manifest = serde_json::to_vec_pretty(&self.inner.manifest.to_json())?;
            let mut h = tar::Header::new_ustar();
            h.set_size(manifest.len() as u64);
            h.set_mode(0o644);
            h.set_mtime(self.inner.manifest.created_ms / 1000);
            h.set_entry_type(tar::EntryType::Regular);
            tar.append_data(&mut h, MANIFEST_NAME, manifest.as_slice())?;
            let mut h = dir_header(&self.inner.dir.dir_metadata()?);
            tar.append_data(&mut h, TREE_PREFIX, io::empty())?;
            let mut seen = HashMap::new();
            write_tree(
                &mut tar,
                &self.inner.dir,
                Path::new(TREE_PREFIX),
                0,
                &mut seen,
                &self.inner.manifest.mount,
            )?;
            tar.finish()?;
        }
        hashing.inner.flush()?;
        Ok(format!("sha256:{}", hex(&hashing.hash.finalize())))
    }
}

impl Snapshot {
    /// [`Snapshot::write_tar`], compressed with zstd at `level` (1 to 19; 3 is zstd's
    /// default). The digest is the tar's, as uncompressed.
    pub fn write_tar_zstd(&self, out: impl Write, level: i32) -> io::Result<String> {
        let mut z = zstd::Encoder::new(out, level)?;
        let digest = self.write_tar(&mut z)?;
        z.finish()?.flush()?;
        Ok(digest)
    }
}

/// Compresses a snapshot tar (a stored one, say) with zstd at `level`.
pub fn compress(tar: impl Read, out: impl Write, level: i32) -> io::Result<()> {
    zstd::stream::copy_encode(tar, out, level)
}

/// The first bytes of a zstd frame.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// The tar `input` holds, decompressed when it is a zstd stream. A decompressed stream is
/// cut off past `max` bytes (a bomb), which the tar reader reports as a truncated tar.
fn uncompressed<'a>(input: impl Read + 'a, max: u64) -> Result<Box<dyn Read + 'a>, SnapshotError> {
    let mut input = io::BufReader::with_capacity(1 << 16, input);
    let head = io::BufRead::fill_buf(&mut input).map_err(io_error("reading the tar"))?;
    if head.starts_with(&ZSTD_MAGIC) {
        let z = zstd::Decoder::with_buffer(input)
            .map_err(|e| SnapshotError::Invalid(format!("not a zstd stream: {e}")))?;
        Ok(Box::new(z.take(max)))
    } else {
        Ok(Box::new(input))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

struct Hashing<W> {
    inner: W,
    hash: Sha256,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn mtime(meta: &cap_std::fs::Metadata) -> u64 {
    meta.modified()
        .ok()
        .and_then(|t| t.into_std().duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs())
}

fn dir_header(meta: &cap_std::fs::Metadata) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Directory);
    h.set_mode(meta.permissions().mode() & 0o1777);
    h.set_mtime(mtime(meta));
    h.set_size(0);
    h
}

/// Writes the entries under `dir` as `at/...`; a file with several names is written once,
/// its other names as hard links to the first (`seen`).
fn write_tree<W: Write>(
    tar: &mut tar::Builder<W>,
    dir: &Dir,
    at: &Path,
    depth: usize,
    seen: &mut HashMap<(u64, u64), PathBuf>,
    mount: &str,
) -> io::Result<()> {
    use cap_std::fs::MetadataExt as _;
    let mut names: Vec<_> = dir
        .entries()?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<io::Result<_>>()?;
    names.sort();
    for name in names {
        let meta = dir.symlink_metadata(&name)?;
        let path = at.join(&name);
        let ft = meta.file_type();
        if ft.is_dir() {
            let mut h = dir_header(&meta);
            tar.append_data(&mut h, &path, io::empty())?;
            if depth < 256 {
                write_tree(tar, &dir.open_dir(&name)?, &path, depth + 1, seen, mount)?;
            }
        } else if ft.is_file() && meta.nlink() > 1 && seen.contains_key(&(meta.dev(), meta.ino())) {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Link);
            h.set_mode(meta.permissions().mode() & 0o777);
            h.set_mtime(mtime(&meta));
            h.set_size(0);
            tar.append_link(&mut h, &path, &seen[&(meta.dev(), meta.ino())])?;
        } else if ft.is_file() {
            if meta.nlink() > 1 {
                seen.insert((meta.dev(), meta.ino()), path.clone());
            }
            let file = dir.open_with(
                &name,
                OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW),
            )?;
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Regular);
            h.set_mode(meta.permissions().mode() & 0o777);
            h.set_mtime(mtime(&meta));
            h.set_size(meta.len());
            tar.append_data(&mut h, &path, file.into_std().take(meta.len()))?;
        } else if ft.is_symlink() {
            // The target as the guest reads it back (an absolute one as it was written).
            let stored = cow::read_link_at(dir, Path::new(&name))?;
            let link = sandbox_path(mount, path.strip_prefix(TREE_PREFIX).unwrap_or(&path));
            let target = linktarget::decode(&link, &stored.to_string_lossy());
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Symlink);
            h.set_mode(0o777);
            h.set_mtime(mtime(&meta));
            h.set_size(0);
            tar.append_link(&mut h, &path, &target)?;
        }
    }
    Ok(())
}

/// A fresh directory for a snapshot's tree under `temp_root`.
fn new_tree(temp_root: &Path) -> Result<(PathBuf, Dir), SnapshotError> {
    let path = tempfile::Builder::new()
        .prefix("wasbox-snap-")
        .tempdir_in(temp_root)
        .map_err(io_error("creating the snapshot's directory"))?
        .keep();
    match Dir::open_ambient_dir(&path, ambient_authority()) {
        Ok(dir) => Ok((path, dir)),
        Err(e) => {
            crate::scratch::remove_all(&path);
            Err(io_error("opening the snapshot's directory")(e))
        }
    }
}

/// Freezes the workspace of `sandbox` (no process may run in it: they are held back while
/// the tree is linked) into a snapshot under `temp_root`.
pub(crate) fn take(
    sandbox: &SandboxState,
    image: &crate::image::Image,
    temp_root: &Path,
    labels: BTreeMap<String, String>,
) -> Result<Snapshot, SnapshotError> {
    let _frozen = sandbox.freeze().map_err(SnapshotError::Busy)?;
    let (path, dir) = new_tree(temp_root)?;
    // From here the tree is removed if anything fails.
    let cleanup = RemoveOnError(Some(path.clone()));
    let src = sandbox
        .workspace_view()
        .map_err(io_error("opening the workspace"))?;
    sandbox
        .shared
        .fill_all(&src)
        .map_err(io_error("filling the workspace"))?;
    let cloned = cow::clone_tree(&src, &dir).map_err(io_error("linking the workspace"))?;
    let inodes = Arc::new(cloned.inodes);
    sandbox.shared.add(inodes.clone());
    cleanup.keep();
    let created_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_millis() as u64;
    Ok(Snapshot {
        inner: Arc::new(Frozen {
            path,
            dir,
            inodes,
            listing: cloned.listing,
            manifest: Manifest {
                format: SNAPSHOT_FORMAT,
                image: image.name().to_string(),
                image_digest: image.digest().to_string(),
                mount: sandbox.mount.clone(),
                cwd: sandbox.workdir.clone(),
                env: sandbox.env.clone(),
                disk_bytes: sandbox.limits.disk_bytes,
                disk_inodes: sandbox.limits.disk_inodes,
                files: cloned.files,
                bytes: cloned.bytes,
                entries: cloned.entries,
                created_ms,
                labels,
            },
            digest: None,
        }),
    })
}

struct RemoveOnError(Option<PathBuf>);

impl RemoveOnError {
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for RemoveOnError {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            crate::scratch::remove_all(&p);
        }
    }
}

/// Fills the (fresh, empty) workspace of `sandbox` from `snapshot`, charging its quota.
pub(crate) fn fill(sandbox: &SandboxState, snapshot: &Snapshot) -> Result<(), SnapshotError> {
    let m = snapshot.manifest();
    if !sandbox.quota.reserve_inodes(m.entries) {
        return Err(SnapshotError::TooLarge(format!(
            "{} entries do not fit in the sandbox's disk quota",
            m.entries
        )));
    }
    if !sandbox.quota.reserve_bytes(m.bytes) {
        sandbox.quota.release_inodes(m.entries);
        return Err(SnapshotError::TooLarge(format!(
            "{} bytes do not fit in the sandbox's disk quota",
            m.bytes
        )));
    }
    let dst = sandbox
        .workspace_view()
        .map_err(io_error("opening the workspace"))?;
    sandbox.shared.add(snapshot.inodes().clone());
    sandbox
        .shared
        .fill_lazily(snapshot.inner.clone(), &dst)
        .map_err(io_error("linking the snapshot"))?;
    Ok(())
}

/// Bounds on a tar read back.
#[derive(Clone, Copy, Debug)]
pub struct TarLimits {
    /// Bytes of file data, and entries (files, directories, symlinks).
    pub max_bytes: u64,
    pub max_entries: u64,
    /// Accept symlinks whose target leaves the workspace (`/usr/bin/python3`): only for a
    /// tar this host wrote itself and checked by digest. The host never follows a symlink
    /// of a snapshot either way; inside the sandbox one resolves in its own file system.
    pub links_may_leave: bool,
}

/// Reads a snapshot tar into a new frozen tree under `temp_root`. The tar is untrusted:
/// only directories, regular files and symlinks under `workspace/` are accepted; no
/// absolute path or `..`, no device, FIFO, hard link or sparse entry, no symlink whose
/// target leaves the workspace; set-user-id, set-group-id bits are dropped; sizes and
/// entry counts are checked against `limits` (and the manifest's own limits) before
/// anything is written. Any refusal leaves nothing behind. `image_known` says whether the
/// manifest's image is served here.
pub(crate) fn read_tar(
    input: impl Read,
    temp_root: &Path,
    limits: TarLimits,
    image_known: impl Fn(&str) -> bool,
) -> Result<Snapshot, SnapshotError> {
    // Headers and padding come on top of the data: a block per entry, and the end.
    let max_tar = limits
        .max_bytes
        .saturating_add(limits.max_entries.saturating_add(16).saturating_mul(2048))
        .saturating_add(MAX_MANIFEST_BYTES);
    let mut hashing = HashingReader {
        inner: uncompressed(input, max_tar)?,
        hash: Sha256::new(),
    };
    let (path, dir) = new_tree(temp_root)?;
    let cleanup = RemoveOnError(Some(path.clone()));
    let manifest = {
        let mut archive = tar::Archive::new(&mut hashing);
        extract(&mut archive, &dir, limits, &image_known)?
    };
    let cloned = cow::list_tree(&dir).map_err(io_error("reading the snapshot"))?;
    // The rest of the stream (tar's end blocks, padding) belongs to the digest too.
    io::copy(&mut hashing, &mut io::sink()).map_err(io_error("reading the tar"))?;
    let digest = format!("sha256:{}", hex(&hashing.hash.finalize()));
    cleanup.keep();
    let manifest = Manifest {
        files: cloned.files,
        bytes: cloned.bytes,
        entries: cloned.entries,
        ..manifest
    };
    Ok(Snapshot {
        inner: Arc::new(Frozen {
            path,
            dir,
            inodes: Arc::new(cloned.inodes),
            listing: cloned.listing,
            manifest,
            digest: Some(digest),
        }),
    })
}

struct HashingReader<R> {
    inner: R,
    hash: Sha256,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
}

fn invalid(m: impl Into<String>) -> SnapshotError {
    SnapshotError::Invalid(m.into())
}

/// The components of an entry's path under `workspace/`, refusing anything else.
fn tree_path(raw: &Path) -> Result<Option<PathBuf>, SnapshotError> {
    let mut comps = raw.components();
    let first = comps.next();
    if !matches!(first, Some(Component::Normal(n)) if n == TREE_PREFIX) {
        return Err(invalid(format!(
            "entry `{}` is outside `{TREE_PREFIX}/`",
            raw.display()
        )));
    }
    let mut out = PathBuf::new();
    for c in comps {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => {
                return Err(invalid(format!(
                    "entry `{}` climbs out of the workspace",
                    raw.display()
                )));
            }
        }
    }
    Ok((!out.as_os_str().is_empty()).then_some(out))
}

/// Whether a symlink at `at` (under the workspace) with `target` stays inside the workspace
/// mounted at `mount`.
/// The sandbox path (its components) of `rel` in a workspace mounted at `mount`.
fn sandbox_path(mount: &str, rel: &Path) -> Vec<String> {
    let mount = mount.split('/').filter(|c| !c.is_empty()).map(String::from);
    let rel = rel.components().filter_map(|c| match c {
        Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
        _ => None,
    });
    mount.chain(rel).collect()
}

fn link_stays_inside(at: &Path, target: &Path, mount: &str) -> bool {
    let mut depth: Vec<()> = Vec::new();
    let rel = if target.is_absolute() {
        match target.strip_prefix(mount) {
            Ok(r) => r.to_path_buf(),
            Err(_) => return false,
        }
    } else {
        for _ in at.parent().into_iter().flat_map(|p| p.components()) {
            depth.push(());
        }
        target.to_path_buf()
    };
    for c in rel.components() {
        match c {
            Component::Normal(_) => depth.push(()),
            Component::ParentDir => {
                if depth.pop().is_none() {
                    return false;
                }
            }
            Component::CurDir => {}
            _ => return false,
        }
    }
    true
}

fn extract<R: Read>(
    archive: &mut tar::Archive<R>,
    dir: &Dir,
    limits: TarLimits,
    image_known: &impl Fn(&str) -> bool,
) -> Result<Manifest, SnapshotError> {
    let mut entries = archive
        .entries()
        .map_err(|e| invalid(format!("reading the tar: {e}")))?;
    let read_err = |e: io::Error| invalid(format!("reading the tar: {e}"));
    // The manifest comes first.
    let mut first = entries
        .next()
        .ok_or_else(|| invalid("the tar is empty"))?
        .map_err(read_err)?;
    if first.path().map_err(read_err)?.as_ref() != Path::new(MANIFEST_NAME) {
        return Err(invalid(format!("the first entry is not {MANIFEST_NAME}")));
    }
    if first.header().size().map_err(read_err)? > MAX_MANIFEST_BYTES {
        return Err(invalid("the manifest is too large"));
    }
    let mut text = Vec::new();
    (&mut first)
        .take(MAX_MANIFEST_BYTES)
        .read_to_end(&mut text)
        .map_err(read_err)?;
    let json: serde_json::Value =
        serde_json::from_slice(&text).map_err(|e| invalid(format!("manifest: {e}")))?;
    let manifest = Manifest::from_json(&json)?;
    if !image_known(&manifest.image) {
        return Err(SnapshotError::ForeignImage(manifest.image));
    }
    let max_bytes = limits.max_bytes.min(manifest.disk_bytes);
    let max_entries = limits.max_entries.min(manifest.disk_inodes);
    // Entries and file bytes read so far, against the limits.
    let (mut count, mut bytes) = (0u64, 0u64);
    let mut dirs: Vec<(PathBuf, u32, u64)> = Vec::new();
    for entry in entries {
        let mut entry = entry.map_err(read_err)?;
        let raw = entry.path().map_err(read_err)?.into_owned();
        let header = entry.header();
        let kind = header.entry_type();
        let mode = header.mode().map_err(read_err)?;
        let mtime = header.mtime().unwrap_or(0);
        let size = header.size().map_err(read_err)?;
        let Some(rel) = tree_path(&raw)? else {
            if kind.is_dir() {
                dirs.push((PathBuf::from("."), mode & 0o1777, mtime));
                continue;
            }
            return Err(invalid("the workspace root must be a directory"));
        };
        count += 1;
        if count > max_entries {
            return Err(SnapshotError::TooLarge(format!(
                "more than {max_entries} entries"
            )));
        }
        let exists = |e: io::Error| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                invalid(format!("entry `{}` appears twice", raw.display()))
            } else {
                invalid(format!("entry `{}`: {e}", raw.display()))
            }
        };
        if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            match dir.symlink_metadata(parent) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(invalid(format!(
                        "entry `{}` is under something that is not a directory",
                        raw.display()
                    )));
                }
                Err(_) => dir.create_dir_all(parent).map_err(exists)?,
            }
        }
        match kind {
            tar::EntryType::Directory => {
                match dir.symlink_metadata(&rel) {
                    Ok(m) if m.is_dir() => {}
                    Ok(_) => return Err(exists(io::ErrorKind::AlreadyExists.into())),
                    Err(_) => dir.create_dir(&rel).map_err(exists)?,
                }
                dirs.push((rel, mode & 0o1777, mtime));
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                bytes = bytes.saturating_add(size);
                if bytes > max_bytes {
                    return Err(SnapshotError::TooLarge(format!(
                        "more than {max_bytes} bytes of files"
                    )));
                }
                let file = dir
                    .open_with(
                        &rel,
                        OpenOptions::new()
                            .write(true)
                            .create_new(true)
                            .custom_flags(libc::O_NOFOLLOW)
                            .mode(0o600),
                    )
                    .map_err(exists)?;
                let mut file = file.into_std();
                let copied = io::copy(&mut (&mut entry).take(size), &mut file)
                    .map_err(io_error("writing a file of the snapshot"))?;
                if copied != size {
                    return Err(invalid(format!("entry `{}` is truncated", raw.display())));
                }
                let times = std::fs::FileTimes::new()
                    .set_modified(UNIX_EPOCH + Duration::from_secs(mtime))
                    .set_accessed(UNIX_EPOCH + Duration::from_secs(mtime));
                file.set_times(times)
                    .and_then(|_| {
                        file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(
                            mode & 0o777,
                        ))
                    })
                    .map_err(io_error("writing a file of the snapshot"))?;
            }
            tar::EntryType::Link => {
                // A second name of a file already read (a guest's hard link).
                let target = entry
                    .link_name()
                    .map_err(read_err)?
                    .ok_or_else(|| invalid(format!("link `{}` has no target", raw.display())))?
                    .into_owned();
                let target = tree_path(&target)?
                    .filter(|t| dir.symlink_metadata(t).is_ok_and(|m| m.is_file()))
                    .ok_or_else(|| {
                        invalid(format!(
                            "hard link `{}` does not name a file read before it",
                            raw.display()
                        ))
                    })?;
                dir.hard_link(&target, dir, &rel).map_err(exists)?;
            }
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name()
                    .map_err(read_err)?
                    .ok_or_else(|| invalid(format!("symlink `{}` has no target", raw.display())))?
                    .into_owned();
                if !limits.links_may_leave && !link_stays_inside(&rel, &target, &manifest.mount) {
                    return Err(invalid(format!(
                        "symlink `{}` -> `{}` leads out of the workspace",
                        raw.display(),
                        target.display()
                    )));
                }
                let name = rel.file_name().unwrap_or_default();
                let parent = match rel.parent().filter(|p| !p.as_os_str().is_empty()) {
                    Some(p) => dir
                        .open_dir(p)
                        .map_err(|e| invalid(format!("entry `{}`: {e}", raw.display())))?,
                    None => dir.try_clone().map_err(io_error("opening the snapshot"))?,
                };
                let target = linktarget::encode(
                    &sandbox_path(&manifest.mount, &rel),
                    &target.to_string_lossy(),
                );
                cow::symlink_at(Path::new(&target), &parent, name).map_err(exists)?;
            }
            other => {
                return Err(invalid(format!(
                    "entry `{}` is a {other:?}: only directories, files and symlinks may be \
                     in a snapshot",
                    raw.display()
                )));
            }
        }
    }
    // Directories last, deepest first: a read-only mode would refuse their entries, and
    // making entries changes their times.
    dirs.sort_by_key(|(p, _, _)| std::cmp::Reverse(p.components().count()));
    for (rel, mode, mtime) in dirs {
        let d = if rel == Path::new(".") {
            dir.try_clone()
        } else {
            dir.open_dir(&rel)
        }
        .map_err(io_error("setting a directory's mode"))?;
        let file = d
            .open(".")
            .map_err(io_error("setting a directory's mode"))?
            .into_std();
        let times = std::fs::FileTimes::new()
            .set_modified(UNIX_EPOCH + Duration::from_secs(mtime))
            .set_accessed(UNIX_EPOCH + Duration::from_secs(mtime));
        file.set_times(times)
            .and_then(|_| file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode)))
            .map_err(io_error("setting a directory's mode"))?;
    }
    Ok(manifest)
}
