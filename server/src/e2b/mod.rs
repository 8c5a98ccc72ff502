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

mod auth;
mod connect;
mod control;
mod envd;
mod files;
mod fs;
mod interpreter;
mod lifecycle;
mod network;
mod process;
mod snapshots;
mod volumes;
mod wire;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::http::StatusCode;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use wasbox_runtime::Session;
use wasbox_runtime::sync::lock;

use crate::worker::SharedNode;

/// The envd version wasbox reports: the newest whose features it implements (so the SDK
/// itself refuses newer ones, such as file metadata in extended attributes, 0.6.2).
pub const ENVD_VERSION: &str = "0.6.4";
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
    /// Snapshots taken with E2B's snapshot API, by id.
    snapshots: Mutex<HashMap<String, Arc<snapshots::Kept>>>,
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
    /// Where it may connect once resumed.
    network: wasbox_runtime::NetworkPolicy,
    /// Its boot id, kept when the pause kept its state (memory mode); a filesystem-only
    /// pause resumes with a new one, as a cold boot does.
    boot_id: Option<String>,
    /// What its timeout does once resumed.
    on_timeout: OnTimeout,
    memory_mb: u64,
    disk_size_mb: u64,
    /// Its template's start command, started again when it resumes.
    start_command: Option<String>,
    /// The volumes it had attached, attached again when it resumes (a paused sandbox keeps
    /// them open: they cannot be deleted meanwhile).
    volumes: Vec<wasbox_runtime::volume::VolumeMount>,
}

/// Sandboxes a node keeps paused at most.
const MAX_PAUSED: usize = 256;

impl Paused {
    /// `sbx` paused with `snapshot` of its files; `memory`: as a pause that keeps its
    /// running state (its boot id stays).
    fn of(sbx: &Sbx, snapshot: wasbox_runtime::Snapshot, memory: bool) -> Paused {
        let sandbox = sbx.session.sandbox();
        let limits = sandbox.limits();
        Paused {
            template: sbx.template.clone(),
            token: sbx.token.clone(),
            env: sbx.session.env().to_vec(),
            metadata: sbx.metadata.clone(),
            started_at: sbx.started_at,
            snapshot,
            network: sandbox.network(),
            boot_id: memory.then(|| sandbox.boot_id()),
            on_timeout: sbx.on_timeout,
            memory_mb: (limits.sandbox_memory_bytes / (1 << 20)) as u64,
            disk_size_mb: limits.disk_bytes / (1 << 20),
            start_command: sbx
                .session
                .label(crate::template::LABEL_START)
                .map(str::to_string),
            volumes: sandbox.volumes(),
        }
    }

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
            allow_internet_access: network::describe(&self.network).0,
            network: network::describe(&self.network).1,
            volume_mounts: volumes::described(&self.volumes),
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
    /// Code contexts of E2B's code interpreter.
    contexts: interpreter::Contexts,
    /// What its timeout does: pause it (with its state, or its files only), or end it.
    on_timeout: OnTimeout,
    /// Tries so far to pause it after its timeout (while its processes wind down).
    pause_tries: std::sync::atomic::AtomicU32,
}

/// What a sandbox's timeout does (`autoPause`, `autoPauseMemory` on create).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum OnTimeout {
    #[default]
    Kill,
    /// Pause; `memory`: as a pause that keeps the running state (its boot id stays).
    Pause { memory: bool },
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
            allow_internet_access: network::describe(&self.session.sandbox().network()).0,
            network: network::describe(&self.session.sandbox().network()).1,
            volume_mounts: volumes::described(&self.session.sandbox().volumes()),
        }
    }

    fn created(&self) -> wire::SandboxWire {
        wire::SandboxWire {
            template_id: self.template.clone(),
            sandbox_id: self.id.clone(),
            client_id: CLIENT_ID.into(),
            envd_version: ENVD_VERSION,
            envd_access_token: self.token.clone(),
            traffic_access_token: self.token.clone(),
            domain: None,
        }
    }

    fn alive(&self) -> bool {
        !self.session.is_ended()
    }

    /// Ended by its timeout with a pause to make.
    fn pausing(&self) -> bool {
        self.session.is_ended()
            && matches!(self.on_timeout, OnTimeout::Pause { .. })
            && self.session.expires_at() <= SystemTime::now()
            && self.pause_tries.load(std::sync::atomic::Ordering::Relaxed) < lifecycle::PAUSE_TRIES
    }
}

