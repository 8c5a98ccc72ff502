//! What the worker API's handlers share: the node's configuration, its runtime, its job and
//! session tables and its concurrency limit, plus the request helpers every handler uses
//! (body limits, JSON decoding, the protocol's version and required-field checks).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use wasbox_runtime::sync::lock;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;
use tokio::sync::Semaphore;
use wasbox_runtime::{Admission, Runtime, Session, Sessions};

use super::config::{ADMISSION_WAIT, ServeConfig};
use super::job_table::JobTable;
use super::metrics::Metrics;
use super::telemetry::{self, Telemetry};
use crate::problem::Problem;

/// Everything the worker API handlers share.
pub struct Node {
    /// The configuration; what can change while the node runs is swapped on reload.
    config: RwLock<Arc<ServeConfig>>,
    pub runtime: Runtime,
    ready: AtomicBool,
    not_ready_reason: Mutex<String>,
    /// While the node has not yet registered with its orchestrator (when it has one) and
    /// applied its configuration: why not (worker_node.md: not ready before that).
    registration_pending: Mutex<Option<String>>,
    /// One permit per job or session exec running now.
    slots: Arc<Semaphore>,
    pub(super) jobs: Mutex<JobTable>,
    pub(super) sessions: Arc<Sessions>,
    /// Snapshots of sessions (under the state directory).
    pub(super) snapshots: Arc<super::snapshot_store::SnapshotStore>,
    /// The operator's templates (under the state directory).
    pub(crate) templates: Arc<crate::template::Templates>,
    /// Named volumes (under the state directory): see [`wasbox_runtime::volume`].
    pub(crate) volumes: Arc<wasbox_runtime::volume::Volumes>,
    shutting_down: AtomicBool,
    /// Draining before a shutdown: not ready, creates refused, sandboxes still served.
    draining: AtomicBool,
    /// The telemetry store (SQLite under the state directory) and its recorder.
    pub telemetry: Arc<Telemetry>,
    pub metrics: Metrics,
}

pub type SharedNode = Arc<Node>;

/// What a sandbox is made from (see [`source`]).
pub(super) enum Source {
    Image(String),
    Template(Box<wasbox_runtime::Snapshot>),
}

/// What a sandbox of the worker API's image reference is made from: a template of that name,
/// else the image the node's rules give it; refused when neither allows it. A template is
/// read from disk (its first use) on a blocking thread.
pub(super) async fn source(node: &SharedNode, reference: &str) -> Result<Source, Problem> {
    let config = node.config();
    if node.templates.exists(reference) {
        if !config.policy_allows(reference) {
            return Err(Problem::bad_request(format!(
                "image `{reference}` is not allowed on this node"
            )));
        }
        let (n, name) = (node.clone(), reference.to_string());
        let snapshot = tokio::task::spawn_blocking(move || n.templates.get(&n.runtime, &name))
            .await
            .map_err(|e| Problem::internal(&anyhow::anyhow!("reading a template: {e}")))?
            .map_err(|e| Problem::internal(&e))?;
        if let Some(s) = snapshot {
            return Ok(Source::Template(Box::new(s)));
        }
    }
    match config.image_for(reference) {
        Some(image) => Ok(Source::Image(image.to_string())),
        None => Err(Problem::bad_request(format!(
            "image `{reference}` is not allowed on this node"
        ))),
    }
}

impl Source {
    /// Where the workspace of a sandbox made from it is mounted.
    pub(super) fn mount(&self) -> &str {
        match self {
            Source::Image(_) => wasbox_runtime::DEFAULT_MOUNT,
            Source::Template(s) => &s.manifest().mount,
        }
    }
}

