//! Bouvet agents: components of world `wasbox:bouvet/agent`, the guest side of bouvet's
//! `AgentClient` (`docs/specs/bouvet-agent-client-vsock.md`). The default one is built from
//! `guest-components/agents/bouvet-agent`; any component exporting the world may replace it.
//!
//! An [`BouvetInstance`] serves one connection: one instance of the component, called once
//! per request, in order. Each call runs as a job of its own with a deadline: when it
//! passes, the commands the call started are stopped, the instance is interrupted, and the
//! call answers like a command that timed out (exit code -1 and a line on stderr), in time
//! for the client, which gives up after 30 s. An instance the host had to stop, or whose
//! caller went away mid-call, is dropped; the next call gets a fresh one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use bytes::Bytes;
use wasmtime::Store;
use wasmtime::component::Linker;

use crate::agent;
use crate::bindings::bouvet as wit;
use crate::host::{HostState, JobContext};
use crate::io::OutputSink;
use crate::runtime::{Runtime, Sandbox};

/// How long one call may take unless the server says otherwise: under the 30 s after which
/// bouvet's client stops waiting and reads every later answer one off.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(25);
/// JSON-RPC error codes of the protocol.
pub const PARSE_ERROR: i32 = -32700;
pub const METHOD_NOT_FOUND: i32 = -32601;
pub const INVALID_PARAMS: i32 = -32602;
pub const INTERNAL_ERROR: i32 = -32603;
/// How long after its deadline a call that does not come back is abandoned.
const OVERRUN: Duration = Duration::from_secs(2);

static BOUVET_AGENT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/bouvet_agent.wasm"));

/// The default agent (`guest-components/agents/bouvet-agent`).
pub fn builtin_agent() -> &'static [u8] {
    BOUVET_AGENT
}

/// A bouvet agent's part of its store data: nothing beyond WASI and the process import.
pub(crate) struct BouvetHost;

fn add_to_linker(_: &mut Linker<HostState<BouvetHost>>) -> wasmtime::Result<()> {
    Ok(())
}

impl agent::Instantiate<BouvetHost> for wit::AgentPre<HostState<BouvetHost>> {
    type Instance = wit::Agent;
    fn instantiate<'a>(
        &'a self,
        store: &'a mut Store<HostState<BouvetHost>>,
    ) -> impl Future<Output = wasmtime::Result<wit::Agent>> + Send + 'a {
        self.instantiate_async(store)
    }
}

/// A loaded bouvet agent component. Cheap to clone.
#[derive(Clone)]
pub struct BouvetAgent {
    name: String,
    pre: Arc<wit::AgentPre<HostState<BouvetHost>>>,
}

impl BouvetAgent {
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Runtime {
    /// Loads a bouvet agent component; one that does not export the world's functions is
    /// refused, naming them.
    pub async fn bouvet_agent(&self, name: &str, wasm: impl Into<Bytes>) -> Result<BouvetAgent> {
        let component = agent::compile(self, name, wasm.into(), None).await?;
        let funcs = agent::exported_functions(self, &component);
        let wanted = [
            "ping",
            "exec",
            "exec-code",
            "read-file",
            "write-file",
            "list-dir",
        ];
        let missing: Vec<&str> = wanted
            .iter()
            .filter(|w| !funcs.iter().any(|f| f == *w))
            .copied()
            .collect();
        if !missing.is_empty() {
            bail!(
                "`{name}` is not a bouvet agent: world `wasbox:bouvet/agent@0.1.0` exports {}, \
                 and it lacks {}",
                wanted.join(", "),
                missing.join(", ")
            );
        }
        let pre = agent::prepare(
            self,
            name,
            &component,
            add_to_linker,
            "wasbox:bouvet/agent",
            wit::AgentPre::new,
        )?;
        Ok(BouvetAgent {
            name: name.to_string(),
            pre: Arc::new(pre),
        })
    }
}

/// A JSON-RPC error: its code and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RpcError {
    pub code: i32,
    pub message: String,
}

impl RpcError {
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
        }
    }
}

impl From<wit::wasbox::bouvet::types::RpcError> for RpcError {
    fn from(e: wit::wasbox::bouvet::types::RpcError) -> Self {
        RpcError {
            code: e.code,
            message: e.message,
        }
    }
}

