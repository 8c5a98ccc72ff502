//! Logging on stderr for every command: `WASBOX_LOG` (a tracing filter such as `info` or
//! `wasbox=debug`; default `warn`), as text or as one JSON object per line.

use std::io::IsTerminal;

/// Sets up the process's logger once; later calls do nothing. `level` is used when
/// `WASBOX_LOG` is not set.
pub fn init(level: Option<&str>, json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("WASBOX_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::try_new(level.unwrap_or("warn"))
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"))
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .try_init()
    } else {
        builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init()
    };
}
