//! # wasbox-runtime
//!
//! An embeddable WebAssembly sandbox: programs are WASI components, each process a fresh
//! instance in its own store, confined to one workspace directory, with limits on time,
//! memory, processes and output. The built-in `base` image has a POSIX shell and coreutils.
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

mod bindings;
mod engine;
mod image;
mod job;
pub mod limits;
mod process;
mod runtime;
mod sandbox;
pub mod stdio;
pub mod term;

pub use image::{BASE_IMAGE, Image, ProgramSource, base_image};
pub use job::{
    EXIT_STOPPED, Input, JobOutput, JobSpec, JobStatus, Output, StopSignal, Terminal, Truncated,
};
pub use limits::Limits;

/// The componentize-py this crate's build installed (for `wasbox agent build`), if any.
pub const COMPONENTIZE_PY: Option<&str> = option_env!("WASBOX_BUILD_COMPONENTIZE_PY");
pub use runtime::{Runtime, RuntimeBuilder};
pub use sandbox::{DEFAULT_MOUNT, FileError, NetworkPolicy, Sandbox, SandboxConfig};
