//! Sidecar agents: components of world `wasbox:sidecar/agent@1.0.0`, the agent templates of
//! SnapDescribe's agent sidecar (`docs/specs/sidecar-protocol.zh.md`). The desktop host sends
//! a conversation; the agent thinks, asks the host to run tools, and answers.
//!
//! A run is one call of `run` on a fresh instance. What the agent does becomes [`RunEvent`]s
//! (the front-end numbers them and sends them as SSE): `call-tool` sends `ToolCall` and
//! waits until [`RunControl::deliver`] brings the host's result or the tool's timeout passes;
//! [`RunControl::cancel`] ends the run wherever it is (in its own code, waiting for a tool or
//! for the model) and `Cancelled` follows at once. The model is reached through `wasbox:llm`,
//! served by a [`ChatBackend`] that holds whatever key it needs: the key never enters the
//! sandbox, an event, or a message the agent sees.

use crate::sync::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use bytes::Bytes;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::{oneshot, watch};
use wasmtime::component::{HasSelf, Linker};

use super::llm::{self, ChatBackend, HasLlm, LlmHost};
use crate::agent;
use crate::bindings::sidecar as wit;
use crate::host::HostState;
use crate::io::OutputSink;
use crate::runtime::{Runtime, Sandbox};

use wit::wasbox::sidecar::types as wt;

/// The example agents built from `guest-components/agents/` and embedded in the crate.
pub const BUILTIN_AGENTS: &[&str] = &["tool-echo", "chat"];

static TOOL_ECHO: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/sidecar_tool_echo.wasm"));
static CHAT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/sidecar_chat.wasm"));

/// The component of a built-in example agent (see [`BUILTIN_AGENTS`]).
pub fn builtin_agent(name: &str) -> Option<&'static [u8]> {
    match name {
        "tool-echo" => Some(TOOL_ECHO),
        "chat" => Some(CHAT),
        _ => None,
    }
}

/// Longest a run may take in all, unless the caller says otherwise.
pub const DEFAULT_RUN_TIMEOUT: Duration = Duration::from_secs(3600);
/// How long a tool may run when the inventory says nothing sensible (0).
pub const DEFAULT_TOOL_TIMEOUT_SECS: u32 = 60;

/// An agent template, as `GET /agents` lists it, in one locale.
#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    pub id: String,
    pub name: String,
    pub description: String,
    pub version: String,
    pub parameters: Vec<Parameter>,
    pub tools: Vec<String>,
}

/// One parameter of a template.
#[derive(Clone, Debug, PartialEq)]
pub struct Parameter {
    pub name: String,
    /// A JSON type name.
    pub kind: String,
    pub description: String,
    pub required: bool,
    pub default: Option<Value>,
}

/// A tool the host offers for a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tool {
    pub id: String,
    pub name: Option<String>,
    pub timeout_sec: u32,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Constraints {
    pub allow_network: Option<bool>,
    pub max_tool_concurrency: Option<u32>,
    pub temperature: Option<f64>,
}

/// The body of `POST /runs`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunRequest {
    pub run_id: String,
    pub record_id: Option<String>,
    pub agent_id: Option<String>,
    pub locale: Option<String>,
    pub prompt: Option<String>,
    /// (role, content) pairs.
    pub conversation: Vec<(String, String)>,
    pub image_reference: Option<String>,
    pub image_base64: Option<String>,
    pub tool_inventory: Vec<Tool>,
    pub constraints: Constraints,
    pub metadata: Option<Value>,
}

/// How a tool call went, as the host reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolStatus {
    Ok,
    Error,
    Timeout,
}

impl ToolStatus {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ok" => Some(ToolStatus::Ok),
            "error" => Some(ToolStatus::Error),
            "timeout" => Some(ToolStatus::Timeout),
            _ => None,
        }
    }
}

/// The body of `POST /runs/{runId}/tools/{toolCallId}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolResult {
    pub status: ToolStatus,
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub duration_ms: u64,
}

/// Something that happened in a run, in order. The terminal ones (`Completed`, `Failed`,
/// `Cancelled`) come last, once.
#[derive(Clone, Debug, PartialEq)]
pub enum RunEvent {
    Started,
    Thought {
        text: String,
    },
    ToolCall {
        tool_call_id: String,
        tool_id: String,
        arguments: Value,
        timeout_sec: u32,
    },
    ToolProgress {
        tool_call_id: String,
        chunk: String,
    },
    Completed {
        response: String,
        metadata: Option<Value>,
    },
    Failed {
        error_code: String,
        message: String,
        details: Option<Value>,
    },
    Cancelled {
        reason: String,
    },
    Debug {
        message: String,
        level: String,
    },
}

