//! Term agents: components of world `wasbox:term/agent@2.0.0` (SDK 2.0) or
//! `wasbox:term/agent-v1@1.0.0` (SDK 1.x), hosted in a sandbox whose workspace is the task
//! directory.
//!
//! The host side of the SDK lives here: the agent's `context` (shell commands as `sh -c` jobs
//! of the task sandbox, files, steps, history, `done`), the limits the SDK enforces
//! (`max_steps`, the global timeout, which a wasm host can enforce even on a stuck agent),
//! and the `llm` import, served by the proxy client of [`LlmProxy`]. Front-ends (HTTP,
//! stdio, the `agent run` harness) only translate wire formats to [`AgentRunner`] calls.

mod llm;
mod python;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable, types::ComponentItem};
use wasmtime::{Store, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxView, WasiView};

pub use llm::{
    ChatCompletion, ChatError, ChatRequest, DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, LlmProxy,
};
pub use python::{build_python_agent, componentize_py};

use crate::bindings::{term1, term2};
use crate::job::{JobSpec, JobStatus, StopSignal};
use crate::runtime::Runtime;
use crate::sandbox::Sandbox;
use crate::stdio::OutputSink;

/// `/start` defaults of SDK 2.0.
pub const DEFAULT_MAX_STEPS: u32 = 200;
pub const DEFAULT_TIMEOUT_SECS: u64 = 300;
/// `ctx.shell` timeout when the agent gives none.
pub const DEFAULT_COMMAND_TIMEOUT_SECS: f64 = 60.0;
/// `/status` keeps this many history entries, commands and outputs cut to these lengths
/// (characters).
pub const HISTORY_LEN: usize = 30;
pub const HISTORY_COMMAND_CHARS: usize = 200;
pub const HISTORY_OUTPUT_CHARS: usize = 500;
/// How long `setup` may take, and `cleanup`.
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(120);
pub const CLEANUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest file `ctx.read` returns.
pub const MAX_READ_BYTES: u64 = 10 << 20;

/// Which SDK an agent component was written for, read from its exports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentKind {
    /// World `wasbox:term/agent@2.0.0`: `setup`, `run(task)`, `cleanup`.
    Sdk2,
    /// World `wasbox:term/agent-v1@1.0.0`: `setup`, `solve(request)`, `cleanup`.
    Sdk1,
}

impl AgentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::Sdk2 => "SDK 2.0 (wasbox:term/agent@2.0.0)",
            AgentKind::Sdk1 => "SDK 1.x (wasbox:term/agent-v1@1.0.0)",
        }
    }
}

/// The example agents built from `guest-components/agents/` and embedded in the crate.
pub const BUILTIN_AGENTS: &[&str] = &["llm-agent", "llm-agent-v1"];

static LLM_AGENT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/llm_agent.wasm"));
static LLM_AGENT_V1: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/llm_agent_v1.wasm"));

/// The component of a built-in example agent (see [`BUILTIN_AGENTS`]).
pub fn builtin_agent(name: &str) -> Option<&'static [u8]> {
    match name {
        "llm-agent" => Some(LLM_AGENT),
        "llm-agent-v1" => Some(LLM_AGENT_V1),
        _ => None,
    }
}

/// Adds what an agent may import: WASI and both term worlds' imports.
pub(crate) fn add_to_linker(linker: &mut Linker<AgentState>) -> Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    term2::Agent::add_to_linker::<AgentState, HasSelf<TermHost>>(linker, |s| &mut s.host)?;
    term1::AgentV1::add_to_linker::<AgentState, HasSelf<TermHost>>(linker, |s| &mut s.host)?;
    Ok(())
}

enum Pre {
    Sdk2(term2::AgentPre<AgentState>),
    Sdk1(term1::AgentV1Pre<AgentState>),
}

/// A loaded (compiled, linked) agent component. Cheap to clone.
#[derive(Clone)]
pub struct TermAgent {
    runtime: Runtime,
    name: String,
    pre: Arc<Pre>,
}

