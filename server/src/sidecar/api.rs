//! The sidecar's HTTP API (`docs/specs/sidecar-protocol.zh.md`): `/status`, `/agents`,
//! `/runs` and its events (SSE), tool results and cancel. Every request carries the bearer
//! token (401 otherwise); `X-Sidecar-Protocol` is checked when present (another major version
//! is a 400) and sent on every answer.
//!
//! Errors are JSON, one shape for all (the protocol names the codes, not the body):
//! `{"error": CODE, "message": TEXT, "traceId": ID}`, with `retryAfterSec` (and a
//! `Retry-After` header) on 429. The trace id of a 500 is in the log with its cause.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wasbox_runtime::sync::lock;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::json;
use wasbox_runtime::agent::sidecar::{RunEnv, SidecarAgent, Template, Undeliverable};

use super::runs::{Refused, Runs, Stored};
use super::wire::{CancelBody, RunBody, TemplateWire, ToolResultBody};

/// The protocol version this sidecar speaks.
pub const PROTOCOL_VERSION: &str = "1.0";
pub const PROTOCOL_HEADER: &str = "x-sidecar-protocol";
/// How often an idle event stream gets a comment, so that proxies keep it open.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// What a 429 tells the host to wait before it tries again.
const RETRY_AFTER_SECS: u64 = 5;
/// Locales whose templates are kept (beyond, they are made again each time).
const MAX_CACHED_LOCALES: usize = 64;

/// What the handlers share.
pub struct Sidecar {
    pub token: String,
    /// The templates, by agent id, in the order given on the command line.
    pub agents: Vec<(String, SidecarAgent)>,
    pub env: RunEnv,
    pub runs: Runs,
    /// The agents' etag: a digest of their components.
    pub etag: String,
    pub max_request_bytes: usize,
    templates: Mutex<HashMap<String, Arc<Vec<Template>>>>,
}

impl Sidecar {
    pub fn new(
        token: String,
        agents: Vec<(String, SidecarAgent)>,
        env: RunEnv,
        max_runs: usize,
        max_request_bytes: usize,
    ) -> Arc<Self> {
        let mut digest = String::new();
        for (id, a) in &agents {
            digest.push_str(id);
            digest.push(':');
            digest.push_str(a.digest());
            digest.push(';');
        }
        let etag = {
            use std::hash::{Hash, Hasher};
            let mut h = std::hash::DefaultHasher::new();
            digest.hash(&mut h);
            format!("\"{:016x}\"", h.finish())
        };
        Arc::new(Sidecar {
            token,
            agents,
            env,
            runs: Runs::new(max_runs),
            etag,
            max_request_bytes,
            templates: Mutex::new(HashMap::new()),
        })
    }

    /// The templates in `locale`, made once per locale.
    async fn templates(&self, locale: &str) -> Result<Arc<Vec<Template>>, anyhow::Error> {
        if let Some(t) = lock(&self.templates).get(locale) {
            return Ok(t.clone());
        }
        let mut list = Vec::with_capacity(self.agents.len());
        for (id, agent) in &self.agents {
            let mut t = agent.describe(&self.env, locale).await?;
            // The id the host addresses it by is the one it was served under.
            t.id = id.clone();
            list.push(t);
        }
        let list = Arc::new(list);
        let mut cache = lock(&self.templates);
        if cache.len() < MAX_CACHED_LOCALES {
            cache.insert(locale.to_string(), list.clone());
        }
        Ok(list)
    }
}

/// An error answer of the protocol.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    retry_after: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "INVALID_REQUEST", message)
    }
    fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "UNAUTHORIZED",
            "the bearer token is missing or wrong",
        )
    }
    fn gone(run_id: &str) -> Self {
        Self::new(
            StatusCode::GONE,
            "RUN_NOT_FOUND",
            format!("run `{run_id}` does not exist or has expired"),
        )
    }
    fn internal(cause: &anyhow::Error) -> (Self, String) {
        let trace = crate::ids::hex::<8>();
        tracing::error!(trace_id = %trace, error = %format!("{cause:#}"), "internal error");
        (
            Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "INTERNAL_ERROR",
                "the sidecar failed to handle the request",
            ),
            trace,
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.with_trace(crate::ids::hex::<8>())
    }
}

