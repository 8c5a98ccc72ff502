//! Jobs: one command run to its end in a sandbox, with bounded output capture, a deadline
//! and a stop signal, reported as a [`JobOutput`].

use crate::sync::lock;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;

use crate::capacity::Admission;
use crate::engine::Placement;
use crate::host::{JobContext, Site, StartFailure, StartReport, Stdio, environment, run_process};
use crate::io::{Capture, InputSource, OutputSink, PipeReader, PipeWriter, Terminal, pipe};
use crate::limits::EXIT_TIMEOUT;

/// Where a job's stdout or stderr goes.
#[derive(Default)]
pub enum Output {
    /// Captured into [`JobOutput`], up to the sandbox's `max_output_bytes`.
    #[default]
    Capture,
    /// Written to a host writer as it is produced (nothing is captured).
    Stream(Box<dyn Write + Send>),
    /// Into a pipe the host reads as the job runs; writers wait while it is full.
    Pipe(PipeWriter),
}

/// Where a job's stdin comes from.
pub enum Input {
    /// These bytes, then end of file.
    Bytes(Vec<u8>),
    /// A pipe the host writes to as the job runs (e.g. a terminal's keystrokes).
    Pipe(PipeReader),
}

impl Default for Input {
    fn default() -> Self {
        Input::Bytes(Vec::new())
    }
}

/// Stops a running job from another task. Cheap to clone.
#[derive(Clone, Default)]
pub struct StopSignal(Arc<Mutex<StopState>>);

#[derive(Default)]
struct StopState {
    requested: bool,
    job: Option<std::sync::Weak<JobContext>>,
}

impl StopSignal {
    pub fn new() -> Self {
        Self::default()
    }

    /// Stops the job (now, or as soon as it starts). The job ends with status `failed`,
    /// exit code 137 and a note on stderr.
    pub fn stop(&self) {
        let mut s = lock(&self.0);
        s.requested = true;
        if let Some(job) = s.job.as_ref().and_then(|j| j.upgrade()) {
            job.stop();
        }
    }

    /// Whether two signals are clones of one another.
    pub fn same_as(&self, other: &StopSignal) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Like Ctrl-C on a terminal: ends the job's running child processes (their waiters see
    /// status 130) and tells the shell, which goes back to its prompt. The job goes on.
    /// Returns whether a child process was running.
    pub fn interrupt(&self) -> bool {
        let s = lock(&self.0);
        match s.job.as_ref().and_then(|j| j.upgrade()) {
            Some(job) => job.interrupt(),
            None => false,
        }
    }

    fn attach(&self, job: &Arc<JobContext>) {
        let mut s = lock(&self.0);
        s.job = Some(Arc::downgrade(job));
        if s.requested {
            job.stop();
        }
    }
}

/// What to run.
pub struct JobSpec {
    /// Program and arguments; `argv[0]` names a program of the image.
    pub argv: Vec<String>,
    /// Variables added to the sandbox's environment (later ones win).
    pub env: Vec<(String, String)>,
    /// Working directory inside the sandbox; the mount point when `None`.
    pub cwd: Option<String>,
    /// Deadline; the sandbox's limit when `None` (and never more than it).
    pub timeout: Option<Duration>,
    pub stdin: Input,
    pub stdout: Output,
    pub stderr: Output,
    pub stop: Option<StopSignal>,
    /// The terminal the job runs on, if any (sets `TERM`, `COLUMNS`, `LINES`).
    pub terminal: Option<Terminal>,
    /// A place for the job's first process taken ahead (see [`Runtime::admit`]); without
    /// one, the process takes a place when it starts, or fails to start.
    ///
    /// [`Runtime::admit`]: crate::Runtime::admit
    pub admission: Option<Admission>,
    /// Told once the job's first process has its instance (`Ok`), or why it could not get
    /// one (a refused place, memory or address space, a program that failed to load). A
    /// program that is not in the image counts as started: it fails like a shell's command
    /// (127), on the job's own output.
    pub started: Option<StartReport>,
    /// How long each process of the job may wait for room that other sandboxes hold (see
    /// [`StartFailure::for_lack_of_room`]) before it fails to start, never past the job's
    /// deadline. None by default.
    pub start_wait: Duration,
}

impl JobSpec {
    pub fn new<S: Into<String>>(argv: impl IntoIterator<Item = S>) -> Self {
        JobSpec {
            argv: argv.into_iter().map(Into::into).collect(),
            env: Vec::new(),
            cwd: None,
            timeout: None,
            stdin: Input::default(),
            stdout: Output::Capture,
            stderr: Output::Capture,
            stop: None,
            terminal: None,
            admission: None,
            started: None,
            start_wait: Duration::ZERO,
        }
    }

