//! Sandboxes: a workspace directory preopened at a mount point, a private `/tmp`, an
//! environment, limits and a network policy, shared by every process run in it.
//!
//! Host code here reaches the workspace only through its cap-std directory handle, which
//! refuses any path (`..`, absolute, or a symlink) that leads out of it. Nothing here runs
//! a program: that is the host layer's job.

use crate::sync::lock;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use anyhow::{Context as _, Result, bail};
use cap_std::fs::{OpenOptions, OpenOptionsExt as _};

use crate::lazydir::{self, Kind, LazyDir};
use crate::limits::{Budget, Limits, Quota};
pub(crate) use crate::rootfs::DirView;
use crate::rootfs::{Device, RootTree};
use crate::scratch::ScratchRoot;
use crate::volume::VolumeMount;

pub use crate::net::NetworkPolicy;

/// How to make a sandbox.
#[derive(Clone, Debug)]
pub struct SandboxConfig {
    /// Host directory to use as the workspace; a fresh temporary directory (removed with the
    /// sandbox) when `None`.
    pub workspace: Option<PathBuf>,
    /// Where the workspace appears inside the sandbox.
    pub mount: String,
    /// The working directory of its jobs that name none: an absolute path, or one relative
    /// to the mount; the mount itself when `None`.
    pub workdir: Option<String>,
    /// Image to run programs from; the runtime's default image when `None`.
    pub image: Option<String>,
    /// Environment every job starts with (a job's own variables come after).
    pub env: Vec<(String, String)>,
    /// Limits for every job; the runtime's limits when `None`.
    pub limits: Option<Limits>,
    /// Where its processes may connect, within the node's egress policy (nowhere by
    /// default); replaceable while it runs ([`Sandbox::set_network`]).
    pub network: NetworkPolicy,
    /// How the sandbox is named in the node's logs (a session or sandbox id).
    pub label: Option<String>,
    /// Volumes attached at paths of its tree (see [`crate::volume`]).
    pub volumes: Vec<VolumeMount>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            workspace: None,
            mount: DEFAULT_MOUNT.to_string(),
            workdir: None,
            image: None,
            env: Vec::new(),
            limits: None,
            network: NetworkPolicy::None,
            label: None,
            volumes: Vec::new(),
        }
    }
}

/// Default mount point of the workspace.
pub const DEFAULT_MOUNT: &str = "/workspace";

impl SandboxConfig {
    pub fn workspace(mut self, dir: impl Into<PathBuf>) -> Self {
        self.workspace = Some(dir.into());
        self
    }
    pub fn mount(mut self, mount: impl Into<String>) -> Self {
        self.mount = mount.into();
        self
    }
    /// The working directory of jobs that name none (see [`SandboxConfig::workdir`]).
    pub fn workdir(mut self, dir: impl Into<String>) -> Self {
        self.workdir = Some(dir.into());
        self
    }
    /// Where its processes may connect (within the node's egress policy).
    pub fn network(mut self, policy: NetworkPolicy) -> Self {
        self.network = policy;
        self
    }
    /// How the sandbox is named in the node's logs.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }
    pub fn image(mut self, image: impl Into<String>) -> Self {
        self.image = Some(image.into());
        self
    }
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = Some(limits);
        self
    }
    /// Attaches a volume (see [`crate::volume`]).
    pub fn volume(mut self, mount: VolumeMount) -> Self {
        self.volumes.push(mount);
        self
    }
}

/// A volume attached to a sandbox.
pub(crate) struct Mounted {
    /// Where (in normal form: `/a/b`).
    pub(crate) path: String,
    pub(crate) read_only: bool,
    /// Its directory of files, open while attached (one descriptor per volume).
    pub(crate) dir: wasmtime_wasi::filesystem::Dir,
    pub(crate) attachment: crate::volume::Attachment,
}

/// Which tree of a sandbox a path or descriptor is in: what it is charged to, and whether
/// it may be changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tree {
    /// The workspace or `/tmp` (the sandbox's own quota).
    Own,
    /// An attached volume, by its index in the sandbox's list.
    Volume(usize),
}

/// What every process of a sandbox shares: the workspace, the private `/tmp`, the
/// environment, the limits and the counters they are checked against. The workspace (when it
/// is a temporary one) and `/tmp` are removed when the last holder lets go.
pub(crate) struct SandboxState {
    pub(crate) workspace: PathBuf,
    /// The workspace directory, open only while in use (see [`crate::lazydir`]).
    dir: LazyDir,
    pub(crate) mount: String,
    /// The working directory of jobs that name none (in normal form: `/a/b`).
    pub(crate) workdir: String,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) limits: Limits,
    /// Processes alive now.
    pub(crate) live: AtomicU32,
    /// Linear memory all processes of the sandbox hold together.
    pub(crate) memory: Arc<Budget>,
    /// Bytes and inodes its processes may add to the workspace and `/tmp`.
    pub(crate) quota: Arc<Quota>,
    /// The sandbox's private `/tmp`: a host directory of its own, removed with the sandbox.
    /// Like the workspace, it holds no descriptor while idle (see [`Tmp`]).
    pub(crate) tmp: Option<Tmp>,
    /// The workspace, when it is a temporary directory made for this sandbox.
    scratch: Option<tempfile::TempDir>,
    /// Where an empty temporary workspace goes at the end, for the next sandbox.
    spares: Option<Arc<crate::scratch::Spares>>,
    /// The workspace and `/tmp` are in memory (tmpfs): their file operations may run on the
    /// calling thread. On a disk they go to the blocking pool, so that a slow device never
    /// holds a thread that serves requests.
    pub(crate) in_memory: bool,
    /// The read-only tree around the workspace and `/tmp` (`/usr/bin`, `/etc`, `/dev`).
    pub(crate) root: Option<Arc<RootTree>>,
    /// Files of the workspace shared with snapshots and forks, copied before a change.
    pub(crate) shared: crate::cow::Shared,
    /// Held (shared) by the host's own changes of the tree (the files API) and (exclusive)
    /// while a snapshot is taken, so that none lands half in it.
    changes: std::sync::RwLock<()>,
    /// The processes alive now, by pid (for `ps`), and the next pid.
    pub(crate) procs: std::sync::Mutex<std::collections::BTreeMap<u32, ProcEntry>>,
    next_pid: AtomicU32,
    /// Where it may connect, and what it has used of the network.
    pub(crate) net: Arc<crate::net::SandboxNet>,
    /// Its own boot id (`/proc/sys/kernel/random/boot_id`) and when it was made (`uptime`).
    pub(crate) boot_id: std::sync::Mutex<String>,
    pub(crate) made: std::time::Instant,
    /// Volumes attached, none inside another.
    pub(crate) volumes: Vec<Mounted>,
    /// Whether one of them is inside the workspace (so paths there are checked for it).
    volume_inside: bool,
}

