//! `wasbox run`: one job on the built-in image from the command line, its output streamed,
//! its exit code passed through. Never touches the host filesystem except the workspace
//! directory it is given.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use wasbox_runtime::{JobSpec, JobStatus, Limits, Output, Runtime, SandboxConfig};

use crate::args::{key_value, seconds};

/// Standard input is passed to the job when it is not a terminal. Without --workspace the
/// job gets a fresh temporary directory, removed afterwards.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Host directory to use as the workspace (created if missing).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Wall-clock limit in seconds; the job then ends with exit code 124.
    #[arg(long, value_name = "SECS", value_parser = seconds, default_value = "60")]
    pub timeout: Duration,
    /// An environment variable of the job (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = key_value)]
    pub env: Vec<(String, String)>,
    /// Where the workspace appears inside the sandbox (also the working directory).
    #[arg(long, value_name = "PATH", default_value = wasbox_runtime::DEFAULT_MOUNT)]
    pub mount: String,
    /// The program and its arguments, e.g. `-- sh -c 'echo hi'`.
    #[arg(
        required = true,
        trailing_var_arg = true,
        value_name = "PROGRAM [ARGS]..."
    )]
    pub argv: Vec<String>,
}

pub fn main(args: RunArgs) -> Result<i32> {
    let limits = Limits::default().timeout(args.timeout);
    let mut stdin = Vec::new();
    if !std::io::stdin().is_terminal() {
        std::io::stdin()
            .read_to_end(&mut stdin)
            .context("reading stdin")?;
    }
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        // One job, then exit: a pool of warm slots would cost more to set up than it saves.
        let runtime = Runtime::builder().limits(limits).pool_slots(0).build()?;
        let mut config = SandboxConfig::default().mount(args.mount);
        if let Some(w) = args.workspace {
            config = config.workspace(w);
        }
        let sandbox = runtime.sandbox(config)?;
        let mut spec = JobSpec::new(args.argv)
            .stdin(stdin)
            .stdout(Output::Stream(Box::new(std::io::stdout())))
            .stderr(Output::Stream(Box::new(std::io::stderr())));
        spec.env = args.env;
        let out = sandbox.run(spec).await?;
        Ok(match out.status {
            JobStatus::Timeout => 124,
            _ => out.exit_code,
        })
    })
}
