//! The on-disk cache of compiled components (`.cwasm`), keyed by the component's bytes and
//! the engine's compatibility hash, so a changed program or engine never loads a stale
//! artifact.
//!
//! Loading a `.cwasm` runs native code in this process, so nothing is loaded that this cache
//! cannot vouch for:
//! - the directory is made `0700`, and refused (with a clear error) when it, or a directory
//!   above it, can be written by another user (a sticky, root-owned `/tmp` is fine);
//! - every entry this cache writes gets a stamp: its device, inode, size, modification and
//!   change times and content hash, sealed with a key only this user can read
//!   (HMAC-SHA-256, `.key` in the directory, `0600`). An entry whose stamp is missing, does
//!   not verify, or no longer matches the file (any rewrite changes its change time, which
//!   no unprivileged process can set back) is compiled again, never loaded, unless its
//!   whole content still hashes to the sealed content hash (a cache copied into a
//!   container image: new inodes, same bytes), checked once and stamped again;
//! - entries are opened without following symlinks and must belong to this user and be
//!   writable by no one else.
//!
//! Checking a stamp costs one `fstat` and a hash of a few dozen bytes, not a hash of the
//! whole file: starts stay cheap. The operator (root included) is trusted; other users, and
//! guests, are not.

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, bail};
use bytes::Bytes;
use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::{Engine, Result};

use crate::strip;

/// Compiled components on disk, or (without a directory) compiled in memory each time a
/// runtime first needs them.
#[derive(Clone, Debug)]
pub(crate) struct CompileCache {
    dir: Option<CacheDir>,
}

#[derive(Clone, Debug)]
struct CacheDir {
    path: PathBuf,
    key: [u8; 32],
}

impl CompileCache {
    /// A cache in `dir` (created `0700` if missing), or none. A directory other users could
    /// write is refused.
    pub(crate) fn open(dir: Option<PathBuf>) -> anyhow::Result<Self> {
        let Some(path) = dir else {
            return Ok(CompileCache { dir: None });
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&path)
            .with_context(|| format!("creating the compile cache {}", path.display()))?;
        let path = path
            .canonicalize()
            .with_context(|| format!("opening the compile cache {}", path.display()))?;
        check_private(&path).with_context(|| {
            format!(
                "refusing the compile cache {}: compiled code loaded from it runs in this \
                 process (choose another with WASBOX_CACHE_DIR)",
                path.display()
            )
        })?;
        let key = load_key(&path)
            .with_context(|| format!("reading the key of the compile cache {}", path.display()))?;
        Ok(CompileCache {
            dir: Some(CacheDir { path, key }),
        })
    }

    /// The cache's directory, if it has one (canonical).
    pub(crate) fn dir(&self) -> Option<&Path> {
        self.dir.as_ref().map(|d| d.path.as_path())
    }

    /// The default cache directory: `$WASBOX_CACHE_DIR`, else `$XDG_CACHE_HOME/wasbox`,
    /// else `~/.cache/wasbox`.
    pub(crate) fn default_dir() -> Option<PathBuf> {
        if let Some(d) = std::env::var_os("WASBOX_CACHE_DIR") {
            return Some(PathBuf::from(d));
        }
        if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
            return Some(PathBuf::from(d).join("wasbox"));
        }
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("wasbox"))
    }

    /// Loads the component for `wasm`, compiling it (and storing the result) when no
    /// trusted compiled copy exists. `digest` is the SHA-256 of `wasm` where the caller
    /// has it already (computed here otherwise). Compilation runs on a blocking thread, or
    /// on the calling one under a current-thread runtime.
    pub(crate) async fn load(
        &self,
        engine: &Engine,
        name: &str,
        wasm: Bytes,
        digest: Option<[u8; 32]>,
    ) -> Result<Component> {
        // A current-thread runtime (`wasbox run`: one job, then exit) has no other work to
        // keep going meanwhile; starting a blocking thread would cost more than the load.
        if tokio::runtime::Handle::current().runtime_flavor()
            == tokio::runtime::RuntimeFlavor::CurrentThread
        {
            return load_blocking(engine, self.dir.as_ref(), name, &wasm, digest);
        }
        let engine = engine.clone();
        let dir = self.dir.clone();
        let name = name.to_string();
        tokio::task::spawn_blocking(move || {
            load_blocking(&engine, dir.as_ref(), &name, &wasm, digest)
        })
        .await
        .map_err(|e| wasmtime::Error::msg(format!("compiler thread panicked: {e}")))?
    }
}

