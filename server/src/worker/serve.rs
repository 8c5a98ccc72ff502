//! `wasbox serve`: the worker API node on the built-in image, its arguments, and the life of
//! the server process (listen, get ready, reap sessions, shut down gracefully).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use wasbox_runtime::Runtime;

use super::config::{self, Flags, JOB_DRAIN_GRACE, ServeConfig};
use super::telemetry::{NODE_MANAGER, WORKER_API};
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
    /// max_request_bytes, max_concurrent_jobs, max_sessions, max_instances, node_memory_mib},
    /// sandbox.timeouts.{default_seconds,
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
    /// machine allows: vm.max_map_count and the address space].
    #[arg(long, value_name = "N")]
    pub max_instances: Option<usize>,
    /// Raise the kernel's vm.max_map_count to N at start when it is lower (root only; a
    /// setting of the whole machine, as `sysctl -w` sets it). Each live sandbox process
    /// holds about 7 memory mappings: the usual 65,530 allows about 8,000 of them, 262,144
    /// about 36,000 (the address space allows about 30,000) [env: WASBOX_VM_MAX_MAP_COUNT]
    /// [default: leave it as it is].
    #[arg(long, value_name = "N")]
    pub vm_max_map_count: Option<usize>,
    /// Linear memory all sandboxes may hold together, in MiB: past it a shell is refused
    /// (503), a job waits then 429, and a growing program fails its allocation. Each process
    /// counts the whole of its linear memory (an idle `sh` about 1.5 MiB, of which about
    /// 0.3 MiB is resident), so a budget above the machine's memory promises more than it
    /// has [env: WASBOX_NODE_MEMORY_MIB] [default: 80% of the machine's memory].
    #[arg(long, value_name = "MIB")]
    pub node_memory_mib: Option<usize>,
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
    /// Where the telemetry database and kept job results live (storage.state_dir)
    /// [env: WASBOX_STORAGE_STATE_DIR] [default: ~/.local/state/wasbox].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Log lines as `text` or one JSON object per line (logging.format)
    /// [env: WASBOX_LOGGING_FORMAT] [default: text]. The level is WASBOX_LOG or logging.level.
    #[arg(long, value_name = "FORMAT")]
    pub log_format: Option<String>,
    #[command(flatten)]
    pub net: crate::args::NetArgs,
    /// This node's name in a fleet behind a proxy (fleet.node) [env: WASBOX_FLEET_NODE]:
    /// a DNS label, the pod's name in a StatefulSet. Every id the node hands out (sessions
    /// it names, E2B sandboxes, snapshots) then begins with it and `-`, and a session id a
    /// client chooses must too.
    #[arg(long, value_name = "NAME")]
    pub fleet_node: Option<String>,
    /// Seconds a node goes on serving its sandboxes after SIGTERM, with /readyz failing and
    /// creates refused, before it ends them (fleet.drain_delay_seconds)
    /// [env: WASBOX_FLEET_DRAIN_DELAY_SECONDS] [default: 0].
    #[arg(long, value_name = "SECS")]
    pub drain_delay: Option<u64>,
    /// Print the effective configuration (files, environment and flags together; the token
    /// never shown) as YAML, and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Compile every program of the built-in image into the cache (--cache-dir), then exit:
    /// a container image built with it starts ready, without compiling.
    #[arg(long)]
    pub warm_cache: bool,
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
        vm_max_map_count: args.vm_max_map_count,
        node_memory_mib: args.node_memory_mib,
        max_connections: args.max_connections,
        header_timeout: args.header_timeout,
        body_timeout: args.body_timeout,
        cache_dir: args.cache_dir,
        state_dir: args.state_dir,
        log_format: args.log_format,
        allow_net: args.net.allow_net,
        deny_net: args.net.deny_net,
        ca_certs: args.net.ca_cert,
        fleet_node: args.fleet_node,
        drain_delay: args.drain_delay,
    };
    let config = config::load(flags.clone(), |k| std::env::var(k).ok())?;
    if args.print_config {
        print!("{}", config::effective_yaml(&config));
        return Ok(0);
    }
    crate::logging::init(config.log.level.as_deref(), config.log.json);
    let rt = tokio::runtime::Runtime::new()?;
    if args.warm_cache {
        return rt.block_on(warm_cache(&config));
    }
    rt.block_on(serve(config, flags))
}

