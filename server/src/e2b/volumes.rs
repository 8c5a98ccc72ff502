//! E2B's volumes: the control plane's `POST/GET /volumes` and `GET/DELETE
//! /volumes/{volumeID}` (the node's token), `volumeMounts: [{name, path}]` when a sandbox
//! is made, and the volume content API under `/volumecontent/{volumeID}/` (`file`, `dir`,
//! `path`), authorised by the volume's own token as `Authorization: Bearer`. The volumes are
//! the node's ([`wasbox_runtime::volume::Volumes`], the worker API's too); the content API
//! works on the open volume, so its writes count in the same quota as the sandboxes'.
//!
//! Content paths are paths inside the volume (`/a/b` or `a/b`); one with `..` is refused.

use std::collections::BTreeMap;
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use cap_std::fs::{Dir, MetadataExt as _, PermissionsExt as _};
use serde::{Deserialize, Serialize};
use wasbox_runtime::volume::{OpenVolume, VolumeError, VolumeMount, VolumeRecord};

use super::control::read_json;
use super::wire::VolumeMountWire;
use super::{SharedE2b, error};

fn volume_error(e: VolumeError) -> Response {
    let status = match &e {
        VolumeError::Invalid(_) => StatusCode::BAD_REQUEST,
        VolumeError::NotFound(_) => StatusCode::NOT_FOUND,
        VolumeError::Exists(_) | VolumeError::InUse(_) => StatusCode::CONFLICT,
        VolumeError::Full(_) => StatusCode::INSUFFICIENT_STORAGE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, e.to_string())
}

async fn blocking(f: impl FnOnce() -> Response + Send + 'static) -> Response {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| {
        error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("volume task failed: {e}"),
        )
    })
}

/// Opens the volumes of `volumeMounts` for a sandbox whose workspace is at `workspace`.
pub(super) fn mounts(
    e2b: &SharedE2b,
    wanted: &[VolumeMountWire],
    workspace: &str,
) -> Result<Vec<VolumeMount>, Response> {
    let paths =
        wasbox_runtime::volume::check_mounts(wanted.iter().map(|m| m.path.as_str()), workspace)
            .map_err(volume_error)?;
    wanted
        .iter()
        .zip(paths)
        .map(|(m, path)| {
            let volume = e2b.node.volumes.open(&m.name).map_err(|e| match e {
                VolumeError::NotFound(_) => error(
                    StatusCode::BAD_REQUEST,
                    format!("volumeMounts: no volume named '{}'", m.name),
                ),
                e => volume_error(e),
            })?;
            Ok(VolumeMount {
                volume,
                path,
                read_only: m.read_only,
            })
        })
        .collect()
}

#[derive(Serialize)]
struct VolumeWire {
    #[serde(rename = "volumeID")]
    volume_id: String,
    name: String,
}

#[derive(Serialize)]
struct VolumeAndToken {
    #[serde(rename = "volumeID")]
    volume_id: String,
    name: String,
    token: String,
}

fn with_token(r: VolumeRecord) -> VolumeAndToken {
    VolumeAndToken {
        volume_id: r.id,
        name: r.name,
        token: r.token,
    }
}

#[derive(Deserialize, Default)]
struct NewVolume {
    name: Option<String>,
}

/// `POST /volumes`: `{name}` makes an empty volume of the node's default size (201, with
/// its token).
pub(super) async fn create(State(e2b): State<SharedE2b>, body: Body) -> Response {
    let req: NewVolume = match read_json(&e2b, body).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    let Some(name) = req.name else {
        return error(StatusCode::BAD_REQUEST, "name is required");
    };
    let volumes = e2b.node.volumes.clone();
    blocking(move || match volumes.create(&name, None) {
        Ok(r) => {
            tracing::info!(volume = %r.name, "volume created");
            (StatusCode::CREATED, axum::Json(with_token(r))).into_response()
        }
        Err(e) => volume_error(e),
    })
    .await
}

/// `GET /volumes`.
pub(super) async fn list(State(e2b): State<SharedE2b>) -> Response {
    let volumes = e2b.node.volumes.clone();
    blocking(move || {
        let all: Vec<VolumeWire> = volumes
            .list()
            .into_iter()
            .map(|v| VolumeWire {
                volume_id: v.record.id,
                name: v.record.name,
            })
            .collect();
        axum::Json(all).into_response()
    })
    .await
}

/// `GET /volumes/{volumeID}`: the volume with its token.
pub(super) async fn info(State(e2b): State<SharedE2b>, Path(id): Path<String>) -> Response {
    let volumes = e2b.node.volumes.clone();
    blocking(move || match volumes.by_id(&id) {
        Ok(r) => axum::Json(with_token(r)).into_response(),
        Err(_) => error(StatusCode::NOT_FOUND, format!("volume '{id}' not found")),
    })
    .await
}