/// A process alive in a sandbox.
pub(crate) struct ProcEntry {
    pub(crate) ppid: u32,
    pub(crate) argv: Vec<String>,
    pub(crate) started: std::time::SystemTime,
    /// The linear memory it holds (its memory limiter keeps this up to date).
    pub(crate) memory: Arc<std::sync::atomic::AtomicUsize>,
    /// Ends it as a signal would (`kill PID` from any job of the sandbox).
    pub(crate) stop: Option<Stopper>,
    /// The CPU time it has used (`ps`'s `TIME`).
    pub(crate) cpu: Arc<crate::cpu::CpuAccount>,
}

/// Ends a process as the signal given would.
pub(crate) type Stopper = Arc<dyn Fn(u8) + Send + Sync>;

/// Longest command line kept for `ps` (the rest is cut).
const PS_ARGV_BYTES: usize = 4096;

impl SandboxState {
    /// A new pid, unique in the sandbox.
    pub(crate) fn new_pid(&self) -> u32 {
        self.next_pid
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// Records a live process; its memory counter comes back.
    pub(crate) fn register(
        &self,
        pid: u32,
        ppid: u32,
        argv: &[String],
        stop: Option<Stopper>,
        cpu: Arc<crate::cpu::CpuAccount>,
    ) -> Arc<std::sync::atomic::AtomicUsize> {
        let mut kept = Vec::new();
        let mut room = PS_ARGV_BYTES;
        for a in argv {
            if room == 0 {
                break;
            }
            let cut: String = a.chars().take(room).collect();
            room = room.saturating_sub(cut.len() + 1);
            kept.push(cut);
        }
        let memory = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let entry = ProcEntry {
            ppid,
            argv: kept,
            started: std::time::SystemTime::now(),
            memory: memory.clone(),
            stop,
            cpu,
        };
        lock(&self.procs).insert(pid, entry);
        memory
    }

    /// How a live process is ended, once it runs.
    pub(crate) fn set_stopper(&self, pid: u32, stop: Stopper) {
        if let Some(entry) = lock(&self.procs).get_mut(&pid) {
            entry.stop = Some(stop);
        }
    }

    /// Sends `signal` to the process `pid` (0: only whether it is alive). `false` when no
    /// such process is alive.
    pub(crate) fn signal(&self, pid: u32, signal: u8) -> bool {
        let stop = {
            let procs = lock(&self.procs);
            match procs.get(&pid) {
                Some(entry) => entry.stop.clone(),
                None => return false,
            }
        };
        if signal != 0
            && let Some(stop) = stop
        {
            stop(signal);
        }
        true
    }

    pub(crate) fn unregister(&self, pid: u32) {
        lock(&self.procs).remove(&pid);
    }
}

/// A removal of more entries than this leaves the calling thread for the blocking pool.
const INLINE_REMOVAL_INODES: u64 = 256;

impl Drop for SandboxState {
    /// Removes the temporary workspace and `/tmp`, whatever modes a guest left on them.
    fn drop(&mut self) {
        let tmp = self
            .tmp
            .take()
            .and_then(|t| t.made.into_inner())
            .map(|m| m.0);
        let mut scratch = self.scratch.take();
        if let (Some(dir), Some(spares)) = (scratch.take(), &self.spares) {
            // Kept only when nothing but the sandbox holds its handle (no process, no file
            // operation of the host): once the sandbox is gone, the spare's is the only one.
            scratch = match self.dir.take() {
                Some(handle) if Arc::strong_count(&handle.dir) == 1 => spares.give(dir, handle),
                _ => Some(dir),
            };
        }
        let dirs: Vec<PathBuf> = scratch.into_iter().chain(tmp).map(|t| t.keep()).collect();
        let remove = move || {
            for d in &dirs {
                crate::scratch::remove_all(d);
            }
        };
        // A small tree in memory goes at once (the common case: a job's fresh workspace);
        // a large one, or one on a disk, is removed on the blocking pool when there is one
        // (not under a current-thread runtime: `wasbox run` exits right after). The quota
        // stays charged until the files are gone.
        let small = self.in_memory && self.quota.used().1 <= INLINE_REMOVAL_INODES;
        match tokio::runtime::Handle::try_current() {
            Ok(rt)
                if !small
                    && rt.runtime_flavor() != tokio::runtime::RuntimeFlavor::CurrentThread =>
            {
                let quota = self.quota.clone();
                rt.spawn_blocking(move || {
                    remove();
                    drop(quota);
                });
            }
            _ => remove(),
        }
    }
}

impl SandboxState {
    /// Makes the workspace (or opens the given one) and the private `/tmp` under
    /// `temp_root`. `limits` apply when the config sets none.
    /// The sandbox's disk quota is charged to `node_disk` too.
    pub(crate) fn create(
        config: SandboxConfig,
        limits: &Limits,
        scratch_root: &ScratchRoot,
        node_disk: &Arc<Quota>,
        root: Option<Arc<RootTree>>,
    ) -> Result<Self> {
        let mut spare = None;
        let (workspace, scratch, workspace_in_memory) = match config.workspace {
            Some(dir) => {
                // A directory made here is private to this user; one that exists keeps the
                // mode its owner gave it.
                std::os::unix::fs::DirBuilderExt::mode(
                    std::fs::DirBuilder::new().recursive(true),
                    0o700,
                )
                .create(&dir)
                .with_context(|| format!("creating workspace {}", dir.display()))?;
                let dir = dir
                    .canonicalize()
                    .with_context(|| format!("opening workspace {}", dir.display()))?;
                let in_memory = crate::scratch::in_memory(&dir);
                (dir, None, in_memory)
            }
            None => {
                if let Some((t, handle)) = scratch_root.spares.as_ref().and_then(|s| s.take()) {
                    spare = Some(handle);
                    (t.path().to_path_buf(), Some(t), scratch_root.in_memory)
                } else {
                    // The root is canonical (see [`ScratchRoot`]), and so is a name made in it.
                    let t = temp_builder("wasbox-")
                        .tempdir_in(&scratch_root.path)
                        .context("creating a temporary workspace")?;
                    (t.path().to_path_buf(), Some(t), scratch_root.in_memory)
                }
            }
        };
        crate::lazydir::make_placeholders(&scratch_root.path)
            .context("making the sandbox's mount points")?;
        let dir = match spare {
            Some(handle) => LazyDir::open(handle),
            None => LazyDir::open(
                open_dir(&workspace)
                    .with_context(|| format!("opening workspace {}", workspace.display()))?,
            ),
        };
        let spares = scratch
            .is_some()
            .then(|| scratch_root.spares.clone())
            .flatten();
        let mount = normalize_mount(&config.mount)?;
        let workdir = match config.workdir.as_deref() {
            Some(w) if w.contains('\0') => bail!("workdir {w:?} is not a path"),
            Some(w) => format!("/{}", normalize(&mount, w).join("/")),
            None => mount.clone(),
        };
        let tmp = if mount == "/tmp" || mount.starts_with("/tmp/") {
            None
        } else {
            Some(Tmp {
                root: scratch_root.path.clone(),
                made: std::sync::OnceLock::new(),
                open: LazyDir::closed(),
            })
        };
        let volumes = attach(config.volumes, &mount)?;
        let volume_inside = volumes
            .iter()
            .any(|v| under(&normalize("/", &v.path), &mount).is_some());
        let limits = config.limits.unwrap_or_else(|| limits.clone());
        let in_memory = workspace_in_memory && (tmp.is_none() || scratch_root.in_memory);
        let net = Arc::new(crate::net::SandboxNet::new(
            config.network,
            config.label.unwrap_or_else(|| "-".to_string()),
            limits.net_connections,
            limits.net_bytes,
        ));
        Ok(SandboxState {
            net,
            in_memory,
            workspace,
            dir,
            mount,
            workdir,
            env: config.env,
            memory: Arc::new(Budget::new(limits.sandbox_memory_bytes)),
            quota: Arc::new(Quota::within(
                limits.disk_bytes,
                limits.disk_inodes,
                node_disk.clone(),
            )),
            limits,
            live: AtomicU32::new(0),
            tmp,
            scratch,
            spares,
            root,
            shared: crate::cow::Shared::default(),
            procs: Default::default(),
            next_pid: AtomicU32::new(1),
            changes: std::sync::RwLock::new(()),
            boot_id: std::sync::Mutex::new(crate::procfs::uuid_v4()),
            made: std::time::Instant::now(),
            volume_inside,
            volumes,
        })
    }

