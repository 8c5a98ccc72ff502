//! Snapshots of session sandboxes over HTTP, in the worker API's style (bearer auth, RFC 9457
//! problems, bounded): `POST /v1/worker/sessions/{id}:snapshot` (`?download=1` answers the
//! tar), `POST /v1/worker/sessions:restore` (from a snapshot id or an uploaded tar),
//! `POST /v1/worker/sessions/{id}:fork` with `{"count": n}`, and `GET`/`DELETE
//! /v1/worker/snapshots[/{id}]`. The snapshot itself is the runtime's [`Snapshot`]; this
//! module keeps them (as tars in `<state_dir>/snapshots`, which never expire on their own;
//! the newest also as frozen trees in memory, so that restore and fork need no tar) and
//! translates.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use wasbox_runtime::{Limits, SessionConfig, SessionRefused, Snapshot, SnapshotError, TarLimits};

use super::config::{DEFAULT_SESSION_IDLE_SECS, DEFAULT_SESSION_LIFETIME_SECS, MAX_OUTPUT_BYTES};
use super::node::{SharedNode, check_version, read_body, respond};
use super::sessions::{SessionInfo, info, sandbox_of};
use super::snapshot_store::{SnapshotStore, StoredTar};
use super::wire::check_timeout;
use crate::problem::Problem;

/// Sessions one fork may make at most.
pub const MAX_FORK_COUNT: usize = 100;
/// The largest tar `sessions:restore` accepts: a sandbox's default disk quota and room for
/// tar headers.
pub const MAX_UPLOAD_BYTES: usize =
    (wasbox_runtime::limits::DEFAULT_DISK_BYTES as usize) + (64 << 20);

/// Labels a snapshot keeps a session's own settings under.
/// zstd's own default: about the speed of writing the tar, a fraction of its size.
const ZSTD_LEVEL: i32 = 3;
const LABEL_TASK: &str = "task_id";
const LABEL_IMAGE_REF: &str = "image_ref";
const LABEL_ENV: &str = "session_env";