/// `DELETE /volumes/{volumeID}`: 204; 409 while a sandbox (running or paused) has it.
pub(super) async fn destroy(State(e2b): State<SharedE2b>, Path(id): Path<String>) -> Response {
    let volumes = e2b.node.volumes.clone();
    blocking(move || {
        let r = match volumes.by_id(&id) {
            Ok(r) => r,
            Err(_) => return error(StatusCode::NOT_FOUND, format!("volume '{id}' not found")),
        };
        match volumes.remove(&r.name) {
            Ok(()) => {
                tracing::info!(volume = %r.name, "volume removed");
                StatusCode::NO_CONTENT.into_response()
            }
            Err(e) => volume_error(e),
        }
    })
    .await
}

// The content API.

/// The volume `id` when the request carries its token; else the 401 to answer (an unknown
/// id gets the same answer, so that ids cannot be probed).
fn authorised(e2b: &SharedE2b, id: &str, headers: &HeaderMap) -> Result<Arc<OpenVolume>, Response> {
    let refused = || error(StatusCode::UNAUTHORIZED, "invalid volume token");
    let record = e2b.node.volumes.by_id(id).map_err(|_| refused())?;
    if !crate::auth::bearer_matches(headers, &record.token) {
        return Err(refused());
    }
    e2b.node.volumes.open(&record.name).map_err(volume_error)
}

/// A content path as the path under the volume's directory (`.` for its root).
fn inside(path: &str) -> Result<PathBuf, Response> {
    let mut rel = PathBuf::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(error(
                    StatusCode::BAD_REQUEST,
                    format!("path {path:?} climbs out with `..`"),
                ));
            }
            p if p.contains('\0') => {
                return Err(error(StatusCode::BAD_REQUEST, "a path has no NUL byte"));
            }
            p => rel.push(p),
        }
    }
    Ok(if rel.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        rel
    })
}

/// The answer to a failed file operation on `path`.
fn io_error(path: &str, e: &std::io::Error) -> Response {
    use std::io::ErrorKind::*;
    let status = match e.kind() {
        NotFound => StatusCode::NOT_FOUND,
        AlreadyExists | DirectoryNotEmpty => StatusCode::CONFLICT,
        NotADirectory | IsADirectory | InvalidInput | InvalidFilename => StatusCode::BAD_REQUEST,
        // cap-std's refusal of a path (or symlink) that leads out of the volume.
        PermissionDenied => StatusCode::FORBIDDEN,
        _ if e.raw_os_error() == Some(libc::ELOOP) => StatusCode::FORBIDDEN,
        _ if e.raw_os_error() == Some(libc::ENOSPC) => StatusCode::INSUFFICIENT_STORAGE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, format!("{path}: {}", message(e)))
}

fn message(e: &std::io::Error) -> String {
    let s = e.to_string();
    s.split(" (os error").next().unwrap_or(&s).to_string()
}

fn no_space(volume: &OpenVolume) -> Response {
    error(
        StatusCode::INSUFFICIENT_STORAGE,
        format!(
            "volume '{}' is full ({} bytes, {} files and directories)",
            volume.record().name,
            volume.quota().limits().0,
            volume.quota().limits().1
        ),
    )
}

/// The answer to a failed change of `path`: the quota's own message when it is full.
fn failed(volume: &OpenVolume, path: &str, e: &std::io::Error) -> Response {
    if e.raw_os_error() == Some(libc::ENOSPC) {
        no_space(volume)
    } else {
        io_error(path, e)
    }
}

/// E2B's `VolumeEntryStat`.
#[derive(Serialize)]
struct EntryStat {
    name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    path: String,
    size: u64,
    mode: u32,
    uid: u32,
    gid: u32,
    atime: String,
    mtime: String,
    ctime: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<String>,
}

/// `rel` as the content path clients name (`/a/b`).
fn shown(rel: &FsPath) -> String {
    if rel == FsPath::new(".") {
        "/".into()
    } else {
        format!("/{}", rel.display())
    }
}

