//! Limits: each runaway job fails alone and the runtime serves the next job normally.

use std::time::{Duration, Instant};

use wasbox_runtime::{JobSpec, JobStatus, Limits, StopSignal};

use crate::support::runtime::{sandbox_with, sh};

async fn next_job_works() {
    let out = sh("echo still serving").await;
    assert_eq!(out.status, JobStatus::Completed);
    assert_eq!(out.stdout, "still serving\n");
}

#[tokio::test]
async fn an_infinite_loop_ends_at_its_timeout() {
    let sandbox = sandbox_with(Limits::default().timeout(Duration::from_millis(500)));
    let started = Instant::now();
    let out = sandbox
        .run(JobSpec::shell("echo before; while :; do :; done"))
        .await
        .unwrap();
    assert_eq!(out.status, JobStatus::Timeout);
    assert_eq!(out.exit_code, 124);
    assert_eq!(out.stdout, "before\n");
    assert!(out.stderr.contains("timed out"), "{out:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    next_job_works().await;
}

#[tokio::test]
async fn a_blocked_pipeline_ends_at_its_timeout() {
    // Every process waits on another: only the deadline ends it.
    let sandbox = sandbox_with(Limits::default().timeout(Duration::from_millis(500)));
    let out = sandbox
        .run(JobSpec::shell("sleep 100 | cat"))
        .await
        .unwrap();
    assert_eq!(out.status, JobStatus::Timeout);
    next_job_works().await;
}

#[tokio::test]
async fn a_memory_bomb_fails_its_job() {
    let sandbox = sandbox_with(Limits::default().memory_bytes(64 << 20));
    let out = sandbox
        .run(JobSpec::shell(
            "x=aaaaaaaaaaaaaaaa; while :; do x=$x$x; done",
        ))
        .await
        .unwrap();
    assert_eq!(out.status, JobStatus::Failed);
    assert_eq!(out.exit_code, 134);
    assert!(
        out.stderr.contains("memory limit of 64 MiB exceeded"),
        "{out:?}"
    );
    next_job_works().await;
}

#[tokio::test]
async fn a_spawn_loop_is_stopped() {
    let sandbox = sandbox_with(Limits::default().max_spawns(200));
    let out = sandbox
        .run(JobSpec::shell(
            "n=0; while /bin/true; do n=$((n+1)); done; echo \"stopped after $n\"",
        ))
        .await
        .unwrap();
    assert_eq!(out.stdout, "stopped after 200\n");
    assert!(out.stderr.contains("spawn limit of 200"), "{out:?}");
    next_job_works().await;
}

#[tokio::test]
async fn a_fork_bomb_is_stopped_by_the_process_limit() {
    let sandbox = sandbox_with(Limits::default().max_processes(16));
    let out = sandbox
        .run(JobSpec::shell("echo 'sh bomb.sh' > bomb.sh; sh bomb.sh"))
        .await
        .unwrap();
    assert_eq!(out.status, JobStatus::Failed);
    assert!(
        out.stderr.contains("process limit of 16 reached"),
        "{out:?}"
    );
    // The sandbox is usable again once the bomb is gone.
    let out = sandbox.run(JobSpec::shell("echo recovered")).await.unwrap();
    assert_eq!(out.stdout, "recovered\n");
}

#[tokio::test]
async fn ten_mib_of_output_is_truncated_on_a_character_boundary() {
    let limit = 256 * 1024 + 1; // odd: a 2-byte character straddles it
    let sandbox = sandbox_with(Limits::default().max_output_bytes(limit));
    let out = sandbox
        .run(JobSpec::shell("yes é | head -c 10485760; echo done >&2"))
        .await
        .unwrap();
    assert_eq!(out.status, JobStatus::Completed, "{out:?}");
    assert!(out.truncated.stdout);
    assert!(!out.truncated.stderr);
    assert_eq!(out.stderr, "done\n");
    assert!(out.stdout.len() <= limit && out.stdout.len() > limit - 4);
    assert!(out.stdout.starts_with("é\né\n"));
    assert!(!out.stdout.contains('\u{fffd}'), "cut inside a character");
    next_job_works().await;
}

#[tokio::test]
async fn a_stop_signal_ends_a_running_job() {
    let stop = StopSignal::new();
    let spec = JobSpec::shell("echo started; sleep 100").stop_signal(stop.clone());
    let job =
        tokio::spawn(async move { crate::support::runtime::runtime().run(spec).await.unwrap() });
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.stop();
    let out = tokio::time::timeout(Duration::from_secs(10), job)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.status, JobStatus::Failed);
    assert_eq!(out.exit_code, wasbox_runtime::EXIT_STOPPED);
    assert_eq!(out.stdout, "started\n");
    assert!(out.stderr.contains("stopped by request"), "{out:?}");
    next_job_works().await;
}

