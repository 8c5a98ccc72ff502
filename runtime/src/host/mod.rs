//! The host side of every component the runtime runs, and the one place a wasmtime `Store`
//! is built.
//!
//! A store's data is a [`HostState`]: the WASI context (arguments, environment, working
//! directory, the sandbox's workspace and `/tmp` as the only preopened directories, no
//! sockets, no name lookups; HTTP only through the egress policy of `crate::net`), a
//! capped resource table, the memory limiter (the process's
//! own limit, then the sandbox's and the node's budgets), the `wasbox:sandbox/process` host,
//! and whatever a protocol adds (`E`: a term agent's task context, a sidecar's tool calls).
//! Programs, shell children and agents of every protocol all get their store from
//! [`new_store`], so the containment policy is written once; how a component ended (an exit
//! code, a deadline, a trap) is read once, by [`Exit`].
//!
//! Nothing here opens a host path other than the sandbox's own two directories (the
//! workspace, held open, and `/tmp`, open only while in use).

mod door;
mod exit;
mod memory;
mod preinit;
mod process;
mod quota;

use crate::sync::lock;
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;
use wasmtime::StoreContextMut;
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, Store, UpdateDeadline};
use wasmtime_wasi::p2::bindings::CommandPre;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

pub(crate) use crate::cpu::CpuAccount;
pub(crate) use exit::Exit;
pub use exit::MemoryExceeded;
pub(crate) use process::{JobContext, Pids, StartHeard, Stdio, lacked_room, run_process};
pub use process::{StartFailure, StartReport};

use crate::bindings::process as wit;
use crate::cache::CompileCache;
use crate::capacity::{Admission, COMPACT_MEMORY, Capacity, Unpooled};
use crate::engine::{Engines, Placement};
use crate::image::Image;
use crate::limits::Budget;
use crate::net::{Egress, NetHooks};
use crate::rootfs::SANDBOX_USER;
use crate::sandbox::SandboxState;
use memory::MemoryLimiter;
use process::ProcessHost;
use quota::{QuotaFs, QuotaFsView, StdFiles};

/// The data of every store: what WASI, the process import and a protocol's own imports
/// need. `E` is the protocol's part (`()` for plain programs).
pub struct HostState<E = ()> {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: MemoryLimiter,
    process: ProcessHost,
    /// Its place among the node's live instances, given back when the store drops.
    admission: Admission,
    /// Counted among the instances outside the pool, when it is one.
    _unpooled: Option<Unpooled>,
    /// Its sandbox: the directories the filesystem import opens and the quota it charges.
    sandbox: Arc<SandboxState>,
    /// When the instance itself must stop, if not when its job does (its children may be
    /// stopped first, so that it can still report what they did).
    own_deadline: Option<std::time::Instant>,
    /// Its `/dev/stdin`, `/dev/stdout` and `/dev/stderr` while open.
    std_files: StdFiles,
    /// `wasi:http`: its context, and the hooks that send requests under the egress policy.
    http: wasmtime_wasi_http::WasiHttpCtx,
    net: NetHooks,
    /// The protocol's own host state.
    pub(crate) ext: E,
}

impl<E: Send> wasmtime_wasi_http::WasiHttpView for HostState<E> {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        wasmtime_wasi_http::WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.net,
        }
    }
}

impl<E: Send> WasiView for HostState<E> {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl<E> HostState<E> {
    /// The place the store held, for another store of the same process.
    pub(crate) fn into_admission(self) -> Admission {
        self.admission
    }

    /// The place the store held and the protocol's part, for another store.
    pub(crate) fn into_parts(self) -> (Admission, E) {
        (self.admission, self.ext)
    }

    /// Moves the component to another job: the processes it starts from now on, and its
    /// own deadline, are that job's (an agent gets one job per call or per task).
    pub(crate) fn set_job(&mut self, job: Arc<JobContext>) {
        self.process.set_job(job);
        self.own_deadline = None;
    }

    /// Lets the instance itself run until `deadline`, later than its job's processes.
    pub(crate) fn set_own_deadline(&mut self, deadline: std::time::Instant) {
        self.own_deadline = Some(deadline);
    }

