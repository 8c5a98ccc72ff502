//! Start-up cost of a sandboxed job against a native process, in one run:
//! `sh -c 'echo hello'`, `seq 1 10000 | sort -n | tail -1` and a 10-line agent-style bash
//! script (here-document, loop, grep, sed, awk), `node -e 'console.log(2 + 2)'`,
//! `python3 -c 'print(2 + 2)'` and a CPU-bound loop in each language, each as a wasbox job
//! in process and as the native `sh`/`bash`/`node`/`python3` spawned with
//! `std::process::Command` in a fresh temporary directory.
//!
//! Three wasbox variants: a job in a fresh sandbox (temporary workspace and private /tmp
//! created and removed on TMPDIR), the same on tmpfs, and a job in an existing sandbox.
//!
//! `cargo bench -p wasbox-benches --bench start` prints criterion's figures and then a table
//! of medians with the ratio native / wasbox.

use std::process::{Command, Stdio};

use criterion::{Criterion, criterion_group};
use wasbox_runtime::{JobSpec, Runtime, SandboxConfig};

/// (name, program, flag, code): run as `program flag code`.
const CASES: &[(&str, &str, &str, &str)] = &[
    ("echo", "sh", "-c", "echo hello"),
    ("pipeline", "sh", "-c", "seq 1 10000 | sort -n | tail -1"),
    ("script", "bash", "-c", AGENT_SCRIPT),
    ("node", "node", "-e", "console.log(2 + 2)"),
    ("python", "python3", "-c", "print(2 + 2)"),
    ("node-cpu", "node", "-e", NODE_CPU),
    ("python-cpu", "python3", "-c", PYTHON_CPU),
];

/// CPU-bound: a 200k-iteration loop building a dict / an object.
const PYTHON_CPU: &str = "d = {}\nfor i in range(200000):\n    k = i % 1000\n    d[k] = d.get(k, 0) + i\nprint(len(d), sum(d.values()))";
const NODE_CPU: &str = "const d = {}; for (let i = 0; i < 200000; i++) { const k = i % 1000; d[k] = (d[k] || 0) + i; } console.log(Object.keys(d).length, Object.values(d).reduce((a, b) => a + b, 0))";

/// What an agent sends: write a file with a here-document, then loop, grep, sed and awk.
const AGENT_SCRIPT: &str = r#"cat > app.log <<'EOF'
2026-11-21 10:00:00 INFO server started on port 8080
2026-11-21 10:00:03 WARN cache miss for key user:7
2026-11-21 10:01:10 ERROR connection refused: db01
2026-11-21 10:01:20 ERROR connection refused: db02
2026-11-21 10:02:00 INFO connected to db03
EOF
for level in INFO WARN ERROR; do
  printf '%s %s\n' "$level" "$(grep -c " $level " app.log)"
done > counts.txt
sed -n 's/.*refused: \(db[0-9]*\)$/\1/p' app.log | sort -u
awk '{ n[$3]++ } END { for (l in n) print l, n[l] }' app.log | sort -k2 -n
cat counts.txt"#;

/// The interpreter itself, not a launcher in front of it (pyenv puts a shell-script shim
/// first on PATH, which would cost the native side ~120 ms per start).
fn resolve(program: &str) -> String {
    if program != "python3" {
        return program.to_string();
    }
    let out = Command::new(program)
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn native(program: &str, flag: &str, script: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(resolve_cached(program))
        .args([flag, script])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("native shell");
    String::from_utf8(out.stdout).expect("utf8")
}

fn resolve_cached(program: &str) -> String {
    use std::sync::{Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<std::collections::HashMap<String, String>>> = OnceLock::new();
    let mut map = CACHE.get_or_init(Default::default).lock().unwrap();
    map.entry(program.to_string())
        .or_insert_with(|| resolve(program))
        .clone()
}

fn start(c: &mut Criterion) {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let runtime = Runtime::new().expect("runtime");
    tokio.block_on(runtime.preload()).expect("preload");
    let on_tmpfs = std::path::Path::new("/dev/shm").is_dir().then(|| {
        let rt = Runtime::builder()
            .temp_dir("/dev/shm")
            .build()
            .expect("runtime");
        tokio.block_on(rt.preload()).expect("preload");
        rt
    });
    for (name, program, flag, script) in CASES {
        let job = || JobSpec::new([*program, *flag, *script]);
        let expected = native(program, flag, script);
        let got = tokio.block_on(runtime.run(job())).unwrap();
        assert_eq!(
            got.stdout, expected,
            "wasbox and native disagree on {script:?}"
        );

        let mut group = c.benchmark_group(format!("start/{name}"));
        // A job in a fresh sandbox: its temporary workspace is created and removed too.
        group.bench_function("wasbox", |b| {
            b.iter(|| tokio.block_on(runtime.run(job())).unwrap())
        });
        // The same with the workspace and the sandbox's /tmp on tmpfs (what
        // `TMPDIR=/dev/shm wasbox serve` gives).
        if let Some(shm) = &on_tmpfs {
            group.bench_function("wasbox-tmpfs", |b| {
                b.iter(|| tokio.block_on(shm.run(job())).unwrap())
            });
        }
        // One more job in an existing sandbox (a session exec).
        let sandbox = runtime.sandbox(SandboxConfig::default()).unwrap();
        group.bench_function("wasbox-session", |b| {
            b.iter(|| tokio.block_on(sandbox.run(job())).unwrap())
        });
        group.bench_function("native", |b| b.iter(|| native(program, flag, script)));
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
        ("start/script", "wasbox", "native"),
        ("start/script", "wasbox-tmpfs", "native"),
        ("start/script", "wasbox-session", "native"),
        ("start/node", "wasbox", "native"),
        ("start/node", "wasbox-tmpfs", "native"),
        ("start/node", "wasbox-session", "native"),
        ("start/python", "wasbox", "native"),
        ("start/python", "wasbox-tmpfs", "native"),
        ("start/python", "wasbox-session", "native"),
        ("start/node-cpu", "wasbox-session", "native"),
        ("start/python-cpu", "wasbox-session", "native"),
    ]);
}
