//! Images: named sets of programs (`wasi:cli/command` components), and how `argv[0]` picks
//! one of them.
//!
//! An image never runs anything itself; it compiles (or loads from the cache) each program's
//! component on first use. Linking and instantiating are the host layer's business.

use std::collections::HashMap;

use bytes::Bytes;
use tokio::sync::OnceCell;
use wasmtime::component::Component;
use wasmtime::{Engine, Result};

use crate::cache::CompileCache;
use crate::engine::Placement;

/// One program of an image: a component and the names it answers to.
#[derive(Clone)]
pub struct ProgramSource {
    /// The program's own name (also the name of its cache file).
    pub name: String,
    /// The component's bytes.
    pub wasm: Bytes,
    /// Every name `argv[0]` may use for it (e.g. `sh` and `bash`; each applet of a
    /// multi-call program).
    pub names: Vec<String>,
    /// The SHA-256 of `wasm` where the build computed it (the built-in programs); others
    /// are hashed when first loaded.
    pub(crate) digest: Option<[u8; 32]>,
}

impl ProgramSource {
    pub fn new(name: &str, wasm: impl Into<Bytes>, names: &[&str]) -> Self {
        ProgramSource {
            name: name.to_string(),
            wasm: wasm.into(),
            names: names.iter().map(|s| s.to_string()).collect(),
            digest: None,
        }
    }

    /// A program embedded in the binary, with the digest `build.rs` computed for it.
    fn built_in(name: &str, wasm: &'static [u8], digest: [u8; 32], names: &[&str]) -> Self {
        ProgramSource {
            digest: Some(digest),
            ..ProgramSource::new(name, wasm, names)
        }
    }
}

pub(crate) struct Program {
    pub(crate) source: ProgramSource,
    /// Per [`Placement`] (each engine loads its own).
    component: [OnceCell<Component>; 3],
}

impl Program {
    /// The compiled component for `engine` (the engine of `placement`), compiled or loaded
    /// from the cache on first use.
    pub(crate) async fn component(
        &self,
        engine: &Engine,
        placement: Placement,
        cache: &CompileCache,
    ) -> Result<&Component> {
        self.component[placement as usize]
            .get_or_try_init(|| {
                cache.load(
                    engine,
                    &self.source.name,
                    self.source.wasm.clone(),
                    self.source.digest,
                )
            })
            .await
    }
}

/// A named set of programs.
pub struct Image {
    name: String,
    programs: Vec<Program>,
    by_name: HashMap<String, usize>,
    /// See [`Image::digest`].
    digest: std::sync::OnceLock<String>,
}

/// Directories a program name may be prefixed with and still resolve (`/bin/ls`).
const BIN_DIRS: &[&str] = &[
    "/bin/",
    "/usr/bin/",
    "/usr/local/bin/",
    "/sbin/",
    "/usr/sbin/",
];