impl CompileCache {
    /// The component cached for a program whose bytes have `digest`, without its bytes:
    /// `None` when there is no cache or no usable entry (for a program that is costly to
    /// make, such as a pre-initialised one, whose bytes exist only once made).
    pub(crate) async fn cached(
        &self,
        engine: &Engine,
        name: &str,
        digest: [u8; 32],
    ) -> Option<Component> {
        let dir = self.dir.clone()?;
        let engine = engine.clone();
        let name = name.to_string();
        tokio::task::spawn_blocking(move || {
            let path = entry_path(&dir, &engine, &name, digest);
            load_trusted(&engine, &dir, &name, &path)
        })
        .await
        .ok()
        .flatten()
    }

    /// Compiles `wasm` for `engine` without caching it (a program used once, such as the
    /// instrumented form of one being pre-initialised).
    pub(crate) async fn compile_uncached(
        &self,
        engine: &Engine,
        name: &str,
        wasm: Bytes,
    ) -> Result<Component> {
        let engine = engine.clone();
        let name = name.to_string();
        tokio::task::spawn_blocking(move || {
            load_compiled(&engine, &name, &compile(&engine, &name, &wasm)?)
        })
        .await
        .map_err(|e| wasmtime::Error::msg(format!("compiler thread panicked: {e}")))?
    }
}

/// Whether another user could change what is at `path`: the directory itself must be this
/// user's and writable only by them; every directory above it must be writable only by its
/// owner (root or this user), unless it is sticky (like `/tmp`).
fn check_private(path: &Path) -> anyhow::Result<()> {
    let me = unsafe { libc::geteuid() };
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.is_dir() {
        bail!("it is not a directory");
    }
    if meta.uid() != me {
        bail!("it belongs to user {}, not to this user ({me})", meta.uid());
    }
    if meta.mode() & 0o022 != 0 {
        bail!("other users can write it (mode {:o})", meta.mode() & 0o7777);
    }
    for dir in path.ancestors().skip(1) {
        let m = std::fs::metadata(dir)?;
        let owner_ok = m.uid() == 0 || m.uid() == me;
        let sticky = m.mode() & 0o1000 != 0;
        if !owner_ok || (m.mode() & 0o022 != 0 && !sticky) {
            bail!(
                "{} above it can be changed by other users (owner {}, mode {:o})",
                dir.display(),
                m.uid(),
                m.mode() & 0o7777
            );
        }
    }
    Ok(())
}

