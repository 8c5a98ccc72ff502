//! The `wasbox` command. Everything lives in the library (`wasbox::cli`).

fn main() {
    std::process::exit(wasbox::cli::main());
}