    /// Makes the mount points of volumes attached inside the workspace (as directories of
    /// the workspace, charged to it), once its files are in place.
    pub(crate) fn make_volume_points(&self) -> Result<()> {
        for v in &self.volumes {
            let Some(rel) = under(&normalize("/", &v.path), &self.mount) else {
                continue;
            };
            let workspace = self.workspace_view()?;
            self.shared.reach(&workspace, &rel, false)?;
            if workspace.symlink_metadata(&rel).is_ok_and(|m| m.is_dir()) {
                continue;
            }
            // One inode for each directory made, as a `mkdir -p` would take.
            let missing = crate::volume::missing_dirs(&workspace, &rel);
            if !self.quota.reserve_inodes(missing) {
                bail!(
                    "no room in the workspace's quota for the mount point {}",
                    v.path
                );
            }
            if let Err(e) = workspace.create_dir_all(&rel) {
                self.quota.release_inodes(missing);
                return Err(e).with_context(|| format!("making the mount point {}", v.path));
            }
        }
        Ok(())
    }

    /// The quota a tree's changes are charged to.
    pub(crate) fn quota_of(&self, tree: Tree) -> &Arc<Quota> {
        match tree {
            Tree::Volume(i) => &self.volumes[i].attachment.0.quota,
            Tree::Own => &self.quota,
        }
    }

    /// Whether a tree may not be changed.
    pub(crate) fn read_only(&self, tree: Tree) -> bool {
        matches!(tree, Tree::Volume(i) if self.volumes[i].read_only)
    }

    /// The volume whose directory `dir` is (the one every process gets).
    pub(crate) fn volume_of_dir(&self, dir: &Arc<std::fs::File>) -> Option<usize> {
        self.volumes
            .iter()
            .position(|v| Arc::ptr_eq(&v.dir.dir, dir))
    }

    /// The volume holding the sandbox path `parts`, and the path inside it.
    fn volume_at(&self, parts: &[String]) -> Option<(usize, PathBuf)> {
        self.volumes
            .iter()
            .enumerate()
            .find_map(|(i, v)| under(parts, &v.path).map(|r| (i, r)))
    }

    /// Fills every directory of the workspace still waiting to be (a fork's or a restored
    /// sandbox's: see [`crate::cow::Shared::fill_lazily`]) before the host walks the tree.
    pub(crate) fn fill_all(&self) -> std::io::Result<()> {
        let workspace = self.workspace_view()?;
        self.shared.fill_all(&workspace)
    }

