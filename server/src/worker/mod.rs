//! The worker API of a node (`docs/specs/worker-api-node.md`): jobs, session sandboxes and
//! their PTYs over HTTP. Handlers only decode the wire format, call the runtime (jobs,
//! [`wasbox_runtime::Session`], [`wasbox_runtime::Pty`]), and encode the answer; no sandbox
//! logic lives here.

pub mod config;
mod job_table;
mod jobs;
pub mod metrics;
mod node;
pub mod openapi;
mod orchestrator;
mod pty;
pub mod serve;
mod sessions;
mod snapshot_store;
mod snapshots;
pub mod telemetry;
mod telemetry_api;
mod volumes;
mod wire;

use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tracing::Instrument as _;

pub use node::{Node, SharedNode};

use crate::problem::Problem;

/// The worker API: health checks without auth, everything under `/v1/` (and `/metrics`
/// unless configured public) with it, a request id on every answer.
pub fn router(node: SharedNode) -> Router {
    {
        // Every end of a session (a request, its limits, shutdown) is a stop event.
        let telemetry = node.telemetry.clone();
        node.sessions().on_end(move |s, reason| {
            telemetry.stopped(&sessions::sandbox_of(s), None, reason);
        });
    }
    let api = Router::new()
        .route("/v1/worker/jobs:run", post(jobs::run))
        .route("/v1/worker/jobs:submit", post(jobs::submit))
        .route(
            "/v1/worker/jobs/{job_id}",
            get(jobs::get).delete(jobs::delete),
        )
        .route("/v1/worker/jobs:stop", post(jobs::stop))
        .route(
            "/v1/worker/admin/stop-all-orchestrator-directed",
            post(jobs::stop_all),
        )
        .route(
            "/v1/worker/telemetry/node:info",
            get(telemetry_api::node_info),
        )
        .route(
            "/v1/worker/telemetry/node:stats",
            get(telemetry_api::node_stats),
        )
        .route(
            "/v1/worker/telemetry/containers",
            get(telemetry_api::containers),
        )
        .route(
            "/v1/worker/telemetry/containers/{id}",
            get(telemetry_api::container),
        )
        .route("/v1/worker/telemetry/logs", get(telemetry_api::logs))
        .route("/v1/worker/sessions", post(sessions::create))
        .route(
            "/v1/worker/sessions/{id}",
            get(sessions::get).post(snapshots::session_action),
        )
        .route("/v1/worker/sessions:restore", post(snapshots::restore))
        .route("/v1/worker/snapshots", get(snapshots::list))
        .route(
            "/v1/worker/snapshots/{id}",
            get(snapshots::download).delete(snapshots::delete),
        )
        .route(
            "/v1/worker/volumes",
            post(volumes::create).get(volumes::list),
        )
        .route(
            "/v1/worker/volumes/{name}",
            get(volumes::get).delete(volumes::delete),
        )
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
        .route("/v1/worker/sessions/{id}/pty:close", post(pty::close));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi::document))
        .merge(api)
        .route_layer(middleware::from_fn(tag_route))
        .fallback(no_such_endpoint)
        .layer(middleware::from_fn_with_state(node.clone(), auth))
        .layer(middleware::from_fn_with_state(
            node.clone(),
            observe_problems,
        ))
        .with_state(node)
}

/// What a path no route serves answers: E2B's error body (`{"code", "message"}`, which
/// E2B's SDKs read) to a request of E2B's API (its headers, or a path of its control plane),
/// the worker API's problem document to everyone else.
async fn no_such_endpoint(headers: axum::http::HeaderMap, uri: axum::http::Uri) -> Response {
    let e2b_header = ["x-api-key", "e2b-sandbox-id", "x-access-token"]
        .iter()
        .any(|h| headers.contains_key(*h));
    let path = uri.path();
    let e2b_path = [
        "/sandboxes",
        "/v2/",
        "/v3/",
        "/templates",
        "/snapshots",
        "/volumes",
    ]
    .iter()
    .any(|p| path.starts_with(p));
    if !path.starts_with("/v1/") && (e2b_header || e2b_path) {
        let body = serde_json::json!({"code": 404, "message": format!("{path}: no such route")});
        let mut res = (
            StatusCode::NOT_FOUND,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response();
        res.extensions_mut().insert(OwnErrorBody);
        return res;
    }
    Problem::not_found("no such endpoint").into_response()
}

/// Marks an error answer whose body is another protocol's, kept as it is (not made a
/// problem document).
#[derive(Clone, Copy)]
struct OwnErrorBody;

/// `router` with the worker API's request ids, logs and metrics (for front-ends that share
/// its listener, such as E2B's API).
pub fn observed(router: Router, node: SharedNode) -> Router {
    router
        .route_layer(middleware::from_fn(tag_route))
        .layer(middleware::from_fn_with_state(node, observe))
}

/// Hands the route a request matched (its pattern, never the raw path with ids) to
/// [`observe`] through the response.
async fn tag_route(req: Request, next: Next) -> Response {
    let matched = req.extensions().get::<MatchedPath>().cloned();
    let mut res = next.run(req).await;
    if let Some(m) = matched {
        res.extensions_mut().insert(m);
    }
    res
}

/// `GET /metrics`: the Prometheus text format.
#[utoipa::path(get, path = "/metrics", tag = "operations", security(("bearer" = [])),
    responses((status = 200, description = "Prometheus text format", body = String, content_type = "text/plain"), (status = "default", response = crate::problem::ProblemResponse)))]
