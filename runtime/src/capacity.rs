//! Node capacity and admission: how many component instances (processes, shells, agents) may
//! live at once in one runtime, sized from the machine, and the ticket a sandbox process
//! takes before it starts.
//!
//! Every store holds an [`Admission`] for as long as it lives. A front-end takes one ahead
//! (waiting a bounded time, or not at all) so that a request is refused with a clear reason
//! *before* it is accepted; a process started inside a sandbox (a shell's child) takes one
//! when it starts and fails alone, like `fork` failing with `EAGAIN`, when none is left.
//! Nothing another tenant does can make an admitted process trap.
//!
//! The limits a Linux host puts on a process bound the count: each live instance holds a few
//! memory mappings (its linear memory and its stack, each with a guard region) against
//! `vm.max_map_count`, and reserves 4 GiB of address space for its linear memory (so that
//! compiled code needs no bounds checks) against the process's 128 TiB; past the room for
//! those (about 30,000), a compact memory of 512 MiB whose code checks bounds (see
//! `engine::Placement::Compact`). An idle sandbox holds no open file (its workspace and
//! `/tmp` are opened while in use, and closed soon after), so the open-file limit, which
//! [`raise_open_file_limit`] lifts to the hard limit at start, bounds what runs at once
//! (connections, files programs hold open), not how many sandboxes live.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::limits::Budget;

/// Memory mappings one live instance holds: its linear memory (the zeroed pages below its
/// data, the data image mapped from the compiled file, the rest of the initial memory and
/// the reserved range: four) and its async stack with its guard page (two), and one for
/// what the kernel does not merge. Measured: 7.0 per session with a shell in `wasbox serve`
/// (`cargo bench -p wasbox-benches --bench density`). Past `vm.max_map_count` every `mmap`
/// of the process fails, so admission stops well before it.
pub const MAPPINGS_PER_INSTANCE: usize = 7;
/// Mappings left for everything else of the process (code, heap, threads, libraries).
pub const MAPPINGS_RESERVED: usize = 8192;
/// Address space one live instance reserves: 4 GiB for its linear memory, with a 32 MiB
/// guard region on either side (wasmtime's defaults; the `mmap` of a process past the
/// process's address space fails with ENOMEM). Measured: a node of 31,676 shells could map
/// no more.
pub const ADDRESS_SPACE_PER_INSTANCE: u64 = (4 << 30) + (64 << 20);
/// The linear memory a compact instance reserves, and the most it may grow to: the default
/// limit of a process ([`DEFAULT_PROCESS_MEMORY`](crate::limits::DEFAULT_PROCESS_MEMORY)).
/// Its code checks the bounds of every access (python's compute: 22% slower on the
/// development machine than with a 4 GiB reservation).
pub const COMPACT_MEMORY: usize = crate::limits::DEFAULT_PROCESS_MEMORY;
/// Address space one compact instance reserves: [`COMPACT_MEMORY`] and the 32 MiB guard
/// regions on either side.
pub const COMPACT_ADDRESS_SPACE: u64 = COMPACT_MEMORY as u64 + (64 << 20);
/// Address space left for the rest of the process: the pool's slots (512 of about 4 GiB),
/// stacks, heap and code.
pub const ADDRESS_SPACE_RESERVED: u64 = 8 << 40;
/// The address space of a process: 47 bits on x86-64 (and on arm64 with 48-bit addresses, of
/// which the kernel gives half only on request).
const ADDRESS_SPACE: u64 = 1 << 47;
/// Open files left for the rest of the process (listeners, the cache, logs).
pub const FILES_RESERVED: usize = 1024;
/// Node memory that must be free for a new process to be admitted: what a small program
/// needs to start (its initial linear memory), with room to grow.
pub const ADMIT_MEMORY_HEADROOM: usize = 16 << 20;
/// How often whoever waits for room others hold (an admission, a process short of memory)
/// looks again.
pub(crate) const ROOM_POLL: Duration = Duration::from_millis(10);
/// How long an agent's instance (bouvet, sidecar, term) and each command it starts wait for
/// room other sandboxes hold before they fail to start; the front-ends give an admitted job,
/// exec or process the same.
pub const ROOM_WAIT: Duration = Duration::from_secs(5);
/// The most instances [`default_max_instances`] picks, whatever the machine allows.
pub const MAX_INSTANCES_CAP: usize = 100_000;