impl ApiError {
    fn with_trace(self, trace: String) -> Response {
        let mut body = json!({"error": self.code, "message": self.message, "traceId": trace});
        if let Some(secs) = self.retry_after {
            body["retryAfterSec"] = json!(secs);
        }
        let mut res = (self.status, axum::Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        res
    }
}

pub fn router(sidecar: Arc<Sidecar>) -> Router {
    Router::new()
        .route("/status", get(status))
        .route("/agents", get(agents))
        .route("/runs", post(start_run))
        .route("/runs/{run_id}/events", get(events))
        .route("/runs/{run_id}/tools/{tool_call_id}", post(tool_result))
        .route("/runs/{run_id}/cancel", post(cancel))
        .route("/openapi.json", get(openapi))
        .fallback(|| async {
            ApiError::new(StatusCode::NOT_FOUND, "NOT_FOUND", "no such endpoint")
        })
        .layer(middleware::from_fn_with_state(sidecar.clone(), guard))
        .with_state(sidecar)
}

/// Bearer token first (compared in constant time), then the protocol version; every answer
/// says which version this sidecar speaks.
async fn guard(State(s): State<Arc<Sidecar>>, req: Request, next: Next) -> Response {
    let mut res = if !crate::auth::bearer_matches(req.headers(), &s.token) {
        ApiError::unauthorized().into_response()
    } else if let Err(e) = check_protocol(req.headers()) {
        e.into_response()
    } else {
        next.run(req).await
    };
    res.headers_mut()
        .insert(PROTOCOL_HEADER, HeaderValue::from_static(PROTOCOL_VERSION));
    res
}

/// A missing header is accepted; `1`, `1.0`, `1.3` are; another major version is not.
fn check_protocol(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(v) = headers.get(PROTOCOL_HEADER) else {
        return Ok(());
    };
    let v = v.to_str().unwrap_or("").trim();
    match v.split('.').next().map(str::parse::<u32>) {
        Some(Ok(1)) => Ok(()),
        _ => Err(ApiError::invalid(format!(
            "unsupported X-Sidecar-Protocol `{v}`: this sidecar speaks {PROTOCOL_VERSION}"
        ))),
    }
}

#[utoipa::path(get, path = "/status", tag = "sidecar", security(("bearer" = [])),
    responses((status = 200, description = "The sidecar", body = StatusWire), (status = "default", response = ErrorResponse)))]
async fn status(State(s): State<Arc<Sidecar>>) -> Response {
    axum::Json(json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "protocolVersion": PROTOCOL_VERSION,
        "agentsEtag": s.etag,
        "maxConcurrentRuns": s.runs.max_running(),
        "activeRuns": s.runs.running(),
    }))
    .into_response()
}

#[derive(Deserialize)]
struct AgentsQuery {
    locale: Option<String>,
    etag: Option<String>,
}

/// Whether a client-sent etag (quoted or not, or a list from `If-None-Match`) is ours.
fn etag_matches(ours: &str, given: &str) -> bool {
    let bare = ours.trim_matches('"');
    given.split(',').any(|g| {
        let g = g.trim().trim_start_matches("W/");
        g == "*" || g.trim_matches('"') == bare
    })
}

fn valid_locale(l: &str) -> bool {
    !l.is_empty()
        && l.len() <= 35
        && l.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

#[utoipa::path(get, path = "/agents", tag = "sidecar", security(("bearer" = [])),
    params(("locale" = Option<String>, Query, description = "e.g. `en`, `zh-CN`"),
           ("etag" = Option<String>, Query, description = "The list's etag the client has (or `If-None-Match`)")),
    responses(
        (status = 200, description = "The agents and their parameters", body = AgentsWire),
        (status = 304, description = "The client's etag is current"),
        (status = "default", response = ErrorResponse)))]
async fn agents(
    State(s): State<Arc<Sidecar>>,
    Query(q): Query<AgentsQuery>,
    headers: HeaderMap,
) -> Response {
    let locale = q.locale.unwrap_or_else(|| "en".to_string());
    if !valid_locale(&locale) {
        return ApiError::invalid(format!("`{locale}` is not a locale (like en or zh-CN)"))
            .into_response();
    }
    let given = q.etag.or_else(|| {
        headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    });
    let etag = HeaderValue::from_str(&s.etag).unwrap_or(HeaderValue::from_static("\"\""));
    if given.is_some_and(|g| etag_matches(&s.etag, &g)) {
        let mut res = StatusCode::NOT_MODIFIED.into_response();
        res.headers_mut().insert(header::ETAG, etag);
        return res;
    }
    let templates = match s.templates(&locale).await {
        Ok(t) => t,
        Err(e) => {
            let (err, trace) = ApiError::internal(&e);
            return err.with_trace(trace);
        }
    };
    let list: Vec<TemplateWire> = templates.iter().map(TemplateWire::from).collect();
    let mut res =
        axum::Json(json!({"agents": list, "etag": s.etag, "locale": locale})).into_response();
    res.headers_mut().insert(header::ETAG, etag);
    res
}

