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
        .with_state(node)
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
