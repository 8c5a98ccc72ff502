//! `node` as an ordinary program of the image: scripts from files and stdin with arguments,
//! `-p`, files that later commands see, and the limits every program has. The language and
//! library behaviour is checked against Node.js by the corpus (`tests/corpus/node.txt`).

use std::time::{Duration, Instant};

use wasbox_runtime::{JobSpec, JobStatus, Limits, SandboxConfig};

use crate::support::runtime::{runtime, sandbox_with, sh};

/// The first use of node compiles it; do that outside the short deadlines below.
async fn warm() {
    assert_eq!(sh("node -p 1").await.stdout, "1\n");
}

#[tokio::test]
async fn scripts_from_files_and_stdin() {
    let sandbox = runtime().sandbox(SandboxConfig::default()).unwrap();
    let run = |script: &'static str| {
        let sandbox = sandbox.clone();
        async move { sandbox.run(JobSpec::shell(script)).await.unwrap() }
    };
    let out = run("printf '%s\\n' 'console.log(process.argv.slice(2).join(\"+\"), __filename, __dirname)' > a.js; node a.js x 'y z'").await;
    assert_eq!(
        (out.exit_code, out.stdout.as_str()),
        (0, "x+y z /workspace/a.js /workspace\n"),
        "{out:?}"
    );
    let out = run("echo 'console.log(\"from stdin\", process.argv.length)' | node - extra").await;
    assert_eq!(out.stdout, "from stdin 2\n", "{out:?}");
    let out = run("echo 'console.log(6 * 7)' | nodejs").await;
    assert_eq!(out.stdout, "42\n", "{out:?}");
    let out = run("node -p '[1, 2].map(x => x * 3)'; js -p '\"plain\"'").await;
    assert_eq!(out.stdout, "[ 3, 6 ]\nplain\n", "{out:?}");
    let out = run("node -e 'require(\"fs\").writeFileSync(\"made.txt\", \"by node\\n\")'; cat made.txt; node -e 'console.log(require(\"fs\").readFileSync(\"made.txt\", \"utf8\").trim())' | tr a-z A-Z").await;
    assert_eq!(out.stdout, "by node\nBY NODE\n", "{out:?}");
    let out = run("node nope.js; echo $?").await;
    assert_eq!(out.stdout, "1\n");
    assert!(out.stderr.contains("Cannot find module"), "{out:?}");
    let out = run("node -e 'throw new RangeError(\"too far\")'; echo $?").await;
    assert_eq!(out.stdout, "1\n");
    assert!(
        out.stderr.starts_with("Uncaught RangeError: too far"),
        "{out:?}"
    );
}

#[tokio::test]
async fn a_busy_loop_ends_at_the_deadline() {
    warm().await;
    let sandbox = sandbox_with(Limits::default().timeout(Duration::from_millis(800)));
    let started = Instant::now();
    let out = sandbox
        .run(JobSpec::new([
            "node",
            "-e",
            "console.log('spinning'); for (;;) {}",
        ]))
        .await
        .unwrap();
    assert_eq!(out.status, JobStatus::Timeout, "{out:?}");
    assert_eq!(out.stdout, "spinning\n");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(sh("node -p 1+1").await.stdout, "2\n");
}

#[tokio::test]
async fn a_memory_bomb_fails_its_own_job() {
    warm().await;
    let sandbox = sandbox_with(Limits::default().memory_bytes(96 << 20));
    let out = sandbox
        .run(JobSpec::new([
            "node",
            "-e",
            "const a = []; for (;;) a.push('x'.repeat(1 << 20) + a.length);",
        ]))
        .await
        .unwrap();
    assert_eq!(out.status, JobStatus::Failed, "{out:?}");
    assert_eq!(out.exit_code, 134, "{out:?}");
    assert!(
        out.stderr.contains("memory limit of 96 MiB exceeded"),
        "{out:?}"
    );
    assert_eq!(sh("node -p 2+2").await.stdout, "4\n");
}
