//! The worker API of a node (`docs/specs/worker-api-node.md`): jobs, session sandboxes and
//! their PTYs over HTTP. Handlers only decode the wire format, call the runtime (jobs,
//! [`wasbox_runtime::Session`], [`wasbox_runtime::Pty`]), and encode the answer; no sandbox
//! logic lives here.

pub mod config;
mod job_table;
mod jobs;
mod node;
mod pty;
pub mod serve;
mod sessions;
mod wire;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

pub use node::{Node, SharedNode};

use crate::problem::Problem;

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
        .layer(middleware::from_fn(problem_bodies))
        .with_state(node)
}

/// Every error the API answers is a problem: what axum's extractors refuse on their own (a
/// query value that is no number, a path segment that is no UTF-8, a wrong method) comes
/// back as `text/plain`, and is rewritten here with the same status and its text as detail.
/// The probes keep their plain-text answers (`GET /readyz` is 503 with a reason while the
/// node loads), as the spec defines them.
async fn problem_bodies(req: Request, next: Next) -> Response {
    let probe = req.method() == axum::http::Method::GET
        && matches!(req.uri().path(), "/healthz" | "/readyz");
    let res = next.run(req).await;
    if probe {
        return res;
    }
    let status = res.status();
    let is_problem = res
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/problem+json"));
    if !(status.is_client_error() || status.is_server_error()) || is_problem {
        return res;
    }
    let (parts, body) = res.into_parts();
    let text = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
    let detail = String::from_utf8_lossy(&text).trim().to_string();
    let detail = if detail.is_empty() {
        status.canonical_reason().unwrap_or("error").to_string()
    } else {
        detail
    };
    let mut out = Problem::with_status(status, detail).into_response();
    if let Some(allow) = parts.headers.get(axum::http::header::ALLOW) {
        out.headers_mut()
            .insert(axum::http::header::ALLOW, allow.clone());
    }
    out
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(node): State<SharedNode>) -> Response {
    match node.not_ready() {
        None => "ready".into_response(),
        Some(reason) => (StatusCode::SERVICE_UNAVAILABLE, reason).into_response(),
    }
}

/// Checks the bearer token before anything reads the body. The comparison takes the same
/// time wherever the tokens differ.
async fn auth(State(node): State<SharedNode>, req: Request, next: Next) -> Response {
    if !crate::auth::bearer_matches(req.headers(), &node.config.token) {
        return Problem::unauthorized().into_response();
    }
    next.run(req).await
}