/// A body of at most the configured size, parsed as JSON (400 otherwise, 413 when larger).
async fn read_json<T: serde::de::DeserializeOwned>(
    s: &Sidecar,
    body: Body,
    required: bool,
) -> Result<T, ApiError> {
    let bytes = axum::body::to_bytes(body, s.max_request_bytes)
        .await
        .map_err(|e| {
            if crate::http::is_body_timeout(&e) {
                ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "INVALID_REQUEST",
                    e.to_string(),
                )
            } else {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "INVALID_REQUEST",
                    format!("the body is larger than {} bytes", s.max_request_bytes),
                )
            }
        })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return if required {
            Err(ApiError::invalid("the request body is empty"))
        } else {
            serde_json::from_str("{}").map_err(|e| ApiError::invalid(format!("invalid JSON: {e}")))
        };
    }
    serde_json::from_slice(&bytes).map_err(|e| ApiError::invalid(format!("invalid JSON: {e}")))
}

/// A run id the host gives must be short and plain (it appears in URLs and logs).
fn valid_run_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
}

#[utoipa::path(post, path = "/runs", tag = "sidecar", security(("bearer" = [])),
    request_body = super::wire::RunBody,
    responses(
        (status = 202, description = "The run started; its events at `Location`", body = RunAccepted,
         headers(("Location" = String, description = "/runs/{runId}/events"))),
        (status = "default", response = ErrorResponse)))]
async fn start_run(State(s): State<Arc<Sidecar>>, body: Body) -> Response {
    match start_run_inner(s, body).await {
        Ok(res) => res,
        Err(e) => e.into_response(),
    }
}

async fn start_run_inner(s: Arc<Sidecar>, body: Body) -> Result<Response, ApiError> {
    let body: RunBody = read_json(&s, body, true).await?;
    let run_id = match body.run_id.clone() {
        Some(id) if valid_run_id(&id) => id,
        Some(id) => {
            return Err(ApiError::invalid(format!(
                "runId `{}` must be 1-128 letters, digits or -_.:",
                id.chars().take(140).collect::<String>()
            )));
        }
        None => crate::ids::uuid_v4(),
    };
    let agent = match body.agent_id.as_deref() {
        Some(id) => s
            .agents
            .iter()
            .find(|(name, _)| name == id)
            .ok_or_else(|| {
                ApiError::invalid(format!("agentId `{id}` is not an agent of this sidecar"))
            })?,
        None if s.agents.len() == 1 => &s.agents[0],
        None => {
            return Err(ApiError::invalid(format!(
                "agentId is required: this sidecar serves {}",
                s.agents
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    };
    let (agent_id, agent) = (agent.0.clone(), agent.1.clone());
    let mut request = body
        .into_request(run_id.clone())
        .map_err(ApiError::invalid)?;
    request.agent_id = Some(agent_id.clone());
    let run = match s.runs.start(&run_id, &agent_id) {
        Ok(r) => r,
        Err(Refused::Conflict) => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "RUN_CONFLICT",
                format!("run `{run_id}` already exists"),
            ));
        }
        Err(Refused::TooMany(n)) => {
            let mut e = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "TOO_MANY_RUNS",
                format!("the sidecar runs at most {n} runs at once"),
            );
            e.retry_after = Some(RETRY_AFTER_SECS);
            return Err(e);
        }
    };
    tracing::info!(run_id = %run_id, agent = %agent_id, "run accepted");
    let env = s.env.clone();
    tokio::spawn(async move {
        let sink = run.clone();
        let events: wasbox_runtime::agent::sidecar::RunEvents = Arc::new(move |e| sink.push(&e));
        let end = agent
            .run(&env, &request, events, run.control().clone())
            .await;
        let outcome = match &end {
            wasbox_runtime::agent::sidecar::RunEvent::Completed { .. } => "completed",
            wasbox_runtime::agent::sidecar::RunEvent::Cancelled { .. } => "cancelled",
            _ => "failed",
        };
        tracing::info!(run_id = %run.id, outcome, "run ended");
    });
    let mut res = (
        StatusCode::ACCEPTED,
        axum::Json(json!({"runId": run_id, "status": "accepted"})),
    )
        .into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("/runs/{run_id}/events")) {
        res.headers_mut().insert(header::LOCATION, v);
    }
    Ok(res)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EventsQuery {
    last_event_id: Option<String>,
}

