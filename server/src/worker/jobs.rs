//! Jobs: `POST /v1/worker/jobs:run` (synchronous), `POST /v1/worker/jobs:submit` with
//! `GET`/`DELETE /v1/worker/jobs/{job_id}` (submit, poll, confirm), `POST
//! /v1/worker/jobs:stop`, and the orchestrator's stop of all work. Every result is kept in
//! the node's store (SQLite) until the orchestrator deletes it or retention drops it.

use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use tracing::Instrument as _;
use wasbox_runtime::{JobSpec, Limits, SandboxConfig};

use super::config::{ADMISSION_WAIT, MAX_OUTPUT_BYTES};
use super::job_table::Claim;
use super::metrics::Outcome;
use super::node::{Node, SharedNode, check_version, read_json, required};
use super::telemetry;
use super::wire::{
    RESERVED_ENV, ResultWire, RunResponse, SandboxSpec, check_timeout, network_policy,
};
use crate::problem::Problem;
use wasbox_runtime::sync::lock;

#[derive(Deserialize, utoipa::ToSchema)]
pub(super) struct RunRequest {
    /// Must be 1.
    #[schema(required = true)]
    version: Option<i64>,
    #[schema(required = true)]
    task_id: Option<String>,
    #[schema(required = true)]
    job_id: Option<String>,
    #[schema(required = true)]
    sandbox: Option<SandboxSpec>,
}

