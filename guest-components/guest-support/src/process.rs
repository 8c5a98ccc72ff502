//! The `wasbox:sandbox/process` import in the shape a shell needs: pipe ends and children
//! named by small integers (like file descriptors and process ids), kept in this process's
//! own tables. Underneath they are the WIT resources; closing a handle drops its resource,
//! and giving a handle to a child gives it a duplicate, so the caller decides when its own
//! copy closes.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::bindings::wasbox::sandbox::process as wit;

/// A pipe end held by this process.
pub type Handle = u32;
/// A child of this process.
pub type Pid = u32;

/// Why a call failed; each carries a message like a shell would print.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// No program of that name in the image (a shell exits 127).
    NotFound(String),
    /// A process or spawn limit of the sandbox was reached.
    Limit(String),
    /// A file could not be opened, a pipe is broken, and the like.
    Io(String),
    /// The handle names no pipe end of this process (of the right direction).
    BadHandle,
}

impl From<wit::Error> for Error {
    fn from(e: wit::Error) -> Self {
        match e {
            wit::Error::NotFound(m) => Error::NotFound(m),
            wit::Error::Limit(m) => Error::Limit(m),
            wit::Error::Io(m) => Error::Io(m),
        }
    }
}

/// Where one standard stream of a child goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stdio {
    /// The caller's own stream of the same kind.
    Inherit,
    /// The caller's own stdout (for `2>&1` when the caller's stdout is inherited).
    InheritStdout,
    /// The caller's own stderr (for `>&2`).
    InheritStderr,
    /// Nothing (`/dev/null`).
    Null,
    /// A pipe end of this process; the child gets its own copy.
    Handle(Handle),
    /// A file opened by the host for reading.
    ReadFile(String),
    /// A file created or truncated for writing.
    WriteFile(String),
    /// A file created or appended to.
    AppendFile(String),
    /// For stderr only: where the child's stdout goes (`2>&1`).
    SameAsStdout,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Command {
    pub argv: Vec<String>,
    /// The child's whole environment.
    pub env: Vec<(String, String)>,
    /// The child's working directory, an absolute sandbox path.
    pub cwd: String,
    pub stdin: Stdio,
    pub stdout: Stdio,
    pub stderr: Stdio,
}

enum End {
    Read(wit::PipeReader),
    Write(wit::PipeWriter),
}

thread_local! {
    static ENDS: RefCell<(HashMap<Handle, End>, Handle)> = RefCell::new((HashMap::new(), 3));
    static CHILDREN: RefCell<HashMap<Pid, wit::Child>> = RefCell::new(HashMap::new());
    /// Children seen to have ended by [`ended`] and not waited for yet: their statuses.
    static ENDED: RefCell<HashMap<Pid, i32>> = RefCell::new(HashMap::new());
}

fn insert(end: End) -> Handle {
    ENDS.with(|e| {
        let (ends, next) = &mut *e.borrow_mut();
        let h = *next;
        *next += 1;
        ends.insert(h, end);
        h
    })
}

/// Creates a pipe; returns its (read end, write end).
pub fn pipe() -> (Handle, Handle) {
    let (r, w) = wit::pipe();
    (insert(End::Read(r)), insert(End::Write(w)))
}

/// Closes a pipe end. A pipe reaches end of file when every write end is closed.
pub fn close(handle: Handle) {
    ENDS.with(|e| e.borrow_mut().0.remove(&handle));
}

/// Reads up to `max` bytes from a read end; an empty result means end of file.
pub fn read(handle: Handle, max: u32) -> Result<Vec<u8>, Error> {
    ENDS.with(|e| match e.borrow().0.get(&handle) {
        Some(End::Read(r)) => r.read(max).map_err(Error::from),
        _ => Err(Error::BadHandle),
    })
}

/// Writes all of `data` to a write end, waiting for room; fails once the reader is gone.
pub fn write(handle: Handle, data: &[u8]) -> Result<(), Error> {
    ENDS.with(|e| match e.borrow().0.get(&handle) {
        Some(End::Write(w)) => w.write(data).map_err(Error::from),
        _ => Err(Error::BadHandle),
    })
}

/// Waits until one of the read ends `handles` has data or is at end of file; returns its
/// position in `handles`.
pub fn ready(handles: &[Handle]) -> Result<usize, Error> {
    ENDS.with(|e| {
        let ends = e.borrow();
        let mut readers = Vec::with_capacity(handles.len());
        for h in handles {
            match ends.0.get(h) {
                Some(End::Read(r)) => readers.push(r),
                _ => return Err(Error::BadHandle),
            }
        }
        Ok(wit::ready(&readers) as usize)
    })
}

