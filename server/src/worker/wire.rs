//! Wire types of the worker API shared by jobs and session execs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use wasbox_runtime::{JobOutput, JobStatus, NetworkPolicy};

use crate::problem::Problem;
use crate::rfc3339;

/// `sandbox` of a job request. Unknown fields are ignored.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub struct SandboxSpec {
    /// The image reference: the name of one of the node's templates (`wasbox template
    /// build`), else mapped to a wasbox image by the node's rules.
    pub image: Option<String>,
    /// argv form; must not be empty.
    pub command: Option<Vec<String>>,
    pub env: Option<BTreeMap<String, String>>,
    pub timeout_seconds: Option<i64>,
    pub network_policy: Option<String>,
    /// Volumes to attach (at most 8; see `/v1/worker/volumes`).
    pub volumes: Option<Vec<VolumeSpec>>,
}

/// A volume to attach, as a request names it (the worker API's `sandbox.volumes`).
#[derive(Deserialize, Serialize, utoipa::ToSchema, Clone)]
pub struct VolumeSpec {
    /// The volume's name (`POST /v1/worker/volumes`).
    pub name: String,
    /// Where it appears inside the sandbox: an absolute path, not in the system's
    /// directories, not the workspace itself or above it.
    pub path: String,
    /// Attached read-only: every change is refused with `EROFS`.
    #[serde(default)]
    pub read_only: bool,
}

/// Reads `sandbox.network_policy`: the spec's `none` and `restricted` (and no value) are no
/// network at all; `allow:RULES` lets the sandbox reach what the comma-separated rules
/// name (`allow:pypi.org,*.pythonhosted.org:443`, the syntax of `--allow-net`), within
/// what the node allows.
pub fn network_policy(p: &Option<String>) -> Result<NetworkPolicy, Problem> {
    match p.as_deref().map(str::trim) {
        None | Some("none") | Some("restricted") => Ok(NetworkPolicy::None),
        Some(text) => match text.strip_prefix("allow:") {
            Some(rules) => {
                let rules = wasbox_runtime::net::parse_rules(&[rules])
                    .map_err(|e| Problem::bad_request(format!("sandbox.network_policy: {e}")))?;
                Ok(NetworkPolicy::allow_only(rules))
            }
            None => Err(Problem::bad_request(format!(
                "sandbox.network_policy must be `restricted`, `none` or `allow:RULES` (got `{text}`)"
            ))),
        },
    }
}

pub fn check_timeout(t: Option<i64>, field: &str) -> Result<Option<u64>, Problem> {
    match t {
        None => Ok(None),
        Some(n) if n > 0 => Ok(Some(n as u64)),
        Some(_) => Err(Problem::bad_request(format!(
            "{field} must be a positive integer"
        ))),
    }
}

/// Variables the node sets itself; a request cannot override them.
pub const RESERVED_ENV: &[&str] = &["CYNODE_TASK_ID", "CYNODE_JOB_ID", "CYNODE_WORKSPACE_DIR"];

/// The answer of `jobs:run`.
#[derive(Serialize, Clone, Debug, utoipa::ToSchema)]
pub struct RunResponse {
    pub version: u32,
    pub task_id: String,
    pub job_id: String,
    #[serde(flatten)]
    pub result: ResultWire,
    /// This answer's JSON once written: the store keeps the same text the client gets.
    #[serde(skip)]
    pub json: std::sync::OnceLock<String>,
}

impl RunResponse {
    /// The JSON of this answer, written once.
    pub fn json(&self) -> &str {
        self.json
            .get_or_init(|| serde_json::to_string(self).unwrap_or_default())
    }

    /// The answer as an HTTP response (200, `application/json`).
    pub fn response(&self) -> axum::response::Response {
        use axum::response::IntoResponse as _;
        (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            self.json().to_string(),
        )
            .into_response()
    }

    /// A result as the telemetry store keeps it (the JSON of this type).
    pub fn from_json(text: &str) -> Option<RunResponse> {
        #[derive(Deserialize)]
        struct Stored {
            task_id: String,
            job_id: String,
            status: String,
            exit_code: i32,
            stdout: String,
            stderr: String,
            started_at: String,
            ended_at: String,
            truncated: StoredTruncated,
        }
        #[derive(Deserialize)]
        struct StoredTruncated {
            stdout: bool,
            stderr: bool,
        }
        let s: Stored = serde_json::from_str(text).ok()?;
        let status = match s.status.as_str() {
            "completed" => "completed",
            "failed" => "failed",
            "timeout" => "timeout",
            _ => return None,
        };
        Some(RunResponse {
            version: 1,
            task_id: s.task_id,
            job_id: s.job_id,
            result: ResultWire {
                status,
                exit_code: s.exit_code,
                stdout: s.stdout,
                stderr: s.stderr,
                started_at: s.started_at,
                ended_at: s.ended_at,
                truncated: TruncatedWire {
                    stdout: s.truncated.stdout,
                    stderr: s.truncated.stderr,
                },
            },
            json: Default::default(),
        })
    }
}

#[derive(Serialize, Clone, Debug, utoipa::ToSchema)]
pub struct TruncatedWire {
    pub stdout: bool,
    pub stderr: bool,
}

/// The result fields common to a job and a session exec.
#[derive(Serialize, Clone, Debug, utoipa::ToSchema)]
pub struct ResultWire {
    /// `completed`, `failed` or `timeout`.
    #[schema(value_type = FinalState)]
    pub status: &'static str,
    /// The real exit code; -1 on timeout (COMPAT-NOTES, worker section).
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    pub started_at: String,
    pub ended_at: String,
    pub truncated: TruncatedWire,
}

/// The final states of a job or exec (for the OpenAPI document).
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
pub enum FinalState {
    Completed,
    Failed,
    Timeout,
}

impl From<&JobOutput> for ResultWire {
    fn from(o: &JobOutput) -> Self {
        ResultWire {
            status: o.status.as_str(),
            exit_code: if o.status == JobStatus::Timeout {
                -1
            } else {
                o.exit_code
            },
            stdout: o.stdout.clone(),
            stderr: o.stderr.clone(),
            started_at: rfc3339::format(o.started_at),
            ended_at: rfc3339::format(o.ended_at),
            truncated: TruncatedWire {
                stdout: o.truncated.stdout,
                stderr: o.truncated.stderr,
            },
        }
    }
}
