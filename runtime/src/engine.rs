//! The wasmtime engines of a runtime: pooling allocator, epoch interruption driven by a
//! single ticker thread, async support. They load compiled code only: compiling is done by
//! one engine per configuration and process, set up on the first compile ([`compiler_for`]).
//! Compiled components are cached by `cache`, so a start whose programs are all in the cache
//! never sets a compiler up (cranelift's probe of the CPU and its tables: 0-3% of a
//! `wasbox run`).

use crate::sync::lock;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use wasmtime::Result;
use wasmtime::error::Context as _;
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::capacity::COMPACT_MEMORY;
use crate::limits::EPOCH_TICK;

/// Where a store's instance lives, and so which engine's code it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// The pooling allocator: slots kept warm and reused, the fastest start. Short jobs.
    Pool = 0,
    /// Allocated on demand: nothing reserved ahead, so no node-wide wall. Long-lived
    /// interactive programs, and whatever the pool has no slot for. Like the pool's, its
    /// linear memory reserves 4 GiB of address space so that compiled code needs no bounds
    /// checks (one compile cache entry serves both: their compatibility hashes agree).
    OnDemand = 1,
    /// On demand with a compact memory: [`COMPACT_MEMORY`] reserved, so compiled code checks
    /// the bounds of every access (python's compute: 22% slower on the development
    /// machine). Only for what comes past the address space's room for 4 GiB reservations
    /// (about 26,000 of them with the rest of the process), so that a node may hold more
    /// live sandboxes than that. Compiled separately, on first use.
    Compact = 2,
}

/// Engines of a runtime, one per [`Placement`] (in that order).
pub(crate) type Engines = [Engine; 3];

/// The engines every sandbox of a runtime shares: see [`Placement`]. With no pool slots
/// (a command-line run of one job, where setting a pool up would cost more than it saves)
/// they are all the on-demand one.
pub(crate) fn new_engines(max_memory_bytes: usize, pool_slots: u32) -> Result<Engines> {
    let on_demand = Engine::new(&config(InstanceAllocationStrategy::OnDemand))
        .context("creating the on-demand wasmtime engine")?;
    if pool_slots == 0 {
        return Ok([on_demand.clone(), on_demand.clone(), on_demand]);
    }
    let pagemap_scan = PoolingAllocationConfig::is_pagemap_scan_available();
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(pool_slots)
        .total_core_instances(pool_slots * 4)
        .total_memories(pool_slots)
        // WebAssembly exceptions (the scientific python3's C++ and its `setjmp`) allocate
        // their objects in a GC heap, which takes a slot of the memory pool when first used.
        .total_gc_heaps(pool_slots)
        .total_tables(pool_slots * 4)
        .total_stacks(pool_slots)
        .max_memories_per_component(4)
        .max_tables_per_component(8)
        .max_core_instances_per_component(16)
        .max_component_instance_size(2 << 20)
        // The scientific python3's function table has some 47,000 entries (the default
        // limit is 20,000); a slot's table is reserved address space, resident once used.
        .table_elements(1 << 16)
        // And its instance (the context of its 5,000 functions and their imports) takes
        // 1.5 MiB, past the default 1 MiB.
        .max_core_instance_size(2 << 20)
        .max_memory_size(max_memory_bytes.max(64 << 20))
        // Keep the first few MiB of each slot mapped so the next process starts warm. With
        // PAGEMAP_SCAN (Linux 6.7+) only the pages a process dirtied are reset; elsewhere the
        // whole kept range is cleared with memset, which is why it stays small.
        .pagemap_scan(Enabled::Auto)
        .linear_memory_keep_resident(if pagemap_scan { 16 << 20 } else { 256 << 10 })
        .table_keep_resident(64 << 10);
    let pooled = Engine::new(&config(InstanceAllocationStrategy::Pooling(pool)))
        .context("creating the wasmtime engine")?;
    let mut compact = config(InstanceAllocationStrategy::OnDemand);
    compact
        .memory_reservation(COMPACT_MEMORY as u64)
        // The memory never moves (it cannot grow past its reservation, which is the limit
        // of the processes placed there): code may keep its base in a register. Measured:
        // 22% slower than without bounds checks, against 30% for a memory that may move.
        .memory_may_move(false);
    let compact = Engine::new(&compact).context("creating the compact wasmtime engine")?;
    Ok([pooled, on_demand, compact])
}