fn open_nofollow(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// The cache's key: 32 random bytes in `.key`, made on first use, readable by this user only.
///
/// Processes starting together on a new cache (tests, a fleet on one volume) may all make
/// one: each writes its key whole under a name of its own, then links it to `.key`, which
/// never replaces a key already there. So `.key` is never seen half-written, and whoever
/// loses the race reads the winner's. On a filesystem without hard links the key is
/// renamed into place instead: a key placed at the same moment may then replace it, and
/// the entries sealed with the replaced key are compiled again (their stamps no longer
/// verify), never trusted.
fn load_key(dir: &Path) -> anyhow::Result<[u8; 32]> {
    load_key_linking(dir, |from, to| std::fs::hard_link(from, to))
}

fn load_key_linking(
    dir: &Path,
    link: impl Fn(&Path, &Path) -> std::io::Result<()>,
) -> anyhow::Result<[u8; 32]> {
    static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let path = dir.join(".key");
    let me = unsafe { libc::geteuid() };
    for _ in 0..4 {
        if let Ok(mut f) = open_nofollow(&path) {
            let m = f.metadata()?;
            let mut key = [0u8; 32];
            if m.uid() == me
                && m.mode() & 0o077 == 0
                && m.len() == 32
                && f.read_exact(&mut key).is_ok()
            {
                return Ok(key);
            }
            // Not one this cache made: every stamp sealed with it is worthless too.
            tracing::warn!(path = %path.display(), "replacing an unusable compile cache key");
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        let mut key = [0u8; 32];
        File::open("/dev/urandom")?.read_exact(&mut key)?;
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = dir.join(format!(".key.{}.{n}", std::process::id()));
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        let placed = f
            .write_all(&key)
            .and_then(|()| f.sync_all())
            .and_then(|()| link(&tmp, &path));
        match placed {
            Ok(()) => {
                let _ = std::fs::remove_file(&tmp);
                return Ok(key);
            }
            // Another process placed its key first: read that one.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let _ = std::fs::remove_file(&tmp);
                continue;
            }
            // No hard links here: rename it into place, then read what is there.
            Err(_) => {
                if let Err(e) = std::fs::rename(&tmp, &path) {
                    let _ = std::fs::remove_file(&tmp);
                    return Err(e.into());
                }
            }
        }
    }
    bail!("the key kept changing while it was read (another process replacing it?)")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// HMAC-SHA-256 (RFC 2104).
fn hmac(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(key);
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// What a stamp binds an entry to.
fn identity(meta: &std::fs::Metadata) -> String {
    format!(
        "{} {} {} {}.{} {}.{}",
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec()
    )
}

/// A stamp: what the entry is (name, identity, content hash) sealed with the key, then a
/// second seal over the name, size and content hash alone, which still holds after the
/// cache is copied elsewhere (a container image's layer: new device, inode and times).
fn stamp_text(key: &[u8; 32], file_name: &str, meta: &std::fs::Metadata, content: &str) -> String {
    let body = format!("wasbox-cache 2 {file_name} {} {content}", identity(meta));
    format!(
        "{body} {} {}\n",
        hex(&hmac(key, body.as_bytes())),
        hex(&hmac(
            key,
            portable_body(file_name, meta.len(), content).as_bytes()
        ))
    )
}

fn portable_body(file_name: &str, len: u64, content: &str) -> String {
    format!("wasbox-cache-content 2 {file_name} {len} {content}")
}

fn stamp_path(entry: &Path) -> PathBuf {
    let mut p = entry.as_os_str().to_owned();
    p.push(".stamp");
    PathBuf::from(p)
}

/// Whether the entry at `path` is one this cache wrote and nobody changed since.
fn trusted(dir: &CacheDir, path: &Path) -> bool {
    let me = unsafe { libc::geteuid() };
    let Ok(file) = open_nofollow(path) else {
        return false;
    };
    let Ok(meta) = file.metadata() else {
        return false;
    };
    if !meta.is_file() || meta.uid() != me || meta.mode() & 0o022 != 0 {
        return false;
    }
    let mut stamp = String::new();
    let read =
        open_nofollow(&stamp_path(path)).and_then(|f| f.take(1024).read_to_string(&mut stamp));
    if read.is_err() {
        return false;
    }
    // The content hash recorded at write time, then the seal over everything.
    let Some(content) = stamp.split_whitespace().nth(8) else {
        return false;
    };
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let expected = stamp_text(&dir.key, &file_name, &meta, content);
    if constant_time_eq(expected.as_bytes(), stamp.as_bytes()) {
        return true;
    }
    // The file is not where the stamp was written (a copied or unpacked cache): trusted
    // only when its whole content still hashes to the sealed content hash. Costs a hash of
    // the file; a writable cache gets a fresh stamp so that the next start is cheap again.
    let Some(portable) = stamp.split_whitespace().nth(10) else {
        return false;
    };
    let seal = hex(&hmac(
        &dir.key,
        portable_body(&file_name, meta.len(), content).as_bytes(),
    ));
    if !constant_time_eq(seal.as_bytes(), portable.as_bytes()) {
        return false;
    }
    let mut hasher = Sha256::new();
    let mut file = file;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(_) => return false,
        }
    }
    if !constant_time_eq(hex(&hasher.finalize()).as_bytes(), content.as_bytes()) {
        return false;
    }
    let fresh = stamp_text(&dir.key, &file_name, &meta, content);
    let _ = tempfile::NamedTempFile::new_in(&dir.path).and_then(|mut t| {
        t.write_all(fresh.as_bytes())?;
        t.persist(stamp_path(path)).map_err(|e| e.error)?;
        Ok(())
    });
    true
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn load_blocking(
    engine: &Engine,
    dir: Option<&CacheDir>,
    name: &str,
    wasm: &[u8],
    digest: Option<[u8; 32]>,
) -> Result<Component> {
    let Some(dir) = dir else {
        return load_compiled(engine, name, &compile(engine, name, wasm)?);
    };
    let digest = digest.unwrap_or_else(|| Sha256::digest(wasm).into());
    let path = entry_path(dir, engine, name, digest);
    if let Some(c) = load_trusted(engine, dir, name, &path) {
        return Ok(c);
    }
    let bytes = compile(engine, name, wasm)?;
    if let Err(e) = store(dir, &path, &bytes) {
        tracing::warn!(program = name, error = %format!("{e:#}"), "could not cache the compiled component");
    }
    load_compiled(engine, name, &bytes)
}

/// The entry's path: named by the program's digest, how it is compiled (without its
/// function names), the engine's compatibility hash and the CPU features code may use.
fn entry_path(dir: &CacheDir, engine: &Engine, name: &str, digest: [u8; 32]) -> PathBuf {
    let mut hasher = Sha256::new();
    hasher.update(digest);
    hasher.update(b"without names");
    std::hash::Hash::hash(
        &engine.precompile_compatibility_hash(),
        &mut HashWriter(&mut hasher),
    );
    hasher.update(crate::engine::host_cpu());
    let key = hex(&hasher.finalize());
    dir.path.join(format!("{name}-{}.cwasm", &key[..32]))
}

/// The entry at `path`, if this cache made it and it loads.
fn load_trusted(engine: &Engine, dir: &CacheDir, name: &str, path: &Path) -> Option<Component> {
    if trusted(dir, path) {
        // SAFETY: the file is one this cache wrote with `precompile_component` of an engine
        // with the same compatibility hash (part of its name), unchanged since (its stamp).
        match unsafe { Component::deserialize_file(engine, path) } {
            Ok(c) => return Some(c),
            Err(e) => {
                tracing::warn!(program = name, error = %e, "ignoring unusable cached component")
            }
        }
    } else if path.exists() {
        tracing::warn!(program = name, path = %path.display(), "compiling again: the cached component has no valid stamp");
    }
    None
}

/// Loads what [`compile`] just made into `engine`.
fn load_compiled(engine: &Engine, name: &str, bytes: &[u8]) -> Result<Component> {
    // SAFETY: `bytes` was produced by `precompile_component` of the compiling engine for
    // this engine in this process (its configuration with a compiler).
    unsafe { Component::deserialize(engine, bytes) }
        .map_err(|e| e.context(format!("loading compiled `{name}`")))
}

/// Compiles `wasm` (without its function names) for `engine` with the process's compiling
/// engine for it.
fn compile(engine: &Engine, name: &str, wasm: &[u8]) -> Result<Vec<u8>> {
    let started = std::time::Instant::now();
    let stripped = strip::without_names(wasm);
    let bytes = crate::engine::compiler_for(engine)?
        .precompile_component(stripped.as_deref().unwrap_or(wasm))
        .map_err(|e| e.context(format!("compiling `{name}`")))?;
    tracing::info!(
        program = name,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "compiled"
    );
    Ok(bytes)
}

/// Writes an entry and its stamp, each atomically (a reader sees the old file or the whole
/// new one), the entry first.
fn store(dir: &CacheDir, path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let _ = std::fs::remove_file(stamp_path(path));
    let mut tmp = tempfile::NamedTempFile::new_in(&dir.path)?;
    tmp.write_all(bytes)?;
    tmp.persist(path)?;
    let meta = open_nofollow(path)?.metadata()?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let content = hex(&Sha256::digest(bytes));
    let mut stamp = tempfile::NamedTempFile::new_in(&dir.path)?;
    stamp.write_all(stamp_text(&dir.key, &file_name, &meta, &content).as_bytes())?;
    stamp.persist(stamp_path(path))?;
    prune(dir, SystemTime::now());
    Ok(())
}

/// How long an entry may go unused before it is removed. Each build of `wasbox` (new
/// programs or a new engine) compiles a set of entries of its own, some 130 MB, and without
/// this the cache would grow with every upgrade.
const MAX_IDLE: Duration = Duration::from_secs(30 * 24 * 3600);

/// Removes the entries (and their stamps) that no process has used for [`MAX_IDLE`]; run
/// whenever an entry is stored, which is rare. Use is read from access times: loading an
/// entry maps it and reads its stamp, which updates them (at most daily under the usual
/// `relatime`). On a `noatime` mount an entry lives [`MAX_IDLE`] from its compile and is
/// compiled again at its next use. A process still holding a removed entry keeps its map.
fn prune(dir: &CacheDir, now: SystemTime) {
    let Ok(entries) = std::fs::read_dir(&dir.path) else {
        return;
    };
    let last_use = |p: &Path| std::fs::symlink_metadata(p).and_then(|m| m.accessed()).ok();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|x| x != "cwasm") {
            continue;
        }
        let used = last_use(&path).max(last_use(&stamp_path(&path)));
        if used.is_some_and(|t| now.duration_since(t).is_ok_and(|idle| idle > MAX_IDLE)) {
            let _ = std::fs::remove_file(stamp_path(&path));
            if std::fs::remove_file(&path).is_ok() {
                tracing::info!(path = %path.display(), "removed a compiled component unused for 30 days");
            }
        }
    }
}