impl RunEvent {
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            RunEvent::Completed { .. } | RunEvent::Failed { .. } | RunEvent::Cancelled { .. }
        )
    }
}

/// Told about every event of a run.
pub type RunEvents = Arc<dyn Fn(RunEvent) + Send + Sync>;

/// Why a tool result was not taken.
#[derive(Debug, PartialEq, Eq)]
pub enum Undeliverable {
    /// No call of that id waits (never made, already answered, or timed out).
    NotWaiting,
}

/// Reaches a run from outside: tool results and cancellation. Cheap to clone.
#[derive(Clone)]
pub struct RunControl {
    waiting: Arc<Mutex<HashMap<String, oneshot::Sender<ToolResult>>>>,
    cancel: Arc<watch::Sender<Option<String>>>,
}

impl Default for RunControl {
    fn default() -> Self {
        RunControl {
            waiting: Arc::default(),
            cancel: Arc::new(watch::channel(None).0),
        }
    }
}

impl RunControl {
    pub fn new() -> Self {
        Self::default()
    }

    /// Gives the waiting call `tool_call_id` its result.
    pub fn deliver(&self, tool_call_id: &str, result: ToolResult) -> Result<(), Undeliverable> {
        let sender = lock(&self.waiting)
            .remove(tool_call_id)
            .ok_or(Undeliverable::NotWaiting)?;
        sender.send(result).map_err(|_| Undeliverable::NotWaiting)
    }

    /// Ends the run (once; a second reason is ignored).
    pub fn cancel(&self, reason: impl Into<String>) {
        let reason = reason.into();
        self.cancel.send_if_modified(|r| {
            if r.is_none() {
                *r = Some(reason);
                true
            } else {
                false
            }
        });
    }

    /// Whether the run was told to cancel, and why.
    pub fn cancelled(&self) -> Option<String> {
        self.cancel.borrow().clone()
    }

    fn wait(&self, tool_call_id: &str) -> oneshot::Receiver<ToolResult> {
        let (tx, rx) = oneshot::channel();
        lock(&self.waiting).insert(tool_call_id.to_string(), tx);
        rx
    }

    fn forget(&self, tool_call_id: &str) {
        lock(&self.waiting).remove(tool_call_id);
    }

    async fn until_cancelled(&self) -> String {
        let mut rx = self.cancel.subscribe();
        let reason = rx.wait_for(Option::is_some).await.map(|r| r.clone());
        match reason {
            Ok(reason) => reason.unwrap_or_default(),
            Err(_) => std::future::pending().await,
        }
    }
}

/// A sidecar agent's part of its store data.
pub(crate) struct SidecarHost {
    inventory: HashMap<String, u32>,
    events: RunEvents,
    control: RunControl,
    debug: bool,
    next_call: u32,
    llm: LlmHost,
}

impl HasLlm for SidecarHost {
    fn llm(&mut self) -> &mut LlmHost {
        &mut self.llm
    }
}

impl agent::Instantiate<SidecarHost> for wit::AgentPre<HostState<SidecarHost>> {
    type Instance = wit::Agent;
    fn instantiate<'a>(
        &'a self,
        store: &'a mut wasmtime::Store<HostState<SidecarHost>>,
    ) -> impl Future<Output = wasmtime::Result<wit::Agent>> + Send + 'a {
        self.instantiate_async(store)
    }
}

fn add_to_linker(linker: &mut Linker<HostState<SidecarHost>>) -> wasmtime::Result<()> {
    wit::wasbox::sidecar::host::add_to_linker::<_, HasSelf<SidecarHost>>(linker, |s| &mut s.ext)?;
    wt::add_to_linker::<_, HasSelf<SidecarHost>>(linker, |s| &mut s.ext)?;
    llm::add_to_linker(linker)
}

impl wt::Host for SidecarHost {}