fn stat(dir: &Dir, rel: &FsPath) -> std::io::Result<EntryStat> {
    let m = dir.symlink_metadata(rel)?;
    let time = |secs: i64, nanos: i64| {
        crate::rfc3339::format(
            std::time::UNIX_EPOCH
                + std::time::Duration::new(secs.max(0) as u64, nanos.clamp(0, 999_999_999) as u32),
        )
    };
    let kind = if m.is_symlink() {
        "symlink"
    } else if m.is_dir() {
        "directory"
    } else if m.is_file() {
        "file"
    } else {
        "unknown"
    };
    Ok(EntryStat {
        name: rel
            .file_name()
            .map_or_else(|| "/".into(), |n| n.to_string_lossy().into_owned()),
        kind,
        path: shown(rel),
        size: m.len(),
        mode: m.permissions().mode() & 0o7777,
        uid: m.uid(),
        gid: m.gid(),
        atime: time(m.atime(), m.atime_nsec()),
        mtime: time(m.mtime(), m.mtime_nsec()),
        ctime: time(m.ctime(), m.ctime_nsec()),
        target: if m.is_symlink() {
            dir.read_link_contents(rel)
                .ok()
                .map(|t| t.to_string_lossy().into_owned())
        } else {
            None
        },
    })
}

#[derive(Deserialize)]
pub(super) struct PathQuery {
    path: String,
    depth: Option<u32>,
    mode: Option<u32>,
    force: Option<bool>,
    uid: Option<u32>,
    gid: Option<u32>,
}

/// Runs `op`, once the request carries the volume's token, on the volume's directory and
/// `path` inside it (refused when it climbs out), off the request threads.
async fn on_volume(
    e2b: SharedE2b,
    id: String,
    headers: HeaderMap,
    path: &str,
    op: impl FnOnce(&OpenVolume, &Dir, PathBuf) -> Response + Send + 'static,
) -> Response {
    let path = path.to_string();
    blocking(move || {
        let volume = match authorised(&e2b, &id, &headers) {
            Ok(v) => v,
            Err(r) => return r,
        };
        let rel = match inside(&path) {
            Ok(r) => r,
            Err(r) => return r,
        };
        match volume.open_dir() {
            Ok(dir) => op(&volume, &dir, rel),
            Err(e) => io_error("/", &e),
        }
    })
    .await
}

/// Owners other than the files' own cannot be given: the node does not change owners.
fn check_owner(q: &PathQuery, m: Option<&cap_std::fs::Metadata>) -> Result<(), Response> {
    let (uid, gid) = m.map_or((None, None), |m| (Some(m.uid()), Some(m.gid())));
    if q.uid.is_some_and(|u| Some(u) != uid) || q.gid.is_some_and(|g| Some(g) != gid) {
        return Err(error(
            StatusCode::BAD_REQUEST,
            "uid and gid cannot be changed on this node: files belong to the node's user",
        ));
    }
    Ok(())
}

/// `GET /volumecontent/{id}/path?path=`: what is at the path.
pub(super) async fn get_path(
    State(e2b): State<SharedE2b>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Query(q): Query<PathQuery>,
) -> Response {
    let path = q.path.clone();
    on_volume(e2b, id, headers, &path, move |_, dir, rel| {
        match stat(dir, &rel) {
            Ok(s) => axum::Json(s).into_response(),
            Err(e) => io_error(&q.path, &e),
        }
    })
    .await
}

/// Entries one listing returns at most.
const MAX_LIST: usize = 100_000;

/// `GET /volumecontent/{id}/dir?path=&depth=`: the entries under a directory, `depth`
/// levels down (1, its children, by default).
pub(super) async fn get_dir(
    State(e2b): State<SharedE2b>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Query(q): Query<PathQuery>,
) -> Response {
    let path = q.path.clone();
    on_volume(e2b, id, headers, &path, move |_, dir, rel| {
        match dir.symlink_metadata(&rel) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("{}: Not a directory", q.path),
                );
            }
            Err(e) => return io_error(&q.path, &e),
        }
        let depth = q.depth.unwrap_or(1).max(1);
        let mut out = Vec::new();
        let mut pending = vec![(rel, 1u32)];
        while let Some((at, level)) = pending.pop() {
            let entries = match dir.read_dir(&at) {
                Ok(e) => e,
                Err(e) => return io_error(&q.path, &e),
            };
            for e in entries.flatten() {
                let child = if at == FsPath::new(".") {
                    PathBuf::from(e.file_name())
                } else {
                    at.join(e.file_name())
                };
                let Ok(s) = stat(dir, &child) else { continue };
                if s.kind == "directory" && level < depth {
                    pending.push((child, level + 1));
                }
                out.push(s);
                if out.len() > MAX_LIST {
                    return error(
                        StatusCode::BAD_REQUEST,
                        format!("{}: more than {MAX_LIST} entries", q.path),
                    );
                }
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        axum::Json(out).into_response()
    })
    .await
}

