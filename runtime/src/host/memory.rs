//! The memory limiter of one store: the process's own limit first, then the budget its
//! sandbox shares with its other processes, then the node's. What a store holds is given
//! back to both budgets when the store is dropped. Going over any of them traps the
//! instance with a [`MemoryExceeded`]; the host never allocates on the guest's behalf.

use std::sync::Arc;

use wasmtime::ResourceLimiter;

use super::exit::MemoryExceeded;
use crate::limits::Budget;

/// Core instances, tables and memories one store may create (a component is a handful).
const MAX_INSTANCES: usize = 64;
const MAX_TABLES: usize = 64;
const MAX_MEMORIES: usize = 8;
/// Elements one table may grow to.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

pub(crate) struct MemoryLimiter {
    process_limit: usize,
    sandbox: Arc<Budget>,
    node: Arc<Budget>,
    /// Bytes this store holds in both budgets.
    held: usize,
    /// Where `held` is shown (`ps`).
    shown: Option<Arc<std::sync::atomic::AtomicUsize>>,
}

impl MemoryLimiter {
    pub(crate) fn new(process_limit: usize, sandbox: Arc<Budget>, node: Arc<Budget>) -> Self {
        MemoryLimiter {
            process_limit,
            sandbox,
            node,
            held: 0,
            shown: None,
        }
    }

    /// Keeps `counter` equal to what this store holds.
    /// Bytes of linear memory the store holds now.
    pub(crate) fn held(&self) -> usize {
        self.held
    }

    pub(crate) fn shown_in(mut self, counter: Option<Arc<std::sync::atomic::AtomicUsize>>) -> Self {
        self.shown = counter;
        self
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.process_limit {
            return Err(MemoryExceeded::Process(self.process_limit).into());
        }
        let delta = desired.saturating_sub(current);
        if !self.sandbox.try_reserve(delta) {
            return Err(MemoryExceeded::Sandbox(self.sandbox.limit()).into());
        }
        if !self.node.try_reserve(delta) {
            self.sandbox.release(delta);
            let whole = self.node.limit();
            return Err(if self.held + delta > whole {
                MemoryExceeded::NodeWhole(whole)
            } else {
                MemoryExceeded::Node(whole)
            }
            .into());
        }
        self.held += delta;
        if let Some(c) = &self.shown {
            c.store(self.held, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

impl Drop for MemoryLimiter {
    fn drop(&mut self) {
        self.sandbox.release(self.held);
        self.node.release(self.held);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_is_charged_to_both_budgets_and_given_back() {
        let sandbox = Arc::new(Budget::new(100));
        let node = Arc::new(Budget::new(150));
        let mut a = MemoryLimiter::new(80, sandbox.clone(), node.clone());
        let mut b = MemoryLimiter::new(80, sandbox.clone(), node.clone());
        assert!(a.memory_growing(0, 60, None).unwrap());
        // Over the process's own limit.
        let e = a.memory_growing(60, 81, None).unwrap_err();
        assert_eq!(e.downcast_ref(), Some(&MemoryExceeded::Process(80)));
        // Over what the sandbox has left.
        let e = b.memory_growing(0, 50, None).unwrap_err();
        assert_eq!(e.downcast_ref(), Some(&MemoryExceeded::Sandbox(100)));
        assert!(b.memory_growing(0, 40, None).unwrap());
        assert_eq!((sandbox.used(), node.used()), (100, 100));
        // Another sandbox runs into the node's budget.
        let other = Arc::new(Budget::new(100));
        let mut c = MemoryLimiter::new(80, other.clone(), node.clone());
        let e = c.memory_growing(0, 60, None).unwrap_err();
        assert_eq!(e.downcast_ref(), Some(&MemoryExceeded::Node(150)));
        assert_eq!(other.used(), 0, "a refused growth holds nothing");
        drop(a);
        assert_eq!((sandbox.used(), node.used()), (40, 40));
        assert!(c.memory_growing(0, 60, None).unwrap());
        // Told apart: memory others hold (room may come back) from more than the whole
        // budget (it never will).
        let mut d = MemoryLimiter::new(1000, Arc::new(Budget::new(1000)), node.clone());
        let e = d.memory_growing(0, 60, None).unwrap_err();
        assert_eq!(e.downcast_ref(), Some(&MemoryExceeded::Node(150)));
        let e = d.memory_growing(0, 151, None).unwrap_err();
        assert_eq!(e.downcast_ref(), Some(&MemoryExceeded::NodeWhole(150)));
        drop((b, c));
        assert_eq!((sandbox.used(), other.used(), node.used()), (0, 0, 0));
    }
}
