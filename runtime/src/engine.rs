//! The one wasmtime engine of a runtime: pooling allocator, epoch interruption driven by a
//! single ticker thread, async support, and an on-disk cache of compiled components.
//!
//! The cache directory holds only `.cwasm` files this module wrote; nothing else is read
//! from it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use sha2::{Digest, Sha256};
use wasmtime::Result;
use wasmtime::component::Component;
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

/// Compiled components on disk, keyed by the component's bytes and the engine's
/// compatibility hash, so a changed program or engine never loads a stale artifact.
#[derive(Clone, Debug)]
pub(crate) struct CompileCache {
    dir: Option<PathBuf>,
}

impl CompileCache {
    pub(crate) fn new(dir: Option<PathBuf>) -> Self {
        CompileCache { dir }
    }

    /// The default cache directory: `$WASBOX_CACHE_DIR`, else `$XDG_CACHE_HOME/wasbox`,
    /// else `~/.cache/wasbox`.
    pub(crate) fn default_dir() -> Option<PathBuf> {
        if let Some(d) = std::env::var_os("WASBOX_CACHE_DIR") {
            return Some(PathBuf::from(d));
        }
        if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
            return Some(PathBuf::from(d).join("wasbox"));
        }
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("wasbox"))
    }

    /// Loads the component for `wasm`, compiling it (and storing the result) when no valid
    /// compiled copy exists. Compilation runs on a blocking thread.
    pub(crate) async fn load(&self, engine: &Engine, name: &str, wasm: Bytes) -> Result<Component> {
        let engine = engine.clone();
        let dir = self.dir.clone();
        let name = name.to_string();
        tokio::task::spawn_blocking(move || load_blocking(&engine, dir.as_deref(), &name, &wasm))
            .await
            .context("compiler thread panicked")?
    }
}

fn load_blocking(
    engine: &Engine,
    dir: Option<&Path>,
    name: &str,
    wasm: &[u8],
) -> Result<Component> {
    let Some(dir) = dir else {
        return Component::new(engine, wasm).with_context(|| format!("compiling `{name}`"));
    };
    let mut hasher = Sha256::new();
    hasher.update(wasm);
    std::hash::Hash::hash(
        &engine.precompile_compatibility_hash(),
        &mut HashWriter(&mut hasher),
    );
    let key: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let path = dir.join(format!("{name}-{}.cwasm", &key[..32]));

    if path.exists() {
        // SAFETY: the file was written by `precompile_component` of an engine with the same
        // compatibility hash (it is part of the name) and is only ever replaced atomically.
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(c) => return Ok(c),
            Err(e) => {
                tracing::warn!(program = name, error = %e, "ignoring unusable cached component")
            }
        }
    }
    let started = std::time::Instant::now();
    let bytes = engine
        .precompile_component(wasm)
        .with_context(|| format!("compiling `{name}`"))?;
    tracing::info!(
        program = name,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "compiled"
    );
    if let Err(e) = store_atomically(dir, &path, &bytes) {
        tracing::warn!(program = name, error = %e, "could not cache the compiled component");
    }
    // SAFETY: `bytes` was just produced by `precompile_component` on this very engine.
    unsafe { Component::deserialize(engine, &bytes) }
        .with_context(|| format!("loading compiled `{name}`"))
}

fn store_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, bytes)?;
    tmp.persist(path)?;
    Ok(())
}

/// Feeds `Hash` output into a SHA-256 hasher.
struct HashWriter<'a>(&'a mut Sha256);

impl std::hash::Hasher for HashWriter<'_> {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}
