//! The runtime and its sandboxes: what an embedder holds. A [`Runtime`] owns one engine,
//! the compile cache, the images and the node-wide budgets; a [`Sandbox`] is a workspace with
//! limits in which jobs run. Both are cheap to clone.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Result, anyhow};

use crate::cache::CompileCache;
use crate::capacity::{Admission, Refused};
use crate::engine::{EpochTicker, new_engines};
use crate::files::FileInfo;
use crate::host::{HostContext, LoadedImage, Site};
use crate::image::{BASE_IMAGE, DATASCI_IMAGE, Image, base_image, datasci_image};
use crate::job::{JobOutput, JobSpec};
use crate::limits::{Limits, Quota, default_node_memory};
use crate::sandbox::{FileError, SandboxConfig, SandboxState};
use crate::snapshot::{Snapshot, SnapshotError, TarLimits};

struct RuntimeInner {
    host: Arc<HostContext>,
    limits: Limits,
    images: HashMap<String, Arc<LoadedImage>>,
    default_image: String,
    /// Where temporary workspaces and each sandbox's `/tmp` are made.
    temp_dir: PathBuf,
    /// `temp_dir` as sandboxes are made in it (canonical, in memory or not).
    scratch: crate::scratch::ScratchRoot,
    /// What all sandboxes together may add there (and to their own workspaces).
    node_disk: Arc<Quota>,
    /// `temp_dir` was made for this runtime (removed with it when empty).
    own_temp_dir: bool,
    /// The read-only root trees around sandboxes' workspaces (in `temp_dir`).
    roots: Option<crate::rootfs::RootTrees>,
    _ticker: EpochTicker,
}

impl Drop for RuntimeInner {
    fn drop(&mut self) {
        // Sandboxes may outlive the runtime and remove their own directories later: only
        // an empty root goes now (a crashed process's is swept at the next start).
        drop(self.roots.take());
        self.scratch.close();
        if self.own_temp_dir {
            let _ = std::fs::remove_dir(&self.temp_dir);
        }
    }
}

/// An embeddable WebAssembly sandbox runtime. See the crate documentation for an example.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<RuntimeInner>,
}

/// Configures a [`Runtime`].
pub struct RuntimeBuilder {
    limits: Limits,
    cache_dir: Option<PathBuf>,
    use_cache: bool,
    images: Vec<Image>,
    default_image: String,
    temp_dir: Option<PathBuf>,
    node_memory: Option<usize>,
    max_instances: Option<usize>,
    reserved_for_jobs: usize,
    wide_instances: Option<usize>,
    pool_slots: u32,
    egress: crate::net::EgressConfig,
    on_egress: Option<crate::net::EgressObserver>,
}

impl RuntimeBuilder {
    /// Called for every connection a sandbox made (when it closes) and every request a
    /// policy or a limit refused: for the embedder's own records (the worker API's
    /// telemetry store, for one). Called on the runtime's threads: keep it short.
    pub fn on_egress(
        mut self,
        f: impl Fn(&crate::net::EgressEvent) + Send + Sync + 'static,
    ) -> Self {
        self.on_egress = Some(Arc::new(f));
        self
    }

    /// The node's egress policy: where sandboxes may connect at most, TLS roots, the
    /// node's connection bound (default: nowhere).
    pub fn egress(mut self, config: crate::net::EgressConfig) -> Self {
        self.egress = config;
        self
    }

    /// Warm instance slots of the pooling allocator (default
    /// [`POOL_INSTANCES`](crate::limits::POOL_INSTANCES)); short jobs start fastest there,
    /// and what finds them all taken is allocated on demand. 0 allocates everything on
    /// demand and keeps no emptied workspaces for later sandboxes: right for a process that
    /// runs one job and exits, which would spend more setting a pool up than it saves.
    pub fn pool_slots(mut self, n: u32) -> Self {
        self.pool_slots = n;
        self
    }

    /// Places among [`max_instances`](Self::max_instances) that PTY programs may not take,
    /// so that jobs still start beside a node full of interactive shells (default 0).
    pub fn reserve_for_jobs(mut self, n: usize) -> Self {
        self.reserved_for_jobs = n;
        self
    }

