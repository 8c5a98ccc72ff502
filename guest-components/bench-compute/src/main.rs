//! `bench-compute`: the kernels of `wasbox bench` (`kernel.rs`) as a wasm program. The same
//! file is compiled natively into `wasbox` (`wasbox bench-kernel`), so that the benchmark
//! compares one program built two ways.

mod kernel;

fn main() {
    guest_support::start();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match kernel::run(&args) {
        Ok(out) => println!("{out}"),
        Err(e) => {
            eprintln!("bench-compute: {e}");
            guest_support::exit(2);
        }
    }
}
