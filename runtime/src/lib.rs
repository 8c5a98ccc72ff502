//! # wasbox-runtime
//!
//! An embeddable WebAssembly sandbox: programs are WASI components, each process a fresh
//! instance in its own store, confined to one workspace directory, with limits on time,
//! memory, processes and output. The built-in `base` image has a bash-compatible shell,
//! coreutils, python3 and node. Agents of several protocols (term SDK 2.0 and 1.x, ...) are
//! components hosted in the same sandboxes.
//!
//! ```no_run
//! use wasbox_runtime::{JobSpec, JobStatus, Runtime, SandboxConfig};
//!
//! # #[tokio::main] async fn main() -> anyhow::Result<()> {
//! let runtime = Runtime::new()?;
//!
//! // One job in a fresh temporary workspace.
//! let out = runtime.run(JobSpec::shell("echo hello | tr a-z A-Z")).await?;
//! assert_eq!(out.status, JobStatus::Completed);
//! assert_eq!(out.stdout, "HELLO\n");
//!
//! // Several jobs sharing one workspace, like a session.
//! let sandbox = runtime.sandbox(SandboxConfig::default())?;
//! sandbox.run(JobSpec::shell("echo 42 > answer.txt")).await?;
//! let out = sandbox.run(JobSpec::shell("cat answer.txt")).await?;
//! assert_eq!(out.stdout, "42\n");
//! # Ok(()) }
//! ```
//!
//! The layers, lowest first (each module uses only those below it; see
//! `docs/ARCHITECTURE.md`): `limits`, `io`, `cpu`, `bindings`, `engine`, `cache` -> `image` -> `rootfs` -> `cow`, `volume` -> `sandbox` -> `files`, `watch`, `snapshot` ->
//! `host` (the one place a store is built) -> `job` -> `runtime` -> `session`, `pty` ->
//! `agent`.

pub mod agent;
mod bindings;
mod cache;
pub mod capacity;
mod cow;
mod cpu;
mod engine;
mod files;
mod host;
mod image;
pub mod io;
mod job;
mod lazydir;
pub mod limits;
mod linktarget;
pub mod net;
mod procfs;
mod pty;
mod rootfs;
mod runtime;
mod sandbox;
mod scratch;
mod session;
mod snapshot;
mod strip;
pub mod sync;
pub mod volume;
mod watch;

pub use agent::term;
pub use capacity::{Admission, Refused};
pub use files::{
    FileInfo, FileKind, MAX_LIST_ENTRIES, MAX_XATTR_NAME, MAX_XATTR_VALUE, MAX_XATTRS,
    permission_string,
};
pub use host::{MemoryExceeded, StartFailure, StartReport};
pub use image::{
    BASE_IMAGE, BENCH_IMAGE, DATASCI_IMAGE, Image, ProgramSource, RootFile, base_image,
    bench_image, datasci_image,
};
pub use io::Terminal;
pub use job::{EXIT_STOPPED, Input, JobOutput, JobSpec, JobStatus, Output, StopSignal, Truncated};
pub use limits::Limits;
pub use net::{EgressConfig, EgressEvent, EgressStats, NetRule, NetworkPolicy};
pub use pty::{Pty, PtyConfig, PtyOutput};
pub use runtime::{Runtime, RuntimeBuilder, Sandbox};
pub use sandbox::{DEFAULT_MOUNT, FileError, SandboxConfig};
pub use session::{
    MAX_SESSION_LIMIT, PtyRefused, Session, SessionConfig, SessionRefused, Sessions,
};
pub use snapshot::{
    MANIFEST_NAME, Manifest, SNAPSHOT_FORMAT, Snapshot, SnapshotError, TarLimits, compress,
};
pub use watch::{Change, ChangeKind, Watch};

/// Where the build of this crate took the guest programs from (`target/guests/...`, or
/// `WASBOX_GUESTS_DIR`): the agents and programs the tests load as files.
pub const BUILT_GUESTS: &str = env!("WASBOX_BUILT_GUESTS");

/// The componentize-py the build of this crate installed (for `wasbox term build`), if any.
pub const COMPONENTIZE_PY: Option<&str> = option_env!("WASBOX_BUILD_COMPONENTIZE_PY");