    /// Component instances (processes, shells, agents) that may live at once, all
    /// sandboxes together (default: what the machine allows, see
    /// [`capacity::default_max_instances`](crate::capacity::default_max_instances)). Past
    /// it, [`Runtime::admit`] refuses and a process started inside a sandbox fails to start.
    pub fn max_instances(mut self, n: usize) -> Self {
        self.max_instances = Some(n);
        self
    }

    /// Of the live instances, how many programs outside the pool may have linear memories
    /// that reserve 4 GiB of address space, so that compiled code needs no bounds checks
    /// (default: as many as leave room in the process's address space for the rest of
    /// [`max_instances`](Self::max_instances), see
    /// [`capacity::wide_instances`](crate::capacity::wide_instances)). Past it they get
    /// compact memories whose code checks bounds (slower compute), when their sandbox's
    /// process memory limit is at most [`COMPACT_MEMORY`](crate::capacity::COMPACT_MEMORY).
    pub fn wide_instances(mut self, n: usize) -> Self {
        self.wide_instances = Some(n);
        self
    }

    /// Where temporary workspaces and each sandbox's private `/tmp` are created. Default:
    /// `$WASBOX_SCRATCH_DIR`, else a directory of this process in `/dev/shm` when that is
    /// a writable tmpfs (memory: a fresh sandbox costs no disk I/O), else `TMPDIR`. Every
    /// sandbox has a disk quota ([`Limits::disk_bytes`]); all together may use 80% of what
    /// is free there when the runtime starts. Point it at a disk for large workspaces.
    pub fn temp_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.temp_dir = Some(dir.into());
        self
    }

    /// Default limits of every sandbox (a sandbox may set its own).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Linear memory every sandbox of this runtime may hold together (default: 80% of the
    /// machine's memory). Past it, a growing process traps with a clear message.
    pub fn node_memory_bytes(mut self, bytes: usize) -> Self {
        self.node_memory = Some(bytes);
        self
    }

    /// Where compiled components are cached (see [`Runtime::default_cache_dir`]).
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self.use_cache = true;
        self
    }

    /// Compile every program in memory at first use; nothing is written to disk.
    pub fn no_cache(mut self) -> Self {
        self.use_cache = false;
        self
    }

    /// Adds an image (the built-in `base` image is always present).
    pub fn image(mut self, image: Image) -> Self {
        self.images.push(image);
        self
    }

    /// The image sandboxes use when they name none.
    pub fn default_image(mut self, name: impl Into<String>) -> Self {
        self.default_image = name.into();
        self
    }

    pub fn build(self) -> Result<Runtime> {
        let engines = new_engines(self.limits.memory_bytes, self.pool_slots)?;
        let mut images: HashMap<String, Arc<LoadedImage>> = HashMap::new();
        let base = Arc::new(base_image());
        images.insert(BASE_IMAGE.to_string(), Arc::new(LoadedImage::new(base)));
        images.insert(
            DATASCI_IMAGE.to_string(),
            Arc::new(LoadedImage::new(Arc::new(datasci_image()))),
        );
        for image in self.images {
            let name = image.name().to_string();
            images.insert(name, Arc::new(LoadedImage::new(Arc::new(image))));
        }
        anyhow::ensure!(
            images.contains_key(&self.default_image),
            "default image `{}` is not defined",
            self.default_image
        );
        let cache_dir = if self.use_cache {
            self.cache_dir.or_else(CompileCache::default_dir)
        } else {
            None
        };
        let (temp_dir, own_temp_dir) = match self.temp_dir {
            Some(dir) => (dir, false),
            None => crate::scratch::default_root()?,
        };
        let node_disk = Arc::new(crate::scratch::node_quota(&temp_dir));
        // A runtime without a pool runs one job (`wasbox run`): no spare workspaces to keep.
        let scratch = crate::scratch::ScratchRoot::new(&temp_dir, self.pool_slots > 0)?;
        let host = HostContext::new(
            engines,
            CompileCache::open(cache_dir)?,
            self.node_memory.unwrap_or_else(default_node_memory),
            self.max_instances.unwrap_or_else(|| {
                crate::capacity::default_max_instances_with(None, self.limits.memory_bytes)
            }),
            self.wide_instances,
            self.reserved_for_jobs,
            Arc::new(crate::net::Egress::new(self.egress, self.on_egress)?),
        )?;
        let roots = Some(crate::rootfs::RootTrees::new(&temp_dir, host.cache.dir())?);
        Ok(Runtime {
            inner: Arc::new(RuntimeInner {
                _ticker: EpochTicker::start(host.engines())?,
                host: Arc::new(host),
                limits: self.limits,
                images,
                default_image: self.default_image,
                own_temp_dir,
                roots,
                temp_dir,
                scratch,
                node_disk,
            }),
        })
    }
}