    /// The workspace directory for one operation, opened again when it was closed (see
    /// [`crate::lazydir`]).
    pub(crate) fn workspace_dir(&self) -> std::io::Result<wasmtime_wasi::filesystem::Dir> {
        self.dir.get(|| open_dir(&self.workspace))
    }

    /// The workspace as cap-std sees it, for the host's own operations (which cap-std keeps
    /// inside it, like the guest's).
    pub(crate) fn workspace_view(&self) -> std::io::Result<DirView<'static>> {
        Ok(DirView::shared(self.workspace_dir()?.dir))
    }

    /// The directories every process of the sandbox sees, by where they are mounted: the
    /// placeholders of the workspace and `/tmp` (see [`crate::lazydir`]) and the read-only
    /// root.
    pub(crate) fn preopens(
        &self,
    ) -> impl Iterator<Item = (wasmtime_wasi::filesystem::Dir, String)> {
        let workspace = lazydir::placeholder(Kind::Workspace).map(|d| (d, self.mount.clone()));
        let tmp = self
            .tmp
            .as_ref()
            .and_then(|_| lazydir::placeholder(Kind::Tmp))
            .map(|d| (d, "/tmp".to_string()));
        let root = self.root.as_ref().map(|r| (r.dir.clone(), "/".to_string()));
        let volumes = self.volumes.iter().map(|v| (v.dir.clone(), v.path.clone()));
        workspace.into_iter().chain(tmp).chain(root).chain(volumes)
    }

    /// The sandbox path (its components, `.` and `..` resolved by name) of `path` on the
    /// workspace's or `/tmp`'s placeholder, `None` when `at` is no placeholder.
    pub(crate) fn sandbox_path(&self, at: &Arc<std::fs::File>, path: &str) -> Option<Vec<String>> {
        let base = match lazydir::placeholder_of(at) {
            Some(Kind::Workspace) => self.mount.as_str(),
            Some(Kind::Tmp) => "/tmp",
            None => &self.volumes[self.volume_of_dir(at)?].path,
        };
        Some(normalize(base, path))
    }

    /// The sandbox's own directory for a placeholder found in a process's table (`None`
    /// when `dir` is none, or it is `/tmp`'s and the sandbox has none).
    pub(crate) fn swap(
        &self,
        dir: &Arc<std::fs::File>,
    ) -> std::io::Result<Option<wasmtime_wasi::filesystem::Dir>> {
        match lazydir::placeholder_of(dir) {
            Some(Kind::Workspace) => self.workspace_dir().map(Some),
            Some(Kind::Tmp) => self.open_tmp(),
            None => Ok(None),
        }
    }

    /// Where a guest's path on the workspace or `/tmp` placeholder really leads, as a shell
    /// resolves it: the directory holding it (workspace, `/tmp` or the read-only root) and
    /// the path inside, each directory opened for the call (see [`crate::lazydir`]); a path
    /// that climbs out (`ls ..`, `../tmp/x`) goes where it leads. `None` when `at` is no
    /// placeholder.
    pub(crate) fn reroute(
        &self,
        at: &Arc<std::fs::File>,
        path: &str,
    ) -> std::io::Result<Option<(wasmtime_wasi::filesystem::Dir, String)>> {
        let direct = !path.starts_with('/') && !climbs(path);
        let base = match lazydir::placeholder_of(at) {
            Some(Kind::Workspace) if direct && !self.volume_inside => {
                return Ok(Some((self.workspace_dir()?, path.to_string())));
            }
            Some(Kind::Workspace) => self.mount.as_str(),
            Some(Kind::Tmp) if self.tmp.is_some() => "/tmp",
            Some(Kind::Tmp) => return Ok(None),
            None => match self.volume_of_dir(at) {
                Some(_) if direct => return Ok(None),
                Some(i) => self.volumes[i].path.as_str(),
                None => return Ok(None),
            },
        };
        let parts = normalize(base, path);
        let rel = |r: PathBuf| {
            let r = r.to_string_lossy().into_owned();
            if r.is_empty() { ".".to_string() } else { r }
        };
        if let Some((i, r)) = self.volume_at(&parts) {
            return Ok(Some((self.volumes[i].dir.clone(), rel(r))));
        }
        if let Some(r) = under(&parts, &self.mount) {
            return Ok(Some((self.workspace_dir()?, rel(r))));
        }
        if let Some(r) = under(&parts, "/tmp")
            && let Some(tmp) = self.open_tmp()?
        {
            return Ok(Some((tmp, rel(r))));
        }
        let Some(root) = self.root.as_ref() else {
            // No tree around the workspace: the call goes where it started, which refuses a
            // path that leaves it.
            return Ok(match lazydir::placeholder_of(at) {
                Some(Kind::Tmp) => self.open_tmp()?.map(|t| (t, path.to_string())),
                Some(Kind::Workspace) => Some((self.workspace_dir()?, path.to_string())),
                None => None,
            });
        };
        let r = if parts.is_empty() {
            ".".to_string()
        } else {
            parts.join("/")
        };
        Ok(Some((root.dir.clone(), r)))
    }

    /// The sandbox's `/tmp` for one operation (`None` when it has none): see [`Tmp::open`].
    pub(crate) fn open_tmp(&self) -> std::io::Result<Option<wasmtime_wasi::filesystem::Dir>> {
        self.tmp.as_ref().map(Tmp::open).transpose()
    }

    /// The directory (workspace or `/tmp`) holding a sandbox path, and the path inside it.
    /// The workspace's directories on the way are filled (see [`crate::cow::Shared::reach`]);
    /// what walks the tree below calls [`SandboxState::fill_all`] first.
    pub(crate) fn resolve(&self, cwd: &str, path: &str) -> Option<(DirView<'_>, PathBuf)> {
        self.resolve_in(cwd, path).map(|(dir, rel, _)| (dir, rel))
    }

