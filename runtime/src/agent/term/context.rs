//! The host side of a term agent's imports: term2's `context` (the SDK's `AgentContext`:
//! shell commands as `sh -c` jobs of the task sandbox, files of the task directory, steps,
//! history, `done`) and `wasbox:llm`, for term1 and term2 alike.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use wasmtime::component::{HasSelf, Linker};

use super::monitor::{TaskEvent, TaskMonitor};
use super::{AgentEnv, DEFAULT_COMMAND_TIMEOUT_SECS, MAX_READ_BYTES};
use crate::agent::llm::{self, HasLlm, LlmHost};
use crate::bindings::{term1, term2};
use crate::host::HostState;
use crate::job::{JobSpec, JobStatus, StopSignal};

/// A term agent's part of its store data.
pub(crate) struct TermHost {
    pub(super) env: AgentEnv,
    pub(super) monitor: Arc<TaskMonitor>,
    /// When the running task must end.
    pub(super) deadline: Option<Instant>,
    /// Why the host ended the agent (a limit), reported as the task's error.
    pub(super) fatal: Option<String>,
    pub(super) llm: LlmHost,
}

impl HasLlm for TermHost {
    fn llm(&mut self) -> &mut LlmHost {
        &mut self.llm
    }
}

/// The imports of both term worlds, beside WASI and the process import.
pub(super) fn add_to_linker(linker: &mut Linker<HostState<TermHost>>) -> wasmtime::Result<()> {
    term2::wasbox::term::context::add_to_linker::<_, HasSelf<TermHost>>(linker, |s| &mut s.ext)?;
    term2::wasbox::term::types::add_to_linker::<_, HasSelf<TermHost>>(linker, |s| &mut s.ext)?;
    term1::wasbox::term::types::add_to_linker::<_, HasSelf<TermHost>>(linker, |s| &mut s.ext)?;
    llm::add_to_linker(linker)
}

impl TermHost {
    fn emit(&self, event: TaskEvent) {
        if let Some(f) = &self.env.on_event {
            f(&event);
        }
    }

    /// Ends the agent: the call returns an error to wasmtime, so the guest cannot go on.
    fn fail(&mut self, message: String) -> wasmtime::Error {
        self.fatal = Some(message.clone());
        wasmtime::Error::msg(message)
    }

    /// Why the host ended the agent, if it did (a limit, or the LLM's cost limit).
    pub(super) fn take_fatal(&mut self) -> Option<String> {
        self.fatal.take().or_else(|| self.llm.fatal.take())
    }
}

/// Stops a shell job when the agent's call is abandoned (global timeout).
struct StopOnDrop(StopSignal);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// `Command timed out after 60s` (whole seconds without a fraction, like Python prints an
/// int).
fn seconds(t: f64) -> String {
    if t.fract() == 0.0 && t.abs() < 1e15 {
        format!("{}", t as i64)
    } else {
        format!("{t}")
    }
}

impl term2::wasbox::term::types::Host for TermHost {}
impl term1::wasbox::term::types::Host for TermHost {}

impl term2::wasbox::term::context::Host for TermHost {
    async fn instruction(&mut self) -> wasmtime::Result<String> {
        Ok(self.monitor.instruction())
    }

    async fn step(&mut self) -> wasmtime::Result<u32> {
        Ok(self.monitor.steps())
    }

    async fn elapsed_secs(&mut self) -> wasmtime::Result<u64> {
        Ok(self.monitor.elapsed_secs())
    }

    async fn shell(
        &mut self,
        command: String,
        timeout_secs: Option<f64>,
        cwd: Option<String>,
    ) -> wasmtime::Result<term2::wasbox::term::types::ShellResult> {
        let past_deadline = self.deadline.is_some_and(|d| Instant::now() >= d);
        let step = match self.monitor.begin_step(past_deadline) {
            Ok(step) => step,
            Err(refusal) => return Err(self.fail(refusal)),
        };
        self.emit(TaskEvent::Command {
            step,
            command: command.clone(),
        });
        let timeout = timeout_secs
            .filter(|t| t.is_finite() && *t > 0.0)
            .unwrap_or(DEFAULT_COMMAND_TIMEOUT_SECS);
        let sandbox = &self.env.sandbox;
        let cwd = match cwd.filter(|c| !c.is_empty()) {
            Some(c) if c.starts_with('/') => c,
            Some(c) => format!("{}/{c}", sandbox.mount()),
            None => sandbox.mount().to_string(),
        };
        let stop = StopSignal::new();
        let _guard = StopOnDrop(stop.clone());
        let missing_cwd = !sandbox.is_dir(&cwd);
        let spec = JobSpec::shell(command.clone())
            .cwd(cwd.clone())
            .timeout(Duration::from_secs_f64(timeout.min(1e9)))
            .stop_signal(stop)
            .start_wait(crate::capacity::ROOM_WAIT);
        let ran = if missing_cwd {
            // As `cd CWD && ...` would fail; the command does not run.
            Err(anyhow!("sh: cd: {cwd}: No such file or directory"))
        } else {
            sandbox.run(spec).await
        };
        let (stdout, stderr, exit_code, timed_out) = match ran {
            Ok(out) if out.status == JobStatus::Timeout => (
                String::new(),
                format!("Command timed out after {}s", seconds(timeout)),
                -1,
                true,
            ),
            Ok(out) => (out.stdout, out.stderr, out.exit_code, false),
            Err(e) if missing_cwd => (String::new(), format!("{e}\n"), 1, false),
            Err(e) => (String::new(), format!("{e:#}"), -1, false),
        };
        self.emit(TaskEvent::Output {
            step,
            stdout: stdout.clone(),
            stderr: stderr.clone(),
            exit_code,
        });
        self.monitor
            .record(step, &command, &stdout, &stderr, exit_code);
        Ok(term2::wasbox::term::types::ShellResult {
            stdout,
            stderr,
            exit_code,
            timed_out,
        })
    }

    async fn read(&mut self, path: String) -> wasmtime::Result<Result<String, String>> {
        Ok(match self.env.sandbox.read_file(&path, MAX_READ_BYTES) {
            Ok(bytes) => String::from_utf8(bytes).map_err(|_| format!("{path}: not UTF-8 text")),
            Err(e) => Err(e.to_string()),
        })
    }

    async fn write(
        &mut self,
        path: String,
        content: String,
    ) -> wasmtime::Result<Result<(), String>> {
        Ok(self
            .env
            .sandbox
            .write_file(&path, content.as_bytes())
            .map_err(|e| e.to_string()))
    }

    async fn log(&mut self, message: String) -> wasmtime::Result<()> {
        let line = format!("[agent] {}\n", message.trim_end_matches('\n'));
        let _ = self.env.log.write_all(line.as_bytes()).await;
        self.emit(TaskEvent::Log(message));
        Ok(())
    }

    async fn done(&mut self) -> wasmtime::Result<()> {
        self.monitor.mark_done();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_print_like_python() {
        assert_eq!(seconds(60.0), "60");
        assert_eq!(seconds(0.5), "0.5");
    }
}