/// Opens the volumes a request names, for a sandbox whose workspace is at `mount`: a bad
/// path or an unknown volume is the client's error (400), one held by another process of
/// the node a conflict (409).
pub(crate) fn volume_mounts(
    volumes: &wasbox_runtime::volume::Volumes,
    specs: &[super::wire::VolumeSpec],
    mount: &str,
) -> Result<Vec<wasbox_runtime::volume::VolumeMount>, Problem> {
    use wasbox_runtime::volume::{VolumeError, VolumeMount, check_mounts};
    let paths = check_mounts(specs.iter().map(|v| v.path.as_str()), mount)
        .map_err(|e| Problem::bad_request(e.to_string()))?;
    specs
        .iter()
        .zip(paths)
        .map(|(spec, path)| {
            let volume = volumes.open(&spec.name).map_err(|e| match e {
                VolumeError::InUse(_) => Problem::conflict(e.to_string()),
                VolumeError::Io(_) => Problem::internal(&anyhow::anyhow!(e)),
                _ => Problem::bad_request(e.to_string()),
            })?;
            Ok(VolumeMount {
                volume,
                path,
                read_only: spec.read_only,
            })
        })
        .collect()
}

impl Node {
    /// A node on `runtime`; opens the telemetry store under the configured state directory.
    pub fn new(config: ServeConfig, runtime: Runtime) -> anyhow::Result<SharedNode> {
        let telemetry = Arc::new(Telemetry::open(
            &config.state_dir,
            &config.node_slug,
            config.retention,
        )?);
        let sessions = Arc::new(Sessions::new(config.max_sessions));
        let registration_pending = config
            .orchestrator
            .as_ref()
            .map(|o| format!("not yet registered with the orchestrator at {}", o.url));
        Ok(Arc::new(Node {
            slots: Arc::new(Semaphore::new(config.max_concurrent)),
            sessions,
            snapshots: Arc::new(super::snapshot_store::SnapshotStore::at(
                &config.state_dir,
                config.fleet.clone(),
            )),
            templates: Arc::new(crate::template::Templates::at(&config.state_dir)),
            volumes: Arc::new(wasbox_runtime::volume::Volumes::at(
                config.state_dir.join("volumes"),
                config.volumes.clone(),
            )?),
            config: RwLock::new(Arc::new(config)),
            runtime,
            ready: AtomicBool::new(false),
            not_ready_reason: Mutex::new("the sandbox image is still loading".into()),
            registration_pending: Mutex::new(registration_pending),
            jobs: Mutex::new(JobTable::with_stored(telemetry.store().result_ids()?)),
            shutting_down: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            telemetry,
            metrics: Metrics::new(),
        }))
    }

    /// A new sandbox of `source` with `config`'s limits, network and label (a template's
    /// own files, environment and mount point; `config`'s image unused).
    pub(super) fn make_sandbox(
        &self,
        source: &Source,
        config: wasbox_runtime::SandboxConfig,
    ) -> anyhow::Result<wasbox_runtime::Sandbox> {
        match source {
            Source::Image(image) => self.runtime.sandbox(config.image(image.clone())),
            Source::Template(snapshot) => {
                let sandbox =
                    self.runtime
                        .restore_with(snapshot, config.limits.clone(), config.volumes)?;
                sandbox.set_network(config.network);
                Ok(sandbox)
            }
        }
    }