    /// Whether the instance must be interrupted now.
    fn over(&self) -> bool {
        let job = self.process.job();
        match self.own_deadline {
            Some(d) => job.was_stopped() || std::time::Instant::now() >= d,
            None => job.over(),
        }
    }
}

/// Adds what every component may import to a linker: WASI (its filesystem reaches only the
/// preopened directories; its sockets are TCP clients under the egress policy) and
/// `wasbox:sandbox/process`.
pub(crate) fn add_to_linker<E: Send + 'static>(
    linker: &mut Linker<HostState<E>>,
) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    // The process host again, for a program that reaches it through a door of bytes.
    door::add_to_linker(linker)?;
    // wasi:http's client: every request goes through the egress policy (crate::net).
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)?;
    // wasi:filesystem again, over wasmtime-wasi's own: the same calls, charged to the
    // sandbox's disk quota, and preopens that share the sandbox's descriptors.
    linker.allow_shadowing(true);
    use wasmtime_wasi::p2::bindings::filesystem::{preopens, types};
    types::add_to_linker::<HostState<E>, QuotaFs>(linker, quota_fs)?;
    preopens::add_to_linker::<HostState<E>, QuotaFs>(linker, quota_fs)?;
    // wasi:sockets's lookups and connections again: checked, remembered and counted by the
    // egress policy (crate::net::tcp).
    {
        use crate::net::tcp;
        let mut lookup = linker.instance(tcp::LOOKUP_INTERFACE)?;
        lookup.func_wrap(
            "resolve-addresses",
            |mut store: StoreContextMut<'_, HostState<E>>, (network, name)| {
                let s = store.data_mut();
                let mut view = sockets_view(&mut s.wasi, &mut s.table);
                Ok((tcp::resolve_addresses(
                    &mut view, &mut s.net, network, name,
                )?,))
            },
        )?;
        lookup.func_wrap(
            "[method]resolve-address-stream.resolve-next-address",
            |mut store: StoreContextMut<'_, HostState<E>>, (stream,)| {
                let s = store.data_mut();
                let mut view = sockets_view(&mut s.wasi, &mut s.table);
                Ok((tcp::resolve_next_address(&mut view, &mut s.net, stream)?,))
            },
        )?;
        let mut sockets = linker.instance(tcp::TCP_INTERFACE)?;
        sockets.func_wrap(
            "[method]tcp-socket.start-bind",
            |store: StoreContextMut<'_, HostState<E>>,
             (_socket, _network, address): (
                wasmtime::component::Resource<wasmtime_wasi::p2::TcpSocket>,
                wasmtime::component::Resource<wasmtime_wasi::p2::Network>,
                _,
            )| Ok((tcp::start_bind(&store.data().net, address),)),
        )?;
        sockets.func_wrap(
            "[method]tcp-socket.finish-connect",
            |mut store: StoreContextMut<'_, HostState<E>>, (socket,)| {
                let s = store.data_mut();
                let mut view = sockets_view(&mut s.wasi, &mut s.table);
                Ok((tcp::finish_connect(&mut view, &s.net, socket)?,))
            },
        )?;
    }
    linker.allow_shadowing(false);
    wit::add_to_linker::<HostState<E>, HasSelf<ProcessHost>>(linker, |s| &mut s.process)?;
    crate::bindings::tls::add_to_linker::<HostState<E>, HasSelf<NetHooks>>(linker, |s| &mut s.net)?;
    Ok(())
}

fn sockets_view<'a>(
    wasi: &'a mut WasiCtx,
    table: &'a mut ResourceTable,
) -> wasmtime_wasi::sockets::WasiSocketsCtxView<'a> {
    wasmtime_wasi::sockets::WasiSocketsCtxView {
        ctx: wasi.sockets(),
        table,
    }
}

