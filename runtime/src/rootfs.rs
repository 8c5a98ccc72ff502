//! The root a sandbox sees around its workspace and `/tmp`: a small read-only tree the
//! runtime makes, so that `cd /`, `cd ../..`, `ls /usr/bin`, `cat /etc/os-release`, `id` and
//! `head -c 16 /dev/urandom` behave as on a Linux machine.
//!
//! - `/usr/bin` names every program of the image (empty placeholders; the image runs them),
//!   `/bin` is a link to it, `/usr/local/bin` is empty;
//! - `/etc` holds `passwd`, `group`, `hostname`, `hosts`, `os-release` and `shells` written
//!   here, never the host's;
//! - `/dev` holds empty placeholders named `null`, `zero`, `full`, `random` and `urandom`
//!   (so that `ls /dev` lists them): opening one opens the host's character device of that
//!   name (and only those five), and `stat` of them answers a character device; `stdin`,
//!   `stdout` and `stderr` there open the process's own standard streams;
//! - `/proc` and `/sys` hold the few files Linux programs read about the machine (uptime,
//!   memory, CPUs, boot id, cgroup limits: see [`crate::procfs`]), placeholders here too:
//!   opening one gives what it says for the opening sandbox at that moment;
//! - the mount point's directories and `tmp` exist, so a listing of `/` shows them (the
//!   workspace and `/tmp` themselves are their own preopens, found first by a guest).
//!
//! Nothing of the host's own root is visible. The tree lives in the runtime's scratch root
//! and is shared, read-only (`FsPerms::ReadOnly`), by every sandbox with the same image and
//! mount point: one descriptor per tree, none per sandbox.

use crate::sync::lock;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd as _, FromRawFd as _};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, Result};

use crate::image::RootFile;
use crate::procfs::ProcFile;

/// The user every sandbox process runs as, by name, uid and home.
pub const SANDBOX_USER: &str = "root";
/// The host name a sandbox reports (`hostname`, `uname -n`, `/etc/hostname`).
pub const SANDBOX_HOSTNAME: &str = "wasbox";

/// A cap-std view of a directory descriptor, for the host's own operations (which cap-std
/// keeps inside the directory, like the guest's). It never closes the descriptor: a
/// borrowed view ([`DirView::of`]) lives no longer than the file; a shared one
/// ([`DirView::shared`]) holds the file's `Arc`.
pub(crate) struct DirView<'a> {
    dir: ManuallyDrop<cap_std::fs::Dir>,
    _keep: Option<Arc<std::fs::File>>,
    _file: PhantomData<&'a std::fs::File>,
}

impl<'a> DirView<'a> {
    pub(crate) fn of(file: &'a std::fs::File) -> Self {
        // SAFETY: the view does not own the descriptor (ManuallyDrop: it is never closed
        // through it) and lives no longer than `file` (the lifetime ties them).
        let dir = unsafe { cap_std::fs::Dir::from_raw_fd(file.as_raw_fd()) };
        DirView {
            dir: ManuallyDrop::new(dir),
            _keep: None,
            _file: PhantomData,
        }
    }

    /// A view that keeps the directory open as long as it lives.
    pub(crate) fn shared(file: Arc<std::fs::File>) -> Self {
        // SAFETY: as above; the view holds the `Arc`, so the descriptor outlives it.
        let dir = unsafe { cap_std::fs::Dir::from_raw_fd(file.as_raw_fd()) };
        DirView {
            dir: ManuallyDrop::new(dir),
            _keep: Some(file),
            _file: PhantomData,
        }
    }
}

impl std::ops::Deref for DirView<'_> {
    type Target = cap_std::fs::Dir;
    fn deref(&self) -> &cap_std::fs::Dir {
        &self.dir
    }
}

/// A device of `/dev` a guest may open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Device {
    Null,
    Zero,
    Full,
    Random,
    Urandom,
    /// The opening process's own standard streams (never a host device).
    Stdin,
    Stdout,
    Stderr,
    /// A file of `/proc` or `/sys`, made for the opening sandbox.
    Proc(ProcFile),
}

impl Device {
    fn named(name: &str) -> Option<Device> {
        Some(match name {
            "null" => Device::Null,
            "zero" => Device::Zero,
            "full" => Device::Full,
            "random" => Device::Random,
            "urandom" => Device::Urandom,
            "stdin" => Device::Stdin,
            "stdout" => Device::Stdout,
            "stderr" => Device::Stderr,
            _ => return None,
        })
    }

