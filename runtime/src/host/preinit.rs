//! Pre-initialised programs: a program that is slow to get ready (the scientific python3,
//! whose `import numpy, pandas` takes a second) is run once to that point, and its state
//! written back as a new component (wasmtime's wizer), which later processes start from.
//!
//! A program says it can be pre-initialised by exporting `wasbox:sandbox/preinit`'s
//! `init` (see [`ProgramSource::with_preinit`](crate::ProgramSource::with_preinit)); its
//! `wasi:cli/run` must then tell a pre-initialised instance from a new one itself (the
//! scientific python3: `runtime/build.rs`, `sci::with_start`).
//!
//! The snapshot is made once per compile cache: by [`Runtime::preinitialise`]
//! (`wasbox serve --warm-cache`), or in the background when a process of the program first
//! starts in the pool's engine on a node (processes start the program as it is until it is
//! there; see `LoadedImage::preinitialised`). It is made in a sandbox of the image but in a
//! store and a job of its own: no arguments, no environment, no standard input or output,
//! a place of its own, its own deadline. What `init` does must not depend on the sandbox
//! (the scientific python3 imports modules of the image's read-only library); nothing of a
//! caller's reaches the snapshot, which every later sandbox starts from. It is compiled
//! into the compile cache like any program, so a node restarted finds it there. A sandbox
//! whose processes may have less than [`MIN_MEMORY`] neither makes nor uses one.
//!
//! [`Runtime::preinitialise`]: crate::Runtime::preinitialise

use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::Store;
use wasmtime::component::{Component, Instance, Lift, WasmList};
use wasmtime_wasi::p2::bindings::CommandPre;
use wasmtime_wizer::{ComponentInstanceState, Wizer};

use super::process::{JobContext, Stdio};
use super::{HostState, Launch, Site, new_store};
use crate::cpu::CpuAccount;
use crate::engine::Placement;
use crate::image::Program;
use crate::io::{Capture, InputSource, OutputSink};

/// The interface a pre-initialisable program exports, and its function.
const INTERFACE: &str = "wasbox:sandbox/preinit@0.2.0";
const INIT: &str = "init";

/// Changes whenever what a snapshot holds changes for the same program bytes.
const RECIPE: &[u8] = b"wasbox preinit 1";

/// Least memory a process of a sandbox must be allowed to start from a snapshot, or to
/// make one; and most a snapshot may hold.
pub(crate) const MIN_MEMORY: usize = 512 << 20;

/// How far a task that looks for or makes a snapshot has come.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Phase {
    /// It looks in the compile cache.
    Looking,
    /// The cache had none: it makes it.
    Making,
    Done,
}

/// How long making a snapshot may take (two compiles of a large program, then its init).
const TIMEOUT: Duration = Duration::from_secs(1800);

/// The pre-initialised form of the program at `index` of `site`'s image for the pool's
/// engine: from the compile cache, or made now in `site`'s sandbox (telling `phase`) if
/// `may_make`, else `None`.
pub(crate) async fn make(
    site: &Site,
    index: usize,
    may_make: bool,
    phase: &tokio::sync::watch::Sender<Phase>,
) -> wasmtime::Result<Option<CommandPre<HostState>>> {
    let host = &site.host;
    let program = &site.image.image.programs()[index];
    let placement = host.placement(Placement::Pool);
    let engine = host.engine_for(placement);
    let name = format!("{}-preinit", program.source.name);
    let digest = digest(site, program);
    let component = match host.cache.cached(engine, &name, digest).await {
        Some(c) => c,
        None if !may_make => return Ok(None),
        None => {
            let _ = phase.send(Phase::Making);
            let started = std::time::Instant::now();
            // A job of its own, not the caller's: its deadline is not the caller's.
            let job = Arc::new(JobContext::new(
                site.clone(),
                Instant::now() + TIMEOUT,
                None,
                None,
                Duration::ZERO,
            ));
            // Instrumenting and writing back a module of 100 MB takes seconds of CPU: on a
            // thread of its own (where a panic is an error, too).
            let handle = tokio::runtime::Handle::current();
            let wasm = tokio::task::spawn_blocking(move || {
                handle.block_on(snapshot(&job, index, placement))
            })
            .await
            .map_err(|e| wasmtime::Error::msg(format!("pre-initialising panicked: {e}")))??;
            tracing::info!(
                program = %program.source.name,
                bytes = wasm.len(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "pre-initialised"
            );
            host.cache
                .load(engine, &name, wasm.into(), Some(digest))
                .await?
        }
    };
    let pre = host.linkers[placement as usize].instantiate_pre(&component)?;
    Ok(Some(CommandPre::new(pre)?))
}

/// What the snapshot is made of: the program's bytes, the image's files (its library)
/// and [`RECIPE`].
fn digest(site: &Site, program: &Program) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(RECIPE);
    h.update(
        program
            .source
            .digest
            .unwrap_or_else(|| Sha256::digest(&program.source.wasm).into()),
    );
    h.update(site.image.image.digest().as_bytes());
    h.finalize().into()
}