impl Runtime {
    /// Loads an agent component (compiled once and cached like every program) and finds
    /// which SDK it was written for. A component that exports neither world is refused.
    pub async fn term_agent(&self, name: &str, wasm: impl Into<Arc<[u8]>>) -> Result<TermAgent> {
        let inner = &self.inner;
        let linker = self.agent_linker()?;
        let engine = linker.engine();
        let component = inner
            .cache
            .load(engine, &cache_name(name), wasm.into())
            .await
            .map_err(anyhow::Error::from)
            .with_context(|| format!("`{name}` is not a loadable component"))?;
        let kind = kind_of(&component, engine).with_context(|| {
            format!(
                "`{name}` is not a term agent: it must export the functions of world \
                 `wasbox:term/agent@2.0.0` (setup, run, cleanup) or of world \
                 `wasbox:term/agent-v1@1.0.0` (setup, solve, cleanup)"
            )
        })?;
        let pre = linker
            .instantiate_pre(&component)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("`{name}` imports something wasbox does not provide"))?;
        let pre = match kind {
            AgentKind::Sdk2 => Pre::Sdk2(
                term2::AgentPre::new(pre)
                    .map_err(anyhow::Error::from)
                    .with_context(|| {
                        format!("`{name}` does not match world `wasbox:term/agent@2.0.0`")
                    })?,
            ),
            AgentKind::Sdk1 => Pre::Sdk1(
                term1::AgentV1Pre::new(pre)
                    .map_err(anyhow::Error::from)
                    .with_context(|| {
                        format!("`{name}` does not match world `wasbox:term/agent-v1@1.0.0`")
                    })?,
            ),
        };
        Ok(TermAgent {
            runtime: self.clone(),
            name: name.to_string(),
            pre: Arc::new(pre),
        })
    }
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

fn kind_of(component: &Component, engine: &wasmtime::Engine) -> Result<AgentKind> {
    let mut funcs = Vec::new();
    for (name, item) in component.component_type().exports(engine) {
        if let ComponentItem::ComponentFunc(_) = item.ty {
            funcs.push(name.to_string());
        }
    }
    let has = |n: &str| funcs.iter().any(|f| f == n);
    match (has("run"), has("solve")) {
        (true, false) => Ok(AgentKind::Sdk2),
        (false, true) => Ok(AgentKind::Sdk1),
        (true, true) => bail!("it exports both `run` and `solve`"),
        (false, false) if funcs.is_empty() => bail!("it exports no functions"),
        (false, false) => bail!("it exports only {}", funcs.join(", ")),
    }
}

impl TermAgent {
    pub fn kind(&self) -> AgentKind {
        match &*self.pre {
            Pre::Sdk2(_) => AgentKind::Sdk2,
            Pre::Sdk1(_) => AgentKind::Sdk1,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

// ---------------------------------------------------------------------------------------
// Task state (what `/status` shows)
// ---------------------------------------------------------------------------------------

/// A task as `POST /start` gives it.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskSpec {
    pub instruction: String,
    pub max_steps: u32,
    pub timeout: Duration,
}

impl TaskSpec {
    /// A task with SDK 2.0's defaults (200 steps, 300 s).
    pub fn new(instruction: impl Into<String>) -> Self {
        TaskSpec {
            instruction: instruction.into(),
            max_steps: DEFAULT_MAX_STEPS,
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_SECS),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskStatus {
    Idle,
    Running,
    Completed,
    Failed,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Idle => "idle",
            TaskStatus::Running => "running",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
        }
    }
}

/// One command of the history, cut like `/status` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryEntry {
    pub step: u32,
    pub command: String,
    /// stdout, then `"\n"` and stderr when stderr is not empty; `None` when both are.
    pub output: Option<String>,
    pub exit_code: i32,
}

/// What `/status` reports.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskSnapshot {
    pub status: TaskStatus,
    pub steps: u32,
    pub elapsed_secs: u64,
    pub error: Option<String>,
    pub done: bool,
    /// The last [`HISTORY_LEN`] commands, oldest first.
    pub history: Vec<HistoryEntry>,
}

