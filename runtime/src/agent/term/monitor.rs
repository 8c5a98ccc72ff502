//! The state of a term agent's current (or last) task, shared between the agent's host and
//! whoever reports it (`/status`), and the events of a task as they happen (for transcripts
//! and logs).

use crate::sync::lock;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{HISTORY_COMMAND_CHARS, HISTORY_LEN, HISTORY_OUTPUT_CHARS, TaskSpec, truncate_chars};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskStatus {
    Idle,
    Running,
    Completed,
    Failed,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Idle => "idle",
            TaskStatus::Running => "running",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
        }
    }
}

/// One command of the history, cut like `/status` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryEntry {
    pub step: u32,
    pub command: String,
    /// stdout, then `"\n"` and stderr when stderr is not empty; `None` when both are.
    pub output: Option<String>,
    pub exit_code: i32,
}

/// What `/status` reports.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskSnapshot {
    pub status: TaskStatus,
    pub steps: u32,
    pub elapsed_secs: u64,
    pub error: Option<String>,
    pub done: bool,
    /// The last [`HISTORY_LEN`] commands, oldest first.
    pub history: Vec<HistoryEntry>,
}

#[derive(Default)]
struct TaskState {
    status: Option<TaskStatus>,
    instruction: String,
    max_steps: u32,
    timeout: Duration,
    started: Option<Instant>,
    steps: u32,
    error: Option<String>,
    done: bool,
    history: VecDeque<HistoryEntry>,
}

/// The state of the current (or last) task of an agent, shared between the agent host and
/// whoever reports it.
#[derive(Default)]
pub struct TaskMonitor(Mutex<TaskState>);

/// `POST /start` while a task runs.
#[derive(Debug, PartialEq, Eq)]
pub struct AlreadyRunning;

impl TaskMonitor {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn state(&self) -> std::sync::MutexGuard<'_, TaskState> {
        lock(&self.0)
    }

    /// Starts a task: steps, history, error and the clock start over. Refused while a task
    /// runs.
    pub fn try_start(&self, task: &TaskSpec) -> Result<(), AlreadyRunning> {
        let mut s = self.state();
        if s.status == Some(TaskStatus::Running) {
            return Err(AlreadyRunning);
        }
        *s = TaskState {
            status: Some(TaskStatus::Running),
            instruction: task.instruction.clone(),
            max_steps: task.max_steps,
            timeout: task.timeout,
            started: Some(Instant::now()),
            ..TaskState::default()
        };
        Ok(())
    }

    pub fn snapshot(&self) -> TaskSnapshot {
        let s = self.state();
        TaskSnapshot {
            status: s.status.unwrap_or(TaskStatus::Idle),
            steps: s.steps,
            elapsed_secs: s.started.map_or(0, |t| t.elapsed().as_secs()),
            error: s.error.clone(),
            done: s.done,
            history: s.history.iter().cloned().collect(),
        }
    }

    pub fn status(&self) -> TaskStatus {
        self.state().status.unwrap_or(TaskStatus::Idle)
    }

    /// Counts the next step (a shell command), or says why the task may not take one: it
    /// is done, at its step limit, or past its deadline.
    pub(super) fn begin_step(&self, past_deadline: bool) -> Result<u32, String> {
        let mut s = self.state();
        if s.done {
            return Err("Task already marked as done".to_string());
        }
        if s.steps >= s.max_steps {
            return Err(format!("Max steps ({}) exceeded", s.max_steps));
        }
        if past_deadline {
            return Err(format!(
                "Global timeout ({}s) exceeded",
                s.timeout.as_secs()
            ));
        }
        s.steps += 1;
        Ok(s.steps)
    }

    /// Adds a finished command to the history: its output is stdout, then `\n` and stderr
    /// when there is any; the command and output are cut to what `/status` shows, and only
    /// the last [`HISTORY_LEN`] entries are kept.
    pub(super) fn record(
        &self,
        step: u32,
        command: &str,
        stdout: &str,
        stderr: &str,
        exit_code: i32,
    ) {
        let output = match (stdout.is_empty(), stderr.is_empty()) {
            (true, true) => None,
            (_, true) => Some(stdout.to_string()),
            _ => Some(format!("{stdout}\n{stderr}")),
        };
        let mut s = self.state();
        if s.history.len() == HISTORY_LEN {
            s.history.pop_front();
        }
        s.history.push_back(HistoryEntry {
            step,
            command: truncate_chars(command, HISTORY_COMMAND_CHARS),
            output: output.map(|o| truncate_chars(&o, HISTORY_OUTPUT_CHARS)),
            exit_code,
        });
    }

    pub(super) fn mark_done(&self) {
        self.state().done = true;
    }

    pub(super) fn instruction(&self) -> String {
        self.state().instruction.clone()
    }

    pub(super) fn steps(&self) -> u32 {
        self.state().steps
    }

    pub(super) fn elapsed_secs(&self) -> u64 {
        self.state().started.map_or(0, |t| t.elapsed().as_secs())
    }

    pub(super) fn finish(&self, error: Option<String>) {
        let mut s = self.state();
        if s.status != Some(TaskStatus::Running) {
            return;
        }
        match error {
            Some(e) => {
                s.status = Some(TaskStatus::Failed);
                s.error = Some(e);
            }
            None => {
                s.status = Some(TaskStatus::Completed);
                s.done = true;
            }
        }
    }
}

/// What happens during a task, as it happens (for transcripts and logs).
#[derive(Clone, Debug)]
pub enum TaskEvent {
    /// A shell command starts.
    Command { step: u32, command: String },
    /// It ended: its whole output (not cut) and exit code.
    Output {
        step: u32,
        stdout: String,
        stderr: String,
        exit_code: i32,
    },
    /// `ctx.log`.
    Log(String),
    /// An LLM call ended.
    Llm { ok: bool, detail: String },
}

pub type EventSink = Arc<dyn Fn(&TaskEvent) + Send + Sync>;
