//! E2B's API, so that E2B's own SDKs (`e2b` on PyPI and npm) run unchanged against
//! `wasbox serve`: the control plane (create, connect, kill, timeout, info, list; REST/JSON
//! with `X-API-KEY`) and, for each sandbox, envd's API (`/health`, `/files`, and the
//! `process.Process` and `filesystem.Filesystem` services over Connect with the JSON codec),
//! reached through one URL by the `E2b-Sandbox-Id` header and guarded by the sandbox's own
//! access token. An E2B sandbox is a session of the node: it counts against
//! `max_sessions`, lives in the telemetry inventory, and ends with the node's sessions.
//!
//! Pointing an SDK here takes three variables: `E2B_API_URL` and `E2B_SANDBOX_URL` (this
//! server's URL) and `E2B_API_KEY` (the node's token).

// A refusal here is the HTTP answer itself, made once per refused request: returning it
// boxed would only add an allocation.
#![allow(clippy::result_large_err)]

mod connect;
mod files;
mod fs;
mod process;
mod wire;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::de::DeserializeOwned;
use wasbox_runtime::{Limits, SandboxConfig, Session, SessionConfig, SessionRefused};

use crate::worker::SharedNode;

/// The envd version wasbox reports: the newest whose features it implements (so the SDK
/// itself refuses newer ones, such as file metadata in extended attributes, 0.6.2).
pub const ENVD_VERSION: &str = "0.5.7";
/// Where the workspace is mounted, and the home and working directory: the SDK's default.
pub const HOME: &str = "/home/user";
/// A sandbox's lifetime when the create request names none (E2B's SDK default).
const DEFAULT_TIMEOUT_SECS: i64 = 300;
/// The longest lifetime a sandbox may be given (E2B's, for its paid plans).
pub(crate) const MAX_TIMEOUT_SECS: i64 = 86_400;
/// Most processes (commands and PTYs) one sandbox runs at once.
const MAX_PROCESSES: usize = 64;
/// Most directory watchers one sandbox has at once.
const MAX_WATCHERS: usize = 16;
/// Largest Connect message accepted.
const MAX_MESSAGE_BYTES: usize = 4 << 20;

/// The E2B front-end's state: the node it runs on and its sandboxes by id.
pub struct E2b {
    node: SharedNode,
    sandboxes: Mutex<HashMap<String, Arc<Sbx>>>,
    /// Paused sandboxes: their files and settings, until resumed or killed.
    paused: Mutex<HashMap<String, Arc<Paused>>>,
}

/// A paused sandbox: a snapshot of its files (copy-on-write, in the node's memory) and what
/// it is resumed with. Its processes ended when it was paused.
pub(crate) struct Paused {
    template: String,
    token: String,
    env: Vec<(String, String)>,
    metadata: BTreeMap<String, String>,
    started_at: SystemTime,
    snapshot: wasbox_runtime::Snapshot,
    memory_mb: u64,
    disk_size_mb: u64,
}

/// Sandboxes a node keeps paused at most.
const MAX_PAUSED: usize = 256;

impl Paused {
    fn detail(&self, id: &str) -> wire::SandboxDetail {
        wire::SandboxDetail {
            template_id: self.template.clone(),
            sandbox_id: id.to_string(),
            client_id: CLIENT_ID.into(),
            alias: self.template.clone(),
            started_at: crate::rfc3339::format(self.started_at),
            end_at: crate::rfc3339::format(SystemTime::now()),
            envd_version: ENVD_VERSION,
            cpu_count: 1,
            memory_mb: self.memory_mb,
            disk_size_mb: self.disk_size_mb,
            state: "paused",
            metadata: self.metadata.clone(),
            envd_access_token: None,
            domain: None,
        }
    }
}

pub type SharedE2b = Arc<E2b>;

/// One E2B sandbox: a session of the node plus what E2B's API says of it.
pub(crate) struct Sbx {
    id: String,
    template: String,
    token: String,
    session: Arc<Session>,
    metadata: BTreeMap<String, String>,
    started_at: SystemTime,
    procs: process::Table,
    watchers: fs::Watchers,
}