fn sse_event(e: &Stored) -> Event {
    Event::default()
        .event(e.name)
        .id(e.id.to_string())
        .data(&e.data)
}

#[utoipa::path(get, path = "/runs/{run_id}/events", tag = "sidecar", security(("bearer" = [])),
    params(("run_id" = String, Path), ("lastEventId" = Option<String>, Query, description = "Resume after this event (or `Last-Event-ID`)")),
    responses(
        (status = 200, description = "Server-sent events of the run until its end (`ping` comments keep it alive)", body = String, content_type = "text/event-stream"),
        (status = "default", response = ErrorResponse)))]
async fn events(
    State(s): State<Arc<Sidecar>>,
    Path(run_id): Path<String>,
    Query(q): Query<EventsQuery>,
    headers: HeaderMap,
) -> Response {
    let Some(run) = s.runs.get(&run_id) else {
        return ApiError::gone(&run_id).into_response();
    };
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or(q.last_event_id)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let rx = run.subscribe();
    struct Cursor {
        run: Arc<super::runs::Run>,
        last: u64,
        rx: tokio::sync::watch::Receiver<u64>,
        queue: std::collections::VecDeque<Stored>,
        ended: bool,
    }
    let start = Cursor {
        run,
        last,
        rx,
        queue: Default::default(),
        ended: false,
    };
    let stream = futures_util::stream::unfold(start, |mut c| async move {
        loop {
            if let Some(e) = c.queue.pop_front() {
                c.last = e.id;
                c.ended |= e.terminal;
                return Some((Ok::<_, Infallible>(sse_event(&e)), c));
            }
            if c.ended {
                return None;
            }
            let (more, finished) = c.run.after(c.last);
            if !more.is_empty() {
                c.queue.extend(more);
                continue;
            }
            if finished {
                return None;
            }
            if c.rx.changed().await.is_err() {
                return None;
            }
        }
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("ping"))
        .into_response()
}

#[utoipa::path(post, path = "/runs/{run_id}/tools/{tool_call_id}", tag = "sidecar", security(("bearer" = [])),
    params(("run_id" = String, Path), ("tool_call_id" = String, Path)),
    request_body = super::wire::ToolResultBody,
    responses((status = 202, description = "The result reached the agent", body = ToolAccepted), (status = "default", response = ErrorResponse)))]
async fn tool_result(
    State(s): State<Arc<Sidecar>>,
    Path((run_id, tool_call_id)): Path<(String, String)>,
    body: Body,
) -> Response {
    let result = async {
        let run = s.runs.get(&run_id).ok_or_else(|| ApiError::gone(&run_id))?;
        let body: ToolResultBody = read_json(&s, body, true).await?;
        let result = body.into_result().map_err(ApiError::invalid)?;
        run.control()
            .deliver(&tool_call_id, result)
            .map_err(|Undeliverable::NotWaiting| {
                ApiError::new(
                    StatusCode::NOT_FOUND,
                    "TOOL_CALL_NOT_FOUND",
                    format!(
                        "run `{run_id}` is not waiting for tool call `{tool_call_id}` (unknown, answered, or timed out)"
                    ),
                )
            })?;
        Ok::<_, ApiError>(
            (
                StatusCode::ACCEPTED,
                axum::Json(json!({"runId": run_id, "toolCallId": tool_call_id, "status": "accepted"})),
            )
                .into_response(),
        )
    }
    .await;
    result.unwrap_or_else(IntoResponse::into_response)
}

#[utoipa::path(post, path = "/runs/{run_id}/cancel", tag = "sidecar", security(("bearer" = [])),
    params(("run_id" = String, Path)),
    request_body(content = Option<super::wire::CancelBody>, description = "Optional: `{\"reason\": ...}`"),
    responses((status = 202, description = "The run is being cancelled", body = RunAccepted), (status = "default", response = ErrorResponse)))]