    /// The device a sandbox path names (`/dev/NAME`, as normalized components).
    pub(crate) fn at(parts: &[String]) -> Option<Device> {
        match parts {
            [dev, name] if dev == "dev" => Device::named(name),
            _ => None,
        }
    }

    fn host_path(self) -> &'static str {
        match self {
            Device::Null => "/dev/null",
            Device::Zero => "/dev/zero",
            Device::Full => "/dev/full",
            Device::Random => "/dev/random",
            Device::Urandom => "/dev/urandom",
            // The host's null device stands for them where an identity or a placeholder
            // descriptor is needed; what is read and written goes to the process's streams.
            Device::Stdin | Device::Stdout | Device::Stderr | Device::Proc(_) => "/dev/null",
        }
    }

    /// Whether it is one of the process's own standard streams.
    pub(crate) fn is_std(self) -> bool {
        matches!(self, Device::Stdin | Device::Stdout | Device::Stderr)
    }

    /// What identifies the device (its inode and device numbers on the host), for the
    /// inode a guest's `stat` reports.
    pub(crate) fn identity(self) -> (u64, u64) {
        if let Device::Proc(f) = self {
            return (0x7072_6f63, f.index());
        }
        std::fs::metadata(self.host_path()).map_or((0, 0), |m| (m.ino(), m.rdev()))
    }

    /// Opens the host's device. Writing to `random` and `urandom` is refused (on Linux it
    /// feeds the host's entropy pool).
    /// The standard streams are the caller's to open, never a host path: refused here.
    pub(crate) fn open(self, read: bool, write: bool) -> std::io::Result<std::fs::File> {
        if self.is_std() || matches!(self, Device::Proc(_)) {
            return Err(std::io::ErrorKind::PermissionDenied.into());
        }
        let path = self.host_path();
        if write && matches!(self, Device::Random | Device::Urandom) {
            return Err(std::io::ErrorKind::PermissionDenied.into());
        }
        std::fs::OpenOptions::new()
            .read(read || !write)
            .write(write)
            .open(path)
    }
}

/// A tree's image, workspace mount point and volumes' mount points.
type TreeKey = (String, String, Vec<String>);

/// Trees with volumes' mount points one process makes at most (see [`RootTrees::get`]).
const MAX_POINT_TREES: usize = 16;

/// One root tree, read-only, shared by the sandboxes of one image and mount point.
pub(crate) struct RootTree {
    pub(crate) dir: wasmtime_wasi::filesystem::Dir,
    /// (device, inode) of the tree's directories that hold devices or `/proc` files, with
    /// their paths in the tree (`""` for its top).
    dirs: Vec<((u64, u64), String)>,
}

impl RootTree {
    /// The device a guest opens by `path` under the directory `at` (a descriptor of this
    /// tree or of another one), if it is one.
    pub(crate) fn device_at(&self, at: &std::fs::File, path: &str) -> Option<Device> {
        let parts: Vec<&str> = path
            .split('/')
            .filter(|p| !p.is_empty() && *p != ".")
            .collect();
        let meta = at.metadata().ok()?;
        let id = (meta.dev(), meta.ino());
        let (_, base) = self.dirs.iter().find(|(d, _)| *d == id)?;
        let mut full: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
        for p in parts {
            if p == ".." {
                full.pop()?;
            } else {
                full.push(p);
            }
        }
        match full.as_slice() {
            ["dev", name] => Device::named(name),
            _ => ProcFile::at(&full.join("/")).map(Device::Proc),
        }
    }

    /// The tree as cap-std sees it, for the host's own reads (`< /etc/passwd`).
    pub(crate) fn view(&self) -> DirView<'_> {
        DirView::of(&self.dir.dir)
    }
}

/// The root trees of a runtime, made on first use. With a compile cache they are kept in
/// it (`roots/`, one directory per content, made once and renamed into place, so runtimes
/// started later, `wasbox run` included, only open them); without one (or with one that
/// cannot be written) they are made under the runtime's scratch root and removed with it.
pub(crate) struct RootTrees {
    /// `roots/` of the compile cache, when there is one and it can be written.
    cache: Option<PathBuf>,
    /// The runtime's scratch root, and the directory made there for trees on first need.
    scratch_root: PathBuf,
    scratch: std::sync::OnceLock<tempfile::TempDir>,
    made: Mutex<HashMap<TreeKey, Arc<RootTree>>>,
}

/// The devices of `/dev`, by name.
const DEVICES: [&str; 8] = [
    "full", "null", "random", "stderr", "stdin", "stdout", "urandom", "zero",
];