    /// [`SandboxState::resolve`], with the tree the path is in (a volume's or the
    /// sandbox's own).
    pub(crate) fn resolve_in(&self, cwd: &str, path: &str) -> Option<(DirView<'_>, PathBuf, Tree)> {
        let parts = normalize(cwd, path);
        if let Some((i, rel)) = self.volume_at(&parts) {
            return Some((DirView::of(&self.volumes[i].dir.dir), rel, Tree::Volume(i)));
        }
        let (dir, rel) = self.resolve_own(&parts)?;
        Some((dir, rel, Tree::Own))
    }

    /// The workspace or `/tmp` path of `parts`.
    fn resolve_own(&self, parts: &[String]) -> Option<(DirView<'_>, PathBuf)> {
        match under(parts, &self.mount) {
            Some(rel) => {
                let dir = match self.workspace_view() {
                    Ok(dir) => dir,
                    Err(e) => {
                        tracing::warn!(error = %e, "opening the sandbox's workspace");
                        return None;
                    }
                };
                if let Err(e) = self.shared.reach(&dir, &rel, true) {
                    tracing::warn!(error = %e, "filling a directory of a restored workspace");
                }
                Some((dir, rel))
            }
            None => {
                let rel = under(parts, "/tmp")?;
                match self.open_tmp() {
                    Ok(Some(dir)) => Some((DirView::shared(dir.dir), rel)),
                    Ok(None) => None,
                    Err(e) => {
                        tracing::warn!(error = %e, "opening the sandbox's /tmp");
                        None
                    }
                }
            }
        }
    }

    /// Opens a file for a redirection: of the workspace or `/tmp` (`write`: `None` to read,
    /// `Some(append)` to write), or of the read-only root (its devices, and its files for
    /// reading). The error is the message a shell prints.
    pub(crate) fn open(
        &self,
        cwd: &str,
        path: &str,
        write: Option<bool>,
    ) -> Result<std::fs::File, String> {
        let Some((dir, rel, tree)) = self.resolve_in(cwd, path) else {
            return self.open_in_root(cwd, path, write.is_some());
        };
        if write.is_some() && self.read_only(tree) {
            return Err(format!("{path}: Read-only file system"));
        }
        if write.is_some() && tree == Tree::Own {
            self.workspace_view()
                .and_then(|w| self.shared.unshare(&w, &dir, &rel, true))
                .map_err(|e| format!("{path}: {}", io_message(&e)))?;
        }
        let mut o = OpenOptions::new();
        match write {
            None => o.read(true),
            Some(true) => o.append(true).create(true),
            Some(false) => o.write(true).create(true).truncate(true),
        };
        match dir.open_with(&rel, &o) {
            Ok(f) => Ok(f.into_std()),
            Err(e) => Err(format!("{path}: {}", io_message(&e))),
        }
    }

    /// Opens a path of the read-only root: one of its devices, or a file for reading.
    fn open_in_root(&self, cwd: &str, path: &str, write: bool) -> Result<std::fs::File, String> {
        let Some(root) = &self.root else {
            return Err(format!("{path}: Permission denied"));
        };
        let parts = normalize(cwd, path);
        if let Some(device) = Device::at(&parts) {
            return device
                .open(!write, write)
                .map_err(|e| format!("{path}: {}", io_message(&e)));
        }
        if write {
            return Err(format!("{path}: Read-only file system"));
        }
        let rel: PathBuf = parts.iter().collect();
        let rel = if parts.is_empty() {
            PathBuf::from(".")
        } else {
            rel
        };
        match root.view().open_with(&rel, OpenOptions::new().read(true)) {
            Ok(f) => Ok(f.into_std()),
            Err(e) => Err(format!("{path}: {}", io_message(&e))),
        }
    }

    /// Opens a file of the workspace (or of `/tmp`) for a `>` or `>>` redirection, within
    /// the sandbox's quota: a new file takes an inode, a truncated one gives its bytes back.
    pub(crate) fn open_output(
        &self,
        cwd: &str,
        path: &str,
        append: bool,
    ) -> Result<std::fs::File, String> {
        let (existing, tree) = match self.resolve_in(cwd, path) {
            Some((dir, rel, tree)) => (dir.metadata(&rel).ok(), tree),
            None => (None, Tree::Own),
        };
        if self.read_only(tree) {
            return Err(format!("{path}: Read-only file system"));
        }
        let quota = self.quota_of(tree);
        if existing.is_none() && !quota.reserve_inodes(1) {
            return Err(format!("{path}: No space left on device"));
        }
        let opened = self.open(cwd, path, Some(append));
        match (&opened, &existing) {
            (Err(_), None) => quota.release_inodes(1),
            (Ok(_), Some(meta)) if !append && meta.is_file() => quota.release_bytes(meta.len()),
            _ => {}
        }
        opened
    }

    /// The permission bits of a sandbox path (following a final symlink): of the
    /// workspace, `/tmp` or the read-only root (its devices are `rw-rw-rw-`).
    pub(crate) fn mode(&self, cwd: &str, path: &str) -> Option<u32> {
        use cap_std::fs::PermissionsExt as _;
        let meta = match self.resolve(cwd, path) {
            Some((dir, rel)) => dir.metadata(rel),
            None => {
                let parts = normalize(cwd, path);
                if Device::at(&parts).is_some() {
                    return Some(0o666);
                }
                let rel: PathBuf = parts.iter().collect();
                let rel = if parts.is_empty() {
                    PathBuf::from(".")
                } else {
                    rel
                };
                self.root.as_ref()?.view().metadata(rel)
            }
        };
        meta.ok().map(|m| m.permissions().mode() & 0o7777)
    }