impl Sbx {
    fn detail(&self, with_token: bool) -> wire::SandboxDetail {
        let limits = self.session.sandbox().limits();
        wire::SandboxDetail {
            template_id: self.template.clone(),
            sandbox_id: self.id.clone(),
            client_id: CLIENT_ID.into(),
            alias: self.template.clone(),
            started_at: crate::rfc3339::format(self.started_at),
            end_at: crate::rfc3339::format(self.session.expires_at()),
            envd_version: ENVD_VERSION,
            cpu_count: 1,
            memory_mb: (limits.sandbox_memory_bytes / (1 << 20)) as u64,
            disk_size_mb: limits.disk_bytes / (1 << 20),
            state: "running",
            metadata: self.metadata.clone(),
            envd_access_token: with_token.then(|| self.token.clone()),
            domain: None,
        }
    }

    fn created(&self) -> wire::SandboxWire {
        wire::SandboxWire {
            template_id: self.template.clone(),
            sandbox_id: self.id.clone(),
            client_id: CLIENT_ID.into(),
            envd_version: ENVD_VERSION,
            envd_access_token: self.token.clone(),
            domain: None,
        }
    }

    fn alive(&self) -> bool {
        !self.session.is_ended()
    }
}

const CLIENT_ID: &str = "wasbox";

impl E2b {
    pub fn new(node: SharedNode) -> SharedE2b {
        Arc::new(E2b {
            node,
            sandboxes: Mutex::new(HashMap::new()),
            paused: Mutex::new(HashMap::new()),
        })
    }

    /// A paused sandbox by id.
    pub(crate) fn paused(&self, id: &str) -> Option<Arc<Paused>> {
        crate::worker::lock(&self.paused).get(id).cloned()
    }

    /// A live sandbox by id; a sandbox whose session has ended is forgotten here.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Sbx>> {
        let mut all = crate::worker::lock(&self.sandboxes);
        match all.get(id) {
            Some(s) if s.alive() => Some(s.clone()),
            Some(_) => {
                all.remove(id);
                None
            }
            None => None,
        }
    }

    pub(crate) fn live(&self) -> Vec<Arc<Sbx>> {
        let mut all = crate::worker::lock(&self.sandboxes);
        all.retain(|_, s| s.alive());
        let mut v: Vec<Arc<Sbx>> = all.values().cloned().collect();
        v.sort_by(|a, b| a.started_at.cmp(&b.started_at).then(a.id.cmp(&b.id)));
        v
    }

    /// Forgets sandboxes whose sessions ended (timeout, kill, the node's stop-all), every
    /// few seconds, so that nothing of theirs stays behind.
    pub async fn reap_every(self: Arc<Self>, every: Duration) {
        loop {
            tokio::time::sleep(every).await;
            self.live();
        }
    }
}

/// E2B's control plane and envd's API, on one router. Control-plane routes need the node's
/// token as `X-API-KEY` (or a bearer token); envd routes need the sandbox's access token.
pub fn router(e2b: SharedE2b) -> Router {
    let control = Router::new()
        .route("/sandboxes", post(create).get(list))
        .route("/v2/sandboxes", post(create).get(list))
        .route("/sandboxes/{id}", get(info).delete(kill))
        .route("/sandboxes/{id}/timeout", post(set_timeout))
        .route("/sandboxes/{id}/refreshes", post(refresh))
        .route("/sandboxes/{id}/connect", post(connect_sandbox))
        .route("/v2/sandboxes/{id}/connect", post(connect_sandbox))
        .route("/sandboxes/{id}/metrics", get(metrics))
        .route("/sandboxes/{id}/pause", post(pause))
        .route("/sandboxes/{id}/resume", post(resume))
        .route("/sandboxes/{id}/snapshots", post(unsupported))
        .route("/sandboxes/{id}/fork", post(fork))
        .route_layer(middleware::from_fn_with_state(e2b.clone(), api_key));
    let envd =
        Router::new()
            .route("/health", get(health))
            .route(
                "/files",
                get(files::download).post(files::upload).layer(
                    axum::extract::DefaultBodyLimit::max(files::MAX_FILE_BYTES + (1 << 20)),
                ),
            )
            .route("/process.Process/{method}", post(process::call))
            .route("/filesystem.Filesystem/{method}", post(fs::call));
    let node = e2b.node.clone();
    crate::worker::observed(control.merge(envd).with_state(e2b), node)
}

