//! The Worker Telemetry API (CyNodeAI's `worker_telemetry_api.md`, V1) over the node's
//! telemetry store: `node:info`, `node:stats`, `containers`, `containers/{id}` and `logs`,
//! with the spec's filters, limits, page tokens and response caps (1 MiB for logs, 2 MiB
//! otherwise). `container_runtime.runtime` is `wasbox`, not a container engine wasbox is not.

use std::collections::HashMap;
use std::time::SystemTime;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rusqlite::types::Value as Sql;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::node::SharedNode;
use super::telemetry::{self, ContainerRow, host};
use crate::problem::Problem;
use crate::rfc3339;

/// The logs endpoint's response cap, and everything else's.
pub const LOGS_MAX_BYTES: usize = 1 << 20;
pub const MAX_BYTES: usize = 2 << 20;

type Params = Query<HashMap<String, String>>;

fn internal(e: anyhow::Error) -> Problem {
    Problem::internal(&e)
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct NodeInfo {
    version: u32,
    node_slug: String,
    build: Build,
    platform: Platform,
    /// This boot of the node (wasbox's addition).
    boot: BootWire,
}

#[derive(Serialize, utoipa::ToSchema)]
struct Build {
    build_version: String,
}

#[derive(Serialize, utoipa::ToSchema)]
struct Platform {
    os: String,
    arch: String,
    kernel_version: String,
}

#[derive(Serialize, utoipa::ToSchema)]
struct BootWire {
    boot_id: String,
    booted_at: String,
}

#[utoipa::path(get, path = "/v1/worker/telemetry/node:info", tag = "telemetry", security(("bearer" = [])),
    responses((status = 200, description = "Who the node is", body = NodeInfo), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn node_info(State(node): State<SharedNode>) -> Response {
    let b = node.telemetry.boot();
    Json(NodeInfo {
        version: 1,
        node_slug: b.node_slug.clone(),
        build: Build {
            build_version: b.build_version.clone(),
        },
        platform: Platform {
            os: b.os.clone(),
            arch: b.arch.clone(),
            kernel_version: b.kernel_version.clone(),
        },
        boot: BootWire {
            boot_id: b.boot_id.clone(),
            booted_at: b.booted_at.clone(),
        },
    })
    .into_response()
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct NodeStats {
    version: u32,
    captured_at: String,
    cpu: Cpu,
    memory: Memory,
    disk: Disk,
    /// Always `wasbox` and its version: wasbox is no container engine.
    container_runtime: ContainerRuntime,
    /// Live sandboxes against the node's limits (wasbox's addition).
    sandboxes: Sandboxes,
}

#[derive(Serialize, utoipa::ToSchema)]
struct Cpu {
    cores: usize,
    load1: f64,
    load5: f64,
    load15: f64,
}

#[derive(Serialize, utoipa::ToSchema)]
struct Memory {
    total_mb: u64,
    used_mb: u64,
    free_mb: u64,
}

#[derive(Serialize, utoipa::ToSchema)]
struct Disk {
    state_dir_free_mb: u64,
    state_dir_total_mb: u64,
}

#[derive(Serialize, utoipa::ToSchema)]
struct ContainerRuntime {
    runtime: String,
    version: String,
}

#[derive(Serialize, utoipa::ToSchema)]
struct Sandboxes {
    sessions: usize,
    max_sessions: usize,
    instances_in_use: usize,
    max_instances: usize,
}

#[utoipa::path(get, path = "/v1/worker/telemetry/node:stats", tag = "telemetry", security(("bearer" = [])),
    responses((status = 200, description = "The node's load now", body = NodeStats), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn node_stats(State(node): State<SharedNode>) -> Response {
    let (load1, load5, load15) = host::load();
    let (total, available) = host::memory_mb();
    let (disk_free, disk_total) = host::disk_mb(node.telemetry.state_dir());
    let (instances, max_instances) = node.runtime.instances_in_use();
    Json(NodeStats {
        version: 1,
        captured_at: rfc3339::format(SystemTime::now()),
        cpu: Cpu {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            load1,
            load5,
            load15,
        },
        memory: Memory {
            total_mb: total,
            used_mb: total.saturating_sub(available),
            free_mb: available,
        },
        disk: Disk {
            state_dir_free_mb: disk_free,
            state_dir_total_mb: disk_total,
        },
        container_runtime: ContainerRuntime {
            runtime: telemetry::RUNTIME.into(),
            version: telemetry::build_version().into(),
        },
        sandboxes: Sandboxes {
            sessions: node.sessions().len(),
            max_sessions: node.sessions().max(),
            instances_in_use: instances,
            max_instances,
        },
    })
    .into_response()
}

/// A page token: the row after which the next page starts, opaque to the client.
fn token(kind: char, rowid: i64) -> String {
    URL_SAFE_NO_PAD.encode(format!("{kind}{rowid}"))
}

fn after(kind: char, q: &HashMap<String, String>) -> Result<i64, Problem> {
    let Some(t) = q.get("page_token").filter(|t| !t.is_empty()) else {
        return Ok(0);
    };
    URL_SAFE_NO_PAD
        .decode(t)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.strip_prefix(kind).and_then(|n| n.parse().ok()))
        .ok_or_else(|| Problem::bad_request("page_token is not a token this endpoint gave"))
}

fn limit(q: &HashMap<String, String>, default: usize, max: usize) -> Result<usize, Problem> {
    match q.get("limit") {
        None => Ok(default),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n.min(max)),
            _ => Err(Problem::bad_request(format!(
                "limit must be an integer from 1 to {max}"
            ))),
        },
    }
}

fn container_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, ContainerRow)> {
    let labels: String = r.get(12)?;
    let labels = match serde_json::from_str(&labels) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    Ok((
        r.get(0)?,
        ContainerRow {
            container_id: r.get(1)?,
            container_name: r.get(2)?,
            kind: r.get(3)?,
            runtime: r.get(4)?,
            image_ref: r.get(5)?,
            created_at: r.get(6)?,
            last_seen_at: r.get(7)?,
            status: r.get(8)?,
            exit_code: r.get(9)?,
            task_id: r.get(10)?,
            job_id: r.get(11)?,
            labels,
        },
    ))
}

