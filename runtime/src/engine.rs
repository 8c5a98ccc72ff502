//! The wasmtime engines of a runtime: pooling allocator, epoch interruption driven by a
//! single ticker thread, async support. They load compiled code only: compiling is done by
//! one engine per process, set up on the first compile ([`compiler`]). Compiled components
//! are cached by `cache`, so a start whose programs are all in the cache never sets a
//! compiler up (cranelift's probe of the CPU and its tables: 0-3% of a `wasbox run`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use wasmtime::Result;
use wasmtime::error::Context as _;
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::limits::EPOCH_TICK;

/// Where a store's instance lives. Both engines load the same compiled code (one compile
/// cache entry serves both: their compatibility hashes agree).
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

/// The engine that compiles for the engines of every runtime in this process, made on its
/// first use. Its code loads into them: they share one configuration (the same tunables and
/// features; `Component::deserialize` checks both, and that the host has the CPU features
/// the code was compiled for).
pub(crate) fn compiler() -> Result<Engine> {
    static COMPILER: OnceLock<Engine> = OnceLock::new();
    if let Some(engine) = COMPILER.get() {
        return Ok(engine.clone());
    }
    let mut config = config(InstanceAllocationStrategy::OnDemand);
    config.enable_compiler(true);
    let engine = Engine::new(&config).context("creating the compiling wasmtime engine")?;
    Ok(COMPILER.get_or_init(|| engine).clone())
}

/// The CPU features compiled code may use that this host has (those cranelift looks for):
/// part of a compile cache entry's name, so that machines of different CPUs sharing a cache
/// keep an entry each instead of compiling over each other's.
pub(crate) fn host_cpu() -> String {
    let mut found = Vec::new();
    macro_rules! detect {
        ($detected:ident: $($feature:tt),*) => {
            $(if std::arch::$detected!($feature) {
                found.push($feature);
            })*
        };
    }
    #[cfg(target_arch = "x86_64")]
    detect!(is_x86_feature_detected: "cmpxchg16b", "sse3", "ssse3", "sse4.1", "sse4.2",
        "popcnt", "avx", "avx2", "fma", "avxvnni", "avx512vnni", "bmi1", "bmi2",
        "avx512bitalg", "avx512dq", "avx512f", "avx512vl", "avx512vbmi", "lzcnt");
    #[cfg(target_arch = "aarch64")]
    detect!(is_aarch64_feature_detected: "lse", "paca", "fp16", "dotprod", "i8mm");
    format!("{} {}", std::env::consts::ARCH, found.join(","))
}

fn config(strategy: InstanceAllocationStrategy) -> Config {
    let mut config = Config::new();
    config
        // Code is compiled by `compiler()`, whose engine turns this back on.
        .enable_compiler(false)
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

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::component::Component;

    /// The smallest component: its preamble (magic, version 0xd, layer 1) and nothing else.
    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\x00\x01\x00";

    #[test]
    fn sandbox_engines_only_load_what_the_compiling_engine_compiled() {
        for pool_slots in [0, 2] {
            let engines = new_engines(64 << 20, pool_slots).unwrap();
            let compiled = compiler()
                .unwrap()
                .precompile_component(EMPTY_COMPONENT)
                .unwrap();
            for engine in &engines {
                // No compiler is set up for them: a start that finds its programs in the
                // cache pays for none.
                let err = Component::new(engine, EMPTY_COMPONENT).unwrap_err();
                assert!(format!("{err:#}").contains("compil"), "{err:#}");
                // SAFETY: just compiled by `compiler()`, for this configuration.
                unsafe { Component::deserialize(engine, &compiled) }.unwrap();
            }
        }
    }
}
