//! Every limit and default of a sandbox, in one place.
//!
//! Front-ends start from [`Limits::default`] and override the fields their protocol fixes
//! (the worker API, for instance, caps captured output at 256 KiB per stream).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Resource limits applied to every job of a sandbox.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Wall-clock time a job may run before it ends with status `timeout` (exit code 124).
    pub timeout: Duration,
    /// Linear memory one process may grow to.
    pub memory_bytes: usize,
    /// Linear memory all processes of one sandbox may hold together (the shell, its
    /// children, an agent): a sandbox of many processes cannot take many times
    /// `memory_bytes`.
    pub sandbox_memory_bytes: usize,
    /// Processes alive at once in one sandbox (the shell and its children). Stops fork bombs.
    pub max_processes: u32,
    /// Processes one job may start in all. Stops spawn loops.
    pub max_spawns: u32,
    /// Host resources (files, streams, pollables) one process may hold open at once.
    pub max_open_resources: usize,
    /// Bytes of stdout and of stderr a job captures; the rest is dropped and flagged.
    pub max_output_bytes: usize,
    /// Bytes the sandbox's processes may add to its workspace and `/tmp` together (apparent
    /// file sizes); past it a write fails in the guest with `ENOSPC`.
    pub disk_bytes: u64,
    /// Files, directories and symlinks the sandbox may add; past it, `ENOSPC`.
    pub disk_inodes: u64,
    /// Network connections the sandbox's processes may hold open at once (when its policy
    /// lets it out at all).
    pub net_connections: u32,
    /// Bytes the sandbox may send and receive over the network, all connections together;
    /// past it, its connections fail.
    pub net_bytes: u64,
}

/// Defaults: generous enough for real agent work, small enough that a runaway job cannot
/// hurt its neighbours on a 2-core, 24 GiB node.
impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: DEFAULT_JOB_TIMEOUT,
            memory_bytes: DEFAULT_PROCESS_MEMORY,
            sandbox_memory_bytes: DEFAULT_SANDBOX_MEMORY,
            max_processes: 64,
            max_spawns: 4096,
            max_open_resources: 4096,
            max_output_bytes: 1 << 20,
            disk_bytes: DEFAULT_DISK_BYTES,
            disk_inodes: DEFAULT_DISK_INODES,
            net_connections: 32,
            net_bytes: 1 << 30,
        }
    }
}

impl Limits {
    pub fn net_connections(mut self, n: u32) -> Self {
        self.net_connections = n;
        self
    }
    pub fn net_bytes(mut self, bytes: u64) -> Self {
        self.net_bytes = bytes;
        self
    }
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
    /// The memory limit of one process. The sandbox's budget grows with it when it would
    /// otherwise be smaller than two such processes.
    pub fn memory_bytes(mut self, bytes: usize) -> Self {
        self.memory_bytes = bytes;
        self.sandbox_memory_bytes = self.sandbox_memory_bytes.max(bytes.saturating_mul(2));
        self
    }
    pub fn sandbox_memory_bytes(mut self, bytes: usize) -> Self {
        self.sandbox_memory_bytes = bytes;
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
    pub fn disk_bytes(mut self, bytes: u64) -> Self {
        self.disk_bytes = bytes;
        self
    }
    pub fn disk_inodes(mut self, n: u64) -> Self {
        self.disk_inodes = n;
        self
    }
}

/// Default job timeout of the runtime (a front-end may impose its own).
pub const DEFAULT_JOB_TIMEOUT: Duration = Duration::from_secs(60);
/// Default linear memory of one process.
pub const DEFAULT_PROCESS_MEMORY: usize = 512 << 20;
/// Default linear memory of all processes of a sandbox together.
pub const DEFAULT_SANDBOX_MEMORY: usize = 1 << 30;
/// Default disk quota of a sandbox: bytes it may add to its workspace and `/tmp`.
pub const DEFAULT_DISK_BYTES: u64 = 1 << 30;
/// Default inode quota of a sandbox: files, directories and links it may add.
pub const DEFAULT_DISK_INODES: u64 = 100_000;
/// Share of the machine's memory that the linear memories of all sandboxes of one runtime
/// may hold together, unless the embedder sets a budget (`RuntimeBuilder::node_memory_bytes`).
pub const NODE_MEMORY_SHARE: f64 = 0.8;

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
/// Past them, processes are allocated on demand (see `RuntimeBuilder::pool_slots`).
pub const POOL_INSTANCES: u32 = 512;

/// Bytes that many holders share up to a limit: a reservation either fits whole or is
/// refused, and nothing is ever over-committed.
#[derive(Debug)]
pub struct Budget {
    used: AtomicUsize,
    limit: usize,
}

impl Budget {
    pub fn new(limit: usize) -> Self {
        Budget {
            used: AtomicUsize::new(0),
            limit,
        }
    }