#[tokio::test]
async fn a_trapping_program_fails_alone() {
    // Output flooding stderr and stdout at once, then a deep recursion that overflows.
    let out = sh("f() { f; }; f").await;
    assert_eq!(out.status, JobStatus::Failed, "{out:?}");
    next_job_works().await;
}

#[tokio::test]
async fn the_open_resource_limit_fails_its_process() {
    // A process needs a few resources (its streams, the workspace descriptor) to start;
    // with room for only one it cannot, and fails cleanly.
    let sandbox = sandbox_with(Limits::default().max_open_resources(1));
    let out = sandbox.run(JobSpec::shell("echo never")).await.unwrap();
    assert_eq!(out.status, JobStatus::Failed, "{out:?}");
    assert_eq!(out.stdout, "");
    let roomy = sandbox_with(Limits::default().max_open_resources(64));
    let out = roomy
        .run(JobSpec::shell(
            "for f in a b c; do echo $f > $f; done; cat a b c",
        ))
        .await
        .unwrap();
    assert_eq!(out.stdout, "a\nb\nc\n");
    next_job_works().await;
}

/// A shell loop that doubles a string until it holds about `mib` MiB, then waits.
fn hold(mib: usize, secs: u32) -> String {
    format!(
        "x=aaaaaaaaaaaaaaaa; while [ ${{#x}} -lt {} ]; do x=$x$x; done; sleep {secs}; echo held",
        mib << 20
    )
}

const GROW: &str = "sleep 1; y=aaaaaaaaaaaaaaaa; while :; do y=$y$y; done";

#[tokio::test]
async fn the_processes_of_a_sandbox_share_one_memory_budget() {
    // Each process may take 96 MiB, but the sandbox's processes together only 112.
    let limits = Limits::default()
        .memory_bytes(96 << 20)
        .sandbox_memory_bytes(112 << 20);
    let sandbox = sandbox_with(limits);
    let script = format!("sh -c '{}' & sh -c '{GROW}'; wait", hold(16, 3));
    let out = sandbox.run(JobSpec::shell(script)).await.unwrap();
    assert!(
        out.stderr
            .contains("sandbox memory budget of 112 MiB exceeded"),
        "{out:?}"
    );
    assert!(
        out.stdout.contains("held"),
        "the first process lives on: {out:?}"
    );
    next_job_works().await;
}

#[tokio::test]
async fn the_sandboxes_of_a_node_share_its_memory_budget() {
    let runtime = wasbox_runtime::Runtime::builder()
        .cache_dir(crate::support::runtime::cache_dir())
        .node_memory_bytes(96 << 20)
        .build()
        .unwrap();
    let (held, used) = (runtime.clone(), runtime.clone());
    let holder = tokio::spawn(async move { held.run(JobSpec::shell(hold(8, 4))).await.unwrap() });
    let grower = tokio::spawn(async move { used.run(JobSpec::shell(GROW)).await.unwrap() });
    let grown = grower.await.unwrap();
    assert_eq!(grown.exit_code, 134, "{grown:?}");
    assert!(
        grown
            .stderr
            .contains("the node's memory budget of 96 MiB is used up"),
        "{grown:?}"
    );
    let held = holder.await.unwrap();
    assert_eq!(
        held.stdout, "held\n",
        "the other sandbox is unharmed: {held:?}"
    );
    // Everything is given back when the processes end.
    assert_eq!(runtime.memory_in_use().0, 0);
}
