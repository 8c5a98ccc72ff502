//! `wasbox serve`: the worker API node on the built-in image, its arguments, and the life of
//! the server process (listen, get ready, reap sessions, shut down gracefully).

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use wasbox_runtime::Runtime;

use super::config::{self, Flags, JOB_DRAIN_GRACE, ServeConfig};
use super::{Node, router};

/// Every option can also come from the environment (named beside it) or the node startup
/// YAML; flags win over the environment, which wins over the YAML.
#[derive(Args, Debug, Default)]
pub struct ServeArgs {
    /// IP:PORT to listen on [env: WASBOX_LISTEN] [default: 127.0.0.1:12090].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// The bearer token clients must send [env: WASBOX_TOKEN]. Prefer --token-file: a
    /// token on the command line is visible to other users in `ps`. Without any, one is
    /// generated and printed once.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// A file holding the bearer token (its first line) [env: WASBOX_TOKEN_FILE].
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// The node startup YAML [env: WASBOX_CONFIG]: worker_api.{listen, bearer_token,
    /// max_request_bytes, max_concurrent_jobs, max_sessions, max_instances}, sandbox.timeouts.{default_seconds,
    /// max_seconds}, sandbox.images.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The node configuration payload (JSON) with `constraints` [env: WASBOX_CONSTRAINTS]:
    /// max_job_timeout_seconds, max_request_bytes.
    #[arg(long, value_name = "FILE")]
    pub constraints: Option<PathBuf>,
    /// Jobs and session execs running at once before 429 [env: WASBOX_MAX_CONCURRENT_JOBS]
    /// [default: 128].
    #[arg(long, value_name = "N")]
    pub max_concurrent: Option<usize>,
    /// Sessions alive at once before 429 [env: WASBOX_MAX_SESSIONS] [default: the live
    /// process limit less --max-concurrent].
    #[arg(long, value_name = "N")]
    pub max_sessions: Option<usize>,
    /// Live sandbox processes (jobs, shells, their children) all together; a PTY past it is
    /// 503, a job waits up to 5 s then 429 [env: WASBOX_MAX_INSTANCES] [default: what the
    /// machine allows: vm.max_map_count and the open-file limit].
    #[arg(long, value_name = "N")]
    pub max_instances: Option<usize>,
    /// HTTP connections held open at once; more are answered 503 and closed
    /// [env: WASBOX_MAX_CONNECTIONS] [default: 1024].
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Seconds a client may take to send a request's head (a connection that sends nothing
    /// is closed after as long) [env: WASBOX_HEADER_TIMEOUT] [default: 10].
    #[arg(long, value_name = "SECS")]
    pub header_timeout: Option<usize>,
    /// Seconds a client may take to send a request's body; slower is 408
    /// [env: WASBOX_BODY_TIMEOUT] [default: 60].
    #[arg(long, value_name = "SECS")]
    pub body_timeout: Option<usize>,
    /// Where compiled programs are cached [env: WASBOX_CACHE_DIR] [default: ~/.cache/wasbox].
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

pub fn main(args: ServeArgs) -> Result<i32> {
    let flags = Flags {
        listen: args.listen,
        token: args.token,
        token_file: args.token_file,
        config: args.config,
        constraints: args.constraints,
        max_concurrent: args.max_concurrent,
        max_sessions: args.max_sessions,
        max_instances: args.max_instances,
        max_connections: args.max_connections,
        header_timeout: args.header_timeout,
        body_timeout: args.body_timeout,
        cache_dir: args.cache_dir,
    };
    let config = config::load(flags, |k| std::env::var(k).ok())?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(serve(config))
}

async fn serve(config: ServeConfig) -> Result<i32> {
    let mut builder = Runtime::builder()
        .max_instances(config.max_instances)
        .reserve_for_jobs(config.max_concurrent.min(config.max_instances / 2));
    if let Some(dir) = &config.cache_dir {
        builder = builder.cache_dir(dir);
    }
    let runtime = builder.build()?;
    let listener = crate::http::bind(config.listen)
        .with_context(|| format!("listening on {}", config.listen))?;
    let addr = listener.local_addr()?;
    {
        // The address (and a generated token, once) go to stdout for whoever started us.
        let mut out = std::io::stdout().lock();
        writeln!(out, "wasbox: worker API listening on http://{addr}")?;
        if config.token_generated {
            writeln!(
                out,
                "wasbox: bearer token (generated, shown once): {}",
                config.token
            )?;
        }
        out.flush()?;
    }
    tracing::info!(%addr, "worker API listening");

    let node = Node::new(config, runtime);
    tokio::spawn({
        let node = node.clone();
        async move { node.prepare().await }
    });
    tokio::spawn(
        node.sessions()
            .clone()
            .reap_every(Duration::from_millis(250)),
    );

    let app = router(node.clone());
    let shutdown = {
        let node = node.clone();
        async move {
            crate::shutdown::signal().await;
            tracing::info!("shutting down: no new work; running jobs may finish");
            node.shut_down(false);
            // Jobs still running after the grace period are stopped, so that their
            // requests answer and the server can exit.
            tokio::spawn(async move {
                tokio::time::sleep(JOB_DRAIN_GRACE).await;
                node.shut_down(true);
            });
        }
    };
    let limits = node.config.http;
    crate::http::serve(listener, app, limits, shutdown)
        .await
        .context("serving the worker API")?;
    node.shut_down(true);
    tracing::info!("stopped");
    Ok(0)
}
