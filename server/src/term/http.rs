//! `wasbox term serve`: the term SDK 2.0 front-end (`docs/specs/term-agent-http-sdk2.md`):
//! `/health`, `/start` and `/status` over HTTP, translated to an [`AgentRunner`] that owns
//! the agent instance. Bodies, statuses and messages follow the reference runner
//! (`docs/specs/COMPAT-NOTES.md`).

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use wasbox_runtime::term::{
    AgentRunner, DEFAULT_MAX_STEPS, DEFAULT_TASK_TIMEOUT, TaskMonitor, TaskSnapshot, TaskSpec,
    TermVersion,
};

use super::ServeArgs;
use super::agent::{env_for, load, preload_in_background, runtime, stderr_sink, task_sandbox};

/// `AGENT_PORT` when unset.
pub const DEFAULT_AGENT_PORT: u16 = 8765;
/// How long `term serve` lets a running task go on after SIGTERM or SIGINT.
const TASK_DRAIN_GRACE: Duration = Duration::from_secs(5);

/// Largest `/start` body (an instruction is text; 10 MiB is generous).
const MAX_START_BYTES: usize = 10 << 20;

/// What the handlers share.
pub struct AgentServer {
    monitor: Arc<TaskMonitor>,
    /// The agent is loaded and set up: `/health` answers 200 and `/start` is accepted.
    ready: AtomicBool,
    tasks: mpsc::Sender<TaskSpec>,
}

impl AgentServer {
    /// The server state, and the receiving end the runner loop takes tasks from.
    pub fn new(monitor: Arc<TaskMonitor>) -> (Arc<Self>, mpsc::Receiver<TaskSpec>) {
        let (tasks, rx) = mpsc::channel(1);
        (
            Arc::new(AgentServer {
                monitor,
                ready: AtomicBool::new(false),
                tasks,
            }),
            rx,
        )
    }

    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }
}

/// Runs each task `/start` accepted, one at a time, until the server goes away.
pub async fn run_tasks(mut runner: AgentRunner, mut rx: mpsc::Receiver<TaskSpec>) -> AgentRunner {
    while let Some(task) = rx.recv().await {
        let end = runner.run_task(&task).await;
        match &end.error {
            Some(e) => tracing::warn!(steps = end.steps, error = %e, "task failed"),
            None => tracing::info!(steps = end.steps, "task completed"),
        }
    }
    runner
}

/// Serves the agent until SIGTERM or SIGINT.
pub async fn main(args: ServeArgs) -> Result<i32> {
    let listen: SocketAddr = match &args.listen {
        Some(l) => l
            .parse()
            .with_context(|| format!("--listen: `{l}` is not IP:PORT"))?,
        None => {
            let port = match std::env::var("AGENT_PORT") {
                Ok(p) => p
                    .parse()
                    .with_context(|| format!("AGENT_PORT: `{p}` is not a port number"))?,
                Err(_) => DEFAULT_AGENT_PORT,
            };
            SocketAddr::from(([0, 0, 0, 0], port))
        }
    };
    let runtime = runtime()?;
    let sandbox = task_sandbox(&runtime, args.workdir)?;
    let monitor = TaskMonitor::new();
    let (server, tasks) = AgentServer::new(monitor.clone());
    // Listen first: `/health` answers 503 while the agent compiles and sets up.
    let listener = crate::http::bind(listen).with_context(|| format!("listening on {listen}"))?;
    let addr = listener.local_addr()?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "wasbox: term agent server listening on http://{addr}")?;
        out.flush()?;
    }
    let app = router(server.clone());
    let http = tokio::spawn(async move {
        crate::http::serve(
            listener,
            app,
            crate::http::Limits::default(),
            crate::shutdown::signal(),
        )
        .await
    });

    let agent = load(&runtime, &args.agent).await?;
    if agent.version() != TermVersion::Term2 {
        bail!(
            "`{}` is a {} agent; `term serve` needs a term2 agent (use `term stdio`)",
            args.agent,
            agent.version().as_str()
        );
    }
    let log = stderr_sink();
    let mut runner = AgentRunner::new(agent, env_for(sandbox.clone(), log, None), monitor);
    if let Err(e) = runner.setup().await {
        bail!("the agent could not start: {e}");
    }
    server.set_ready();
    preload_in_background(&runtime);
    tracing::info!(agent = %args.agent, workdir = %sandbox.workspace().display(), "term agent ready");
    eprintln!(
        "wasbox: term agent {} ready, task directory {}",
        args.agent,
        sandbox.workspace().display()
    );
    let mut worker = tokio::spawn(run_tasks(runner, tasks));
    let served = http.await.context("the HTTP server panicked")?;
    served.context("serving the agent")?;
    // The server is gone, so is the sender: the worker ends after the running task, which
    // gets a short grace period and is then stopped (its commands with it).
    drop(server);
    match tokio::time::timeout(TASK_DRAIN_GRACE, &mut worker).await {
        Ok(Ok(mut runner)) => runner.cleanup().await,
        Ok(Err(e)) => tracing::warn!(error = %e, "the agent runner failed"),
        Err(_) => {
            tracing::warn!("shutting down with a task still running: stopping it");
            worker.abort();
        }
    }
    Ok(0)
}