impl Runtime {
    /// For a process about to exit (`wasbox run` after its job): removes the runtime's
    /// scratch directory, when no sandbox still holds it, and leaves the engines, compiled
    /// code and linker to the process's exit instead of freeing them one by one. Call
    /// `std::process::exit` next: nothing here stops the runtime's threads.
    pub fn release_for_exit(self) {
        if Arc::strong_count(&self.inner) == 1 && self.inner.own_temp_dir {
            self.inner.scratch.close();
            let _ = std::fs::remove_dir(&self.inner.temp_dir);
        }
        std::mem::forget(self);
    }

    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder {
            limits: Limits::default(),
            cache_dir: None,
            use_cache: true,
            images: Vec::new(),
            default_image: BASE_IMAGE.to_string(),
            temp_dir: None,
            node_memory: None,
            max_instances: None,
            reserved_for_jobs: 0,
            wide_instances: None,
            pool_slots: crate::limits::POOL_INSTANCES,
            egress: crate::net::EgressConfig::default(),
            on_egress: None,
        }
    }

    /// A runtime with default limits, the built-in image and the default cache directory.
    pub fn new() -> Result<Runtime> {
        Self::builder().build()
    }

    /// `$WASBOX_CACHE_DIR`, else `$XDG_CACHE_HOME/wasbox`, else `~/.cache/wasbox`.
    pub fn default_cache_dir() -> Option<PathBuf> {
        CompileCache::default_dir()
    }

    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// What the node's sandboxes have done on the network since it started.
    pub fn egress_stats(&self) -> crate::EgressStats {
        self.inner.host.egress.stats()
    }

    /// Tells the egress policy where one of this node's own servers listens: no sandbox
    /// reaches it unless the operator names that address and port exactly.
    pub fn add_own_listener(&self, addr: std::net::SocketAddr) {
        self.inner.host.egress.add_own_listener(addr);
    }

    /// Linear memory held by every process of every sandbox now, and the node's budget.
    pub fn memory_in_use(&self) -> (usize, usize) {
        let b = &self.inner.host.node_memory;
        (b.used(), b.limit())
    }

    /// Live component instances now, and the most that may live at once.
    pub fn instances_in_use(&self) -> (usize, usize) {
        let c = &self.inner.host.capacity;
        (c.in_use(), c.max())
    }

    /// Live instances outside the pool: with linear memories that reserve 4 GiB (code
    /// without bounds checks), with compact memories (see
    /// [`RuntimeBuilder::wide_instances`]), and the most that may reserve 4 GiB.
    pub fn unpooled_instances(&self) -> (usize, usize, usize) {
        self.inner.host.capacity.unpooled_in_use()
    }

    /// A place for one process now (hand it to [`JobSpec::admission`]), or why the node
    /// has none: its limit of live instances, or its memory budget.
    pub fn try_admit(&self) -> Result<Admission, Refused> {
        self.inner.host.capacity.try_admit()
    }

    /// Like [`try_admit`](Self::try_admit), waiting up to `wait` for a place to free up.
    pub async fn admit(&self, wait: std::time::Duration) -> Result<Admission, Refused> {
        self.inner.host.capacity.admit(wait).await
    }

    pub(crate) fn host(&self) -> &Arc<HostContext> {
        &self.inner.host
    }

    fn image(&self, name: Option<&str>) -> Result<Arc<LoadedImage>> {
        let name = name.unwrap_or(&self.inner.default_image);
        self.inner
            .images
            .get(name)
            .cloned()
            .ok_or_else(|| anyhow!("unknown image `{name}`"))
    }

    /// Names of the images this runtime can run.
    pub fn image_names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.inner.images.keys().map(String::as_str).collect();
        v.sort_unstable();
        v
    }

    /// Compiles (or loads from the cache) every program of every image, so that no job
    /// waits for the compiler later.
    pub async fn preload(&self) -> Result<()> {
        for image in self.inner.images.values() {
            image.preload(&self.inner.host).await?;
        }
        Ok(())
    }

    /// Makes (or loads from the cache) the pre-initialised form of every program that has
    /// one (the `datasci` image's `python3`, with numpy and pandas imported), each in a
    /// sandbox of its image made for it. Without this, the first process of such a program
    /// on a node starts it in the background, and processes start from it once it is there.
    pub async fn preinitialise(&self) -> Result<()> {
        for (name, image) in &self.inner.images {
            if image.image.programs().iter().any(|p| p.source.preinit) {
                let sandbox = self.sandbox(SandboxConfig::default().image(name.clone()))?;
                image.preinitialise(sandbox.site()).await?;
            }
        }
        Ok(())
    }

    /// Makes a sandbox; jobs run in it share its workspace. A workspace that holds the
    /// compile cache is refused: a guest could otherwise plant compiled code.
    pub fn sandbox(&self, config: SandboxConfig) -> Result<Sandbox> {
        let sandbox = self.bare_sandbox(config)?;
        sandbox.site.sandbox.make_volume_points()?;
        Ok(sandbox)
    }

    /// [`Runtime::sandbox`] without the mount points of its volumes in its workspace (a
    /// restore makes them once the snapshot's files are in).
    fn bare_sandbox(&self, config: SandboxConfig) -> Result<Sandbox> {
        let image = self.image(config.image.as_deref())?;
        // Volumes attached outside the workspace have their mount points in the root tree.
        let workspace = crate::sandbox::normalize("/", &config.mount);
        let points: Vec<String> = crate::volume::check_mounts(
            config.volumes.iter().map(|v| v.path.as_str()),
            &config.mount,
        )?
        .into_iter()
        .filter(|p| {
            let parts = crate::sandbox::normalize("/", p);
            !parts.starts_with(&workspace)
        })
        .collect();
        let root = match &self.inner.roots {
            Some(roots) => Some(roots.get(
                image.image.name(),
                || image.image.program_names(),
                image.image.files(),
                &config.mount,
                &points,
            )?),
            None => None,
        };
        let state = SandboxState::create(
            config,
            &self.inner.limits,
            &self.inner.scratch,
            &self.inner.node_disk,
            root,
        )?;
        if let Some(cache) = self.inner.host.cache.dir()
            && cache.starts_with(&state.workspace)
        {
            anyhow::bail!(
                "the workspace {} holds the compile cache {}: choose another workspace",
                state.workspace.display(),
                cache.display()
            );
        }
        Ok(Sandbox {
            site: Site {
                host: self.inner.host.clone(),
                image,
                sandbox: Arc::new(state),
            },
        })
    }

    /// Takes a snapshot of `sandbox`: its workspace (shared copy-on-write, see
    /// [`Snapshot`]), environment, mount point and disk limits, with `labels` for the
    /// caller. Refused while processes run in it (a snapshot is taken between them: new
    /// processes wait the few milliseconds it takes). The workspace must be on the
    /// runtime's scratch file system (a temporary one is).
    pub fn snapshot(
        &self,
        sandbox: &Sandbox,
        labels: std::collections::BTreeMap<String, String>,
    ) -> Result<Snapshot, SnapshotError> {
        crate::snapshot::take(
            &sandbox.site.sandbox,
            &sandbox.site.image.image,
            &self.inner.temp_dir,
            labels,
        )
    }

    /// A new sandbox (with a temporary workspace) holding what `snapshot` holds. Its
    /// files share their data with the snapshot until either changes them. `limits` are
    /// the runtime's when `None`; the snapshot's disk limits apply either way.
    pub fn restore(
        &self,
        snapshot: &Snapshot,
        limits: Option<Limits>,
    ) -> Result<Sandbox, SnapshotError> {
        self.restore_with(snapshot, limits, Vec::new())
    }

    /// [`Runtime::restore`] with volumes attached (see [`crate::volume`]).
    pub fn restore_with(
        &self,
        snapshot: &Snapshot,
        limits: Option<Limits>,
        volumes: Vec<crate::volume::VolumeMount>,
    ) -> Result<Sandbox, SnapshotError> {
        let m = snapshot.manifest();
        let Some(image) = self.inner.images.get(&m.image) else {
            return Err(SnapshotError::ForeignImage(m.image.clone()));
        };
        if !m.image_digest.is_empty() && m.image_digest != image.image.digest() {
            tracing::warn!(
                image = %m.image,
                snapshot = %m.image_digest,
                here = %image.image.digest(),
                "restoring a snapshot taken with another build of its image"
            );
        }
        let limits = limits
            .unwrap_or_else(|| self.inner.limits.clone())
            .disk_bytes(m.disk_bytes)
            .disk_inodes(m.disk_inodes);
        let mut config = SandboxConfig::default()
            .image(m.image.clone())
            .mount(m.mount.clone())
            .workdir(m.cwd.clone())
            .limits(limits);
        config.env = m.env.clone();
        config.volumes = volumes;
        let sandbox = self
            .bare_sandbox(config)
            .map_err(|e| SnapshotError::Io(format!("{e:#}")))?;
        crate::snapshot::fill(&sandbox.site.sandbox, snapshot)?;
        sandbox
            .site
            .sandbox
            .make_volume_points()
            .map_err(|e| SnapshotError::Io(format!("{e:#}")))?;
        Ok(sandbox)
    }

    /// `n` new sandboxes, each an independent copy of `sandbox` as it is now (see
    /// [`Runtime::snapshot`] and [`Runtime::restore`]); they share unchanged file data.
    /// Its volumes are attached to each copy as they are to it (a volume is shared, never
    /// copied).
    pub fn fork(&self, sandbox: &Sandbox, n: usize) -> Result<Vec<Sandbox>, SnapshotError> {
        let snapshot = self.snapshot(sandbox, Default::default())?;
        let limits = sandbox.limits().clone();
        let volumes = sandbox.volumes();
        // The copies are made on every core: each is a few thousand system calls.
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(n.max(1));
        let next = std::sync::atomic::AtomicUsize::new(0);
        let made: Vec<Vec<(usize, Result<Sandbox, SnapshotError>)>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let mut mine = Vec::new();
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            if i >= n {
                                return mine;
                            }
                            mine.push((
                                i,
                                self.restore_with(&snapshot, Some(limits.clone()), volumes.clone()),
                            ));
                        }
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().unwrap_or_default())
                .collect()
        });
        let mut all: Vec<(usize, Result<Sandbox, SnapshotError>)> =
            made.into_iter().flatten().collect();
        if all.len() != n {
            return Err(SnapshotError::Io("a fork worker failed".into()));
        }
        all.sort_by_key(|(i, _)| *i);
        // The copies may connect where their parent may.
        let policy = sandbox.network();
        all.into_iter()
            .map(|(_, r)| r.inspect(|s| s.set_network(policy.clone())))
            .collect()
    }

    /// Reads a snapshot tar (see [`Snapshot::write_tar`]), an untrusted input checked as
    /// `read_tar` in the snapshot module describes. Nothing is left behind on refusal.
    pub fn read_snapshot(
        &self,
        input: impl std::io::Read,
        limits: TarLimits,
    ) -> Result<Snapshot, SnapshotError> {
        crate::snapshot::read_tar(input, &self.inner.temp_dir, limits, |image| {
            self.inner.images.contains_key(image)
        })
    }

    /// Runs one job in a fresh sandbox with a temporary workspace.
    pub async fn run(&self, spec: JobSpec) -> Result<JobOutput> {
        self.sandbox(SandboxConfig::default())?.run(spec).await
    }
}