    /// Takes `n` bytes if they fit.
    pub fn try_reserve(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n).filter(|total| *total <= self.limit)
            })
            .is_ok()
    }

    /// Gives back `n` bytes taken by [`try_reserve`](Self::try_reserve).
    pub fn release(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }

    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    pub fn limit(&self) -> usize {
        self.limit
    }
}

/// A sandbox's disk quota: bytes and inodes its processes may add, charged before they are
/// written and given back when removed. Counts only grow within their limits; a release
/// past zero (a file that was there before the sandbox, removed) stops at zero.
/// A quota may have a parent (the node's, over all sandboxes) that every charge must also
/// fit in.
#[derive(Debug)]
pub struct Quota {
    bytes: AtomicU64,
    bytes_limit: u64,
    inodes: AtomicU64,
    inodes_limit: u64,
    parent: Option<Arc<Quota>>,
    /// A charge was refused since [`take_exceeded`](Self::take_exceeded) last looked.
    exceeded: AtomicBool,
}

/// A quota that goes (its sandbox and files removed) gives its parent back what it held.
impl Drop for Quota {
    fn drop(&mut self) {
        if let Some(p) = &self.parent {
            let (bytes, inodes) = self.used();
            p.release_bytes(bytes);
            p.release_inodes(inodes);
        }
    }
}

impl Quota {
    pub fn new(bytes_limit: u64, inodes_limit: u64) -> Self {
        Quota {
            bytes: AtomicU64::new(0),
            bytes_limit,
            inodes: AtomicU64::new(0),
            inodes_limit,
            parent: None,
            exceeded: AtomicBool::new(false),
        }
    }

    /// A quota whose charges must fit in `parent` too.
    pub fn within(bytes_limit: u64, inodes_limit: u64, parent: Arc<Quota>) -> Self {
        Quota {
            bytes: AtomicU64::new(0),
            bytes_limit,
            inodes: AtomicU64::new(0),
            inodes_limit,
            parent: Some(parent),
            exceeded: AtomicBool::new(false),
        }
    }

