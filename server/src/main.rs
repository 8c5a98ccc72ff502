//! The `wasbox` command: `wasbox run` runs one job on the built-in image.

mod cli;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(cli::main(args));
}