/// The version of a tree's layout, part of its name in the cache.
const LAYOUT: u32 = 4;

impl RootTrees {
    pub(crate) fn new(scratch: &Path, cache: Option<&Path>) -> Result<Self> {
        let cache = cache.and_then(|c| {
            let dir = c.join("roots");
            std::os::unix::fs::DirBuilderExt::mode(
                std::fs::DirBuilder::new().recursive(true),
                0o700,
            )
            .create(&dir)
            .ok()
            .map(|()| dir)
        });
        Ok(RootTrees {
            cache,
            scratch_root: scratch.to_path_buf(),
            scratch: std::sync::OnceLock::new(),
            made: Mutex::new(HashMap::new()),
        })
    }

    /// The tree of `image` (whose programs `programs` lists, asked only when the tree is
    /// not made yet) with the workspace at `mount` and the directories `points` (where
    /// volumes are attached, in normal form): from the cache, else (no cache, or one that
    /// cannot be written, as in a read-only container image) made in the scratch root.
    pub(crate) fn get<'p, P: AsRef<[&'p str]>>(
        &self,
        image: &str,
        programs: impl FnOnce() -> P,
        files: &[RootFile],
        mount: &str,
        points: &[String],
    ) -> Result<Arc<RootTree>> {
        let key = (image.to_string(), mount.to_string(), points.to_vec());
        let mut made = lock(&self.made);
        if let Some(t) = made.get(&key) {
            return Ok(t.clone());
        }
        // Trees with volumes' mount points are few and small: made in the scratch root (in
        // memory, gone with the process), at most MAX_POINT_TREES, only for images whose
        // tree holds no files of their own; past that a sandbox gets the plain tree (its
        // volumes still work, `ls` of their parent does not show them).
        if !points.is_empty()
            && (!files.is_empty()
                || made.keys().filter(|k| !k.2.is_empty()).count() >= MAX_POINT_TREES)
        {
            drop(made);
            return self.get(image, programs, files, mount, &[]);
        }
        let programs = programs();
        let programs = programs.as_ref();
        let cached = self
            .cache
            .as_deref()
            .filter(|_| points.is_empty())
            .and_then(|base| cached_tree(base, programs, files, mount, points).ok());
        let tree = match cached {
            Some(t) => t,
            None => {
                let base = match self.scratch.get() {
                    Some(b) => b,
                    None => {
                        // Not made again if the scratch root was removed under the runtime.
                        let b = tempfile::Builder::new()
                            .prefix("wasbox-root-")
                            .tempdir_in(&self.scratch_root)
                            .context("creating the sandboxes' root directory")?;
                        self.scratch.get_or_init(|| b)
                    }
                };
                let path = base.path().join(made.len().to_string());
                std::fs::create_dir(&path)
                    .and_then(|()| fill_tree(&path, programs, files, mount, points))
                    .with_context(|| format!("creating the sandbox root {}", path.display()))?;
                open_tree(&path)?
            }
        };
        let tree = Arc::new(tree);
        made.insert(key, tree.clone());
        Ok(tree)
    }
}

/// The tree for this content in the cache directory `base`: opened when it is there, else
/// made beside it and renamed into place (a runtime that races this one makes its own and
/// keeps whichever got there first).
fn cached_tree(
    base: &Path,
    programs: &[&str],
    files: &[RootFile],
    mount: &str,
    points: &[String],
) -> Result<RootTree> {
    use std::hash::{Hash as _, Hasher as _};
    let mut names: Vec<&str> = programs.to_vec();
    names.sort_unstable();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (
        LAYOUT,
        env!("CARGO_PKG_VERSION"),
        &names,
        mount,
        DEVICES,
        points,
    )
        .hash(&mut h);
    for f in files {
        (&f.path, f.tar, f.digest).hash(&mut h);
    }
    let path = base.join(format!("{:016x}", h.finish()));
    if path.join("etc/os-release").is_file() {
        return open_tree(&path);
    }
    let tmp = tempfile::Builder::new()
        .prefix(".making-")
        .tempdir_in(base)
        .context("creating a sandbox root in the cache")?;
    fill_tree(tmp.path(), programs, files, mount, points)
        .with_context(|| format!("creating the sandbox root {}", tmp.path().display()))?;
    if path.join("etc/os-release").is_file() {
        // Finished by another runtime while this one made its own (which goes with `tmp`):
        // that tree may be open in its sandboxes already, so it stays.
        return open_tree(&path);
    }
    if path.exists() {
        // Left unfinished (a crash before `os-release` was written, or tampering): made again.
        let _ = std::fs::remove_dir_all(&path);
    }
    match std::fs::rename(tmp.path(), &path) {
        Ok(()) => {
            let _ = tmp.keep();
        }
        // Made by another runtime meanwhile: ours goes with `tmp`.
        Err(_) if path.join("etc/os-release").is_file() => {}
        Err(e) => {
            return Err(e).with_context(|| format!("storing the sandbox root {}", path.display()));
        }
    }
    open_tree(&path)
}