/// Why a new process was not admitted.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refused {
    /// The node's limit of live instances is reached.
    Instances { limit: usize },
    /// The node's memory budget has less than [`ADMIT_MEMORY_HEADROOM`] free.
    Memory { used: usize, limit: usize },
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Instances { limit } => write!(
                f,
                "the node is at its limit of {limit} live sandbox processes"
            ),
            Refused::Memory { used, limit } => write!(
                f,
                "the node's sandbox memory budget is in use ({} of {} MiB)",
                used >> 20,
                limit >> 20
            ),
        }
    }
}

impl std::error::Error for Refused {}

/// A place for one live instance, held by its store (or by a front-end until the process
/// starts). Dropping it gives the place back.
#[derive(Debug)]
pub struct Admission {
    _permit: OwnedSemaphorePermit,
}

/// A live instance outside the pool, counted as wide (a 4 GiB reservation, see
/// [`wide_instances`]) or compact until dropped.
pub(crate) struct Unpooled(Arc<AtomicUsize>);

impl Drop for Unpooled {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The node-wide count of live instances, and the memory budget admission looks at.
pub(crate) struct Capacity {
    slots: Arc<Semaphore>,
    max: usize,
    /// Live on-demand instances with 4 GiB reservations, and how many may be.
    wide: Arc<AtomicUsize>,
    wide_max: usize,
    /// Live instances with compact memories.
    compact: Arc<AtomicUsize>,
    /// Places an interactive program (a PTY's shell) may not take: kept for jobs.
    reserved: usize,
    memory: Arc<Budget>,
}

impl Capacity {
    pub(crate) fn new(max: usize, reserved: usize, memory: Arc<Budget>) -> Self {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        Capacity {
            slots: Arc::new(Semaphore::new(max)),
            max,
            wide: Arc::new(AtomicUsize::new(0)),
            wide_max: wide_instances(max),
            compact: Arc::new(AtomicUsize::new(0)),
            reserved: reserved.min(max - 1),
            memory,
        }
    }

    /// Another count of [`wide_instances`] than the address space's.
    pub(crate) fn with_wide_max(mut self, max: Option<usize>) -> Self {
        self.wide_max = max.unwrap_or(self.wide_max);
        self
    }

    pub(crate) fn max(&self) -> usize {
        self.max
    }

    pub(crate) fn in_use(&self) -> usize {
        self.max - self.slots.available_permits()
    }

    /// Whether another on-demand instance may reserve 4 GiB. Checked before its start and
    /// counted when its store is made, so a few starting at once may pass together: the
    /// reserve of [`ADDRESS_SPACE_RESERVED`] holds them.
    pub(crate) fn wide_room(&self) -> bool {
        self.wide.load(Ordering::Relaxed) < self.wide_max
    }

    /// Counts an instance outside the pool (wide or compact) while the result lives.
    pub(crate) fn unpooled(&self, compact: bool) -> Unpooled {
        let count = if compact { &self.compact } else { &self.wide };
        count.fetch_add(1, Ordering::Relaxed);
        Unpooled(count.clone())
    }

    /// Live instances outside the pool with 4 GiB reservations, with compact memories, and
    /// how many may have 4 GiB.
    pub(crate) fn unpooled_in_use(&self) -> (usize, usize, usize) {
        (
            self.wide.load(Ordering::Relaxed),
            self.compact.load(Ordering::Relaxed),
            self.wide_max,
        )
    }

    fn memory_check(&self) -> Result<(), Refused> {
        let (used, limit) = (self.memory.used(), self.memory.limit());
        if limit.saturating_sub(used) < ADMIT_MEMORY_HEADROOM {
            return Err(Refused::Memory { used, limit });
        }
        Ok(())
    }

    /// A place now, or the reason there is none.
    pub(crate) fn try_admit(&self) -> Result<Admission, Refused> {
        self.memory_check()?;
        match self.slots.clone().try_acquire_owned() {
            Ok(permit) => Ok(Admission { _permit: permit }),
            Err(_) => Err(Refused::Instances { limit: self.max }),
        }
    }