pub fn router(server: Arc<AgentServer>) -> Router {
    Router::new()
        .route("/health", get(health).post(health).fallback(not_found))
        .route("/start", post(start).fallback(not_found))
        .route("/status", get(status).fallback(not_found))
        .route("/openapi.json", get(openapi).fallback(not_found))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_START_BYTES))
        .with_state(server)
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, axum::Json(json!({ "error": message.into() }))).into_response()
}

async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "not found")
}

#[utoipa::path(get, path = "/health", tag = "agent",
    responses(
        (status = 200, description = "The agent is loaded and set up", body = StatusOnly),
        (status = 503, description = "Still setting up", body = StatusOnly)))]
async fn health(State(server): State<Arc<AgentServer>>) -> Response {
    if server.ready.load(Ordering::Acquire) {
        axum::Json(json!({"status": "ok"})).into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({"status": "initializing"})),
        )
            .into_response()
    }
}

/// A `/start` body checked against the spec: the task, or the 400 message.
pub fn parse_start(body: &[u8]) -> Result<TaskSpec, String> {
    const REQUIRED: &str = "instruction required";
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(REQUIRED.into());
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| format!("invalid JSON: {e}"))?;
    let instruction = match value.get("instruction") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => return Err(REQUIRED.into()),
    };
    let positive = |key: &str, default: u64| -> Result<u64, String> {
        match value.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => v
                .as_u64()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("{key} must be a positive integer")),
        }
    };
    let max_steps = positive("max_steps", u64::from(DEFAULT_MAX_STEPS))?;
    let timeout_secs = positive("timeout_secs", DEFAULT_TASK_TIMEOUT.as_secs())?;
    Ok(TaskSpec {
        instruction,
        max_steps: u32::try_from(max_steps).unwrap_or(u32::MAX),
        // Beyond a year is as good as forever, and keeps `Instant` arithmetic sound.
        timeout: Duration::from_secs(timeout_secs.min(366 * 24 * 3600)),
    })
}

#[utoipa::path(post, path = "/start", tag = "agent",
    request_body = StartBody,
    responses(
        (status = 200, description = "The task started", body = StatusOnly),
        (status = 400, description = "`instruction required`, invalid JSON, or a bad limit", body = ErrorBody),
        (status = 409, description = "`already running`", body = ErrorBody),
        (status = 413, description = "The body is over 10 MiB", body = ErrorBody),
        (status = 500, description = "`runner not initialized`", body = ErrorBody)))]