/// Reads the configuration again (files, environment, the same flags) and applies what can
/// change while running; a bad configuration is logged and the old one kept.
fn reload(node: &Node, flags: &Flags) {
    match config::load(flags.clone(), |k| std::env::var(k).ok()) {
        Ok(new) => {
            let kept = node.reload(new);
            if kept.is_empty() {
                tracing::warn!("configuration reloaded");
            } else {
                tracing::warn!(needs_restart = ?kept, "configuration reloaded; these keys changed but take effect at the next start");
            }
            node.telemetry.service(
                WORKER_API,
                "info",
                "configuration reloaded",
                serde_json::json!({ "needs_restart": kept }),
            );
        }
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "configuration not reloaded: the new one is not valid; the old one stays");
            node.telemetry.service(
                WORKER_API,
                "error",
                "configuration not reloaded: invalid",
                serde_json::json!({ "error": format!("{e:#}") }),
            );
        }
    }
}

async fn warm_cache(config: &ServeConfig) -> Result<i32> {
    let mut builder = Runtime::builder();
    if let Some(dir) = &config.cache_dir {
        builder = builder.cache_dir(dir);
    }
    let runtime = builder.build()?;
    runtime
        .preload()
        .await
        .context("compiling the image's programs")?;
    runtime
        .preinitialise()
        .await
        .context("pre-initialising the image's programs")?;
    let dir = config.cache_dir.clone().or_else(Runtime::default_cache_dir);
    println!(
        "wasbox: every program of the image is compiled, and the datasci python3 pre-initialised, in {}",
        dir.map_or_else(|| "(no cache)".into(), |d| d.display().to_string())
    );
    Ok(0)
}

