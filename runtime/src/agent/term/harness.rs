//! The term1 harness: what a Terminal-Bench style harness does around a term SDK 1.x agent,
//! for `term run`. Ask the agent, run its command with the harness's cwd tracking, feed the
//! result back, until the agent says the task is complete or a limit is reached.
//!
//! Cwd tracking as the reference harnesses do it: a command that is only `cd X` moves the
//! tracked directory when X exists; anything else runs as `sh -c "cd CWD && CMD"` (60 s
//! each); the next request carries the output (stdout then stderr), exit code and cwd.

use std::time::{Duration, Instant};

use super::monitor::TaskEvent;
use super::run::AgentRunner;
use super::{SolveRequest, TASK_MOUNT, TaskSpec};
use crate::job::{JobSpec, JobStatus};
use crate::runtime::Sandbox;

/// The harness's per-command timeout.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// How an episode ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Episode {
    /// The agent said the task is complete.
    pub completed: bool,
    /// Commands run.
    pub steps: u32,
    /// Why the episode stopped early, if it did.
    pub error: Option<String>,
}

/// Plays one episode of a term1 agent in `sandbox`. Commands, outputs and the agent's
/// `text` are told to the runner's event sink as they happen.
pub async fn play(runner: &mut AgentRunner, sandbox: &Sandbox, task: &TaskSpec) -> Episode {
    let end = |completed: bool, steps: u32, error: Option<String>| Episode {
        completed,
        steps,
        error,
    };
    let deadline = crate::job::deadline_after(task.timeout);
    let timeout_error = || format!("Global timeout ({}s) exceeded", task.timeout.as_secs());
    let setup = tokio::time::timeout_at(deadline.into(), runner.setup())
        .await
        .unwrap_or_else(|_| Err(timeout_error()));
    if let Err(e) = setup {
        return end(false, 0, Some(format!("the agent's setup failed: {e}")));
    }
    let mut cwd = TASK_MOUNT.to_string();
    let mut request = SolveRequest {
        instruction: task.instruction.clone(),
        step: 1,
        cwd: cwd.clone(),
        ..SolveRequest::default()
    };
    let mut steps = 0;
    loop {
        let response = match tokio::time::timeout_at(deadline.into(), runner.solve(&request)).await
        {
            Err(_) => return end(false, steps, Some(timeout_error())),
            Ok(Err(e)) => return end(false, steps, Some(format!("agent error: {e}"))),
            Ok(Ok(r)) => r,
        };
        if let Some(text) = response.text.as_ref().filter(|t| !t.is_empty()) {
            runner.emit(&TaskEvent::Log(text.clone()));
        }
        let command = response.command_to_run();
        if let Some(command) = &command {
            if steps >= task.max_steps {
                return end(
                    false,
                    steps,
                    Some(format!("Max steps ({}) exceeded", task.max_steps)),
                );
            }
            steps += 1;
            runner.emit(&TaskEvent::Command {
                step: steps,
                command: command.clone(),
            });
            let remaining = deadline.saturating_duration_since(Instant::now());
            let (output, exit_code) = match tokio::time::timeout(
                remaining,
                run_tracked(sandbox, &mut cwd, command),
            )
            .await
            {
                Ok(r) => r,
                Err(_) => return end(false, steps, Some(timeout_error())),
            };
            runner.emit(&TaskEvent::Output {
                step: steps,
                stdout: output.clone(),
                stderr: String::new(),
                exit_code,
            });
            request = SolveRequest {
                instruction: task.instruction.clone(),
                step: request.step + 1,
                last_command: Some(command.clone()),
                output: Some(output),
                exit_code: Some(exit_code),
                cwd: cwd.clone(),
            };
        } else {
            request = SolveRequest {
                instruction: task.instruction.clone(),
                step: request.step + 1,
                cwd: cwd.clone(),
                ..SolveRequest::default()
            };
        }
        if response.task_complete {
            return end(true, steps, None);
        }
        if command.is_none() && request.step > task.max_steps.saturating_add(1) {
            return end(
                false,
                steps,
                Some(format!("Max steps ({}) exceeded", task.max_steps)),
            );
        }
    }
}

/// Runs one harness command: `cd X` alone moves the tracked directory when X exists;
/// anything else runs as `sh -c "cd CWD && CMD"`. Output is stdout then stderr.
async fn run_tracked(sandbox: &Sandbox, cwd: &mut String, command: &str) -> (String, i32) {
    if let Some(target) = lone_cd(command) {
        let dest = resolve(cwd, &target);
        if sandbox.is_dir(&dest) {
            *cwd = dest;
            return (String::new(), 0);
        }
    }
    let script = format!("cd {} && {command}", shell_quote(cwd));
    match sandbox
        .run(
            JobSpec::shell(script)
                .timeout(COMMAND_TIMEOUT)
                .start_wait(crate::capacity::ROOM_WAIT),
        )
        .await
    {
        Ok(out) if out.status == JobStatus::Timeout => (
            format!("Command timed out after {}s", COMMAND_TIMEOUT.as_secs()),
            -1,
        ),
        Ok(out) => (format!("{}{}", out.stdout, out.stderr), out.exit_code),
        Err(e) => (format!("{e:#}"), -1),
    }
}

/// `X` when the command is just `cd X` (or `cd` alone: the task directory).
fn lone_cd(command: &str) -> Option<String> {
    let c = command.trim();
    let rest = c.strip_prefix("cd")?;
    if rest.is_empty() {
        return Some(TASK_MOUNT.to_string());
    }
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let arg = rest.trim();
    if arg.is_empty() {
        return Some(TASK_MOUNT.to_string());
    }
    let unquoted = if arg.len() >= 2
        && ((arg.starts_with('\'') && arg.ends_with('\''))
            || (arg.starts_with('"') && arg.ends_with('"')))
    {
        &arg[1..arg.len() - 1]
    } else {
        arg
    };
    let special = |ch: char| ";&|<>()$`\\\"' \t\n*?[]{}~".contains(ch);
    if unquoted.is_empty() || (unquoted == arg && arg.chars().any(special)) {
        return None;
    }
    Some(unquoted.to_string())
}

/// `path` against `cwd`, with `.` and `..` resolved.
fn resolve(cwd: &str, path: &str) -> String {
    let full = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{cwd}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for p in full.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_cd_is_recognised() {
        assert_eq!(lone_cd("cd src").as_deref(), Some("src"));
        assert_eq!(lone_cd("  cd '/tmp/a b'  ").as_deref(), Some("/tmp/a b"));
        assert_eq!(lone_cd("cd").as_deref(), Some("/app"));
        assert_eq!(lone_cd("cd src && ls"), None);
        assert_eq!(lone_cd("cdx"), None);
        assert_eq!(lone_cd("cd $HOME"), None);
        assert_eq!(resolve("/app/x", "../y/./z"), "/app/y/z");
    }
}