/// The engine that compiles code for `engine`, made on its first use and kept for the
/// process: `engine`'s configuration with a compiler. Its code loads into `engine`
/// (`Component::deserialize` checks that their tunables and features agree, and that the host
/// has the CPU features the code was compiled for). The pooled and on-demand engines share
/// one.
pub(crate) fn compiler_for(engine: &Engine) -> Result<Engine> {
    static COMPILERS: Mutex<Vec<(u64, Engine)>> = Mutex::new(Vec::new());
    let key = compatibility(engine);
    let mut compilers = lock(&COMPILERS);
    if let Some((_, c)) = compilers.iter().find(|(k, _)| *k == key) {
        return Ok(c.clone());
    }
    let mut config = engine.config().clone();
    config
        .enable_compiler(true)
        .allocation_strategy(InstanceAllocationStrategy::OnDemand);
    let compiler = Engine::new(&config).context("creating the compiling wasmtime engine")?;
    compilers.push((key, compiler.clone()));
    Ok(compiler)
}

/// `engine`'s compatibility hash (its tunables, features and wasmtime's version) as a
/// number: engines with the same one load the same compiled code.
fn compatibility(engine: &Engine) -> u64 {
    let mut h = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    h.finish()
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
        // Code is compiled by `compiler_for`, whose engine turns this back on.
        .enable_compiler(false)
        .wasm_component_model(true)
        .epoch_interruption(true)
        .allocation_strategy(strategy)
        // Every process ends through an error value (`I32Exit`), and capturing a wasm
        // backtrace for it cost more than the rest of a short job. Trap messages stay.
        .wasm_backtrace_max_frames(None)
        // Deep recursion in interpreters needs more than the default stack: QuickJS's calls
        // recurse in C, some 300-700 bytes of native stack a JavaScript call (Node's own
        // limit is about 11,000 simple calls). Pages of it are resident only once used.
        .max_wasm_stack(12 << 20)
        .async_stack_size(16 << 20);
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
    pub(crate) fn start(engines: [&Engine; 3]) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        // Each engine once (without a pool they are all one).
        let mut distinct: Vec<&Engine> = Vec::new();
        for e in engines {
            if !distinct.iter().any(|d| Engine::same(d, e)) {
                distinct.push(e);
            }
        }
        let weak: Vec<_> = distinct.into_iter().map(Engine::weak).collect();
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
    fn sandbox_engines_only_load_what_their_compiling_engine_compiled() {
        for pool_slots in [0, 2] {
            let engines = new_engines(64 << 20, pool_slots).unwrap();
            for engine in &engines {
                let compiled = compiler_for(engine)
                    .unwrap()
                    .precompile_component(EMPTY_COMPONENT)
                    .unwrap();
                // No compiler is set up for them: a start that finds its programs in the
                // cache pays for none.
                let err = Component::new(engine, EMPTY_COMPONENT).unwrap_err();
                assert!(format!("{err:#}").contains("compil"), "{err:#}");
                // SAFETY: just compiled by `compiler_for(engine)`.
                unsafe { Component::deserialize(engine, &compiled) }.unwrap();
            }
        }
    }

    #[test]
    fn compact_code_is_compiled_apart_and_never_loaded_elsewhere() {
        let [pooled, on_demand, compact] = new_engines(64 << 20, 2).unwrap();
        let hash = compatibility;
        // The pool and on demand share compiled code (one cache entry); compact code has a
        // name of its own in the cache.
        assert_eq!(hash(&pooled), hash(&on_demand));
        assert_ne!(hash(&on_demand), hash(&compact));
        let wide = compiler_for(&on_demand)
            .unwrap()
            .precompile_component(EMPTY_COMPONENT)
            .unwrap();
        let checked = compiler_for(&compact)
            .unwrap()
            .precompile_component(EMPTY_COMPONENT)
            .unwrap();
        // Code without bounds checks must never run in a compact memory, nor the reverse.
        // SAFETY: both were compiled just above; deserialize refuses a mismatch.
        unsafe {
            assert!(Component::deserialize(&compact, &wide).is_err());
            assert!(Component::deserialize(&on_demand, &checked).is_err());
            Component::deserialize(&pooled, &wide).unwrap();
        }
    }
}
