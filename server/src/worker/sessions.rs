//! Session sandboxes over HTTP (worker-api-node.md, "Session Sandbox"): create, get, exec,
//! end, files. The session itself (its lifetime and idle limits, its running execs) is the
//! runtime's [`Session`]; this module translates.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use wasbox_runtime::{
    FileError, JobSpec, Limits, SandboxConfig, Session, SessionConfig, SessionRefused,
};

use super::config::{
    ADMISSION_WAIT, DEFAULT_SESSION_IDLE_SECS, DEFAULT_SESSION_LIFETIME_SECS, MAX_OUTPUT_BYTES,
};
use super::node::{SharedNode, check_version, read_body, read_json, required, respond};
use super::telemetry;
use super::wire::{RESERVED_ENV, ResultWire, SandboxSpec, check_timeout, network_policy};
use crate::problem::Problem;
use crate::rfc3339;

/// The label a session keeps its `task_id` under.
pub(super) const TASK_ID: &str = "task_id";

pub(super) fn task_id(session: &Session) -> &str {
    session.label(TASK_ID).unwrap_or_default()
}

/// The label a session keeps its image reference under.
pub(super) const IMAGE_REF: &str = "image_ref";

/// A session as the telemetry inventory knows it.
pub(super) fn sandbox_of(session: &Session) -> telemetry::Sandbox {
    telemetry::Sandbox::session(
        session.id(),
        task_id(session),
        session.label(IMAGE_REF).unwrap_or_default(),
        session.created_at(),
    )
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct SessionInfo {
    version: u32,
    task_id: String,
    session_id: String,
    /// `running`, or `ended` in the answer of `end`.
    #[schema(value_type = String)]
    status: &'static str,
    created_at: String,
    expires_at: String,
    max_lifetime_seconds: u64,
    idle_timeout_seconds: u64,
    exec_count: u64,
    running_execs: usize,
}

pub(super) fn info(session: &Session, status: &'static str) -> SessionInfo {
    SessionInfo {
        version: 1,
        task_id: task_id(session).to_string(),
        session_id: session.id().to_string(),
        status,
        created_at: rfc3339::format(session.created_at()),
        expires_at: rfc3339::format(session.expires_at()),
        max_lifetime_seconds: session.lifetime().as_secs(),
        idle_timeout_seconds: session.idle_limit().as_secs(),
        exec_count: session.exec_count(),
        running_execs: session.running_execs(),
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(super) struct CreateRequest {
    #[schema(required = true)]
    version: Option<i64>,
    #[schema(required = true)]
    task_id: Option<String>,
    /// The session's id; the node makes one when it is left out (in a fleet, one that
    /// begins with the node's name), and a chosen one must begin with it there (else 421).
    session_id: Option<String>,
    /// The image, at the top level or inside `sandbox` (both shapes are accepted): a
    /// template's name, else an image reference the node's rules map.
    image: Option<String>,
    sandbox: Option<SandboxSpec>,
    env: Option<BTreeMap<String, String>>,
    max_lifetime_seconds: Option<i64>,
    idle_timeout_seconds: Option<i64>,
}

#[utoipa::path(post, path = "/v1/worker/sessions", tag = "sessions", security(("bearer" = [])),
    request_body = CreateRequest,
    responses((status = 200, description = "The session", body = SessionInfo), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn create(State(node): State<SharedNode>, headers: HeaderMap, body: Body) -> Response {
    respond(create_inner(node, headers, body).await)
}

async fn create_inner(
    node: SharedNode,
    headers: HeaderMap,
    body: Body,
) -> Result<SessionInfo, Problem> {
    node.creating()?;
    let req: CreateRequest = read_json(&headers, body, node.config().max_request_bytes).await?;
    check_version(req.version)?;
    let task_id = required("task_id", &req.task_id)?.to_string();
    let session_id = super::node::chosen_id(&node, "session_id", &req.session_id)?;
    let sandbox_spec = req.sandbox.unwrap_or_default();
    let network = network_policy(&sandbox_spec.network_policy)?;
    let image_ref = req
        .image
        .or(sandbox_spec.image)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| Problem::bad_request("image is required"))?;
    let source = super::node::source(&node, &image_ref).await?;
    let volumes = super::node::volume_mounts(
        &node.volumes,
        sandbox_spec.volumes.as_deref().unwrap_or_default(),
        source.mount(),
    )?;
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

    let mut config = SessionConfig::new(session_id.clone());
    config.lifetime = Duration::from_secs(lifetime);
    config.idle = Duration::from_secs(idle);
    config.env = env;
    config.labels.insert(TASK_ID.into(), task_id.clone());
    config.labels.insert(IMAGE_REF.into(), image_ref.clone());
    if let super::node::Source::Template(snapshot) = &source
        && let Some(start) = crate::template::start_of(snapshot)
    {
        config
            .labels
            .insert(crate::template::LABEL_START.into(), start);
    }
    let limits = Limits::default()
        .timeout(Duration::from_secs(node.config().max_timeout_secs))
        .max_output_bytes(MAX_OUTPUT_BYTES);
    let session = node
        .sessions
        .create(config, || {
            let mut sandbox = SandboxConfig::default().limits(limits);
            sandbox.network = network;
            sandbox.label = Some(format!("session {session_id}"));
            sandbox.volumes = volumes;
            node.make_sandbox(&source, sandbox)
        })
        .map_err(|e| match e {
            SessionRefused::Exists(_) => Problem::conflict(e.to_string()),
            SessionRefused::Full(n) => {
                Problem::busy(format!("the node is at its limit of {n} sessions")).retry_after(5)
            }
            SessionRefused::Sandbox(e) => Problem::internal(&e),
        })?;
    if let Err(e) = crate::template::start_command(&session).await {
        node.sessions
            .end(session.id(), "the template's start command did not start");
        return Err(Problem::internal(&e));
    }
    tracing::info!(task_id = %task_id, session_id = %session_id, lifetime, idle, "session created");
    node.telemetry.started(&sandbox_of(&session));
    Ok(info(&session, "running"))
}

#[utoipa::path(get, path = "/v1/worker/sessions/{id}", tag = "sessions", operation_id = "get_session", security(("bearer" = [])),
    params(("id" = String, Path, description = "The session id")),
    responses((status = 200, description = "The session", body = SessionInfo), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn get(State(node): State<SharedNode>, Path(id): Path<String>) -> Response {
    respond(node.session(&id).map(|s| info(&s, "running")))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(super) struct ExecRequest {
    #[schema(required = true)]
    version: Option<i64>,
    task_id: Option<String>,
    /// argv form, or a string run with `sh -c`.
    #[schema(required = true, value_type = Value)]
    command: Option<serde_json::Value>,
    timeout_seconds: Option<i64>,
    env: Option<BTreeMap<String, String>>,
    cwd: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct ExecResponse {
    version: u32,
    task_id: String,
    session_id: String,
    #[serde(flatten)]
    result: ResultWire,
}

#[utoipa::path(post, path = "/v1/worker/sessions/{id}/exec", tag = "sessions", security(("bearer" = [])),
    params(("id" = String, Path, description = "The session id")),
    request_body = ExecRequest,
    responses((status = 200, description = "The command ran", body = ExecResponse), (status = "default", response = crate::problem::ProblemResponse)))]
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
    let session = node.session(&id)?;
    let req: ExecRequest = read_json(&headers, body, node.config().max_request_bytes).await?;
    check_version(req.version)?;
    if let Some(t) = req.task_id.as_deref().filter(|t| *t != task_id(&session)) {
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
    // A directory that is not there is the client's mistake, answered before anything
    // waits or runs (a program started in it would fail its first relative open instead).
    // (`is_dir` resolves a relative path against the workspace itself.)
    if let Some(c) = req.cwd.as_deref().filter(|c| !c.is_empty())
        && !session.sandbox().is_dir(c)
    {
        return Err(Problem::bad_request(format!(
            "cwd `{c}` does not exist or is not a directory"
        )));
    }
    let timeout = node.config().job_timeout(requested);
    let slot = node.slot()?;
    let admission = node.admit().await?;
    // Room other sandboxes hold (their memory) is waited for like a place (see jobs:run).
    let mut spec = JobSpec::new(argv)
        .timeout(timeout)
        .admission(admission)
        .start_wait(ADMISSION_WAIT);
    spec.env = req
        .env
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| !RESERVED_ENV.contains(&k.as_str()))
        .collect();
    spec.cwd = req.cwd.filter(|c| !c.is_empty());
    // The exec runs in its own task: a client that disconnects does not cancel it.
    let out = tokio::spawn({
        let session = session.clone();
        async move {
            let _slot = slot;
            session.exec(spec).await
        }
    })
    .await
    .map_err(|e| Problem::internal(&anyhow::anyhow!("exec task failed: {e}")))?
    .map_err(|e| {
        if session.is_ended() {
            Problem::not_found(format!("session `{id}` has ended"))
        } else {
            Problem::internal(&e)
        }
    })?;
    // A command that found no room within that wait is refused, not answered as its
    // result: the same exec may succeed when retried.
    if let Some(failed) = out.lacked_room() {
        return Err(Problem::busy(format!("cannot start the command: {failed}")).retry_after(1));
    }
    tracing::info!(
        task_id = %task_id(&session),
        session_id = %session.id(),
        status = out.status.as_str(),
        exit_code = out.exit_code,
        "session exec finished"
    );
    let sandbox = sandbox_of(&session);
    node.telemetry.seen(&sandbox);
    node.telemetry.output(&sandbox, "stdout", &out.stdout);
    node.telemetry.output(&sandbox, "stderr", &out.stderr);
    Ok(ExecResponse {
        version: 1,
        task_id: task_id(&session).to_string(),
        session_id: session.id().to_string(),
        result: ResultWire::from(&out),
    })
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(super) struct EndRequest {
    version: Option<i64>,
}

#[utoipa::path(post, path = "/v1/worker/sessions/{id}/end", tag = "sessions", security(("bearer" = [])),
    params(("id" = String, Path, description = "The session id")),
    request_body(content = Option<EndRequest>, description = "Optional: `{\"version\": 1}`"),
    responses((status = 200, description = "The session, ended", body = SessionInfo), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn end(
    State(node): State<SharedNode>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        let bytes = read_body(&headers, body, node.config().max_request_bytes).await?;
        if !bytes.is_empty() {
            let req: EndRequest = serde_json::from_slice(&bytes)
                .map_err(|e| Problem::bad_request(format!("invalid JSON: {e}")))?;
            check_version(req.version)?;
        }
        let session = node
            .sessions
            .end(&id, "ended by request")
            .ok_or_else(|| Problem::not_found(format!("session `{id}` does not exist")))?;
        Ok(info(&session, "ended"))
    }
    .await;
    respond(result)
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FileQuery {
    /// The file's path in the workspace.
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
#[utoipa::path(get, path = "/v1/worker/sessions/{id}/files", tag = "sessions", security(("bearer" = [])),
    params(("id" = String, Path, description = "The session id"), FileQuery),
    responses((status = 200, description = "The file's bytes", body = Vec<u8>, content_type = "application/octet-stream"), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn read_file(
    State(node): State<SharedNode>,
    Path(id): Path<String>,
    Query(q): Query<FileQuery>,
) -> Response {
    let result = async {
        let session = node.session(&id)?;
        let path = required("path", &q.path)?;
        session.touch();
        session
            .sandbox()
            .read_file_async(path, node.config().max_request_bytes as u64)
            .await
            .map_err(file_problem)
    }
    .await;
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

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct WriteResponse {
    version: u32,
    session_id: String,
    path: String,
    size: usize,
}

/// `PUT /v1/worker/sessions/{id}/files?path=...` with the bytes as the body.
#[utoipa::path(put, path = "/v1/worker/sessions/{id}/files", tag = "sessions", security(("bearer" = [])),
    params(("id" = String, Path, description = "The session id"), FileQuery),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses((status = 200, description = "Written", body = WriteResponse), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn write_file(
    State(node): State<SharedNode>,
    Path(id): Path<String>,
    Query(q): Query<FileQuery>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        let session = node.session(&id)?;
        let path = required("path", &q.path)?.to_string();
        let bytes = read_body(&headers, body, node.config().max_request_bytes).await?;
        session.touch();
        let size = bytes.len();
        session
            .sandbox()
            .write_file_async(&path, bytes)
            .await
            .map_err(file_problem)?;
        Ok(WriteResponse {
            version: 1,
            session_id: id.clone(),
            path,
            size,
        })
    }
    .await;
    respond(result)
}

/// The session a PTY request names (404 when there is none), checked against the request's
/// `task_id` and `session_id`.
pub(super) fn checked(
    node: &SharedNode,
    id: &str,
    task: &Option<String>,
    session_id: &Option<String>,
) -> Result<Arc<Session>, Problem> {
    let session = node.session(id)?;
    let task = required("task_id", task)?;
    if task != task_id(&session) {
        return Err(Problem::bad_request(format!(
            "task_id `{task}` does not match the session's task"
        )));
    }
    if let Some(s) = session_id.as_deref().filter(|s| *s != session.id()) {
        return Err(Problem::bad_request(format!(
            "session_id `{s}` does not match the path"
        )));
    }
    Ok(session)
}