    /// A place for a long-lived interactive program: like [`try_admit`](Self::try_admit),
    /// but never one of the places reserved for jobs, nor the memory they need to start
    /// ([`ADMIT_MEMORY_HEADROOM`] each, at most half the budget): a node full of idle shells
    /// still runs jobs.
    pub(crate) fn try_admit_interactive(&self) -> Result<Admission, Refused> {
        if self.slots.available_permits() <= self.reserved {
            return Err(Refused::Instances {
                limit: self.max - self.reserved,
            });
        }
        let (used, limit) = (self.memory.used(), self.memory.limit());
        let kept = (self.reserved.saturating_mul(ADMIT_MEMORY_HEADROOM)).min(limit / 2);
        if limit.saturating_sub(used) < kept.saturating_add(ADMIT_MEMORY_HEADROOM) {
            return Err(Refused::Memory { used, limit });
        }
        self.try_admit()
    }

    /// A place within `wait`, or the reason there is none. Waiters for an instance are
    /// served in order; memory given back is looked for every few milliseconds.
    pub(crate) async fn admit(&self, wait: Duration) -> Result<Admission, Refused> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let acquired =
                tokio::time::timeout_at(deadline, self.slots.clone().acquire_owned()).await;
            let Ok(Ok(permit)) = acquired else {
                return Err(Refused::Instances { limit: self.max });
            };
            match self.memory_check() {
                Ok(()) => return Ok(Admission { _permit: permit }),
                Err(e) if tokio::time::Instant::now() >= deadline => return Err(e),
                Err(_) => {
                    drop(permit);
                    tokio::time::sleep(ROOM_POLL).await;
                }
            }
        }
    }
}

/// What the machine allows: `vm.max_map_count` and the address space (or `RLIMIT_AS`), each
/// divided by what one live instance holds of it, after a reserve for the rest of the process.
/// For sandboxes with the default memory limit of a process.
pub fn default_max_instances() -> usize {
    default_max_instances_with(None, crate::limits::DEFAULT_PROCESS_MEMORY)
}

/// [`default_max_instances`] with `vm.max_map_count` at least `map_count` (what
/// [`raise_max_map_count`] will set), for processes limited to `process_memory` bytes of
/// linear memory. Past the address space's room for 4 GiB reservations, instances get
/// compact memories ([`COMPACT_ADDRESS_SPACE`] each, see [`wide_instances`]) when their
/// limit fits one.
pub fn default_max_instances_with(map_count: Option<usize>, process_memory: usize) -> usize {
    let mappings = max_map_count().max(map_count.unwrap_or(0));
    let by_mappings = mappings.saturating_sub(MAPPINGS_RESERVED) / MAPPINGS_PER_INSTANCE;
    let each = if process_memory <= COMPACT_MEMORY {
        COMPACT_ADDRESS_SPACE
    } else {
        ADDRESS_SPACE_PER_INSTANCE
    };
    let by_address = address_space().saturating_sub(ADDRESS_SPACE_RESERVED) / each;
    by_mappings
        .min(usize::try_from(by_address).unwrap_or(usize::MAX))
        .clamp(64, MAX_INSTANCES_CAP)
}

/// Of `max` live instances, how many may reserve 4 GiB of address space each (code without
/// bounds checks) so that the rest still fit with compact memories: all of them when the
/// address space holds that many, else the most that leave room for the others.
pub fn wide_instances(max: usize) -> usize {
    let usable = address_space().saturating_sub(ADDRESS_SPACE_RESERVED);
    let max = max as u64;
    if max.saturating_mul(ADDRESS_SPACE_PER_INSTANCE) <= usable {
        return max as usize;
    }
    let compact = max.saturating_mul(COMPACT_ADDRESS_SPACE);
    let wide =
        usable.saturating_sub(compact) / (ADDRESS_SPACE_PER_INSTANCE - COMPACT_ADDRESS_SPACE);
    usize::try_from(wide).unwrap_or(usize::MAX)
}