fn snapshot_problem(e: SnapshotError) -> Problem {
    match &e {
        SnapshotError::Busy(_) => Problem::conflict(e.to_string()),
        SnapshotError::Invalid(_) | SnapshotError::ForeignImage(_) => {
            Problem::with_status(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
        }
        SnapshotError::TooLarge(_) => {
            Problem::with_status(StatusCode::PAYLOAD_TOO_LARGE, e.to_string())
        }
        SnapshotError::Io(_) => Problem::internal(&anyhow::anyhow!(e.to_string())),
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Problem> + Send + 'static,
) -> Result<T, Problem> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Problem::internal(&anyhow::anyhow!("snapshot task failed: {e}")))?
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct SnapshotInfo {
    version: u32,
    snapshot_id: String,
    /// `sha256:<hex>` of the snapshot's tar.
    digest: String,
    size_bytes: u64,
    image: String,
    /// `sha256:<hex>` over the image's programs where the snapshot was taken (empty when
    /// an uploaded tar did not say).
    image_digest: String,
    files: u64,
    bytes: u64,
    created_at: String,
    /// The session it was taken from, in the answer of `:snapshot`.
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<String>,
}

fn snapshot_info(
    id: &str,
    digest: String,
    size: u64,
    s: &Snapshot,
    session: Option<String>,
) -> SnapshotInfo {
    let m = s.manifest();
    SnapshotInfo {
        version: 1,
        snapshot_id: id.to_string(),
        digest,
        size_bytes: size,
        image: m.image.clone(),
        image_digest: m.image_digest.clone(),
        files: m.files,
        bytes: m.bytes,
        created_at: crate::rfc3339::format(
            std::time::UNIX_EPOCH + Duration::from_millis(m.created_ms),
        ),
        session_id: session,
    }
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SnapshotQuery {
    /// `1` (or `true`): answer the snapshot's tar instead of its description.
    download: Option<String>,
    /// With `download`: `zstd` to answer the tar compressed (`application/zstd`);
    /// `none` (the default) for the plain tar.
    compression: Option<String>,
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DownloadQuery {
    /// `zstd` to answer the tar compressed (`application/zstd`); `none` (the default) for
    /// the plain tar.
    compression: Option<String>,
}

/// Whether the tar goes out compressed with zstd (`compression=zstd`).
fn zstd_wanted(compression: Option<&str>) -> Result<bool, Problem> {
    match compression {
        None | Some("" | "none") => Ok(false),
        Some("zstd") => Ok(true),
        Some(other) => Err(Problem::bad_request(format!(
            "compression must be `zstd` or `none`, not `{other}`"
        ))),
    }
}

/// `POST /v1/worker/sessions/{id}:snapshot` and `POST /v1/worker/sessions/{id}:fork`: the
/// actions on one session (the path segment is `<session id>:<action>`; documented as
/// [`snapshot_route`] and [`fork_route`]).
pub async fn session_action(
    State(node): State<SharedNode>,
    Path(id_action): Path<String>,
    Query(q): Query<SnapshotQuery>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some((id, action)) = id_action.rsplit_once(':') else {
        return Problem::with_status(
            StatusCode::METHOD_NOT_ALLOWED,
            "POST is for `<session id>:snapshot` and `<session id>:fork`",
        )
        .into_response();
    };
    let id = id.to_string();
    match action {
        "snapshot" => {
            let download = matches!(q.download.as_deref(), Some("1" | "true"));
            let zstd = match zstd_wanted(q.compression.as_deref()) {
                Ok(z) => z,
                Err(p) => return p.into_response(),
            };
            match snapshot(node, id, headers, body, download.then_some(zstd)).await {
                Ok(r) => r,
                Err(p) => p.into_response(),
            }
        }
        "fork" => respond(fork(node, id, headers, body).await),
        _ => Problem::not_found(format!("no action `{action}` on a session")).into_response(),
    }
}

/// The OpenAPI operation of `:snapshot` (served by [`session_action`]).
#[utoipa::path(post, path = "/v1/worker/sessions/{id}:snapshot", tag = "snapshots", operation_id = "snapshot_session", security(("bearer" = [])),
    params(("id" = String, Path, description = "The session id"), SnapshotQuery),
    request_body(content = Option<serde_json::Value>, description = "Empty or `{\"version\": 1}`"),
    responses((status = 200, description = "The snapshot (with `?download=1`, its tar as `application/x-tar`, or `application/zstd` with `compression=zstd`)", body = SnapshotInfo), (status = "default", response = crate::problem::ProblemResponse)))]
#[allow(dead_code)]
pub(super) async fn snapshot_route() {}

/// The OpenAPI operation of `:fork` (served by [`session_action`]).
#[utoipa::path(post, path = "/v1/worker/sessions/{id}:fork", tag = "snapshots", operation_id = "fork_session", security(("bearer" = [])),
    params(("id" = String, Path, description = "The session id")),
    request_body = ForkRequest,
    responses((status = 200, description = "The new sessions", body = ForkResponse), (status = "default", response = crate::problem::ProblemResponse)))]
#[allow(dead_code)]
pub(super) async fn fork_route() {}

fn labels_of(session: &wasbox_runtime::Session) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    labels.insert(
        LABEL_TASK.into(),
        super::sessions::task_id(session).to_string(),
    );
    if let Some(r) = session.label(super::sessions::IMAGE_REF) {
        labels.insert(LABEL_IMAGE_REF.into(), r.to_string());
    }
    let env: BTreeMap<&str, &str> = session
        .env()
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    labels.insert(
        LABEL_ENV.into(),
        serde_json::to_string(&env).unwrap_or_default(),
    );
    labels
}

async fn optional_version(
    headers: &HeaderMap,
    body: Body,
    max: usize,
) -> Result<Option<serde_json::Value>, Problem> {
    let bytes = read_body(headers, body, max).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let v: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| Problem::bad_request(format!("invalid JSON: {e}")))?;
    if !v.is_object() {
        return Err(Problem::bad_request("the body must be a JSON object"));
    }
    check_version(v.get("version").and_then(|x| x.as_i64()).or(Some(1)))?;
    Ok(Some(v))
}

