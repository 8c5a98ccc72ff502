//! PTYs of session sandboxes over HTTP (worker-api-node.md, "Session Sandbox PTY"): open,
//! send, recv (long poll), resize, close. Bytes travel base64 in `data_b64`. The terminal
//! itself (line discipline, echo, Ctrl-C, buffers) is the runtime's [`Pty`].

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use wasbox_runtime::{Pty, PtyConfig, PtyRefused, Session};

use super::node::{SharedNode, check_version, read_json, required, respond};
use super::sessions::{checked, task_id};
use crate::problem::Problem;

/// Largest `data_b64` payload of one `pty:send`, decoded.
pub const MAX_SEND_BYTES: usize = 64 << 10;
/// Largest `data_b64` payload one `pty:recv` returns, decoded.
const MAX_RECV_BYTES: usize = 64 << 10;
/// Longest a `pty:recv` long-poll waits.
const MAX_WAIT: Duration = Duration::from_secs(30);
/// How long `pty:close` waits for its program to end before answering.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// The identifying fields every PTY request carries (worker-api-node.md, "Session Sandbox
/// PTY": version, task_id, session_id, pty_id), beside the operation's own fields.
#[derive(Deserialize)]
struct PtyRequest<T> {
    version: Option<i64>,
    task_id: Option<String>,
    session_id: Option<String>,
    pty_id: Option<String>,
    #[serde(flatten)]
    fields: T,
}

/// Finds the session (404 before the body is read), reads the body and checks the
/// identifying fields.
async fn decode<T: DeserializeOwned>(
    node: &SharedNode,
    id: &str,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Arc<Session>, PtyRequest<T>), Problem> {
    node.session(id)?;
    let req: PtyRequest<T> = read_json(headers, body, node.config().max_request_bytes).await?;
    check_version(req.version)?;
    let session = checked(node, id, &req.task_id, &req.session_id)?;
    Ok((session, req))
}

fn find_pty(session: &Session, pty_id: &Option<String>) -> Result<Arc<Pty>, Problem> {
    let pty_id = required("pty_id", pty_id)?;
    session
        .pty(pty_id)
        .ok_or_else(|| Problem::not_found(format!("pty `{pty_id}` does not exist")))
}

/// The answer of every PTY operation; `recv` adds its data.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct PtyReply {
    version: u32,
    task_id: String,
    session_id: String,
    pty_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    status: Option<&'static str>,
    /// Bytes accepted by `pty:send`.
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<usize>,
}

impl PtyReply {
    fn new(session: &Session, pty: &Pty) -> Self {
        PtyReply {
            version: 1,
            task_id: task_id(session).to_string(),
            session_id: session.id().to_string(),
            pty_id: pty.id().to_string(),
            status: None,
            bytes: None,
        }
    }
}

#[derive(Deserialize)]
struct OpenFields {
    command: Option<Vec<String>>,
    cols: Option<u16>,
    rows: Option<u16>,
}

#[utoipa::path(post, path = "/v1/worker/sessions/{id}/pty:open", tag = "pty", security(("bearer" = [])),
    params(("id" = String, Path, description = "The session id")),
    request_body = PtyOpen,
    responses((status = 200, description = "The PTY", body = PtyReply), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn open(
    State(node): State<SharedNode>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        node.accepting()?;
        let (session, req) = decode::<OpenFields>(&node, &id, &headers, body).await?;
        let req = req.fields;
        let mut config = PtyConfig::default();
        match req.command {
            Some(c) if !c.is_empty() => config.argv = c,
            Some(_) => return Err(Problem::bad_request("command must not be empty")),
            None => {}
        }
        config.cols = req.cols.unwrap_or(80).max(1);
        config.rows = req.rows.unwrap_or(24).max(1);
        let (cols, rows) = (config.cols, config.rows);
        let pty = session
            .open_pty(crate::ids::uuid_v4(), config)
            .await
            .map_err(|e| match e {
                PtyRefused::TooMany(_) => Problem::busy(e.to_string()),
                PtyRefused::Ended => Problem::not_found(format!("session `{id}` has ended")),
                PtyRefused::Capacity(_) | PtyRefused::Start(_) => {
                    Problem::at_capacity(e.to_string())
                }
            })?;
        tracing::info!(task_id = %task_id(&session), session_id = %session.id(), pty_id = %pty.id(), cols, rows, "pty opened");
        Ok(PtyReply::new(&session, &pty))
    }
    .await;
    respond(result)
}

#[derive(Deserialize)]
struct SendFields {
    data_b64: Option<String>,
}