    /// `sh -c SCRIPT`.
    pub fn shell(script: impl Into<String>) -> Self {
        Self::new(["sh".to_string(), "-c".to_string(), script.into()])
    }

    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }
    pub fn cwd(mut self, cwd: impl Into<String>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
    /// Bytes given on stdin (then end of file).
    pub fn stdin(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.stdin = Input::Bytes(data.into());
        self
    }
    pub fn stdin_pipe(mut self, reader: PipeReader) -> Self {
        self.stdin = Input::Pipe(reader);
        self
    }
    pub fn terminal(mut self, terminal: Terminal) -> Self {
        self.terminal = Some(terminal);
        self
    }
    pub fn stdout(mut self, out: Output) -> Self {
        self.stdout = out;
        self
    }
    pub fn stderr(mut self, out: Output) -> Self {
        self.stderr = out;
        self
    }
    /// Starts the job's first process in the place `admission` holds.
    pub fn admission(mut self, admission: Admission) -> Self {
        self.admission = Some(admission);
        self
    }
    pub fn stop_signal(mut self, stop: StopSignal) -> Self {
        self.stop = Some(stop);
        self
    }
    /// Reports the start of the job's first process to `report` (see [`JobSpec::started`]).
    pub fn report_start(mut self, report: StartReport) -> Self {
        self.started = Some(report);
        self
    }
    /// Lets each process wait up to `wait` for room other sandboxes hold (see
    /// [`JobSpec::start_wait`]).
    pub fn start_wait(mut self, wait: Duration) -> Self {
        self.start_wait = wait;
        self
    }
}

/// How a job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobStatus {
    /// Exit code 0.
    Completed,
    /// A non-zero exit code, a trap, or a stop request.
    Failed,
    /// The deadline passed (exit code 124).
    Timeout,
}

impl JobStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Completed => "completed",
            JobStatus::Failed => "failed",
            JobStatus::Timeout => "timeout",
        }
    }
}

/// Which captured streams lost bytes to the output limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Truncated {
    pub stdout: bool,
    pub stderr: bool,
}

/// The result of a job.
#[derive(Clone, Debug)]
pub struct JobOutput {
    pub status: JobStatus,
    pub exit_code: i32,
    /// Captured stdout (empty when streamed), cut on a UTF-8 boundary when truncated.
    pub stdout: String,
    pub stderr: String,
    pub truncated: Truncated,
    pub started_at: SystemTime,
    pub ended_at: SystemTime,
    /// Why the job's first process did not start, when it did not (the job then failed
    /// with the reason on its stderr). See [`JobOutput::lacked_room`].
    pub start_failure: Option<StartFailure>,
}

impl JobOutput {
    /// Its first process never started, only for room the node's other sandboxes held
    /// (after [`JobSpec::start_wait`]): the same job may succeed when retried. A front-end
    /// answers it as a refusal (a 429), not as the job's result.
    pub fn lacked_room(&self) -> Option<&StartFailure> {
        self.start_failure.as_ref().filter(|f| f.for_lack_of_room)
    }
}

/// Exit code of a job stopped on request, as after SIGKILL.
pub const EXIT_STOPPED: i32 = 137;
/// How long the end of a job waits for its child processes to be gone (each has been told
/// to stop; one busy on another thread ends at its next yield point).
const CHILDREN_END_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

fn sink(out: Output, limit: usize) -> (OutputSink, Option<Capture>) {
    match out {
        Output::Capture => {
            let c = Capture::new(limit);
            (OutputSink::Capture(c.clone()), Some(c))
        }
        Output::Stream(w) => (OutputSink::Writer(Arc::new(Mutex::new(w))), None),
        Output::Pipe(w) => (OutputSink::Pipe(w), None),
    }
}