/// A workspace, an image, an environment and limits: the place jobs run in. Jobs run in
/// one sandbox share its workspace, so files one job writes are there for the next. The
/// workspace (when temporary) and `/tmp` are removed when the last clone is dropped and
/// nothing runs in it any more.
#[derive(Clone)]
pub struct Sandbox {
    site: Site,
}

impl Sandbox {
    /// Runs one job to its end. See [`JobSpec`].
    pub async fn run(&self, spec: JobSpec) -> Result<JobOutput> {
        crate::job::run(&self.site, spec).await
    }

    pub(crate) fn site(&self) -> &Site {
        &self.site
    }

    /// The host directory behind the workspace. A restored or forked sandbox's directories
    /// are filled from its snapshot when first reached; they are all filled before this
    /// returns, so the host can read the directory as it is.
    pub fn workspace(&self) -> &Path {
        if let Err(e) = self.site.sandbox.fill_all() {
            tracing::warn!(error = %e, "filling a restored workspace");
        }
        &self.site.sandbox.workspace
    }

    /// Where the workspace is mounted inside the sandbox.
    pub fn mount(&self) -> &str {
        &self.site.sandbox.mount
    }

    /// The working directory of jobs that name none (`/a/b`; the mount unless the
    /// sandbox's config or its snapshot gave another).
    pub fn workdir(&self) -> &str {
        &self.site.sandbox.workdir
    }

