//! `wasbox volume create|ls|rm` and the volumes of `wasbox run --volume NAME:PATH[:ro]`:
//! the node's volume store (see [`wasbox_runtime::volume`]) in its state directory, as
//! `wasbox serve` keeps it.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use wasbox_runtime::volume::{VolumeLimits, VolumeMount, Volumes};

/// `wasbox volume ...`.
#[derive(clap::Args, Debug)]
pub struct VolumeArgs {
    /// The node's state directory, where its volumes live (as `wasbox serve --state-dir`)
    /// [env: WASBOX_STORAGE_STATE_DIR].
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    #[command(subcommand)]
    pub command: VolumeCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum VolumeCommand {
    /// Make an empty volume NAME.
    Create {
        name: String,
        /// Its size quota [default: 1G].
        #[arg(long, value_name = "BYTES", value_parser = crate::args::bytes)]
        size: Option<u64>,
    },
    /// List the volumes: name, size quota, bytes used, files and directories, id.
    Ls,
    /// Delete volume NAME and its files (refused while a sandbox has it attached).
    Rm { name: String },
}

/// The state directory a command names, else the one `wasbox serve` uses by default.
pub fn state_dir(flag: Option<PathBuf>) -> PathBuf {
    flag.or_else(|| std::env::var_os("WASBOX_STORAGE_STATE_DIR").map(PathBuf::from))
        .unwrap_or_else(crate::worker::config::default_state_dir_of_process)
}

/// The volume store under `state_dir`.
pub fn store(state_dir: &std::path::Path) -> Result<Volumes> {
    Volumes::at(state_dir.join("volumes"), VolumeLimits::default())
}

/// Runs `wasbox volume ...`; returns the exit code.
pub fn main(args: VolumeArgs) -> Result<i32> {
    let state_dir = state_dir(args.state_dir);
    let volumes = store(&state_dir)?;
    let fail = |e: wasbox_runtime::volume::VolumeError, what: &str| {
        eprintln!("wasbox volume {what}: {e}");
        Ok(1)
    };
    match args.command {
        VolumeCommand::Create { name, size } => match volumes.create(&name, size) {
            Ok(r) => {
                println!("{}\t{}", r.name, r.id);
                Ok(0)
            }
            Err(e) => fail(e, "create"),
        },
        VolumeCommand::Ls => {
            let all = volumes.list();
            if all.is_empty() {
                eprintln!("no volumes in {}", volumes.root().display());
            }
            for v in all {
                println!(
                    "{}\t{}\t{}\t{}\t{}",
                    v.record.name, v.record.bytes_limit, v.bytes_used, v.inodes_used, v.record.id
                );
            }
            Ok(0)
        }
        VolumeCommand::Rm { name } => match volumes.remove(&name) {
            Ok(()) => Ok(0),
            Err(e) => fail(e, "rm"),
        },
    }
}

/// Opens the volumes of `wasbox run --volume`, making those that do not exist yet (as
/// `docker run -v NAME:PATH` does).
pub fn open_mounts(
    volumes: &Volumes,
    mounts: &[(String, String, bool)],
) -> Result<Vec<VolumeMount>> {
    mounts
        .iter()
        .map(|(name, path, read_only)| {
            if volumes.record(name).is_err() {
                volumes
                    .create(name, None)
                    .with_context(|| format!("making volume {name}"))?;
            }
            Ok(VolumeMount {
                volume: volumes.open(name)?,
                path: path.clone(),
                read_only: *read_only,
            })
        })
        .collect()
}