/// Writes a tree's contents into the empty directory `path`.
fn fill_tree(
    path: &Path,
    programs: &[&str],
    files: &[RootFile],
    mount: &str,
    points: &[String],
) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let dirs = [
        "dev",
        "etc",
        "tmp",
        "usr/bin",
        "usr/local/bin",
        "root",
        "home",
    ];
    // A mount point with `.` or `..` in it is refused when the sandbox is made.
    let mount_parts: Vec<&str> = mount.split('/').filter(|p| !p.is_empty()).collect();
    let mount_dir =
        (!mount_parts.iter().any(|p| matches!(*p, "." | ".."))).then(|| mount_parts.join("/"));
    // Volumes' mount points (checked: absolute, no `..`), so that `ls /mnt` shows `data`.
    let points = points
        .iter()
        .map(|p| p.trim_start_matches('/'))
        .filter(|p| !p.split('/').any(|c| matches!(c, "" | "." | "..")));
    for d in dirs
        .iter()
        .copied()
        .chain(mount_dir.as_deref())
        .chain(points)
    {
        std::fs::create_dir_all(path.join(d))?;
    }
    std::os::unix::fs::symlink("usr/bin", path.join("bin"))?;
    for name in DEVICES {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .open(path.join("dev").join(name))?;
    }
    for (file, _) in crate::procfs::FILES {
        let at = path.join(file);
        if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o444)
            .open(at)?;
    }
    for name in programs {
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            continue;
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o755)
            .open(path.join("usr/bin").join(name))?;
    }
    for f in files {
        let parts: Vec<&str> = f.path.split('/').collect();
        if parts.iter().any(|p| matches!(*p, "" | "." | "..")) {
            return Err(std::io::Error::other(format!(
                "an image's file may not be at {:?}",
                f.path
            )));
        }
        let at = path.join(&f.path);
        if f.tar {
            std::fs::create_dir_all(&at)?;
            let mut archive = tar::Archive::new(&f.bytes[..]);
            archive.set_preserve_permissions(false);
            for entry in archive.entries()? {
                // `unpack_in` refuses what would land outside the directory.
                if !entry?.unpack_in(&at)? {
                    return Err(std::io::Error::other(format!(
                        "an entry of {:?} leaves its directory",
                        f.path
                    )));
                }
            }
            continue;
        }
        if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o444)
            .open(&at)?
            .write_all(&f.bytes)?;
    }
    let version = env!("CARGO_PKG_VERSION");
    let etc = [
        (
            "passwd",
            "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n".to_string(),
        ),
        ("group", "root:x:0:\nuser:x:1000:\n".to_string()),
        ("hostname", format!("{SANDBOX_HOSTNAME}\n")),
        (
            "hosts",
            format!("127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.1.1\t{SANDBOX_HOSTNAME}\n"),
        ),
        ("shells", "/bin/sh\n/bin/bash\n".to_string()),
        // Last: its presence marks a finished tree.
        (
            "os-release",
            format!(
                "NAME=\"wasbox\"\nID=wasbox\nVERSION_ID=\"{version}\"\n\
                 PRETTY_NAME=\"wasbox {version} (WebAssembly sandbox)\"\n"
            ),
        ),
    ];
    for (name, text) in etc {
        std::fs::write(path.join("etc").join(name), text)?;
    }
    Ok(())
}

