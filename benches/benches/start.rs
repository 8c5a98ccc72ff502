//! Start-up cost of a sandboxed job against a native process, in one run:
//! `sh -c 'echo hello'` and `seq 1 10000 | sort -n | tail -1`, each as a wasbox job in
//! process and as a native `sh` spawned with `std::process::Command`.
//!
//! Three wasbox variants: a job in a fresh sandbox (temporary workspace created and removed
//! on TMPDIR), the same with the workspace on tmpfs, and a job in an existing sandbox.
//!
//! `cargo bench -p wasbox-benches --bench start` prints criterion's figures and then a table
//! of medians with the ratio native / wasbox.

use std::process::{Command, Stdio};

use criterion::{Criterion, criterion_group};
use wasbox_runtime::{JobSpec, Runtime, SandboxConfig};

const CASES: &[(&str, &str)] = &[
    ("echo", "echo hello"),
    ("pipeline", "seq 1 10000 | sort -n | tail -1"),
];

fn native(script: &str) -> String {
    let out = Command::new("sh")
        .args(["-c", script])
        .stdin(Stdio::null())
        .output()
        .expect("native sh");
    String::from_utf8(out.stdout).expect("utf8")
}

fn start(c: &mut Criterion) {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let runtime = Runtime::new().expect("runtime");
    tokio.block_on(runtime.preload()).expect("preload");
    for (name, script) in CASES {
        let expected = native(script);
        let got = tokio
            .block_on(runtime.run(JobSpec::shell(*script)))
            .unwrap();
        assert_eq!(
            got.stdout, expected,
            "wasbox and native disagree on {script:?}"
        );

        let mut group = c.benchmark_group(format!("start/{name}"));
        // A job in a fresh sandbox: its temporary workspace is created and removed too.
        group.bench_function("wasbox", |b| {
            b.iter(|| {
                tokio
                    .block_on(runtime.run(JobSpec::shell(*script)))
                    .unwrap()
            })
        });
        // The same with the workspace on tmpfs (what TMPDIR=/dev/shm gives `wasbox serve`).
        if std::path::Path::new("/dev/shm").is_dir() {
            group.bench_function("wasbox-tmpfs", |b| {
                b.iter(|| {
                    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
                    let sandbox = runtime
                        .sandbox(SandboxConfig::default().workspace(dir.path()))
                        .unwrap();
                    tokio
                        .block_on(sandbox.run(JobSpec::shell(*script)))
                        .unwrap()
                })
            });
        }
        // One more job in an existing sandbox (a session exec).
        let sandbox = runtime.sandbox(SandboxConfig::default()).unwrap();
        group.bench_function("wasbox-session", |b| {
            b.iter(|| {
                tokio
                    .block_on(sandbox.run(JobSpec::shell(*script)))
                    .unwrap()
            })
        });
        group.bench_function("native", |b| b.iter(|| native(script)));
        group.finish();
    }
}

criterion_group!(benches, start);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    wasbox_benches::print_ratios(&[
        ("start/echo", "wasbox", "native"),
        ("start/echo", "wasbox-tmpfs", "native"),
        ("start/echo", "wasbox-session", "native"),
        ("start/pipeline", "wasbox", "native"),
        ("start/pipeline", "wasbox-tmpfs", "native"),
        ("start/pipeline", "wasbox-session", "native"),
    ]);
}
