//! The `wasbox` command. Everything lives in the library (`wasbox::cli`).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(wasbox::cli::main());
}
