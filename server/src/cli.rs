//! Command-line parsing and the `run` command. Never touches the host filesystem except the
//! workspace directory it is given.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use wasbox_runtime::{JobSpec, JobStatus, Output, Runtime, SandboxConfig};

const USAGE: &str = "\
wasbox: a WebAssembly sandbox for agents and jobs

Usage:
  wasbox serve [OPTIONS]                      the worker API node (HTTP) on the built-in image
  wasbox run [OPTIONS] -- PROGRAM [ARGS...]   run one job on the built-in image
  wasbox agent serve|stdio|run|build ...     term-challenge agents (`wasbox agent help`)
  wasbox help                                 this text

Options of `serve` (each also from the environment; flags win):
  --listen ADDR          IP:PORT to listen on (WASBOX_LISTEN; default 127.0.0.1:12090)
  --token TOKEN          bearer token (WASBOX_TOKEN, else the YAML; generated and printed
                         once when none is configured)
  --config FILE          node startup YAML (WASBOX_CONFIG): sandbox.timeouts.default_seconds,
                         sandbox.timeouts.max_seconds, sandbox.images, worker_api.*
  --constraints FILE     node configuration payload JSON with `constraints`
                         (WASBOX_CONSTRAINTS): max_job_timeout_seconds, max_request_bytes
  --max-concurrent N     jobs running at once before 429 (WASBOX_MAX_CONCURRENT_JOBS)
  --cache-dir DIR        compiled-program cache (WASBOX_CACHE_DIR; default ~/.cache/wasbox)

Options of `run`:
  --workspace DIR   host directory to mount at /workspace (default: a fresh temporary one)
  --timeout SECS    wall-clock limit; the job ends with exit code 124 (default 60)
  --env K=V         an environment variable (repeatable)
  --mount PATH      where the workspace appears inside the sandbox (default /workspace)

`wasbox run` streams the job's output and exits with its exit code. Standard input is
passed to the job when it is not a terminal.
";

pub fn main(args: Vec<String>) -> i32 {
    init_tracing();
    let Some(cmd) = args.first() else {
        eprint!("{USAGE}");
        return 2;
    };
    let result = match cmd.as_str() {
        "run" => run(&args[1..]),
        "agent" => crate::term::main(&args[1..]),
        "serve" => parse_serve(&args[1..]).and_then(crate::serve::serve),
        "help" | "--help" | "-h" => {
            print!("{USAGE}");
            Ok(0)
        }
        other => Err(anyhow::anyhow!(
            "unknown command `{other}` (try `wasbox help`)"
        )),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("wasbox: {e:#}");
            2
        }
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("WASBOX_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

fn parse_serve(args: &[String]) -> Result<crate::config::ServeConfig> {
    let mut flags = crate::config::Flags::default();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let value = || {
            args.get(i + 1)
                .cloned()
                .with_context(|| format!("{a} needs a value"))
        };
        match a {
            "--listen" => flags.listen = Some(value()?),
            "--token" => flags.token = Some(value()?),
            "--config" => flags.config = Some(PathBuf::from(value()?)),
            "--constraints" => flags.constraints = Some(PathBuf::from(value()?)),
            "--cache-dir" => flags.cache_dir = Some(PathBuf::from(value()?)),
            "--max-concurrent" => {
                let v = value()?;
                flags.max_concurrent = Some(
                    v.parse()
                        .with_context(|| format!("--max-concurrent: `{v}` is not a number"))?,
                );
            }
            other => bail!("unknown option `{other}` for serve"),
        }
        i += 2;
    }
    crate::config::load(flags, |k| std::env::var(k).ok())
}

/// A positive number of seconds given to `flag` (fractions allowed).
pub fn parse_seconds(flag: &str, v: &str) -> Result<Duration> {
    let secs: f64 = v
        .parse()
        .ok()
        .filter(|s: &f64| *s > 0.0 && s.is_finite())
        .with_context(|| format!("{flag}: `{v}` is not a positive number of seconds"))?;
    Ok(Duration::from_secs_f64(secs))
}

struct RunArgs {
    workspace: Option<PathBuf>,
    timeout: Option<Duration>,
    env: Vec<(String, String)>,
    mount: Option<String>,
    argv: Vec<String>,
}

fn parse_run(args: &[String]) -> Result<RunArgs> {
    let mut out = RunArgs {
        workspace: None,
        timeout: None,
        env: Vec::new(),
        mount: None,
        argv: Vec::new(),
    };
    let mut i = 0;
    let value = |i: usize, flag: &str| -> Result<String> {
        args.get(i + 1)
            .cloned()
            .with_context(|| format!("{flag} needs a value"))
    };
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "--" => {
                out.argv = args[i + 1..].to_vec();
                break;
            }
            "--workspace" => {
                out.workspace = Some(PathBuf::from(value(i, a)?));
                i += 1;
            }
            "--timeout" => {
                out.timeout = Some(parse_seconds(a, &value(i, a)?)?);
                i += 1;
            }
            "--env" => {
                let v = value(i, a)?;
                let (k, val) = v
                    .split_once('=')
                    .with_context(|| format!("--env: `{v}` is not KEY=VALUE"))?;
                out.env.push((k.to_string(), val.to_string()));
                i += 1;
            }
            "--mount" => {
                out.mount = Some(value(i, a)?);
                i += 1;
            }
            _ if a.starts_with("--") => bail!("unknown option `{a}`"),
            _ => {
                out.argv = args[i..].to_vec();
                break;
            }
        }
        i += 1;
    }
    if out.argv.is_empty() {
        bail!("`run` needs a program: wasbox run [OPTIONS] -- PROGRAM [ARGS...]");
    }
    Ok(out)
}

fn run(args: &[String]) -> Result<i32> {
    let args = parse_run(args)?;
    let mut limits = wasbox_runtime::Limits::default();
    if let Some(t) = args.timeout {
        limits = limits.timeout(t);
    }
    let mut stdin = Vec::new();
    if !std::io::stdin().is_terminal() {
        std::io::stdin()
            .read_to_end(&mut stdin)
            .context("reading stdin")?;
    }
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let runtime = Runtime::builder().limits(limits).build()?;
        let mut config = SandboxConfig::default();
        if let Some(w) = args.workspace {
            config = config.workspace(w);
        }
        if let Some(m) = args.mount {
            config = config.mount(m);
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
