//! What every term front-end shares: finding the agent's component (a file or a built-in
//! example), the task sandbox (the task directory at `/app`), the agent's environment (the
//! validator's identifiers, never the proxy URL), and its log (wasbox's stderr, capped).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use wasbox_runtime::io::OutputSink;
use wasbox_runtime::term::{
    AgentEnv, BUILTIN_AGENTS, EventSink, LlmProxy, TASK_MOUNT, TermAgent, builtin_agent,
};
use wasbox_runtime::{Limits, Runtime, Sandbox, SandboxConfig};

/// The component bytes for AGENT: a file, else a built-in example agent.
pub(super) fn agent_bytes(agent: &str) -> Result<(String, Bytes)> {
    let path = PathBuf::from(agent);
    if path.is_file() {
        let bytes = std::fs::read(&path).with_context(|| format!("reading {agent}"))?;
        let bytes = Bytes::from(bytes);
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| agent.to_string());
        return Ok((name, bytes));
    }
    match builtin_agent(agent) {
        Some(bytes) => Ok((agent.to_string(), Bytes::from_static(bytes))),
        None => bail!(
            "`{agent}` is neither a file nor a built-in agent (built-in: {})",
            BUILTIN_AGENTS.join(", ")
        ),
    }
}

pub(super) async fn load(runtime: &Runtime, agent: &str) -> Result<TermAgent> {
    let (name, bytes) = agent_bytes(agent)?;
    runtime.term_agent(&name, bytes).await
}

/// The task sandbox's own limit on a command: only a backstop, since every command is
/// bounded by its own timeout.
const TASK_SANDBOX_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(366 * 24 * 3600);

/// The task sandbox: the work directory at `/app`; commands are bounded by their own
/// timeouts, so the sandbox's own limit is only a backstop.
pub(super) fn task_sandbox(runtime: &Runtime, workdir: Option<PathBuf>) -> Result<Sandbox> {
    let mut config = SandboxConfig::default()
        .mount(TASK_MOUNT)
        .limits(Limits::default().timeout(TASK_SANDBOX_TIMEOUT));
    if let Some(dir) = workdir {
        config = config.workspace(dir);
    }
    runtime.sandbox(config)
}

/// What the agent component's environment gets from the validator's: identifiers and
/// modes, never the proxy URL (the host holds the only way out).
fn agent_env() -> Vec<(String, String)> {
    [
        "TERM_AGENT_HASH",
        "TERM_TASK_ID",
        "EVALUATION_MODE",
        "TEST_DIR",
        "LLM_MODEL",
    ]
    .iter()
    .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
    .collect()
}

/// Bytes of its own output (logs) an agent may write to wasbox's stderr; a flood beyond this
/// is dropped, with one note, so it cannot fill the operator's disk.
const MAX_AGENT_LOG_BYTES: usize = 16 << 20;

/// The agent's logs: wasbox's stderr, up to [`MAX_AGENT_LOG_BYTES`].
pub(super) fn stderr_sink() -> OutputSink {
    wasbox_runtime::io::capped_stderr(MAX_AGENT_LOG_BYTES)
}

pub(super) fn env_for(sandbox: Sandbox, log: OutputSink, on_event: Option<EventSink>) -> AgentEnv {
    AgentEnv {
        sandbox,
        llm: LlmProxy::from_env(),
        log,
        env: agent_env(),
        on_event,
    }
}

pub(super) fn runtime() -> Result<Runtime> {
    Runtime::builder().build()
}

/// Compiles (or loads from the cache) the image's programs while the agent starts, so that
/// its first commands do not wait for the compiler.
pub(super) fn preload_in_background(runtime: &Runtime) {
    let runtime = runtime.clone();
    tokio::spawn(async move {
        if let Err(e) = runtime.preload().await {
            tracing::warn!(error = %format!("{e:#}"), "could not load the image's programs");
        }
    });
}