    /// The configuration now.
    pub fn config(&self) -> Arc<ServeConfig> {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Takes what can change while the node runs from `new` (the token, image rules, job
    /// timeouts, the request size limit, the session limit, whether `/metrics` is public);
    /// returns the keys that changed but need a restart (their old values stay).
    pub fn reload(&self, new: ServeConfig) -> Vec<&'static str> {
        let old = self.config();
        let mut kept = Vec::new();
        let mut next = (*old).clone();
        // A token generated at start stays: a reload without a configured token must not
        // lock every client out with a new random one.
        if !new.token_generated {
            next.token = new.token;
            next.token_generated = false;
        }
        next.images = new.images;
        next.default_timeout_secs = new.default_timeout_secs;
        next.max_timeout_secs = new.max_timeout_secs;
        next.constraint_timeout_secs = new.constraint_timeout_secs;
        next.max_request_bytes = new.max_request_bytes;
        next.max_sessions = new.max_sessions;
        next.metrics_public = new.metrics_public;
        self.sessions.set_max(new.max_sessions);
        for (key, changed) in [
            ("worker_api.listen", new.listen != old.listen),
            (
                "worker_api.max_concurrent_jobs",
                new.max_concurrent != old.max_concurrent,
            ),
            (
                "worker_api.max_instances",
                new.max_instances != old.max_instances,
            ),
            (
                "worker_api.node_memory_mib",
                new.node_memory_mib != old.node_memory_mib,
            ),
            (
                "worker_api.max_connections",
                new.http.max_connections != old.http.max_connections,
            ),
            (
                "worker_api.header_timeout_seconds",
                new.http.header_timeout != old.http.header_timeout,
            ),
            (
                "worker_api.body_timeout_seconds",
                new.http.body_timeout != old.http.body_timeout,
            ),
            ("sandbox.network", new.egress != old.egress),
            ("storage.state_dir", new.state_dir != old.state_dir),
            ("storage.volumes", new.volumes != old.volumes),
            ("storage.cache_dir", new.cache_dir != old.cache_dir),
            ("node.id", new.node_slug != old.node_slug),
            ("fleet", new.fleet != old.fleet),
            ("orchestrator", new.orchestrator != old.orchestrator),
            ("telemetry.retention", new.retention != old.retention),
            ("logging", new.log != old.log),
        ] {
            if changed {
                kept.push(key);
            }
        }
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
        kept
    }

    /// What `/metrics` reports at this moment.
    pub fn metrics_text(&self) -> String {
        let ptys = self.sessions.all().iter().map(|s| s.pty_count()).sum();
        self.metrics.encode(super::metrics::Snapshot {
            sessions: self.sessions.len(),
            sessions_max: self.sessions.max(),
            ptys,
            jobs_running: lock(&self.jobs).running(),
            instances: self.runtime.instances_in_use(),
            instances_compact: self.runtime.unpooled_instances().1,
            memory: self.runtime.memory_in_use(),
            resident_bytes: telemetry::host::resident_bytes(),
            telemetry_dropped: self.telemetry.store().dropped(),
            egress: self.runtime.egress_stats(),
        })
    }

    /// Compiles or loads every program so that no job waits for the compiler, then
    /// reports ready.
    pub async fn prepare(&self) {
        match self.runtime.preload().await {
            Ok(()) => {
                if !self.draining.load(Ordering::Acquire) && !self.is_shutting_down() {
                    self.ready.store(true, Ordering::Release);
                }
                tracing::info!("node ready");
                // The templates are read after, not before, readiness.
                let (templates, runtime) = (self.templates.clone(), self.runtime.clone());
                tokio::task::spawn_blocking(move || templates.preload(&runtime));
                self.telemetry.service(
                    telemetry::WORKER_API,
                    "info",
                    "worker API ready: sandbox image loaded",
                    serde_json::json!({}),
                );
            }
            Err(e) => {
                tracing::error!(error = %format!("{e:#}"), "cannot load the sandbox image");
                self.telemetry.service(
                    telemetry::WORKER_API,
                    "error",
                    "the sandbox image failed to load",
                    serde_json::json!({ "error": format!("{e:#}") }),
                );
                *lock(&self.not_ready_reason) = "the sandbox image failed to load".into();
            }
        }
    }

    /// `None` when ready, else why not.
    pub fn not_ready(&self) -> Option<String> {
        if self.ready.load(Ordering::Acquire) {
            lock(&self.registration_pending).clone()
        } else {
            Some(lock(&self.not_ready_reason).clone())
        }
    }

    /// Records where registration with the orchestrator stands: `None` once registered with
    /// its configuration applied, else why not (shown by `/readyz`).
    pub fn set_registration(&self, pending: Option<String>) {
        *lock(&self.registration_pending) = pending;
    }

    /// Takes what the orchestrator's node configuration grants (replacing what an earlier
    /// one granted).
    pub fn grant(&self, granted: super::config::Granted) {
        let mut config = self.config.write().unwrap_or_else(|e| e.into_inner());
        let mut next = (**config).clone();
        next.granted = granted;
        *config = Arc::new(next);
    }

    /// The session table (its reaper runs beside the server).
    pub fn sessions(&self) -> &Arc<Sessions> {
        &self.sessions
    }

    /// Stops accepting work, stops every running job (when `stop_jobs`) and ends every
    /// session.
    /// Stops every running job and ends every session, and keeps serving (the
    /// orchestrator's stop-all when it shuts down). Returns how many of each.
    pub fn stop_all_work(&self, reason: &str) -> (usize, usize) {
        let jobs = lock(&self.jobs).stop_all();
        let sessions = self.sessions.len();
        self.sessions.end_all(reason);
        (jobs, sessions)
    }

    pub fn shut_down(&self, stop_jobs: bool) {
        self.shutting_down.store(true, Ordering::Release);
        self.ready.store(false, Ordering::Release);
        *lock(&self.not_ready_reason) = "the node is shutting down".into();
        if stop_jobs {
            lock(&self.jobs).stop_all();
        }
        self.sessions.end_all("node shutdown");
    }

    /// Begins a drain: `/readyz` fails and creates are refused (503), while everything
    /// asked of the sandboxes the node has goes on being served.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::Release);
        self.ready.store(false, Ordering::Release);
        *lock(&self.not_ready_reason) = "the node is draining".into();
    }