/// `POST /volumecontent/{id}/dir?path=&mode=&force=`: makes a directory (201); `force`
/// makes missing parents and accepts one that exists.
pub(super) async fn post_dir(
    State(e2b): State<SharedE2b>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Query(q): Query<PathQuery>,
) -> Response {
    let path = q.path.clone();
    on_volume(e2b, id, headers, &path, move |volume, dir, rel| {
        if let Err(r) = check_owner(&q, dir.metadata(".").ok().as_ref()) {
            return r;
        }
        let force = q.force.unwrap_or(false);
        match dir.symlink_metadata(&rel) {
            Ok(m) if m.is_dir() && force => {
                return (StatusCode::CREATED, axum::Json(stat(dir, &rel).ok())).into_response();
            }
            Ok(_) => return error(StatusCode::CONFLICT, format!("{}: File exists", q.path)),
            Err(_) => {}
        }
        if let Err(e) = volume.make_dir(dir, &rel, force) {
            return failed(volume, &q.path, &e);
        }
        if let Some(mode) = q.mode {
            let _ = dir.set_permissions(&rel, cap_std::fs::Permissions::from_mode(mode & 0o1777));
        }
        match stat(dir, &rel) {
            Ok(s) => (StatusCode::CREATED, axum::Json(s)).into_response(),
            Err(e) => io_error(&q.path, &e),
        }
    })
    .await
}

/// `GET /volumecontent/{id}/file?path=`: a file's bytes.
pub(super) async fn get_file(
    State(e2b): State<SharedE2b>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Query(q): Query<PathQuery>,
) -> Response {
    let path = q.path.clone();
    on_volume(e2b, id, headers, &path, move |_, dir, rel| {
        let file = match dir.open(&rel) {
            Ok(f) => f.into_std(),
            Err(e) => return io_error(&q.path, &e),
        };
        match file.metadata() {
            Ok(m) if m.is_dir() => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("{}: Is a directory", q.path),
                );
            }
            Err(e) => return io_error(&q.path, &e),
            Ok(_) => {}
        }
        (
            [(axum::http::header::CONTENT_TYPE, "application/octet-stream")],
            crate::http::file_body(tokio::fs::File::from_std(file)),
        )
            .into_response()
    })
    .await
}