impl Image {
    pub fn new(name: &str, programs: Vec<ProgramSource>) -> Self {
        let mut by_name = HashMap::new();
        for (i, p) in programs.iter().enumerate() {
            for n in p.names.iter().chain(std::iter::once(&p.name)) {
                by_name.entry(n.clone()).or_insert(i);
            }
        }
        Image {
            name: name.to_string(),
            programs: programs
                .into_iter()
                .map(|source| Program {
                    source,
                    component: Default::default(),
                })
                .collect(),
            by_name,
            digest: std::sync::OnceLock::new(),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `sha256:<hex>` over the programs' names and contents (their build-time digests for
    /// the built-in ones): two builds of an image with the same programs have the same one.
    pub fn digest(&self) -> &str {
        self.digest.get_or_init(|| {
            use sha2::{Digest as _, Sha256};
            let mut programs: Vec<&ProgramSource> =
                self.programs.iter().map(|p| &p.source).collect();
            programs.sort_by(|a, b| a.name.cmp(&b.name));
            let mut h = Sha256::new();
            for p in programs {
                let digest: [u8; 32] = p.digest.unwrap_or_else(|| Sha256::digest(&p.wasm).into());
                h.update(p.name.as_bytes());
                h.update([0]);
                h.update(digest);
            }
            let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
            format!("sha256:{hex}")
        })
    }

    /// Every name a program of this image answers to, sorted.
    pub fn program_names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.by_name.keys().map(String::as_str).collect();
        v.sort_unstable();
        v
    }

    /// The index of the program `argv0` names: a bare name, or one under `/bin`,
    /// `/usr/bin`, ...
    pub(crate) fn resolve(&self, argv0: &str) -> Option<usize> {
        let name = BIN_DIRS
            .iter()
            .find_map(|d| argv0.strip_prefix(d))
            .unwrap_or(argv0);
        if name.is_empty() || name.contains('/') {
            return None;
        }
        self.by_name.get(name).copied()
    }

    pub fn has_program(&self, argv0: &str) -> bool {
        self.resolve(argv0).is_some()
    }

    pub(crate) fn programs(&self) -> &[Program] {
        &self.programs
    }
}

/// The built-in `base` image, built from `guest-components/` and embedded in the binary.
pub fn base_image() -> Image {
    let mut coreutils: Vec<&str> = COREUTILS_APPLETS.lines().map(str::trim).collect();
    coreutils.retain(|l| !l.is_empty() && !l.starts_with('#'));
    Image::new(
        BASE_IMAGE,
        vec![
            ProgramSource::built_in("sh", BASE_SH.0, BASE_SH.1, &["sh", "bash"]),
            ProgramSource::built_in("coreutils", BASE_COREUTILS.0, BASE_COREUTILS.1, &coreutils),
            ProgramSource::built_in("tools", BASE_TOOLS.0, BASE_TOOLS.1, TOOLS_APPLETS),
            ProgramSource::built_in(
                "node",
                BASE_NODE.0,
                BASE_NODE.1,
                &["node", "nodejs", "js", "npm"],
            ),
            ProgramSource::built_in(
                "python",
                BASE_PYTHON.0,
                BASE_PYTHON.1,
                &["python3", "python", "pip", "pip3", "sqlite3"],
            ),
        ],
    )
}

/// Name of the built-in image.
pub const BASE_IMAGE: &str = "base";

/// Name of the image of `wasbox bench`'s compute kernels.
pub const BENCH_IMAGE: &str = "bench";

/// The compute kernels of `wasbox bench` (`guest-components/bench-compute`) as an image of
/// one program, `bench-compute`; not part of the built-in image.
pub fn bench_image() -> Image {
    Image::new(
        BENCH_IMAGE,
        vec![ProgramSource::built_in(
            "bench-compute",
            BENCH_COMPUTE.0,
            BENCH_COMPUTE.1,
            &["bench-compute"],
        )],
    )
}

/// A guest program `build.rs` put in `OUT_DIR`, and its SHA-256 beside it.
macro_rules! guest {
    ($file:literal) => {
        (
            include_bytes!(concat!(env!("OUT_DIR"), "/", $file)),
            *include_bytes!(concat!(env!("OUT_DIR"), "/", $file, ".sha256")),
        )
    };
}

static BASE_SH: (&[u8], [u8; 32]) = guest!("sh.wasm");
static BASE_COREUTILS: (&[u8], [u8; 32]) = guest!("coreutils.wasm");
static BASE_TOOLS: (&[u8], [u8; 32]) = guest!("tools.wasm");
/// The applets of `guest-components/tools` (its `main.rs` dispatches on them).
const TOOLS_APPLETS: &[&str] = &[
    "jq", "gzip", "gunzip", "zcat", "bzip2", "bunzip2", "bzcat", "xz", "unxz", "xzcat", "lzma",
    "unlzma", "lzcat", "tar", "zip", "unzip", "bc", "git", "make", "gmake", "curl", "wget",
];
static BASE_NODE: (&[u8], [u8; 32]) = guest!("node.wasm");
static BASE_PYTHON: (&[u8], [u8; 32]) = guest!("python.wasm");
static BENCH_COMPUTE: (&[u8], [u8; 32]) = guest!("bench-compute.wasm");
static COREUTILS_APPLETS: &str = include_str!("../../guest-components/coreutils/applets.txt");
