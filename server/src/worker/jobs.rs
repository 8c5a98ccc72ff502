//! `POST /v1/worker/jobs:run` and `POST /v1/worker/jobs:stop`.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use wasbox_runtime::{JobSpec, Limits, SandboxConfig, StopSignal};

use super::wire::{RESERVED_ENV, ResultWire, SandboxSpec, check_network_policy, check_timeout};
use super::{SharedNode, check_version, lock, read_json, required};
use crate::config::MAX_OUTPUT_BYTES;
use crate::problem::Problem;

#[derive(Deserialize)]
struct RunRequest {
    version: Option<i64>,
    task_id: Option<String>,
    job_id: Option<String>,
    sandbox: Option<SandboxSpec>,
}

#[derive(Serialize, Clone, Debug)]
struct RunResponse {
    version: u32,
    task_id: String,
    job_id: String,
    #[serde(flatten)]
    result: ResultWire,
}

/// Jobs running now (by job id) and the answers of recently finished ones, so that an
/// orchestrator retrying the same `job_id` never runs it twice and gets the same answer.
#[derive(Default)]
pub struct JobTable {
    running: HashMap<String, RunningJob>,
    finished: HashMap<String, Arc<RunResponse>>,
    finished_order: VecDeque<String>,
}

struct RunningJob {
    task_id: String,
    stop: StopSignal,
    done: watch::Receiver<Option<Arc<RunResponse>>>,
}

/// Finished answers kept for retries.
const KEEP_FINISHED: usize = 1024;

impl JobTable {
    pub fn stop_all(&mut self) {
        for job in self.running.values() {
            job.stop.stop();
        }
    }

    fn finish(&mut self, job_id: &str, answer: Arc<RunResponse>) {
        self.running.remove(job_id);
        if self.finished.insert(job_id.to_string(), answer).is_none() {
            self.finished_order.push_back(job_id.to_string());
        }
        while self.finished_order.len() > KEEP_FINISHED {
            if let Some(old) = self.finished_order.pop_front() {
                self.finished.remove(&old);
            }
        }
    }
}

/// What a request for a job id finds.
enum Claim {
    /// Nobody runs it: this request does.
    Run(watch::Sender<Option<Arc<RunResponse>>>, StopSignal),
    /// Another request runs it: wait for that answer.
    Wait(watch::Receiver<Option<Arc<RunResponse>>>),
    Done(Arc<RunResponse>),
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

    let claim = {
        let mut table = lock(&node.jobs);
        if let Some(done) = table.finished.get(&job_id).filter(|d| d.task_id == task_id) {
            Claim::Done(done.clone())
        } else if let Some(r) = table.running.get(&job_id).filter(|r| r.task_id == task_id) {
            Claim::Wait(r.done.clone())
        } else if table.running.contains_key(&job_id) {
            return Err(Problem::conflict(format!(
                "job `{job_id}` is already running for another task"
            )));
        } else {
            let (tx, rx) = watch::channel(None);
            let stop = StopSignal::new();
            table.running.insert(
                job_id.clone(),
                RunningJob {
                    task_id: task_id.clone(),
                    stop: stop.clone(),
                    done: rx,
                },
            );
            Claim::Run(tx, stop)
        }
    };
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
    };
    let slot = match node.slot() {
        Ok(s) => s,
        Err(p) => {
            lock(&node.jobs).running.remove(&job_id);
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
                let mut spec = JobSpec::new(argv).timeout(timeout).stop_signal(stop);
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
                    lock(&node.jobs).running.remove(&job_id);
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
        let status = match lock(&node.jobs).running.get(&job_id) {
            Some(job) if job.task_id == task_id => {
                job.stop.stop();
                tracing::info!(task_id = %task_id, job_id = %job_id, "job stop requested");
                "stopping"
            }
            _ => "not_running",
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