fn quota_fs<E: Send>(s: &mut HostState<E>) -> QuotaFsView<'_> {
    let sandbox = s.sandbox.clone();
    QuotaFsView {
        fs: wasmtime_wasi::filesystem::WasiFilesystemCtxView {
            ctx: s.wasi.filesystem(),
            table: &mut s.table,
        },
        sandbox,
        std: &mut s.std_files,
        stdio: s.process.stdio(),
    }
}

/// What the host layer shares across a runtime: the engine, the compile cache, the linker
/// of image programs and the node-wide memory budget.
pub(crate) struct HostContext {
    /// The pooling engine: programs of short jobs, and agents.
    pub(crate) engine: Engine,
    /// The on-demand engines: interactive programs, and programs the pool has no slot for
    /// (see [`Placement`]).
    on_demand: Engine,
    compact: Engine,
    pub(crate) cache: CompileCache,
    /// The linker of image programs, for each [`Placement`].
    linkers: [Linker<HostState>; 3],
    pub(crate) node_memory: Arc<Budget>,
    /// Live instances, all sandboxes together.
    pub(crate) capacity: Capacity,
    /// The node's egress policy, TLS trust and connection counts.
    pub(crate) egress: Arc<Egress>,
    /// The linkers of agent protocols (one per store data type), made when first needed.
    agent_linkers: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl HostContext {
    pub(crate) fn new(
        [engine, on_demand, compact]: Engines,
        cache: CompileCache,
        node_memory: usize,
        max_instances: usize,
        wide_instances: Option<usize>,
        reserved_for_jobs: usize,
        egress: Arc<Egress>,
    ) -> wasmtime::Result<Self> {
        // Without a pool the engines are one, and every program goes on demand (see
        // `placement`): the other linkers stay empty, never used.
        let pooled = !Engine::same(&engine, &on_demand);
        let linker = |engine: &Engine, used: bool| -> wasmtime::Result<Linker<HostState>> {
            let mut linker = Linker::new(engine);
            if used {
                add_to_linker(&mut linker)?;
            }
            Ok(linker)
        };
        let linkers = [
            linker(&engine, pooled)?,
            linker(&on_demand, true)?,
            linker(&compact, pooled)?,
        ];
        let node_memory = Arc::new(Budget::new(node_memory));
        Ok(HostContext {
            engine,
            on_demand,
            compact,
            cache,
            linkers,
            capacity: Capacity::new(max_instances, reserved_for_jobs, node_memory.clone())
                .with_wide_max(wide_instances),
            node_memory,
            egress,
            agent_linkers: Mutex::new(HashMap::new()),
        })
    }

    /// Every engine of the runtime (one per placement).
    pub(crate) fn engines(&self) -> [&Engine; 3] {
        [&self.engine, &self.on_demand, &self.compact]
    }

    pub(crate) fn engine_for(&self, placement: Placement) -> &Engine {
        self.engines()[self.placement(placement) as usize]
    }

    /// Where `wanted` really goes: everything is on demand when the runtime has no pool.
    pub(crate) fn placement(&self, wanted: Placement) -> Placement {
        if Engine::same(&self.engine, &self.on_demand) {
            Placement::OnDemand
        } else {
            wanted
        }
    }

    /// Where a program goes that takes no pool slot, in a sandbox whose processes may hold
    /// `memory_bytes` of linear memory: on demand while the address space has room for its
    /// 4 GiB reservation, compact past that when its limit fits a compact memory.
    pub(crate) fn unpooled(&self, memory_bytes: usize) -> Placement {
        if !self.capacity.wide_room() && memory_bytes <= COMPACT_MEMORY {
            self.placement(Placement::Compact)
        } else {
            Placement::OnDemand
        }
    }

    /// The linker of components whose store data is `HostState<E>`: WASI and the process
    /// import, plus what `add` adds. Made on first use, then shared.
    pub(crate) fn linker_for<E: Send + 'static>(
        &self,
        add: fn(&mut Linker<HostState<E>>) -> wasmtime::Result<()>,
    ) -> wasmtime::Result<Arc<Linker<HostState<E>>>> {
        let key = TypeId::of::<E>();
        let mut linkers = lock(&self.agent_linkers);
        if let Some(l) = linkers.get(&key).and_then(|l| l.clone().downcast().ok()) {
            return Ok(l);
        }
        let mut linker = Linker::new(&self.engine);
        add_to_linker(&mut linker)?;
        add(&mut linker)?;
        let linker = Arc::new(linker);
        linkers.insert(key, linker.clone());
        Ok(linker)
    }
}

