//! The `wasbox` command: `wasbox serve` (the worker API node), `wasbox run` (one job) and
//! `wasbox agent ...` (term agents).

mod cli;
mod config;
mod problem;
mod rfc3339;
mod serve;
mod term;
mod worker;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(cli::main(args));
}
