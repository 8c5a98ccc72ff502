//! `wasbox sidecar serve`: SnapDescribe's agent sidecar (`docs/specs/sidecar-protocol.zh.md`)
//! with agent templates that are components of world `wasbox:sidecar/agent@1.0.0`. The desktop
//! host sends a conversation; the agent thinks, asks the host to run tools, and answers, in
//! a sandbox that never holds the host's secrets: the LLM key is read here, from the
//! environment variable the operator names, and added to the model's requests by the host.
//!
//! This module only listens and translates (see [`api`]); runs are the runtime's
//! (`wasbox_runtime::agent::sidecar`).

pub mod api;
mod runs;
mod wire;

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use clap::{Args, Subcommand};
use wasbox_runtime::agent::llm::{ChatBackend, NoModel, OpenAiClient};
use wasbox_runtime::agent::sidecar::{BUILTIN_AGENTS, DEFAULT_RUN_TIMEOUT, RunEnv, builtin_agent};
use wasbox_runtime::{Runtime, SandboxConfig};

use crate::args::seconds;

/// The sidecar protocol's default address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:51055";
/// Runs at once by default; more get 429.
pub const DEFAULT_MAX_RUNS: usize = 8;
/// Largest request body by default (conversations with images are large).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 32 << 20;
/// Bytes of their own output the agents may write to wasbox's stderr.
const MAX_AGENT_LOG_BYTES: usize = 16 << 20;

/// The agent sidecar (HTTP + server-sent events) with component agent templates.
#[derive(Args, Debug)]
pub struct SidecarArgs {
    #[command(subcommand)]
    command: SidecarCommand,
}

#[derive(Subcommand, Debug)]
enum SidecarCommand {
    /// Serve agent templates to the desktop host: /status, /agents, /runs and their events.
    Serve(ServeArgs),
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Agent templates: component files (world wasbox:sidecar/agent@1.0.0) or built-in
    /// names (tool-echo, chat). Each is served under its file stem or name.
    #[arg(required = true, value_name = "AGENT.wasm")]
    pub agents: Vec<String>,
    /// IP:PORT to listen on.
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// The bearer token every request must carry [env: WASBOX_SIDECAR_TOKEN]. Prefer the
    /// environment: a token on the command line is visible in `ps`. Generated and printed
    /// once when absent.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Runs at once; more are refused with 429 and retryAfterSec.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_RUNS)]
    pub max_concurrent_runs: usize,
    /// An OpenAI-style chat completions API (`{url}/chat/completions`, plain http), e.g.
    /// http://127.0.0.1:8080/v1.
    #[arg(long, value_name = "URL")]
    pub llm_url: Option<String>,
    /// The environment variable holding the API key, read by wasbox and sent by it; it never
    /// reaches an agent, an event or a log line.
    #[arg(long, value_name = "VAR")]
    pub llm_key_env: Option<String>,
    /// The model when the agent names none.
    #[arg(long, value_name = "MODEL")]
    pub llm_model: Option<String>,
    /// Send `run.debug` events (agents' debug messages).
    #[arg(long)]
    pub debug_events: bool,
    /// Longest a run may take.
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    pub run_timeout: Option<Duration>,
    /// The agents' workspace (default: a fresh temporary directory).
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Largest request body.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_REQUEST_BYTES)]
    pub max_request_bytes: usize,
}

pub fn main(args: SidecarArgs) -> Result<i32> {
    let SidecarCommand::Serve(args) = args.command;
    if args.max_concurrent_runs == 0 {
        bail!("--max-concurrent-runs must be at least 1");
    }
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(serve(args))
}

/// The model backend from the arguments: the key is read from its variable here, once.
fn llm_backend(args: &ServeArgs) -> Result<Arc<dyn ChatBackend>> {
    let Some(url) = &args.llm_url else {
        return Ok(Arc::new(NoModel(
            "no model is configured (start the sidecar with --llm-url)".into(),
        )));
    };
    let key = match &args.llm_key_env {
        Some(var) => Some(
            std::env::var(var)
                .with_context(|| format!("--llm-key-env: the variable `{var}` is not set"))?,
        ),
        None => None,
    };
    Ok(Arc::new(OpenAiClient::new(
        url.clone(),
        key,
        args.llm_model.clone(),
    )))
}

async fn serve(args: ServeArgs) -> Result<i32> {
    let runtime = Runtime::builder().build()?;
    let mut config = SandboxConfig::default();
    if let Some(dir) = &args.workdir {
        config = config.workspace(dir);
    }
    let sandbox = runtime.sandbox(config)?;
    let mut agents = Vec::new();
    for spec in &args.agents {
        let (name, bytes) = match builtin_agent(spec) {
            Some(b) if !std::path::Path::new(spec).is_file() => {
                (spec.clone(), bytes::Bytes::from_static(b))
            }
            _ => {
                let path = PathBuf::from(spec);
                let bytes = std::fs::read(&path).with_context(|| {
                    format!(
                        "`{spec}` is neither a file nor a built-in agent (built-in: {})",
                        BUILTIN_AGENTS.join(", ")
                    )
                })?;
                let name = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| spec.clone());
                (name, bytes::Bytes::from(bytes))
            }
        };
        if agents.iter().any(|(n, _)| n == &name) {
            bail!("two agents are named `{name}`");
        }
        let agent = runtime.sidecar_agent(&name, bytes).await?;
        agents.push((name, agent));
    }
    let (token, generated) = match args
        .token
        .clone()
        .or_else(|| std::env::var("WASBOX_SIDECAR_TOKEN").ok())
        .filter(|t| !t.is_empty())
    {
        Some(t) => (t, false),
        None => (crate::worker::config::generate_token()?, true),
    };
    let env = RunEnv {
        sandbox,
        llm: llm_backend(&args)?,
        log: wasbox_runtime::io::capped_stderr(MAX_AGENT_LOG_BYTES),
        debug: args.debug_events,
        timeout: args.run_timeout.unwrap_or(DEFAULT_RUN_TIMEOUT),
    };
    let sidecar = api::Sidecar::new(
        token.clone(),
        agents,
        env,
        args.max_concurrent_runs,
        args.max_request_bytes,
    );
    // Programs the agents' tools may need, loaded before the first run.
    let preload = runtime.clone();
    tokio::spawn(async move {
        if let Err(e) = preload.preload().await {
            tracing::warn!(error = %format!("{e:#}"), "could not load the image's programs");
        }
    });
    let listener =
        crate::http::bind(args.listen).with_context(|| format!("listening on {}", args.listen))?;
    let addr = listener.local_addr()?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "wasbox: sidecar listening on http://{addr}")?;
        if generated {
            writeln!(out, "wasbox: bearer token (generated, shown once): {token}")?;
        }
        out.flush()?;
    }
    let app = api::router(sidecar.clone());
    crate::http::serve(
        listener,
        app,
        crate::http::Limits::default(),
        crate::shutdown::signal(),
    )
    .await
    .context("serving the sidecar")?;
    sidecar.runs.cancel_all("the sidecar is shutting down");
    Ok(0)
}