#[utoipa::path(post, path = "/v1/worker/jobs:run", tag = "jobs", security(("bearer" = [])),
    request_body = RunRequest,
    responses((status = 200, description = "The job ran (its own failure is in `status`)", body = RunResponse), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn run(State(node): State<SharedNode>, headers: HeaderMap, body: Body) -> Response {
    let started = match start(node, headers, body, false).await {
        Ok(s) => s,
        Err(p) => return p.into_response(),
    };
    match started.answer().await {
        Ok(answer) => answer.response(),
        Err(p) => p.into_response(),
    }
}

/// `POST /v1/worker/jobs:submit`: the same request as `jobs:run`, answered `202 Accepted` as
/// soon as the job has its sandbox (its status and result at `GET /v1/worker/jobs/{job_id}`),
/// or 200 with the result when this job id already finished. The job is recorded in the
/// store before the answer, so a restart of the node reports it rather than forgetting it.
#[utoipa::path(post, path = "/v1/worker/jobs:submit", tag = "jobs", security(("bearer" = [])),
    request_body = RunRequest,
    responses(
        (status = 202, description = "Accepted; poll `Location`", body = JobStatusWire,
         headers(("Location" = String, description = "/v1/worker/jobs/{job_id}"))),
        (status = 200, description = "This job id already finished: its result", body = RunResponse),
        (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn submit(State(node): State<SharedNode>, headers: HeaderMap, body: Body) -> Response {
    match start(node, headers, body, true).await {
        Ok(Started::Done(answer)) => answer.response(),
        Ok(
            Started::Running {
                task_id, job_id, ..
            }
            | Started::Waiting {
                task_id, job_id, ..
            },
        ) => {
            let location = format!("/v1/worker/jobs/{job_id}");
            let mut res = (
                StatusCode::ACCEPTED,
                Json(JobStatusWire {
                    version: 1,
                    task_id,
                    job_id,
                    status: "accepted",
                }),
            )
                .into_response();
            if let Ok(v) = HeaderValue::from_str(&location) {
                res.headers_mut().insert(header::LOCATION, v);
            }
            res
        }
        Err(p) => p.into_response(),
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct JobStatusWire {
    version: u32,
    task_id: String,
    job_id: String,
    /// `accepted` or `in_progress` (terminal states carry the whole result instead).
    #[schema(value_type = RunningState)]
    status: &'static str,
}

/// What starting a job found.
enum Started {
    /// This request started it: the task that runs it.
    Running {
        task_id: String,
        job_id: String,
        task: tokio::task::JoinHandle<Result<Arc<RunResponse>, Problem>>,
    },
    /// Another request runs it: its answer, when ready.
    Waiting {
        task_id: String,
        job_id: String,
        rx: tokio::sync::watch::Receiver<Option<Arc<RunResponse>>>,
    },
    Done(Arc<RunResponse>),
}

impl Started {
    async fn answer(self) -> Result<Arc<RunResponse>, Problem> {
        match self {
            Started::Done(a) => Ok(a),
            Started::Waiting { job_id, mut rx, .. } => {
                // The request that ran it ended without a result (refused for lack of
                // room, or failed in the node) and freed its id: this one may run it again.
                let answer = rx.wait_for(Option::is_some).await.map_err(|_| {
                    Problem::busy(format!(
                        "job `{job_id}` ended without a result in the request that ran it; \
                         retry it"
                    ))
                    .retry_after(1)
                })?;
                Ok(answer.clone().expect("checked"))
            }
            Started::Running { task, .. } => match task.await {
                Ok(answer) => answer,
                Err(e) => Err(Problem::internal(&anyhow::anyhow!("job task failed: {e}"))),
            },
        }
    }
}

/// Validates a job request and starts the job (or finds it running or finished).
async fn start(
    node: SharedNode,
    headers: HeaderMap,
    body: Body,
    durable: bool,
) -> Result<Started, Problem> {
    node.creating()?;
    let req: RunRequest = read_json(&headers, body, node.config().max_request_bytes).await?;
    check_version(req.version)?;
    let task_id = required("task_id", &req.task_id)?.to_string();
    let job_id = required("job_id", &req.job_id)?.to_string();
    super::node::routes_here(&node, "job_id", &job_id)?;
    let Some(sandbox) = req.sandbox else {
        return Err(Problem::bad_request("sandbox is required"));
    };
    let image_ref = required("sandbox.image", &sandbox.image)?.to_string();
    let argv = match &sandbox.command {
        Some(c) if !c.is_empty() && !c[0].is_empty() => c.clone(),
        Some(_) => return Err(Problem::bad_request("sandbox.command must not be empty")),
        None => return Err(Problem::bad_request("sandbox.command is required")),
    };
    let network = network_policy(&sandbox.network_policy)?;
    let requested = check_timeout(sandbox.timeout_seconds, "sandbox.timeout_seconds")?;
    let source = super::node::source(&node, &image_ref).await?;
    let volumes = super::node::volume_mounts(
        &node.volumes,
        sandbox.volumes.as_deref().unwrap_or_default(),
        source.mount(),
    )?;

    let claim = lock(&node.jobs).claim(&task_id, &job_id);
    let (tx, stop) = match claim {
        Claim::Done(answer) => return Ok(Started::Done(answer)),
        Claim::Wait(rx) => {
            return Ok(Started::Waiting {
                task_id,
                job_id,
                rx,
            });
        }
        Claim::Run(tx, stop) => (tx, stop),
        Claim::Conflict => {
            return Err(Problem::conflict(format!(
                "job `{job_id}` is already running for another task"
            )));
        }
    };
    // A result kept in the store (from before a restart, or pushed out of memory) answers
    // a retry of its job.
    let maybe_stored = lock(&node.jobs).maybe_stored(&job_id);
    let stored = if maybe_stored {
        stored_answer(&node, &job_id, Some(&task_id)).await
    } else {
        None
    };
    if let Some(answer) = stored {
        lock(&node.jobs).finish(&job_id, answer.clone());
        let _ = tx.send(Some(answer.clone()));
        return Ok(Started::Done(answer));
    }
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
    if durable {
        node.telemetry
            .store()
            .put_result(&job_id, &task_id, "accepted", None, true)
            .await;
    }

    let mut env: Vec<(String, String)> = sandbox
        .env
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| !RESERVED_ENV.contains(&k.as_str()))
        .collect();
    env.push(("CYNODE_TASK_ID".into(), task_id.clone()));
    env.push(("CYNODE_JOB_ID".into(), job_id.clone()));
    env.push(("CYNODE_WORKSPACE_DIR".into(), "/workspace".into()));
    let timeout = node.config().job_timeout(requested);
    let inventory = telemetry::Sandbox::job(&job_id, &task_id, &image_ref);
    node.telemetry.started(&inventory);
    node.metrics.jobs_started.inc();

    // The job runs in its own task: a client that disconnects does not cancel it, and its
    // answer still reaches a retry of the same job id.
    let task = {
        let node = node.clone();
        let (task_id, job_id) = (task_id.clone(), job_id.clone());
        tokio::spawn(
            async move {
                let _slot = slot;
                let started = Instant::now();
                let limits = Limits::default()
                    .timeout(timeout)
                    .max_output_bytes(MAX_OUTPUT_BYTES);
                let result = async {
                    let mut config = SandboxConfig::default().limits(limits);
                    config.network = network;
                    config.label = Some(format!("job {task_id}/{job_id}"));
                    config.volumes = volumes;
                    let sandbox = node.make_sandbox(&source, config)?;
                    // Room other sandboxes hold (their memory) is waited for like a place.
                    let mut spec = JobSpec::new(argv)
                        .timeout(timeout)
                        .stop_signal(stop)
                        .admission(admission)
                        .start_wait(ADMISSION_WAIT);
                    spec.env = env;
                    sandbox.run(spec).await
                }
                .await;
                // A `jobs:run` whose program found no room within that wait is refused as
                // one that found no place is (429), and nothing of it is kept: a retry runs
                // it. An accepted `jobs:submit` keeps its failure as its result.
                if let Some(failed) = result.as_ref().ok().and_then(|o| o.lacked_room())
                    && !durable
                {
                    ended_without_result(&node, &inventory, &job_id, "refused", failed);
                    return Err(
                        Problem::busy(format!("cannot start the job: {failed}")).retry_after(1)
                    );
                }
                node.metrics
                    .job_seconds
                    .observe(started.elapsed().as_secs_f64());
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
                        json: Default::default(),
                    })
                });
                match &answer {
                    Ok(a) => {
                        let status = a.result.status;
                        node.metrics
                            .jobs_finished
                            .get_or_create(&Outcome { status })
                            .inc();
                        node.telemetry
                            .output(&inventory, "stdout", &a.result.stdout);
                        node.telemetry
                            .output(&inventory, "stderr", &a.result.stderr);
                        node.telemetry.stopped(
                            &inventory,
                            Some(i64::from(a.result.exit_code)),
                            status,
                        );
                        let json = a.json().to_string();
                        node.telemetry
                            .store()
                            .put_result(&job_id, &task_id, status, Some(json), durable)
                            .await;
                        lock(&node.jobs).finish(&job_id, a.clone());
                        let _ = tx.send(Some(a.clone()));
                    }
                    Err(e) => {
                        ended_without_result(
                            &node,
                            &inventory,
                            &job_id,
                            "error",
                            &format!("{e:#}"),
                        );
                        if durable {
                            node.telemetry.store().delete_result(&job_id).await;
                        }
                    }
                }
                answer.map_err(|e| Problem::internal(&e))
            }
            .in_current_span(),
        )
    };
    Ok(Started::Running {
        task_id,
        job_id,
        task,
    })
}

