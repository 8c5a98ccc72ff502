use std::time::Instant;
use wasbox_runtime::{JobSpec, Runtime, SandboxConfig};
fn main() {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let runtime = Runtime::new().unwrap();
    tokio.block_on(runtime.preload()).unwrap();
    let n = 300;
    let t = Instant::now();
    for _ in 0..n {
        let _s = runtime.sandbox(SandboxConfig::default()).unwrap();
    }
    println!("sandbox create+drop: {:?}", t.elapsed() / n);
    let sb = runtime.sandbox(SandboxConfig::default()).unwrap();
    for (label, argv) in [
        ("sh -c true", vec!["sh", "-c", "true"]),
        ("sh -c 'echo hello'", vec!["sh", "-c", "echo hello"]),
        ("true (coreutils)", vec!["true"]),
        ("echo (coreutils)", vec!["echo", "hi"]),
    ] {
        for _ in 0..20 {
            tokio.block_on(sb.run(JobSpec::new(argv.clone()))).unwrap();
        }
        let t = Instant::now();
        for _ in 0..n {
            tokio.block_on(sb.run(JobSpec::new(argv.clone()))).unwrap();
        }
        println!("{label} in reused sandbox: {:?}", t.elapsed() / n);
    }
}