#[derive(Default)]
struct TaskState {
    status: Option<TaskStatus>,
    instruction: String,
    max_steps: u32,
    timeout: Duration,
    started: Option<Instant>,
    steps: u32,
    error: Option<String>,
    done: bool,
    history: VecDeque<HistoryEntry>,
}

/// The state of the current (or last) task of an agent, shared between the agent host and
/// whoever reports it.
#[derive(Default)]
pub struct TaskMonitor(Mutex<TaskState>);

/// `POST /start` while a task runs.
#[derive(Debug, PartialEq, Eq)]
pub struct AlreadyRunning;

impl TaskMonitor {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn state(&self) -> std::sync::MutexGuard<'_, TaskState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a task: steps, history, error and the clock start over. Refused while a task
    /// runs.
    pub fn try_start(&self, task: &TaskSpec) -> Result<(), AlreadyRunning> {
        let mut s = self.state();
        if s.status == Some(TaskStatus::Running) {
            return Err(AlreadyRunning);
        }
        *s = TaskState {
            status: Some(TaskStatus::Running),
            instruction: task.instruction.clone(),
            max_steps: task.max_steps,
            timeout: task.timeout,
            started: Some(Instant::now()),
            ..TaskState::default()
        };
        Ok(())
    }

    pub fn snapshot(&self) -> TaskSnapshot {
        let s = self.state();
        TaskSnapshot {
            status: s.status.unwrap_or(TaskStatus::Idle),
            steps: s.steps,
            elapsed_secs: s.started.map_or(0, |t| t.elapsed().as_secs()),
            error: s.error.clone(),
            done: s.done,
            history: s.history.iter().cloned().collect(),
        }
    }

    pub fn status(&self) -> TaskStatus {
        self.state().status.unwrap_or(TaskStatus::Idle)
    }

    fn finish(&self, error: Option<String>) {
        let mut s = self.state();
        if s.status != Some(TaskStatus::Running) {
            return;
        }
        match error {
            Some(e) => {
                s.status = Some(TaskStatus::Failed);
                s.error = Some(e);
            }
            None => {
                s.status = Some(TaskStatus::Completed);
                s.done = true;
            }
        }
    }
}

/// What happens during a task, as it happens (for transcripts and logs).
#[derive(Clone, Debug)]
pub enum TaskEvent {
    /// A shell command starts.
    Command { step: u32, command: String },
    /// It ended: its whole output (not cut) and exit code.
    Output {
        step: u32,
        stdout: String,
        stderr: String,
        exit_code: i32,
    },
    /// `ctx.log`.
    Log(String),
    /// An LLM call ended.
    Llm { ok: bool, detail: String },
}

pub type EventSink = Arc<dyn Fn(&TaskEvent) + Send + Sync>;

// ---------------------------------------------------------------------------------------
// The host side of the imports
// ---------------------------------------------------------------------------------------

/// Where an agent runs and what it may reach.
#[derive(Clone)]
pub struct AgentEnv {
    /// The task sandbox: its workspace is the task directory, mounted at `/app` by
    /// convention, and shell commands run in it.
    pub sandbox: Sandbox,
    /// The agent's only way out.
    pub llm: LlmProxy,
    /// Where the agent's own stdout and stderr go (its logs).
    pub log: OutputSink,
    /// Environment of the agent component (shell commands get the sandbox's).
    pub env: Vec<(String, String)>,
    /// Told about every command, output, log line and LLM call.
    pub on_event: Option<EventSink>,
}

pub(crate) struct AgentState {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: StoreLimits,
    host: TermHost,
}

impl WasiView for AgentState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

pub(crate) struct TermHost {
    env: AgentEnv,
    monitor: Arc<TaskMonitor>,
    /// When the running task must end.
    deadline: Option<Instant>,
    /// Why the host ended the agent (a limit), reported as the task's error.
    fatal: Option<String>,
}

