//! Named volumes over HTTP, in the worker API's style (bearer auth, RFC 9457 problems):
//! `POST /v1/worker/volumes` makes one, `GET /v1/worker/volumes[/{name}]` lists them or
//! shows one with what it holds, `DELETE /v1/worker/volumes/{name}` removes one no sandbox
//! has attached. A session or job attaches them with `sandbox.volumes: [{name, path,
//! read_only}]`. The store is the runtime's [`wasbox_runtime::volume::Volumes`], under
//! `<state_dir>/volumes`; this module translates.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use wasbox_runtime::volume::{VolumeError, VolumeInfo};

use super::node::{SharedNode, check_version, read_json, respond};
use crate::problem::Problem;

/// The problem a volume refusal answers with.
pub(crate) fn volume_problem(e: VolumeError) -> Problem {
    match &e {
        VolumeError::Invalid(_) => Problem::bad_request(e.to_string()),
        VolumeError::NotFound(_) => Problem::not_found(e.to_string()),
        VolumeError::Exists(_) | VolumeError::InUse(_) => Problem::conflict(e.to_string()),
        VolumeError::Full(_) => {
            Problem::with_status(StatusCode::INSUFFICIENT_STORAGE, e.to_string())
        }
        _ => Problem::internal(&anyhow::anyhow!(e.to_string())),
    }
}

/// Runs store work (directory walks, file writes) off the request threads.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Problem> + Send + 'static,
) -> Result<T, Problem> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Problem::internal(&anyhow::anyhow!("volume task failed: {e}")))?
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(super) struct CreateVolume {
    #[schema(required = true)]
    version: Option<i64>,
    /// 1 to 63 letters, digits, `.`, `_`, `-`, starting with a letter or digit.
    #[schema(required = true)]
    name: Option<String>,
    /// Its size quota; the node's default (1 GiB unless configured) when left out.
    size_bytes: Option<u64>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct VolumeWire {
    version: u32,
    name: String,
    volume_id: String,
    size_bytes: u64,
    max_inodes: u64,
    used_bytes: u64,
    used_inodes: u64,
    /// Sandboxes that have it attached now.
    attached: usize,
    created_at: String,
}

fn wire(v: VolumeInfo) -> VolumeWire {
    VolumeWire {
        version: 1,
        name: v.record.name,
        volume_id: v.record.id,
        size_bytes: v.record.bytes_limit,
        max_inodes: v.record.inodes_limit,
        used_bytes: v.bytes_used,
        used_inodes: v.inodes_used,
        attached: v.attached,
        created_at: crate::rfc3339::format(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(v.record.created),
        ),
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct VolumeList {
    version: u32,
    volumes: Vec<VolumeWire>,
}

/// `POST /v1/worker/volumes`: makes an empty volume.
#[utoipa::path(post, path = "/v1/worker/volumes", tag = "volumes", operation_id = "create_volume", security(("bearer" = [])),
    request_body = CreateVolume,
    responses((status = 201, description = "The new volume", body = VolumeWire), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn create(State(node): State<SharedNode>, headers: HeaderMap, body: Body) -> Response {
    let r = async {
        let req: CreateVolume = read_json(&headers, body, node.config().max_request_bytes).await?;
        check_version(req.version)?;
        let name = super::node::required("name", &req.name)?.to_string();
        let volumes = node.volumes.clone();
        blocking(move || {
            volumes
                .create(&name, req.size_bytes)
                .and_then(|_| volumes.info(&name))
                .map(wire)
                .map_err(volume_problem)
        })
        .await
    }
    .await;
    match r {
        Ok(v) => {
            tracing::info!(volume = %v.name, size_bytes = v.size_bytes, "volume created");
            (StatusCode::CREATED, axum::Json(v)).into_response()
        }
        Err(p) => p.into_response(),
    }
}

/// `GET /v1/worker/volumes`: every volume of the node, with what each holds.
#[utoipa::path(get, path = "/v1/worker/volumes", tag = "volumes", operation_id = "list_volumes", security(("bearer" = [])),
    responses((status = 200, description = "The volumes", body = VolumeList), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn list(State(node): State<SharedNode>) -> Response {
    let volumes = node.volumes.clone();
    respond(
        blocking(move || {
            Ok(VolumeList {
                version: 1,
                volumes: volumes.list().into_iter().map(wire).collect(),
            })
        })
        .await,
    )
}

/// `GET /v1/worker/volumes/{name}`: one volume, with what it holds.
#[utoipa::path(get, path = "/v1/worker/volumes/{name}", tag = "volumes", operation_id = "get_volume", security(("bearer" = [])),
    params(("name" = String, Path, description = "The volume's name")),
    responses((status = 200, description = "The volume", body = VolumeWire), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn get(State(node): State<SharedNode>, Path(name): Path<String>) -> Response {
    let volumes = node.volumes.clone();
    respond(blocking(move || volumes.info(&name).map(wire).map_err(volume_problem)).await)
}

/// `DELETE /v1/worker/volumes/{name}`: removes a volume and its files; 409 while a
/// sandbox has it attached.
#[utoipa::path(delete, path = "/v1/worker/volumes/{name}", tag = "volumes", operation_id = "delete_volume", security(("bearer" = [])),
    params(("name" = String, Path, description = "The volume's name")),
    responses((status = 204, description = "Removed"), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn delete(State(node): State<SharedNode>, Path(name): Path<String>) -> Response {
    let volumes = node.volumes.clone();
    let gone = name.clone();
    match blocking(move || volumes.remove(&name).map_err(volume_problem)).await {
        Ok(()) => {
            tracing::info!(volume = %gone, "volume removed");
            StatusCode::NO_CONTENT.into_response()
        }
        Err(p) => p.into_response(),
    }
}