fn to_wit(s: &Stdio) -> Result<wit::Stdio, Error> {
    Ok(match s {
        Stdio::Inherit => wit::Stdio::Inherit,
        Stdio::InheritStdout => wit::Stdio::InheritStdout,
        Stdio::InheritStderr => wit::Stdio::InheritStderr,
        Stdio::Null => wit::Stdio::Null,
        Stdio::Handle(h) => ENDS.with(|e| match e.borrow().0.get(h) {
            Some(End::Read(r)) => Ok(wit::Stdio::PipeReader(r.dup())),
            Some(End::Write(w)) => Ok(wit::Stdio::PipeWriter(w.dup())),
            None => Err(Error::BadHandle),
        })?,
        Stdio::ReadFile(p) => wit::Stdio::ReadFile(p.clone()),
        Stdio::WriteFile(p) => wit::Stdio::WriteFile(p.clone()),
        Stdio::AppendFile(p) => wit::Stdio::AppendFile(p.clone()),
        Stdio::SameAsStdout => wit::Stdio::SameAsStdout,
    })
}

/// Starts a program; returns its process id. The child runs concurrently with the caller;
/// the pipe ends named in `cmd` stay open here until closed.
pub fn spawn(cmd: &Command) -> Result<Pid, Error> {
    let child = wit::spawn(wit::Command {
        argv: cmd.argv.clone(),
        env: cmd.env.clone(),
        cwd: cmd.cwd.clone(),
        stdin: to_wit(&cmd.stdin)?,
        stdout: to_wit(&cmd.stdout)?,
        stderr: to_wit(&cmd.stderr)?,
    })?;
    let pid = child.id();
    CHILDREN.with(|c| c.borrow_mut().insert(pid, child));
    Ok(pid)
}

/// Waits for a child to end and returns its exit status (0-255; 124 after a deadline);
/// 127 for a process id that names no child.
pub fn wait(pid: Pid) -> i32 {
    if let Some(status) = ENDED.with(|e| e.borrow_mut().remove(&pid)) {
        return status;
    }
    match CHILDREN.with(|c| c.borrow_mut().remove(&pid)) {
        Some(child) => child.wait(),
        None => 127,
    }
}

/// Waits for a child at most `millis` milliseconds: its exit status, or `None` if it is
/// still running (it can be waited for again).
pub fn wait_timeout(pid: Pid, millis: u64) -> Option<i32> {
    if let Some(status) = ENDED.with(|e| e.borrow_mut().remove(&pid)) {
        return Some(status);
    }
    let status = CHILDREN.with(|c| match c.borrow().get(&pid) {
        Some(child) => child.wait_timeout(millis),
        None => Some(127),
    });
    if status.is_some() {
        CHILDREN.with(|c| c.borrow_mut().remove(&pid));
    }
    status
}

/// Whether a child has ended (`jobs`): its status, which a later [`wait`] still returns.
pub fn ended(pid: Pid) -> Option<i32> {
    if let Some(status) = ENDED.with(|e| e.borrow().get(&pid).copied()) {
        return Some(status);
    }
    let status = CHILDREN.with(|c| c.borrow().get(&pid).and_then(|ch| ch.wait_timeout(0)))?;
    CHILDREN.with(|c| c.borrow_mut().remove(&pid));
    ENDED.with(|e| e.borrow_mut().insert(pid, status));
    Some(status)
}

/// Ends a child now, as `signal` would (its status becomes 128 + signal).
pub fn kill(pid: Pid, signal: u8) {
    CHILDREN.with(|c| {
        if let Some(child) = c.borrow().get(&pid) {
            child.kill(signal);
        }
    });
}

/// The permission bits of a sandbox file (absolute path), `None` if there is no such file.
pub fn file_mode(path: &str) -> Option<u32> {
    wit::file_mode(path)
}

/// Sets the permission bits of a sandbox file (absolute path).
pub fn set_file_mode(path: &str, mode: u32) -> Result<(), Error> {
    wit::set_file_mode(path, mode).map_err(Error::from)
}

/// Whether the image has a program of this name.
pub fn has_program(name: &str) -> bool {
    wit::has_program(name)
}