impl TermHost {
    fn emit(&self, event: TaskEvent) {
        if let Some(f) = &self.env.on_event {
            f(&event);
        }
    }

    /// Ends the agent: the call returns an error to wasmtime, so the guest cannot go on.
    fn fail(&mut self, message: String) -> wasmtime::Error {
        self.fatal = Some(message.clone());
        wasmtime::Error::msg(message)
    }

    async fn chat(
        &mut self,
        request: ChatRequest,
    ) -> wasmtime::Result<Result<ChatCompletion, String>> {
        let result = self.env.llm.chat(&request).await;
        match result {
            Ok(c) => {
                self.emit(TaskEvent::Llm {
                    ok: true,
                    detail: format!("{}: {} tokens, ${:.4}", c.model, c.total_tokens, c.cost_usd),
                });
                Ok(Ok(c))
            }
            Err(ChatError::CostLimit(m)) => Err(self.fail(m)),
            Err(ChatError::Failed(m)) => {
                self.emit(TaskEvent::Llm {
                    ok: false,
                    detail: m.clone(),
                });
                Ok(Err(m))
            }
        }
    }
}

/// Stops a shell job when the agent's call is abandoned (global timeout).
struct StopOnDrop(StopSignal);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

fn truncate_chars(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => s[..i].to_string(),
        None => s.to_string(),
    }
}

/// `Command timed out after 60s` (whole seconds without a fraction, like Python prints an
/// int).
fn seconds(t: f64) -> String {
    if t.fract() == 0.0 && t.abs() < 1e15 {
        format!("{}", t as i64)
    } else {
        format!("{t}")
    }
}

impl term2::wasbox::term::context::Host for TermHost {
    async fn instruction(&mut self) -> wasmtime::Result<String> {
        Ok(self.monitor.state().instruction.clone())
    }

    async fn step(&mut self) -> wasmtime::Result<u32> {
        Ok(self.monitor.state().steps)
    }

    async fn elapsed_secs(&mut self) -> wasmtime::Result<u64> {
        Ok(self
            .monitor
            .state()
            .started
            .map_or(0, |t| t.elapsed().as_secs()))
    }

    async fn shell(
        &mut self,
        command: String,
        timeout_secs: Option<f64>,
        cwd: Option<String>,
    ) -> wasmtime::Result<term2::wasbox::term::types::ShellResult> {
        let step = {
            let mut s = self.monitor.state();
            let over = self.deadline.is_some_and(|d| Instant::now() >= d);
            let refusal = if s.done {
                Some("Task already marked as done".to_string())
            } else if s.steps >= s.max_steps {
                Some(format!("Max steps ({}) exceeded", s.max_steps))
            } else if over {
                Some(format!(
                    "Global timeout ({}s) exceeded",
                    s.timeout.as_secs()
                ))
            } else {
                None
            };
            if let Some(m) = refusal {
                drop(s);
                return Err(self.fail(m));
            }
            s.steps += 1;
            s.steps
        };
        self.emit(TaskEvent::Command {
            step,
            command: command.clone(),
        });
        let timeout = timeout_secs
            .filter(|t| t.is_finite() && *t > 0.0)
            .unwrap_or(DEFAULT_COMMAND_TIMEOUT_SECS);
        let sandbox = &self.env.sandbox;
        let cwd = match cwd.filter(|c| !c.is_empty()) {
            Some(c) if c.starts_with('/') => c,
            Some(c) => format!("{}/{c}", sandbox.mount()),
            None => sandbox.mount().to_string(),
        };
        let stop = StopSignal::new();
        let _guard = StopOnDrop(stop.clone());
        let missing_cwd = !sandbox.is_dir(&cwd);
        let spec = JobSpec::shell(command.clone())
            .cwd(cwd.clone())
            .timeout(Duration::from_secs_f64(timeout.min(1e9)))
            .stop_signal(stop);
        let ran = if missing_cwd {
            // As `cd CWD && ...` would fail; the command does not run.
            Err(anyhow!("sh: cd: {cwd}: No such file or directory"))
        } else {
            sandbox.run(spec).await
        };
        let (stdout, stderr, exit_code, timed_out) = match ran {
            Ok(out) if out.status == JobStatus::Timeout => (
                String::new(),
                format!("Command timed out after {}s", seconds(timeout)),
                -1,
                true,
            ),
            Ok(out) => (out.stdout, out.stderr, out.exit_code, false),
            Err(e) if missing_cwd => (String::new(), format!("{e}\n"), 1, false),
            Err(e) => (String::new(), format!("{e:#}"), -1, false),
        };
        self.emit(TaskEvent::Output {
            step,
            stdout: stdout.clone(),
            stderr: stderr.clone(),
            exit_code,
        });
        let output = match (stdout.is_empty(), stderr.is_empty()) {
            (true, true) => None,
            (_, true) => Some(stdout.clone()),
            _ => Some(format!("{stdout}\n{stderr}")),
        };
        {
            let mut s = self.monitor.state();
            if s.history.len() == HISTORY_LEN {
                s.history.pop_front();
            }
            s.history.push_back(HistoryEntry {
                step,
                command: truncate_chars(&command, HISTORY_COMMAND_CHARS),
                output: output.map(|o| truncate_chars(&o, HISTORY_OUTPUT_CHARS)),
                exit_code,
            });
        }
        Ok(term2::wasbox::term::types::ShellResult {
            stdout,
            stderr,
            exit_code,
            timed_out,
        })
    }

