//! Start-up cost of a sandboxed job against a native process, in one run:
//! `sh -c 'echo hello'` and `seq 1 10000 | sort -n | tail -1`, each as a wasbox job in
//! process and as a native `sh` spawned with `std::process::Command`.
//!
//! `cargo bench -p wasbox-benches --bench start` prints criterion's figures and then a table
//! of medians with the ratio native / wasbox.

use std::process::{Command, Stdio};

use criterion::{Criterion, criterion_group};
use wasbox_runtime::{JobSpec, Runtime};

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
        group.bench_function("wasbox", |b| {
            b.iter(|| {
                tokio
                    .block_on(runtime.run(JobSpec::shell(*script)))
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
        ("start/pipeline", "wasbox", "native"),
    ]);
}
