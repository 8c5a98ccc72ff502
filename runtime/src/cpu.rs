//! The CPU time of processes, for `time` and `times` in the shell: what `getrusage` gives a
//! native program, measured on the host's threads while they run a process's instance.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};

/// User and system time, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Times {
    pub(crate) user_us: u64,
    pub(crate) system_us: u64,
}

impl Times {
    /// The calling thread's CPU time so far (`RUSAGE_THREAD`).
    fn of_thread() -> Times {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: `usage` is a valid, writable `rusage`; on failure it stays zeroed.
        let usage = unsafe {
            libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr());
            usage.assume_init()
        };
        let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
        Times {
            user_us: us(usage.ru_utime),
            system_us: us(usage.ru_stime),
        }
    }

    fn since(self, before: Times) -> Times {
        Times {
            user_us: self.user_us.saturating_sub(before.user_us),
            system_us: self.system_us.saturating_sub(before.system_us),
        }
    }
}

/// The CPU time of one process, and that of the children it waited for (and of theirs).
/// Shared between the task that runs the process and the parent that waits for it.
#[derive(Debug, Default)]
pub(crate) struct CpuAccount {
    own: [AtomicU64; 2],
    children: [AtomicU64; 2],
}

fn add(to: &[AtomicU64; 2], t: Times) {
    to[0].fetch_add(t.user_us, Ordering::Relaxed);
    to[1].fetch_add(t.system_us, Ordering::Relaxed);
}

fn read(from: &[AtomicU64; 2]) -> Times {
    Times {
        user_us: from[0].load(Ordering::Relaxed),
        system_us: from[1].load(Ordering::Relaxed),
    }
}

impl CpuAccount {
    /// The process's own time so far.
    pub(crate) fn own(&self) -> Times {
        read(&self.own)
    }

    /// Its waited-for children's time so far.
    pub(crate) fn children(&self) -> Times {
        read(&self.children)
    }

    /// Adds a child that has been waited for: its own time and its children's.
    pub(crate) fn add_child(&self, child: &CpuAccount) {
        add(&self.children, child.own());
        add(&self.children, child.children());
    }

    /// Runs `fut`, charging this account with the CPU time of the thread for every poll
    /// of it. An instance runs on the thread that polls its store's future (file I/O of
    /// an in-memory workspace included), so that is the process's time; what it waits for
    /// is not.
    pub(crate) async fn metered<F: Future>(&self, fut: F) -> F::Output {
        let mut fut = std::pin::pin!(fut);
        std::future::poll_fn(|cx| {
            let before = Times::of_thread();
            let poll = fut.as_mut().poll(cx);
            add(&self.own, Times::of_thread().since(before));
            poll
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_busy_future_is_charged_and_a_waiting_one_is_not() {
        let account = CpuAccount::default();
        account
            .metered(async {
                // 30 ms of this thread's CPU time, however long other threads of a busy
                // machine make that take.
                let start = Times::of_thread();
                let mut x = 0u64;
                loop {
                    let used = Times::of_thread().since(start);
                    if used.user_us + used.system_us >= 30_000 {
                        break;
                    }
                    for _ in 0..10_000 {
                        x = std::hint::black_box(x.wrapping_add(1));
                    }
                }
            })
            .await;
        let busy = account.own();
        assert!(busy.user_us + busy.system_us >= 20_000, "{busy:?}");
        account
            .metered(tokio::time::sleep(std::time::Duration::from_millis(50)))
            .await;
        let after = account.own();
        assert!(
            after.user_us + after.system_us < busy.user_us + busy.system_us + 20_000,
            "{busy:?} then {after:?}"
        );
        let parent = CpuAccount::default();
        parent.add_child(&account);
        parent.add_child(&account);
        assert_eq!(parent.children().user_us, 2 * after.user_us);
        assert_eq!(parent.own(), Times::default());
    }
}
