//! Processes: one program of an image run as one instance in a store of its own, and the
//! `wasbox:sandbox/process` import through which a process starts others in the same
//! sandbox, wired to pipes, sandbox files or its own streams.
//!
//! Files named by a guest are opened through the sandbox's directory handles (cap-std),
//! never by host path, so nothing outside the workspace and `/tmp` can be reached.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::{AbortHandle, JoinHandle};
use wasmtime::Result;

use super::{Exit, Launch, Site, new_store};
use crate::bindings::process as wit;
use crate::io::{InputSource, OutputSink, PipeReader, PipeWriter, Terminal, pipe};
use crate::limits::{EXIT_INTERRUPTED, EXIT_NOT_FOUND, EXIT_TIMEOUT, PIPE_CAPACITY};
use crate::sandbox::{SandboxState, io_message};

/// State shared by every process of one job: its deadline, stop signal and counters.
pub(crate) struct JobContext {
    pub(crate) site: Site,
    deadline: Instant,
    stopped: AtomicBool,
    stop_notify: Notify,
    spawns: AtomicU32,
    tasks: std::sync::Mutex<Vec<AbortHandle>>,
    terminal: Option<Terminal>,
    /// An interrupt (Ctrl-C) the shell has not seen yet.
    interrupted: AtomicBool,
}

impl JobContext {
    pub(crate) fn new(site: Site, deadline: Instant, terminal: Option<Terminal>) -> Self {
        JobContext {
            site,
            deadline,
            stopped: AtomicBool::new(false),
            stop_notify: Notify::new(),
            spawns: AtomicU32::new(0),
            tasks: std::sync::Mutex::new(Vec::new()),
            terminal,
            interrupted: AtomicBool::new(false),
        }
    }

    /// Ctrl-C: ends every child process (not the job's first process) and raises the flag
    /// `take-interrupt` reports. Returns whether any child was running.
    pub(crate) fn interrupt(&self) -> bool {
        self.interrupted.store(true, Ordering::Release);
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        let mut any = false;
        for t in tasks {
            any |= !t.is_finished();
            t.abort();
        }
        any
    }

    pub(crate) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the job's processes must end now: stopped, or past the deadline.
    pub(crate) fn over(&self) -> bool {
        self.stopped.load(Ordering::Relaxed) || Instant::now() >= self.deadline
    }

    /// Stops every process of the job at its next yield point.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.stop_notify.notify_waiters();
        self.abort_all();
    }

    /// Whether [`stop`](Self::stop) was called.
    pub(crate) fn was_stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    pub(crate) async fn stopped(&self) {
        loop {
            let notified = self.stop_notify.notified();
            if self.stopped.load(Ordering::Relaxed) {
                return;
            }
            notified.await;
        }
    }

    /// Ends every child process still running (the job is over).
    pub(crate) fn abort_all(&self) {
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        for t in tasks {
            t.abort();
        }
    }
}

/// How a process's three standard streams are connected.
#[derive(Clone)]
pub(crate) struct Stdio {
    pub(crate) stdin: InputSource,
    pub(crate) stdout: OutputSink,
    pub(crate) stderr: OutputSink,
}

/// Counts a live process of a sandbox for as long as it exists.
struct LiveProcess(Arc<SandboxState>);

impl LiveProcess {
    fn enter(sandbox: &Arc<SandboxState>) -> Option<Self> {
        let max = sandbox.limits.max_processes;
        sandbox
            .live
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| LiveProcess(sandbox.clone()))
    }
}