    /// Sets the permission bits of a sandbox file (workspace or `/tmp`). Only permission
    /// bits (and the sticky bit of a directory) are set, never set-user-id or set-group-id;
    /// the mount points themselves, however named (a symlink to one included), keep the
    /// modes the operator gave them. The error is the message `chmod` prints.
    pub(crate) fn set_mode(&self, cwd: &str, path: &str, mode: u32) -> Result<(), String> {
        use cap_std::fs::{MetadataExt as _, PermissionsExt as _};
        let refused = || format!("{path}: Operation not permitted");
        let (dir, rel, tree) = self.resolve_in(cwd, path).ok_or_else(refused)?;
        if self.read_only(tree) {
            return Err(format!("{path}: Read-only file system"));
        }
        let meta = dir
            .metadata(&rel)
            .map_err(|e| format!("{path}: {}", io_message(&e)))?;
        let id = (meta.dev(), meta.ino());
        let volume_root = self.volumes.iter().any(|v| {
            v.dir.dir.metadata().is_ok_and(|m| {
                (
                    std::os::unix::fs::MetadataExt::dev(&m),
                    std::os::unix::fs::MetadataExt::ino(&m),
                ) == id
            })
        });
        let workspace = self
            .workspace_view()
            .map_err(|e| format!("{path}: {}", io_message(&e)))?;
        let workspace_id = workspace.dir_metadata().map(|m| (m.dev(), m.ino()));
        if workspace_id.ok() == Some(id)
            || volume_root
            || self.tmp.as_ref().is_some_and(|t| t.id() == Some(id))
        {
            return Err(refused());
        }
        self.shared
            .unshare(&workspace, &dir, &rel, true)
            .map_err(|e| format!("{path}: {}", io_message(&e)))?;
        let mask = if meta.is_dir() { 0o1777 } else { 0o777 };
        dir.set_permissions(&rel, cap_std::fs::Permissions::from_mode(mode & mask))
            .map_err(|e| format!("{path}: {}", io_message(&e)))
    }

    /// What the sandbox's `/proc` and `/sys` files say of it now (see [`crate::procfs`]).
    pub(crate) fn machine_facts(&self) -> crate::procfs::Facts {
        let procs = crate::sync::lock(&self.procs);
        crate::procfs::Facts {
            boot_id: crate::sync::lock(&self.boot_id).clone(),
            uptime: self.made.elapsed(),
            hostname: crate::rootfs::SANDBOX_HOSTNAME,
            memory_limit: self.memory.limit() as u64,
            memory_used: self.memory.used() as u64,
            processes: procs.len() as u32,
            max_processes: self.limits.max_processes,
            last_pid: procs.keys().next_back().copied().unwrap_or(1),
        }
    }

    /// The content of the `/proc` or `/sys` file at `path`, when it names one.
    pub(crate) fn machine_file(&self, path: &str) -> Option<String> {
        let abs = self.absolute(path);
        let file = crate::procfs::ProcFile::at(abs.trim_start_matches('/'))?;
        Some(crate::procfs::content(file, &self.machine_facts()))
    }

    /// Reads a file of the workspace or `/tmp` (a sandbox path, absolute or relative to the
    /// mount point), or of `/proc`, refusing more than `max` bytes. A symlink as the last
    /// component is refused.
    pub(crate) fn read_file(&self, path: &str, max: u64) -> Result<Vec<u8>, FileError> {
        if let Some(text) = self.machine_file(path) {
            return Ok(text.into_bytes());
        }
        let (dir, rel) = self.file_path(path)?;
        let file = dir
            .open_with(&rel, OpenOptions::new().read(true).custom_flags(NOFOLLOW))
            .map_err(|e| FileError::from_io(path, &e))?;
        let meta = file.metadata().map_err(|e| FileError::from_io(path, &e))?;
        if meta.is_dir() {
            return Err(FileError::IsDirectory(path.to_string()));
        }
        if meta.len() > max {
            return Err(FileError::TooLarge {
                path: path.to_string(),
                size: meta.len(),
                max,
            });
        }
        let mut data = Vec::with_capacity(meta.len() as usize);
        std::io::Read::read_to_end(&mut (&file).take(max + 1), &mut data)
            .map_err(|e| FileError::from_io(path, &e))?;
        if data.len() as u64 > max {
            return Err(FileError::TooLarge {
                path: path.to_string(),
                size: data.len() as u64,
                max,
            });
        }
        Ok(data)
    }

    /// Opens a file of the workspace or `/tmp` for reading (a symlink as the last component
    /// or a directory is refused).
    pub(crate) fn open_read(&self, path: &str) -> Result<std::fs::File, FileError> {
        if let Some(text) = self.machine_file(path) {
            return crate::procfs::file_of(&text).map_err(|e| FileError::from_io(path, &e));
        }
        let (dir, rel) = self.file_path(path)?;
        let file = dir
            .open_with(&rel, OpenOptions::new().read(true).custom_flags(NOFOLLOW))
            .map_err(|e| FileError::from_io(path, &e))?;
        let meta = file.metadata().map_err(|e| FileError::from_io(path, &e))?;
        if meta.is_dir() {
            return Err(FileError::IsDirectory(path.to_string()));
        }
        Ok(file.into_std())
    }