/// Feeds `Hash` output into a SHA-256 hasher.
struct HashWriter<'a>(&'a mut Sha256);

impl std::hash::Hasher for HashWriter<'_> {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without hard links (some network and FUSE filesystems) the key is renamed into
    /// place: it is made once, kept private, read back the same, and nothing else is left,
    /// even with many makers at once.
    #[test]
    fn a_key_is_made_where_hard_links_are_refused() {
        let no_links = |_: &Path, _: &Path| Err(std::io::Error::from_raw_os_error(libc::EPERM));
        let dir = tempfile::tempdir().unwrap();
        let key = load_key_linking(dir.path(), no_links).unwrap();
        let meta = std::fs::metadata(dir.path().join(".key")).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(load_key_linking(dir.path(), no_links).unwrap(), key);
        assert_eq!(load_key(dir.path()).unwrap(), key);
        let start = std::sync::Arc::new(std::sync::Barrier::new(8));
        let fresh = tempfile::tempdir().unwrap();
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (dir, start) = (fresh.path().to_path_buf(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    load_key_linking(&dir, no_links).unwrap()
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let left: Vec<_> = std::fs::read_dir(fresh.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, [".key"]);
    }

    /// Many makers of a new cache at once all end with the same key, and leave nothing else.
    #[test]
    fn a_key_made_by_many_at_once_is_one_key() {
        for _ in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let start = std::sync::Arc::new(std::sync::Barrier::new(8));
            let keys: Vec<[u8; 32]> = (0..8)
                .map(|_| {
                    let (dir, start) = (dir.path().to_path_buf(), start.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        load_key(&dir).unwrap()
                    })
                })
                .collect::<Vec<_>>()
                .into_iter()
                .map(|t| t.join().unwrap())
                .collect();
            assert!(keys.iter().all(|k| *k == keys[0]));
            let left: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(left, [".key"]);
        }
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // Checked against Python's `hmac.new(b"\x0b" * 32, b"Hi There", "sha256")`.
        let key = [0x0bu8; 32];
        let mac = hex(&hmac(&key, b"Hi There"));
        assert_eq!(
            mac,
            "198a607eb44bfbc69903a0f1cf2bbdc5ba0aa3f3d9ae3c1c7a3b1696a0b68cf7"
        );
    }

    #[test]
    fn a_directory_others_can_write_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let base = tempfile::tempdir().unwrap();
        let open = base.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = CompileCache::open(Some(open.clone())).unwrap_err();
        assert!(
            format!("{e:#}").contains("other users can write it"),
            "{e:#}"
        );
        // Below a directory others can write (and not sticky): refused too.
        let below = open.join("cache");
        let e = CompileCache::open(Some(below)).unwrap_err();
        assert!(
            format!("{e:#}").contains("can be changed by other users"),
            "{e:#}"
        );
        // A fresh directory is made private.
        let fresh = base.path().join("fresh");
        let cache = CompileCache::open(Some(fresh.clone())).unwrap();
        assert!(cache.dir().is_some());
        let mode = std::fs::metadata(&fresh).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let key = std::fs::metadata(fresh.join(".key")).unwrap();
        assert_eq!((key.mode() & 0o777, key.len()), (0o600, 32));
    }

    #[test]
    fn entries_unused_for_a_month_go_when_another_is_stored() {
        let base = tempfile::tempdir().unwrap();
        let cache = CompileCache::open(Some(base.path().join("c"))).unwrap();
        let dir = cache.dir.as_ref().unwrap();
        let (old, recent) = (
            dir.path.join("old-0123.cwasm"),
            dir.path.join("recent-0123.cwasm"),
        );
        store(dir, &old, b"old code").unwrap();
        store(dir, &recent, b"recent code").unwrap();
        let notes = dir.path.join("notes.txt");
        std::fs::write(&notes, "not an entry").unwrap();
        let long_ago = SystemTime::now() - MAX_IDLE - Duration::from_secs(3600);
        let unused_since = |p: &Path, t: SystemTime| {
            let f = File::options().write(true).open(p).unwrap();
            f.set_times(std::fs::FileTimes::new().set_accessed(t))
                .unwrap();
        };
        for p in [&old, &stamp_path(&old), &notes] {
            unused_since(p, long_ago);
        }
        // An entry whose stamp was read lately (a load) is in use.
        unused_since(&recent, long_ago);
        store(dir, &dir.path.join("new-0123.cwasm"), b"new code").unwrap();
        assert!(!old.exists() && !stamp_path(&old).exists());
        assert!(recent.exists() && stamp_path(&recent).exists());
        assert!(notes.exists(), "only entries are removed");
        assert!(trusted(dir, &dir.path.join("new-0123.cwasm")));
    }

    #[test]
    fn only_entries_this_cache_stamped_are_trusted() {
        let base = tempfile::tempdir().unwrap();
        let cache = CompileCache::open(Some(base.path().join("c"))).unwrap();
        let dir = cache.dir.as_ref().unwrap();
        let entry = dir.path.join("prog-0123.cwasm");
        store(dir, &entry, b"compiled code").unwrap();
        assert!(trusted(dir, &entry));
        // Rewritten in place with other bytes: refused.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&entry, b"planted code!").unwrap();
        assert!(!trusted(dir, &entry));
        // Copied (a new inode and times) with the same bytes, as a container image's layer
        // does: trusted by its sealed content hash, and stamped again.
        store(dir, &entry, b"compiled code").unwrap();
        let copy = dir.path.join("copy");
        std::fs::copy(&entry, &copy).unwrap();
        std::fs::rename(&copy, &entry).unwrap();
        assert!(trusted(dir, &entry));
        let restamped = std::fs::read_to_string(stamp_path(&entry)).unwrap();
        assert!(restamped.contains(&std::fs::metadata(&entry).unwrap().ino().to_string()));
        // A file dropped in with no stamp, or with a stamp from another key.
        store(dir, &entry, b"compiled code").unwrap();
        let other = CacheDir {
            path: dir.path.clone(),
            key: [7; 32],
        };
        assert!(!trusted(&other, &entry));
        std::fs::remove_file(stamp_path(&entry)).unwrap();
        assert!(!trusted(dir, &entry));
        // A symlink in place of an entry is never followed.
        store(dir, &entry, b"compiled code").unwrap();
        let link = dir.path.join("link-0123.cwasm");
        std::os::unix::fs::symlink(&entry, &link).unwrap();
        std::fs::copy(stamp_path(&entry), stamp_path(&link)).unwrap();
        assert!(!trusted(dir, &link));
    }
}
