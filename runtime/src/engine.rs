//! The one wasmtime engine of a runtime: pooling allocator, epoch interruption driven by a
//! single ticker thread, async support. Compiled components are cached by `cache`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use wasmtime::Result;
use wasmtime::error::Context as _;
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::limits::EPOCH_TICK;

/// Where a store's instance lives. Both engines compile the same code (one compile cache
/// entry serves both when their compatibility hashes agree).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// The pooling allocator: slots kept warm and reused, the fastest start. Short jobs.
    Pool = 0,
    /// Allocated on demand: nothing reserved ahead, so no node-wide wall. Long-lived
    /// interactive programs, and whatever the pool has no slot for.
    OnDemand = 1,
}

/// The engines every sandbox of a runtime shares: see [`Placement`]. With no pool slots
/// (a command-line run of one job, where setting a pool up would cost more than it saves)
/// the pooled engine is the on-demand one.
pub(crate) fn new_engines(max_memory_bytes: usize, pool_slots: u32) -> Result<[Engine; 2]> {
    let on_demand = Engine::new(&config(InstanceAllocationStrategy::OnDemand))
        .context("creating the on-demand wasmtime engine")?;
    if pool_slots == 0 {
        return Ok([on_demand.clone(), on_demand]);
    }
    let pagemap_scan = PoolingAllocationConfig::is_pagemap_scan_available();
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(pool_slots)
        .total_core_instances(pool_slots * 4)
        .total_memories(pool_slots)
        .total_tables(pool_slots * 4)
        .total_stacks(pool_slots)
        .max_memories_per_component(4)
        .max_tables_per_component(8)
        .max_core_instances_per_component(16)
        .max_component_instance_size(1 << 20)
        .max_memory_size(max_memory_bytes.max(64 << 20))
        // Keep the first few MiB of each slot mapped so the next process starts warm. With
        // PAGEMAP_SCAN (Linux 6.7+) only the pages a process dirtied are reset; elsewhere the
        // whole kept range is cleared with memset, which is why it stays small.
        .pagemap_scan(Enabled::Auto)
        .linear_memory_keep_resident(if pagemap_scan { 16 << 20 } else { 256 << 10 })
        .table_keep_resident(64 << 10);
    let pooled = Engine::new(&config(InstanceAllocationStrategy::Pooling(pool)))
        .context("creating the wasmtime engine")?;
    Ok([pooled, on_demand])
}

fn config(strategy: InstanceAllocationStrategy) -> Config {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .allocation_strategy(strategy)
        // Every process ends through an error value (`I32Exit`), and capturing a wasm
        // backtrace for it cost more than the rest of a short job. Trap messages stay.
        .wasm_backtrace_max_frames(None)
        // Deep recursion in interpreters (CPython, Boa) needs more than the default stack.
        .max_wasm_stack(4 << 20)
        .async_stack_size(8 << 20);
    config
}

/// Whether an instantiation failed only because the pool had no free slot of some kind.
pub(crate) fn pool_was_full(e: &wasmtime::Error) -> bool {
    e.is::<wasmtime::PoolConcurrencyLimitError>()
        || e.chain()
            .any(|c| c.is::<wasmtime::PoolConcurrencyLimitError>())
}

/// Advances the epoch of every engine of a runtime every [`EPOCH_TICK`] until dropped.
pub(crate) struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EpochTicker {
    pub(crate) fn start(engines: &[Engine]) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let weak: Vec<_> = engines.iter().map(Engine::weak).collect();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("wasbox-epoch".into())
            // It only counts: a small stack is quicker to map and to give back.
            .stack_size(64 << 10)
            .spawn(move || {
                let mut next = std::time::Instant::now() + EPOCH_TICK;
                while !flag.load(Ordering::Relaxed) {
                    // Parked rather than asleep: a drop wakes it at once, so that a
                    // short-lived process (`wasbox run`) does not wait out a tick to exit.
                    let now = std::time::Instant::now();
                    if now < next {
                        std::thread::park_timeout(next - now);
                        continue;
                    }
                    next = now + EPOCH_TICK;
                    let mut any = false;
                    for engine in weak.iter().filter_map(|w| w.upgrade()) {
                        engine.increment_epoch();
                        any = true;
                    }
                    if !any {
                        break;
                    }
                }
            })?;
        Ok(EpochTicker {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}