/// The address space this process may map: [`ADDRESS_SPACE`], or its `RLIMIT_AS` if lower.
pub fn address_space() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut r) } != 0 || r.rlim_cur == libc::RLIM_INFINITY
    {
        return ADDRESS_SPACE;
    }
    ADDRESS_SPACE.min(r.rlim_cur)
}

const MAX_MAP_COUNT: &str = "/proc/sys/vm/max_map_count";

/// The kernel's limit of memory mappings per process (`vm.max_map_count`).
pub fn max_map_count() -> usize {
    std::fs::read_to_string(MAX_MAP_COUNT)
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(65_530)
}

/// Raises the kernel's `vm.max_map_count` to `to` when it is lower (never lowers it), as
/// `sysctl -w` would: a setting of the whole machine, which only root may change. Returns
/// the value in force.
pub fn raise_max_map_count(to: usize) -> std::io::Result<usize> {
    let now = max_map_count();
    if now >= to {
        return Ok(now);
    }
    std::fs::write(MAX_MAP_COUNT, format!("{to}\n"))?;
    Ok(max_map_count())
}

/// The soft limit of open files of this process.
pub fn open_file_limit() -> usize {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 1024;
    }
    usize::try_from(r.rlim_cur).unwrap_or(usize::MAX)
}

/// Open files the process may want: for the most instances any machine is sized for, a
/// directory each held open while in use, a connection, and a few files its programs open,
/// with the reserve.
const WANTED_OPEN_FILES: u64 = (MAX_INSTANCES_CAP * 3 + FILES_RESERVED) as u64;

