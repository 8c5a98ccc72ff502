//! Pipelines between concurrently running processes.

use std::time::Duration;

use wasbox_runtime::{JobSpec, JobStatus};

use crate::support::runtime::{runtime, sh};

#[tokio::test]
async fn yes_head_ends() {
    let out = tokio::time::timeout(Duration::from_secs(20), sh("yes | head -1"))
        .await
        .expect("yes | head -1 must end");
    assert_eq!(out.stdout, "y\n");
    assert_eq!(out.exit_code, 0);
    assert_eq!(out.stderr, "", "the writer ends quietly on the broken pipe");
}

#[tokio::test]
async fn three_stages_over_a_megabyte() {
    let out = sh("yes 0123456789abcdef | head -c 1048576 | wc -c").await;
    assert_eq!(out.stdout.trim(), "1048576");
    let out = sh("seq 1 200000 | sort -rn | head -3").await;
    assert_eq!(out.stdout, "200000\n199999\n199998\n");
    assert_eq!(out.stderr, "");
    let out = sh("seq 1 100000 | tr 0-9 a-j | tail -1").await;
    assert_eq!(out.stdout, "baaaaa\n");
}

#[tokio::test]
async fn exit_status_of_a_pipeline() {
    let out = sh("false | true; echo $?; true | false; echo $?; ! true | false; echo $?").await;
    assert_eq!(out.stdout, "0\n1\n0\n");
    let out = sh("set -o pipefail; false | true; echo $?; true | true; echo $?").await;
    assert_eq!(out.stdout, "1\n0\n");
    let out = sh("seq 3 | head -1 | no-such-filter").await;
    assert_eq!(out.exit_code, 127);
}

#[tokio::test]
async fn builtins_and_loops_in_pipelines() {
    let out = sh("echo 'b\na\nc' | sort | while read l; do echo \"<$l>\"; done").await;
    assert_eq!(out.stdout, "<a>\n<b>\n<c>\n");
    let out = sh("for i in 1 2 3; do echo $i; done | wc -l").await;
    assert_eq!(out.stdout.trim(), "3");
    let out = sh("x=$(seq 1 5 | tail -2 | tr '\\n' ' '); echo \"[$x]\"").await;
    assert_eq!(out.stdout, "[4 5 ]\n");
}

#[tokio::test]
async fn job_stdin_reaches_the_program() {
    let out = runtime()
        .run(JobSpec::new(["sort"]).stdin("b\nc\na\n"))
        .await
        .unwrap();
    assert_eq!(out.status, JobStatus::Completed);
    assert_eq!(out.stdout, "a\nb\nc\n");
}

#[tokio::test]
async fn one_large_write_arrives_whole_through_every_kind_of_stream() {
    // A single write larger than a pipe's capacity (1 MiB) and than one stream chunk:
    // through a pipe, into a file redirection, and captured directly, for a program that
    // retries short writes (head) and one that did not (CPython's unbuffered stdio).
    let n = 2_000_000;
    let script = format!(
        "python3 -c \"import sys; sys.stdout.write('x' * {n})\" | wc -c; \
         python3 -c \"import sys; sys.stdout.write('y' * {n}); print('z' * {n}, file=sys.stderr)\" > out 2> err; \
         wc -c < out; wc -c < err; yes | head -c {n} | wc -c"
    );
    let out = sh(&script).await;
    assert_eq!(
        out.stdout,
        format!("{n}\n{n}\n{}\n{n}\n", n + 1),
        "{}",
        out.stderr
    );
    let big = wasbox_runtime::Limits::default().max_output_bytes(4 << 20);
    let sandbox = crate::support::runtime::sandbox_with(big);
    let out = sandbox
        .run(JobSpec::shell(format!("python3 -c \"print('w' * {n})\"")))
        .await
        .unwrap();
    assert_eq!(out.stdout.len(), n + 1, "captured directly");
}