async fn snapshot(
    node: SharedNode,
    id: String,
    headers: HeaderMap,
    body: Body,
    download: Option<bool>,
) -> Result<Response, Problem> {
    node.accepting()?;
    let session = node.session(&id)?;
    optional_version(&headers, body, node.config().max_request_bytes).await?;
    let labels = labels_of(&session);
    let runtime = node.runtime.clone();
    let store = node.snapshots.clone();
    let session_id = id.clone();
    let (snap_id, digest, size, snap) = blocking(move || {
        store.put(|| {
            runtime
                .snapshot(session.sandbox(), labels)
                .map_err(snapshot_problem)
        })
    })
    .await?;
    tracing::info!(session_id = %session_id, snapshot_id = %snap_id, %digest, size, "snapshot taken");
    if let Some(zstd) = download {
        return tar_response(&node.snapshots, &snap_id, zstd).await;
    }
    Ok(axum::Json(snapshot_info(
        &snap_id,
        digest,
        size,
        &snap,
        Some(session_id),
    ))
    .into_response())
}

/// The stored tar at `path`, as it is or compressed with zstd on the way out. The digest
/// header is the tar's either way.
/// The stored tar of `id` as an answer (compressed with zstd on the way when asked).
async fn tar_response(
    store: &Arc<SnapshotStore>,
    id: &str,
    zstd: bool,
) -> Result<Response, Problem> {
    let (store, owned) = (store.clone(), id.to_string());
    let tar = blocking(move || {
        store
            .open(&owned)
            .ok_or_else(|| Problem::not_found(format!("snapshot `{owned}` does not exist")))
    })
    .await?;
    let StoredTar { file, digest, size } = tar;
    let mut r = if zstd {
        let mut r = Response::new(crate::http::written_body(move |out| {
            wasbox_runtime::compress(std::io::BufReader::new(file), out, ZSTD_LEVEL)
        }));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/zstd"),
        );
        r
    } else {
        let mut r = Response::new(crate::http::file_body(tokio::fs::File::from_std(file)));
        let h = r.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-tar"),
        );
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
        r
    };
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(id) {
        h.insert("x-snapshot-id", v);
    }
    if let Ok(v) = HeaderValue::from_str(&digest) {
        h.insert("x-snapshot-digest", v);
    }
    Ok(r)
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(super) struct ForkRequest {
    version: Option<i64>,
    /// How many new sessions (1 to 100).
    #[schema(required = true)]
    count: Option<i64>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct ForkResponse {
    version: u32,
    session_id: String,
    /// The new sessions, each an independent copy of the session as it was.
    session_ids: Vec<String>,
}

/// What a new session made from a snapshot gets from it and from the request.
struct NewSession {
    lifetime: u64,
    idle: u64,
    /// Volumes to attach (a fork's: its source's).
    volumes: Vec<wasbox_runtime::volume::VolumeMount>,
}

fn session_config(id: &str, labels: &BTreeMap<String, String>, new: &NewSession) -> SessionConfig {
    let mut config = SessionConfig::new(id.to_string());
    config.lifetime = Duration::from_secs(new.lifetime);
    config.idle = Duration::from_secs(new.idle);
    config.env = labels
        .get(LABEL_ENV)
        .and_then(|e| serde_json::from_str::<BTreeMap<String, String>>(e).ok())
        .unwrap_or_default()
        .into_iter()
        .collect();
    for (from, to) in [
        (LABEL_TASK, super::sessions::TASK_ID),
        (LABEL_IMAGE_REF, super::sessions::IMAGE_REF),
    ] {
        if let Some(v) = labels.get(from) {
            config.labels.insert(to.into(), v.clone());
        }
    }
    config
}

fn session_limits(node: &SharedNode) -> Limits {
    Limits::default()
        .timeout(Duration::from_secs(node.config().max_timeout_secs))
        .max_output_bytes(MAX_OUTPUT_BYTES)
}

/// Makes the session `id` from `snap`; the session table's refusals as problems.
fn start_session(
    node: &SharedNode,
    id: &str,
    snap: &Snapshot,
    new: &NewSession,
) -> Result<Arc<wasbox_runtime::Session>, Problem> {
    let config = session_config(id, &snap.manifest().labels, new);
    let mut failed = None;
    let made = node.sessions.create(config, || {
        node.runtime
            .restore_with(snap, Some(session_limits(node)), new.volumes.clone())
            .map_err(|e| {
                let msg = e.to_string();
                failed = Some(e);
                anyhow::anyhow!(msg)
            })
    });
    match made {
        Ok(s) => {
            node.telemetry.started(&sandbox_of(&s));
            Ok(s)
        }
        Err(SessionRefused::Exists(_)) => {
            Err(Problem::conflict(format!("session `{id}` already exists")))
        }
        Err(SessionRefused::Full(n)) => {
            Err(Problem::busy(format!("the node is at its limit of {n} sessions")).retry_after(5))
        }
        Err(SessionRefused::Sandbox(e)) => Err(match failed {
            Some(f) => snapshot_problem(f),
            None => Problem::internal(&e),
        }),
    }
}

async fn fork(
    node: SharedNode,
    id: String,
    headers: HeaderMap,
    body: Body,
) -> Result<ForkResponse, Problem> {
    node.creating()?;
    let session = node.session(&id)?;
    let req: ForkRequest =
        match optional_version(&headers, body, node.config().max_request_bytes).await? {
            Some(v) => serde_json::from_value(v)
                .map_err(|e| Problem::bad_request(format!("invalid request: {e}")))?,
            None => return Err(Problem::bad_request("count is required")),
        };
    check_version(req.version.or(Some(1)))?;
    let count = match req.count {
        Some(n) if (1..=MAX_FORK_COUNT as i64).contains(&n) => n as usize,
        Some(_) => {
            return Err(Problem::bad_request(format!(
                "count must be from 1 to {MAX_FORK_COUNT}"
            )));
        }
        None => return Err(Problem::bad_request("count is required")),
    };
    let free = node.sessions.max().saturating_sub(node.sessions.len());
    if count > free {
        return Err(Problem::busy(format!(
            "the node has room for {free} more sessions, not {count}"
        ))
        .retry_after(5));
    }
    let new = NewSession {
        lifetime: session.remaining().as_secs().max(1),
        idle: session.idle_limit().as_secs(),
        volumes: session.sandbox().volumes(),
    };
    let labels = labels_of(&session);
    let node2 = node.clone();
    let ids = blocking(move || {
        let snap = node2
            .runtime
            .snapshot(session.sandbox(), labels)
            .map_err(snapshot_problem)?;
        let mut ids = Vec::with_capacity(count);
        for _ in 0..count {
            let new_id = format!("{}-fork-{}", session.id(), crate::ids::hex::<6>());
            match start_session(&node2, &new_id, &snap, &new) {
                Ok(_) => ids.push(new_id),
                Err(p) => {
                    // All or nothing: the forks made so far go.
                    for made in &ids {
                        node2.sessions.end(made, "fork failed");
                    }
                    return Err(p);
                }
            }
        }
        Ok(ids)
    })
    .await?;
    tracing::info!(session_id = %id, count, "session forked");
    Ok(ForkResponse {
        version: 1,
        session_id: id,
        session_ids: ids,
    })
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(super) struct RestoreRequest {
    version: Option<i64>,
    /// The snapshot to restore (or upload its tar as `application/x-tar` with `session_id`
    /// in the query).
    snapshot_id: Option<String>,
    /// The new session's id: as for a create, made by the node when left out.
    session_id: Option<String>,
    max_lifetime_seconds: Option<i64>,
    idle_timeout_seconds: Option<i64>,
    /// Volumes to attach to the new session, as a create's `sandbox.volumes`.
    volumes: Option<Vec<super::wire::VolumeSpec>>,
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RestoreQuery {
    /// With an uploaded tar: the new session's id.
    session_id: Option<String>,
    max_lifetime_seconds: Option<i64>,
    idle_timeout_seconds: Option<i64>,
    /// With an uploaded tar: volumes to attach, comma-separated `NAME:PATH[:ro]` (as
    /// `wasbox run --volume`), e.g. `data:/mnt/data,cache:/workspace/cache:ro`.
    volumes: Option<String>,
}

/// `POST /v1/worker/sessions:restore`: a new session from a stored snapshot (JSON body) or
/// from an uploaded tar (`Content-Type: application/x-tar`).
#[utoipa::path(post, path = "/v1/worker/sessions:restore", tag = "snapshots", operation_id = "restore_session", security(("bearer" = [])),
    params(RestoreQuery),
    request_body(content = RestoreRequest, description = "JSON naming a stored snapshot, or the tar itself as `application/x-tar` (or compressed, `application/zstd`)"),
    responses((status = 200, description = "The new session", body = SessionInfo), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn restore(
    State(node): State<SharedNode>,
    Query(q): Query<RestoreQuery>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    respond(restore_inner(node, q, headers, body).await)
}

async fn restore_inner(
    node: SharedNode,
    q: RestoreQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<SessionInfo, Problem> {
    node.creating()?;
    // A compressed tar is recognized by its first bytes as well.
    let is_tar = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            [
                "application/x-tar",
                "application/zstd",
                "application/x-zstd",
            ]
            .iter()
            .any(|t| v.starts_with(t))
        });
    let (session_id, lifetime, idle, source, volumes) = if is_tar {
        let volumes = query_volumes(q.volumes.as_deref())?;
        let bytes = read_body(&headers, body, MAX_UPLOAD_BYTES).await?;
        (
            q.session_id,
            q.max_lifetime_seconds,
            q.idle_timeout_seconds,
            Err(bytes),
            volumes,
        )
    } else {
        let bytes = read_body(&headers, body, node.config().max_request_bytes).await?;
        let req: RestoreRequest = serde_json::from_slice(&bytes)
            .map_err(|e| Problem::bad_request(format!("invalid JSON: {e}")))?;
        check_version(req.version)?;
        let snap_id = req
            .snapshot_id
            .filter(|s| !s.is_empty())
            .ok_or_else(|| Problem::bad_request("snapshot_id is required (or upload a tar)"))?;
        (
            req.session_id,
            req.max_lifetime_seconds,
            req.idle_timeout_seconds,
            Ok(snap_id),
            req.volumes.unwrap_or_default(),
        )
    };
    let session_id = super::node::chosen_id(&node, "session_id", &session_id)?;
    let mut new = NewSession {
        lifetime: check_timeout(lifetime, "max_lifetime_seconds")?
            .unwrap_or(DEFAULT_SESSION_LIFETIME_SECS),
        idle: check_timeout(idle, "idle_timeout_seconds")?.unwrap_or(DEFAULT_SESSION_IDLE_SECS),
        volumes: Vec::new(),
    };
    if node.sessions.get(&session_id).is_some() {
        return Err(Problem::conflict(format!(
            "session `{session_id}` already exists"
        )));
    }
    let node2 = node.clone();
    let session = blocking(move || {
        let limits = TarLimits {
            max_bytes: wasbox_runtime::limits::DEFAULT_DISK_BYTES,
            max_entries: Limits::default().disk_inodes,
            links_may_leave: false,
        };
        let snap = match source {
            Ok(snap_id) => load(&node2, &snap_id, limits)?,
            Err(bytes) => node2
                .runtime
                .read_snapshot(std::io::Cursor::new(bytes), limits)
                .map_err(snapshot_problem)?,
        };
        check_image(&node2, &snap)?;
        new.volumes = super::node::volume_mounts(&node2.volumes, &volumes, &snap.manifest().mount)?;
        start_session(&node2, &session_id, &snap, &new)
    })
    .await?;
    tracing::info!(session_id = %session.id(), "session restored from a snapshot");
    Ok(info(&session, "running"))
}

/// The `volumes` query parameter of a restore from an uploaded tar.
fn query_volumes(text: Option<&str>) -> Result<Vec<super::wire::VolumeSpec>, Problem> {
    text.into_iter()
        .flat_map(|t| t.split(','))
        .filter(|m| !m.is_empty())
        .map(|m| {
            let (name, path, read_only) =
                wasbox_runtime::volume::parse_mount(m).map_err(Problem::bad_request)?;
            Ok(super::wire::VolumeSpec {
                name,
                path,
                read_only,
            })
        })
        .collect()
}

/// A restored session's image must be one this node's rules allow.
fn check_image(node: &SharedNode, snap: &Snapshot) -> Result<(), Problem> {
    let m = snap.manifest();
    let image_ref = m.labels.get(LABEL_IMAGE_REF).unwrap_or(&m.image);
    let config = node.config();
    // A session made from a template (its image reference is the template's name).
    if node.templates.exists(image_ref)
        && config.policy_allows(image_ref)
        && node.runtime.image_names().contains(&m.image.as_str())
    {
        return Ok(());
    }
    match config.image_for(image_ref) {
        Some(image) if image == m.image => Ok(()),
        _ => Err(Problem::with_status(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("the snapshot's image `{image_ref}` is not allowed on this node"),
        )),
    }
}

/// A stored snapshot: its frozen tree when cached, else read from its tar (checked against
/// the digest recorded when it was taken).
fn load(node: &SharedNode, id: &str, limits: TarLimits) -> Result<Snapshot, Problem> {
    let store = &node.snapshots;
    let missing = || Problem::not_found(format!("snapshot `{id}` does not exist"));
    if !store.valid_id(id) {
        return Err(missing());
    }
    if let Some(s) = store.cached(id) {
        return Ok(s);
    }
    let StoredTar {
        file,
        digest: recorded,
        ..
    } = store.open(id).ok_or_else(missing)?;
    // A tar this node wrote may hold what its sandbox held (a symlink to `/usr/bin/python3`);
    // its digest is checked before it is used.
    let limits = TarLimits {
        links_may_leave: true,
        ..limits
    };
    let snap = node
        .runtime
        .read_snapshot(std::io::BufReader::with_capacity(1 << 20, file), limits)
        .map_err(snapshot_problem)?;
    if snap.digest() != Some(recorded.as_str()) {
        return Err(Problem::with_status(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("snapshot `{id}` is corrupt: its digest does not match the recorded one"),
        ));
    }
    store.cache(id, snap.clone());
    Ok(snap)
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct SnapshotList {
    version: u32,
    snapshots: Vec<StoredSnapshot>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct StoredSnapshot {
    snapshot_id: String,
    digest: String,
    size_bytes: u64,
}

/// `GET /v1/worker/snapshots`: the snapshots the node keeps.
#[utoipa::path(get, path = "/v1/worker/snapshots", tag = "snapshots", operation_id = "list_snapshots", security(("bearer" = [])),
    responses((status = 200, description = "The stored snapshots", body = SnapshotList), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn list(State(node): State<SharedNode>) -> Response {
    let store = node.snapshots.clone();
    respond(
        blocking(move || {
            let snapshots = store
                .list()
                .into_iter()
                .map(|(snapshot_id, digest, size_bytes)| StoredSnapshot {
                    snapshot_id,
                    digest,
                    size_bytes,
                })
                .collect();
            Ok(SnapshotList {
                version: 1,
                snapshots,
            })
        })
        .await,
    )
}

/// `GET /v1/worker/snapshots/{id}`: the snapshot's tar.
#[utoipa::path(get, path = "/v1/worker/snapshots/{id}", tag = "snapshots", operation_id = "download_snapshot", security(("bearer" = [])),
    params(("id" = String, Path, description = "The snapshot id"), DownloadQuery),
    responses((status = 200, description = "The snapshot's tar (`application/x-tar`, or `application/zstd` with `compression=zstd`)"), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn download(
    State(node): State<SharedNode>,
    Path(id): Path<String>,
    Query(q): Query<DownloadQuery>,
) -> Response {
    let zstd = match zstd_wanted(q.compression.as_deref()) {
        Ok(z) => z,
        Err(p) => return p.into_response(),
    };
    match tar_response(&node.snapshots, &id, zstd).await {
        Ok(r) => r,
        Err(p) => p.into_response(),
    }
}

/// `DELETE /v1/worker/snapshots/{id}`: forgets a snapshot (sessions made from it stay).
#[utoipa::path(delete, path = "/v1/worker/snapshots/{id}", tag = "snapshots", operation_id = "delete_snapshot", security(("bearer" = [])),
    params(("id" = String, Path, description = "The snapshot id")),
    responses((status = 204, description = "Deleted"), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn delete(State(node): State<SharedNode>, Path(id): Path<String>) -> Response {
    let store = node.snapshots.clone();
    let r = blocking(move || {
        if store.remove(&id) {
            Ok(())
        } else {
            Err(Problem::not_found(format!(
                "snapshot `{id}` does not exist"
            )))
        }
    })
    .await;
    match r {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(p) => p.into_response(),
    }
}