/// E2B's error body: `{"code": <status>, "message": ...}`.
pub(crate) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let body = serde_json::json!({ "code": status.as_u16(), "message": message.into() });
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn api_key(State(e2b): State<SharedE2b>, req: Request, next: Next) -> Response {
    let token = e2b.node.config().token.clone();
    let headers = req.headers();
    let key = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let ok = match key {
        Some(k) => api_key_matches(&k, &token),
        None => crate::auth::bearer_matches(headers, &token),
    };
    if !ok {
        return error(
            StatusCode::UNAUTHORIZED,
            "Invalid API key: send the node's token as X-API-KEY",
        );
    }
    next.run(req).await
}

/// Whether `key` is the node's token, as itself or in E2B's key form: `e2b_` and the
/// token's bytes in lowercase hex (older SDKs refuse any key not of that form).
fn api_key_matches(key: &str, token: &str) -> bool {
    let as_e2b = api_key_for(token);
    crate::auth::constant_time_eq(key.as_bytes(), token.as_bytes())
        | crate::auth::constant_time_eq(key.as_bytes(), as_e2b.as_bytes())
}

/// The node's token in E2B's API key form (`e2b_` and hex).
pub fn api_key_for(token: &str) -> String {
    let mut s = String::with_capacity(4 + 2 * token.len());
    s.push_str("e2b_");
    for b in token.bytes() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

async fn read_json<T: DeserializeOwned + Default>(e2b: &E2b, body: Body) -> Result<T, Response> {
    let max = e2b.node.config().max_request_bytes;
    let bytes = axum::body::to_bytes(body, max).await.map_err(|_| {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is more than {max} bytes"),
        )
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            format!("invalid request body: {e}"),
        )
    })
}

fn check_timeout(t: Option<i64>, default: i64) -> Result<Duration, Response> {
    let t = t.unwrap_or(default);
    if !(1..=MAX_TIMEOUT_SECS).contains(&t) {
        return Err(error(
            StatusCode::BAD_REQUEST,
            format!("timeout must be 1 to {MAX_TIMEOUT_SECS} seconds (got {t})"),
        ));
    }
    Ok(Duration::from_secs(t as u64))
}

/// `POST /sandboxes` and `POST /v2/sandboxes`.
async fn create(State(e2b): State<SharedE2b>, body: Body) -> Response {
    match create_inner(&e2b, body).await {
        Ok(s) => (StatusCode::CREATED, axum::Json(s.created())).into_response(),
        Err(r) => r,
    }
}

async fn create_inner(e2b: &SharedE2b, body: Body) -> Result<Arc<Sbx>, Response> {
    let node = &e2b.node;
    if node.is_shutting_down() {
        return Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the node is shutting down",
        ));
    }
    if let Some(reason) = node.not_ready() {
        return Err(error(StatusCode::SERVICE_UNAVAILABLE, reason));
    }
    let req: wire::NewSandbox = read_json(e2b, body).await?;
    let template = req
        .template_id
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| "base".into());
    let image = if node.runtime.image_names().contains(&template.as_str()) {
        template.clone()
    } else if let Some(i) = node.config().image_for(&template) {
        i.to_string()
    } else {
        return Err(error(
            StatusCode::NOT_FOUND,
            format!(
                "template '{template}' not found: this node runs {}",
                node.runtime.image_names().join(", ")
            ),
        ));
    };
    let lifetime = check_timeout(req.timeout, DEFAULT_TIMEOUT_SECS)?;
    let id = format!("i{}", crate::ids::hex::<10>());
    let mut env: Vec<(String, String)> = vec![
        ("HOME".into(), HOME.into()),
        ("USER".into(), "user".into()),
        ("LOGNAME".into(), "user".into()),
        ("E2B_SANDBOX".into(), "true".into()),
        ("E2B_SANDBOX_ID".into(), id.clone()),
        ("E2B_TEMPLATE_ID".into(), template.clone()),
    ];
    for (k, v) in req.env_vars.unwrap_or_default() {
        if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
            return Err(error(
                StatusCode::BAD_REQUEST,
                format!("envVars: {k:?} is not a valid variable"),
            ));
        }
        env.retain(|(name, _)| *name != k);
        env.push((k, v));
    }
    let metadata = req.metadata.unwrap_or_default();
    start(
        e2b,
        Start {
            id,
            token: None,
            template,
            lifetime,
            env,
            metadata,
        },
        || {
            node.runtime.sandbox(
                SandboxConfig::default()
                    .image(image)
                    .mount(HOME)
                    .limits(sandbox_limits()),
            )
        },
    )
}

