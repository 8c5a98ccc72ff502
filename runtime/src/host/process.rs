//! Processes: one program of an image run as one instance in a store of its own, and the
//! `wasbox:sandbox/process` import through which a process starts others in the same
//! sandbox, wired to pipes, sandbox files or its own streams.
//!
//! Files named by a guest are opened through the sandbox's directory handles (cap-std),
//! never by host path, so nothing outside the workspace and `/tmp` can be reached.

use crate::sync::lock;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::{AbortHandle, JoinHandle};
use wasmtime::Result;
use wasmtime::component::{Resource, ResourceTable};

use super::{CpuAccount, Exit, Launch, MemoryExceeded, PreinitWait, Site, new_store};
use crate::bindings::process as wit;
use crate::capacity::{Admission, ROOM_POLL, Refused};
use crate::engine::{Placement, pool_was_full};
use crate::io::{InputSource, OutputSink, PipeReader, PipeWriter, Terminal, pipe};
use crate::limits::{EXIT_INTERRUPTED, EXIT_NOT_FOUND, EXIT_TIMEOUT, PIPE_CAPACITY};
use crate::sandbox::{FROZEN, SandboxState};

/// Where a job reports that its first process started, or why it did not.
pub type StartReport = tokio::sync::oneshot::Sender<Result<(), StartFailure>>;
/// Where that report is heard.
pub(crate) type StartHeard = tokio::sync::oneshot::Receiver<Result<(), StartFailure>>;

/// Why a job's first process did not start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartFailure {
    /// What stopped it, for a person: `` `PROGRAM`: REASON ``.
    pub reason: String,
    /// It lacked only room that the node's other sandboxes were holding (memory of the
    /// node's budget or address space), so the same start can succeed once they give it
    /// back. Otherwise it cannot start as asked: its sandbox's own limits, a program that
    /// does not load, more memory than the node's whole budget.
    pub for_lack_of_room: bool,
}

impl std::fmt::Display for StartFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for StartFailure {}

/// The child processes of a job. Once the job has ended (`closed`), no child may start:
/// a spawn racing the end of the job is refused rather than left running unseen.
#[derive(Default)]
struct Tasks {
    handles: Vec<AbortHandle>,
    closed: bool,
}

/// State shared by every process of one job: its deadline, stop signal and counters.
pub(crate) struct JobContext {
    pub(crate) site: Site,
    deadline: Instant,
    stopped: AtomicBool,
    stop_notify: Notify,
    spawns: AtomicU32,
    tasks: std::sync::Mutex<Tasks>,
    terminal: Option<Terminal>,
    /// An interrupt (Ctrl-C) the shell has not seen yet.
    interrupted: AtomicBool,
    /// The place taken ahead for the job's first process.
    admission: std::sync::Mutex<Option<Admission>>,
    /// The signal another process ended the job with (0: none).
    killed: std::sync::atomic::AtomicU8,
    /// Where the job's first process reports its start (taken by that process; `None`
    /// inside once taken, or for an agent's job, which has no first process).
    first_start: std::sync::Mutex<Option<Option<StartReport>>>,
    /// Why the job's first process did not start, once it did not.
    start_failure: std::sync::Mutex<Option<StartFailure>>,
    /// How long each process of the job may wait for room other sandboxes hold (see
    /// [`JobSpec::start_wait`](crate::JobSpec::start_wait)).
    room_wait: Duration,
    /// When the job started (its time limit runs from here to `deadline`).
    started: Instant,
}

impl JobContext {
    pub(crate) fn new(
        site: Site,
        deadline: Instant,
        terminal: Option<Terminal>,
        admission: Option<Admission>,
        room_wait: Duration,
    ) -> Self {
        JobContext {
            site,
            deadline,
            stopped: AtomicBool::new(false),
            stop_notify: Notify::new(),
            spawns: AtomicU32::new(0),
            tasks: std::sync::Mutex::new(Tasks::default()),
            terminal,
            interrupted: AtomicBool::new(false),
            admission: std::sync::Mutex::new(admission),
            killed: std::sync::atomic::AtomicU8::new(0),
            first_start: std::sync::Mutex::new(None),
            start_failure: std::sync::Mutex::new(None),
            room_wait,
            started: Instant::now(),
        }
    }

    /// Marks the next process to start as the job's first: it reports its start to
    /// `report`, and [`JobContext::start_failure`] keeps why it did not start.
    pub(crate) fn first_start(&self, report: Option<StartReport>) {
        *lock(&self.first_start) = Some(report);
    }

    /// Why the job's first process did not start, if it did not.
    pub(crate) fn start_failure(&self) -> Option<StartFailure> {
        lock(&self.start_failure).clone()
    }