    async fn read(&mut self, path: String) -> wasmtime::Result<Result<String, String>> {
        Ok(match self.env.sandbox.read_file(&path, MAX_READ_BYTES) {
            Ok(bytes) => String::from_utf8(bytes).map_err(|_| format!("{path}: not UTF-8 text")),
            Err(e) => Err(e.to_string()),
        })
    }

    async fn write(
        &mut self,
        path: String,
        content: String,
    ) -> wasmtime::Result<Result<(), String>> {
        Ok(self
            .env
            .sandbox
            .write_file(&path, content.as_bytes())
            .map_err(|e| e.to_string()))
    }

    async fn log(&mut self, message: String) -> wasmtime::Result<()> {
        let line = format!("[agent] {}\n", message.trim_end_matches('\n'));
        let _ = self.env.log.write_all(line.as_bytes()).await;
        self.emit(TaskEvent::Log(message));
        Ok(())
    }

    async fn done(&mut self) -> wasmtime::Result<()> {
        self.monitor.state().done = true;
        Ok(())
    }
}

/// The `llm` import of both worlds: the same call, each package with its own types.
macro_rules! llm_host {
    ($world:ident) => {
        impl $world::wasbox::term::llm::Host for TermHost {
            async fn chat(
                &mut self,
                messages: Vec<$world::wasbox::term::types::Message>,
                options: $world::wasbox::term::types::ChatOptions,
            ) -> wasmtime::Result<Result<$world::wasbox::term::types::Completion, String>> {
                use $world::wasbox::term::types::{Completion, Usage};
                let request = ChatRequest {
                    messages: messages.into_iter().map(|m| (m.role, m.content)).collect(),
                    model: options.model,
                    max_tokens: options.max_tokens,
                    temperature: options.temperature,
                };
                Ok(TermHost::chat(self, request).await?.map(|c| Completion {
                    content: c.content,
                    model: c.model,
                    usage: Usage {
                        prompt_tokens: c.prompt_tokens,
                        completion_tokens: c.completion_tokens,
                        total_tokens: c.total_tokens,
                    },
                    cost_usd: c.cost_usd,
                }))
            }
        }

        impl $world::wasbox::term::types::Host for TermHost {}
    };
}

llm_host!(term2);
llm_host!(term1);

// ---------------------------------------------------------------------------------------
// Running an agent
// ---------------------------------------------------------------------------------------

/// A request of SDK 1.x (one line from the harness).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SolveRequest {
    pub instruction: String,
    pub step: u32,
    pub last_command: Option<String>,
    pub output: Option<String>,
    pub exit_code: Option<i32>,
    pub cwd: String,
}

