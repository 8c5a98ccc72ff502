//! `wasbox serve`: the worker API node on the built-in image.

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, Result};
use wasbox_runtime::Runtime;

use crate::config::{SHUTDOWN_GRACE, ServeConfig};
use crate::worker::{Node, reap_sessions, router};

pub fn serve(config: ServeConfig) -> Result<i32> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(run(config))
}

async fn run(config: ServeConfig) -> Result<i32> {
    let mut builder = Runtime::builder();
    if let Some(dir) = &config.cache_dir {
        builder = builder.cache_dir(dir);
    }
    let runtime = builder.build()?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
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
    tokio::spawn(reap_sessions(node.clone(), Duration::from_millis(250)));

    let app = router(node.clone());
    let shutdown = {
        let node = node.clone();
        async move {
            shutdown_signal().await;
            tracing::info!("shutting down: no new work; running jobs may finish");
            node.shut_down(false);
            // Jobs still running after the grace period are stopped, so that their
            // requests answer and the server can exit.
            tokio::spawn(async move {
                tokio::time::sleep(SHUTDOWN_GRACE).await;
                node.shut_down(true);
            });
        }
    };
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .context("serving the worker API")?;
    node.shut_down(true);
    tracing::info!("stopped");
    Ok(0)
}

/// SIGTERM or SIGINT.
pub(crate) async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