#[utoipa::path(post, path = "/v1/worker/sessions/{id}/pty:send", tag = "pty", security(("bearer" = [])),
    params(("id" = String, Path, description = "The session id")),
    request_body = PtySend,
    responses((status = 200, description = "Bytes accepted", body = PtyReply), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn send(
    State(node): State<SharedNode>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        let (session, req) = decode::<SendFields>(&node, &id, &headers, body).await?;
        let pty = find_pty(&session, &req.pty_id)?;
        let encoded = req
            .fields
            .data_b64
            .as_deref()
            .ok_or_else(|| Problem::bad_request("data_b64 is required"))?;
        let data = B64
            .decode(encoded)
            .map_err(|e| Problem::bad_request(format!("data_b64 is not base64: {e}")))?;
        if data.len() > MAX_SEND_BYTES {
            return Err(Problem::too_large(MAX_SEND_BYTES));
        }
        session.touch();
        pty.send(&data).await;
        Ok(PtyReply {
            bytes: Some(data.len()),
            ..PtyReply::new(&session, &pty)
        })
    }
    .await;
    respond(result)
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RecvQuery {
    version: Option<i64>,
    task_id: Option<String>,
    session_id: Option<String>,
    pty_id: Option<String>,
    wait_ms: Option<u64>,
    max_bytes: Option<usize>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct RecvReply {
    #[serde(flatten)]
    ids: PtyReply,
    data_b64: String,
    /// The program has ended (and every byte of its output has been returned).
    exited: bool,
    exit_code: Option<i32>,
}

#[utoipa::path(get, path = "/v1/worker/sessions/{id}/pty:recv", tag = "pty", security(("bearer" = [])),
    params(("id" = String, Path, description = "The session id"), RecvQuery),
    responses((status = 200, description = "Output, long-polled up to `wait_ms`", body = RecvReply), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn recv(
    State(node): State<SharedNode>,
    Path(id): Path<String>,
    Query(q): Query<RecvQuery>,
) -> Response {
    let result = async {
        node.session(&id)?;
        if q.version.is_some() {
            check_version(q.version)?;
        }
        let session = checked(&node, &id, &q.task_id, &q.session_id)?;
        let pty = find_pty(&session, &q.pty_id)?;
        let wait = Duration::from_millis(q.wait_ms.unwrap_or(0)).min(MAX_WAIT);
        let max = q
            .max_bytes
            .unwrap_or(MAX_RECV_BYTES)
            .clamp(1, MAX_RECV_BYTES);
        let out = pty.recv(max, wait).await;
        session.touch();
        Ok(RecvReply {
            ids: PtyReply::new(&session, &pty),
            data_b64: B64.encode(&out.data),
            exited: out.exited,
            exit_code: out.exit_code,
        })
    }
    .await;
    respond(result)
}

#[derive(Deserialize)]
struct ResizeFields {
    cols: Option<u16>,
    rows: Option<u16>,
}

#[utoipa::path(post, path = "/v1/worker/sessions/{id}/pty:resize", tag = "pty", security(("bearer" = [])),
    params(("id" = String, Path, description = "The session id")),
    request_body = PtyResize,
    responses((status = 200, description = "Resized", body = PtyReply), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn resize(
    State(node): State<SharedNode>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        let (session, req) = decode::<ResizeFields>(&node, &id, &headers, body).await?;
        let pty = find_pty(&session, &req.pty_id)?;
        let size = (
            req.fields.cols.filter(|c| *c > 0),
            req.fields.rows.filter(|r| *r > 0),
        );
        let (Some(cols), Some(rows)) = size else {
            return Err(Problem::bad_request(
                "cols and rows must be positive integers",
            ));
        };
        pty.resize(cols, rows);
        session.touch();
        tracing::info!(task_id = %task_id(&session), session_id = %session.id(), pty_id = %pty.id(), cols, rows, "pty resized");
        Ok(PtyReply {
            status: Some("resized"),
            ..PtyReply::new(&session, &pty)
        })
    }
    .await;
    respond(result)
}

#[derive(Deserialize)]
struct NoFields {}

#[utoipa::path(post, path = "/v1/worker/sessions/{id}/pty:close", tag = "pty", security(("bearer" = [])),
    params(("id" = String, Path, description = "The session id")),
    request_body = PtyClose,
    responses((status = 200, description = "Closed", body = PtyReply), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn close(
    State(node): State<SharedNode>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        let (session, req) = decode::<NoFields>(&node, &id, &headers, body).await?;
        let pty_id = required("pty_id", &req.pty_id)?;
        let pty = session
            .close_pty(pty_id)
            .ok_or_else(|| Problem::not_found(format!("pty `{pty_id}` does not exist")))?;
        // Answer once its program has ended, so a snapshot or fork asked for next does not
        // find it still running. Bounded: a program slow to stop is reported closed anyway
        // (it has been told to stop and ends on its own).
        if !pty.ended(CLOSE_WAIT).await {
            tracing::warn!(session_id = %session.id(), pty_id = %pty.id(), "pty program still ending after close");
        }
        tracing::info!(task_id = %task_id(&session), session_id = %session.id(), pty_id = %pty.id(), "pty closed");
        Ok(PtyReply {
            status: Some("closed"),
            ..PtyReply::new(&session, &pty)
        })
    }
    .await;
    respond(result)
}

// The request bodies as the OpenAPI document describes them (the handlers decode them as
// one generic envelope, `PtyRequest`).

/// The ids every PTY request carries (worker-api-node.md, "Session Sandbox PTY").
#[derive(Serialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub(super) struct PtyIds {
    /// Must be 1.
    version: i64,
    /// The session's task.
    task_id: String,
    session_id: Option<String>,
    /// Which PTY; optional when the session has one.
    pty_id: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub(super) struct PtyOpen {
    #[serde(flatten)]
    ids: PtyIds,
    /// argv of the program (default: an interactive `sh -i`).
    command: Option<Vec<String>>,
    cols: Option<u16>,
    rows: Option<u16>,
}

#[derive(Serialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub(super) struct PtySend {
    #[serde(flatten)]
    ids: PtyIds,
    /// The bytes to type, base64 (at most 64 KiB decoded).
    data_b64: String,
}

#[derive(Serialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub(super) struct PtyResize {
    #[serde(flatten)]
    ids: PtyIds,
    cols: u16,
    rows: u16,
}

#[derive(Serialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub(super) struct PtyClose {
    #[serde(flatten)]
    ids: PtyIds,
}