/// One command of the legacy Terminal-Bench response shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Keystrokes {
    pub keystrokes: String,
    pub duration: Option<f64>,
}

/// A response of SDK 1.x (one line to the harness).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SolveResponse {
    pub command: Option<String>,
    pub task_complete: bool,
    pub text: Option<String>,
    pub analysis: Option<String>,
    pub plan: Option<String>,
    pub commands: Vec<Keystrokes>,
}

impl SolveResponse {
    /// The command the harness runs: a non-empty `command` wins, else the legacy
    /// keystrokes (a trailing newline is Enter, so it is dropped).
    pub fn command_to_run(&self) -> Option<String> {
        if let Some(c) = self.command.as_ref().filter(|c| !c.trim().is_empty()) {
            return Some(c.clone());
        }
        let typed: Vec<String> = self
            .commands
            .iter()
            .map(|k| k.keystrokes.trim_end_matches('\n').to_string())
            .filter(|k| !k.trim().is_empty())
            .collect();
        (!typed.is_empty()).then(|| typed.join("\n"))
    }
}

enum Bindings {
    Sdk2(term2::Agent),
    Sdk1(term1::AgentV1),
}

struct Live {
    store: Store<AgentState>,
    bindings: Bindings,
}

/// One agent instance at work: set up, given tasks (SDK 2.0) or requests (SDK 1.x), cleaned
/// up. An instance the host had to stop (timeout, trap, a limit) is dropped; the next call
/// makes a fresh one and sets it up first.
pub struct AgentRunner {
    agent: TermAgent,
    env: AgentEnv,
    monitor: Arc<TaskMonitor>,
    live: Option<Live>,
    /// How long one `solve` may take (SDK 1.x harnesses end an agent after 300 s).
    pub solve_timeout: Duration,
}

impl AgentRunner {
    pub fn new(agent: TermAgent, env: AgentEnv, monitor: Arc<TaskMonitor>) -> Self {
        AgentRunner {
            agent,
            env,
            monitor,
            live: None,
            solve_timeout: Duration::from_secs(DEFAULT_TIMEOUT_SECS),
        }
    }

    pub fn monitor(&self) -> &Arc<TaskMonitor> {
        &self.monitor
    }

    pub fn kind(&self) -> AgentKind {
        self.agent.kind()
    }