/// Opens a finished tree, read-only for guests.
fn open_tree(path: &Path) -> Result<RootTree> {
    let open = || -> std::io::Result<RootTree> {
        let dir = cap_std::fs::Dir::open_ambient_dir(path, cap_std::ambient_authority())?;
        let id = |m: cap_std::fs::Metadata| {
            use cap_std::fs::MetadataExt as _;
            (m.dev(), m.ino())
        };
        let mut dirs = vec![(id(dir.dir_metadata()?), String::new())];
        let mut names: Vec<String> = vec!["dev".into()];
        for (file, _) in crate::procfs::FILES {
            let mut at = std::path::Path::new(file).parent();
            while let Some(d) = at.filter(|d| !d.as_os_str().is_empty()) {
                names.push(d.to_string_lossy().into_owned());
                at = d.parent();
            }
        }
        names.sort();
        names.dedup();
        for name in names {
            dirs.push((id(dir.symlink_metadata(&name)?), name));
        }
        Ok(RootTree {
            dir: wasmtime_wasi::filesystem::Dir::new(
                dir.into_std_file(),
                wasmtime_wasi::FsPerms::ReadOnly,
                wasmtime_wasi::OpenMode::READ,
                true,
            ),
            dirs,
        })
    };
    open().with_context(|| format!("opening the sandbox root {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_names_programs_and_devices_only() {
        let scratch = tempfile::tempdir().unwrap();
        let trees = RootTrees::new(scratch.path(), None).unwrap();
        let t = trees
            .get("base", || ["sh", "ls", "../x"], &[], "/home/user", &[])
            .unwrap();
        let again = trees
            .get("base", || ["sh"], &[], "/home/user", &[])
            .unwrap();
        assert!(Arc::ptr_eq(&t, &again), "one tree per image and mount");
        let view = t.view();
        assert!(view.is_file("usr/bin/ls") && view.is_file("bin/sh"));
        assert!(!view.exists("x") && view.is_dir("home/user"));
        let top = &t.dir.dir;
        assert_eq!(t.device_at(top, "dev/urandom"), Some(Device::Urandom));
        assert_eq!(t.device_at(top, "./dev//null"), Some(Device::Null));
        assert_eq!(t.device_at(top, "dev/sda"), None);
        assert_eq!(t.device_at(top, "etc/passwd"), None);
        let dev = view.open_dir("dev").unwrap().into_std_file();
        assert_eq!(t.device_at(&dev, "zero"), Some(Device::Zero));
        assert!(Device::Urandom.open(false, true).is_err());
    }

    #[test]
    fn a_cached_tree_is_made_once_and_remade_when_unfinished() {
        let scratch = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let roots = cache.path().join("roots");
        let trees = || RootTrees::new(scratch.path(), Some(cache.path())).unwrap();
        let listing = || {
            let mut v: Vec<_> = std::fs::read_dir(&roots)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            v.sort();
            v
        };
        trees()
            .get("base", || ["sh", "ls"], &[], "/workspace", &[])
            .unwrap();
        let first = listing();
        assert_eq!(first.len(), 1, "{first:?}");
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        let before = ino(&first[0]);
        // Another runtime opens it; nothing new is made.
        let t = trees()
            .get("base", || ["ls", "sh"], &[], "/workspace", &[])
            .unwrap();
        assert_eq!(listing(), first);
        assert_eq!(ino(&first[0]), before);
        assert!(t.view().is_file("usr/bin/sh"));
        // Another mount point is another tree.
        trees()
            .get("base", || ["sh", "ls"], &[], "/home/user", &[])
            .unwrap();
        assert_eq!(listing().len(), 2);
        // An unfinished one is made again, whole.
        std::fs::remove_file(first[0].join("etc/os-release")).unwrap();
        let t = trees()
            .get("base", || ["sh", "ls"], &[], "/workspace", &[])
            .unwrap();
        assert!(t.view().is_file("etc/os-release"));
        assert_eq!(listing().len(), 2, "{:?}", listing());
        // Nothing was made in the scratch root (each runtime's part of it is empty).
        let kept = RootTrees::new(scratch.path(), Some(cache.path())).unwrap();
        kept.get("base", || ["sh", "ls"], &[], "/workspace", &[])
            .unwrap();
        assert_eq!(in_scratch(&kept), 0);
        // A cache that cannot be used (here `roots` turned into a file after the runtime
        // started): the tree is made in the scratch root.
        let broken = tempfile::tempdir().unwrap();
        let trees = RootTrees::new(scratch.path(), Some(broken.path())).unwrap();
        std::fs::remove_dir(broken.path().join("roots")).unwrap();
        std::fs::write(broken.path().join("roots"), "").unwrap();
        let t = trees
            .get("base", || ["sh"], &[], "/workspace", &[])
            .unwrap();
        assert!(t.view().is_file("usr/bin/sh"));
        assert_eq!(in_scratch(&trees), 1);
    }

    /// How many trees a runtime made in its part of the scratch root.
    fn in_scratch(trees: &RootTrees) -> usize {
        trees
            .scratch
            .get()
            .map_or(0, |d| std::fs::read_dir(d.path()).unwrap().count())
    }
}