async fn serve(config: ServeConfig, flags: Flags) -> Result<i32> {
    if let Some(n) = config.vm_max_map_count {
        let now = wasbox_runtime::capacity::raise_max_map_count(n).map_err(|e| {
            anyhow::anyhow!(
                "cannot raise vm.max_map_count to {n}: {e} (as root: sysctl -w vm.max_map_count={n})"
            )
        })?;
        tracing::info!(vm_max_map_count = now, "memory mapping limit");
    }
    // Every sandbox connection and refusal goes to the telemetry store's service logs too,
    // once the store is open (it is opened with the node, after the runtime).
    let records: Arc<std::sync::OnceLock<Arc<super::telemetry::Telemetry>>> = Arc::default();
    let for_records = records.clone();
    let mut builder = Runtime::builder()
        .on_egress(move |e| {
            if let Some(t) = for_records.get() {
                let message = match (&e.reason, e.allowed) {
                    (Some(why), _) => format!("egress refused: {} ({why})", e.destination),
                    (None, _) => format!(
                        "egress connection to {} closed: {} bytes out, {} bytes in",
                        e.destination, e.bytes_out, e.bytes_in
                    ),
                };
                t.service(
                    "egress",
                    if e.allowed { "info" } else { "warn" },
                    &message,
                    serde_json::json!({
                        "sandbox": e.sandbox,
                        "destination": e.destination,
                        "address": e.address.map(|a| a.to_string()),
                        "allowed": e.allowed,
                        "reason": e.reason,
                        "bytes_out": e.bytes_out,
                        "bytes_in": e.bytes_in,
                    }),
                );
            }
        })
        .max_instances(config.max_instances)
        .reserve_for_jobs(config.max_concurrent.min(config.max_instances / 2))
        .egress(config.egress.runtime_config());
    if let Some(mib) = config.node_memory_mib {
        builder = builder.node_memory_bytes(mib.saturating_mul(1 << 20));
    }
    if let Some(dir) = &config.cache_dir {
        builder = builder.cache_dir(dir);
    }
    let runtime = builder.build()?;
    let listener = crate::http::bind(config.listen)
        .with_context(|| format!("listening on {}", config.listen))?;
    let addr = listener.local_addr()?;
    runtime.add_own_listener(addr);
    {
        // The address (and a generated token, once) go to stdout for whoever started us, in
        // one write: a reader that takes the first line and closes the pipe never makes a
        // later line fail.
        let key = if config.token_generated {
            crate::e2b::api_key_for(&config.token)
        } else {
            "e2b_<the token's bytes in hex>".into()
        };
        let mut banner = format!(
            "wasbox: worker API listening on http://{addr}\n\
             wasbox: E2B's SDKs: export E2B_API_URL=http://{addr} E2B_SANDBOX_URL=http://{addr} E2B_VOLUME_API_URL=http://{addr} E2B_API_KEY={key}\n"
        );
        if config.token_generated {
            banner.push_str(&format!(
                "wasbox: bearer token (generated, shown once): {}\n",
                config.token
            ));
        }
        let mut out = std::io::stdout().lock();
        out.write_all(banner.as_bytes())?;
        out.flush()?;
    }
    tracing::info!(%addr, "worker API listening");

    let node = Node::new(config, runtime)?;
    let telemetry = node.telemetry.clone();
    let _ = records.set(telemetry.clone());
    let boot = telemetry.boot().clone();
    telemetry.service(
        NODE_MANAGER,
        "info",
        "node start: wasbox serve booted",
        serde_json::json!({ "boot_id": boot.boot_id, "build_version": boot.build_version }),
    );
    telemetry.service(
        WORKER_API,
        "info",
        &format!("worker API start: listening on {addr}"),
        serde_json::json!({ "listen": addr.to_string() }),
    );
    tracing::info!(state_dir = %telemetry.state_dir().display(), db = %telemetry.store().path().display(), "telemetry store open");
    // Retention at least hourly, VACUUM daily (the telemetry spec).
    tokio::spawn({
        let telemetry = telemetry.clone();
        async move {
            let mut hours = 0u64;
            loop {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                hours += 1;
                telemetry.store().enforce_retention();
                if hours.is_multiple_of(24) {
                    telemetry.store().vacuum();
                }
            }
        }
    });
    tokio::spawn({
        let node = node.clone();
        async move { node.prepare().await }
    });
    tokio::spawn(
        node.sessions()
            .clone()
            .reap_every(Duration::from_millis(250)),
    );
    if let Some(orchestrator) = node.config().orchestrator.clone() {
        tracing::info!(orchestrator = %orchestrator.url, base_url = %orchestrator.public_base_url, "registering with the orchestrator");
        tokio::spawn(super::orchestrator::run(node.clone(), orchestrator));
    }

    // SIGHUP reloads what can change while running (docs/WORKER-API.md, "Routes").
    tokio::spawn({
        let node = node.clone();
        async move {
            use tokio::signal::unix::{SignalKind, signal};
            let Ok(mut hup) = signal(SignalKind::hangup()) else {
                return;
            };
            while hup.recv().await.is_some() {
                reload(&node, &flags);
            }
        }
    });

    let e2b = crate::e2b::E2b::new(node.clone());
    // Often, so that a sandbox its timeout pauses shows as paused at once.
    tokio::spawn(e2b.clone().reap_every(Duration::from_millis(500)));
    let app = router(node.clone()).merge(crate::e2b::router(e2b));
    let shutdown = {
        let node = node.clone();
        async move {
            crate::shutdown::signal().await;
            let delay = node.config().fleet.drain_delay;
            if !delay.is_zero() {
                // Readiness fails first, so that a proxy stops sending creates here while
                // the node's sandboxes are still served.
                tracing::info!(
                    seconds = delay.as_secs(),
                    "draining: creates refused, sandboxes still served"
                );
                node.drain();
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    // A second signal ends the wait.
                    () = crate::shutdown::signal() => {}
                }
            }
            tracing::info!("shutting down: no new work; running jobs may finish");
            node.telemetry.service(
                NODE_MANAGER,
                "info",
                "node shutdown requested: draining",
                serde_json::json!({ "grace_seconds": JOB_DRAIN_GRACE.as_secs() }),
            );
            node.shut_down(false);
            // Jobs still running after the grace period are stopped, so that their
            // requests answer and the server can exit.
            tokio::spawn(async move {
                tokio::time::sleep(JOB_DRAIN_GRACE).await;
                node.shut_down(true);
            });
        }
    };
    let limits = node.config().http;
    crate::http::serve(listener, app, limits, shutdown)
        .await
        .context("serving the worker API")?;
    node.shut_down(true);
    telemetry.service(
        WORKER_API,
        "info",
        "worker API shutdown: stopped",
        serde_json::json!({}),
    );
    telemetry.service(
        NODE_MANAGER,
        "info",
        "node shutdown complete",
        serde_json::json!({ "boot_id": boot.boot_id }),
    );
    telemetry.store().flush().await;
    tracing::info!("stopped");
    Ok(0)
}
