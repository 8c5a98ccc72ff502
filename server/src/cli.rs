//! The command line: `wasbox serve`, `wasbox run`, `wasbox term ...`, `wasbox bench`. Each front-end owns its
//! arguments; this module only dispatches and sets up logging.

use clap::{Parser, Subcommand};

/// A WebAssembly sandbox for AI agents and jobs.
#[derive(Parser, Debug)]
#[command(
    name = "wasbox",
    version,
    about,
    long_about = "A WebAssembly sandbox for AI agents and jobs: every program runs as a WASI \
component confined to one workspace, with limits on time, memory, processes and output. The \
built-in image has a bash-compatible shell, coreutils, python3 and node.\n\n\
Logging: WASBOX_LOG (e.g. info, debug; default warn) on stderr."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve the worker API (the orchestrator-facing node protocol) over HTTP.
    Serve(crate::worker::serve::ServeArgs),
    /// Run one job on the built-in image, streaming its output; exits with its exit code.
    Run(crate::run::RunArgs),
    /// Term-challenge agents: term SDK 2.0 over HTTP, term SDK 1.x over stdio.
    #[command(alias = "agent")]
    Term(crate::term::TermArgs),
    /// Bouvet's sandbox agent: JSON-RPC 2.0 over a Unix socket or vsock.
    Bouvet(crate::bouvet::BouvetArgs),
    /// The agent sidecar of a desktop host: HTTP and server-sent events.
    Sidecar(crate::sidecar::SidecarArgs),
    /// Templates: named snapshots sandboxes start from (build, ls, rm).
    Template(crate::template::TemplateArgs),
    /// Volumes: named directories that outlive sandboxes (create, ls, rm).
    Volume(crate::volume_cli::VolumeArgs),
    /// Measure what isolation costs on this machine, side by side with a native process.
    Bench(crate::bench::BenchArgs),
    /// A compute kernel of `wasbox bench`, natively (the baseline of its wasm build).
    #[command(hide = true)]
    BenchKernel(crate::bench::KernelArgs),
}

/// Parses the process's arguments and runs the command; returns the exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version print to stdout and succeed; usage errors exit 2.
            let _ = e.print();
            return e.exit_code();
        }
    };
    // `wasbox serve` sets its logger up from its configuration (format and level).
    if !matches!(cli.command, Command::Serve(_)) {
        crate::logging::init(None, false);
    }
    // Each busy sandbox holds a directory handle and each client a connection: the usual
    // soft limit of 1,024 open files would cap a node at a few hundred. `wasbox run` has one.
    if !matches!(cli.command, Command::Run(_)) {
        let files = wasbox_runtime::capacity::raise_open_file_limit();
        tracing::debug!(open_files = files, "open-file limit");
    }
    let result = match cli.command {
        Command::Serve(args) => crate::worker::serve::main(args),
        Command::Run(args) => crate::run::main(args),
        Command::Term(args) => crate::term::main(args),
        Command::Bouvet(args) => crate::bouvet::main(args),
        Command::Sidecar(args) => crate::sidecar::main(args),
        Command::Template(args) => crate::template::main(args),
        Command::Volume(args) => crate::volume_cli::main(args),
        Command::Bench(args) => crate::bench::main(args),
        Command::BenchKernel(args) => crate::bench::kernel_main(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("wasbox: {e:#}");
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_takes_the_guest_command_after_its_own_options() {
        let cli = Cli::try_parse_from(["wasbox", "run", "--timeout", "5", "--", "sh", "-c", "x"])
            .unwrap();
        let Command::Run(args) = cli.command else {
            panic!("not run")
        };
        assert_eq!(args.argv, ["sh", "-c", "x"]);
        let cli = Cli::try_parse_from(["wasbox", "run", "ls", "-la", "--timeout", "3"]).unwrap();
        let Command::Run(args) = cli.command else {
            panic!("not run")
        };
        assert_eq!(args.argv, ["ls", "-la", "--timeout", "3"]);
        let help = Cli::try_parse_from(["wasbox", "run", "-h"]).unwrap_err();
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
    }
}