    /// Writes (creates or replaces) a file of the workspace, creating missing parent
    /// directories. A symlink as the last component is refused.
    pub(crate) fn write_file(&self, path: &str, data: &[u8]) -> Result<(), FileError> {
        let (dir, rel) = self.file_path(path)?;
        let tree = self
            .resolve_in(&self.mount, path)
            .map_or(Tree::Own, |(_, _, t)| t);
        if self.read_only(tree) {
            return Err(FileError::ReadOnly(path.to_string()));
        }
        let quota = self.quota_of(tree);
        if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty())
            && dir.symlink_metadata(parent).is_err()
        {
            let abs = self.absolute(path);
            self.make_dir(abs.rsplit_once('/').map_or("/", |(p, _)| p))?;
        }
        self.workspace_view()
            .and_then(|w| self.shared.unshare(&w, &dir, &rel, false))
            .map_err(|e| FileError::from_io(path, &e))?;
        let before = dir.symlink_metadata(&rel).ok();
        let old_size = before
            .as_ref()
            .filter(|m| m.is_file())
            .map_or(0, |m| m.len());
        let growth = (data.len() as u64).saturating_sub(old_size);
        let new_inode = u64::from(before.is_none());
        let no_space =
            || FileError::from_io(path, &std::io::Error::from_raw_os_error(libc::ENOSPC));
        if !quota.reserve_inodes(new_inode) {
            return Err(no_space());
        }
        if !quota.reserve_bytes(growth) {
            quota.release_inodes(new_inode);
            return Err(no_space());
        }
        let written = dir
            .open_with(
                &rel,
                OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .custom_flags(NOFOLLOW),
            )
            .and_then(|mut file| std::io::Write::write_all(&mut file, data));
        match written {
            Ok(()) => {
                quota.release_bytes(old_size.saturating_sub(data.len() as u64));
                Ok(())
            }
            Err(e) => {
                quota.release_bytes(growth);
                quota.release_inodes(new_inode);
                Err(FileError::from_io(path, &e))
            }
        }
    }

    /// Whether a sandbox path (workspace or `/tmp`) is a directory.
    pub(crate) fn is_dir(&self, path: &str) -> bool {
        match self.resolve(&self.mount, path) {
            Some((dir, rel)) => dir.metadata(&rel).is_ok_and(|m| m.is_dir()),
            // A directory of the read-only root (`/`, `/etc`) is one too.
            None => self.root.as_ref().is_some_and(|root| {
                let parts = normalize(&self.mount, path);
                let rel: PathBuf = parts.iter().collect();
                let rel = if parts.is_empty() {
                    PathBuf::from(".")
                } else {
                    rel
                };
                root.view().metadata(rel).is_ok_and(|m| m.is_dir())
            }),
        }
    }

    /// The directory (workspace or `/tmp`) holding the file `path`, and its path there.
    fn file_path(&self, path: &str) -> Result<(DirView<'_>, PathBuf), FileError> {
        match self.resolve(&self.mount, path) {
            Some((dir, rel)) if rel != Path::new(".") => Ok((dir, rel)),
            Some(_) => Err(FileError::IsDirectory(path.to_string())),
            None => Err(FileError::OutsideWorkspace(path.to_string())),
        }
    }
}

/// The components of `path` (relative to `cwd`) with `.` and `..` resolved.
pub(crate) fn normalize(cwd: &str, path: &str) -> Vec<String> {
    let full = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{cwd}/{path}")
    };
    let mut parts: Vec<String> = Vec::new();
    for part in full.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p.to_string()),
        }
    }
    parts
}

/// `parts` relative to `mount`, or `None` when outside it.
fn under(parts: &[String], mount: &str) -> Option<PathBuf> {
    let mount: Vec<&str> = mount.split('/').filter(|p| !p.is_empty()).collect();
    if parts.len() < mount.len() || parts[..mount.len()].iter().zip(&mount).any(|(a, b)| a != b) {
        return None;
    }
    let rel: PathBuf = parts[mount.len()..].iter().collect();
    Some(if rel.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        rel
    })
}

/// A sandbox's private `/tmp`. Like the workspace, its directory is open only while it is
/// in use (see [`crate::lazydir`]). The directory itself is made at the first use: most jobs
/// never touch `/tmp`, and a directory made and removed for each of them was a tenth of a
/// job's cost.
pub(crate) struct Tmp {
    /// Where the directory is made.
    root: PathBuf,
    /// The directory once made, with its device and inode (the mount point itself, which
    /// keeps its mode). Made under the lock of `open`.
    made: std::sync::OnceLock<(tempfile::TempDir, (u64, u64))>,
    open: LazyDir,
}

impl Tmp {
    /// Device and inode of the directory, once made.
    fn id(&self) -> Option<(u64, u64)> {
        self.made.get().map(|m| m.1)
    }

    /// The directory for one operation, made or opened again when needed.
    fn open(&self) -> std::io::Result<wasmtime_wasi::filesystem::Dir> {
        self.open.get(|| {
            let made = match self.made.get() {
                Some(made) => made,
                None => {
                    let t = temp_builder("wasbox-tmp-").tempdir_in(&self.root)?;
                    use std::os::unix::fs::MetadataExt as _;
                    let m = std::fs::metadata(t.path())?;
                    let _ = self.made.set((t, (m.dev(), m.ino())));
                    self.made.get().expect("just set")
                }
            };
            open_dir(made.0.path())
        })
    }
}

/// Opens the volumes to attach at their (checked) paths.
fn attach(mounts: Vec<VolumeMount>, workspace: &str) -> Result<Vec<Mounted>> {
    let paths = crate::volume::check_mounts(mounts.iter().map(|m| m.path.as_str()), workspace)?;
    let mut out = Vec::with_capacity(mounts.len());
    for (m, path) in mounts.into_iter().zip(paths) {
        let data = m.volume.data_dir();
        let dir = if m.read_only {
            use std::os::unix::fs::OpenOptionsExt as _;
            let file = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
                .open(data)
                .with_context(|| format!("opening volume {}", m.volume.record().name))?;
            wasmtime_wasi::filesystem::Dir::new(
                file,
                wasmtime_wasi::FsPerms::ReadOnly,
                wasmtime_wasi::OpenMode::READ,
                true,
            )
        } else {
            open_dir(data).with_context(|| format!("opening volume {}", m.volume.record().name))?
        };
        out.push(Mounted {
            path,
            read_only: m.read_only,
            dir,
            attachment: crate::volume::Attachment::new(m.volume),
        });
    }
    Ok(out)
}

/// Whether a relative path climbs above the directory it starts from.
fn climbs(path: &str) -> bool {
    let mut depth = 0i32;
    path.split('/').any(|p| {
        match p {
            "" | "." => {}
            ".." => depth -= 1,
            _ => depth += 1,
        }
        depth < 0
    })
}

fn temp_builder(prefix: &str) -> tempfile::Builder<'_, 'static> {
    let mut b = tempfile::Builder::new();
    b.prefix(prefix);
    b
}