impl Drop for LiveProcess {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Runs `argv` to completion in the job's sandbox and returns its exit status.
pub(crate) async fn run_process(
    job: Arc<JobContext>,
    argv: Vec<String>,
    env: Vec<(String, String)>,
    cwd: String,
    stdio: Stdio,
) -> i32 {
    let stderr = stdio.stderr.clone();
    let fail = |msg: String| async move {
        let _ = stderr.write_all(msg.as_bytes()).await;
    };
    let Some(index) = job.site.image.image.resolve(&argv[0]) else {
        fail(format!("sh: {}: command not found\n", argv[0])).await;
        return EXIT_NOT_FOUND;
    };
    let Some(_live) = LiveProcess::enter(&job.site.sandbox) else {
        let max = job.site.sandbox.limits.max_processes;
        fail(format!("sh: {}: process limit of {max} reached\n", argv[0])).await;
        return 126;
    };
    let pre = match job.site.image.program(&job.site.host, index).await {
        Ok(pre) => pre,
        Err(e) => {
            tracing::error!(program = %argv[0], error = ?e, "cannot load program");
            fail(format!("sh: {}: cannot load program: {e:#}\n", argv[0])).await;
            return 126;
        }
    };
    let stderr = stdio.stderr.clone();
    let launch = Launch {
        argv: &argv,
        env: &env,
        cwd: &cwd,
        stdio,
    };
    let mut store = match new_store(&job, launch, ()) {
        Ok(store) => store,
        Err(msg) => {
            fail(format!("sh: {}: {msg}\n", argv[0])).await;
            return 126;
        }
    };
    let result = async {
        let command = pre.instantiate_async(&mut store).await?;
        command.wasi_cli_run().call_run(&mut store).await
    }
    .await;
    drop(store);
    let exit = Exit::of_run(result);
    if let Some(reason) = exit.reason() {
        tracing::debug!(program = %argv[0], %reason, "process trapped");
        let msg = format!("{}: terminated: {reason}\n", argv[0]);
        let _ = stderr.write_all(msg.as_bytes()).await;
    }
    exit.status()
}

/// One end of a pipe held by a process.
enum PipeEnd {
    Read(PipeReader),
    Write(PipeWriter),
}

/// The `wasbox:sandbox/process` state of one process.
pub(crate) struct ProcessHost {
    job: Arc<JobContext>,
    cwd: String,
    stdio: Stdio,
    handles: HashMap<u32, PipeEnd>,
    next_handle: u32,
    children: HashMap<u32, JoinHandle<i32>>,
    /// Children ended by `kill`, with the signal.
    killed: HashMap<u32, u8>,
    next_pid: u32,
}

/// Most pipe ends one process may hold.
const MAX_HANDLES: usize = 1024;

impl ProcessHost {
    pub(crate) fn new(job: Arc<JobContext>, cwd: String, stdio: Stdio) -> Self {
        ProcessHost {
            job,
            cwd,
            stdio,
            handles: HashMap::new(),
            next_handle: 3,
            children: HashMap::new(),
            killed: HashMap::new(),
            next_pid: 1,
        }
    }

    pub(crate) fn job(&self) -> &Arc<JobContext> {
        &self.job
    }

    pub(crate) fn set_job(&mut self, job: Arc<JobContext>) {
        self.job = job;
    }

    /// What a waiter sees of a child that ended (or was aborted).
    fn status_of(&mut self, pid: u32, result: Result<i32, tokio::task::JoinError>) -> i32 {
        let killed = self.killed.remove(&pid);
        match result {
            Ok(code) => code,
            Err(_) if killed.is_some() => 128 + i32::from(killed.unwrap_or(9)),
            // Aborted: the job is over (deadline or stop), or the user interrupted.
            Err(_) if self.job.over() => EXIT_TIMEOUT,
            Err(_) => EXIT_INTERRUPTED,
        }
    }

    fn output(
        &self,
        s: &wit::Stdio,
        own: &OutputSink,
        stdout: Option<&OutputSink>,
    ) -> Result<OutputSink, wit::Error> {
        Ok(match s {
            wit::Stdio::Inherit => own.clone(),
            wit::Stdio::InheritStdout => self.stdio.stdout.clone(),
            wit::Stdio::InheritStderr => self.stdio.stderr.clone(),
            wit::Stdio::Null => OutputSink::Null,
            wit::Stdio::SameAsStdout => {
                stdout.cloned().unwrap_or_else(|| self.stdio.stdout.clone())
            }
            wit::Stdio::Handle(h) => match self.handles.get(h) {
                Some(PipeEnd::Write(w)) => OutputSink::Pipe(w.clone()),
                _ => return Err(wit::Error::BadHandle),
            },
            wit::Stdio::WriteFile(path) => self.open_output(path, false)?,
            wit::Stdio::AppendFile(path) => self.open_output(path, true)?,
            wit::Stdio::ReadFile(_) => {
                return Err(wit::Error::Io(
                    "a read-only file cannot be an output".into(),
                ));
            }
        })
    }