const CONTAINER_COLUMNS: &str = "rowid, container_id, container_name, kind, runtime, image_ref, \
     created_at, last_seen_at, status, exit_code, task_id, job_id, labels_json";

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct ContainersWire {
    version: u32,
    containers: Vec<ContainerRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_page_token: Option<String>,
}

#[utoipa::path(get, path = "/v1/worker/telemetry/containers", tag = "telemetry", security(("bearer" = [])),
    params(
        ("kind" = Option<String>, Query, description = "`managed` or `sandbox`"),
        ("status" = Option<String>, Query, description = "e.g. `running`, `exited`"),
        ("task_id" = Option<String>, Query),
        ("job_id" = Option<String>, Query),
        ("limit" = Option<u32>, Query, description = "1 to 1000, default 100"),
        ("page_token" = Option<String>, Query)),
    responses((status = 200, description = "Sandboxes, oldest first", body = ContainersWire), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn containers(State(node): State<SharedNode>, Query(q): Params) -> Response {
    // Everything recorded before this request is in its answer.
    node.telemetry.store().flush().await;
    let result = (|| {
        let limit = limit(&q, 100, 1000)?;
        let mut sql =
            format!("SELECT {CONTAINER_COLUMNS} FROM container_inventory WHERE rowid > ?");
        let mut args = vec![Sql::Integer(after('c', &q)?)];
        for key in ["kind", "status", "task_id", "job_id"] {
            if let Some(v) = q.get(key).filter(|v| !v.is_empty()) {
                if key == "kind" && !matches!(v.as_str(), "managed" | "sandbox") {
                    return Err(Problem::bad_request("kind must be `managed` or `sandbox`"));
                }
                sql.push_str(&format!(" AND {key} = ?"));
                args.push(Sql::Text(v.clone()));
            }
        }
        sql.push_str(&format!(" ORDER BY rowid LIMIT {}", limit + 1));
        let rows = node
            .telemetry
            .store()
            .read(|c| {
                c.prepare(&sql)?
                    .query_map(rusqlite::params_from_iter(args), container_of)?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(internal)?;
        let mut out = ContainersWire {
            version: 1,
            containers: Vec::new(),
            next_page_token: None,
        };
        let (mut bytes, mut last) = (64, 0);
        let more = rows.len() > limit;
        for (rowid, c) in rows.into_iter().take(limit) {
            let size = serde_json::to_vec(&c).map_or(0, |v| v.len()) + 1;
            if bytes + size > MAX_BYTES {
                out.next_page_token = Some(token('c', last));
                return Ok(out);
            }
            bytes += size;
            last = rowid;
            out.containers.push(c);
        }
        if more {
            out.next_page_token = Some(token('c', last));
        }
        Ok(out)
    })();
    match result {
        Ok(v) => Json(v).into_response(),
        Err(p) => p.into_response(),
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct ContainerWire {
    version: u32,
    container: ContainerRow,
}

#[utoipa::path(get, path = "/v1/worker/telemetry/containers/{id}", tag = "telemetry", security(("bearer" = [])),
    params(("id" = String, Path, description = "`job-{job_id}` or `session-{session_id}`")),
    responses((status = 200, description = "One sandbox", body = ContainerWire), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn container(State(node): State<SharedNode>, Path(id): Path<String>) -> Response {
    // Everything recorded before this request is in its answer.
    node.telemetry.store().flush().await;
    let sql =
        format!("SELECT {CONTAINER_COLUMNS} FROM container_inventory WHERE container_id = ?1");
    let row = node.telemetry.store().read(|c| {
        use rusqlite::OptionalExtension;
        c.query_row(&sql, [&id], container_of).optional()
    });
    match row {
        Ok(Some((_, c))) => Json(ContainerWire {
            version: 1,
            container: c,
        })
        .into_response(),
        Ok(None) => Problem::not_found(format!("container `{id}` is not known on this node"))
            .into_response(),
        Err(e) => internal(e).into_response(),
    }
}

#[derive(Serialize, utoipa::ToSchema)]
struct LogEventWire {
    occurred_at: String,
    source_kind: String,
    source_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    container_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    level: Option<String>,
    message: String,
    #[schema(value_type = Object)]
    fields: Value,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct LogsWire {
    version: u32,
    events: Vec<LogEventWire>,
    truncated: TruncatedWire,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_page_token: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = LogsTruncated)]
struct TruncatedWire {
    /// `count`, `bytes` or `none`.
    #[schema(value_type = String)]
    limited_by: &'static str,
    max_bytes: usize,
}

fn time_filter(q: &HashMap<String, String>, key: &str) -> Result<Option<String>, Problem> {
    match q.get(key).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => rfc3339::parse(v)
            .map(|t| Some(rfc3339::format(t)))
            .ok_or_else(|| Problem::bad_request(format!("{key} must be an RFC 3339 time"))),
    }
}

#[utoipa::path(get, path = "/v1/worker/telemetry/logs", tag = "telemetry", security(("bearer" = [])),
    params(
        ("source_kind" = String, Query, description = "`service` (with `source_name`) or `container` (with `container_id`)"),
        ("source_name" = Option<String>, Query, description = "`node_manager` or `worker_api`"),
        ("container_id" = Option<String>, Query),
        ("stream" = Option<String>, Query, description = "`stdout` or `stderr`"),
        ("since" = Option<String>, Query, description = "RFC 3339, inclusive"),
        ("until" = Option<String>, Query, description = "RFC 3339, exclusive"),
        ("limit" = Option<u32>, Query, description = "1 to 5000, default 1000"),
        ("page_token" = Option<String>, Query)),
    responses((status = 200, description = "Log events, at most 1 MiB", body = LogsWire), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn logs(State(node): State<SharedNode>, Query(q): Params) -> Response {
    // Everything recorded before this request is in its answer.
    node.telemetry.store().flush().await;
    let result = (|| {
        let get = |k: &str| q.get(k).filter(|v| !v.is_empty()).cloned();
        let mut sql = String::from(
            "SELECT rowid, occurred_at, source_kind, source_name, container_id, stream, level, \
             message, fields_json FROM log_event WHERE rowid > ?",
        );
        let mut args = vec![Sql::Integer(after('l', &q)?)];
        match (
            get("source_kind").as_deref(),
            get("source_name"),
            get("container_id"),
        ) {
            (Some("service"), Some(name), _) => {
                sql.push_str(" AND source_kind = 'service' AND source_name = ?");
                args.push(Sql::Text(name));
            }
            (Some("container"), _, Some(id)) => {
                sql.push_str(" AND source_kind = 'container' AND container_id = ?");
                args.push(Sql::Text(id));
                if let Some(stream) = get("stream") {
                    if !matches!(stream.as_str(), "stdout" | "stderr") {
                        return Err(Problem::bad_request("stream must be `stdout` or `stderr`"));
                    }
                    sql.push_str(" AND stream = ?");
                    args.push(Sql::Text(stream));
                }
            }
            (Some(k), _, _) if k != "service" && k != "container" => {
                return Err(Problem::bad_request(
                    "source_kind must be `service` or `container`",
                ));
            }
            _ => {
                return Err(Problem::bad_request(
                    "give source_kind=service with source_name, or source_kind=container with container_id",
                ));
            }
        }
        if let Some(since) = time_filter(&q, "since")? {
            sql.push_str(" AND occurred_at >= ?");
            args.push(Sql::Text(since));
        }
        if let Some(until) = time_filter(&q, "until")? {
            sql.push_str(" AND occurred_at < ?");
            args.push(Sql::Text(until));
        }
        let limit = limit(&q, 1000, 5000)?;
        sql.push_str(&format!(" ORDER BY rowid LIMIT {}", limit + 1));
        let rows = node
            .telemetry
            .store()
            .read(|c| {
                c.prepare(&sql)?
                    .query_map(rusqlite::params_from_iter(args), |r| {
                        let fields: String = r.get(8)?;
                        Ok((
                            r.get::<_, i64>(0)?,
                            LogEventWire {
                                occurred_at: r.get(1)?,
                                source_kind: r.get(2)?,
                                source_name: r.get(3)?,
                                container_id: r.get(4)?,
                                stream: r.get(5)?,
                                level: r.get(6)?,
                                message: r.get(7)?,
                                fields: serde_json::from_str(&fields).unwrap_or(json!({})),
                            },
                        ))
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(internal)?;
        let more = rows.len() > limit;
        let mut out = LogsWire {
            version: 1,
            events: Vec::new(),
            truncated: TruncatedWire {
                limited_by: if more { "count" } else { "none" },
                max_bytes: LOGS_MAX_BYTES,
            },
            next_page_token: None,
        };
        // Room for the envelope (version, truncated, a page token).
        let (mut bytes, mut last) = (256, 0);
        for (rowid, e) in rows.into_iter().take(limit) {
            let size = serde_json::to_vec(&e).map_or(0, |v| v.len()) + 1;
            if bytes + size > LOGS_MAX_BYTES {
                out.truncated.limited_by = "bytes";
                out.next_page_token = Some(token('l', last));
                return Ok(out);
            }
            bytes += size;
            last = rowid;
            out.events.push(e);
        }
        if more {
            out.next_page_token = Some(token('l', last));
        }
        Ok(out)
    })();
    match result {
        Ok(v) => Json(v).into_response(),
        Err(p) => p.into_response(),
    }
}