/// Runs the program's `init` in a store of its own and returns the instance's state
/// written back as a component.
async fn snapshot(
    job: &Arc<JobContext>,
    index: usize,
    placement: Placement,
) -> wasmtime::Result<Vec<u8>> {
    let host = &job.site.host;
    let program = &job.site.image.image.programs()[index];
    let wizer = Wizer::new();
    let (cx, instrumented) = wizer.instrument_component(&program.source.wasm)?;
    let component: Component = host
        .cache
        .compile_uncached(
            host.engine_for(placement),
            &format!("{} (instrumented)", program.source.name),
            instrumented.into(),
        )
        .await?;
    let stderr = Capture::new(16 << 10);
    let launch = Launch {
        argv: &[program.source.names.first().cloned().unwrap_or_default()],
        env: &[],
        cwd: "/",
        stdio: Stdio {
            stdin: InputSource::Null,
            stdout: OutputSink::Null,
            stderr: OutputSink::Capture(stderr.clone()),
        },
        admission: Some(host.capacity.try_admit()?),
        placement,
        pid: job.site.sandbox.new_pid(),
        memory: None,
        cpu: Arc::new(CpuAccount::default()),
    };
    let mut store = new_store(job, launch, ()).map_err(wasmtime::Error::msg)?;
    let instance = host.linkers[placement as usize]
        .instantiate_async(&mut store, &component)
        .await?;
    let init = instance
        .get_export_index(&mut store, None, INTERFACE)
        .and_then(|i| instance.get_export_index(&mut store, Some(&i), INIT))
        .ok_or_else(|| wasmtime::Error::msg(format!("the program exports no {INTERFACE}")))?;
    let init = instance.get_typed_func::<(), ()>(&mut store, init)?;
    if let Err(e) = init.call_async(&mut store, ()).await {
        let (text, _) = stderr.text();
        return Err(e.context(format!("its init failed: {}", text.trim_end())));
    }
    // Every sandbox whose processes may have MIN_MEMORY can start from the snapshot.
    let held = store.data().limiter.held();
    if held > MIN_MEMORY {
        return Err(wasmtime::Error::msg(format!(
            "its init left {} MiB of memory, more than the {} MiB a snapshot may start with",
            held >> 20,
            MIN_MEMORY >> 20
        )));
    }
    let mut state = State {
        store: &mut store,
        instance,
    };
    wizer.snapshot_component(&cx, &mut state).await
}

/// The instrumented instance's state, read through the accessors wizer added.
struct State<'a> {
    store: &'a mut Store<HostState>,
    instance: Instance,
}

impl State<'_> {
    async fn call<R: Lift + Send + Sync + 'static>(&mut self, instance: &str, func: &str) -> R {
        let f = self
            .instance
            .get_export_index(&mut *self.store, None, instance)
            .and_then(|i| {
                self.instance
                    .get_export_index(&mut *self.store, Some(&i), func)
            })
            .and_then(|f| {
                self.instance
                    .get_typed_func::<(), (R,)>(&mut *self.store, f)
                    .ok()
            });
        // The accessors are the instrumentation's own: each is there, of its type.
        let f = f.expect("wizer's accessor");
        f.call_async(&mut *self.store, ())
            .await
            .expect("wizer's accessor")
            .0
    }
}

impl ComponentInstanceState for State<'_> {
    async fn call_func_ret_list_u8(
        &mut self,
        instance: &str,
        func: &str,
        contents: impl FnOnce(&[u8]) + Send,
    ) {
        let list: WasmList<u8> = self.call(instance, func).await;
        contents(list.as_le_slice(&*self.store));
    }

    async fn call_func_ret_s32(&mut self, instance: &str, func: &str) -> i32 {
        self.call(instance, func).await
    }

    async fn call_func_ret_s64(&mut self, instance: &str, func: &str) -> i64 {
        self.call(instance, func).await
    }

    async fn call_func_ret_f32(&mut self, instance: &str, func: &str) -> u32 {
        self.call::<f32>(instance, func).await.to_bits()
    }

    async fn call_func_ret_f64(&mut self, instance: &str, func: &str) -> u64 {
        self.call::<f64>(instance, func).await.to_bits()
    }
}
