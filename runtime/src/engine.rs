//! The one wasmtime engine of a runtime: pooling allocator, epoch interruption driven by a
//! single ticker thread, async support. Compiled components are cached by `cache`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use wasmtime::Result;
use wasmtime::error::Context as _;
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::limits::{EPOCH_TICK, POOL_INSTANCES};

/// Builds the engine every sandbox of a runtime shares.
pub(crate) fn new_engine(max_memory_bytes: usize) -> Result<Engine> {
    let pagemap_scan = PoolingAllocationConfig::is_pagemap_scan_available();
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(POOL_INSTANCES)
        .total_core_instances(POOL_INSTANCES * 4)
        .total_memories(POOL_INSTANCES)
        .total_tables(POOL_INSTANCES * 4)
        .total_stacks(POOL_INSTANCES)
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

    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
        // Every process ends through an error value (`I32Exit`), and capturing a wasm
        // backtrace for it cost more than the rest of a short job. Trap messages stay.
        .wasm_backtrace_max_frames(None)
        // Deep recursion in interpreters (CPython, Boa) needs more than the default stack.
        .max_wasm_stack(4 << 20)
        .async_stack_size(8 << 20);
    Engine::new(&config).context("creating the wasmtime engine")
}

/// Advances the engine's epoch every [`EPOCH_TICK`] until dropped.
pub(crate) struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EpochTicker {
    pub(crate) fn start(engine: &Engine) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let weak = engine.weak();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("wasbox-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
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
            let _ = t.join();
        }
    }
}