/// What a new E2B sandbox is made of.
struct Start {
    id: String,
    /// The envd access token (a new one when `None`).
    token: Option<String>,
    template: String,
    lifetime: Duration,
    env: Vec<(String, String)>,
    metadata: BTreeMap<String, String>,
}

/// The limits of every E2B sandbox.
fn sandbox_limits() -> Limits {
    Limits::default()
        .timeout(Duration::from_secs(MAX_TIMEOUT_SECS as u64))
        .max_output_bytes(1 << 20)
}

/// Makes the session of a new E2B sandbox (its sandbox from `make`) and records it.
fn start(
    e2b: &SharedE2b,
    new: Start,
    make: impl FnOnce() -> anyhow::Result<wasbox_runtime::Sandbox>,
) -> Result<Arc<Sbx>, Response> {
    let node = &e2b.node;
    let Start {
        id,
        token,
        template,
        lifetime,
        env,
        metadata,
    } = new;
    let token = token.unwrap_or_else(crate::ids::hex::<24>);
    let mut config = SessionConfig::new(format!("e2b-{id}"));
    config.lifetime = lifetime;
    // An E2B sandbox lives until its timeout, whether used or not.
    config.idle = wasbox_runtime::MAX_SESSION_LIMIT;
    config.env = env;
    config.max_ptys = MAX_PROCESSES;
    // Processes live as long as the sandbox, however often its timeout is moved.
    config.deadline_from_lifetime = false;
    config.labels.insert("task_id".into(), format!("e2b:{id}"));
    config.labels.insert("image_ref".into(), template.clone());
    let session = node.sessions().create(config, make).map_err(|e| match e {
        SessionRefused::Full(n) => {
            let mut r = error(
                StatusCode::TOO_MANY_REQUESTS,
                format!("the node is at its limit of {n} sandboxes"),
            );
            r.headers_mut()
                .insert("retry-after", HeaderValue::from_static("5"));
            r
        }
        other => error(StatusCode::INTERNAL_SERVER_ERROR, other.to_string()),
    })?;
    node.telemetry
        .started(&crate::worker::telemetry::Sandbox::session(
            session.id(),
            &format!("e2b:{id}"),
            &template,
            session.created_at(),
        ));
    let sbx = Arc::new(Sbx {
        id: id.clone(),
        template,
        token,
        session,
        metadata,
        started_at: SystemTime::now(),
        procs: process::Table::default(),
        watchers: fs::Watchers::default(),
    });
    crate::worker::lock(&e2b.sandboxes).insert(id.clone(), sbx.clone());
    tracing::info!(sandbox_id = %id, template = %sbx.template, "e2b sandbox created");
    Ok(sbx)
}

