//! Session sandboxes: a workspace that lives across exec rounds, ended on request or at its
//! lifetime or idle limit (worker-api-node.md, "Session Sandbox").

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use wasbox_runtime::{FileError, JobSpec, Limits, Sandbox, SandboxConfig, StopSignal};

use super::pty::{Pty, PtyTable};
use super::wire::{RESERVED_ENV, ResultWire, SandboxSpec, check_network_policy, check_timeout};
use super::{SharedNode, check_version, lock, read_body, read_json, required};
use crate::config::{DEFAULT_SESSION_IDLE_SECS, DEFAULT_SESSION_LIFETIME_SECS, MAX_OUTPUT_BYTES};
use crate::problem::Problem;
use crate::rfc3339;

pub struct Session {
    id: String,
    task_id: String,
    sandbox: Sandbox,
    env: Vec<(String, String)>,
    created: Instant,
    created_at: SystemTime,
    lifetime: Duration,
    idle: Duration,
    last_activity: Mutex<Instant>,
    execs: AtomicU64,
    /// Stop signals of the execs running now.
    running: Mutex<Vec<StopSignal>>,
    ptys: PtyTable,
    ended: AtomicBool,
}

impl Session {
    pub fn id(&self) -> &str {
        &self.id
    }
    pub fn task_id(&self) -> &str {
        &self.task_id
    }
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }
    pub fn env(&self) -> Vec<(String, String)> {
        self.env.clone()
    }
    /// Time left before the session's lifetime ends.
    pub fn remaining(&self) -> Duration {
        (self.created + self.lifetime).saturating_duration_since(Instant::now())
    }
    pub fn pty_count(&self) -> usize {
        lock(&self.ptys).len()
    }
    pub fn add_pty(&self, id: String, pty: Arc<Pty>) {
        lock(&self.ptys).insert(id, pty);
        if self.ended.load(Ordering::Acquire) {
            self.close_ptys();
        }
    }
    pub fn pty(&self, id: &str) -> Option<Arc<Pty>> {
        lock(&self.ptys).get(id).cloned()
    }
    pub fn remove_pty(&self, id: &str) -> Option<Arc<Pty>> {
        lock(&self.ptys).remove(id)
    }
    fn close_ptys(&self) {
        for (_, pty) in lock(&self.ptys).drain() {
            pty.close();
        }
    }
    /// Closes PTYs nobody has used for the session's idle limit.
    fn reap_ptys(&self, now: Instant) {
        let idle: Vec<String> = lock(&self.ptys)
            .iter()
            .filter(|(_, p)| now.saturating_duration_since(*lock(&p.last_activity)) >= self.idle)
            .map(|(id, _)| id.clone())
            .collect();
        for id in idle {
            if let Some(p) = self.remove_pty(&id) {
                tracing::info!(task_id = %self.task_id, session_id = %self.id, pty_id = %id, "pty idle timeout");
                p.close();
            }
        }
    }
    pub fn touch(&self) {
        *lock(&self.last_activity) = Instant::now();
    }

    /// Why the session should end now, if it should.
    fn expired(&self, now: Instant) -> Option<&'static str> {
        if now >= self.created + self.lifetime {
            return Some("max lifetime reached");
        }
        let idle_for = now.saturating_duration_since(*lock(&self.last_activity));
        if idle_for >= self.idle && lock(&self.running).is_empty() {
            return Some("idle timeout reached");
        }
        None
    }

    /// Stops whatever runs in it; its workspace goes when the last reference does.
    pub fn end(&self, reason: &str) {
        if self.ended.swap(true, Ordering::AcqRel) {
            return;
        }
        for stop in lock(&self.running).drain(..) {
            stop.stop();
        }
        self.close_ptys();
        tracing::info!(task_id = %self.task_id, session_id = %self.id, reason, "session ended");
    }

    fn info(&self, status: &'static str) -> SessionInfo {
        let expires_at = self.created_at + self.lifetime;
        SessionInfo {
            version: 1,
            task_id: self.task_id.clone(),
            session_id: self.id.clone(),
            status,
            created_at: rfc3339::format(self.created_at),
            expires_at: rfc3339::format(expires_at),
            max_lifetime_seconds: self.lifetime.as_secs(),
            idle_timeout_seconds: self.idle.as_secs(),
            exec_count: self.execs.load(Ordering::Relaxed),
            running_execs: lock(&self.running).len(),
        }
    }
}