async fn start(
    State(server): State<Arc<AgentServer>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) => return error(e.status(), format!("invalid body: {}", e.body_text())),
    };
    let task = match parse_start(&body) {
        Ok(t) => t,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    if !server.ready.load(Ordering::Acquire) {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "runner not initialized");
    }
    if server.monitor.try_start(&task).is_err() {
        return error(StatusCode::CONFLICT, "already running");
    }
    if server.tasks.send(task).await.is_err() {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "runner not initialized");
    }
    axum::Json(json!({"status": "started"})).into_response()
}

/// The `/status` body, fields in the spec's order.
#[derive(Serialize, utoipa::ToSchema)]
pub struct StatusBody {
    /// `idle`, `running`, `completed` or `failed`.
    #[schema(value_type = String)]
    status: &'static str,
    steps: u32,
    elapsed_secs: u64,
    error: Option<String>,
    done: bool,
    history: Vec<HistoryBody>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct HistoryBody {
    step: u32,
    command: String,
    output: Option<String>,
    exit_code: i32,
}

impl From<TaskSnapshot> for StatusBody {
    fn from(s: TaskSnapshot) -> Self {
        StatusBody {
            status: s.status.as_str(),
            steps: s.steps,
            elapsed_secs: s.elapsed_secs,
            error: s.error,
            done: s.done,
            history: s
                .history
                .into_iter()
                .map(|h| HistoryBody {
                    step: h.step,
                    command: h.command,
                    output: h.output,
                    exit_code: h.exit_code,
                })
                .collect(),
        }
    }
}

#[utoipa::path(get, path = "/status", tag = "agent",
    responses((status = 200, description = "The task's state and history", body = StatusBody)))]
async fn status(State(server): State<Arc<AgentServer>>) -> Response {
    axum::Json(StatusBody::from(server.monitor.snapshot())).into_response()
}

/// `{"status": ...}`: `/health` (`ok`, `initializing`) and `/start` (`started`).
#[derive(Serialize, utoipa::ToSchema)]
#[allow(dead_code)]
struct StatusOnly {
    status: String,
}

/// `{"error": message}`, the reference runner's error body.
#[derive(Serialize, utoipa::ToSchema)]
#[allow(dead_code)]
struct ErrorBody {
    error: String,
}

/// A `/start` body.
#[derive(Serialize, utoipa::ToSchema)]
#[allow(dead_code)]
struct StartBody {
    /// The task, not empty.
    instruction: String,
    /// Positive; default 200.
    max_steps: Option<u64>,
    /// Positive; default 300.
    timeout_secs: Option<u64>,
}

/// The agent's HTTP API (term SDK 2.0) as an OpenAPI 3.1 document, served at
/// `GET /openapi.json`.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "wasbox term agent (term SDK 2.0)",
        description = "A term-challenge agent served over HTTP: `/health`, `/start`, `/status`, with the reference runner's bodies and statuses."
    ),
    paths(health, start, status)
)]
pub struct TermApi;

async fn openapi() -> Response {
    axum::Json(<TermApi as utoipa::OpenApi>::openapi()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_bodies_are_checked_like_the_reference() {
        assert_eq!(parse_start(b"").unwrap_err(), "instruction required");
        assert_eq!(parse_start(b"{}").unwrap_err(), "instruction required");
        assert_eq!(
            parse_start(br#"{"instruction": ""}"#).unwrap_err(),
            "instruction required"
        );
        assert!(
            parse_start(b"{nope")
                .unwrap_err()
                .starts_with("invalid JSON: ")
        );
        assert_eq!(
            parse_start(br#"{"instruction": "x", "max_steps": 0}"#).unwrap_err(),
            "max_steps must be a positive integer"
        );
        let t = parse_start(br#"{"instruction": "x"}"#).unwrap();
        assert_eq!((t.max_steps, t.timeout.as_secs()), (200, 300));
        let t = parse_start(br#"{"instruction": "x", "max_steps": 5, "timeout_secs": 9}"#).unwrap();
        assert_eq!((t.max_steps, t.timeout.as_secs()), (5, 9));
    }
}
