//! `wasbox run`: one job on the built-in image from the command line, its output streamed,
//! its exit code passed through. Never touches the host filesystem except the workspace
//! directory it is given.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use wasbox_runtime::{
    JobSpec, JobStatus, Limits, Output, Runtime, SandboxConfig, StopSignal, TarLimits,
};

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
    /// Most bytes of output (stdout and stderr together) before the job is stopped with a
    /// message and exit code 125; 0 for no limit [default: 1G, no limit when stdout is a
    /// terminal].
    #[arg(long, value_name = "BYTES", value_parser = crate::args::bytes)]
    pub max_output: Option<u64>,
    /// Where the workspace appears inside the sandbox (also the working directory).
    #[arg(long, value_name = "PATH", default_value = wasbox_runtime::DEFAULT_MOUNT)]
    pub mount: String,
    /// After the job, write a snapshot of the sandbox (workspace, environment, mount) to
    /// FILE as a tar, for `--from-snapshot`; compressed with zstd when FILE ends in `.zst`.
    #[arg(long, value_name = "FILE")]
    pub snapshot_out: Option<PathBuf>,
    /// Start from a snapshot tar (`--snapshot-out`, or a worker API snapshot; plain or
    /// zstd-compressed) instead of an empty workspace: its files, environment and mount point.
    #[arg(long, value_name = "FILE", conflicts_with = "workspace")]
    pub from_snapshot: Option<PathBuf>,
    /// The built-in image to run on: `base`, or `datasci` (whose `python3` has numpy,
    /// pandas, scipy, scikit-learn and matplotlib).
    #[arg(long, value_name = "NAME", default_value = wasbox_runtime::BASE_IMAGE, conflicts_with = "from_snapshot")]
    pub image: String,
    #[command(flatten)]
    pub net: crate::args::NetArgs,
    /// Attach volume NAME at PATH inside the sandbox (`:ro` read-only), made (1 GiB) when it
    /// does not exist yet; repeatable. Volumes live in the state directory, as `wasbox
    /// serve`'s and `wasbox volume`'s.
    #[arg(long = "volume", value_name = "NAME:PATH[:ro]", value_parser = wasbox_runtime::volume::parse_mount)]
    pub volumes: Vec<(String, String, bool)>,
    /// The state directory of `--volume` [env: WASBOX_STORAGE_STATE_DIR; default: as
    /// `wasbox serve`'s].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The program and its arguments, e.g. `-- sh -c 'echo hi'`.
    #[arg(
        required = true,
        trailing_var_arg = true,
        value_name = "PROGRAM [ARGS]..."
    )]
    pub argv: Vec<String>,
}

/// Output a run may write when it is not on a terminal and `--max-output` is not given.
pub const DEFAULT_MAX_OUTPUT: u64 = 1 << 30;
/// Exit code of a run stopped at its output limit.
pub const EXIT_OUTPUT_LIMIT: i32 = 125;

/// The output both streams of a run may write together; past it the job is stopped.
struct OutputBudget {
    left: Option<Arc<AtomicU64>>,
    hit: Arc<AtomicBool>,
    stop: StopSignal,
}

impl OutputBudget {
    fn new(limit: Option<u64>) -> Self {
        OutputBudget {
            left: limit.map(|n| Arc::new(AtomicU64::new(n))),
            hit: Arc::new(AtomicBool::new(false)),
            stop: StopSignal::new(),
        }
    }

    fn writer<W: Write + Send + 'static>(&self, inner: W) -> Budgeted<W> {
        Budgeted {
            inner,
            left: self.left.clone(),
            hit: self.hit.clone(),
            stop: self.stop.clone(),
        }
    }

    fn exceeded(&self) -> bool {
        self.hit.load(Ordering::Acquire)
    }
}

/// One stream of a run, charged to its [`OutputBudget`].
struct Budgeted<W> {
    inner: W,
    left: Option<Arc<AtomicU64>>,
    hit: Arc<AtomicBool>,
    stop: StopSignal,
}

impl<W: Write> Write for Budgeted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let Some(left) = &self.left else {
            return self.inner.write(buf);
        };
        let want = buf.len() as u64;
        let granted = left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |l| {
                Some(l.saturating_sub(want))
            })
            .map_or(0, |before| before.min(want)) as usize;
        if granted < buf.len() {
            self.inner.write_all(&buf[..granted])?;
            self.hit.store(true, Ordering::Release);
            self.stop.stop();
            return Err(std::io::Error::other("output limit reached"));
        }
        self.inner.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

