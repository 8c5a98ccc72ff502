//! envd's `filesystem.Filesystem` service over the sandbox's tree (the runtime's host file
//! operations): `Stat`, `ListDir`, `MakeDir`, `Remove`, `Move`, and directory watching, as a
//! stream (`WatchDir`) or as a watcher polled by id (`CreateWatcher`, `GetWatcherEvents`,
//! `RemoveWatcher`), on the runtime's inotify watches (every writer is seen, guest or host).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use wasbox_runtime::{
    Change, ChangeKind, FileError, FileInfo, FileKind, Sandbox, Watch, permission_string,
};

use super::connect::{self, Code, Framing, RpcError};
use super::envd::Call;
use super::wire::{self, EntryInfo, FilesystemEvent};
use super::{MAX_MESSAGE_BYTES, MAX_WATCHERS, Sbx, SharedE2b};
use wasbox_runtime::sync::lock;

/// Deepest a recursive listing goes.
const MAX_DEPTH: u32 = 64;

/// The watchers of one sandbox, by id.
#[derive(Default)]
pub(crate) struct Watchers {
    map: Mutex<HashMap<String, Arc<Watcher>>>,
    /// `WatchDir` streams open now.
    streams: Arc<std::sync::atomic::AtomicUsize>,
}

/// One open `WatchDir` stream, counted while it lives.
struct StreamSlot(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

struct Watcher {
    watch: Mutex<Watch>,
    /// The watched directory's sandbox path.
    root: String,
    include_entry: bool,
}

pub(crate) fn rpc_error(e: FileError) -> RpcError {
    let code = match &e {
        FileError::NotFound(_) => Code::NotFound,
        FileError::IsDirectory(_) | FileError::NotADirectory(_) | FileError::InvalidPath(_) => {
            Code::InvalidArgument
        }
        FileError::AlreadyExists(_) => Code::AlreadyExists,
        FileError::OutsideWorkspace(_) => Code::PermissionDenied,
        FileError::NoSpace(_) | FileError::TooLarge { .. } => Code::ResourceExhausted,
        _ => Code::Internal,
    };
    let message = match &e {
        FileError::OutsideWorkspace(p) => format!(
            "{p}: permission denied: a sandbox's files are under {} and /tmp",
            super::HOME
        ),
        _ => e.to_string(),
    };
    RpcError::new(code, message)
}

pub(crate) fn entry(info: &FileInfo) -> EntryInfo {
    EntryInfo {
        name: info.name.clone(),
        kind: match info.kind {
            FileKind::File => "FILE_TYPE_FILE",
            FileKind::Directory => "FILE_TYPE_DIRECTORY",
            FileKind::Symlink => "FILE_TYPE_SYMLINK",
            _ => "FILE_TYPE_UNSPECIFIED",
        },
        path: info.path.clone(),
        size: info.size.to_string(),
        mode: info.mode & 0o7777,
        permissions: permission_string(info.mode),
        owner: "user".into(),
        group: "user".into(),
        modified_time: info.modified.map(crate::rfc3339::format),
        symlink_target: info.symlink_target.clone(),
        is_symlink: info.is_symlink,
        metadata: metadata(info),
    }
}

/// The namespace of E2B's file metadata among an entry's `user.` attributes.
pub(crate) const METADATA_PREFIX: &str = "e2b.";

/// An entry's E2B metadata: its `user.e2b.*` attributes, named without the namespace.
pub(crate) fn metadata(info: &FileInfo) -> Option<std::collections::BTreeMap<String, String>> {
    let map: std::collections::BTreeMap<String, String> = info
        .xattrs
        .iter()
        .filter_map(|(k, v)| {
            let key = k.strip_prefix(METADATA_PREFIX)?;
            (!key.is_empty()).then(|| (key.to_string(), String::from_utf8_lossy(v).into_owned()))
        })
        .collect();
    (!map.is_empty()).then_some(map)
}

/// The methods of `filesystem.Filesystem`, and how each answers.
const METHODS: &[(&str, Framing)] = &[
    ("Stat", Framing::Unary),
    ("ListDir", Framing::Unary),
    ("MakeDir", Framing::Unary),
    ("Remove", Framing::Unary),
    ("Move", Framing::Unary),
    ("WatchDir", Framing::Stream),
    ("CreateWatcher", Framing::Unary),
    ("GetWatcherEvents", Framing::Unary),
    ("RemoveWatcher", Framing::Unary),
];

/// `POST /filesystem.Filesystem/{method}`.
pub async fn call(
    State(e2b): State<SharedE2b>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let call = match Call::begin(&e2b, &headers, &method, METHODS) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let bytes = match call.body(body).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    if method == "WatchDir" {
        return match connect::decode_stream_request::<wire::WatchRequest>(&bytes, MAX_MESSAGE_BYTES)
        {
            Ok(req) => watch_stream(call.sbx, req, call.deadline, call.keepalive),
            Err(e) => call.fail(e),
        };
    }
    let sbx = call.sbx.clone();
    let sandbox = sbx.session.sandbox().clone();
    let run = move || unary(&sbx, &sandbox, &method, &bytes);
    // File operations on a disk workspace go to the blocking pool.
    let result = tokio::task::spawn_blocking(run)
        .await
        .unwrap_or_else(|e| Err(RpcError::new(Code::Internal, e.to_string())));
    match result {
        Ok(v) => (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            v.to_string(),
        )
            .into_response(),
        Err(e) => call.fail(e),
    }
}

fn unary(
    sbx: &Sbx,
    sandbox: &Sandbox,
    method: &str,
    body: &[u8],
) -> Result<serde_json::Value, RpcError> {
    match method {
        "Stat" => {
            let req: wire::PathRequest = connect::decode_unary(body)?;
            let info = sandbox.stat(&req.path).map_err(rpc_error)?;
            Ok(serde_json::json!({ "entry": entry(&info) }))
        }
        "ListDir" => {
            let req: wire::ListDirRequest = connect::decode_unary(body)?;
            let depth = req.depth.clamp(1, MAX_DEPTH);
            let list = sandbox.list_dir(&req.path, depth).map_err(rpc_error)?;
            let entries: Vec<EntryInfo> = list.iter().map(entry).collect();
            Ok(serde_json::json!({ "entries": entries }))
        }
        "MakeDir" => {
            let req: wire::PathRequest = connect::decode_unary(body)?;
            if !sandbox.make_dir(&req.path).map_err(rpc_error)? {
                return Err(RpcError::new(
                    Code::AlreadyExists,
                    format!("directory at {} already exists", req.path),
                ));
            }
            let info = sandbox.stat(&req.path).map_err(rpc_error)?;
            Ok(serde_json::json!({ "entry": entry(&info) }))
        }
        "Remove" => {
            let req: wire::PathRequest = connect::decode_unary(body)?;
            // Like envd: removing what is not there succeeds.
            match sandbox.remove(&req.path) {
                Ok(()) | Err(FileError::NotFound(_)) => {}
                Err(e) => return Err(rpc_error(e)),
            }
            Ok(serde_json::json!({}))
        }
        "Move" => {
            let req: wire::MoveRequest = connect::decode_unary(body)?;
            let info = sandbox
                .rename(&req.source, &req.destination)
                .map_err(rpc_error)?;
            Ok(serde_json::json!({ "entry": entry(&info) }))
        }
        "CreateWatcher" => {
            let req: wire::WatchRequest = connect::decode_unary(body)?;
            let id = create_watcher(sbx, sandbox, req)?;
            Ok(serde_json::json!({ "watcherId": id }))
        }
        "GetWatcherEvents" => {
            let req: wire::WatcherRequest = connect::decode_unary(body)?;
            let w = lock(&sbx.watchers.map)
                .get(&req.watcher_id)
                .cloned()
                .ok_or_else(|| {
                    RpcError::not_found(format!("watcher {} not found", req.watcher_id))
                })?;
            let mut changes = Vec::new();
            {
                let mut watch = lock(&w.watch);
                watch.settle();
                while let Some(c) = watch.try_recv() {
                    changes.push(c);
                }
            }
            let events: Vec<FilesystemEvent> = changes
                .into_iter()
                .map(|c| event(sandbox, &w.root, c, w.include_entry))
                .collect();
            Ok(serde_json::json!({ "events": events }))
        }
        "RemoveWatcher" => {
            let req: wire::WatcherRequest = connect::decode_unary(body)?;
            lock(&sbx.watchers.map)
                .remove(&req.watcher_id)
                .ok_or_else(|| {
                    RpcError::not_found(format!("watcher {} not found", req.watcher_id))
                })?;
            Ok(serde_json::json!({}))
        }
        other => Err(RpcError::new(
            Code::Unimplemented,
            format!("filesystem.Filesystem/{other} is not a method of this service"),
        )),
    }
}

/// A change as envd's event, its name relative to the watched directory.
fn event(sandbox: &Sandbox, root: &str, c: Change, include_entry: bool) -> FilesystemEvent {
    let kind = match c.kind {
        ChangeKind::Create => "EVENT_TYPE_CREATE",
        ChangeKind::Write => "EVENT_TYPE_WRITE",
        ChangeKind::Remove => "EVENT_TYPE_REMOVE",
        ChangeKind::Rename => "EVENT_TYPE_RENAME",
        ChangeKind::Chmod => "EVENT_TYPE_CHMOD",
    };
    let entry = (include_entry && !matches!(c.kind, ChangeKind::Remove | ChangeKind::Rename))
        .then(|| {
            sandbox
                .stat(&format!("{}/{}", root.trim_end_matches('/'), c.name))
                .ok()
        })
        .flatten()
        .map(|i| entry(&i));
    FilesystemEvent {
        name: c.name,
        kind,
        entry,
    }
}

fn start_watch(sandbox: &Sandbox, req: &wire::WatchRequest) -> Result<(Watch, String), RpcError> {
    let info = sandbox.stat(&req.path).map_err(rpc_error)?;
    if info.kind != FileKind::Directory {
        return Err(RpcError::invalid(format!(
            "path {} is not a directory",
            req.path
        )));
    }
    let watch = sandbox
        .watch(&info.path, req.recursive)
        .map_err(rpc_error)?;
    Ok((watch, info.path))
}

fn create_watcher(
    sbx: &Sbx,
    sandbox: &Sandbox,
    req: wire::WatchRequest,
) -> Result<String, RpcError> {
    if lock(&sbx.watchers.map).len() >= MAX_WATCHERS {
        return Err(RpcError::new(
            Code::ResourceExhausted,
            format!("the sandbox has its most watchers ({MAX_WATCHERS}) already"),
        ));
    }
    let (watch, root) = start_watch(sandbox, &req)?;
    let id = crate::ids::hex::<8>();
    lock(&sbx.watchers.map).insert(
        id.clone(),
        Arc::new(Watcher {
            watch: Mutex::new(watch),
            root,
            include_entry: req.include_entry,
        }),
    );
    Ok(id)
}

/// `WatchDir`: a start event, then the directory's changes as they happen (keepalives
/// between), until the client leaves, the deadline passes or the directory or sandbox goes.
fn watch_stream(
    sbx: Arc<Sbx>,
    req: wire::WatchRequest,
    deadline: Option<Duration>,
    keepalive: Option<Duration>,
) -> Response {
    use std::sync::atomic::Ordering;
    let streams = sbx.watchers.streams.clone();
    if streams.fetch_add(1, Ordering::AcqRel) >= MAX_WATCHERS {
        streams.fetch_sub(1, Ordering::AcqRel);
        return connect::stream_error_response(&RpcError::new(
            Code::ResourceExhausted,
            format!("the sandbox has its most watch streams ({MAX_WATCHERS}) open already"),
        ));
    }
    let slot = StreamSlot(streams);
    let sandbox = sbx.session.sandbox().clone();
    let (mut watch, root) = match start_watch(&sandbox, &req) {
        Ok(w) => w,
        Err(e) => return connect::stream_error_response(&e),
    };
    let (tx, res) = connect::stream_response();
    tokio::spawn(async move {
        let _slot = slot;
        if !tx.send(&serde_json::json!({ "start": {} })).await {
            return;
        }
        let until = deadline.map(|d| tokio::time::Instant::now() + d);
        let tick = keepalive
            .unwrap_or(Duration::from_secs(1))
            .min(Duration::from_secs(1));
        let mut quiet = Duration::ZERO;
        loop {
            let expired = async {
                match until {
                    Some(u) => tokio::time::sleep_until(u).await,
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                change = watch.recv() => match change {
                    Some(c) => {
                        quiet = Duration::ZERO;
                        let ev = event(&sandbox, &root, c, req.include_entry);
                        if !tx.send(&serde_json::json!({ "filesystem": ev })).await {
                            return;
                        }
                    }
                    None => {
                        tx.finish(Some(RpcError::not_found("the watched directory is gone"))).await;
                        return;
                    }
                },
                () = tokio::time::sleep(tick) => {
                    if tx.is_closed() {
                        return;
                    }
                    if sbx.session.is_ended() {
                        tx.finish(Some(RpcError::new(Code::Unavailable, "the sandbox has ended"))).await;
                        return;
                    }
                    if watch.is_gone() {
                        tx.finish(Some(RpcError::not_found("the watched directory is gone"))).await;
                        return;
                    }
                    quiet += tick;
                    if keepalive.is_some_and(|k| quiet >= k) {
                        quiet = Duration::ZERO;
                        if !tx.send(&serde_json::json!({ "keepalive": {} })).await {
                            return;
                        }
                    }
                }
                () = expired => {
                    tx.finish(Some(RpcError::new(Code::DeadlineExceeded, "the watch's deadline passed"))).await;
                    return;
                }
            }
        }
    });
    res
}