    /// Whether a new session, job or sandbox may be made here: not while the node drains
    /// or shuts down (503, so that a proxy tries another node).
    pub(crate) fn creating(&self) -> Result<(), Problem> {
        self.accepting()?;
        if self.draining.load(Ordering::Acquire) {
            return Err(Problem::unavailable("the node is draining").retry_after(1));
        }
        Ok(())
    }

    /// Whether the node has begun to shut down (new work is refused).
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    pub(super) fn accepting(&self) -> Result<(), Problem> {
        if self.shutting_down.load(Ordering::Acquire) {
            return Err(Problem::unavailable("the node is shutting down"));
        }
        Ok(())
    }

    /// A slot for one job or exec, or 429 when the node is at its concurrency limit.
    pub(super) fn slot(&self) -> Result<tokio::sync::OwnedSemaphorePermit, Problem> {
        self.slots.clone().try_acquire_owned().map_err(|_| {
            Problem::busy(format!(
                "the node is at its concurrency limit of {} running jobs",
                self.config().max_concurrent
            ))
            .retry_after(1)
        })
    }

    /// A place for a job's first process, waiting up to [`ADMISSION_WAIT`] for one, or 429
    /// with the reason (the node's live-process limit or its memory budget).
    pub(super) async fn admit(&self) -> Result<Admission, Problem> {
        self.runtime
            .admit(ADMISSION_WAIT)
            .await
            .map_err(|why| Problem::busy(why.to_string()).retry_after(1))
    }

    /// The session of this id, or 404.
    pub(super) fn session(&self, id: &str) -> Result<Arc<Session>, Problem> {
        self.sessions
            .get(id)
            .ok_or_else(|| Problem::not_found(format!("session `{id}` does not exist")))
    }
}

/// Reads a request body of at most `limit` bytes (413 beyond it).
pub(super) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Bytes, Problem> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(Problem::too_large(limit));
    }
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        if crate::http::is_body_timeout(&e) {
            return Problem::with_status(StatusCode::REQUEST_TIMEOUT, e.to_string());
        }
        let too_large = std::error::Error::source(&e)
            .is_some_and(|s| s.to_string().contains("length limit"))
            || e.to_string().contains("length limit");
        if too_large {
            Problem::too_large(limit)
        } else {
            Problem::bad_request(format!("cannot read the request body: {e}"))
        }
    })
}