pub fn main(mut args: RunArgs) -> Result<i32> {
    let limits = Limits::default().timeout(args.timeout);
    let mut stdin = Vec::new();
    if !std::io::stdin().is_terminal() {
        std::io::stdin()
            .read_to_end(&mut stdin)
            .context("reading stdin")?;
    }
    // One thread: a one-shot command starts and exits 1.2 ms sooner than on a pool of
    // workers (measured with `perf stat`). A pipeline's programs still run concurrently,
    // interleaved at their yield points, but not on two cores at once.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let egress = wasbox_runtime::EgressConfig::default()
        .allow(wasbox_runtime::net::parse_rules(&args.net.allow_net).context("--allow-net")?)
        .deny(wasbox_runtime::net::parse_rules(&args.net.deny_net).context("--deny-net")?)
        .ca_certs(std::mem::take(&mut args.net.ca_cert));
    rt.block_on(async move {
        // One job, then exit: a pool of warm slots would cost more to set up than it saves.
        let runtime = Runtime::builder()
            .limits(limits.clone())
            .pool_slots(0)
            .egress(egress)
            .build()?;
        let volumes = if args.volumes.is_empty() {
            Vec::new()
        } else {
            let store =
                crate::volume_cli::store(&crate::volume_cli::state_dir(args.state_dir.take()))?;
            crate::volume_cli::open_mounts(&store, &args.volumes)?
        };
        let sandbox = match &args.from_snapshot {
            Some(file) => {
                let f = std::fs::File::open(file)
                    .with_context(|| format!("opening {}", file.display()))?;
                // The operator's own file: a symlink leaving the workspace (a venv's python)
                // is kept; the host never follows one either way.
                let tar_limits = TarLimits {
                    max_bytes: limits.disk_bytes,
                    max_entries: limits.disk_inodes,
                    links_may_leave: true,
                };
                let snapshot = runtime
                    .read_snapshot(std::io::BufReader::new(f), tar_limits)
                    .with_context(|| format!("reading the snapshot {}", file.display()))?;
                runtime.restore_with(&snapshot, Some(limits.clone()), volumes)?
            }
            None => {
                // The variables belong to the sandbox, so that a snapshot of it keeps them.
                let mut config = SandboxConfig::default()
                    .mount(args.mount)
                    .image(std::mem::take(&mut args.image));
                config.env = std::mem::take(&mut args.env);
                config.volumes = volumes;
                if let Some(w) = args.workspace {
                    config = config.workspace(w);
                }
                runtime.sandbox(config)?
            }
        };
        // What the flags allow is the command's to use.
        sandbox.set_network(wasbox_runtime::NetworkPolicy::Node);
        let limit = match args.max_output {
            Some(0) => None,
            Some(n) => Some(n),
            None if std::io::stdout().is_terminal() => None,
            None => Some(DEFAULT_MAX_OUTPUT),
        };
        let budget = OutputBudget::new(limit);
        let mut spec = JobSpec::new(args.argv)
            .stdin(stdin)
            .stdout(Output::Stream(Box::new(budget.writer(std::io::stdout()))))
            .stderr(Output::Stream(Box::new(budget.writer(std::io::stderr()))))
            .stop_signal(budget.stop.clone());
        spec.env = args.env;
        let out = sandbox.run(spec).await?;
        if let Some(file) = &args.snapshot_out {
            let snapshot = runtime.snapshot(&sandbox, Default::default())?;
            let f = std::fs::File::create(file)
                .with_context(|| format!("creating {}", file.display()))?;
            let mut w = std::io::BufWriter::new(f);
            let zstd = file.extension().is_some_and(|e| e == "zst" || e == "zstd");
            let written = if zstd {
                snapshot.write_tar_zstd(&mut w, 3)
            } else {
                snapshot.write_tar(&mut w)
            };
            written
                .and_then(|_| w.flush())
                .with_context(|| format!("writing the snapshot {}", file.display()))?;
        }
        if budget.exceeded() {
            eprintln!(
                "wasbox: the job wrote more than --max-output {} bytes and was stopped",
                limit.unwrap_or(0)
            );
            return Ok(EXIT_OUTPUT_LIMIT);
        }
        let code = match out.status {
            JobStatus::Timeout => 124,
            _ => out.exit_code,
        };
        // The job's output is written; what is left is to free what the process is about
        // to give back anyway. The sandbox's directories go now; the engine, its compiled
        // code and the linker go with the process (a tenth of a short run).
        drop(sandbox);
        runtime.release_for_exit();
        std::process::exit(code)
    })
}
