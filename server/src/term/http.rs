//! The term SDK 2.0 front-end (specs/term-agent-http-sdk2.md): `/health`, `/start` and
//! `/status` over HTTP, translated to an [`AgentRunner`] that owns the agent instance.
//! Bodies, statuses and messages follow the reference runner (COMPAT-NOTES.md).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

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
    AgentRunner, DEFAULT_MAX_STEPS, DEFAULT_TIMEOUT_SECS, TaskMonitor, TaskSnapshot, TaskSpec,
};

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

pub fn router(server: Arc<AgentServer>) -> Router {
    Router::new()
        .route("/health", get(health).post(health).fallback(not_found))
        .route("/start", post(start).fallback(not_found))
        .route("/status", get(status).fallback(not_found))
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
    let timeout_secs = positive("timeout_secs", DEFAULT_TIMEOUT_SECS)?;
    Ok(TaskSpec {
        instruction,
        max_steps: u32::try_from(max_steps).unwrap_or(u32::MAX),
        // Beyond a year is as good as forever, and keeps `Instant` arithmetic sound.
        timeout: Duration::from_secs(timeout_secs.min(366 * 24 * 3600)),
    })
}

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
#[derive(Serialize)]
pub struct StatusBody {
    status: &'static str,
    steps: u32,
    elapsed_secs: u64,
    error: Option<String>,
    done: bool,
    history: Vec<HistoryBody>,
}

#[derive(Serialize)]
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

async fn status(State(server): State<Arc<AgentServer>>) -> Response {
    axum::Json(StatusBody::from(server.monitor.snapshot())).into_response()
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
