//! The worker API of a node (`../shared/specs/worker-api-node.md`): jobs, session sandboxes
//! and their PTYs over HTTP. Handlers only decode the wire format, call the runtime, and
//! encode the answer; no sandbox logic lives here.

mod jobs;
mod pty;
mod sessions;
mod wire;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::de::DeserializeOwned;
use tokio::sync::Semaphore;
use wasbox_runtime::Runtime;

use crate::config::ServeConfig;
use crate::problem::Problem;

pub use sessions::reap_sessions;

/// Everything the worker API handlers share.
pub struct Node {
    pub config: ServeConfig,
    pub runtime: Runtime,
    ready: AtomicBool,
    not_ready_reason: Mutex<String>,
    /// One permit per job or session exec running now.
    slots: Arc<Semaphore>,
    jobs: Mutex<jobs::JobTable>,
    sessions: Mutex<HashMap<String, Arc<sessions::Session>>>,
    shutting_down: AtomicBool,
}

pub type SharedNode = Arc<Node>;

impl Node {
    pub fn new(config: ServeConfig, runtime: Runtime) -> SharedNode {
        Arc::new(Node {
            slots: Arc::new(Semaphore::new(config.max_concurrent)),
            config,
            runtime,
            ready: AtomicBool::new(false),
            not_ready_reason: Mutex::new("the sandbox image is still loading".into()),
            jobs: Mutex::new(jobs::JobTable::default()),
            sessions: Mutex::new(HashMap::new()),
            shutting_down: AtomicBool::new(false),
        })
    }

    /// Compiles or loads every program so that no job waits for the compiler, then
    /// reports ready.
    pub async fn prepare(&self) {
        match self.runtime.preload().await {
            Ok(()) => {
                self.ready.store(true, Ordering::Release);
                tracing::info!("node ready");
            }
            Err(e) => {
                tracing::error!(error = %format!("{e:#}"), "cannot load the sandbox image");
                *lock(&self.not_ready_reason) = "the sandbox image failed to load".into();
            }
        }
    }

    /// Stops accepting work, stops every running job and ends every session.
    pub fn shut_down(&self, stop_jobs: bool) {
        self.shutting_down.store(true, Ordering::Release);
        self.ready.store(false, Ordering::Release);
        *lock(&self.not_ready_reason) = "the node is shutting down".into();
        if stop_jobs {
            lock(&self.jobs).stop_all();
        }
        let sessions: Vec<_> = lock(&self.sessions).drain().map(|(_, s)| s).collect();
        for s in sessions {
            s.end("node shutdown");
        }
    }

    fn accepting(&self) -> Result<(), Problem> {
        if self.shutting_down.load(Ordering::Acquire) {
            return Err(Problem::unavailable("the node is shutting down"));
        }
        Ok(())
    }

    /// A slot for one job or exec, or 429 when the node is at its concurrency limit.
    fn slot(&self) -> Result<tokio::sync::OwnedSemaphorePermit, Problem> {
        self.slots.clone().try_acquire_owned().map_err(|_| {
            Problem::busy(format!(
                "the node is at its concurrency limit of {} running jobs",
                self.config.max_concurrent
            ))
        })
    }
}

pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The worker API: health checks without auth, everything under `/v1/` with it.
pub fn router(node: SharedNode) -> Router {
    let api = Router::new()
        .route("/v1/worker/jobs:run", post(jobs::run))
        .route("/v1/worker/jobs:stop", post(jobs::stop))
        .route("/v1/worker/sessions", post(sessions::create))
        .route("/v1/worker/sessions/{id}", get(sessions::get))
        .route("/v1/worker/sessions/{id}/exec", post(sessions::exec))
        .route("/v1/worker/sessions/{id}/end", post(sessions::end))
        .route(
            "/v1/worker/sessions/{id}/files",
            get(sessions::read_file).put(sessions::write_file),
        )
        .route("/v1/worker/sessions/{id}/pty:open", post(pty::open))
        .route("/v1/worker/sessions/{id}/pty:send", post(pty::send))
        .route("/v1/worker/sessions/{id}/pty:recv", get(pty::recv))
        .route("/v1/worker/sessions/{id}/pty:resize", post(pty::resize))
        .route("/v1/worker/sessions/{id}/pty:close", post(pty::close))
        .route_layer(middleware::from_fn_with_state(node.clone(), auth));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .merge(api)
        .fallback(|| async { Problem::not_found("no such endpoint") })
        .with_state(node)
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(node): State<SharedNode>) -> Response {
    if node.ready.load(Ordering::Acquire) {
        "ready".into_response()
    } else {
        let reason = lock(&node.not_ready_reason).clone();
        (StatusCode::SERVICE_UNAVAILABLE, reason).into_response()
    }
}

/// Checks the bearer token before anything reads the body. The comparison takes the same
/// time wherever the tokens differ.
async fn auth(State(node): State<SharedNode>, req: Request, next: Next) -> Response {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if !constant_time_eq(given.as_bytes(), node.config.token.as_bytes()) {
        return Problem::unauthorized().into_response();
    }
    next.run(req).await
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Reads a request body of at most `limit` bytes (413 beyond it).
pub(crate) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Bytes, Problem> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(Problem::too_large(limit));
    }
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        let too_large = std::error::Error::source(&e)
            .is_some_and(|s| s.to_string().contains("length limit"))
            || e.to_string().contains("length limit");
        if too_large {
            Problem::too_large(limit)
        } else {
            Problem::bad_request(format!("cannot read the request body: {e}"))
        }
    })
}

/// Reads and parses a JSON request body (400 with the parser's reason when malformed).
pub(crate) async fn read_json<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<T, Problem> {
    let bytes = read_body(headers, body, limit).await?;
    if bytes.is_empty() {
        return Err(Problem::bad_request("request body is empty"));
    }
    serde_json::from_slice(&bytes).map_err(|e| Problem::bad_request(format!("invalid JSON: {e}")))
}

/// `version` must be 1 (worker-api-node.md, "Versioning").
pub(crate) fn check_version(v: Option<i64>) -> Result<(), Problem> {
    match v {
        Some(1) => Ok(()),
        None => Err(Problem::bad_request("version is required")),
        Some(_) => Err(Problem::bad_request("version must be 1")),
    }
}

pub(crate) fn required<'a>(field: &str, v: &'a Option<String>) -> Result<&'a str, Problem> {
    match v.as_deref() {
        Some(s) if !s.trim().is_empty() => Ok(s),
        _ => Err(Problem::bad_request(format!("{field} is required"))),
    }
}