/// Reads and parses a JSON request body (400 with the parser's reason when malformed).
pub(super) async fn read_json<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<T, Problem> {
    let bytes = read_body(headers, body, limit).await?;
    if bytes.is_empty() {
        return Err(Problem::bad_request("request body is empty"));
    }
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| Problem::bad_request(format!("invalid JSON: {e}")))?;
    // A NUL in a command argument, an environment variable or an id would be cut short
    // or dropped further down (C strings, environment blocks): refused at the edge.
    if let Some(path) = nul_in(&value, "") {
        return Err(Problem::bad_request(format!(
            "{path} contains a NUL character (\\u0000)"
        )));
    }
    serde_json::from_value(value).map_err(|e| Problem::bad_request(format!("invalid JSON: {e}")))
}

/// Where a string (or an object key) of `v` holds a NUL, as a path like `sandbox.env.A`.
fn nul_in(v: &serde_json::Value, at: &str) -> Option<String> {
    use serde_json::Value;
    let here = |k: &str| {
        if at.is_empty() {
            k.to_string()
        } else {
            format!("{at}.{k}")
        }
    };
    match v {
        Value::String(s) if s.contains('\0') => Some(if at.is_empty() {
            "a string".to_string()
        } else {
            at.to_string()
        }),
        Value::Array(items) => items.iter().enumerate().find_map(|(i, x)| {
            nul_in(
                x,
                &format!("{}[{i}]", if at.is_empty() { "body" } else { at }),
            )
        }),
        Value::Object(map) => map.iter().find_map(|(k, x)| {
            if k.contains('\0') {
                Some(format!(
                    "a field name in {}",
                    if at.is_empty() { "the body" } else { at }
                ))
            } else {
                nul_in(x, &here(k))
            }
        }),
        _ => None,
    }
}

/// `version` must be 1 (worker-api-node.md, "Versioning").
pub(super) fn check_version(v: Option<i64>) -> Result<(), Problem> {
    match v {
        Some(1) => Ok(()),
        None => Err(Problem::bad_request("version is required")),
        Some(_) => Err(Problem::bad_request("version must be 1")),
    }
}

/// An id a client may choose (a session's), or one made here when it did not (beginning
/// with the node's name in a fleet). In a fleet a chosen id must route to this node: else
/// 421, for the proxy would send the id's later requests elsewhere.
pub(super) fn chosen_id(node: &Node, field: &str, v: &Option<String>) -> Result<String, Problem> {
    match v.as_deref().filter(|s| !s.trim().is_empty()) {
        None => Ok(node.config().fleet.own(&crate::ids::uuid_v4())),
        Some(id) => {
            routes_here(node, field, id)?;
            Ok(id.to_string())
        }
    }
}

/// In a fleet, an id a client chose must begin with this node's name and `-` (421 else).
pub(super) fn routes_here(node: &Node, field: &str, id: &str) -> Result<(), Problem> {
    let config = node.config();
    if config.fleet.owns(id) {
        return Ok(());
    }
    Err(Problem::with_status(
        axum::http::StatusCode::MISDIRECTED_REQUEST,
        format!(
            "{field} `{id}` does not route to this node: in a fleet an id a client chooses \
             begins with the node's name and `-` (`{}`)",
            config.fleet.own("...")
        ),
    ))
}

pub(super) fn required<'a>(field: &str, v: &'a Option<String>) -> Result<&'a str, Problem> {
    match v.as_deref() {
        Some(s) if !s.trim().is_empty() => Ok(s),
        _ => Err(Problem::bad_request(format!("{field} is required"))),
    }
}

/// A JSON answer, or the problem.
pub(super) fn respond<T: serde::Serialize>(r: Result<T, Problem>) -> axum::response::Response {
    use axum::response::IntoResponse;
    match r {
        Ok(v) => axum::Json(v).into_response(),
        Err(p) => p.into_response(),
    }
}