    async fn instantiate(&mut self) -> Result<Live> {
        let sandbox = &self.env.sandbox;
        let shared = &sandbox.shared;
        let mount = sandbox.mount().to_string();
        let mut env: Vec<(String, String)> = vec![
            ("HOME".into(), mount.clone()),
            ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
        ];
        for (k, v) in &self.env.env {
            env.retain(|(key, _)| key != k);
            env.push((k.clone(), v.clone()));
        }
        env.retain(|(k, _)| k != "PWD");
        env.push(("PWD".into(), mount.clone()));
        let mut wasi = WasiCtx::builder();
        wasi.args(&[self.agent.name.as_str()])
            .envs(&env)
            .initial_cwd(&mount)
            .stdout(self.env.log.clone())
            .stderr(self.env.log.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .allow_blocking_current_thread(true)
            .socket_addr_check(|_, _| Box::pin(async { false }));
        wasi.preopened_dir(&shared.workspace, &mount, FsPerms::ReadWrite)
            .map_err(anyhow::Error::from)
            .context("opening the task directory for the agent")?;
        if let Some((tmp, _)) = &shared.tmp {
            wasi.preopened_dir(tmp.path(), "/tmp", FsPerms::ReadWrite)
                .map_err(anyhow::Error::from)
                .context("opening /tmp for the agent")?;
        }
        let mut table = ResourceTable::new();
        table.set_max_capacity(shared.limits.max_open_resources);
        let limits = StoreLimitsBuilder::new()
            .memory_size(shared.limits.memory_bytes)
            .instances(64)
            .tables(64)
            .memories(8)
            .trap_on_grow_failure(true)
            .build();
        let state = AgentState {
            wasi: wasi.build(),
            table,
            limits,
            host: TermHost {
                env: self.env.clone(),
                monitor: self.monitor.clone(),
                deadline: None,
                fatal: None,
            },
        };
        let mut store = Store::new(self.agent.runtime.inner.linker.engine(), state);
        store.limiter(|s| &mut s.limits);
        // Yield at every epoch tick, so that a timeout can end even a guest that never
        // calls the host.
        store.epoch_deadline_async_yield_and_update(1);
        let bindings = match &*self.agent.pre {
            Pre::Sdk2(pre) => Bindings::Sdk2(pre.instantiate_async(&mut store).await?),
            Pre::Sdk1(pre) => Bindings::Sdk1(pre.instantiate_async(&mut store).await?),
        };
        Ok(Live { store, bindings })
    }

    /// Makes an instance (if none is alive) and calls its `setup`.
    pub async fn setup(&mut self) -> Result<(), String> {
        if self.live.is_some() {
            return Ok(());
        }
        let mut live = self
            .instantiate()
            .await
            .map_err(|e| format!("cannot start the agent: {e:#}"))?;
        let Live { store, bindings } = &mut live;
        let call = async {
            match bindings {
                Bindings::Sdk2(b) => b.call_setup(&mut *store).await,
                Bindings::Sdk1(b) => b.call_setup(&mut *store).await,
            }
        };
        match tokio::time::timeout(SETUP_TIMEOUT, call).await {
            Ok(Ok(Ok(()))) => {
                self.live = Some(live);
                Ok(())
            }
            Ok(Ok(Err(e))) => Err(format!("setup failed: {e}")),
            Ok(Err(trap)) => Err(format!("setup failed: {}", trap_message(&trap))),
            Err(_) => Err(format!(
                "setup did not return within {}s",
                SETUP_TIMEOUT.as_secs()
            )),
        }
    }

    /// Runs one task of an SDK 2.0 agent to its end and returns its final state. The task
    /// must have been started on the monitor ([`TaskMonitor::try_start`]); it is started
    /// here if it was not. The global timeout ends the agent wherever it is.
    pub async fn run_task(&mut self, task: &TaskSpec) -> TaskSnapshot {
        if self.monitor.status() != TaskStatus::Running {
            let _ = self.monitor.try_start(task);
        }
        let error = self.run_task_inner(task).await;
        self.monitor.finish(error);
        self.monitor.snapshot()
    }

    async fn run_task_inner(&mut self, task: &TaskSpec) -> Option<String> {
        if self.agent.kind() != AgentKind::Sdk2 {
            return Some("this agent is an SDK 1.x agent: it has no `run`".into());
        }
        let deadline = Instant::now() + task.timeout;
        let timeout_message = format!("Global timeout ({}s) exceeded", task.timeout.as_secs());
        if let Err(e) = tokio::time::timeout_at(deadline.into(), self.setup())
            .await
            .unwrap_or_else(|_| Err(timeout_message.clone()))
        {
            self.live = None;
            return Some(e);
        }
        let mut live = self.live.take()?;
        live.store.data_mut().host.deadline = Some(deadline);
        live.store.data_mut().host.fatal = None;
        let wit_task = term2::wasbox::term::types::Task {
            instruction: task.instruction.clone(),
            max_steps: task.max_steps,
            timeout_secs: task.timeout.as_secs(),
        };
        let Live { store, bindings } = &mut live;
        let Bindings::Sdk2(agent) = bindings else {
            return Some("not an SDK 2.0 agent".into());
        };
        let result =
            tokio::time::timeout_at(deadline.into(), agent.call_run(&mut *store, &wit_task)).await;
        let fatal = store.data_mut().host.fatal.take();
        store.data_mut().host.deadline = None;
        match result {
            Err(_) => Some(fatal.unwrap_or(timeout_message)),
            Ok(Err(trap)) => Some(fatal.unwrap_or_else(|| trap_message(&trap))),
            Ok(Ok(outcome)) => {
                // The instance is healthy: keep it for the next task.
                self.live = Some(live);
                outcome.err()
            }
        }
    }

    /// Answers one SDK 1.x request. An error (the agent's, a trap, or the solve timeout)
    /// drops the instance.
    pub async fn solve(&mut self, request: &SolveRequest) -> Result<SolveResponse, String> {
        if self.agent.kind() != AgentKind::Sdk1 {
            return Err("this agent is an SDK 2.0 agent: it has no `solve`".into());
        }
        self.setup().await?;
        let mut live = self.live.take().ok_or("the agent is not running")?;
        let req = term1::wasbox::term::types::Request {
            instruction: request.instruction.clone(),
            step: request.step,
            last_command: request.last_command.clone(),
            output: request.output.clone(),
            exit_code: request.exit_code,
            cwd: request.cwd.clone(),
        };
        let Live { store, bindings } = &mut live;
        let Bindings::Sdk1(agent) = bindings else {
            return Err("not an SDK 1.x agent".into());
        };
        let result =
            tokio::time::timeout(self.solve_timeout, agent.call_solve(&mut *store, &req)).await;
        let fatal = store.data_mut().host.fatal.take();
        match result {
            Err(_) => Err(format!(
                "the agent did not answer within {}s",
                self.solve_timeout.as_secs()
            )),
            Ok(Err(trap)) => Err(fatal.unwrap_or_else(|| trap_message(&trap))),
            Ok(Ok(Err(e))) => Err(e),
            Ok(Ok(Ok(r))) => {
                self.live = Some(live);
                Ok(SolveResponse {
                    command: r.command,
                    task_complete: r.task_complete,
                    text: r.text,
                    analysis: r.analysis,
                    plan: r.plan,
                    commands: r
                        .commands
                        .into_iter()
                        .map(|k| Keystrokes {
                            keystrokes: k.keystrokes,
                            duration: k.duration,
                        })
                        .collect(),
                })
            }
        }
    }

    /// Calls `cleanup` on a live instance and drops it.
    pub async fn cleanup(&mut self) {
        let Some(mut live) = self.live.take() else {
            return;
        };
        let Live { store, bindings } = &mut live;
        let call = async {
            match bindings {
                Bindings::Sdk2(b) => b.call_cleanup(&mut *store).await,
                Bindings::Sdk1(b) => b.call_cleanup(&mut *store).await,
            }
        };
        match tokio::time::timeout(CLEANUP_TIMEOUT, call).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %trap_message(&e), "agent cleanup failed"),
            Err(_) => tracing::warn!("agent cleanup did not return in time"),
        }
    }
}

