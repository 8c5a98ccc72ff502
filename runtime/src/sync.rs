//! Locks that outlive a panic. A thread that panics while it holds one of the runtime's
//! mutexes leaves the data as its last complete statement did (every structure behind these
//! locks is whole between statements: tables, queues, counters), so the next holder goes on
//! with it instead of spreading the panic to every request and job that touches the lock.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// `m` locked, whether or not a holder panicked.
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
