//! The node's table of jobs: those running now (by job id) and the answers of recently
//! finished ones, so that an orchestrator retrying the same `job_id` never runs it twice and
//! gets the same answer. Finished answers are kept up to a count and a number of bytes.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use tokio::sync::watch;
use wasbox_runtime::StopSignal;

use super::wire::RunResponse;

/// Finished answers kept for retries, at most this many...
const KEEP_FINISHED: usize = 1024;
/// ...and at most this many bytes of output together.
const KEEP_FINISHED_BYTES: usize = 64 << 20;

/// Ids remembered as "in the store only" at most (a retry of a job forgotten past this
/// runs again).
const KEEP_STORED_IDS: usize = 500_000;

#[derive(Default)]
pub(super) struct JobTable {
    running: HashMap<String, RunningJob>,
    finished: HashMap<String, Arc<RunResponse>>,
    finished_order: VecDeque<String>,
    finished_bytes: usize,
    /// Finished jobs whose answers are no longer in memory but may be in the node's store
    /// (from an earlier boot, or pushed out of memory since): only these cost a store
    /// lookup when their id comes again.
    stored: HashSet<String>,
}

struct RunningJob {
    task_id: String,
    stop: StopSignal,
    done: watch::Receiver<Option<Arc<RunResponse>>>,
}

/// What a request for a job id finds.
pub(super) enum Claim {
    /// Nobody runs it: this request does, and sends the answer when done.
    Run(watch::Sender<Option<Arc<RunResponse>>>, StopSignal),
    /// Another request runs it: wait for that answer.
    Wait(watch::Receiver<Option<Arc<RunResponse>>>),
    Done(Arc<RunResponse>),
    /// Another task runs a job of this id.
    Conflict,
}

/// What a kept answer holds: its output, and its JSON (written here if it was not yet, so
/// that the size of an answer never changes while it is kept).
fn size(r: &RunResponse) -> usize {
    r.result.stdout.len() + r.result.stderr.len() + r.json().len() + 256
}

impl JobTable {
    /// A table that knows which job ids the store kept from earlier boots.
    pub(super) fn with_stored(ids: impl IntoIterator<Item = String>) -> JobTable {
        JobTable {
            stored: ids.into_iter().take(KEEP_STORED_IDS).collect(),
            ..JobTable::default()
        }
    }

    /// Whether the store may hold an answer for `job_id` that memory does not.
    pub(super) fn maybe_stored(&self, job_id: &str) -> bool {
        self.stored.contains(job_id)
    }

    /// Looks `job_id` up for `task_id`, and registers it as running when nobody runs it.
    pub(super) fn claim(&mut self, task_id: &str, job_id: &str) -> Claim {
        if let Some(done) = self.finished.get(job_id).filter(|d| d.task_id == task_id) {
            return Claim::Done(done.clone());
        }
        match self.running.get(job_id) {
            Some(r) if r.task_id == task_id => return Claim::Wait(r.done.clone()),
            Some(_) => return Claim::Conflict,
            None => {}
        }
        let (tx, rx) = watch::channel(None);
        let stop = StopSignal::new();
        self.running.insert(
            job_id.to_string(),
            RunningJob {
                task_id: task_id.to_string(),
                stop: stop.clone(),
                done: rx,
            },
        );
        Claim::Run(tx, stop)
    }

    /// Forgets a running job that produced no answer.
    pub(super) fn abandon(&mut self, job_id: &str) {
        self.running.remove(job_id);
    }

    /// Stops the running job `job_id` of `task_id`; false when there is none.
    pub(super) fn stop(&self, task_id: &str, job_id: &str) -> bool {
        match self.running.get(job_id) {
            Some(job) if job.task_id == task_id => {
                job.stop.stop();
                true
            }
            _ => false,
        }
    }

    /// Stops every running job; returns how many.
    pub(super) fn stop_all(&mut self) -> usize {
        for job in self.running.values() {
            job.stop.stop();
        }
        self.running.len()
    }

    pub(super) fn running(&self) -> usize {
        self.running.len()
    }

    /// Whether `job_id` runs now, and for which task.
    pub(super) fn running_task(&self, job_id: &str) -> Option<&str> {
        self.running.get(job_id).map(|r| r.task_id.as_str())
    }

    /// The kept answer of a finished job.
    pub(super) fn finished(&self, job_id: &str) -> Option<Arc<RunResponse>> {
        self.finished.get(job_id).cloned()
    }

    /// Forgets a finished answer (the orchestrator has it).
    pub(super) fn forget(&mut self, job_id: &str) -> bool {
        self.stored.remove(job_id);
        match self.finished.remove(job_id) {
            Some(r) => {
                self.finished_bytes -= size(&r);
                self.finished_order.retain(|j| j != job_id);
                true
            }
            None => false,
        }
    }

    /// Records a job's answer for retries.
    pub(super) fn finish(&mut self, job_id: &str, answer: Arc<RunResponse>) {
        self.running.remove(job_id);
        self.finished_bytes += size(&answer);
        if let Some(old) = self.finished.insert(job_id.to_string(), answer) {
            self.finished_bytes -= size(&old);
        } else {
            self.finished_order.push_back(job_id.to_string());
        }
        while self.finished_order.len() > KEEP_FINISHED
            || (self.finished_bytes > KEEP_FINISHED_BYTES && self.finished_order.len() > 1)
        {
            let Some(old) = self.finished_order.pop_front() else {
                break;
            };
            if let Some(r) = self.finished.remove(&old) {
                self.finished_bytes -= size(&r);
            }
            if self.stored.len() >= KEEP_STORED_IDS {
                self.stored.clear();
            }
            self.stored.insert(old);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::wire::{ResultWire, TruncatedWire};

    fn answer(job_id: &str, bytes: usize) -> Arc<RunResponse> {
        Arc::new(RunResponse {
            version: 1,
            task_id: "t".into(),
            job_id: job_id.into(),
            result: ResultWire {
                status: "completed",
                exit_code: 0,
                stdout: "x".repeat(bytes),
                stderr: String::new(),
                started_at: String::new(),
                ended_at: String::new(),
                truncated: TruncatedWire {
                    stdout: false,
                    stderr: false,
                },
            },
            json: Default::default(),
        })
    }

    #[test]
    fn finished_answers_are_bounded_by_count_and_bytes() {
        let mut t = JobTable::default();
        for i in 0..(KEEP_FINISHED + 10) {
            t.finish(&format!("j{i}"), answer(&format!("j{i}"), 1));
        }
        assert_eq!(t.finished.len(), KEEP_FINISHED);
        assert!(
            matches!(t.claim("t", "j0"), Claim::Run(..)),
            "the oldest is forgotten"
        );
        let mut t = JobTable::default();
        for i in 0..1000 {
            t.finish(&format!("j{i}"), answer(&format!("j{i}"), 256 << 10));
        }
        assert!(
            t.finished_bytes <= KEEP_FINISHED_BYTES,
            "{}",
            t.finished_bytes
        );
        assert!(t.finished.len() < 300);
        assert!(matches!(t.claim("t", "j999"), Claim::Done(_)));
    }

    #[test]
    fn a_job_id_is_claimed_once_per_task() {
        let mut t = JobTable::default();
        assert!(matches!(t.claim("a", "j"), Claim::Run(..)));
        assert!(matches!(t.claim("a", "j"), Claim::Wait(_)));
        assert!(matches!(t.claim("b", "j"), Claim::Conflict));
        assert!(t.stop("a", "j"));
        assert!(!t.stop("b", "j"));
        t.abandon("j");
        assert!(matches!(t.claim("b", "j"), Claim::Run(..)));
    }
}