/// `POST /sandboxes/{id}/pause`: the sandbox's files, environment and metadata are kept
/// (a snapshot, copy-on-write) and its session ends; `connect` or `resume` brings it back
/// with the same id. Running processes are not kept: with `memory: false` (E2B's
/// "filesystem" mode) they are stopped first; otherwise a pause while a command runs is
/// refused (501). Already paused: 409.
async fn pause(State(e2b): State<SharedE2b>, Path(id): Path<String>, body: Body) -> Response {
    let req: wire::PauseRequest = match read_json(&e2b, body).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    let Some(sbx) = e2b.get(&id) else {
        if e2b.paused(&id).is_some() {
            return error(
                StatusCode::CONFLICT,
                format!("sandbox \"{id}\" is already paused"),
            );
        }
        return not_found(&id);
    };
    if crate::worker::lock(&e2b.paused).len() >= MAX_PAUSED {
        return error(
            StatusCode::TOO_MANY_REQUESTS,
            format!("the node keeps at most {MAX_PAUSED} paused sandboxes"),
        );
    }
    let files_only = req.memory == Some(false);
    let runtime = e2b.node.runtime.clone();
    let mut tries = 0;
    let snapshot = loop {
        match runtime.snapshot(sbx.session.sandbox(), Default::default()) {
            Ok(s) => break s,
            Err(wasbox_runtime::SnapshotError::Busy(_)) if files_only && tries < 200 => {
                // Filesystem mode: the processes go; their ends take a moment.
                if tries == 0 {
                    sbx.procs.kill_all();
                }
                tries += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(wasbox_runtime::SnapshotError::Busy(n)) => {
                return error(
                    StatusCode::NOT_IMPLEMENTED,
                    format!(
                        "{n} process(es) run in the sandbox: a pause keeps its files, not running \
                         processes; end them or pause with mode=\"filesystem\""
                    ),
                );
            }
            Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    };
    let limits = sbx.session.sandbox().limits();
    let paused = Arc::new(Paused {
        template: sbx.template.clone(),
        token: sbx.token.clone(),
        env: sbx.session.env().to_vec(),
        metadata: sbx.metadata.clone(),
        started_at: sbx.started_at,
        snapshot,
        memory_mb: (limits.sandbox_memory_bytes / (1 << 20)) as u64,
        disk_size_mb: limits.disk_bytes / (1 << 20),
    });
    crate::worker::lock(&e2b.sandboxes).remove(&id);
    crate::worker::lock(&e2b.paused).insert(id.clone(), paused);
    e2b.node
        .sessions()
        .end(sbx.session.id(), "paused by the client");
    tracing::info!(sandbox_id = %id, "e2b sandbox paused");
    StatusCode::NO_CONTENT.into_response()
}

/// `POST /sandboxes/{id}/resume`: a paused sandbox runs again (201); a running one is a 409.
async fn resume(State(e2b): State<SharedE2b>, Path(id): Path<String>, body: Body) -> Response {
    let req: wire::TimeoutRequest = match read_json(&e2b, body).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    if e2b.get(&id).is_some() {
        return error(
            StatusCode::CONFLICT,
            format!("sandbox \"{id}\" is already running"),
        );
    }
    resume_paused(&e2b, &id, req.timeout).await
}

/// Brings the paused sandbox `id` back (same id and access token, its files, environment
/// and metadata) with a lifetime of `timeout` seconds (E2B's default when `None`).
async fn resume_paused(e2b: &SharedE2b, id: &str, timeout: Option<i64>) -> Response {
    let Some(p) = crate::worker::lock(&e2b.paused).remove(id) else {
        return not_found(id);
    };
    let lifetime = match check_timeout(timeout, DEFAULT_TIMEOUT_SECS) {
        Ok(t) => t,
        Err(r) => {
            crate::worker::lock(&e2b.paused).insert(id.to_string(), p);
            return r;
        }
    };
    let e2b2 = e2b.clone();
    let (id2, p2) = (id.to_string(), p.clone());
    let made = tokio::task::spawn_blocking(move || {
        let new = Start {
            id: id2,
            token: Some(p2.token.clone()),
            template: p2.template.clone(),
            lifetime,
            env: p2.env.clone(),
            metadata: p2.metadata.clone(),
        };
        start(&e2b2, new, || {
            e2b2.node
                .runtime
                .restore(&p2.snapshot, Some(sandbox_limits()))
                .map_err(anyhow::Error::from)
        })
    })
    .await;
    match made {
        Ok(Ok(s)) => {
            tracing::info!(sandbox_id = %id, "e2b sandbox resumed");
            (StatusCode::CREATED, axum::Json(s.created())).into_response()
        }
        Ok(Err(r)) => {
            // Still paused: it may be resumed later.
            crate::worker::lock(&e2b.paused).insert(id.to_string(), p);
            r
        }
        Err(e) => {
            crate::worker::lock(&e2b.paused).insert(id.to_string(), p);
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("resume failed: {e}"),
            )
        }
    }
}

/// Forks one sandbox makes at most (E2B's SDK allows 1 to 20).
const MAX_FORKS: i64 = 20;

/// `POST /sandboxes/{id}/fork`: `count` new sandboxes (default 1), each with the sandbox's
/// files, environment and metadata as they are now, sharing unchanged files copy-on-write.
/// Running processes are not copied: the fork is refused (409) while a command runs in it.
async fn fork(State(e2b): State<SharedE2b>, Path(id): Path<String>, body: Body) -> Response {
    let Some(src) = e2b.get(&id) else {
        return not_found(&id);
    };
    let req: wire::ForkRequest = match read_json(&e2b, body).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    let count = req.count.unwrap_or(1);
    if !(1..=MAX_FORKS).contains(&count) {
        return error(
            StatusCode::BAD_REQUEST,
            format!("count must be from 1 to {MAX_FORKS}"),
        );
    }
    let lifetime = match check_timeout(req.timeout, DEFAULT_TIMEOUT_SECS) {
        Ok(t) => t,
        Err(r) => return r,
    };
    let e2b2 = e2b.clone();
    let made = tokio::task::spawn_blocking(move || {
        let snap = match e2b2
            .node
            .runtime
            .snapshot(src.session.sandbox(), Default::default())
        {
            Ok(s) => s,
            Err(wasbox_runtime::SnapshotError::Busy(n)) => {
                return Err(error(
                    StatusCode::CONFLICT,
                    format!(
                        "{n} process(es) run in the sandbox: a fork copies its files, not running \
                         processes, and is made while no command runs"
                    ),
                ));
            }
            Err(e) => return Err(error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
        };
        let mut results = Vec::new();
        for _ in 0..count {
            let new_id = format!("i{}", crate::ids::hex::<10>());
            let env = src
                .session
                .env()
                .iter()
                .map(|(k, v)| {
                    let v = if k == "E2B_SANDBOX_ID" { new_id.clone() } else { v.clone() };
                    (k.clone(), v)
                })
                .collect();
            let new = Start {
                id: new_id,
                token: None,
                template: src.template.clone(),
                lifetime,
                env,
                metadata: src.metadata.clone(),
            };
            let made = start(&e2b2, new, || {
                e2b2.node
                    .runtime
                    .restore(&snap, Some(sandbox_limits()))
                    .map_err(anyhow::Error::from)
            });
            results.push(match made {
                Ok(s) => serde_json::json!({"sandbox": s.created()}),
                Err(r) => {
                    let status = r.status().as_u16();
                    serde_json::json!({"error": {"code": status, "message": "the fork could not start"}})
                }
            });
        }
        Ok(results)
    })
    .await;
    match made {
        Ok(Ok(results)) => (StatusCode::CREATED, axum::Json(results)).into_response(),
        Ok(Err(r)) => r,
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("fork failed: {e}"),
        ),
    }
}

fn not_found(id: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!("sandbox \"{id}\" doesn't exist or you don't have access to it"),
    )
}