#[derive(Serialize)]
struct SessionInfo {
    version: u32,
    task_id: String,
    session_id: String,
    status: &'static str,
    created_at: String,
    expires_at: String,
    max_lifetime_seconds: u64,
    idle_timeout_seconds: u64,
    exec_count: u64,
    running_execs: usize,
}

#[derive(Deserialize)]
struct CreateRequest {
    version: Option<i64>,
    task_id: Option<String>,
    session_id: Option<String>,
    /// The image, at the top level or inside `sandbox` (both shapes are accepted).
    image: Option<String>,
    sandbox: Option<SandboxSpec>,
    env: Option<BTreeMap<String, String>>,
    max_lifetime_seconds: Option<i64>,
    idle_timeout_seconds: Option<i64>,
}

pub(super) fn respond<T: Serialize>(r: Result<T, Problem>) -> Response {
    match r {
        Ok(v) => Json(v).into_response(),
        Err(p) => p.into_response(),
    }
}

pub async fn create(State(node): State<SharedNode>, headers: HeaderMap, body: Body) -> Response {
    respond(create_inner(node, headers, body).await)
}

async fn create_inner(
    node: SharedNode,
    headers: HeaderMap,
    body: Body,
) -> Result<SessionInfo, Problem> {
    node.accepting()?;
    let req: CreateRequest = read_json(&headers, body, node.config.max_request_bytes).await?;
    check_version(req.version)?;
    let task_id = required("task_id", &req.task_id)?.to_string();
    let session_id = required("session_id", &req.session_id)?.to_string();
    let sandbox_spec = req.sandbox.unwrap_or_default();
    check_network_policy(&sandbox_spec.network_policy)?;
    let image_ref = req
        .image
        .or(sandbox_spec.image)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| Problem::bad_request("image is required"))?;
    let Some(image) = node.config.image_for(&image_ref).map(str::to_string) else {
        return Err(Problem::bad_request(format!(
            "image `{image_ref}` is not allowed on this node"
        )));
    };
    let lifetime = check_timeout(req.max_lifetime_seconds, "max_lifetime_seconds")?
        .unwrap_or(DEFAULT_SESSION_LIFETIME_SECS);
    let idle = check_timeout(req.idle_timeout_seconds, "idle_timeout_seconds")?
        .unwrap_or(DEFAULT_SESSION_IDLE_SECS);
    let mut env: Vec<(String, String)> = req
        .env
        .or(sandbox_spec.env)
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| !RESERVED_ENV.contains(&k.as_str()))
        .collect();
    env.push(("CYNODE_TASK_ID".into(), task_id.clone()));
    env.push(("CYNODE_WORKSPACE_DIR".into(), "/workspace".into()));

    let mut sessions = lock(&node.sessions);
    if sessions.contains_key(&session_id) {
        return Err(Problem::conflict(format!(
            "session `{session_id}` already exists"
        )));
    }
    if sessions.len() >= node.config.max_sessions {
        return Err(Problem::busy(format!(
            "the node is at its limit of {} sessions",
            node.config.max_sessions
        )));
    }
    let limits = Limits::default()
        .timeout(Duration::from_secs(node.config.max_timeout_secs))
        .max_output_bytes(MAX_OUTPUT_BYTES);
    let sandbox = node
        .runtime
        .sandbox(SandboxConfig::default().image(image).limits(limits))
        .map_err(|e| Problem::internal(&e))?;
    let session = Arc::new(Session {
        id: session_id.clone(),
        task_id: task_id.clone(),
        sandbox,
        env,
        created: Instant::now(),
        created_at: SystemTime::now(),
        lifetime: Duration::from_secs(lifetime),
        idle: Duration::from_secs(idle),
        last_activity: Mutex::new(Instant::now()),
        execs: AtomicU64::new(0),
        running: Mutex::new(Vec::new()),
        ptys: Mutex::new(Default::default()),
        ended: AtomicBool::new(false),
    });
    sessions.insert(session_id.clone(), session.clone());
    tracing::info!(task_id = %task_id, session_id = %session_id, lifetime, idle, "session created");
    Ok(session.info("running"))
}