/// Books a job that ended without a result (refused, or failed in the host): counted under
/// `outcome`, its sandbox recorded as stopped with the reason, its id free to run again.
fn ended_without_result(
    node: &Node,
    inventory: &telemetry::Sandbox,
    job_id: &str,
    outcome: &'static str,
    why: &dyn std::fmt::Display,
) {
    node.metrics
        .jobs_finished
        .get_or_create(&Outcome { status: outcome })
        .inc();
    node.telemetry
        .stopped(inventory, None, &format!("{outcome}: {why}"));
    lock(&node.jobs).abandon(job_id);
}

/// A finished result the store kept (from this boot or an earlier one), for `task_id`
/// when given.
async fn stored_answer(
    node: &Node,
    job_id: &str,
    task_id: Option<&str>,
) -> Option<Arc<RunResponse>> {
    let stored = match node.telemetry.store().result_now(job_id).await {
        Ok(s) => s?,
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "reading a kept job result");
            return None;
        }
    };
    if task_id.is_some_and(|t| t != stored.task_id) {
        return None;
    }
    RunResponse::from_json(stored.result_json.as_deref()?).map(Arc::new)
}

/// `GET /v1/worker/jobs/{job_id}`: `in_progress` while the job runs, its whole result once
/// it has finished (until the orchestrator deletes it), 404 for a job the node does not know.
#[utoipa::path(get, path = "/v1/worker/jobs/{job_id}", tag = "jobs", operation_id = "get_job", security(("bearer" = [])),
    params(("job_id" = String, Path, description = "The job's id")),
    responses(
        (status = 200, description = "`in_progress` while it runs, else its whole result", body = JobOrResult),
        (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn get(State(node): State<SharedNode>, Path(job_id): Path<String>) -> Response {
    let running = lock(&node.jobs).running_task(&job_id).map(str::to_string);
    if let Some(task_id) = running {
        return Json(JobStatusWire {
            version: 1,
            task_id,
            job_id,
            status: "in_progress",
        })
        .into_response();
    }
    let finished = lock(&node.jobs).finished(&job_id);
    let answer = match finished {
        Some(a) => Some(a),
        None => stored_answer(&node, &job_id, None).await,
    };
    match answer {
        Some(answer) => answer.response(),
        None => {
            Problem::not_found(format!("job `{job_id}` is not known on this node")).into_response()
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct DeletedWire {
    version: u32,
    job_id: String,
    #[schema(value_type = String)]
    status: &'static str,
}

/// `DELETE /v1/worker/jobs/{job_id}`: the orchestrator has persisted the result; the node
/// forgets it. 409 while the job runs (stop it first), 404 when unknown.
#[utoipa::path(delete, path = "/v1/worker/jobs/{job_id}", tag = "jobs", security(("bearer" = [])),
    params(("job_id" = String, Path, description = "The job's id")),
    responses((status = 200, description = "The node forgot the result", body = DeletedWire), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn delete(State(node): State<SharedNode>, Path(job_id): Path<String>) -> Response {
    if lock(&node.jobs).running_task(&job_id).is_some() {
        return Problem::conflict(format!(
            "job `{job_id}` is still running; stop it with jobs:stop first"
        ))
        .into_response();
    }
    let in_memory = lock(&node.jobs).forget(&job_id);
    let stored = matches!(
        node.telemetry.store().result_now(&job_id).await,
        Ok(Some(_))
    );
    if !in_memory && !stored {
        return Problem::not_found(format!("job `{job_id}` is not known on this node"))
            .into_response();
    }
    node.telemetry.store().delete_result(&job_id).await;
    node.telemetry.store().flush().await;
    Json(DeletedWire {
        version: 1,
        job_id,
        status: "deleted",
    })
    .into_response()
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct StopAllWire {
    version: u32,
    stopped_jobs: usize,
    ended_sessions: usize,
}

/// `POST /v1/worker/admin/stop-all-orchestrator-directed`: the orchestrator is shutting
/// down; every job it dispatched is stopped and every session ended (their results are kept
/// as usual). The node keeps serving.
#[utoipa::path(post, path = "/v1/worker/admin/stop-all-orchestrator-directed", tag = "jobs", security(("bearer" = [])),
    responses((status = 200, description = "Every job stopped, every session ended", body = StopAllWire), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn stop_all(State(node): State<SharedNode>) -> Response {
    let (stopped_jobs, ended_sessions) = node.stop_all_work("stopped by the orchestrator");
    tracing::info!(
        stopped_jobs,
        ended_sessions,
        "orchestrator-directed stop of all work"
    );
    node.telemetry.service(
        telemetry::WORKER_API,
        "info",
        "stop of all orchestrator-directed work",
        serde_json::json!({ "stopped_jobs": stopped_jobs, "ended_sessions": ended_sessions }),
    );
    Json(StopAllWire {
        version: 1,
        stopped_jobs,
        ended_sessions,
    })
    .into_response()
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(super) struct StopRequest {
    #[schema(required = true)]
    version: Option<i64>,
    #[schema(required = true)]
    task_id: Option<String>,
    #[schema(required = true)]
    job_id: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct StopResponse {
    version: u32,
    task_id: String,
    job_id: String,
    /// `stopping` when a running job was told to stop, `not_running` otherwise.
    #[schema(value_type = String)]
    status: &'static str,
}

#[utoipa::path(post, path = "/v1/worker/jobs:stop", tag = "jobs", security(("bearer" = [])),
    request_body = StopRequest,
    responses((status = 200, description = "`stopping` or `not_running`", body = StopResponse), (status = "default", response = crate::problem::ProblemResponse)))]
pub async fn stop(State(node): State<SharedNode>, headers: HeaderMap, body: Body) -> Response {
    let result = async {
        let req: StopRequest = read_json(&headers, body, node.config().max_request_bytes).await?;
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

/// A job's state: `in_progress` (or `accepted`) while it runs, else its result.
#[derive(Serialize, utoipa::ToSchema)]
#[allow(dead_code)]
#[serde(untagged)]
pub(super) enum JobOrResult {
    Running(JobStatusWire),
    Done(RunResponse),
}

/// The states of a job that has no result yet (for the OpenAPI document).
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
pub(super) enum RunningState {
    Accepted,
    InProgress,
}