/// Opens a directory of the sandbox (its workspace or `/tmp`, by the path the host made or
/// was given; never a symlink) as the guest's `wasi:filesystem` takes it.
pub(crate) fn open_dir(path: &Path) -> std::io::Result<wasmtime_wasi::filesystem::Dir> {
    use std::os::unix::fs::OpenOptionsExt as _;
    // Open for reading (not `O_PATH`), so that a spare workspace's times can be set through
    // it (see [`crate::scratch::Spares`]).
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(path)?;
    Ok(wasmtime_wasi::filesystem::Dir::new(
        dir,
        wasmtime_wasi::FsPerms::ReadWrite,
        wasmtime_wasi::OpenMode::READ | wasmtime_wasi::OpenMode::WRITE,
        // Workspace files are local: their I/O on the calling thread is cheaper than a hop
        // to the blocking pool for every open and stat.
        true,
    ))
}

/// The text a shell prints for an I/O error ("No such file or directory").
pub(crate) fn io_message(e: &std::io::Error) -> String {
    use std::io::ErrorKind::*;
    match e.kind() {
        NotFound => "No such file or directory".into(),
        PermissionDenied => "Permission denied".into(),
        IsADirectory => "Is a directory".into(),
        NotADirectory => "Not a directory".into(),
        AlreadyExists => "File exists".into(),
        _ => {
            let s = e.to_string();
            s.split(" (os error").next().unwrap_or(&s).to_string()
        }
    }
}

/// Open fails on a symlink.
const NOFOLLOW: i32 = libc::O_NOFOLLOW;

/// Why a workspace file could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileError {
    NotFound(String),
    IsDirectory(String),
    NotADirectory(String),
    AlreadyExists(String),
    /// The sandbox's disk quota (bytes or inodes) is used up.
    NoSpace(String),
    /// The path names something outside the workspace (or through a symlink).
    OutsideWorkspace(String),
    /// The path cannot name a file at all (a NUL byte, a name longer than the system allows).
    InvalidPath(String),
    /// The path is in a volume attached read-only.
    ReadOnly(String),
    TooLarge {
        path: String,
        size: u64,
        max: u64,
    },
    Io(String),
}

impl FileError {
    pub(crate) fn from_io(path: &str, e: &std::io::Error) -> Self {
        match e.kind() {
            std::io::ErrorKind::NotFound => FileError::NotFound(path.to_string()),
            std::io::ErrorKind::IsADirectory => FileError::IsDirectory(path.to_string()),
            std::io::ErrorKind::NotADirectory => FileError::NotADirectory(path.to_string()),
            std::io::ErrorKind::AlreadyExists => FileError::AlreadyExists(path.to_string()),
            _ if matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) => {
                FileError::NoSpace(path.to_string())
            }
            std::io::ErrorKind::PermissionDenied => FileError::OutsideWorkspace(path.to_string()),
            std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidFilename => {
                FileError::InvalidPath(path.to_string())
            }
            _ if e.raw_os_error() == Some(libc::EROFS) => FileError::ReadOnly(path.to_string()),
            _ if e.raw_os_error() == Some(libc::ELOOP) => {
                FileError::OutsideWorkspace(path.to_string())
            }
            _ => FileError::Io(format!("{path}: {}", io_message(e))),
        }
    }
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileError::NotFound(p) => write!(f, "{p}: No such file or directory"),
            FileError::IsDirectory(p) => write!(f, "{p}: Is a directory"),
            FileError::NotADirectory(p) => write!(f, "{p}: Not a directory"),
            FileError::AlreadyExists(p) => write!(f, "{p}: File exists"),
            FileError::NoSpace(p) => write!(f, "{p}: No space left on device"),
            FileError::OutsideWorkspace(p) => write!(f, "{p}: outside the workspace or a symlink"),
            FileError::InvalidPath(p) => write!(f, "{}: not a valid path", p.escape_debug()),
            FileError::ReadOnly(p) => write!(f, "{p}: Read-only file system"),
            FileError::TooLarge { path, size, max } => {
                write!(f, "{path}: {size} bytes is more than the limit of {max}")
            }
            FileError::Io(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for FileError {}

fn normalize_mount(mount: &str) -> Result<String> {
    let parts: Vec<&str> = mount
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    anyhow::ensure!(
        mount.starts_with('/') && !parts.is_empty() && !parts.contains(&".."),
        "mount point must be an absolute path below / (got {mount:?})"
    );
    Ok(format!("/{}", parts.join("/")))
}

/// The live-process gate of a sandbox, closed while a snapshot is taken.
pub(crate) const FROZEN: u32 = 1 << 31;

impl SandboxState {
    /// Holds back new processes while the guard lives; refused (with the number running)
    /// when processes run.
    pub(crate) fn freeze(&self) -> Result<Freeze<'_>, u32> {
        let changes = self.changes.write().unwrap_or_else(|e| e.into_inner());
        self.live
            .compare_exchange(
                0,
                FROZEN,
                std::sync::atomic::Ordering::AcqRel,
                std::sync::atomic::Ordering::Acquire,
            )
            .map_err(|n| n & !FROZEN)?;
        Ok(Freeze {
            sandbox: self,
            _changes: changes,
        })
    }

    /// Held by a change of the tree the host makes for a client (write, mkdir, remove,
    /// move): a snapshot waits for it, and it for a snapshot.
    pub(crate) fn changing(&self) -> std::sync::RwLockReadGuard<'_, ()> {
        self.changes.read().unwrap_or_else(|e| e.into_inner())
    }
}

pub(crate) struct Freeze<'a> {
    sandbox: &'a SandboxState,
    /// Host changes of the tree wait while it lives.
    _changes: std::sync::RwLockWriteGuard<'a, ()>,
}

impl Drop for Freeze<'_> {
    fn drop(&mut self) {
        self.sandbox
            .live
            .fetch_and(!FROZEN, std::sync::atomic::Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_normalized() {
        assert_eq!(normalize_mount("/workspace/").unwrap(), "/workspace");
        assert_eq!(normalize_mount("//app").unwrap(), "/app");
        assert!(normalize_mount("/").is_err());
        assert!(normalize_mount("app").is_err());
        assert!(normalize_mount("/a/../b").is_err());
    }
}