/// Lifts the soft open-file limit to the hard limit (a server holds a directory per busy
/// sandbox and a connection per client; the usual soft limit of 1,024 would stop it at a
/// few hundred).
/// A process allowed to raise the hard limit (`CAP_SYS_RESOURCE`) raises it to what the
/// largest node needs, within the kernel's `fs.nr_open`. Returns the new soft limit.
pub fn raise_open_file_limit() -> usize {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 1024;
    }
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(1 << 20);
    let wanted = WANTED_OPEN_FILES.min(nr_open);
    if r.rlim_max != libc::RLIM_INFINITY && r.rlim_max < wanted {
        let higher = libc::rlimit {
            rlim_cur: wanted,
            rlim_max: wanted,
        };
        // SAFETY: setrlimit reads the struct it is given; refused without the capability.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &higher) } == 0 {
            return open_file_limit();
        }
    }
    if r.rlim_cur < r.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: r.rlim_max.min(wanted.max(r.rlim_cur)),
            rlim_max: r.rlim_max,
        };
        // SAFETY: as above; raising the soft limit up to the hard one is always allowed.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) };
    }
    open_file_limit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn admission_is_bounded_and_given_back() {
        let c = Capacity::new(2, 0, Arc::new(Budget::new(1 << 30)));
        let a = c.try_admit().unwrap();
        let _b = c.try_admit().unwrap();
        assert_eq!(c.in_use(), 2);
        assert_eq!(c.try_admit().unwrap_err(), Refused::Instances { limit: 2 });
        let waited = c.admit(Duration::from_millis(30)).await;
        assert_eq!(waited.unwrap_err(), Refused::Instances { limit: 2 });
        drop(a);
        assert!(c.admit(Duration::from_millis(30)).await.is_ok());
    }

    #[tokio::test]
    async fn a_waiter_gets_the_place_given_back() {
        let c = Arc::new(Capacity::new(1, 0, Arc::new(Budget::new(1 << 30))));
        let a = c.try_admit().unwrap();
        let waiter = tokio::spawn({
            let c = c.clone();
            async move { c.admit(Duration::from_secs(5)).await.is_ok() }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(a);
        assert!(waiter.await.unwrap());
    }

    #[test]
    fn interactive_programs_leave_the_reserve_to_jobs() {
        let c = Capacity::new(3, 1, Arc::new(Budget::new(1 << 30)));
        let _a = c.try_admit_interactive().unwrap();
        let _b = c.try_admit_interactive().unwrap();
        assert_eq!(
            c.try_admit_interactive().unwrap_err(),
            Refused::Instances { limit: 2 }
        );
        let _job = c.try_admit().unwrap();
        assert!(c.try_admit().is_err());
    }

    #[test]
    fn interactive_programs_leave_jobs_memory_to_start() {
        let memory = Arc::new(Budget::new(ADMIT_MEMORY_HEADROOM * 8));
        // Two places kept for jobs: the memory two jobs need to start is kept too.
        let c = Capacity::new(10, 2, memory.clone());
        assert!(memory.try_reserve(ADMIT_MEMORY_HEADROOM * 5));
        assert!(c.try_admit_interactive().is_ok());
        assert!(memory.try_reserve(ADMIT_MEMORY_HEADROOM));
        assert!(matches!(
            c.try_admit_interactive(),
            Err(Refused::Memory { .. })
        ));
        // A job still starts.
        assert!(c.try_admit().is_ok());
    }

    #[test]
    fn memory_without_headroom_is_refused() {
        let memory = Arc::new(Budget::new(ADMIT_MEMORY_HEADROOM * 2));
        let c = Capacity::new(10, 0, memory.clone());
        assert!(c.try_admit().is_ok());
        assert!(memory.try_reserve(ADMIT_MEMORY_HEADROOM + 1));
        assert!(matches!(c.try_admit(), Err(Refused::Memory { .. })));
    }

    #[test]
    fn a_higher_mapping_limit_allows_more_and_is_never_lowered() {
        let now = max_map_count();
        assert!(
            default_max_instances_with(Some(now * 4), COMPACT_MEMORY) >= default_max_instances()
        );
        // Asking for less than the kernel has changes nothing.
        assert_eq!(raise_max_map_count(1).unwrap(), now);
        assert_eq!(max_map_count(), now);
    }

    #[test]
    fn the_address_space_bounds_the_count() {
        let usable = address_space().saturating_sub(ADDRESS_SPACE_RESERVED);
        // However many mappings the kernel allows, compact reservations fit 128 TiB only so
        // many times...
        let n = default_max_instances_with(Some(usize::MAX / 2), COMPACT_MEMORY);
        let fit = usable / COMPACT_ADDRESS_SPACE;
        assert_eq!(n as u64, fit.clamp(64, MAX_INSTANCES_CAP as u64));
        // ...and 4 GiB ones far fewer, which is all processes with a larger limit may have.
        let n = default_max_instances_with(Some(usize::MAX / 2), COMPACT_MEMORY + 1);
        let fit = usable / ADDRESS_SPACE_PER_INSTANCE;
        assert_eq!(n as u64, fit.clamp(64, MAX_INSTANCES_CAP as u64));
        assert!(n < 32_000, "{n}");
    }

    #[test]
    fn instances_reserve_4_gib_while_the_others_still_fit() {
        let usable = address_space().saturating_sub(ADDRESS_SPACE_RESERVED);
        let all_wide = (usable / ADDRESS_SPACE_PER_INSTANCE) as usize;
        // As many as fit wide are all wide.
        assert_eq!(wide_instances(1000), 1000);
        assert_eq!(wide_instances(all_wide), all_wide);
        // Past that, fewer are wide as more must fit, and everything fits.
        let mut last = all_wide;
        for max in [all_wide + 1, 40_000, 50_000, 100_000] {
            let wide = wide_instances(max);
            assert!(wide <= last, "{max}: {wide}");
            let used = wide as u64 * ADDRESS_SPACE_PER_INSTANCE
                + (max - wide) as u64 * COMPACT_ADDRESS_SPACE;
            assert!(used <= usable, "{max}: {used} > {usable}");
            // One more wide would not fit.
            assert!(used + ADDRESS_SPACE_PER_INSTANCE - COMPACT_ADDRESS_SPACE > usable);
            last = wide;
        }
        // More than fit even compact: none wide.
        let too_many = (usable / COMPACT_ADDRESS_SPACE) as usize + 1;
        assert_eq!(wide_instances(too_many), 0);
    }

    #[test]
    fn the_machine_allows_a_positive_count() {
        let n = default_max_instances();
        assert!((64..=MAX_INSTANCES_CAP).contains(&n));
        assert!(raise_open_file_limit() >= open_file_limit().min(1024));
    }
}
