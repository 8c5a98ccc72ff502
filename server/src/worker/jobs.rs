//! `POST /v1/worker/jobs:run` and `POST /v1/worker/jobs:stop`.

use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use wasbox_runtime::{JobSpec, Limits, SandboxConfig};

use super::config::MAX_OUTPUT_BYTES;
use super::job_table::Claim;
use super::node::{SharedNode, check_version, lock, read_json, required};
use super::wire::{
    RESERVED_ENV, ResultWire, RunResponse, SandboxSpec, check_network_policy, check_timeout,
};
use crate::problem::Problem;

#[derive(Deserialize)]
struct RunRequest {
    version: Option<i64>,
    task_id: Option<String>,
    job_id: Option<String>,
    sandbox: Option<SandboxSpec>,
}

pub async fn run(State(node): State<SharedNode>, headers: HeaderMap, body: Body) -> Response {
    match run_inner(node, headers, body).await {
        Ok(answer) => Json(&*answer).into_response(),
        Err(p) => p.into_response(),
    }
}

async fn run_inner(
    node: SharedNode,
    headers: HeaderMap,
    body: Body,
) -> Result<Arc<RunResponse>, Problem> {
    node.accepting()?;
    let req: RunRequest = read_json(&headers, body, node.config.max_request_bytes).await?;
    check_version(req.version)?;
    let task_id = required("task_id", &req.task_id)?.to_string();
    let job_id = required("job_id", &req.job_id)?.to_string();
    let Some(sandbox) = req.sandbox else {
        return Err(Problem::bad_request("sandbox is required"));
    };
    let image_ref = required("sandbox.image", &sandbox.image)?;
    let argv = match &sandbox.command {
        Some(c) if !c.is_empty() && !c[0].is_empty() => c.clone(),
        Some(_) => return Err(Problem::bad_request("sandbox.command must not be empty")),
        None => return Err(Problem::bad_request("sandbox.command is required")),
    };
    check_network_policy(&sandbox.network_policy)?;
    let requested = check_timeout(sandbox.timeout_seconds, "sandbox.timeout_seconds")?;
    let Some(image) = node.config.image_for(image_ref).map(str::to_string) else {
        return Err(Problem::bad_request(format!(
            "image `{image_ref}` is not allowed on this node"
        )));
    };

    let claim = lock(&node.jobs).claim(&task_id, &job_id);
    let (tx, stop) = match claim {
        Claim::Done(answer) => return Ok(answer),
        Claim::Wait(mut rx) => {
            let answer = rx
                .wait_for(Option::is_some)
                .await
                .map_err(|_| Problem::internal(&anyhow::anyhow!("job {job_id} vanished")))?;
            return Ok(answer.clone().expect("checked"));
        }
        Claim::Run(tx, stop) => (tx, stop),
        Claim::Conflict => {
            return Err(Problem::conflict(format!(
                "job `{job_id}` is already running for another task"
            )));
        }
    };
    let admitted = match node.slot() {
        Ok(slot) => node.admit().await.map(|a| (slot, a)),
        Err(p) => Err(p),
    };
    let (slot, admission) = match admitted {
        Ok(s) => s,
        Err(p) => {
            lock(&node.jobs).abandon(&job_id);
            return Err(p);
        }
    };

    let mut env: Vec<(String, String)> = sandbox
        .env
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| !RESERVED_ENV.contains(&k.as_str()))
        .collect();
    env.push(("CYNODE_TASK_ID".into(), task_id.clone()));
    env.push(("CYNODE_JOB_ID".into(), job_id.clone()));
    env.push(("CYNODE_WORKSPACE_DIR".into(), "/workspace".into()));
    let timeout = node.config.job_timeout(requested);

    // The job runs in its own task: a client that disconnects does not cancel it, and its
    // answer still reaches a retry of the same job id.
    let task = {
        let node = node.clone();
        let (task_id, job_id) = (task_id.clone(), job_id.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let started = Instant::now();
            let limits = Limits::default()
                .timeout(timeout)
                .max_output_bytes(MAX_OUTPUT_BYTES);
            let result = async {
                let sandbox = node
                    .runtime
                    .sandbox(SandboxConfig::default().image(image).limits(limits))?;
                let mut spec = JobSpec::new(argv)
                    .timeout(timeout)
                    .stop_signal(stop)
                    .admission(admission);
                spec.env = env;
                sandbox.run(spec).await
            }
            .await;
            let answer = result.map(|out| {
                tracing::info!(
                    task_id = %task_id,
                    job_id = %job_id,
                    status = out.status.as_str(),
                    exit_code = out.exit_code,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "job finished"
                );
                Arc::new(RunResponse {
                    version: 1,
                    task_id: task_id.clone(),
                    job_id: job_id.clone(),
                    result: ResultWire::from(&out),
                })
            });
            match &answer {
                Ok(a) => {
                    lock(&node.jobs).finish(&job_id, a.clone());
                    let _ = tx.send(Some(a.clone()));
                }
                Err(_) => {
                    lock(&node.jobs).abandon(&job_id);
                }
            }
            answer
        })
    };
    match task.await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(Problem::internal(&e)),
        Err(e) => Err(Problem::internal(&anyhow::anyhow!("job task failed: {e}"))),
    }
}

#[derive(Deserialize)]
struct StopRequest {
    version: Option<i64>,
    task_id: Option<String>,
    job_id: Option<String>,
}

#[derive(Serialize)]
struct StopResponse {
    version: u32,
    task_id: String,
    job_id: String,
    /// `stopping` when a running job was told to stop, `not_running` otherwise.
    status: &'static str,
}

pub async fn stop(State(node): State<SharedNode>, headers: HeaderMap, body: Body) -> Response {
    let result = async {
        let req: StopRequest = read_json(&headers, body, node.config.max_request_bytes).await?;
        check_version(req.version)?;
        let task_id = required("task_id", &req.task_id)?.to_string();
        let job_id = required("job_id", &req.job_id)?.to_string();
        let status = if lock(&node.jobs).stop(&task_id, &job_id) {
            tracing::info!(task_id = %task_id, job_id = %job_id, "job stop requested");
            "stopping"
        } else {
            "not_running"
        };
        Ok::<_, Problem>(StopResponse {
            version: 1,
            task_id,
            job_id,
            status,
        })
    }
    .await;
    match result {
        Ok(r) => Json(r).into_response(),
        Err(p) => p.into_response(),
    }
}
