//! `wasbox bouvet serve`: a drop-in for the guest agent that bouvet's host-side `AgentClient`
//! talks to (`docs/specs/bouvet-agent-client-vsock.md`). One sandbox (as one VM holds one
//! agent), served on a Unix socket that speaks the Firecracker vsock multiplexer's
//! handshake, and on an AF_VSOCK port where the machine has one; many connections at once,
//! requests on each in order. [`client`] is the host side, for platforms that embed it.
//!
//! This module only listens and translates: the agent is a component
//! (`wasbox_runtime::agent::bouvet`), its commands run in the runtime's sandbox.

pub mod client;
mod connection;
pub mod rpc;

use std::io::Write as _;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use clap::{Args, Subcommand};
use tokio::sync::Semaphore;
use wasbox_runtime::agent::bouvet::{BouvetAgent, DEFAULT_CALL_TIMEOUT, builtin_agent};
use wasbox_runtime::{Limits, Runtime, SandboxConfig};

use crate::args::seconds;
use connection::Shared;

/// The vsock port bouvet's agent listens on.
pub const GUEST_PORT: u32 = 52;
/// Longest request line read by default (a longer one is answered with a parse error).
pub const DEFAULT_MAX_LINE: usize = 16 << 20;
/// Processes alive at once in the served sandbox, all connections together.
const SANDBOX_PROCESSES: u32 = 1024;
/// Linear memory of the served sandbox's processes together.
const SANDBOX_MEMORY: usize = 4 << 30;
/// Bytes of its own output the agent may write to wasbox's stderr.
const MAX_AGENT_LOG_BYTES: usize = 16 << 20;
/// Connections served at once by default; more are refused with a clear answer.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// Bouvet's sandbox agent (JSON-RPC 2.0 over vsock or a Unix socket).
#[derive(Args, Debug)]
pub struct BouvetArgs {
    #[command(subcommand)]
    command: BouvetCommand,
}

#[derive(Subcommand, Debug)]
enum BouvetCommand {
    /// Serve one sandbox to bouvet's AgentClient: `exec`, `exec_code`, `read_file`,
    /// `write_file`, `list_dir`, `ping`.
    Serve(ServeArgs),
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// A Unix socket to listen on (what bouvet's client connects to; it sends `CONNECT 52`
    /// first, as to Firecracker's vsock multiplexer). Created 0600; a stale one is replaced.
    #[arg(long, value_name = "PATH")]
    pub uds: Option<PathBuf>,
    /// An AF_VSOCK port to listen on (any CID), where the machine has vsock [bouvet: 52].
    #[arg(long, value_name = "PORT")]
    pub vsock_port: Option<u32>,
    /// The sandbox's workspace (default: a fresh temporary directory).
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Where the workspace appears inside the sandbox (also the working directory).
    #[arg(long, value_name = "PATH", default_value = wasbox_runtime::DEFAULT_MOUNT)]
    pub mount: String,
    /// A component of world wasbox:bouvet/agent to serve instead of the built-in agent.
    #[arg(long, value_name = "AGENT.wasm")]
    pub agent: Option<PathBuf>,
    /// How long one request may take: a command still running then is stopped and answered
    /// with exit code -1 and a line on stderr (bouvet's client gives up after 30 s)
    /// [default: 25].
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    pub exec_timeout: Option<Duration>,
    /// Longest request line read; a longer one is answered with a parse error.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_LINE)]
    pub max_line_bytes: usize,
    /// Connections served at once; more are refused.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
}

pub fn main(args: BouvetArgs) -> Result<i32> {
    let BouvetCommand::Serve(args) = args.command;
    if args.uds.is_none() && args.vsock_port.is_none() {
        bail!("give --uds PATH, --vsock-port PORT, or both");
    }
    if args.max_connections == 0 || args.max_line_bytes == 0 {
        bail!("--max-connections and --max-line-bytes must be at least 1");
    }
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(serve(args))
}

/// A Unix socket path to bind: a socket nobody answers on is removed first; anything else
/// in the way is refused.
fn clear_socket_path(path: &Path) -> Result<()> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    if !meta.file_type().is_socket() {
        bail!("{} exists and is not a socket", path.display());
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        bail!("{} is in use by another server", path.display());
    }
    std::fs::remove_file(path).with_context(|| format!("removing stale {}", path.display()))
}