async fn cancel(State(s): State<Arc<Sidecar>>, Path(run_id): Path<String>, body: Body) -> Response {
    let result = async {
        let run = s.runs.get(&run_id).ok_or_else(|| ApiError::gone(&run_id))?;
        let body: CancelBody = read_json(&s, body, false).await?;
        if run.is_finished() {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "RUN_CONFLICT",
                format!("run `{run_id}` has already ended"),
            ));
        }
        let reason = body
            .reason
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| "cancelled by the host".to_string());
        run.control().cancel(reason);
        Ok::<_, ApiError>(
            (
                StatusCode::ACCEPTED,
                axum::Json(json!({"runId": run_id, "status": "cancelling"})),
            )
                .into_response(),
        )
    }
    .await;
    result.unwrap_or_else(IntoResponse::into_response)
}

// The answers as the OpenAPI document describes them (the handlers build them with `json!`).

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct StatusWire {
    status: String,
    version: String,
    protocol_version: String,
    agents_etag: String,
    max_concurrent_runs: usize,
    active_runs: usize,
}

#[derive(Serialize, utoipa::ToSchema)]
#[allow(dead_code)]
struct AgentsWire<'a> {
    agents: Vec<TemplateWire<'a>>,
    etag: String,
    locale: String,
}

/// The answer of `POST /runs` (`accepted`) and of `cancel` (`cancelling`).
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct RunAccepted {
    run_id: String,
    status: String,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct ToolAccepted {
    run_id: String,
    tool_call_id: String,
    status: String,
}

/// Every route's error answer in the OpenAPI document.
#[derive(utoipa::ToResponse)]
#[response(
    description = "An error: `{error, message, traceId}` (400 INVALID_REQUEST, 401 UNAUTHORIZED, 404, 409 RUN_CONFLICT, 410 RUN_NOT_FOUND, 413, 429 TOO_MANY_RUNS with Retry-After)"
)]
#[allow(dead_code)]
struct ErrorResponse(ErrorWire);

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct ErrorWire {
    /// A stable code: INVALID_REQUEST, UNAUTHORIZED, NOT_FOUND, RUN_CONFLICT, RUN_NOT_FOUND,
    /// TOOL_CALL_NOT_FOUND, TOO_MANY_RUNS, INTERNAL_ERROR.
    error: String,
    message: String,
    trace_id: String,
    retry_after_sec: Option<u64>,
}

struct Bearer;

impl utoipa::Modify for Bearer {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        openapi
            .components
            .get_or_insert_with(Default::default)
            .add_security_scheme(
                "bearer",
                SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
            );
    }
}

/// The sidecar's HTTP API as an OpenAPI 3.1 document, served at `GET /openapi.json`.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(title = "wasbox agent sidecar", description = "An agent sidecar over HTTP and server-sent events (docs/specs/sidecar-protocol.en.md). Every answer carries `X-Sidecar-Protocol`."),
    paths(status, agents, start_run, events, tool_result, cancel),
    components(schemas(ErrorWire), responses(ErrorResponse)),
    modifiers(&Bearer)
)]
pub struct SidecarApi;

async fn openapi() -> Response {
    axum::Json(<SidecarApi as utoipa::OpenApi>::openapi()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_and_protocol_versions() {
        assert!(etag_matches("\"abc\"", "abc"));
        assert!(etag_matches("\"abc\"", "\"abc\""));
        assert!(etag_matches("\"abc\"", "W/\"x\", \"abc\""));
        assert!(!etag_matches("\"abc\"", "\"abd\""));
        let mut h = HeaderMap::new();
        assert!(check_protocol(&h).is_ok());
        for ok in ["1.0", "1", "1.7"] {
            h.insert(PROTOCOL_HEADER, HeaderValue::from_static(ok));
            assert!(check_protocol(&h).is_ok(), "{ok}");
        }
        for bad in ["2.0", "0.9", "x"] {
            h.insert(PROTOCOL_HEADER, HeaderValue::from_static(bad));
            assert!(check_protocol(&h).is_err(), "{bad}");
        }
        assert!(valid_run_id("3f2a-9c"));
        assert!(!valid_run_id("../x"));
        assert!(!valid_run_id(&"a".repeat(129)));
    }
}