    pub fn limits(&self) -> &Limits {
        &self.site.sandbox.limits
    }

    /// The volumes attached to it (see [`crate::volume`]).
    pub fn volumes(&self) -> Vec<crate::volume::VolumeMount> {
        self.site
            .sandbox
            .volumes
            .iter()
            .map(|v| crate::volume::VolumeMount {
                volume: v.attachment.0.clone(),
                path: v.path.clone(),
                read_only: v.read_only,
            })
            .collect()
    }

    /// The sandbox's boot id, as its `/proc/sys/kernel/random/boot_id` reads: random for a
    /// new sandbox (a fork and a restored snapshot included).
    pub fn boot_id(&self) -> String {
        crate::sync::lock(&self.site.sandbox.boot_id).clone()
    }

    /// Gives the sandbox the boot id of the one it continues (a pause and resume that keeps
    /// its running state, as E2B's memory snapshots do).
    pub fn set_boot_id(&self, id: String) {
        *crate::sync::lock(&self.site.sandbox.boot_id) = id;
    }

    /// Where the sandbox may connect (within the node's egress policy).
    pub fn network(&self) -> crate::NetworkPolicy {
        self.site.sandbox.net.policy()
    }

    /// Replaces where the sandbox may connect; requests from now on follow the new policy
    /// (connections already open stay open until they end).
    pub fn set_network(&self, policy: crate::NetworkPolicy) {
        self.site.sandbox.net.set_policy(policy);
    }