/// The environment of a component: `PATH`, `HOME` (the mount point), `SHELL`, `USER` and
/// `LOGNAME` (the sandbox user), then the
/// sandbox's variables, then `extra` (a later variable replaces an earlier one of the same
/// name), and last `PWD`, the working directory.
pub(crate) fn environment(
    sandbox: &SandboxState,
    extra: &[(String, String)],
    cwd: &str,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
        ("HOME".into(), sandbox.mount.clone()),
        ("SHELL".into(), "/bin/sh".into()),
        ("USER".into(), SANDBOX_USER.into()),
        ("LOGNAME".into(), SANDBOX_USER.into()),
    ];
    for (k, v) in sandbox.env.iter().chain(extra.iter()) {
        env.retain(|(key, _)| key != k);
        env.push((k.clone(), v.clone()));
    }
    env.retain(|(k, _)| k != "PWD");
    env.push(("PWD".into(), cwd.to_string()));
    env
}

/// An image with its programs linked: each program is compiled (or loaded from the cache)
/// and pre-instantiated once, on first use.
pub(crate) struct LoadedImage {
    pub(crate) image: Arc<Image>,
    /// Per [`Placement`], per program.
    pres: [Box<[OnceCell<CommandPre<HostState>>]>; 3],
    /// Per program: its pre-initialised form for the pool's engine (programs that have
    /// one), once made or loaded.
    snapshots: Box<[Snapshot]>,
}

#[derive(Default)]
struct Snapshot {
    ready: std::sync::OnceLock<CommandPre<HostState>>,
    making: Mutex<Making>,
}

#[derive(Default)]
enum Making {
    #[default]
    Idle,
    /// A task looks for it in the cache, or makes it.
    Running(tokio::sync::watch::Receiver<preinit::Phase>),
    /// The last attempt failed then, for this reason.
    Failed(std::time::Instant, String),
}

/// How long after a failed attempt to pre-initialise a program the next is made.
const PREINIT_RETRY: std::time::Duration = std::time::Duration::from_secs(600);

/// How long [`LoadedImage::preinitialised`] waits.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum PreinitWait {
    /// Until the compile cache was looked in: a process starts from the snapshot when the
    /// node or its cache has it, and otherwise at once as the program is, while the
    /// snapshot is made in the background (on a node, not in a one-job runtime).
    Cached,
    /// Until it is made (preloading).
    Made,
}

impl LoadedImage {
    pub(crate) fn new(image: Arc<Image>) -> Self {
        let cells = || image.programs().iter().map(|_| OnceCell::new()).collect();
        let snapshots = image
            .programs()
            .iter()
            .map(|_| Snapshot::default())
            .collect();
        LoadedImage {
            pres: [cells(), cells(), cells()],
            snapshots,
            image,
        }
    }

