//! E2B's snapshot API over wasbox's snapshots: `create_snapshot` (`POST
//! /sandboxes/{id}/snapshots`) keeps a sandbox's files, environment and network policy as
//! they are (copy-on-write, in the node's memory, as a pause keeps them) while it goes on
//! running; `Sandbox.create(snapshot_id)` (or one of its names) starts new sandboxes from
//! it; `list_snapshots` (`GET /snapshots`, by sandbox or name, paged) and `delete_snapshot`
//! (`DELETE /templates/{id}`) manage them. Running processes are not part of a snapshot: one
//! is refused (409) while a command runs, as a fork is. Snapshots do not survive a restart
//! of the node.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use wasbox_runtime::sync::lock;

use super::control::{Page, not_found, read_json};
use super::{SharedE2b, error};

/// Snapshots a node keeps at most.
pub(crate) const MAX_SNAPSHOTS: usize = 256;

/// One snapshot of a sandbox.
pub(crate) struct Kept {
    pub(crate) id: String,
    /// Its names (a name moves to the newest snapshot given it, as a tag does).
    pub(crate) names: std::sync::Mutex<Vec<String>>,
    /// The sandbox it was taken of.
    pub(crate) sandbox_id: String,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) network: wasbox_runtime::NetworkPolicy,
    pub(crate) snapshot: wasbox_runtime::Snapshot,
    taken_at: SystemTime,
}

impl Kept {
    fn info(&self) -> serde_json::Value {
        json!({"snapshotID": self.id, "names": *lock(&self.names)})
    }

    fn named(&self, name: &str) -> bool {
        lock(&self.names).iter().any(|n| n == name)
    }
}

/// The body of `POST /sandboxes/{id}/snapshots` (its `memory` changes nothing here: a
/// snapshot keeps files, never running processes).
#[derive(Deserialize, Default)]
#[serde(default)]
struct SnapshotRequest {
    name: Option<String>,
}

/// `POST /sandboxes/{id}/snapshots`: 201 with `{snapshotID, names}`.
pub(super) async fn create(
    State(e2b): State<SharedE2b>,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let Some(sbx) = e2b.get(&id) else {
        return not_found(&id);
    };
    let req: SnapshotRequest = match read_json(&e2b, body).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    if let Some(name) = &req.name
        && (name.is_empty()
            || name.len() > 128
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.:/".contains(&b)))
    {
        return error(
            StatusCode::BAD_REQUEST,
            "a snapshot name is 1 to 128 letters, digits and - _ . : /",
        );
    }
    if lock(&e2b.snapshots).len() >= MAX_SNAPSHOTS {
        return error(
            StatusCode::TOO_MANY_REQUESTS,
            format!("the node keeps at most {MAX_SNAPSHOTS} snapshots: delete some first"),
        );
    }
    let runtime = e2b.node.runtime.clone();
    let sbx2 = sbx.clone();
    let taken = tokio::task::spawn_blocking(move || {
        runtime.snapshot(sbx2.session.sandbox(), Default::default())
    })
    .await;
    let snapshot = match taken {
        Ok(Ok(s)) => s,
        Ok(Err(wasbox_runtime::SnapshotError::Busy(n))) => {
            return error(
                StatusCode::CONFLICT,
                format!(
                    "{n} process(es) run in the sandbox: a snapshot keeps its files, not running \
                     processes, and is taken while no command runs"
                ),
            );
        }
        Ok(Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("snapshot failed: {e}"),
            );
        }
    };
    let snap_id = e2b
        .node
        .config()
        .fleet
        .own(&format!("snap-{}", crate::ids::hex::<10>()));
    let kept = Arc::new(Kept {
        id: snap_id.clone(),
        names: std::sync::Mutex::new(req.name.clone().into_iter().collect()),
        sandbox_id: sbx.id.clone(),
        env: sbx.session.env().to_vec(),
        network: sbx.session.sandbox().network(),
        snapshot,
        taken_at: SystemTime::now(),
    });
    let mut all = lock(&e2b.snapshots);
    if let Some(name) = &req.name {
        for other in all.values() {
            lock(&other.names).retain(|n| n != name);
        }
    }
    all.insert(snap_id.clone(), kept.clone());
    drop(all);
    tracing::info!(sandbox_id = %sbx.id, snapshot_id = %snap_id, "e2b snapshot taken");
    (StatusCode::CREATED, axum::Json(kept.info())).into_response()
}

/// `GET /snapshots`: newest first, by `sandboxID` and `name`, `limit` per page with
/// `x-next-token`.
pub(super) async fn list(
    State(e2b): State<SharedE2b>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let page = match Page::of(&q) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let sandbox = q.get("sandboxID").filter(|s| !s.is_empty());
    let name = q.get("name").filter(|s| !s.is_empty());
    let mut all: Vec<Arc<Kept>> = lock(&e2b.snapshots)
        .values()
        .filter(|k| sandbox.is_none_or(|s| *s == k.sandbox_id))
        .filter(|k| name.is_none_or(|n| k.named(n)))
        .cloned()
        .collect();
    all.sort_by(|a, b| b.taken_at.cmp(&a.taken_at).then(a.id.cmp(&b.id)));
    page.answer(all.iter().map(|k| k.info()).collect())
}

/// `DELETE /templates/{id}`: a snapshot (by id or name) is deleted, 204; anything else 404
/// (the node's templates are its images, not deleted through this API).
pub(super) async fn delete(State(e2b): State<SharedE2b>, Path(id): Path<String>) -> Response {
    let mut all = lock(&e2b.snapshots);
    let key = all
        .values()
        .find(|k| k.id == id || k.named(&id))
        .map(|k| k.id.clone());
    match key.and_then(|k| all.remove(&k)) {
        Some(_) => StatusCode::NO_CONTENT.into_response(),
        None => error(
            StatusCode::NOT_FOUND,
            format!("template or snapshot '{id}' not found"),
        ),
    }
}

/// The snapshot a create names as its template (by id or name).
pub(crate) fn find(e2b: &super::E2b, template: &str) -> Option<Arc<Kept>> {
    lock(&e2b.snapshots)
        .values()
        .find(|k| k.id == template || k.named(template))
        .cloned()
}