/// Runs one job in a sandbox to its end.
pub(crate) async fn run(site: &Site, spec: JobSpec) -> Result<JobOutput> {
    anyhow::ensure!(
        !spec.argv.is_empty(),
        "a job needs a command (argv is empty)"
    );
    let sandbox = &site.sandbox;
    let limits = &sandbox.limits;
    let timeout = spec
        .timeout
        .map_or(limits.timeout, |t| t.min(limits.timeout));
    // Compiling a program on its first use is the runtime's cost, not the job's: load the
    // job's own program before its clock starts (errors surface when it runs).
    if let Some(index) = site.image.image.resolve(&spec.argv[0]) {
        let placement = if spec.terminal.is_some() {
            site.host.unpooled(site.sandbox.limits.memory_bytes)
        } else {
            Placement::Pool
        };
        let _ = site.image.program(&site.host, index, placement).await;
    }
    let started_at = SystemTime::now();
    let job = Arc::new(JobContext::new(
        site.clone(),
        deadline_after(timeout),
        spec.terminal.clone(),
        spec.admission,
        spec.start_wait,
    ));
    job.first_start(spec.started);
    if let Some(stop) = &spec.stop {
        stop.attach(&job);
    }

    // In normal form (`/a/b`), which a guest takes without asking the host again.
    let cwd = match &spec.cwd {
        Some(c) => format!(
            "/{}",
            crate::sandbox::normalize(&sandbox.mount, c).join("/")
        ),
        None => sandbox.workdir.clone(),
    };
    let mut extra = spec.env;
    if let Some(t) = &spec.terminal {
        let (cols, rows) = t.size();
        extra.push(("TERM".into(), "xterm-256color".into()));
        extra.push(("COLUMNS".into(), cols.to_string()));
        extra.push(("LINES".into(), rows.to_string()));
    }
    let env = environment(sandbox, &extra, &cwd);

    let stdin = match spec.stdin {
        Input::Bytes(b) if b.is_empty() => InputSource::Null,
        Input::Bytes(b) => {
            let (r, w) = pipe(b.len());
            w.write_all(&b).await?;
            InputSource::Pipe(r)
        }
        Input::Pipe(r) => InputSource::Pipe(r),
    };
    let (stdout, out_capture) = sink(spec.stdout, limits.max_output_bytes);
    let (stderr, err_capture) = sink(spec.stderr, limits.max_output_bytes);
    let note_sink = stderr.clone();
    let stdio = Stdio {
        stdin,
        stdout,
        stderr,
    };

    let pids = crate::host::Pids {
        pid: job.site.sandbox.new_pid(),
        ppid: 0,
    };
    let process = run_process(job.clone(), spec.argv, env, cwd, stdio, None, pids);
    // A stop ends the processes too, so the process may report first: what it ended
    // with is decided by the flag, not by which branch wins.
    // Ended by a signal from another job's process: 128 + the signal, as a shell shows it.
    let stopped = || match job.killed_by() {
        Some(signal) => (JobStatus::Failed, 128 + i32::from(signal)),
        None => (JobStatus::Failed, EXIT_STOPPED),
    };
    let (status, exit_code) = tokio::select! {
        biased;
        _ = job.stopped() => stopped(),
        code = process => match code {
            _ if job.was_stopped() => stopped(),
            0 => (JobStatus::Completed, 0),
            EXIT_TIMEOUT if Instant::now() >= job.deadline() => (JobStatus::Timeout, EXIT_TIMEOUT),
            code => (JobStatus::Failed, code),
        },
        _ = tokio::time::sleep_until(job.deadline().into()) => (JobStatus::Timeout, EXIT_TIMEOUT),
    };
    job.abort_all();
    // The job ends when its processes have: a snapshot or fork asked for once it has
    // answered must not find a child still on its way out.
    if !job.children_ended(CHILDREN_END_WAIT).await {
        tracing::warn!("a job's child processes still ending after its end");
    }
    // A write refused for the quota reaches most programs as EIO (wasi-libc turns every
    // stream error into EIO): say what happened.
    if sandbox.quota.take_exceeded() {
        let (bytes, inodes) = sandbox.quota.limits();
        let note = format!(
            "wasbox: the sandbox's disk quota is full ({} MiB, {inodes} files and directories)\n",
            bytes >> 20
        );
        let _ = note_sink.write_all(note.as_bytes()).await;
    }
    for v in &sandbox.volumes {
        let quota = &v.attachment.0.quota;
        if quota.take_exceeded() {
            let (bytes, inodes) = quota.limits();
            let note = format!(
                "wasbox: volume `{}` at {} is full ({} MiB, {inodes} files and directories)\n",
                v.attachment.0.record().name,
                v.path,
                bytes >> 20
            );
            let _ = note_sink.write_all(note.as_bytes()).await;
        }
    }
    let note = match (status, exit_code) {
        (JobStatus::Timeout, _) => Some(format!(
            "wasbox: job timed out after {}s\n",
            timeout.as_secs_f64()
        )),
        (_, EXIT_STOPPED) => Some("wasbox: job stopped by request\n".to_string()),
        _ => None,
    };
    if let Some(note) = note {
        let _ = note_sink.write_all(note.as_bytes()).await;
    }
    let (stdout, out_trunc) = out_capture.map(|c| c.text()).unwrap_or_default();
    let (stderr, err_trunc) = err_capture.map(|c| c.text()).unwrap_or_default();
    Ok(JobOutput {
        status,
        exit_code,
        stdout,
        stderr,
        truncated: Truncated {
            stdout: out_trunc,
            stderr: err_trunc,
        },
        started_at,
        ended_at: SystemTime::now(),
        start_failure: job.start_failure(),
    })
}

/// `now + timeout`, or a point far enough ahead to mean "never" when that overflows.
pub(crate) fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}
