//! `wasbox term ...`: term-challenge agents as components.
//!
//! - `serve`: a term2 agent (term SDK 2.0) over HTTP (see [`http`]).
//! - `stdio`: a term1 agent (term SDK 1.x): one JSON request line in, one response line out.
//! - `run`: a whole episode locally, for either SDK; for term1 agents wasbox is also the
//!   harness.
//! - `build`: a Python agent written against the term SDK, made a component.
//!
//! Everything an agent does goes through `wasbox_runtime::term`; these modules translate
//! HTTP, JSON lines and the command line to it.

mod agent;
pub mod build;
mod episode;
pub mod http;
pub mod stdio;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::args::seconds;

/// AGENT is a component file (world wasbox:term/agent@2.0.0 or wasbox:term/agent@1.0.0) or
/// the name of a built-in example agent: llm-agent (term2), llm-agent-term1 (term1).
///
/// The LLM is reached only through the host's LLM_PROXY_URL (POST {url}/llm/proxy), billed
/// to TERM_AGENT_HASH and TERM_TASK_ID; LLM_MODEL names the model when the agent names none.
#[derive(Args, Debug)]
pub struct TermArgs {
    #[command(subcommand)]
    command: TermCommand,
}

#[derive(Subcommand, Debug)]
enum TermCommand {
    /// Serve a term2 agent over HTTP: GET|POST /health, POST /start, GET /status.
    Serve(ServeArgs),
    /// Run a term1 agent on JSON lines: one request per line on stdin, one response per line
    /// on stdout; the agent's logs go to stderr.
    Stdio(StdioArgs),
    /// Play one episode on this machine and print a transcript; exits 0 only when the agent
    /// completed.
    Run(EpisodeArgs),
    /// Make a Python agent (`from term_sdk import Agent, AgentContext, run`) a component with
    /// componentize-py.
    Build(BuildArgs),
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The agent: a component file or a built-in agent's name.
    pub agent: String,
    /// The task directory, mounted at /app (default: a fresh empty directory).
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// IP:PORT to listen on [default: 0.0.0.0:$AGENT_PORT, AGENT_PORT defaulting to 8765].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
}

#[derive(Args, Debug)]
pub struct StdioArgs {
    /// The agent: a component file or a built-in agent's name.
    pub agent: String,
    /// The task directory, mounted at /app (default: a fresh empty directory).
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct EpisodeArgs {
    /// The agent: a component file or a built-in agent's name.
    pub agent: String,
    /// The task's instruction.
    #[arg(long, value_name = "TEXT")]
    pub instruction: String,
    /// The task directory, mounted at /app (default: a fresh empty directory).
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Shell commands the agent may run.
    #[arg(long, value_name = "N", default_value_t = wasbox_runtime::term::DEFAULT_MAX_STEPS,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_steps: u32,
    /// Seconds the whole task may take.
    #[arg(long, value_name = "SECS", value_parser = seconds, default_value = "300")]
    pub timeout: Duration,
}

#[derive(Args, Debug)]
pub struct BuildArgs {
    /// The agent's Python file.
    pub source: PathBuf,
    /// The component to write [default: the source with .wasm].
    #[arg(short, long, value_name = "AGENT.wasm")]
    pub output: Option<PathBuf>,
}

pub fn main(args: TermArgs) -> Result<i32> {
    if let TermCommand::Build(args) = args.command {
        return build::main(args);
    }
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        match args.command {
            TermCommand::Serve(args) => http::main(args).await,
            TermCommand::Stdio(args) => stdio::main(args).await,
            TermCommand::Run(args) => episode::main(args).await,
            TermCommand::Build(_) => unreachable!("handled above"),
        }
    })
}
