//! Every limit and default of a sandbox, in one place.
//!
//! Front-ends start from [`Limits::default`] and override the fields their protocol fixes
//! (the worker API, for instance, caps captured output at 256 KiB per stream).

use std::time::Duration;

/// Resource limits applied to every job of a sandbox.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Wall-clock time a job may run before it ends with status `timeout` (exit code 124).
    pub timeout: Duration,
    /// Linear memory one process may grow to.
    pub memory_bytes: usize,
    /// Processes alive at once in one sandbox (the shell and its children). Stops fork bombs.
    pub max_processes: u32,
    /// Processes one job may start in all. Stops spawn loops.
    pub max_spawns: u32,
    /// Host resources (files, streams, pollables) one process may hold open at once.
    pub max_open_resources: usize,
    /// Bytes of stdout and of stderr a job captures; the rest is dropped and flagged.
    pub max_output_bytes: usize,
}

/// Defaults: generous enough for real agent work, small enough that a runaway job cannot
/// hurt its neighbours on a 2-core, 24 GiB node.
impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_SECS),
            memory_bytes: 512 << 20,
            max_processes: 64,
            max_spawns: 4096,
            max_open_resources: 4096,
            max_output_bytes: 1 << 20,
        }
    }
}

impl Limits {
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
    pub fn memory_bytes(mut self, bytes: usize) -> Self {
        self.memory_bytes = bytes;
        self
    }
    pub fn max_processes(mut self, n: u32) -> Self {
        self.max_processes = n;
        self
    }
    pub fn max_spawns(mut self, n: u32) -> Self {
        self.max_spawns = n;
        self
    }
    pub fn max_open_resources(mut self, n: usize) -> Self {
        self.max_open_resources = n;
        self
    }
    pub fn max_output_bytes(mut self, bytes: usize) -> Self {
        self.max_output_bytes = bytes;
        self
    }
}

/// Default job timeout of the runtime (a front-end may impose its own).
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;

/// Bytes a pipe between two processes buffers before its writer waits.
pub const PIPE_CAPACITY: usize = 1 << 20;

/// How often the engine's epoch advances; guests yield to other tasks at each tick and
/// deadlines are checked there.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Exit code of a job stopped at its deadline, as `timeout(1)` reports it.
pub const EXIT_TIMEOUT: i32 = 124;
/// Exit code of a program that could not be found, as a shell reports it.
pub const EXIT_NOT_FOUND: i32 = 127;
/// Exit code of a program ended by an interrupt (Ctrl-C), as after SIGINT.
pub const EXIT_INTERRUPTED: i32 = 130;
/// Exit code of a program that wrote to a pipe with no reader, as after SIGPIPE.
pub const EXIT_SIGPIPE: i32 = 141;
/// Exit code of a program that trapped (out of memory, unreachable, ...), like SIGABRT.
pub const EXIT_TRAP: i32 = 134;

/// Processes the engine's pooling allocator keeps slots for, all sandboxes together. Each
/// slot reserves address space (not memory) for one linear memory of up to 4 GiB plus
/// guard pages, so a few runtimes fit in one host process.
pub const POOL_INSTANCES: u32 = 512;