    fn reserve(&self, counter: &AtomicU64, limit: u64, n: u64) -> bool {
        let ok = counter
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n).filter(|total| *total <= limit)
            })
            .is_ok();
        if !ok {
            self.exceeded.store(true, Ordering::Release);
        }
        ok
    }

    /// Whether a charge was refused since the last call (which clears it).
    pub fn take_exceeded(&self) -> bool {
        self.exceeded.swap(false, Ordering::AcqRel)
    }

    fn release(counter: &AtomicU64, n: u64) {
        let _ = counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
            Some(used.saturating_sub(n))
        });
    }

    pub fn reserve_bytes(&self, n: u64) -> bool {
        if !self.reserve(&self.bytes, self.bytes_limit, n) {
            return false;
        }
        if let Some(p) = &self.parent
            && !p.reserve_bytes(n)
        {
            Self::release(&self.bytes, n);
            self.exceeded.store(true, Ordering::Release);
            return false;
        }
        true
    }
    pub fn release_bytes(&self, n: u64) {
        let before = self.bytes.load(Ordering::Acquire);
        Self::release(&self.bytes, n);
        if let Some(p) = &self.parent {
            // The parent gets back what this quota had charged of it, no more.
            p.release_bytes(n.min(before));
        }
    }
    pub fn reserve_inodes(&self, n: u64) -> bool {
        if !self.reserve(&self.inodes, self.inodes_limit, n) {
            return false;
        }
        if let Some(p) = &self.parent
            && !p.reserve_inodes(n)
        {
            Self::release(&self.inodes, n);
            self.exceeded.store(true, Ordering::Release);
            return false;
        }
        true
    }
    pub fn release_inodes(&self, n: u64) {
        let before = self.inodes.load(Ordering::Acquire);
        Self::release(&self.inodes, n);
        if let Some(p) = &self.parent {
            p.release_inodes(n.min(before));
        }
    }
    /// Charges what is already there (a volume's files, counted when it is opened), past the
    /// limits if need be: nothing more is charged until enough is given back.
    pub(crate) fn charge(&self, bytes: u64, inodes: u64) {
        self.bytes.fetch_add(bytes, Ordering::AcqRel);
        self.inodes.fetch_add(inodes, Ordering::AcqRel);
    }
    /// Bytes and inodes charged now.
    pub fn used(&self) -> (u64, u64) {
        (
            self.bytes.load(Ordering::Acquire),
            self.inodes.load(Ordering::Acquire),
        )
    }
    /// The two limits.
    pub fn limits(&self) -> (u64, u64) {
        (self.bytes_limit, self.inodes_limit)
    }
    /// Bytes and inodes that may still be charged: what is left of this quota and of every
    /// quota it is within.
    pub fn available(&self) -> (u64, u64) {
        let (b, i) = self.used();
        let own = (
            self.bytes_limit.saturating_sub(b),
            self.inodes_limit.saturating_sub(i),
        );
        match &self.parent {
            Some(p) => {
                let up = p.available();
                (own.0.min(up.0), own.1.min(up.1))
            }
            None => own,
        }
    }
}

/// The default node-wide memory budget: [`NODE_MEMORY_SHARE`] of the machine's memory
/// (`MemTotal` of `/proc/meminfo`), or 8 GiB when it cannot be read.
pub fn default_node_memory() -> usize {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
            kib.checked_mul(1024)
        });
    match total {
        Some(bytes) => (bytes as f64 * NODE_MEMORY_SHARE) as usize,
        None => 8 << 30,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_dropped_quota_gives_its_parent_back_what_it_held() {
        let node = Arc::new(Quota::new(100, 10));
        let sandbox = Quota::within(60, 5, node.clone());
        assert!(sandbox.reserve_bytes(60) && sandbox.reserve_inodes(5));
        assert_eq!(node.used(), (60, 5));
        drop(sandbox);
        assert_eq!(node.used(), (0, 0));
    }

    use super::*;

    #[test]
    fn a_quota_charges_its_parent_and_stops_at_zero() {
        let node = Arc::new(Quota::new(100, 10));
        let a = Quota::within(80, 8, node.clone());
        let b = Quota::within(80, 5, node.clone());
        assert!(a.reserve_bytes(60));
        assert!(!b.reserve_bytes(41), "the node has 40 left");
        assert_eq!(b.used().0, 0, "a refused charge leaves nothing behind");
        assert!(b.reserve_bytes(40));
        assert!(!a.reserve_bytes(21), "a's own limit");
        a.release_bytes(1000);
        assert_eq!(a.used().0, 0);
        assert_eq!(node.used().0, 40, "only what a had charged goes back");
        assert!(a.reserve_inodes(5));
        a.release_inodes(2);
        assert!(b.reserve_inodes(5));
        assert!(a.reserve_inodes(2), "node at 10 of 10");
        assert!(!a.reserve_inodes(1), "the node's 10 inodes are taken");
        assert_eq!(a.used().1, 5, "a refused charge leaves nothing behind");
    }

    #[test]
    fn a_budget_refuses_what_does_not_fit() {
        let b = Budget::new(100);
        assert!(b.try_reserve(60));
        assert!(!b.try_reserve(41));
        assert!(b.try_reserve(40));
        assert!(!b.try_reserve(1));
        b.release(60);
        assert_eq!(b.used(), 40);
        assert!(b.try_reserve(60));
        assert!(!b.try_reserve(usize::MAX));
    }
}