/// The size (columns, rows) of the terminal the job runs on, if any.
pub fn terminal_size() -> Option<(u16, u16)> {
    wit::terminal_size()
}

/// The sandbox's disk: (used bytes, available bytes, used inodes, available inodes).
pub fn disk_usage() -> (u64, u64, u64, u64) {
    let d = wit::disk_usage();
    (
        d.used_bytes,
        d.available_bytes,
        d.used_inodes,
        d.available_inodes,
    )
}

/// A volume attached to the sandbox: its name, where, whether read-only, and its disk as
/// [`disk_usage`] gives the sandbox's.
pub struct Volume {
    pub name: String,
    pub path: String,
    pub read_only: bool,
    pub space: (u64, u64, u64, u64),
}

/// The volumes attached to the sandbox.
pub fn volumes() -> Vec<Volume> {
    wit::volumes()
        .into_iter()
        .map(|v| Volume {
            name: v.name,
            path: v.path,
            read_only: v.read_only,
            space: (
                v.space.used_bytes,
                v.space.available_bytes,
                v.space.used_inodes,
                v.space.available_inodes,
            ),
        })
        .collect()
}

/// Whether the user interrupted (Ctrl-C) since the last call.
pub fn take_interrupt() -> bool {
    wit::take_interrupt()
}

/// A process alive in the sandbox (`ps`).
#[derive(Clone, Debug)]
pub struct ProcessInfo {
    pub pid: u32,
    /// 0 for the first process of a job.
    pub ppid: u32,
    pub argv: Vec<String>,
    /// Milliseconds since the Unix epoch.
    pub started_ms: u64,
    /// Linear memory it holds, in bytes.
    pub memory_bytes: u64,
    /// CPU time it has used (user and system), in microseconds.
    pub cpu_us: u64,
}

/// Every process alive in the sandbox now, by pid.
pub fn processes() -> Vec<ProcessInfo> {
    wit::processes()
        .into_iter()
        .map(|p| ProcessInfo {
            pid: p.pid,
            ppid: p.ppid,
            argv: p.argv,
            started_ms: p.started_ms,
            memory_bytes: p.memory_bytes,
            cpu_us: p.cpu_us,
        })
        .collect()
}

/// What the sandbox's processes hold of its memory, and its limit: (used, limit) bytes.
pub fn memory_usage() -> (u64, u64) {
    let m = wit::memory_usage();
    (m.used_bytes, m.limit_bytes)
}

/// The calling process's pid.
pub fn self_pid() -> u32 {
    wit::self_pid()
}

/// Sends `signal` to the process `pid` of the sandbox (any job's; 0 only checks that it
/// is alive). The error is the message a shell prints ("(PID) - No such process").
pub fn signal_process(pid: u32, signal: u8) -> Result<(), String> {
    wit::signal_process(pid, signal).map_err(|e| match e {
        wit::Error::NotFound(m) | wit::Error::Limit(m) | wit::Error::Io(m) => m,
    })
}

/// CPU time in microseconds: (user, system).
pub type CpuTime = (u64, u64);

/// The calling process's CPU time so far, and its waited-for children's (with theirs), as
/// `getrusage`'s `RUSAGE_SELF` and `RUSAGE_CHILDREN` give them.
pub fn cpu_times() -> (CpuTime, CpuTime) {
    let (own, children) = wit::cpu_times();
    (
        (own.user_us, own.system_us),
        (children.user_us, children.system_us),
    )
}

/// The limits the calling process runs under (`ulimit`).
#[derive(Clone, Debug)]
pub struct Limits {
    /// Linear memory one process may grow to, in bytes.
    pub memory_bytes: u64,
    /// Open files and streams one process may hold.
    pub open_resources: u64,
    /// Processes alive at once in the sandbox.
    pub processes: u32,
    /// The sandbox's disk quota in bytes: no file grows past it.
    pub disk_bytes: u64,
    /// Wall-clock seconds the job may run, if limited.
    pub time_secs: Option<u64>,
    /// Bytes a pipe buffers.
    pub pipe_bytes: u64,
}

pub fn limits() -> Limits {
    let l = wit::limits();
    Limits {
        memory_bytes: l.memory_bytes,
        open_resources: l.open_resources,
        processes: l.processes,
        disk_bytes: l.disk_bytes,
        time_secs: l.time_secs,
        pipe_bytes: l.pipe_bytes,
    }
}