/// `GET /sandboxes/{id}`.
async fn info(State(e2b): State<SharedE2b>, Path(id): Path<String>) -> Response {
    if let Some(s) = e2b.get(&id) {
        return axum::Json(s.detail(true)).into_response();
    }
    match e2b.paused(&id) {
        Some(p) => axum::Json(p.detail(&id)).into_response(),
        None => not_found(&id),
    }
}

/// `DELETE /sandboxes/{id}`: the sandbox ends now (its processes are stopped).
async fn kill(State(e2b): State<SharedE2b>, Path(id): Path<String>) -> Response {
    let Some(s) = e2b.get(&id) else {
        if crate::worker::lock(&e2b.paused).remove(&id).is_some() {
            return StatusCode::NO_CONTENT.into_response();
        }
        return not_found(&id);
    };
    crate::worker::lock(&e2b.sandboxes).remove(&id);
    e2b.node
        .sessions()
        .end(s.session.id(), "killed by the client");
    StatusCode::NO_CONTENT.into_response()
}

/// `POST /sandboxes/{id}/timeout`: the sandbox now ends `timeout` seconds from now.
async fn set_timeout(State(e2b): State<SharedE2b>, Path(id): Path<String>, body: Body) -> Response {
    let Some(s) = e2b.get(&id) else {
        return not_found(&id);
    };
    let req: wire::TimeoutRequest = match read_json(&e2b, body).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    if req.timeout.is_none() {
        return error(StatusCode::BAD_REQUEST, "timeout is required");
    }
    match check_timeout(req.timeout, 0) {
        Ok(t) => {
            s.session.set_remaining(t);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(r) => r,
    }
}

/// `POST /sandboxes/{id}/refreshes`: at least `duration` seconds (default 60) more.
async fn refresh(State(e2b): State<SharedE2b>, Path(id): Path<String>, body: Body) -> Response {
    let Some(s) = e2b.get(&id) else {
        return not_found(&id);
    };
    let req: wire::RefreshRequest = match read_json(&e2b, body).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    match check_timeout(req.duration, 60) {
        Ok(t) => {
            if s.session.remaining() < t {
                s.session.set_remaining(t);
            }
            StatusCode::NO_CONTENT.into_response()
        }
        Err(r) => r,
    }
}

/// `POST /sandboxes/{id}/connect` and `POST /v2/sandboxes/{id}/connect`: the sandbox's
/// connection details; a timeout given extends (never shortens) its life.
async fn connect_sandbox(
    State(e2b): State<SharedE2b>,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let req: wire::TimeoutRequest = match read_json(&e2b, body).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    let Some(s) = e2b.get(&id) else {
        // A paused sandbox is resumed by a connect.
        return resume_paused(&e2b, &id, req.timeout).await;
    };
    if req.timeout.is_some() {
        match check_timeout(req.timeout, 0) {
            Ok(t) if s.session.remaining() < t => s.session.set_remaining(t),
            Ok(_) => {}
            Err(r) => return r,
        }
    }
    (StatusCode::OK, axum::Json(s.created())).into_response()
}

/// `GET /sandboxes` and `GET /v2/sandboxes`: running sandboxes, newest first (`order=asc`
/// for oldest first), filtered by `metadata` (`k=v&k2=v2`, URL-encoded), `state`,
/// `startedAfter` and `template`, `limit` per page with `x-next-token`.
async fn list(State(e2b): State<SharedE2b>, Query(q): Query<HashMap<String, String>>) -> Response {
    let wanted: Vec<(String, String)> = q
        .get("metadata")
        .map(|m| {
            m.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (percent_decode(k), percent_decode(v))
                })
                .collect()
        })
        .unwrap_or_default();
    let states: Vec<&str> = q
        .get("state")
        .map(|s| s.split(',').map(str::trim).collect())
        .unwrap_or_default();
    let running = states.is_empty() || states.contains(&"running");
    let paused = states.is_empty() || states.contains(&"paused");
    let limit = match q.get("limit").map(|l| l.parse::<usize>()) {
        None => 100,
        Some(Ok(l)) if (1..=1000).contains(&l) => l,
        Some(_) => return error(StatusCode::BAD_REQUEST, "limit must be 1 to 1000"),
    };
    let offset = match q.get("nextToken").map(|t| t.parse::<usize>()) {
        None => 0,
        Some(Ok(o)) => o,
        Some(Err(_)) => return error(StatusCode::BAD_REQUEST, "nextToken is not valid"),
    };
    let after = match q.get("startedAfter").filter(|v| !v.is_empty()) {
        None => None,
        Some(t) => match crate::rfc3339::parse(t) {
            Some(t) => Some(t),
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "startedAfter is not an RFC 3339 time",
                );
            }
        },
    };
    let template = q.get("template").filter(|t| !t.is_empty());
    // Newest first unless asked otherwise (E2B's default).
    let ascending = match q.get("order").map(String::as_str) {
        None | Some("" | "desc") => false,
        Some("asc") => true,
        Some(o) => return error(StatusCode::BAD_REQUEST, format!("order {o:?}: asc or desc")),
    };
    // (started, id, template, metadata, detail) of every sandbox the states name.
    let mut all: Vec<(SystemTime, String, wire::SandboxDetail)> = Vec::new();
    if running {
        all.extend(
            e2b.live()
                .iter()
                .map(|s| (s.started_at, s.id.clone(), s.detail(false))),
        );
    }
    if paused {
        let held = crate::worker::lock(&e2b.paused);
        all.extend(
            held.iter()
                .map(|(id, p)| (p.started_at, id.clone(), p.detail(id))),
        );
    }
    all.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    if !ascending {
        all.reverse();
    }
    let matching: Vec<wire::SandboxDetail> = all
        .into_iter()
        .filter(|(started, _, d)| {
            wanted
                .iter()
                .all(|(k, v)| d.metadata.get(k).is_some_and(|m| m == v))
                && after.is_none_or(|a| *started >= a)
                && template.is_none_or(|t| *t == d.template_id)
        })
        .map(|(_, _, d)| d)
        .collect();
    let total = matching.len();
    let page: Vec<wire::SandboxDetail> = matching.into_iter().skip(offset).take(limit).collect();
    let mut res = axum::Json(page).into_response();
    if offset + limit < total
        && let Ok(v) = HeaderValue::from_str(&(offset + limit).to_string())
    {
        res.headers_mut().insert("x-next-token", v);
    }
    res
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => match u8::from_str_radix(&s[i + 1..i + 3], 16) {
                Ok(v) => {
                    out.push(v);
                    i += 3;
                    continue;
                }
                Err(_) => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `GET /sandboxes/{id}/metrics`: one sample now (memory of its processes, disk of its
/// workspace).
async fn metrics(
    State(e2b): State<SharedE2b>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let Some(s) = e2b.get(&id) else {
        return not_found(&id);
    };
    let secs = |t: SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs()
    };
    let bound = |k: &str| q.get(k).map(|v| v.parse::<u64>());
    let (start, end) = match (bound("start"), bound("end")) {
        (Some(Err(_)), _) | (_, Some(Err(_))) => {
            return error(
                StatusCode::BAD_REQUEST,
                "start and end are Unix times in seconds",
            );
        }
        (a, b) => (
            a.and_then(Result::ok).unwrap_or(0),
            b.and_then(Result::ok).unwrap_or(u64::MAX),
        ),
    };
    // One sample, of now, dated within the range asked for; none when the range is
    // outside the sandbox's life.
    let unix = secs(SystemTime::now()).min(end);
    if unix < start.max(secs(s.started_at)) {
        return axum::Json(serde_json::json!([])).into_response();
    }
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(unix);
    let sandbox = s.session.sandbox();
    let (mem_used, mem_total) = sandbox.memory_in_use();
    let (disk_used, disk_total) = sandbox.disk_in_use();
    axum::Json(serde_json::json!([{
        "timestamp": crate::rfc3339::format(now),
        "timestampUnix": unix,
        "cpuCount": 1,
        "cpuUsedPct": 0.0,
        "memUsed": mem_used,
        "memTotal": mem_total,
        "memCache": 0,
        "diskUsed": disk_used,
        "diskTotal": disk_total,
    }]))
    .into_response()
}

/// Pause, resume, snapshots and fork: not offered (yet); the SDK raises the message.
async fn unsupported() -> Response {
    error(
        StatusCode::NOT_IMPLEMENTED,
        "wasbox does not pause, resume, snapshot or fork E2B sandboxes yet",
    )
}

/// The sandbox an envd request is for (`E2b-Sandbox-Id`, or a `<port>-<id>.<domain>` host)
/// and whether its access token is right.
pub(crate) enum Target {
    Found(Arc<Sbx>),
    /// No such sandbox, or it has ended.
    Gone(String),
    Unauthorized,
}

pub(crate) fn target(e2b: &E2b, headers: &HeaderMap) -> Target {
    let id = headers
        .get("e2b-sandbox-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| {
            let host = headers.get("host")?.to_str().ok()?;
            let first = host.split('.').next()?;
            let (_, id) = first.split_once('-')?;
            Some(id.to_string())
        })
        .unwrap_or_default();
    let Some(s) = e2b.get(&id) else {
        return Target::Gone(id);
    };
    let given = headers
        .get("x-access-token")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !crate::auth::constant_time_eq(given.as_bytes(), s.token.as_bytes()) {
        return Target::Unauthorized;
    }
    s.session.touch();
    Target::Found(s)
}

