//! The node's telemetry (CyNodeAI's `worker_telemetry_api.md`): who the node is, its
//! services' lifecycle logs, and an inventory of its sandboxes with their lifecycle events
//! and output, kept in SQLite under the state directory ([`store`]) with the spec's
//! retention. wasbox has no container engine: a job or a session sandbox is what the spec
//! calls a sandbox container, and the runtime it reports is `wasbox`.

pub mod host;
pub mod store;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::Result;
use serde_json::{Map, Value, json};

pub use store::{Boot, ContainerRow, EventRow, LogRow, Retention, Store};

use crate::rfc3339;

/// What `container_runtime.runtime` and each sandbox's `runtime` say.
pub const RUNTIME: &str = "wasbox";
/// The node's two services in the spec's words: the process (its start and shutdown) and
/// its HTTP API.
pub const NODE_MANAGER: &str = "node_manager";
pub const WORKER_API: &str = "worker_api";
/// Output rows kept per stream of one job or exec, and bytes.
const OUTPUT_ROWS: usize = 256;
const OUTPUT_BYTES: usize = 64 << 10;

/// The build version reported in `node:info`: `WASBOX_BUILD_VERSION` at build time, else
/// the crate's version.
pub fn build_version() -> &'static str {
    option_env!("WASBOX_BUILD_VERSION").unwrap_or(env!("CARGO_PKG_VERSION"))
}

/// One sandbox as the inventory knows it.
#[derive(Clone, Debug)]
pub struct Sandbox {
    pub container_id: String,
    pub kind_label: &'static str,
    pub image_ref: String,
    pub created_at: SystemTime,
    pub task_id: Option<String>,
    pub job_id: Option<String>,
}

impl Sandbox {
    pub fn job(job_id: &str, task_id: &str, image_ref: &str) -> Sandbox {
        Sandbox {
            container_id: format!("job-{job_id}"),
            kind_label: "job",
            image_ref: image_ref.into(),
            created_at: SystemTime::now(),
            task_id: Some(task_id.into()),
            job_id: Some(job_id.into()),
        }
    }

    pub fn session(
        session_id: &str,
        task_id: &str,
        image_ref: &str,
        created: SystemTime,
    ) -> Sandbox {
        Sandbox {
            container_id: format!("session-{session_id}"),
            kind_label: "session",
            image_ref: image_ref.into(),
            created_at: created,
            task_id: (!task_id.is_empty()).then(|| task_id.into()),
            job_id: None,
        }
    }

    fn row(&self, status: &str, exit_code: Option<i64>) -> ContainerRow {
        let mut labels = Map::new();
        labels.insert("wasbox.kind".into(), Value::String(self.kind_label.into()));
        ContainerRow {
            container_id: self.container_id.clone(),
            container_name: format!("wasbox-{}", self.container_id),
            kind: "sandbox".into(),
            runtime: RUNTIME.into(),
            image_ref: self.image_ref.clone(),
            created_at: rfc3339::format(self.created_at),
            last_seen_at: rfc3339::format(SystemTime::now()),
            status: status.into(),
            exit_code,
            task_id: self.task_id.clone(),
            job_id: self.job_id.clone(),
            labels,
        }
    }
}

/// The recorder every front-end of the node writes through.
pub struct Telemetry {
    store: Store,
    boot: Boot,
    state_dir: PathBuf,
}

impl Telemetry {
    /// Opens the store under `state_dir` and records this boot.
    pub fn open(state_dir: &Path, node_slug: &str, retention: Retention) -> Result<Telemetry> {
        let boot = Boot {
            boot_id: crate::ids::uuid_v4(),
            booted_at: rfc3339::format(SystemTime::now()),
            node_slug: node_slug.into(),
            build_version: build_version().into(),
            os: std::env::consts::OS.into(),
            arch: std::env::consts::ARCH.into(),
            kernel_version: host::kernel_version(),
        };
        let store = Store::open(state_dir, &boot, retention)?;
        Ok(Telemetry {
            store,
            boot,
            state_dir: state_dir.to_path_buf(),
        })
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn boot(&self) -> &Boot {
        &self.boot
    }

    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// A lifecycle log line of one of the node's services.
    pub fn service(&self, source_name: &str, level: &'static str, message: &str, fields: Value) {
        self.store.log(LogRow {
            occurred_at: rfc3339::format(SystemTime::now()),
            source_kind: "service".into(),
            source_name: source_name.into(),
            container_id: None,
            // The spec's sentinel for service-origin rows.
            stream: Some("stdout".into()),
            level: Some(level.into()),
            message: message.into(),
            fields,
        });
    }

    fn event(
        &self,
        s: &Sandbox,
        action: &'static str,
        status: &'static str,
        code: Option<i64>,
        details: Value,
    ) {
        self.store.event(EventRow {
            occurred_at: rfc3339::format(SystemTime::now()),
            container_id: s.container_id.clone(),
            action: action.into(),
            status: status.into(),
            exit_code: code,
            task_id: s.task_id.clone(),
            job_id: s.job_id.clone(),
            details,
        });
    }

    /// A sandbox was made and its first process started.
    pub fn started(&self, s: &Sandbox) {
        self.store.container(s.row("running", None));
        // Made and started at once: one event says both.
        self.event(s, "start", "running", None, json!({ "created": true }));
    }

    /// A sandbox stopped (a job ended, a session ended) with `reason`.
    pub fn stopped(&self, s: &Sandbox, exit_code: Option<i64>, reason: &str) {
        self.store.container(s.row("exited", exit_code));
        self.event(s, "stop", "exited", exit_code, json!({ "reason": reason }));
    }

    /// A session sandbox was used (an exec, a file, a PTY): its `last_seen_at`.
    pub fn seen(&self, s: &Sandbox) {
        self.store.container(s.row("running", None));
    }

    /// The captured output of a job or exec in the sandbox `s`, one row per line (up to a
    /// bound; the last row says what was left out).
    pub fn output(&self, s: &Sandbox, stream: &'static str, text: &str) {
        if text.is_empty() {
            return;
        }
        let now = rfc3339::format(SystemTime::now());
        let mut fields = Map::new();
        if let Some(t) = &s.task_id {
            fields.insert("task_id".into(), Value::String(t.clone()));
        }
        if let Some(j) = &s.job_id {
            fields.insert("job_id".into(), Value::String(j.clone()));
        }
        let row = |message: String, fields: Map<String, Value>| LogRow {
            occurred_at: now.clone(),
            source_kind: "container".into(),
            source_name: format!("wasbox-{}", s.container_id),
            container_id: Some(s.container_id.clone()),
            stream: Some(stream.into()),
            level: None,
            message,
            fields: Value::Object(fields),
        };
        let (mut rows, mut bytes) = (0, 0);
        for line in text.lines() {
            if rows == OUTPUT_ROWS || bytes + line.len() > OUTPUT_BYTES {
                let mut f = fields.clone();
                f.insert("truncated".into(), Value::Bool(true));
                let left = text.len().saturating_sub(bytes);
                self.store
                    .log(row(format!("[{left} more bytes of output not kept]"), f));
                return;
            }
            let mut message = line.to_string();
            if message.len() > store::MAX_MESSAGE_BYTES {
                let mut cut = store::MAX_MESSAGE_BYTES;
                while !message.is_char_boundary(cut) {
                    cut -= 1;
                }
                message.truncate(cut);
            }
            bytes += line.len() + 1;
            rows += 1;
            self.store.log(row(message, fields.clone()));
        }
    }
}