    /// The pre-initialised form of the program at `index` (see [`preinit`]) for a process
    /// of `site` about to start in `placement`, waiting as `wait` says; `None` when the
    /// program has none, the placement is not the pool's, it is not made yet, or it cannot
    /// be made (the program then starts as it is).
    pub(crate) async fn preinitialised(
        self: &Arc<Self>,
        site: &Site,
        index: usize,
        placement: Placement,
        wait: PreinitWait,
    ) -> Option<&CommandPre<HostState>> {
        let host = &site.host;
        if !self.image.programs()[index].source.preinit
            || host.placement(placement) != host.placement(Placement::Pool)
            || site.sandbox.limits.memory_bytes < preinit::MIN_MEMORY
        {
            return None;
        }
        let snapshot = &self.snapshots[index];
        if let Some(pre) = snapshot.ready.get() {
            return Some(pre);
        }
        let mut phase = {
            let mut making = lock(&snapshot.making);
            match &*making {
                Making::Running(rx) => rx.clone(),
                Making::Failed(at, _) if at.elapsed() < PREINIT_RETRY => return None,
                _ => {
                    // One job, then exit: no time to make it in the background.
                    let may_make = wait == PreinitWait::Made
                        || tokio::runtime::Handle::current().runtime_flavor()
                            != tokio::runtime::RuntimeFlavor::CurrentThread;
                    let (tx, rx) = tokio::sync::watch::channel(preinit::Phase::Looking);
                    *making = Making::Running(rx.clone());
                    let (image, site) = (self.clone(), site.clone());
                    tokio::spawn(async move {
                        let result = preinit::make(&site, index, may_make, &tx).await;
                        let snapshot = &image.snapshots[index];
                        *lock(&snapshot.making) = match result {
                            Ok(Some(pre)) => {
                                let _ = snapshot.ready.set(pre);
                                Making::Idle
                            }
                            Ok(None) => Making::Idle,
                            Err(e) => {
                                let error = format!("{e:#}");
                                tracing::warn!(
                                    program = %image.image.programs()[index].source.name,
                                    %error,
                                    "cannot pre-initialise; it starts as it is"
                                );
                                Making::Failed(std::time::Instant::now(), error)
                            }
                        };
                        let _ = tx.send(preinit::Phase::Done);
                    });
                    rx
                }
            }
        };
        let _ = phase
            .wait_for(|p| match wait {
                PreinitWait::Cached => *p != preinit::Phase::Looking,
                PreinitWait::Made => *p == preinit::Phase::Done,
            })
            .await;
        snapshot.ready.get()
    }

    /// Makes (or loads) the pre-initialised form of every program that has one, in a
    /// sandbox of `site`; the first that cannot be made is an error.
    pub(crate) async fn preinitialise(self: &Arc<Self>, site: &Site) -> anyhow::Result<()> {
        for (i, program) in self.image.programs().iter().enumerate() {
            if !program.source.preinit
                || self
                    .preinitialised(site, i, Placement::Pool, PreinitWait::Made)
                    .await
                    .is_some()
            {
                continue;
            }
            let why = match &*lock(&self.snapshots[i].making) {
                Making::Failed(_, why) => why.clone(),
                _ => "it was not made".into(),
            };
            anyhow::bail!("cannot pre-initialise {}: {why}", program.source.name);
        }
        Ok(())
    }

    /// The pre-instantiated program at `index` (see [`Image::resolve`]) for the engine
    /// of `placement`.
    pub(crate) async fn program(
        &self,
        host: &HostContext,
        index: usize,
        placement: Placement,
    ) -> wasmtime::Result<&CommandPre<HostState>> {
        let placement = host.placement(placement);
        self.pres[placement as usize][index]
            .get_or_try_init(|| async {
                let program = &self.image.programs()[index];
                let engine = host.engine_for(placement);
                let component = program.component(engine, placement, &host.cache).await?;
                let pre = host.linkers[placement as usize].instantiate_pre(component)?;
                CommandPre::new(pre)
            })
            .await
    }

    /// Loads every program for the pool's and the on-demand engine now, so that no job
    /// waits for the compiler (or the loader) later. Compact code is compiled when a node
    /// first needs it.
    pub(crate) async fn preload(&self, host: &HostContext) -> wasmtime::Result<()> {
        let mut placements = vec![Placement::OnDemand];
        if host.placement(Placement::Pool) == Placement::Pool {
            placements.insert(0, Placement::Pool);
        }
        for placement in placements {
            for i in 0..self.image.programs().len() {
                self.program(host, i, placement).await?;
            }
        }
        Ok(())
    }
}

/// A sandbox as the host layer sees it: the runtime's host context, the image its programs
/// come from, and its own state. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Site {
    pub(crate) host: Arc<HostContext>,
    pub(crate) image: Arc<LoadedImage>,
    pub(crate) sandbox: Arc<SandboxState>,
}