/// What E2B's edge says of a sandbox it does not have (the SDKs recognise the words).
pub(crate) fn gone(id: &str) -> String {
    format!("The sandbox {id} was not found")
}

/// `GET /health`: 204 for a live sandbox, 502 for one that is gone (as E2B's edge answers
/// for a sandbox it cannot reach).
async fn health(State(e2b): State<SharedE2b>, headers: HeaderMap) -> Response {
    match target(&e2b, &headers) {
        Target::Found(_) => StatusCode::NO_CONTENT.into_response(),
        Target::Gone(id) => error(StatusCode::BAD_GATEWAY, gone(&id)),
        Target::Unauthorized => error(StatusCode::UNAUTHORIZED, "invalid access token"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_filters_are_percent_decoded() {
        assert_eq!(percent_decode("a%20b+c%3D"), "a b c=");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }

    #[test]
    fn api_keys_are_the_token_or_its_e2b_form() {
        assert_eq!(api_key_for("tok"), "e2b_746f6b");
        assert!(api_key_matches("tok", "tok"));
        assert!(api_key_matches("e2b_746f6b", "tok"));
        assert!(!api_key_matches("e2b_746f6c", "tok"));
        assert!(!api_key_matches("", "tok"));
        assert!(!api_key_matches("e2b_", "tok"));
    }
}
