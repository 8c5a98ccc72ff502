//! Agents: components that export a protocol's world (term SDK 2.0 and 1.x, bouvet, ...), hosted in
//! a sandbox. This module holds what every protocol shares: compiling a component and
//! reading what it exports, the job and store of an instance (both from the host layer),
//! the LLM host, and how an instance's failure is told. Each protocol's module adds its
//! world's imports and the calls it makes; a front-end only translates its wire format to
//! those calls.
//!
//! An agent never gets more than a program would: its sandbox's workspace and `/tmp`, the
//! process import, and the imports of its world. Never a socket.

pub mod bouvet;
pub mod llm;
pub mod sidecar;
pub mod term;

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, Result, bail};
use bytes::Bytes;
use wasmtime::Store;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, InstancePre, Linker};

use crate::capacity::{ROOM_POLL, ROOM_WAIT};
use crate::engine::Placement;
use crate::host::{Exit, HostState, JobContext, Launch, Stdio, lacked_room, new_store};
use crate::io::{InputSource, OutputSink};
use crate::job::deadline_after;
use crate::runtime::{Runtime, Sandbox};

/// Compiles (or loads from the cache) an agent component. `name` only names its cache file;
/// `digest` is the SHA-256 of `wasm` where the caller has computed it already.
pub(crate) async fn compile(
    runtime: &Runtime,
    name: &str,
    wasm: Bytes,
    digest: Option<[u8; 32]>,
) -> Result<Component> {
    let host = runtime.host();
    host.cache
        .load(&host.engine, &cache_name(name), wasm, digest)
        .await
        .map_err(anyhow::Error::from)
        .with_context(|| format!("`{name}` is not a loadable component"))
}

/// The names of the functions a component exports at its top level.
pub(crate) fn exported_functions(runtime: &Runtime, component: &Component) -> Vec<String> {
    let engine = &runtime.host().engine;
    component
        .component_type()
        .exports(engine)
        .filter(|(_, item)| matches!(item.ty, ComponentItem::ComponentFunc(_)))
        .map(|(name, _)| name.to_string())
        .collect()
}

/// A cache file name made of the agent's name (any file name) and nothing else.
fn cache_name(name: &str) -> String {
    let base = name.rsplit('/').next().unwrap_or(name);
    let clean: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    format!("agent-{clean}")
}

/// Pre-instantiates an agent with its protocol's linker (WASI, the process import, and
/// what `add` adds: the world's own imports; made once per runtime and protocol), then
/// checks it against its world with `typed` (the bindings' `Pre::new`). Each failure names
/// the agent and what it lacks.
pub(crate) fn prepare<E: Send + 'static, P>(
    runtime: &Runtime,
    name: &str,
    component: &Component,
    add: fn(&mut Linker<HostState<E>>) -> wasmtime::Result<()>,
    world: &str,
    typed: impl FnOnce(InstancePre<HostState<E>>) -> wasmtime::Result<P>,
) -> Result<P> {
    let pre = runtime
        .host()
        .linker_for(add)
        .map_err(anyhow::Error::from)?
        .instantiate_pre(component)
        .map_err(anyhow::Error::from)
        .with_context(|| format!("`{name}` imports something wasbox does not provide"))?;
    typed(pre)
        .map_err(anyhow::Error::from)
        .with_context(|| format!("`{name}` does not match world `{world}`"))
}

/// A job for an agent instance of `sandbox`: what it starts through the process import are
/// its children, and the instance is interrupted when the job is stopped or, with a
/// deadline, when that passes.
pub(crate) fn job(sandbox: &Sandbox, deadline: Option<Instant>) -> Arc<JobContext> {
    let deadline = deadline.unwrap_or_else(|| deadline_after(std::time::Duration::MAX));
    Arc::new(JobContext::new(
        sandbox.site().clone(),
        deadline,
        None,
        None,
        ROOM_WAIT,
    ))
}

/// A protocol's prepared agent component: what [`start`] makes an instance of.
pub(crate) trait Instantiate<E: 'static>: Sync {
    type Instance;
    fn instantiate<'a>(
        &'a self,
        store: &'a mut Store<HostState<E>>,
    ) -> impl Future<Output = wasmtime::Result<Self::Instance>> + Send + 'a;
}

/// A store and an instance of an agent (`pre` makes the instance in the store): `argv[0]`
/// is the agent's name, the working directory is the mount point, stdin is empty and
/// stdout and stderr go to `log`. Like a job's process, it waits up to [`ROOM_WAIT`] for
/// room other sandboxes hold (a place among the node's live instances, or memory of its
/// budget) before it fails to start. Its error says why; the caller says what failed.
pub(crate) async fn start<E: Send + 'static, P: Instantiate<E>>(
    sandbox: &Sandbox,
    job: &Arc<JobContext>,
    name: &str,
    env: &[(String, String)],
    log: OutputSink,
    ext: E,
    pre: &P,
) -> Result<(Store<HostState<E>>, P::Instance)> {
    let until = Instant::now() + ROOM_WAIT;
    let may_wait = || Instant::now() < until && !job.was_stopped();
    let mount = sandbox.mount().to_string();
    let env = crate::host::environment(&sandbox.site().sandbox, env, &mount);
    let argv = [name.to_string()];
    let mut ext = ext;
    let mut admission = None;
    loop {
        let place = match admission.take() {
            Some(place) => place,
            None => match job.admission() {
                Ok(place) => place,
                Err(_) if may_wait() => {
                    tokio::time::sleep(ROOM_POLL).await;
                    continue;
                }
                Err(refused) => bail!("{refused}"),
            },
        };
        let launch = Launch {
            pid: sandbox.site().sandbox.new_pid(),
            memory: None,
            cpu: Default::default(),
            argv: &argv,
            env: &env,
            cwd: &mount,
            stdio: Stdio {
                stdin: InputSource::Null,
                stdout: log.clone(),
                stderr: log.clone(),
            },
            admission: Some(place),
            placement: Placement::Pool,
        };
        let mut store = new_store(job, launch, ext).map_err(|m| anyhow::anyhow!(m))?;
        match pre.instantiate(&mut store).await {
            Ok(instance) => return Ok((store, instance)),
            Err(e) if may_wait() && lacked_room(&e) => {
                // Give back what the failed instance held, keep the place, look again.
                let (place, back) = store.into_data().into_parts();
                (admission, ext) = (Some(place), back);
                tokio::time::sleep(ROOM_POLL).await;
            }
            Err(e) => return Err(anyhow::Error::from(e)),
        }
    }
}

/// Why a call into an agent failed, for its operator and its protocol's error.
pub(crate) fn failure(e: &wasmtime::Error) -> String {
    match Exit::of_error(e) {
        Exit::Code(n) => format!("the agent exited with code {n}"),
        Exit::Interrupted => "the agent was stopped".to_string(),
        Exit::OutOfMemory(m) => format!("the agent ran out of memory ({m})"),
        Exit::BrokenPipe | Exit::Trap(_) => {
            format!("the agent crashed: {}", format!("{e:#}").replace('\n', " "))
        }
    }
}

/// Whether a call ended because its job's deadline passed or the job was stopped.
pub(crate) fn interrupted(e: &wasmtime::Error) -> bool {
    Exit::of_error(e) == Exit::Interrupted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_names_are_plain_file_names() {
        assert_eq!(cache_name("/x/y/my agent.wasm"), "agent-my_agent_wasm");
        assert_eq!(cache_name("llm-agent"), "agent-llm-agent");
    }
}