impl wit::wasbox::sidecar::host::Host for SidecarHost {
    async fn call_tool(
        &mut self,
        tool_id: String,
        arguments_json: String,
        timeout_sec: u32,
    ) -> wasmtime::Result<Result<wt::ToolResult, String>> {
        let Some(&offered) = self.inventory.get(&tool_id) else {
            return Ok(Err(format!(
                "tool `{tool_id}` is not in this run's tool inventory"
            )));
        };
        let arguments: Value = match serde_json::from_str(&arguments_json) {
            Ok(v) => v,
            Err(e) => return Ok(Err(format!("the arguments are not JSON: {e}"))),
        };
        // The host controls tool timeouts: the agent may ask for less, never for more.
        let limit = if offered == 0 {
            DEFAULT_TOOL_TIMEOUT_SECS
        } else {
            offered
        };
        let timeout = if timeout_sec == 0 {
            limit
        } else {
            timeout_sec.min(limit)
        };
        self.next_call += 1;
        let tool_call_id = format!("call-{}", self.next_call);
        let rx = self.control.wait(&tool_call_id);
        (self.events)(RunEvent::ToolCall {
            tool_call_id: tool_call_id.clone(),
            tool_id,
            arguments,
            timeout_sec: timeout,
        });
        let started = Instant::now();
        let result = match tokio::time::timeout(Duration::from_secs(u64::from(timeout)), rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) | Err(_) => {
                self.control.forget(&tool_call_id);
                ToolResult {
                    status: ToolStatus::Timeout,
                    exit_code: None,
                    stdout: String::new(),
                    stderr: String::new(),
                    duration_ms: started.elapsed().as_millis() as u64,
                }
            }
        };
        Ok(Ok(wt::ToolResult {
            status: match result.status {
                ToolStatus::Ok => wt::ToolStatus::Ok,
                ToolStatus::Error => wt::ToolStatus::Error,
                ToolStatus::Timeout => wt::ToolStatus::Timeout,
            },
            exit_code: result.exit_code,
            stdout: result.stdout,
            stderr: result.stderr,
            duration_ms: result.duration_ms,
        }))
    }

    async fn thought(&mut self, text: String) -> wasmtime::Result<()> {
        (self.events)(RunEvent::Thought { text });
        Ok(())
    }

    async fn progress(&mut self, tool_call_id: String, chunk: String) -> wasmtime::Result<()> {
        (self.events)(RunEvent::ToolProgress {
            tool_call_id,
            chunk,
        });
        Ok(())
    }

    async fn debug(&mut self, message: String, level: String) -> wasmtime::Result<()> {
        if self.debug {
            (self.events)(RunEvent::Debug { message, level });
        }
        Ok(())
    }
}

/// A loaded sidecar agent component. Cheap to clone.
#[derive(Clone)]
pub struct SidecarAgent {
    name: String,
    /// A digest of the component, for the templates' etag.
    digest: String,
    pre: Arc<wit::AgentPre<HostState<SidecarHost>>>,
}

impl Runtime {
    /// Loads a sidecar agent component; one that does not export `describe` and `run` is
    /// refused.
    pub async fn sidecar_agent(&self, name: &str, wasm: impl Into<Bytes>) -> Result<SidecarAgent> {
        let wasm = wasm.into();
        let sha256: [u8; 32] = Sha256::digest(&wasm).into();
        let digest: String = sha256.iter().take(12).map(|b| format!("{b:02x}")).collect();
        let component = agent::compile(self, name, wasm, Some(sha256)).await?;
        let funcs = agent::exported_functions(self, &component);
        if !(funcs.iter().any(|f| f == "describe") && funcs.iter().any(|f| f == "run")) {
            bail!(
                "`{name}` is not a sidecar agent: it must export `describe` and `run` of world \
                 `wasbox:sidecar/agent@1.0.0`"
            );
        }
        let pre = agent::prepare(
            self,
            name,
            &component,
            add_to_linker,
            "wasbox:sidecar/agent",
            wit::AgentPre::new,
        )?;
        Ok(SidecarAgent {
            name: name.to_string(),
            digest,
            pre: Arc::new(pre),
        })
    }
}

/// Where a run happens and what it may reach.
#[derive(Clone)]
pub struct RunEnv {
    pub sandbox: Sandbox,
    /// The only way to a model.
    pub llm: Arc<dyn ChatBackend>,
    /// The agent's own stdout and stderr (its logs).
    pub log: OutputSink,
    /// Whether `run.debug` events are sent.
    pub debug: bool,
    /// Longest the run may take.
    pub timeout: Duration,
}

impl SidecarAgent {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A digest of the component's bytes.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// A store and instance of the agent for one call or run.
    async fn instance(
        &self,
        env: &RunEnv,
        host: SidecarHost,
    ) -> Result<(
        wasmtime::Store<HostState<SidecarHost>>,
        wit::Agent,
        Arc<crate::host::JobContext>,
    )> {
        let deadline = crate::job::deadline_after(env.timeout);
        let job = agent::job(&env.sandbox, Some(deadline));
        let (store, bindings) = agent::start(
            &env.sandbox,
            &job,
            &self.name,
            &[],
            env.log.clone(),
            host,
            &*self.pre,
        )
        .await?;
        Ok((store, bindings, job))
    }

