//! Term-challenge agents: components of world `wasbox:term/agent@2.0.0` (term SDK 2.0,
//! "term2") or `wasbox:term/agent@1.0.0` (term SDK 1.x, "term1"), hosted in a sandbox whose
//! workspace is the task directory.
//!
//! The host side of the SDK lives here, one step per module: [`load`] (compile a component
//! and tell which SDK it was written for), [`context`] (term2's `context` import: shell
//! commands as `sh -c` jobs of the task sandbox, files, steps, history, `done`), [`monitor`]
//! (the task state `/status` shows), [`run`] (an instance at work: setup, tasks or requests,
//! cleanup, the limits the SDK enforces, which a wasm host can enforce even on a stuck
//! agent) and [`harness`] (the term1 harness: cwd tracking, one command per request). The
//! LLM is reached through `wasbox:llm`, served by [`LlmProxy`]. Front-ends (HTTP, stdio,
//! `term run`) only translate wire formats to these calls.

mod context;
pub mod harness;
mod load;
mod monitor;
mod run;

use std::time::Duration;

use crate::io::OutputSink;
use crate::runtime::Sandbox;

pub use super::llm::{
    ChatBackend, ChatCompletion, ChatError, ChatRequest, DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE,
    LlmCall, LlmProxy,
};
pub use load::TermAgent;
pub use monitor::{
    AlreadyRunning, EventSink, HistoryEntry, TaskEvent, TaskMonitor, TaskSnapshot, TaskStatus,
};
pub use run::AgentRunner;

/// `/start` defaults of term SDK 2.0.
pub const DEFAULT_MAX_STEPS: u32 = 200;
pub const DEFAULT_TASK_TIMEOUT: Duration = Duration::from_secs(300);
/// `ctx.shell` timeout when the agent gives none.
pub const DEFAULT_COMMAND_TIMEOUT_SECS: f64 = 60.0;
/// `/status` keeps this many history entries, commands and outputs cut to these lengths
/// (characters).
pub const HISTORY_LEN: usize = 30;
pub const HISTORY_COMMAND_CHARS: usize = 200;
pub const HISTORY_OUTPUT_CHARS: usize = 500;
/// How long `setup` may take, and `cleanup`.
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(120);
pub const CLEANUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one term1 `solve` may take (term1 harnesses end an agent after 300 s).
pub const SOLVE_TIMEOUT: Duration = Duration::from_secs(300);
/// Largest file `ctx.read` returns.
pub const MAX_READ_BYTES: u64 = 10 << 20;
/// Where the task directory appears inside the sandbox.
pub const TASK_MOUNT: &str = "/app";

/// Which term SDK an agent component was written for, read from its exports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TermVersion {
    /// World `wasbox:term/agent@2.0.0`: `setup`, `run(task)`, `cleanup`.
    Term2,
    /// World `wasbox:term/agent@1.0.0`: `setup`, `solve(request)`, `cleanup`.
    Term1,
}

impl TermVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            TermVersion::Term2 => "term SDK 2.0 (wasbox:term/agent@2.0.0)",
            TermVersion::Term1 => "term SDK 1.x (wasbox:term/agent@1.0.0)",
        }
    }

    /// The world's name, as componentize-py and `wasm-tools` take it.
    pub fn world(self) -> &'static str {
        match self {
            TermVersion::Term2 => "wasbox:term/agent@2.0.0",
            TermVersion::Term1 => "wasbox:term/agent@1.0.0",
        }
    }
}

/// Where an agent runs and what it may reach.
#[derive(Clone)]
pub struct AgentEnv {
    /// The task sandbox: its workspace is the task directory, mounted at `/app` by
    /// convention, and shell commands run in it.
    pub sandbox: Sandbox,
    /// The agent's only way out.
    pub llm: LlmProxy,
    /// Where the agent's own stdout and stderr go (its logs).
    pub log: OutputSink,
    /// Environment of the agent component (shell commands get the sandbox's).
    pub env: Vec<(String, String)>,
    /// Told about every command, output, log line and LLM call.
    pub on_event: Option<EventSink>,
}

/// A task as `POST /start` gives it.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskSpec {
    pub instruction: String,
    pub max_steps: u32,
    pub timeout: Duration,
}

impl TaskSpec {
    /// A task with term SDK 2.0's defaults (200 steps, 300 s).
    pub fn new(instruction: impl Into<String>) -> Self {
        TaskSpec {
            instruction: instruction.into(),
            max_steps: DEFAULT_MAX_STEPS,
            timeout: DEFAULT_TASK_TIMEOUT,
        }
    }
}

/// A request of term SDK 1.x (one line from the harness).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SolveRequest {
    pub instruction: String,
    pub step: u32,
    pub last_command: Option<String>,
    pub output: Option<String>,
    pub exit_code: Option<i32>,
    pub cwd: String,
}

/// One command of the legacy Terminal-Bench response shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Keystrokes {
    pub keystrokes: String,
    pub duration: Option<f64>,
}

/// A response of term SDK 1.x (one line to the harness).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SolveResponse {
    pub command: Option<String>,
    pub task_complete: bool,
    pub text: Option<String>,
    pub analysis: Option<String>,
    pub plan: Option<String>,
    pub commands: Vec<Keystrokes>,
}

impl SolveResponse {
    /// The command the harness runs: a non-empty `command` wins, else the legacy
    /// keystrokes (a trailing newline is Enter, so it is dropped).
    pub fn command_to_run(&self) -> Option<String> {
        if let Some(c) = self.command.as_ref().filter(|c| !c.trim().is_empty()) {
            return Some(c.clone());
        }
        let typed: Vec<String> = self
            .commands
            .iter()
            .map(|k| k.keystrokes.trim_end_matches('\n').to_string())
            .filter(|k| !k.trim().is_empty())
            .collect();
        (!typed.is_empty()).then(|| typed.join("\n"))
    }
}

/// The example agents built from `guest-components/agents/` and embedded in the crate.
pub const BUILTIN_AGENTS: &[&str] = &["llm-agent", "llm-agent-term1"];

static LLM_AGENT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/llm_agent.wasm"));
static LLM_AGENT_TERM1: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/llm_agent_term1.wasm"));

/// The component of a built-in example agent (see [`BUILTIN_AGENTS`]). `llm-agent-v1` is
/// the older name of `llm-agent-term1`.
pub fn builtin_agent(name: &str) -> Option<&'static [u8]> {
    match name {
        "llm-agent" => Some(LLM_AGENT),
        "llm-agent-term1" | "llm-agent-v1" => Some(LLM_AGENT_TERM1),
        _ => None,
    }
}

/// `s` cut to its first `n` characters.
fn truncate_chars(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => s[..i].to_string(),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_truncation_counts_characters() {
        assert_eq!(truncate_chars("héllo", 2), "hé");
        assert_eq!(truncate_chars("ab", 5), "ab");
        assert_eq!(truncate_chars(&"é".repeat(600), 500).chars().count(), 500);
    }

    #[test]
    fn legacy_keystrokes_become_the_command() {
        let r = SolveResponse {
            commands: vec![Keystrokes {
                keystrokes: "echo hi > f\n".into(),
                duration: Some(0.5),
            }],
            ..Default::default()
        };
        assert_eq!(r.command_to_run().as_deref(), Some("echo hi > f"));
        let r = SolveResponse {
            command: Some("ls".into()),
            ..r
        };
        assert_eq!(r.command_to_run().as_deref(), Some("ls"));
    }
}