const CLIENT_ID: &str = "wasbox";

impl E2b {
    pub fn new(node: SharedNode) -> SharedE2b {
        Arc::new(E2b {
            node,
            sandboxes: Mutex::new(HashMap::new()),
            paused: Mutex::new(HashMap::new()),
            snapshots: Mutex::new(HashMap::new()),
        })
    }

    /// A paused sandbox by id.
    pub(crate) fn paused(&self, id: &str) -> Option<Arc<Paused>> {
        lock(&self.paused).get(id).cloned()
    }

    /// A live sandbox by id; a sandbox whose session has ended is forgotten here.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Sbx>> {
        let mut all = lock(&self.sandboxes);
        match all.get(id) {
            Some(s) if s.alive() => Some(s.clone()),
            Some(s) => {
                let s = s.clone();
                if !self.settle(&s) {
                    all.remove(id);
                }
                None
            }
            None => None,
        }
    }

    /// A sandbox whose session ended: paused when its timeout ended it and it was made to
    /// pause then (see `lifecycle::auto_pause`). Returns whether it is to be tried again
    /// (its processes are still winding down).
    fn settle(&self, s: &Arc<Sbx>) -> bool {
        if !s.pausing() {
            return false;
        }
        lifecycle::auto_pause(self, s)
    }

    pub(crate) fn live(&self) -> Vec<Arc<Sbx>> {
        let mut all = lock(&self.sandboxes);
        let ended: Vec<Arc<Sbx>> = all.values().filter(|s| !s.alive()).cloned().collect();
        for s in ended {
            if !self.settle(&s) {
                all.remove(&s.id);
            }
        }
        all.retain(|_, s| s.alive() || s.pausing());
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
    use control::{
        connect_sandbox, create, info, kill, list, metrics, refresh, set_timeout, update_network,
    };
    use lifecycle::{fork, pause, resume};
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
        .route("/sandboxes/{id}/snapshots", post(snapshots::create))
        .route("/snapshots", get(snapshots::list))
        .route("/templates/{id}", axum::routing::delete(snapshots::delete))
        .route("/sandboxes/{id}/fork", post(fork))
        .route(
            "/sandboxes/{id}/network",
            axum::routing::put(update_network),
        )
        .route("/volumes", post(volumes::create).get(volumes::list))
        .route("/volumes/{id}", get(volumes::info).delete(volumes::destroy))
        .route_layer(middleware::from_fn_with_state(e2b.clone(), auth::api_key));
    // The volume content API: each volume's own token, checked by its handlers.
    let content = Router::new()
        .route(
            "/volumecontent/{id}/path",
            get(volumes::get_path)
                .patch(volumes::patch_path)
                .delete(volumes::delete_path),
        )
        .route(
            "/volumecontent/{id}/dir",
            get(volumes::get_dir).post(volumes::post_dir),
        )
        .route(
            "/volumecontent/{id}/file",
            get(volumes::get_file).put(volumes::put_file),
        );
    let envd =
        Router::new()
            .route("/health", get(envd::health))
            .route(
                "/files",
                get(files::download).post(files::upload).layer(
                    axum::extract::DefaultBodyLimit::max(files::MAX_FILE_BYTES + (1 << 20)),
                ),
            )
            .route("/process.Process/{method}", post(process::call))
            .route("/filesystem.Filesystem/{method}", post(fs::call))
            // The code interpreter (the SDK's port 49999).
            .route("/execute", post(interpreter::execute))
            .route(
                "/contexts",
                post(interpreter::create).get(interpreter::list),
            )
            .route("/contexts/{id}", axum::routing::delete(interpreter::remove))
            .route("/contexts/{id}/restart", post(interpreter::restart));
    let node = e2b.node.clone();
    crate::worker::observed(control.merge(content).merge(envd).with_state(e2b), node)
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

pub use auth::api_key_for;