    /// The template in `locale`, from a fresh instance.
    pub async fn describe(&self, env: &RunEnv, locale: &str) -> Result<Template> {
        let host = SidecarHost {
            inventory: HashMap::new(),
            events: Arc::new(|_| {}),
            control: RunControl::new(),
            debug: false,
            next_call: 0,
            llm: LlmHost::new(env.llm.clone(), None),
        };
        let (mut store, bindings, _job) = self.instance(env, host).await?;
        let t = tokio::time::timeout(
            Duration::from_secs(10),
            bindings.call_describe(&mut store, locale),
        )
        .await
        .context("the agent's describe did not return within 10s")?
        .map_err(|e| anyhow::anyhow!(agent::failure(&e)))?;
        Ok(Template {
            id: t.id,
            name: t.name,
            description: t.description,
            version: t.version,
            parameters: t
                .parameters
                .into_iter()
                .map(|p| Parameter {
                    name: p.name,
                    kind: p.kind,
                    description: p.description,
                    required: p.required,
                    default: p.default_json.and_then(|j| serde_json::from_str(&j).ok()),
                })
                .collect(),
            tools: t.tools,
        })
    }

    /// One run to its end. `events` hears `Started` once the agent is set up, then what it
    /// does, then exactly one terminal event, which is also returned.
    pub async fn run(
        &self,
        env: &RunEnv,
        request: &RunRequest,
        events: RunEvents,
        control: RunControl,
    ) -> RunEvent {
        let end = self.run_inner(env, request, events.clone(), control).await;
        events(end.clone());
        end
    }

    async fn run_inner(
        &self,
        env: &RunEnv,
        request: &RunRequest,
        events: RunEvents,
        control: RunControl,
    ) -> RunEvent {
        let host = SidecarHost {
            inventory: request
                .tool_inventory
                .iter()
                .map(|t| (t.id.clone(), t.timeout_sec))
                .collect(),
            events: events.clone(),
            control: control.clone(),
            debug: env.debug,
            next_call: 0,
            llm: LlmHost::new(env.llm.clone(), None),
        };
        let (mut store, bindings, job) = match self.instance(env, host).await {
            Ok(i) => i,
            Err(e) => {
                return RunEvent::Failed {
                    error_code: "AGENT_START_FAILED".into(),
                    message: format!("the agent could not start: {e:#}"),
                    details: None,
                };
            }
        };
        if let Some(reason) = control.cancelled() {
            return RunEvent::Cancelled { reason };
        }
        events(RunEvent::Started);
        let wit_request = wt::Request {
            run_id: request.run_id.clone(),
            record_id: request.record_id.clone(),
            agent_id: request.agent_id.clone(),
            locale: request.locale.clone(),
            prompt: request.prompt.clone(),
            conversation: request
                .conversation
                .iter()
                .map(|(role, content)| wt::Message {
                    role: role.clone(),
                    content: content.clone(),
                })
                .collect(),
            image_reference: request.image_reference.clone(),
            image_base64: request.image_base64.clone(),
            tool_inventory: request
                .tool_inventory
                .iter()
                .map(|t| wt::Tool {
                    id: t.id.clone(),
                    name: t.name.clone(),
                    timeout_sec: t.timeout_sec,
                })
                .collect(),
            constraints: wt::Constraints {
                allow_network: request.constraints.allow_network,
                max_tool_concurrency: request.constraints.max_tool_concurrency,
                temperature: request.constraints.temperature,
            },
            metadata_json: request.metadata.as_ref().map(Value::to_string),
        };
        let outcome = tokio::select! {
            r = tokio::time::timeout(env.timeout, bindings.call_run(&mut store, &wit_request)) => r,
            reason = control.until_cancelled() => {
                job.stop();
                return RunEvent::Cancelled { reason };
            }
        };
        let fatal = store.data_mut().ext.llm.fatal.take();
        match outcome {
            Err(_) => RunEvent::Failed {
                error_code: "TIMEOUT".into(),
                message: format!("the run did not end within {}s", env.timeout.as_secs()),
                details: None,
            },
            Ok(Ok(Ok(c))) => RunEvent::Completed {
                response: c.response,
                metadata: c.metadata_json.and_then(|j| serde_json::from_str(&j).ok()),
            },
            Ok(Ok(Err(f))) => RunEvent::Failed {
                error_code: f.error_code,
                message: f.message,
                details: f.details_json.and_then(|j| serde_json::from_str(&j).ok()),
            },
            Ok(Err(trap)) => match fatal {
                Some(m) => RunEvent::Failed {
                    error_code: "LLM_REFUSED".into(),
                    message: m,
                    details: None,
                },
                None if agent::interrupted(&trap) => RunEvent::Failed {
                    error_code: "TIMEOUT".into(),
                    message: format!("the run did not end within {}s", env.timeout.as_secs()),
                    details: None,
                },
                None => RunEvent::Failed {
                    error_code: "AGENT_CRASHED".into(),
                    message: agent::failure(&trap),
                    details: None,
                },
            },
        }
    }
}
