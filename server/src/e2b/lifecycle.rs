//! Pause, resume and fork of an E2B sandbox: a paused sandbox is a copy-on-write snapshot
//! of its files with what it is resumed with; a fork shares unchanged files the same way.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use wasbox_runtime::sync::lock;

use super::control::{
    Start, check_timeout, not_found, read_json, resume_paused, sandbox_limits, start,
};
use super::*;

/// `POST /sandboxes/{id}/pause`: the sandbox's files, environment and metadata are kept
/// (a snapshot, copy-on-write) and its session ends; `connect` or `resume` brings it back
/// with the same id. Running processes are not kept: with `memory: false` (E2B's
/// "filesystem" mode) they are stopped first; otherwise a pause while a command runs is
/// refused (501). Already paused: 409.
pub(super) async fn pause(
    State(e2b): State<SharedE2b>,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let req: wire::PauseRequest = match read_json(&e2b, body).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    let Some(sbx) = e2b.get(&id) else {
        if e2b.paused(&id).is_some() {
            return error(
                StatusCode::CONFLICT,
                format!("sandbox \"{id}\" is already paused"),
            );
        }
        return not_found(&id);
    };
    if lock(&e2b.paused).len() >= MAX_PAUSED {
        return error(
            StatusCode::TOO_MANY_REQUESTS,
            format!("the node keeps at most {MAX_PAUSED} paused sandboxes"),
        );
    }
    let files_only = req.memory == Some(false);
    let runtime = e2b.node.runtime.clone();
    // Its template's start command goes first (a resume starts it again); its end takes a
    // moment too.
    let restart = sbx.session.stop_background() > 0;
    let mut tries = 0;
    let snapshot = loop {
        match runtime.snapshot(sbx.session.sandbox(), Default::default()) {
            Ok(s) => break s,
            Err(wasbox_runtime::SnapshotError::Busy(_))
                if (files_only || restart) && tries < 200 =>
            {
                // Filesystem mode: the processes go; their ends take a moment.
                if tries == 0 && files_only {
                    sbx.procs.kill_all();
                    sbx.contexts.stop_all();
                }
                tries += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(wasbox_runtime::SnapshotError::Busy(n)) => {
                if restart && let Err(e) = crate::template::start_command(&sbx.session).await {
                    tracing::warn!(sandbox_id = %id, "its start command did not start again: {e:#}");
                }
                return error(
                    StatusCode::NOT_IMPLEMENTED,
                    format!(
                        "{n} process(es) run in the sandbox: a pause keeps its files, not running \
                         processes; end them or pause with mode=\"filesystem\""
                    ),
                );
            }
            Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    };
    let paused = Arc::new(Paused::of(&sbx, snapshot, !files_only));
    lock(&e2b.sandboxes).remove(&id);
    lock(&e2b.paused).insert(id.clone(), paused);
    e2b.node
        .sessions()
        .end(sbx.session.id(), "paused by the client");
    tracing::info!(sandbox_id = %id, "e2b sandbox paused");
    StatusCode::NO_CONTENT.into_response()
}

/// How often a sandbox whose timeout came is tried for its pause (once per reap, every
/// half second, while its processes wind down) before it is simply ended.
pub(super) const PAUSE_TRIES: u32 = 40;

/// The pause of a sandbox its timeout ended (`autoPause`): its files and settings kept as a
/// pause keeps them, its boot id too unless only its files were to be kept. Whatever ran in
/// it was stopped by the timeout (wasbox cannot keep running processes). Returns whether to
/// try again later (its processes are still ending).
pub(super) fn auto_pause(e2b: &E2b, sbx: &Arc<Sbx>) -> bool {
    use std::sync::atomic::Ordering;
    let OnTimeout::Pause { memory } = sbx.on_timeout else {
        return false;
    };
    if lock(&e2b.paused).len() >= MAX_PAUSED {
        tracing::warn!(sandbox_id = %sbx.id, "no room to pause the sandbox at its timeout: ended");
        return false;
    }
    // Its template's start command ends with the timeout too (a resume starts it again).
    sbx.session.stop_background();
    let snapshot = match e2b
        .node
        .runtime
        .snapshot(sbx.session.sandbox(), Default::default())
    {
        Ok(s) => s,
        Err(wasbox_runtime::SnapshotError::Busy(_)) => {
            return sbx.pause_tries.fetch_add(1, Ordering::Relaxed) + 1 < PAUSE_TRIES;
        }
        Err(e) => {
            tracing::warn!(sandbox_id = %sbx.id, "cannot pause the sandbox at its timeout: {e}");
            return false;
        }
    };
    sbx.procs.kill_all();
    sbx.contexts.stop_all();
    lock(&e2b.paused).insert(sbx.id.clone(), Arc::new(Paused::of(sbx, snapshot, memory)));
    sbx.pause_tries.store(PAUSE_TRIES, Ordering::Relaxed);
    tracing::info!(sandbox_id = %sbx.id, memory, "e2b sandbox paused at its timeout");
    false
}

/// `POST /sandboxes/{id}/resume`: a paused sandbox runs again (201); a running one is a 409.
pub(super) async fn resume(
    State(e2b): State<SharedE2b>,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let req: wire::TimeoutRequest = match read_json(&e2b, body).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    if e2b.get(&id).is_some() {
        return error(
            StatusCode::CONFLICT,
            format!("sandbox \"{id}\" is already running"),
        );
    }
    resume_paused(&e2b, &id, req.timeout).await
}

/// Forks one sandbox makes at most (E2B's SDK allows 1 to 20).
pub(super) const MAX_FORKS: i64 = 20;

/// `POST /sandboxes/{id}/fork`: `count` new sandboxes (default 1), each with the sandbox's
/// files, environment and metadata as they are now, sharing unchanged files copy-on-write.
/// Running processes are not copied: the fork is refused (409) while a command runs in it.
pub(super) async fn fork(
    State(e2b): State<SharedE2b>,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let Some(src) = e2b.get(&id) else {
        return not_found(&id);
    };
    // New sandboxes are not made on a node that drains (a proxy sends creates elsewhere).
    if let Some(reason) = e2b.node.not_ready() {
        return error(StatusCode::SERVICE_UNAVAILABLE, reason);
    }
    let req: wire::ForkRequest = match read_json(&e2b, body).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    let count = req.count.unwrap_or(1);
    if !(1..=MAX_FORKS).contains(&count) {
        return error(
            StatusCode::BAD_REQUEST,
            format!("count must be from 1 to {MAX_FORKS}"),
        );
    }
    let lifetime = match check_timeout(req.timeout, DEFAULT_TIMEOUT_SECS) {
        Ok(t) => t,
        Err(r) => return r,
    };
    let e2b2 = e2b.clone();
    let made = tokio::task::spawn_blocking(move || {
        let snap = match e2b2
            .node
            .runtime
            .snapshot(src.session.sandbox(), Default::default())
        {
            Ok(s) => s,
            Err(wasbox_runtime::SnapshotError::Busy(n)) => {
                return Err(error(
                    StatusCode::CONFLICT,
                    format!(
                        "{n} process(es) run in the sandbox: a fork copies its files, not running \
                         processes, and is made while no command runs"
                    ),
                ));
            }
            Err(e) => return Err(error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
        };
        // The copies have the source's volumes attached (shared, never copied).
        let volumes = src.session.sandbox().volumes();
        let mut results = Vec::new();
        for _ in 0..count {
            let new_id = e2b
                .node
                .config()
                .fleet
                .own(&format!("i{}", crate::ids::hex::<10>()));
            let env = src
                .session
                .env()
                .iter()
                .map(|(k, v)| {
                    let v = if k == "E2B_SANDBOX_ID" { new_id.clone() } else { v.clone() };
                    (k.clone(), v)
                })
                .collect();
            let new = Start {
                id: new_id,
                token: None,
                template: src.template.clone(),
                lifetime,
                env,
                metadata: src.metadata.clone(),
                on_timeout: src.on_timeout,
                // A fork is made while nothing runs in its source: no start command either.
                start_command: None,
            };
            let made = start(&e2b2, new, || {
                e2b2.node
                    .runtime
                    .restore_with(&snap, Some(sandbox_limits()), volumes.clone())
                    .map_err(anyhow::Error::from)
            });
            results.push(match made {
                Ok(s) => serde_json::json!({"sandbox": s.created()}),
                Err(r) => {
                    let status = r.status().as_u16();
                    serde_json::json!({"error": {"code": status, "message": "the fork could not start"}})
                }
            });
        }
        Ok(results)
    })
    .await;
    match made {
        Ok(Ok(results)) => (StatusCode::CREATED, axum::Json(results)).into_response(),
        Ok(Err(r)) => r,
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("fork failed: {e}"),
        ),
    }
}