/// `PUT /volumecontent/{id}/file?path=&mode=&force=`: writes a file from the body (201),
/// making missing parent directories; an existing file is replaced unless `force=false`.
/// The body is streamed to a file beside it, charged to the volume's quota as it comes, and
/// renamed into place once whole: a write that fails leaves the old file.
pub(super) async fn put_file(
    State(e2b): State<SharedE2b>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Query(q): Query<PathQuery>,
    body: Body,
) -> Response {
    use futures_util::StreamExt as _;
    use tokio::io::AsyncWriteExt as _;
    let rel = match inside(&q.path) {
        Ok(r) if r != FsPath::new(".") => r,
        Ok(_) => return error(StatusCode::BAD_REQUEST, "path names the volume itself"),
        Err(r) => return r,
    };
    let volume = match tokio::task::spawn_blocking(move || authorised(&e2b, &id, &headers)).await {
        Ok(Ok(v)) => v,
        Ok(Err(r)) => return r,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let dir = match volume.open_dir() {
        Ok(d) => d,
        Err(e) => return io_error(&q.path, &e),
    };
    let existing = dir.symlink_metadata(&rel).ok();
    if let Some(m) = &existing {
        if m.is_dir() {
            return error(
                StatusCode::BAD_REQUEST,
                format!("{}: Is a directory", q.path),
            );
        }
        if q.force == Some(false) {
            return error(StatusCode::CONFLICT, format!("{}: File exists", q.path));
        }
    }
    if let Err(r) = check_owner(&q, existing.as_ref().or(dir.metadata(".").ok().as_ref())) {
        return r;
    }
    // Missing parents, then a temporary file beside the target (one inode while written).
    let parent = rel
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(FsPath::to_path_buf);
    let quota = volume.quota().clone();
    if let Some(p) = &parent
        && let Err(e) = volume.make_dir(&dir, p, true)
    {
        return failed(&volume, &q.path, &e);
    }
    if !quota.reserve_inodes(1) {
        return no_space(&volume);
    }
    let temp_name = format!(".wasbox-upload-{}", crate::ids::hex::<8>());
    let temp = match &parent {
        Some(p) => p.join(&temp_name),
        None => PathBuf::from(&temp_name),
    };
    let mut file = match dir.create(&temp) {
        Ok(f) => tokio::fs::File::from_std(f.into_std()),
        Err(e) => {
            quota.release_inodes(1);
            return io_error(&q.path, &e);
        }
    };
    let mut written = 0u64;
    let mut stream = body.into_data_stream();
    let failed: Option<Response> = loop {
        match stream.next().await {
            None => break None,
            Some(Err(e)) => {
                break Some(error(
                    StatusCode::BAD_REQUEST,
                    format!("reading the body: {e}"),
                ));
            }
            Some(Ok(chunk)) => {
                if !quota.reserve_bytes(chunk.len() as u64) {
                    break Some(no_space(&volume));
                }
                written += chunk.len() as u64;
                if let Err(e) = file.write_all(&chunk).await {
                    break Some(io_error(&q.path, &e));
                }
            }
        }
    };
    let failed = match (failed, file.flush().await) {
        (None, Err(e)) => Some(io_error(&q.path, &e)),
        (f, _) => f,
    };
    drop(file);
    if let Some(r) = failed {
        let _ = dir.remove_file(&temp);
        quota.release_bytes(written);
        quota.release_inodes(1);
        return r;
    }
    let (q2, volume2) = (q, volume.clone());
    blocking(move || {
        if let Some(mode) = q2.mode {
            let _ = dir.set_permissions(&temp, cap_std::fs::Permissions::from_mode(mode & 0o777));
        }
        // Replacing the file there frees what it held.
        let replaced = dir.symlink_metadata(&rel).ok();
        if let Err(e) = dir.rename(&temp, &dir, &rel) {
            let _ = dir.remove_file(&temp);
            volume2.quota().release_bytes(written);
            volume2.quota().release_inodes(1);
            return io_error(&q2.path, &e);
        }
        if let Some(m) = replaced {
            if m.is_file() && m.nlink() <= 1 {
                volume2.quota().release_bytes(m.len());
            }
            volume2.quota().release_inodes(1);
        }
        match stat(&dir, &rel) {
            Ok(s) => (StatusCode::CREATED, axum::Json(s)).into_response(),
            Err(e) => io_error(&q2.path, &e),
        }
    })
    .await
}

#[derive(Deserialize, Default)]
struct Metadata {
    uid: Option<u32>,
    gid: Option<u32>,
    mode: Option<u32>,
}

/// `PATCH /volumecontent/{id}/path?path=` with `{uid, gid, mode}`: sets the mode (the
/// owner stays: see `check_owner`).
pub(super) async fn patch_path(
    State(e2b): State<SharedE2b>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Query(q): Query<PathQuery>,
    body: Body,
) -> Response {
    let change: Metadata = match read_json(&e2b, body).await {
        Ok(m) => m,
        Err(r) => return r,
    };
    let path = q.path.clone();
    on_volume(e2b, id, headers, &path, move |_, dir, rel| {
        let meta = match dir.symlink_metadata(&rel) {
            Ok(m) => m,
            Err(e) => return io_error(&q.path, &e),
        };
        let asked = PathQuery {
            uid: change.uid,
            gid: change.gid,
            ..q
        };
        if let Err(r) = check_owner(&asked, Some(&meta)) {
            return r;
        }
        if let Some(mode) = change.mode {
            if meta.is_symlink() {
                return error(StatusCode::BAD_REQUEST, "a symlink has no mode of its own");
            }
            let mask = if meta.is_dir() { 0o1777 } else { 0o777 };
            if let Err(e) =
                dir.set_permissions(&rel, cap_std::fs::Permissions::from_mode(mode & mask))
            {
                return io_error(&asked.path, &e);
            }
        }
        match stat(dir, &rel) {
            Ok(s) => axum::Json(s).into_response(),
            Err(e) => io_error(&asked.path, &e),
        }
    })
    .await
}

/// `DELETE /volumecontent/{id}/path?path=`: removes a file, symlink or directory tree
/// (204).
pub(super) async fn delete_path(
    State(e2b): State<SharedE2b>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Query(q): Query<PathQuery>,
) -> Response {
    let path = q.path.clone();
    on_volume(e2b, id, headers, &path, move |volume, dir, rel| {
        if rel == FsPath::new(".") {
            return error(StatusCode::BAD_REQUEST, "path names the volume itself");
        }
        match volume.remove(dir, &rel) {
            Ok(()) => StatusCode::NO_CONTENT.into_response(),
            Err(e) => io_error(&q.path, &e),
        }
    })
    .await
}

/// The `volumeMounts` of a sandbox's details.
pub(super) fn described(mounts: &[VolumeMount]) -> Vec<BTreeMap<&'static str, String>> {
    mounts
        .iter()
        .map(|m| {
            BTreeMap::from([
                ("name", m.volume.record().name.clone()),
                ("path", m.path.clone()),
            ])
        })
        .collect()
}