/// What `exec` and `exec_code` return.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecResult {
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<wit::wasbox::bouvet::types::ExecResult> for ExecResult {
    fn from(r: wit::wasbox::bouvet::types::ExecResult) -> Self {
        ExecResult {
            exit_code: r.exit_code,
            stdout: r.stdout,
            stderr: r.stderr,
        }
    }
}

/// One entry of `list_dir`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileEntry {
    pub name: String,
    pub is_dir: bool,
    pub size: u64,
}

struct Live {
    store: Store<HostState<BouvetHost>>,
    agent: wit::Agent,
}

/// What a call of the component gave: the tokio timeout around it, wasmtime's result, the
/// world's own result.
type Outcome<T> = Result<
    wasmtime::Result<Result<T, wit::wasbox::bouvet::types::RpcError>>,
    tokio::time::error::Elapsed,
>;

/// How a call came back.
enum Settled<T> {
    Value(T),
    Failed(RpcError),
    /// Past its deadline; the value is what the agent returned anyway, if it returned.
    TimedOut(Option<T>),
}

/// One instance of a bouvet agent in a sandbox, serving the requests of one connection in
/// order. See the module documentation.
pub struct BouvetInstance {
    agent: BouvetAgent,
    sandbox: Sandbox,
    log: OutputSink,
    timeout: Duration,
    live: Option<Live>,
    /// The job of the call under way; still set when its caller dropped it mid-way.
    in_flight: Option<Arc<JobContext>>,
}

impl BouvetInstance {
    /// An instance (made at its first call) whose calls may each take `timeout`; its own
    /// output goes to `log`.
    pub fn new(agent: BouvetAgent, sandbox: Sandbox, log: OutputSink, timeout: Duration) -> Self {
        BouvetInstance {
            agent,
            sandbox,
            log,
            timeout,
            live: None,
            in_flight: None,
        }
    }

    /// The instance for the next call, with a job whose deadline is the call's.
    async fn begin(&mut self) -> Result<(&mut Live, Arc<JobContext>), RpcError> {
        if let Some(job) = self.in_flight.take() {
            // The previous call was abandoned by its caller: its commands stop, and the
            // instance it left mid-call is not used again.
            job.stop();
            self.live = None;
        }
        if self.live.is_none() {
            let job = agent::job(&self.sandbox, None);
            let (store, agent) = agent::start(
                &self.sandbox,
                &job,
                &self.agent.name,
                &[],
                self.log.clone(),
                BouvetHost,
                &*self.agent.pre,
            )
            .await
            .map_err(|e| RpcError::new(INTERNAL_ERROR, format!("cannot start the agent: {e:#}")))?;
            self.live = Some(Live { store, agent });
        }
        // The call's commands end at its deadline; the instance itself gets a moment more to
        // report what they printed before they were stopped.
        let deadline = crate::job::deadline_after(self.timeout);
        let job = agent::job(&self.sandbox, Some(deadline));
        self.in_flight = Some(job.clone());
        let live = self.live.as_mut().expect("made above");
        live.store.data_mut().set_job(job.clone());
        live.store.data_mut().set_own_deadline(deadline + OVERRUN);
        Ok((live, job))
    }

    /// Reads how a call ended. Whatever the call started is stopped now; an instance that
    /// trapped, overran or was stopped is dropped.
    fn settle<T>(&mut self, job: &JobContext, outcome: Outcome<T>) -> Settled<T> {
        self.in_flight = None;
        job.abort_all();
        let late = Instant::now() >= job.deadline();
        let (settled, healthy) = match outcome {
            Ok(Ok(Ok(v))) if late => (Settled::TimedOut(Some(v)), true),
            Ok(Ok(Ok(v))) => (Settled::Value(v), true),
            Ok(Ok(Err(_))) if late => (Settled::TimedOut(None), true),
            Ok(Ok(Err(e))) => (Settled::Failed(e.into()), true),
            Ok(Err(trap)) if late || agent::interrupted(&trap) => (Settled::TimedOut(None), false),
            Ok(Err(trap)) => (
                Settled::Failed(RpcError::new(INTERNAL_ERROR, agent::failure(&trap))),
                false,
            ),
            Err(_) => (Settled::TimedOut(None), false),
        };
        if !healthy || job.was_stopped() {
            self.live = None;
        }
        settled
    }