    /// The place of a process about to start: the one taken ahead for the job (once), or a
    /// new one, or why there is none.
    pub(crate) fn admission(&self) -> Result<Admission, Refused> {
        let ahead = lock(&self.admission).take();
        match ahead {
            Some(a) => Ok(a),
            None => self.site.host.capacity.try_admit(),
        }
    }

    /// Ctrl-C: ends every child process (not the job's first process) and raises the flag
    /// `take-interrupt` reports. Returns whether any child was running.
    pub(crate) fn interrupt(&self) -> bool {
        self.interrupted.store(true, Ordering::Release);
        let tasks = lock(&self.tasks);
        let mut any = false;
        for t in &tasks.handles {
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

    /// Ends the job as a signal to its first process would (`kill PID` from another job).
    pub(crate) fn kill(&self, signal: u8) {
        self.killed.store(signal.clamp(1, 127), Ordering::Relaxed);
        self.stop();
    }

    /// The signal [`kill`](Self::kill) ended the job with.
    pub(crate) fn killed_by(&self) -> Option<u8> {
        signal_of(&self.killed)
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

    /// Ends every child process still running (the job is over); none may start after.
    /// A child busy on another thread ends at its next yield point: see
    /// [`children_ended`](Self::children_ended).
    pub(crate) fn abort_all(&self) {
        let mut tasks = lock(&self.tasks);
        tasks.closed = true;
        for t in &tasks.handles {
            t.abort();
        }
    }

    /// Waits up to `limit` for every child process to be gone (its instance dropped, so
    /// the sandbox no longer counts it). True when they are.
    pub(crate) async fn children_ended(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if lock(&self.tasks).handles.iter().all(|t| t.is_finished()) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
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
    /// Counts a new process, or says why not: `Err(true)` while a snapshot of the sandbox
    /// is being taken (for a few milliseconds), `Err(false)` at its process limit.
    fn enter(sandbox: &Arc<SandboxState>) -> Result<Self, bool> {
        let max = sandbox.limits.max_processes;
        sandbox
            .live
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n & FROZEN == 0 && n < max).then_some(n + 1)
            })
            .map(|_| LiveProcess(sandbox.clone()))
            .map_err(|n| n & FROZEN != 0)
    }

    /// [`LiveProcess::enter`], waiting out a snapshot being taken.
    async fn wait_enter(sandbox: &Arc<SandboxState>) -> Option<Self> {
        let give_up = std::time::Instant::now() + FREEZE_WAIT;
        loop {
            match LiveProcess::enter(sandbox) {
                Ok(live) => return Some(live),
                Err(true) if std::time::Instant::now() < give_up => {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await
                }
                Err(_) => return None,
            }
        }
    }
}

/// Longest a new process waits for a snapshot of its sandbox to be taken.
const FREEZE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

impl Drop for LiveProcess {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A process's pid and its parent's (0 for a job's first process).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pids {
    pub(crate) pid: u32,
    pub(crate) ppid: u32,
}

/// Lists a process in its sandbox's table (`ps`) from before it starts until it ends.
struct Listed {
    sandbox: Arc<SandboxState>,
    pid: u32,
    memory: Arc<std::sync::atomic::AtomicUsize>,
}

/// The signal an atomic holds (0: none).
fn signal_of(killed: &std::sync::atomic::AtomicU8) -> Option<u8> {
    Some(killed.load(Ordering::Relaxed)).filter(|s| *s != 0)
}

impl Listed {
    fn new(
        sandbox: &Arc<SandboxState>,
        pids: Pids,
        argv: &[String],
        stop: Option<crate::sandbox::Stopper>,
        cpu: &Arc<CpuAccount>,
    ) -> Listed {
        Listed {
            memory: sandbox.register(pids.pid, pids.ppid, argv, stop, cpu.clone()),
            sandbox: sandbox.clone(),
            pid: pids.pid,
        }
    }
}

impl Drop for Listed {
    fn drop(&mut self) {
        self.sandbox.unregister(self.pid);
    }
}

/// Runs `argv` to completion in the job's sandbox and returns its exit status.
pub(crate) async fn run_process(
    job: Arc<JobContext>,
    argv: Vec<String>,
    env: Vec<(String, String)>,
    cwd: String,
    stdio: Stdio,
    admission: Option<Admission>,
    pids: Pids,
) -> i32 {
    // A job's first process, signalled by another, ends its job with 128 + the signal.
    let weak = Arc::downgrade(&job);
    let stop: crate::sandbox::Stopper = Arc::new(move |signal: u8| {
        if let Some(job) = weak.upgrade() {
            job.kill(signal);
        }
    });
    let cpu = Arc::default();
    let listed = Listed::new(&job.site.sandbox, pids, &argv, Some(stop), &cpu);
    run_listed(job, argv, env, cwd, stdio, admission, listed, cpu).await
}

/// [`run_process`] of a process already listed (its parent lists it when it spawns it, so
/// that `ps` right after sees it), its CPU time counted in `cpu` from its start.
#[allow(clippy::too_many_arguments)]
async fn run_listed(
    job: Arc<JobContext>,
    argv: Vec<String>,
    env: Vec<(String, String)>,
    cwd: String,
    stdio: Stdio,
    admission: Option<Admission>,
    listed: Listed,
    cpu: Arc<CpuAccount>,
) -> i32 {
    // Only the job's first process finds a report to make: its children start later.
    let mut first = lock(&job.first_start).take();
    // Any process of the job may wait for room others hold: a child (`python3` under
    // `sh -c`) of an admitted job is not failed by other sandboxes' load either.
    let wait_until = (Instant::now() + job.room_wait).min(job.deadline);
    let may_wait = || Instant::now() < wait_until && !job.was_stopped();
    let mut report = |outcome: Result<(), StartFailure>| {
        if let Some(tx) = first.take() {
            if let Err(failure) = &outcome {
                *lock(&job.start_failure) = Some(failure.clone());
            }
            if let Some(tx) = tx {
                let _ = tx.send(outcome);
            }
        }
    };
    let cannot = |reason: String| StartFailure {
        reason,
        for_lack_of_room: false,
    };
    let stderr = stdio.stderr.clone();
    let fail = |msg: String| async move {
        let _ = stderr.write_all(msg.as_bytes()).await;
    };
    let Some(index) = job.site.image.image.resolve(&argv[0]) else {
        report(Ok(()));
        fail(format!("sh: {}: command not found\n", argv[0])).await;
        return EXIT_NOT_FOUND;
    };
    let Some(_live) = LiveProcess::wait_enter(&job.site.sandbox).await else {
        let max = job.site.sandbox.limits.max_processes;
        let msg = format!("process limit of {max} reached");
        report(Err(cannot(format!("`{}`: {msg}", argv[0]))));
        fail(format!("sh: {}: {msg}\n", argv[0])).await;
        return 126;
    };
    let memory = listed.memory.clone();
    let stderr = stdio.stderr.clone();
    // A program on a terminal is interactive and long-lived: it takes no pool slot, which
    // is kept for short jobs. A job's program finding the pool full goes on demand too.
    let unpooled = || job.site.host.unpooled(job.site.sandbox.limits.memory_bytes);
    let mut placement = if job.terminal.is_some() {
        unpooled()
    } else {
        Placement::Pool
    };
    let mut admission = admission;
    // What the program itself is given (`ps` and `/proc` show `argv`).
    let program_argv = job.site.image.image.programs()[index]
        .source
        .argv_for(&argv);
    let result = loop {
        // A pre-initialised program gets its command line itself, as the caller gave it.
        let (loaded, argv_given) = match job
            .site
            .image
            .preinitialised(&job.site, index, placement, PreinitWait::Cached)
            .await
        {
            Some(pre) => (Ok(pre), &argv),
            None => (
                job.site
                    .image
                    .program(&job.site.host, index, placement)
                    .await,
                &program_argv,
            ),
        };
        let pre = match loaded {
            Ok(pre) => pre,
            Err(e) => {
                tracing::error!(program = %argv[0], error = ?e, "cannot load program");
                report(Err(cannot(format!(
                    "`{}`: cannot load program: {e:#}",
                    argv[0]
                ))));
                fail(format!("sh: {}: cannot load program: {e:#}\n", argv[0])).await;
                return 126;
            }
        };
        let launch = Launch {
            argv: argv_given,
            env: &env,
            cwd: &cwd,
            stdio: stdio.clone(),
            admission: admission.take(),
            placement,
            pid: listed.pid,
            memory: Some(memory.clone()),
            cpu: cpu.clone(),
        };
        let mut store = match new_store(&job, launch, ()) {
            Ok(store) => store,
            Err(msg) => {
                // The node had no place for it: other sandboxes hold them all.
                if may_wait() {
                    tokio::time::sleep(ROOM_POLL).await;
                    continue;
                }
                report(Err(StartFailure {
                    reason: format!("`{}`: {msg}", argv[0]),
                    for_lack_of_room: true,
                }));
                fail(format!("sh: {}: {msg}\n", argv[0])).await;
                return 126;
            }
        };
        // What the process costs is counted from here (the instance, then its run); loading
        // (compiling) the program is the node's, not the process's.
        let command = match cpu.metered(pre.instantiate_async(&mut store)).await {
            Ok(command) => command,
            Err(e) if placement == Placement::Pool && pool_was_full(&e) => {
                admission = Some(store.into_data().into_admission());
                placement = unpooled();
                continue;
            }
            Err(e) => {
                let for_lack_of_room = lacked_room(&e);
                if for_lack_of_room && may_wait() {
                    // Keep the place, give back what the failed instance held, look again.
                    admission = Some(store.into_data().into_admission());
                    tokio::time::sleep(ROOM_POLL).await;
                    continue;
                }
                let why = Exit::of_error(&e)
                    .reason()
                    .unwrap_or_else(|| format!("{e:#}"));
                report(Err(StartFailure {
                    reason: format!("`{}`: {why}", argv[0]),
                    for_lack_of_room,
                }));
                break Err(e);
            }
        };
        report(Ok(()));
        break cpu
            .metered(command.wasi_cli_run().call_run(&mut store))
            .await;
    };
    let exit = Exit::of_run(result);
    if let Some(reason) = exit.reason() {
        tracing::debug!(program = %argv[0], %reason, "process trapped");
        let msg = format!("{}: terminated: {reason}\n", argv[0]);
        let _ = stderr.write_all(msg.as_bytes()).await;
    }
    exit.status()
}

/// Whether an instance could not be made only for room other sandboxes hold: the node's
/// memory budget used up by them, or the address space for a new instance (`ENOMEM`).
pub(crate) fn lacked_room(e: &wasmtime::Error) -> bool {
    if let Exit::OutOfMemory(m) = Exit::of_error(e) {
        return matches!(m, MemoryExceeded::Node(_));
    }
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.raw_os_error() == Some(libc::ENOMEM))
    })
}