    /// Bytes the sandbox has sent and received over the network.
    pub fn network_bytes(&self) -> u64 {
        self.site.sandbox.net.bytes()
    }

    /// A place for one process now (see [`Runtime::try_admit`]).
    pub fn try_admit(&self) -> Result<Admission, Refused> {
        self.site.host.capacity.try_admit()
    }

    /// A place for an interactive program, never one reserved for jobs.
    pub(crate) fn try_admit_interactive(&self) -> Result<Admission, Refused> {
        self.site.host.capacity.try_admit_interactive()
    }

    /// Whether the sandbox's image has a program of this name.
    pub fn has_program(&self, name: &str) -> bool {
        self.site.image.image.has_program(name)
    }

    /// Reads a file of the workspace (a sandbox path, absolute or relative to the mount
    /// point), refusing more than `max` bytes. A symlink as the last component is refused.
    pub fn read_file(&self, path: &str, max: u64) -> Result<Vec<u8>, FileError> {
        self.site.sandbox.read_file(path, max)
    }

    /// Opens a file of the workspace or `/tmp` for reading, to stream it.
    pub fn open_read(&self, path: &str) -> Result<std::fs::File, FileError> {
        self.site.sandbox.open_read(path)
    }

    /// Writes (creates or replaces) a file of the workspace, creating missing parent
    /// directories. A symlink as the last component is refused.
    pub fn write_file(&self, path: &str, data: &[u8]) -> Result<(), FileError> {
        let _changing = self.site.sandbox.changing();
        self.site.sandbox.write_file(path, data)
    }