pub fn find(node: &SharedNode, id: &str) -> Result<Arc<Session>, Problem> {
    lock(&node.sessions)
        .get(id)
        .cloned()
        .ok_or_else(|| Problem::not_found(format!("session `{id}` does not exist")))
}

pub async fn get(State(node): State<SharedNode>, Path(id): Path<String>) -> Response {
    respond(find(&node, &id).map(|s| s.info("running")))
}

#[derive(Deserialize)]
struct ExecRequest {
    version: Option<i64>,
    task_id: Option<String>,
    /// argv form, or a string run with `sh -c`.
    command: Option<serde_json::Value>,
    timeout_seconds: Option<i64>,
    env: Option<BTreeMap<String, String>>,
    cwd: Option<String>,
}

#[derive(Serialize)]
struct ExecResponse {
    version: u32,
    task_id: String,
    session_id: String,
    #[serde(flatten)]
    result: ResultWire,
}

pub async fn exec(
    State(node): State<SharedNode>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    respond(exec_inner(node, id, headers, body).await)
}

async fn exec_inner(
    node: SharedNode,
    id: String,
    headers: HeaderMap,
    body: Body,
) -> Result<ExecResponse, Problem> {
    node.accepting()?;
    let session = find(&node, &id)?;
    let req: ExecRequest = read_json(&headers, body, node.config.max_request_bytes).await?;
    check_version(req.version)?;
    if let Some(t) = req.task_id.as_deref().filter(|t| *t != session.task_id) {
        return Err(Problem::bad_request(format!(
            "task_id `{t}` does not match the session's task"
        )));
    }
    let argv: Vec<String> = match req.command {
        Some(serde_json::Value::String(s)) if !s.trim().is_empty() => {
            vec!["sh".into(), "-c".into(), s]
        }
        Some(serde_json::Value::Array(items)) if !items.is_empty() => items
            .into_iter()
            .map(|v| match v {
                serde_json::Value::String(s) => Ok(s),
                _ => Err(Problem::bad_request("command must be an array of strings")),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(Problem::bad_request("command must not be empty")),
        None => return Err(Problem::bad_request("command is required")),
    };
    let requested = check_timeout(req.timeout_seconds, "timeout_seconds")?;
    let timeout = node.config.job_timeout(requested);
    let slot = node.slot()?;
    session.touch();
    let stop = StopSignal::new();
    lock(&session.running).push(stop.clone());
    if session.ended.load(Ordering::Acquire) {
        stop.stop();
    }
    let mut spec = JobSpec::new(argv)
        .timeout(timeout)
        .stop_signal(stop.clone());
    spec.env = session.env.clone();
    spec.env.extend(
        req.env
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| !RESERVED_ENV.contains(&k.as_str())),
    );
    spec.cwd = req.cwd;
    // The exec runs in its own task, which also does the session's bookkeeping: a client
    // that disconnects neither cancels it nor leaves it counted as running.
    let out = tokio::spawn({
        let session = session.clone();
        async move {
            let _slot = slot;
            let out = session.sandbox.run(spec).await;
            lock(&session.running).retain(|s| !s.same_as(&stop));
            session.touch();
            out
        }
    })
    .await
    .map_err(|e| Problem::internal(&anyhow::anyhow!("exec task failed: {e}")))?
    .map_err(|e| Problem::internal(&e));
    let out = out?;
    session.execs.fetch_add(1, Ordering::Relaxed);
    tracing::info!(
        task_id = %session.task_id,
        session_id = %session.id,
        status = out.status.as_str(),
        exit_code = out.exit_code,
        "session exec finished"
    );
    Ok(ExecResponse {
        version: 1,
        task_id: session.task_id.clone(),
        session_id: session.id.clone(),
        result: ResultWire::from(&out),
    })
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct EndRequest {
    version: Option<i64>,
}

pub async fn end(
    State(node): State<SharedNode>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        let bytes = read_body(&headers, body, node.config.max_request_bytes).await?;
        if !bytes.is_empty() {
            let req: EndRequest = serde_json::from_slice(&bytes)
                .map_err(|e| Problem::bad_request(format!("invalid JSON: {e}")))?;
            check_version(req.version)?;
        }
        let session = lock(&node.sessions)
            .remove(&id)
            .ok_or_else(|| Problem::not_found(format!("session `{id}` does not exist")))?;
        session.end("ended by request");
        Ok(session.info("ended"))
    }
    .await;
    respond(result)
}

#[derive(Deserialize)]
pub struct FileQuery {
    path: Option<String>,
}

fn file_problem(e: FileError) -> Problem {
    match e {
        FileError::NotFound(_) => Problem::not_found(e.to_string()),
        FileError::TooLarge { max, .. } => Problem::too_large(max as usize),
        _ => Problem::bad_request(e.to_string()),
    }
}

/// `GET /v1/worker/sessions/{id}/files?path=...`: the file's bytes.
pub async fn read_file(
    State(node): State<SharedNode>,
    Path(id): Path<String>,
    Query(q): Query<FileQuery>,
) -> Response {
    let result = (|| {
        let session = find(&node, &id)?;
        let path = required("path", &q.path)?;
        session.touch();
        session
            .sandbox
            .read_file(path, node.config.max_request_bytes as u64)
            .map_err(file_problem)
    })();
    match result {
        Ok(bytes) => {
            let mut res = (StatusCode::OK, bytes).into_response();
            res.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            );
            res
        }
        Err(p) => p.into_response(),
    }
}