async fn metrics(State(node): State<SharedNode>) -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        node.metrics_text(),
    )
        .into_response()
}

/// The id of a request: the client's `X-Request-Id` when it is a short token of safe
/// characters, else one made here (unique in the process, from a random prefix).
fn request_id(req: &Request) -> String {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    if let Some(v) = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            !v.is_empty()
                && v.len() <= 128
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
        })
    {
        return v.to_string();
    }
    static PREFIX: OnceLock<String> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let prefix = PREFIX.get_or_init(crate::ids::hex::<6>);
    format!("{prefix}-{:x}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Gives each request an id (echoed in `X-Request-Id`, carried by every log line of the
/// request as the span field `request_id`) and counts it in the metrics.
async fn observe(State(node): State<SharedNode>, req: Request, next: Next) -> Response {
    observe_request(node, req, next, false).await
}

/// [`observe`], and every error answered as a problem (see [`problem_body`]): the worker
/// API's one layer around its routes.
async fn observe_problems(State(node): State<SharedNode>, req: Request, next: Next) -> Response {
    observe_request(node, req, next, true).await
}

async fn observe_request(node: SharedNode, req: Request, next: Next, problems: bool) -> Response {
    let id = request_id(&req);
    let method = req.method().clone();
    let span = tracing::info_span!("request", request_id = %id, method = %method, path = %req.uri().path());
    let started = Instant::now();
    let probe =
        method == axum::http::Method::GET && matches!(req.uri().path(), "/healthz" | "/readyz");
    let mut res = next.run(req).instrument(span.clone()).await;
    if problems && !probe {
        res = problem_body(res).await;
    }
    let route = res
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let code = res.status().as_u16();
    let elapsed = started.elapsed();
    span.in_scope(|| {
        tracing::info!(
            status = code,
            elapsed_us = elapsed.as_micros() as u64,
            "answered"
        );
    });
    let m = &node.metrics;
    m.requests
        .get_or_create(&metrics::RouteLabels {
            method: method.as_str().to_string(),
            route: route.clone(),
            code,
        })
        .inc();
    m.request_seconds
        .get_or_create(&metrics::RouteOnly { route })
        .observe(elapsed.as_secs_f64());
    if code >= 400 {
        m.rejected_with(code);
    }
    if let Ok(v) = HeaderValue::from_str(&id) {
        res.headers_mut().insert("x-request-id", v);
    }
    res
}

/// Every error the API answers is a problem: what axum's extractors refuse on their own (a
/// query value that is no number, a path segment that is no UTF-8, a wrong method) comes
/// back as `text/plain`, and is rewritten here with the same status and its text as detail.
/// The probes keep their plain-text answers (`GET /readyz` is 503 with a reason while the
/// node loads), as the spec defines them: they do not come here.
async fn problem_body(res: Response) -> Response {
    let status = res.status();
    let is_problem = res
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/problem+json"));
    if !(status.is_client_error() || status.is_server_error())
        || is_problem
        || res.extensions().get::<OwnErrorBody>().is_some()
    {
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
    if let Some(m) = parts.extensions.get::<MatchedPath>() {
        out.extensions_mut().insert(m.clone());
    }
    if let Some(allow) = parts.headers.get(axum::http::header::ALLOW) {
        out.headers_mut()
            .insert(axum::http::header::ALLOW, allow.clone());
    }
    out
}

#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "The process is up", body = String, content_type = "text/plain")))]
async fn healthz() -> &'static str {
    "ok"
}

#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Ready: the image is loaded", body = String, content_type = "text/plain"),
        (status = 503, description = "Not ready, and why", body = String, content_type = "text/plain")))]
async fn readyz(State(node): State<SharedNode>) -> Response {
    match node.not_ready() {
        None => "ready".into_response(),
        Some(reason) => (StatusCode::SERVICE_UNAVAILABLE, reason).into_response(),
    }
}

/// Checks the bearer token of everything under `/v1/` (a path that does not exist too: 401
/// comes before 404) and of `/metrics` unless it is public, before anything reads the body.
/// The comparison takes the same time wherever the tokens differ.
async fn auth(State(node): State<SharedNode>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let config = node.config();
    let guarded =
        path.starts_with("/v1/") || path == "/v1" || (path == "/metrics" && !config.metrics_public);
    // The node's own token, or the one its orchestrator granted (until it expires).
    let refused = guarded && {
        let given = crate::auth::bearer(req.headers());
        !(crate::auth::constant_time_eq(given.as_bytes(), config.token.as_bytes())
            | config.granted.token_matches(given))
    };
    if refused {
        return Problem::unauthorized().into_response();
    }
    next.run(req).await
}
