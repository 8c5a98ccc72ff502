//! The runtime: one engine, one linker, the images, and the compile cache. Cheap to clone;
//! everything a sandbox needs is shared from here.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Result, anyhow};
use wasmtime::component::Linker;

use crate::engine::{CompileCache, EpochTicker, new_engine};
use crate::image::{BASE_IMAGE, Image, base_image};
use crate::job::{JobOutput, JobSpec};
use crate::limits::Limits;
use crate::process::{ProcessState, add_to_linker};
use crate::sandbox::{Sandbox, SandboxConfig};

pub(crate) struct RuntimeInner {
    pub(crate) linker: Linker<ProcessState>,
    /// What term agents may import (WASI and the term worlds), made when the first agent is
    /// loaded: runtimes that host no agent never build it.
    agent_linker: std::sync::OnceLock<Linker<crate::term::AgentState>>,
    pub(crate) cache: CompileCache,
    pub(crate) limits: Limits,
    images: HashMap<String, Arc<Image>>,
    default_image: String,
    /// Where temporary workspaces and each sandbox's `/tmp` are made.
    pub(crate) temp_dir: Option<PathBuf>,
    _ticker: EpochTicker,
}

/// An embeddable WebAssembly sandbox runtime. See the crate documentation for an example.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<RuntimeInner>,
}

/// Configures a [`Runtime`].
pub struct RuntimeBuilder {
    limits: Limits,
    cache_dir: Option<PathBuf>,
    use_cache: bool,
    images: Vec<Image>,
    default_image: String,
    temp_dir: Option<PathBuf>,
}

impl RuntimeBuilder {
    /// Where temporary workspaces and each sandbox's private `/tmp` are created (default:
    /// the system's temporary directory, `TMPDIR`). A tmpfs here makes sandbox creation
    /// several times cheaper than a disk.
    pub fn temp_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.temp_dir = Some(dir.into());
        self
    }

    /// Default limits of every sandbox (a sandbox may set its own).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Where compiled components are cached (see [`Runtime::default_cache_dir`]).
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self.use_cache = true;
        self
    }

    /// Compile every program in memory at first use; nothing is written to disk.
    pub fn no_cache(mut self) -> Self {
        self.use_cache = false;
        self
    }

    /// Adds an image (the built-in `base` image is always present).
    pub fn image(mut self, image: Image) -> Self {
        self.images.push(image);
        self
    }

    /// The image sandboxes use when they name none.
    pub fn default_image(mut self, name: impl Into<String>) -> Self {
        self.default_image = name.into();
        self
    }

    pub fn build(self) -> Result<Runtime> {
        let engine = new_engine(self.limits.memory_bytes)?;
        let mut linker = Linker::new(&engine);
        add_to_linker(&mut linker)?;
        let mut images: HashMap<String, Arc<Image>> = HashMap::new();
        images.insert(BASE_IMAGE.to_string(), Arc::new(base_image()));
        for image in self.images {
            images.insert(image.name().to_string(), Arc::new(image));
        }
        anyhow::ensure!(
            images.contains_key(&self.default_image),
            "default image `{}` is not defined",
            self.default_image
        );
        let cache_dir = if self.use_cache {
            self.cache_dir.or_else(CompileCache::default_dir)
        } else {
            None
        };
        Ok(Runtime {
            inner: Arc::new(RuntimeInner {
                _ticker: EpochTicker::start(&engine)?,
                linker,
                agent_linker: std::sync::OnceLock::new(),
                cache: CompileCache::new(cache_dir),
                limits: self.limits,
                images,
                default_image: self.default_image,
                temp_dir: self.temp_dir,
            }),
        })
    }
}

impl Runtime {
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder {
            limits: Limits::default(),
            cache_dir: None,
            use_cache: true,
            images: Vec::new(),
            default_image: BASE_IMAGE.to_string(),
            temp_dir: None,
        }
    }

    /// A runtime with default limits, the built-in image and the default cache directory.
    pub fn new() -> Result<Runtime> {
        Self::builder().build()
    }

    /// `$WASBOX_CACHE_DIR`, else `$XDG_CACHE_HOME/wasbox`, else `~/.cache/wasbox`.
    pub fn default_cache_dir() -> Option<PathBuf> {
        CompileCache::default_dir()
    }

    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    pub(crate) fn image(&self, name: Option<&str>) -> Result<Arc<Image>> {
        let name = name.unwrap_or(&self.inner.default_image);
        self.inner
            .images
            .get(name)
            .cloned()
            .ok_or_else(|| anyhow!("unknown image `{name}`"))
    }

    /// The linker of term agents (see [`RuntimeInner::agent_linker`]).
    pub(crate) fn agent_linker(&self) -> Result<&Linker<crate::term::AgentState>> {
        let cell = &self.inner.agent_linker;
        if let Some(linker) = cell.get() {
            return Ok(linker);
        }
        let mut linker = Linker::new(self.inner.linker.engine());
        crate::term::add_to_linker(&mut linker)?;
        // Two first loads may race: either linker is as good as the other.
        Ok(cell.get_or_init(|| linker))
    }

    /// Names of the images this runtime can run.
    pub fn image_names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.inner.images.keys().map(String::as_str).collect();
        v.sort_unstable();
        v
    }

    /// Compiles (or loads from the cache) every program of every image, so that no job
    /// waits for the compiler later.
    pub async fn preload(&self) -> Result<()> {
        for image in self.inner.images.values() {
            for program in image.programs() {
                program.pre(&self.inner.linker, &self.inner.cache).await?;
            }
        }
        Ok(())
    }

    /// Makes a sandbox; jobs run in it share its workspace.
    pub fn sandbox(&self, config: SandboxConfig) -> Result<Sandbox> {
        Sandbox::new(self, config)
    }

    /// Runs one job in a fresh sandbox with a temporary workspace.
    pub async fn run(&self, spec: JobSpec) -> Result<JobOutput> {
        self.sandbox(SandboxConfig::default())?.run(spec).await
    }
}