    fn input(&self, s: &wit::Stdio) -> Result<InputSource, wit::Error> {
        Ok(match s {
            wit::Stdio::Inherit => self.stdio.stdin.clone(),
            wit::Stdio::Null => InputSource::Null,
            wit::Stdio::Handle(h) => match self.handles.get(h) {
                Some(PipeEnd::Read(r)) => InputSource::Pipe(r.clone()),
                _ => return Err(wit::Error::BadHandle),
            },
            wit::Stdio::ReadFile(path) => {
                if is_dev_null(path) {
                    return Ok(InputSource::Null);
                }
                let file = self
                    .job
                    .site
                    .sandbox
                    .open(&self.cwd, path, |o| o.read(true))
                    .map_err(wit::Error::Io)?;
                InputSource::file(file)
            }
            _ => return Err(wit::Error::Io("stdin must be read from".into())),
        })
    }

    fn open_output(&self, path: &str, append: bool) -> Result<OutputSink, wit::Error> {
        match path {
            p if is_dev_null(p) => return Ok(OutputSink::Null),
            "/dev/stdout" => return Ok(self.stdio.stdout.clone()),
            "/dev/stderr" => return Ok(self.stdio.stderr.clone()),
            _ => {}
        }
        let file = self
            .job
            .site
            .sandbox
            .open(&self.cwd, path, |o| {
                if append {
                    o.append(true).create(true)
                } else {
                    o.write(true).create(true).truncate(true)
                }
            })
            .map_err(wit::Error::Io)?;
        Ok(OutputSink::file(file))
    }

    fn insert_handle(&mut self, end: PipeEnd) -> Result<u32> {
        if self.handles.len() >= MAX_HANDLES {
            wasmtime::bail!("too many open pipe ends (limit {MAX_HANDLES})");
        }
        let h = self.next_handle;
        self.next_handle += 1;
        self.handles.insert(h, end);
        Ok(h)
    }
}

fn is_dev_null(path: &str) -> bool {
    path == "/dev/null"
}

impl wit::Host for ProcessHost {
    async fn pipe(&mut self) -> Result<(u32, u32)> {
        let (r, w) = pipe(PIPE_CAPACITY);
        let r = self.insert_handle(PipeEnd::Read(r))?;
        let w = self.insert_handle(PipeEnd::Write(w))?;
        Ok((r, w))
    }