/// A child as the process that started it holds it.
pub(crate) struct Child {
    pid: u32,
    /// The running child; `None` once it has been waited for.
    task: Option<JoinHandle<i32>>,
    /// Its status, once known.
    status: Option<i32>,
    /// The signal that ended it, once it has been waited for.
    ended_by: Option<u8>,
    /// The signal it was ended by (0: none), by `kill` of its parent or of any process
    /// of the sandbox.
    killed: Arc<std::sync::atomic::AtomicU8>,
    /// Its CPU time (and its waited-for children's).
    cpu: Arc<CpuAccount>,
}

/// The index of the first of `ends` with data or at its end, once one is.
async fn first_readable(ends: &[PipeReader]) -> u32 {
    std::future::poll_fn(|cx| {
        for (i, end) in ends.iter().enumerate() {
            if end.poll_readable(cx).is_ready() {
                return std::task::Poll::Ready(i as u32);
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// The `wasbox:sandbox/process` state of one process: its pipe ends and children (in a
/// table of their own, bounded), and what its children inherit.
pub(crate) struct ProcessHost {
    job: Arc<JobContext>,
    cwd: String,
    stdio: Stdio,
    table: ResourceTable,
    /// Its own pid.
    pid: u32,
    /// Its CPU time, and its waited-for children's.
    cpu: Arc<CpuAccount>,
    /// Its arguments and environment as it was started with them (the door's `start`).
    argv: Vec<String>,
    env: Vec<(String, String)>,
}

/// Most pipe ends and children one process may hold at once.
const MAX_HANDLES: usize = 1024;

/// The same resource seen as another type: WIT's resource types are plain markers, the
/// table holds the host's objects.
fn cast<T: 'static, U: 'static>(r: &Resource<T>) -> Resource<U> {
    if r.owned() {
        Resource::new_own(r.rep())
    } else {
        Resource::new_borrow(r.rep())
    }
}

impl ProcessHost {
    pub(crate) fn new(
        job: Arc<JobContext>,
        cwd: String,
        stdio: Stdio,
        pid: u32,
        cpu: Arc<CpuAccount>,
        argv: Vec<String>,
        env: Vec<(String, String)>,
    ) -> Self {
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_HANDLES);
        ProcessHost {
            job,
            cwd,
            stdio,
            table,
            pid,
            cpu,
            argv,
            env,
        }
    }

    /// The arguments, environment and working directory it was started with.
    pub(crate) fn start_args(&self) -> (&[String], &[(String, String)], &str) {
        (&self.argv, &self.env, &self.cwd)
    }

    /// Records that the child `c` ended with `status`: what `wait` returns from now on,
    /// and its CPU time counted among this process's children's (once).
    fn waited(&mut self, c: &Resource<wit::Child>, status: i32) -> Result<()> {
        let child = self.get::<Child, _>(c)?;
        child.task = None;
        child.ended_by = signal_of(&child.killed);
        if child.status.replace(status).is_none() {
            let cpu = child.cpu.clone();
            self.cpu.add_child(&cpu);
        }
        Ok(())
    }

    /// Its standard streams.
    pub(crate) fn stdio(&self) -> &Stdio {
        &self.stdio
    }

    pub(crate) fn job(&self) -> &Arc<JobContext> {
        &self.job
    }

    pub(crate) fn set_job(&mut self, job: Arc<JobContext>) {
        self.job = job;
    }

    /// The pipe ends a `ready` call names.
    fn ends(&mut self, readers: &[Resource<wit::PipeReader>]) -> Result<Vec<PipeReader>> {
        readers
            .iter()
            .map(|r| Ok(self.get::<PipeReader, _>(r)?.clone()))
            .collect()
    }

    fn push<T: Send + 'static, U: 'static>(&mut self, value: T) -> Result<Resource<U>> {
        match self.table.push(value) {
            Ok(r) => Ok(cast(&r)),
            Err(_) => wasmtime::bail!("too many open pipe ends and children (limit {MAX_HANDLES})"),
        }
    }

    fn get<T: Send + 'static, U: 'static>(&mut self, r: &Resource<U>) -> Result<&mut T> {
        Ok(self.table.get_mut(&cast::<U, T>(r))?)
    }

    fn take<T: Send + 'static, U: 'static>(&mut self, r: &Resource<U>) -> Result<T> {
        Ok(self.table.delete(cast::<U, T>(r))?)
    }

    /// What a waiter sees of a child that ended (or was aborted).
    fn status_of(&self, killed: Option<u8>, result: Result<i32, tokio::task::JoinError>) -> i32 {
        match result {
            Ok(code) => code,
            Err(_) if killed.is_some() => 128 + i32::from(killed.unwrap_or(9)),
            // Aborted: the job is over (deadline or stop), or the user interrupted.
            Err(_) if self.job.over() => EXIT_TIMEOUT,
            Err(_) => EXIT_INTERRUPTED,
        }
    }

    fn output(
        &mut self,
        s: wit::Stdio,
        own: &OutputSink,
        stdout: Option<&OutputSink>,
    ) -> Result<Result<OutputSink, wit::Error>> {
        Ok(Ok(match s {
            wit::Stdio::Inherit => own.clone(),
            wit::Stdio::InheritStdout => self.stdio.stdout.clone(),
            wit::Stdio::InheritStderr => self.stdio.stderr.clone(),
            wit::Stdio::Null => OutputSink::Null,
            wit::Stdio::SameAsStdout => {
                stdout.cloned().unwrap_or_else(|| self.stdio.stdout.clone())
            }
            wit::Stdio::PipeWriter(w) => OutputSink::Pipe(self.take::<PipeWriter, _>(&w)?),
            wit::Stdio::PipeReader(r) => {
                self.take::<PipeReader, _>(&r)?;
                return Ok(Err(wit::Error::Io(
                    "a pipe's read end cannot be an output".into(),
                )));
            }
            wit::Stdio::WriteFile(path) => match self.open_output(&path, false) {
                Ok(o) => o,
                Err(e) => return Ok(Err(e)),
            },
            wit::Stdio::AppendFile(path) => match self.open_output(&path, true) {
                Ok(o) => o,
                Err(e) => return Ok(Err(e)),
            },
            wit::Stdio::ReadFile(_) => {
                return Ok(Err(wit::Error::Io(
                    "a read-only file cannot be an output".into(),
                )));
            }
        }))
    }

    fn input(&mut self, s: wit::Stdio) -> Result<Result<InputSource, wit::Error>> {
        Ok(Ok(match s {
            wit::Stdio::Inherit => self.stdio.stdin.clone(),
            wit::Stdio::Null => InputSource::Null,
            wit::Stdio::PipeReader(r) => InputSource::Pipe(self.take::<PipeReader, _>(&r)?),
            wit::Stdio::PipeWriter(w) => {
                self.take::<PipeWriter, _>(&w)?;
                return Ok(Err(wit::Error::Io("stdin must be read from".into())));
            }
            wit::Stdio::ReadFile(path) => {
                if is_dev_null(&path) {
                    return Ok(Ok(InputSource::Null));
                }
                if path == "/dev/stdin" {
                    return Ok(Ok(self.stdio.stdin.clone()));
                }
                match self.job.site.sandbox.open(&self.cwd, &path, None) {
                    Ok(file) => InputSource::file(file),
                    Err(e) => return Ok(Err(wit::Error::Io(e))),
                }
            }
            _ => return Ok(Err(wit::Error::Io("stdin must be read from".into()))),
        }))
    }

    fn open_output(&self, path: &str, append: bool) -> Result<OutputSink, wit::Error> {
        match path {
            p if is_dev_null(p) => return Ok(OutputSink::Null),
            "/dev/stdout" => return Ok(self.stdio.stdout.clone()),
            "/dev/stderr" => return Ok(self.stdio.stderr.clone()),
            _ => {}
        }
        let sandbox = &self.job.site.sandbox;
        let Some((_, _, tree)) = sandbox.resolve_in(&self.cwd, path) else {
            // The read-only root: a device (`> /dev/full`) or a refusal, never the quota's.
            let file = sandbox
                .open(&self.cwd, path, Some(append))
                .map_err(wit::Error::Io)?;
            return Ok(OutputSink::file(file));
        };
        let file = sandbox
            .open_output(&self.cwd, path, append)
            .map_err(wit::Error::Io)?;
        Ok(OutputSink::file_in_quota(
            file,
            append,
            sandbox.quota_of(tree).clone(),
        ))
    }

    /// The three streams of a child; every pipe end in `cmd` is consumed, whatever happens.
    fn child_stdio(&mut self, cmd: &mut wit::Command) -> Result<Result<Stdio, wit::Error>> {
        let take = |s: &mut wit::Stdio| std::mem::replace(s, wit::Stdio::Null);
        let (stdin, stdout, stderr) = (
            take(&mut cmd.stdin),
            take(&mut cmd.stdout),
            take(&mut cmd.stderr),
        );
        let own_out = self.stdio.stdout.clone();
        let own_err = self.stdio.stderr.clone();
        let stdin = self.input(stdin)?;
        let stdout = self.output(stdout, &own_out, None)?;
        let stderr = match &stdout {
            Ok(out) => self.output(stderr, &own_err, Some(out))?,
            Err(_) => self.output(stderr, &own_err, None)?,
        };
        Ok((|| {
            Ok(Stdio {
                stdin: stdin?,
                stdout: stdout?,
                stderr: stderr?,
            })
        })())
    }
}

fn is_dev_null(path: &str) -> bool {
    path == "/dev/null"
}

impl wit::Host for ProcessHost {
    async fn pipe(&mut self) -> Result<(Resource<wit::PipeReader>, Resource<wit::PipeWriter>)> {
        let (r, w) = pipe(PIPE_CAPACITY);
        let r = self.push(r)?;
        let w = self.push(w)?;
        Ok((r, w))
    }

    async fn spawn(
        &mut self,
        mut cmd: wit::Command,
    ) -> Result<Result<Resource<wit::Child>, wit::Error>> {
        // The pipe ends given are the child's now, even when it cannot start.
        let stdio = self.child_stdio(&mut cmd)?;
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
        if job.over() {
            return Ok(Err(wit::Error::Limit(format!(
                "{argv0}: the job is over (stopped or past its deadline)"
            ))));
        }
        let max_spawns = sandbox.limits.max_spawns;
        if job.spawns.fetch_add(1, Ordering::Relaxed) >= max_spawns {
            return Ok(Err(wit::Error::Limit(format!(
                "{argv0}: spawn limit of {max_spawns} processes per job reached"
            ))));
        }
        if sandbox.live.load(Ordering::Acquire) & !FROZEN >= sandbox.limits.max_processes {
            return Ok(Err(wit::Error::Limit(format!(
                "{argv0}: process limit of {} reached",
                sandbox.limits.max_processes
            ))));
        }
        let stdio = match stdio {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        // Like fork failing with EAGAIN: the shell reports it, nothing else fails.
        let admission = match job.site.host.capacity.try_admit() {
            Ok(a) => a,
            Err(why) => return Ok(Err(wit::Error::Limit(format!("{argv0}: {why}")))),
        };
        let cwd = if cmd.cwd.starts_with('/') {
            cmd.cwd
        } else {
            self.cwd.clone()
        };
        let cpu = Arc::<CpuAccount>::default();
        // Started and recorded under the lock `abort_all` takes: either the child is seen
        // and ended with the job, or the job has ended and it never starts.
        let task = {
            let mut tasks = lock(&job.tasks);
            if tasks.closed {
                return Ok(Err(wit::Error::Limit(format!(
                    "{argv0}: the job is over (stopped or past its deadline)"
                ))));
            }
            let pid = sandbox.new_pid();
            let pids = Pids {
                pid,
                ppid: self.pid,
            };
            let listed = Listed::new(sandbox, pids, &cmd.argv, None, &cpu);
            let task = tokio::spawn(run_listed(
                job.clone(),
                cmd.argv,
                cmd.env,
                cwd,
                stdio,
                Some(admission),
                listed,
                cpu.clone(),
            ));
            // Those that have ended are forgotten: the list holds the running ones.
            tasks.handles.retain(|t| !t.is_finished());
            tasks.handles.push(task.abort_handle());
            (task, pid)
        };
        let (task, pid) = task;
        // `kill PID` from any process of the sandbox ends it as its parent's `kill` would.
        let killed = Arc::new(std::sync::atomic::AtomicU8::new(0));
        let (abort, flag) = (task.abort_handle(), killed.clone());
        sandbox.set_stopper(
            pid,
            Arc::new(move |signal: u8| {
                flag.store(signal.clamp(1, 127), Ordering::Relaxed);
                abort.abort();
            }),
        );
        let child = self.push(Child {
            pid,
            task: Some(task),
            status: None,
            ended_by: None,
            killed,
            cpu,
        })?;
        Ok(Ok(child))
    }

    async fn ready(&mut self, readers: Vec<Resource<wit::PipeReader>>) -> Result<u32> {
        let ends = self.ends(&readers)?;
        if ends.is_empty() {
            return Ok(0);
        }
        Ok(first_readable(&ends).await)
    }

    async fn ready_within(
        &mut self,
        readers: Vec<Resource<wit::PipeReader>>,
        millis: u64,
    ) -> Result<Option<u32>> {
        let ends = self.ends(&readers)?;
        if ends.is_empty() {
            return Ok(Some(0));
        }
        let wait = std::time::Duration::from_millis(millis);
        Ok(tokio::time::timeout(wait, first_readable(&ends)).await.ok())
    }

    async fn file_mode(&mut self, path: String) -> Result<Option<u32>> {
        Ok(self.job.site.sandbox.mode(&self.cwd, &path))
    }

    async fn set_file_mode(&mut self, path: String, mode: u32) -> Result<Result<(), wit::Error>> {
        Ok(self
            .job
            .site
            .sandbox
            .set_mode(&self.cwd, &path, mode)
            .map_err(wit::Error::Io))
    }

    async fn processes(&mut self) -> Result<Vec<wit::ProcessInfo>> {
        let procs = lock(&self.job.site.sandbox.procs);
        Ok(procs
            .iter()
            .map(|(pid, p)| wit::ProcessInfo {
                pid: *pid,
                ppid: p.ppid,
                argv: p.argv.clone(),
                started_ms: p
                    .started
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64),
                memory_bytes: p.memory.load(Ordering::Relaxed) as u64,
                cpu_us: {
                    let t = p.cpu.own();
                    t.user_us + t.system_us
                },
            })
            .collect())
    }

    async fn memory_usage(&mut self) -> Result<wit::MemorySpace> {
        let m = &self.job.site.sandbox.memory;
        Ok(wit::MemorySpace {
            used_bytes: m.used() as u64,
            limit_bytes: m.limit() as u64,
        })
    }

    async fn self_pid(&mut self) -> Result<u32> {
        Ok(self.pid)
    }

    async fn cpu_times(&mut self) -> Result<(wit::CpuTime, wit::CpuTime)> {
        let wit = |t: crate::cpu::Times| wit::CpuTime {
            user_us: t.user_us,
            system_us: t.system_us,
        };
        Ok((wit(self.cpu.own()), wit(self.cpu.children())))
    }

    async fn limits(&mut self) -> Result<wit::ProcessLimits> {
        let limits = &self.job.site.sandbox.limits;
        let time = self
            .job
            .deadline
            .saturating_duration_since(self.job.started);
        Ok(wit::ProcessLimits {
            memory_bytes: limits.memory_bytes as u64,
            open_resources: limits.max_open_resources as u64,
            processes: limits.max_processes,
            disk_bytes: limits.disk_bytes,
            // A deadline years away (a terminal's shell) is none.
            time_secs: Some(time.as_secs_f64().round() as u64)
                .filter(|s| *s < 10 * 365 * 24 * 3600),
            pipe_bytes: PIPE_CAPACITY as u64,
        })
    }

    async fn signal_process(&mut self, pid: u32, signal: u8) -> Result<Result<(), wit::Error>> {
        Ok(if self.job.site.sandbox.signal(pid, signal) {
            if pid == self.pid && signal != 0 {
                // A process that signals itself ends now, not at its next yield point
                // (`kill $$`): 128 + the signal, as its parent sees it.
                return Err(wasmtime_wasi::I32Exit(128 + i32::from(signal.min(127))).into());
            }
            Ok(())
        } else {
            Err(wit::Error::Io(format!("({pid}) - No such process")))
        })
    }

    async fn disk_usage(&mut self) -> Result<wit::DiskSpace> {
        let quota = &self.job.site.sandbox.quota;
        let ((used_bytes, used_inodes), (available_bytes, available_inodes)) =
            (quota.used(), quota.available());
        Ok(wit::DiskSpace {
            used_bytes,
            available_bytes,
            used_inodes,
            available_inodes,
        })
    }

    async fn volumes(&mut self) -> Result<Vec<wit::VolumeSpace>> {
        Ok(self
            .job
            .site
            .sandbox
            .volumes
            .iter()
            .map(|v| {
                let quota = &v.attachment.0.quota;
                let ((used_bytes, used_inodes), (available_bytes, available_inodes)) =
                    (quota.used(), quota.available());
                wit::VolumeSpace {
                    name: v.attachment.0.record().name.clone(),
                    path: v.path.clone(),
                    read_only: v.read_only,
                    space: wit::DiskSpace {
                        used_bytes,
                        available_bytes,
                        used_inodes,
                        available_inodes,
                    },
                }
            })
            .collect())
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

impl wit::HostPipeReader for ProcessHost {
    async fn read(
        &mut self,
        r: Resource<wit::PipeReader>,
        max: u32,
    ) -> Result<Result<Vec<u8>, wit::Error>> {
        let reader = self.get::<PipeReader, _>(&r)?.clone();
        Ok(Ok(reader
            .read(max.clamp(1, 1 << 20) as usize)
            .await
            .to_vec()))
    }

    async fn dup(&mut self, r: Resource<wit::PipeReader>) -> Result<Resource<wit::PipeReader>> {
        let reader = self.get::<PipeReader, _>(&r)?.clone();
        self.push(reader)
    }

    async fn drop(&mut self, r: Resource<wit::PipeReader>) -> Result<()> {
        self.take::<PipeReader, _>(&r)?;
        Ok(())
    }
}

impl wit::HostPipeWriter for ProcessHost {
    async fn write(
        &mut self,
        w: Resource<wit::PipeWriter>,
        data: Vec<u8>,
    ) -> Result<Result<(), wit::Error>> {
        let writer = self.get::<PipeWriter, _>(&w)?.clone();
        Ok(writer
            .write_all(&data)
            .await
            .map_err(|_| wit::Error::Io("Broken pipe".into())))
    }

    async fn dup(&mut self, w: Resource<wit::PipeWriter>) -> Result<Resource<wit::PipeWriter>> {
        let writer = self.get::<PipeWriter, _>(&w)?.clone();
        self.push(writer)
    }

    async fn drop(&mut self, w: Resource<wit::PipeWriter>) -> Result<()> {
        self.take::<PipeWriter, _>(&w)?;
        Ok(())
    }
}

impl wit::HostChild for ProcessHost {
    async fn id(&mut self, c: Resource<wit::Child>) -> Result<u32> {
        Ok(self.get::<Child, _>(&c)?.pid)
    }

    async fn wait(&mut self, c: Resource<wit::Child>) -> Result<i32> {
        let child = self.get::<Child, _>(&c)?;
        if let Some(status) = child.status {
            return Ok(status);
        }
        let Some(task) = child.task.take() else {
            return Ok(EXIT_NOT_FOUND);
        };
        // Read once it has ended: another process may signal it while this waits.
        let killed = child.killed.clone();
        let result = task.await;
        let status = self.status_of(signal_of(&killed), result);
        self.waited(&c, status)?;
        Ok(status)
    }

    async fn wait_timeout(&mut self, c: Resource<wit::Child>, millis: u64) -> Result<Option<i32>> {
        let child = self.get::<Child, _>(&c)?;
        if let Some(status) = child.status {
            return Ok(Some(status));
        }
        let killed = child.killed.clone();
        let Some(task) = child.task.as_mut() else {
            return Ok(Some(EXIT_NOT_FOUND));
        };
        let result = match tokio::time::timeout(Duration::from_millis(millis), task).await {
            Ok(result) => result,
            Err(_) => return Ok(None),
        };
        let status = self.status_of(signal_of(&killed), result);
        self.waited(&c, status)?;
        Ok(Some(status))
    }

    async fn kill(&mut self, c: Resource<wit::Child>, signal: u8) -> Result<()> {
        let child = self.get::<Child, _>(&c)?;
        if let Some(task) = &child.task
            && !task.is_finished()
        {
            task.abort();
            child.killed.store(signal.clamp(1, 127), Ordering::Relaxed);
        }
        Ok(())
    }

    async fn signal(&mut self, c: Resource<wit::Child>) -> Result<Option<u8>> {
        Ok(self.get::<Child, _>(&c)?.ended_by)
    }

    async fn drop(&mut self, c: Resource<wit::Child>) -> Result<()> {
        // The child goes on; it ends with its job.
        self.take::<Child, _>(&c)?;
        Ok(())
    }
}