/// A short reason for a trap: the guest's own message when it has one.
fn trap_message(e: &wasmtime::Error) -> String {
    if let Some(exit) = e.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return format!("the agent exited with code {}", exit.0);
    }
    let root = e.root_cause().to_string();
    if root.contains("forcing trap when growing") {
        return "the agent ran out of memory".into();
    }
    format!("the agent crashed: {}", format!("{e:#}").replace('\n', " "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_truncation_counts_characters() {
        assert_eq!(truncate_chars("héllo", 2), "hé");
        assert_eq!(truncate_chars("ab", 5), "ab");
        assert_eq!(truncate_chars(&"é".repeat(600), 500).chars().count(), 500);
    }

    #[test]
    fn timeouts_print_like_python() {
        assert_eq!(seconds(60.0), "60");
        assert_eq!(seconds(0.5), "0.5");
    }

    #[test]
    fn legacy_keystrokes_become_the_command() {
        let r = SolveResponse {
            commands: vec![Keystrokes {
                keystrokes: "echo hi > f\n".into(),
                duration: Some(0.5),
            }],
            ..Default::default()
        };
        assert_eq!(r.command_to_run().as_deref(), Some("echo hi > f"));
        let r = SolveResponse {
            command: Some("ls".into()),
            ..r
        };
        assert_eq!(r.command_to_run().as_deref(), Some("ls"));
    }
}