/// What a component instance starts with.
pub(crate) struct Launch<'a> {
    /// `argv[0]` is the program's name.
    pub(crate) argv: &'a [String],
    /// The whole environment.
    pub(crate) env: &'a [(String, String)],
    /// The working directory, an absolute sandbox path.
    pub(crate) cwd: &'a str,
    pub(crate) stdio: Stdio,
    /// The place taken for it ahead (a child its parent was admitted for); otherwise the
    /// job's, or a new one.
    pub(crate) admission: Option<Admission>,
    /// Which engine the store belongs to.
    pub(crate) placement: Placement,
    /// Its pid in the sandbox.
    pub(crate) pid: u32,
    /// Where its memory is shown to `ps` (a registered process), if anywhere.
    pub(crate) memory: Option<Arc<std::sync::atomic::AtomicUsize>>,
    /// Where its CPU time is counted (for its parent's `wait` and its own `times`).
    pub(crate) cpu: Arc<CpuAccount>,
}

/// Builds the store of one component instance of `job`'s sandbox: the only `Store::new` of
/// the project. The store yields to other tasks at every epoch tick and is interrupted
/// once its job is over (deadline passed or stopped). The error is a message for the
/// component's stderr.
pub(crate) fn new_store<E: Send + 'static>(
    job: &Arc<JobContext>,
    launch: Launch<'_>,
    ext: E,
) -> Result<Store<HostState<E>>, String> {
    let sandbox: &SandboxState = &job.site.sandbox;
    let host = &job.site.host;
    let launch_placement = launch.placement;
    let admission = match launch.admission {
        Some(a) => a,
        None => job.admission().map_err(|e| format!("cannot start: {e}"))?,
    };
    let mut wasi = WasiCtx::builder();
    wasi.args(launch.argv)
        .envs(launch.env)
        .initial_cwd(launch.cwd)
        .stdin(launch.stdio.stdin.clone())
        .stdout(launch.stdio.stdout.clone())
        .stderr(launch.stdio.stderr.clone())
        // TCP clients and name lookups, checked by the egress policy (crate::net::tcp), on a
        // node that lets sandboxes out at all; never UDP.
        .allow_tcp(host.egress.enabled())
        .allow_udp(false)
        .allow_ip_name_lookup(host.egress.enabled())
        .socket_addr_check(crate::net::tcp::address_check(
            host.egress.clone(),
            sandbox.net.clone(),
        ))
        // A workspace in memory: doing its I/O on the calling thread is cheaper than a hop
        // to the blocking pool for every open and stat. On a disk, the blocking pool.
        .allow_blocking_current_thread(job.site.sandbox.in_memory);
    let mut table = ResourceTable::new();
    table.set_max_capacity(sandbox.limits.max_open_resources);
    let limiter = MemoryLimiter::new(
        sandbox.limits.memory_bytes,
        sandbox.memory.clone(),
        job.site.host.node_memory.clone(),
    )
    .shown_in(launch.memory.clone());
    let state = HostState {
        wasi: wasi.build(),
        table,
        limiter,
        process: ProcessHost::new(
            job.clone(),
            launch.cwd.to_string(),
            launch.stdio,
            launch.pid,
            launch.cpu,
            launch.argv.to_vec(),
            launch.env.to_vec(),
        ),
        admission,
        _unpooled: match host.placement(launch_placement) {
            Placement::Pool => None,
            Placement::OnDemand => Some(host.capacity.unpooled(false)),
            Placement::Compact => Some(host.capacity.unpooled(true)),
        },
        sandbox: job.site.sandbox.clone(),
        own_deadline: None,
        std_files: StdFiles::default(),
        http: wasmtime_wasi_http::WasiHttpCtx::new(),
        net: NetHooks::new(host.egress.clone(), sandbox.net.clone()),
        ext,
    };
    let mut store = Store::new(host.engine_for(launch_placement), state);
    store.limiter(|s| &mut s.limiter);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|cx| {
        Ok(if cx.data().over() {
            UpdateDeadline::Interrupt
        } else {
            UpdateDeadline::Yield(1)
        })
    });
    Ok(store)
}