#[derive(Serialize)]
struct WriteResponse {
    version: u32,
    session_id: String,
    path: String,
    size: usize,
}

/// `PUT /v1/worker/sessions/{id}/files?path=...` with the bytes as the body.
pub async fn write_file(
    State(node): State<SharedNode>,
    Path(id): Path<String>,
    Query(q): Query<FileQuery>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        let session = find(&node, &id)?;
        let path = required("path", &q.path)?.to_string();
        let bytes = read_body(&headers, body, node.config.max_request_bytes).await?;
        session.touch();
        session
            .sandbox
            .write_file(&path, &bytes)
            .map_err(file_problem)?;
        Ok(WriteResponse {
            version: 1,
            session_id: id.clone(),
            path,
            size: bytes.len(),
        })
    }
    .await;
    respond(result)
}

/// Ends sessions past their lifetime or idle limit, every `every`, until the node stops.
pub async fn reap_sessions(node: SharedNode, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        let now = Instant::now();
        let expired: Vec<(Arc<Session>, &'static str)> = {
            let mut sessions = lock(&node.sessions);
            let ids: Vec<(String, &'static str)> = sessions
                .iter()
                .filter_map(|(id, s)| s.expired(now).map(|why| (id.clone(), why)))
                .collect();
            ids.into_iter()
                .filter_map(|(id, why)| sessions.remove(&id).map(|s| (s, why)))
                .collect()
        };
        for (session, why) in expired {
            session.end(why);
        }
        let live: Vec<Arc<Session>> = lock(&node.sessions).values().cloned().collect();
        for s in live {
            s.reap_ptys(now);
        }
    }
}