    async fn spawn(&mut self, cmd: wit::Command) -> Result<Result<u32, wit::Error>> {
        let job = self.job.clone();
        let sandbox = &job.site.sandbox;
        let Some(argv0) = cmd.argv.first() else {
            return Ok(Err(wit::Error::Io("empty command".into())));
        };
        if !job.site.image.image.has_program(argv0) {
            return Ok(Err(wit::Error::NotFound(format!(
                "{argv0}: command not found"
            ))));
        }
        let max_spawns = sandbox.limits.max_spawns;
        if job.spawns.fetch_add(1, Ordering::Relaxed) >= max_spawns {
            return Ok(Err(wit::Error::Limit(format!(
                "{argv0}: spawn limit of {max_spawns} processes per job reached"
            ))));
        }
        if sandbox.live.load(Ordering::Acquire) >= sandbox.limits.max_processes {
            return Ok(Err(wit::Error::Limit(format!(
                "{argv0}: process limit of {} reached",
                sandbox.limits.max_processes
            ))));
        }
        let stdio = (|| {
            let stdin = self.input(&cmd.stdin)?;
            let stdout = self.output(&cmd.stdout, &self.stdio.stdout, None)?;
            let stderr = self.output(&cmd.stderr, &self.stdio.stderr, Some(&stdout))?;
            Ok::<_, wit::Error>(Stdio {
                stdin,
                stdout,
                stderr,
            })
        })();
        let stdio = match stdio {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        let cwd = if cmd.cwd.starts_with('/') {
            cmd.cwd
        } else {
            self.cwd.clone()
        };
        let task = tokio::spawn(run_process(job.clone(), cmd.argv, cmd.env, cwd, stdio));
        job.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(task.abort_handle());
        let pid = self.next_pid;
        self.next_pid += 1;
        self.children.insert(pid, task);
        Ok(Ok(pid))
    }

    async fn wait(&mut self, pid: u32) -> Result<i32> {
        let Some(task) = self.children.remove(&pid) else {
            return Ok(EXIT_NOT_FOUND);
        };
        let result = task.await;
        Ok(self.status_of(pid, result))
    }

    async fn wait_timeout(&mut self, pid: u32, millis: u64) -> Result<Option<i32>> {
        let Some(task) = self.children.get_mut(&pid) else {
            return Ok(Some(EXIT_NOT_FOUND));
        };
        match tokio::time::timeout(Duration::from_millis(millis), task).await {
            Ok(result) => {
                self.children.remove(&pid);
                Ok(Some(self.status_of(pid, result)))
            }
            Err(_) => Ok(None),
        }
    }

    async fn kill(&mut self, pid: u32, signal: u8) -> Result<()> {
        if let Some(task) = self.children.get(&pid)
            && !task.is_finished()
        {
            task.abort();
            self.killed.insert(pid, signal.clamp(1, 127));
        }
        Ok(())
    }

    async fn file_mode(&mut self, path: String) -> Result<Option<u32>> {
        use cap_std::fs::PermissionsExt;
        Ok(self
            .job
            .site
            .sandbox
            .resolve(&self.cwd, &path)
            .and_then(|(dir, rel)| dir.metadata(rel).ok())
            .map(|m| m.permissions().mode() & 0o7777))
    }

    async fn set_file_mode(&mut self, path: String, mode: u32) -> Result<Result<(), wit::Error>> {
        use cap_std::fs::PermissionsExt;
        let Some((dir, rel)) = self.job.site.sandbox.resolve(&self.cwd, &path) else {
            return Ok(Err(wit::Error::Io(format!(
                "{path}: Operation not permitted"
            ))));
        };
        let perms = cap_std::fs::Permissions::from_mode(mode & 0o7777);
        Ok(dir
            .set_permissions(&rel, perms)
            .map_err(|e| wit::Error::Io(format!("{path}: {}", io_message(&e)))))
    }

    async fn read(&mut self, handle: u32, max: u32) -> Result<Result<Vec<u8>, wit::Error>> {
        let reader = match self.handles.get(&handle) {
            Some(PipeEnd::Read(r)) => r.clone(),
            _ => return Ok(Err(wit::Error::BadHandle)),
        };
        Ok(Ok(reader
            .read(max.clamp(1, 1 << 20) as usize)
            .await
            .to_vec()))
    }

    async fn write(&mut self, handle: u32, data: Vec<u8>) -> Result<Result<(), wit::Error>> {
        let writer = match self.handles.get(&handle) {
            Some(PipeEnd::Write(w)) => w.clone(),
            _ => return Ok(Err(wit::Error::BadHandle)),
        };
        Ok(writer
            .write_all(&data)
            .await
            .map_err(|_| wit::Error::Io("Broken pipe".into())))
    }

    async fn close(&mut self, handle: u32) -> Result<()> {
        self.handles.remove(&handle);
        Ok(())
    }

    async fn has_program(&mut self, name: String) -> Result<bool> {
        Ok(self.job.site.image.image.has_program(&name))
    }

    async fn terminal_size(&mut self) -> Result<Option<(u16, u16)>> {
        Ok(self.job.terminal.as_ref().map(Terminal::size))
    }

    async fn take_interrupt(&mut self) -> Result<bool> {
        Ok(self.job.interrupted.swap(false, Ordering::AcqRel))
    }
}