    /// [`read_file`](Self::read_file) for async callers: on the blocking pool when the
    /// workspace is on a disk, so that a slow device never holds an async thread.
    pub async fn read_file_async(&self, path: &str, max: u64) -> Result<Vec<u8>, FileError> {
        if self.site.sandbox.in_memory {
            return self.read_file(path, max);
        }
        let (me, path) = (self.clone(), path.to_string());
        tokio::task::spawn_blocking(move || me.read_file(&path, max))
            .await
            .unwrap_or_else(|e| Err(FileError::Io(format!("reading the file failed: {e}"))))
    }

    /// [`write_file`](Self::write_file) for async callers (see
    /// [`read_file_async`](Self::read_file_async)).
    pub async fn write_file_async(&self, path: &str, data: bytes::Bytes) -> Result<(), FileError> {
        if self.site.sandbox.in_memory {
            return self.write_file(path, &data);
        }
        let (me, path) = (self.clone(), path.to_string());
        tokio::task::spawn_blocking(move || me.write_file(&path, &data))
            .await
            .unwrap_or_else(|e| Err(FileError::Io(format!("writing the file failed: {e}"))))
    }

    /// Whether a sandbox path (workspace or `/tmp`) is a directory.
    pub fn is_dir(&self, path: &str) -> bool {
        self.site.sandbox.is_dir(path)
    }

    /// The entry at a sandbox path (workspace or `/tmp`; a symlink itself).
    pub fn stat(&self, path: &str) -> Result<FileInfo, FileError> {
        self.site.sandbox.stat(path)
    }

    /// The entries under a directory, `depth` levels down (1: its children), by path.
    pub fn list_dir(&self, path: &str, depth: u32) -> Result<Vec<FileInfo>, FileError> {
        self.site.sandbox.list_dir(path, depth)
    }

    /// Makes a directory and its missing parents; `Ok(false)` when it existed.
    pub fn make_dir(&self, path: &str) -> Result<bool, FileError> {
        let _changing = self.site.sandbox.changing();
        self.site.sandbox.make_dir(path)
    }

    /// Removes a file, symlink or directory tree (never a mount point).
    pub fn remove(&self, path: &str) -> Result<(), FileError> {
        let _changing = self.site.sandbox.changing();
        self.site.sandbox.remove(path)
    }

    /// Moves an entry, making the destination's missing parents; the moved entry.
    pub fn rename(&self, from: &str, to: &str) -> Result<FileInfo, FileError> {
        let _changing = self.site.sandbox.changing();
        self.site.sandbox.rename(from, to)
    }

    /// Linear memory its processes hold now, and the sandbox's budget.
    pub fn memory_in_use(&self) -> (usize, usize) {
        let b = &self.site.sandbox.memory;
        (b.used(), b.limit())
    }

    /// Bytes its processes and the host have added to its workspace and `/tmp`, and the
    /// quota.
    pub fn disk_in_use(&self) -> (u64, u64) {
        (
            self.site.sandbox.quota.used().0,
            self.site.sandbox.quota.limits().0,
        )
    }

    /// Watches a directory (and, `recursive`, those below it) for changes made by anyone.
    pub fn watch(&self, path: &str, recursive: bool) -> Result<crate::watch::Watch, FileError> {
        self.site.sandbox.watch(path, recursive)
    }

    /// Sets the permission bits of a file or directory (never set-user-id or set-group-id;
    /// the mount points keep theirs). The error is the message `chmod` prints.
    pub fn set_permissions(&self, path: &str, mode: u32) -> Result<(), String> {
        let sandbox = &self.site.sandbox;
        let _changing = sandbox.changing();
        sandbox.set_mode(&sandbox.mount, path, mode)
    }

    /// Replaces the `user.{prefix}*` extended attributes of a file or directory with
    /// `attrs` (named without `user.`; see [`FileInfo::xattrs`]).
    pub fn set_user_xattrs(
        &self,
        path: &str,
        prefix: &str,
        attrs: &std::collections::BTreeMap<String, Vec<u8>>,
    ) -> Result<(), FileError> {
        self.site.sandbox.set_user_xattrs(path, prefix, attrs)
    }

    /// A sandbox path as an absolute, normalized one (relative ones from the mount point).
    pub fn absolute_path(&self, path: &str) -> String {
        self.site.sandbox.absolute(path)
    }
}