async fn serve(args: ServeArgs) -> Result<i32> {
    let call_timeout = args.exec_timeout.unwrap_or(DEFAULT_CALL_TIMEOUT);
    let runtime = Runtime::builder().build()?;
    // One sandbox holds what a VM would for every connection at once: more processes and
    // memory than one job's sandbox (the node's memory budget still bounds it).
    let limits = Limits::default()
        .timeout(call_timeout)
        .max_processes(SANDBOX_PROCESSES)
        .sandbox_memory_bytes(SANDBOX_MEMORY);
    let mut config = SandboxConfig::default().mount(&args.mount).limits(limits);
    if let Some(dir) = &args.workdir {
        config = config.workspace(dir);
    }
    let sandbox = runtime.sandbox(config)?;

    let uds = match &args.uds {
        Some(path) => {
            clear_socket_path(path)?;
            let listener = tokio::net::UnixListener::bind(path)
                .with_context(|| format!("listening on {}", path.display()))?;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
            let ino = std::fs::metadata(path)?.ino();
            Some((listener, path.clone(), ino))
        }
        None => None,
    };
    let vsock = match args.vsock_port {
        Some(port) => Some(
            tokio_vsock::VsockListener::bind(tokio_vsock::VsockAddr::new(
                tokio_vsock::VMADDR_CID_ANY,
                port,
            ))
            .with_context(|| format!("listening on vsock port {port} (is AF_VSOCK available?)"))?,
        ),
        None => None,
    };
    {
        let mut out = std::io::stdout().lock();
        if let Some((_, path, _)) = &uds {
            writeln!(
                out,
                "wasbox: bouvet agent listening on unix:{}",
                path.display()
            )?;
        }
        if let Some(port) = args.vsock_port {
            writeln!(out, "wasbox: bouvet agent listening on vsock port {port}")?;
        }
        out.flush()?;
    }

    // The sockets answer at once; the agent compiles (first time) beside them, and the
    // image's programs are loaded so that the first command does not wait for the compiler.
    let (agent_tx, agent_rx) = tokio::sync::watch::channel(None);
    let agent_source = args.agent.clone();
    let loader = runtime.clone();
    tokio::spawn(async move {
        let loaded = load_agent(&loader, agent_source.as_deref()).await;
        match &loaded {
            Ok(agent) => tracing::info!(agent = agent.name(), "bouvet agent ready"),
            Err(e) => tracing::error!(error = %e, "cannot load the bouvet agent"),
        }
        let _ = agent_tx.send(Some(
            loaded.map_err(|e| Arc::from(format!("{e:#}").as_str())),
        ));
        if let Err(e) = loader.preload().await {
            tracing::warn!(error = %format!("{e:#}"), "could not load the image's programs");
        }
    });

    let shared = Arc::new(Shared {
        agent: agent_rx,
        sandbox,
        log: wasbox_runtime::io::capped_stderr(MAX_AGENT_LOG_BYTES),
        call_timeout,
        max_line: args.max_line_bytes,
        port: args.vsock_port.unwrap_or(GUEST_PORT),
    });
    let slots = Arc::new(Semaphore::new(args.max_connections));
    let max = args.max_connections;
    let mut tasks = tokio::task::JoinSet::new();
    let mut socket_file = None;
    if let Some((listener, path, ino)) = uds {
        socket_file = Some((path, ino));
        tasks.spawn(accept_loop(listener, shared.clone(), slots.clone(), max));
    }
    if let Some(listener) = vsock {
        tasks.spawn(accept_loop(listener, shared.clone(), slots.clone(), max));
    }
    crate::shutdown::signal().await;
    tracing::info!("shutting down");
    tasks.abort_all();
    if let Some((path, ino)) = socket_file {
        // Only our own socket: another server may have replaced it since.
        if std::fs::metadata(&path).is_ok_and(|m| m.ino() == ino) {
            let _ = std::fs::remove_file(&path);
        }
    }
    Ok(0)
}

/// A socket the agent is served on: a Unix socket or an AF_VSOCK port.
trait Listener: Send + 'static {
    type Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + AsRawFd + Unpin + Send + 'static;
    const KIND: &'static str;
    fn next_stream(&self) -> impl Future<Output = std::io::Result<Self::Stream>> + Send;
}

impl Listener for tokio::net::UnixListener {
    type Stream = tokio::net::UnixStream;
    const KIND: &'static str = "unix";
    async fn next_stream(&self) -> std::io::Result<Self::Stream> {
        Ok(self.accept().await?.0)
    }
}

impl Listener for tokio_vsock::VsockListener {
    type Stream = tokio_vsock::VsockStream;
    const KIND: &'static str = "vsock";
    async fn next_stream(&self) -> std::io::Result<Self::Stream> {
        Ok(self.accept().await?.0)
    }
}

/// Accepts connections until the task is aborted; a failed accept is logged and retried.
async fn accept_loop<L: Listener>(
    listener: L,
    shared: Arc<Shared>,
    slots: Arc<Semaphore>,
    max: usize,
) {
    loop {
        match listener.next_stream().await {
            Ok(stream) => spawn_connection(stream, &shared, &slots, max),
            Err(e) => {
                tracing::warn!(error = %e, socket = L::KIND, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

fn spawn_connection<S>(stream: S, shared: &Arc<Shared>, slots: &Arc<Semaphore>, max: usize)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + AsRawFd + Unpin + Send + 'static,
{
    let fd = stream.as_raw_fd();
    let shared = shared.clone();
    match slots.clone().try_acquire_owned() {
        Ok(permit) => {
            tokio::spawn(async move {
                connection::serve(stream, fd, shared, None).await;
                drop(permit);
            });
        }
        Err(_) => {
            tracing::warn!(max, "connection refused: at the connection limit");
            tokio::spawn(async move { connection::serve(stream, fd, shared, Some(max)).await });
        }
    }
}

/// The agent to serve: a component file, else the built-in one.
async fn load_agent(runtime: &Runtime, path: Option<&Path>) -> Result<BouvetAgent> {
    match path {
        Some(p) => {
            let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
            let name = p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "agent".into());
            runtime.bouvet_agent(&name, bytes).await
        }
        None => runtime.bouvet_agent("bouvet-agent", builtin_agent()).await,
    }
}