    fn timed_out(&self, partial: Option<ExecResult>) -> ExecResult {
        let note = format!(
            "wasbox: the command timed out after {}s and was stopped\n",
            self.timeout.as_secs_f64()
        );
        let mut r = partial.unwrap_or(ExecResult {
            exit_code: -1,
            stdout: String::new(),
            stderr: String::new(),
        });
        r.exit_code = -1;
        if !r.stderr.is_empty() && !r.stderr.ends_with('\n') {
            r.stderr.push('\n');
        }
        r.stderr.push_str(&note);
        r
    }

    fn too_slow(&self) -> RpcError {
        RpcError::new(
            INTERNAL_ERROR,
            format!(
                "the agent did not answer within {}s",
                self.timeout.as_secs_f64()
            ),
        )
    }

    /// `ping`.
    pub async fn ping(&mut self) -> Result<(), RpcError> {
        let (live, job) = self.begin().await?;
        let r = run_call(&job, live.agent.call_ping(&mut live.store)).await;
        match self.settle(&job, r) {
            Settled::Value(_) => Ok(()),
            Settled::Failed(e) => Err(e),
            Settled::TimedOut(_) => Err(self.too_slow()),
        }
    }

    /// `exec {cmd}`.
    pub async fn exec(&mut self, cmd: &str) -> Result<ExecResult, RpcError> {
        let (live, job) = self.begin().await?;
        let r = run_call(&job, live.agent.call_exec(&mut live.store, cmd)).await;
        match self.settle(&job, r) {
            Settled::Value(v) => Ok(v.into()),
            Settled::Failed(e) => Err(e),
            Settled::TimedOut(v) => Ok(self.timed_out(v.map(Into::into))),
        }
    }

    /// `exec_code {lang, code}`.
    pub async fn exec_code(&mut self, lang: &str, code: &str) -> Result<ExecResult, RpcError> {
        let (live, job) = self.begin().await?;
        let r = run_call(&job, live.agent.call_exec_code(&mut live.store, lang, code)).await;
        match self.settle(&job, r) {
            Settled::Value(v) => Ok(v.into()),
            Settled::Failed(e) => Err(e),
            Settled::TimedOut(v) => Ok(self.timed_out(v.map(Into::into))),
        }
    }

    /// `read_file {path}`.
    pub async fn read_file(&mut self, path: &str) -> Result<String, RpcError> {
        let (live, job) = self.begin().await?;
        let r = run_call(&job, live.agent.call_read_file(&mut live.store, path)).await;
        match self.settle(&job, r) {
            Settled::Value(v) => Ok(v),
            Settled::Failed(e) => Err(e),
            Settled::TimedOut(_) => Err(self.too_slow()),
        }
    }

    /// `write_file {path, content}`.
    pub async fn write_file(&mut self, path: &str, content: &str) -> Result<bool, RpcError> {
        let (live, job) = self.begin().await?;
        let r = run_call(
            &job,
            live.agent.call_write_file(&mut live.store, path, content),
        )
        .await;
        match self.settle(&job, r) {
            Settled::Value(v) => Ok(v),
            Settled::Failed(e) => Err(e),
            Settled::TimedOut(_) => Err(self.too_slow()),
        }
    }

    /// `list_dir {path}`.
    pub async fn list_dir(&mut self, path: &str) -> Result<Vec<FileEntry>, RpcError> {
        let (live, job) = self.begin().await?;
        let r = run_call(&job, live.agent.call_list_dir(&mut live.store, path)).await;
        match self.settle(&job, r) {
            Settled::Value(v) => Ok(v
                .into_iter()
                .map(|e| FileEntry {
                    name: e.name,
                    is_dir: e.is_dir,
                    size: e.size,
                })
                .collect()),
            Settled::Failed(e) => Err(e),
            Settled::TimedOut(_) => Err(self.too_slow()),
        }
    }
}

/// Awaits a call. At the job's deadline the commands it started are stopped (so that it can
/// still report what they printed); the call itself gets [`OVERRUN`] more.
async fn run_call<F: std::future::Future>(
    job: &JobContext,
    call: F,
) -> Result<F::Output, tokio::time::error::Elapsed> {
    tokio::pin!(call);
    tokio::select! {
        r = &mut call => return Ok(r),
        () = tokio::time::sleep_until(job.deadline().into()) => job.abort_all(),
    }
    tokio::time::timeout(OVERRUN, call).await
}

impl Drop for BouvetInstance {
    fn drop(&mut self) {
        // A caller that went away mid-call: what the call started stops with it.
        if let Some(job) = self.in_flight.take() {
            job.stop();
        }
    }
}
