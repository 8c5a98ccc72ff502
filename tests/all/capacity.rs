//! Scale: disk quotas of scratch workspaces enforced inside the guest (ENOSPC, the host
//! untouched), the node's limit of live processes answered with a clear refusal, and fresh
//! workspaces in memory.

use std::time::Duration;

use base64::Engine as _;

use serde_json::json;
use wasbox_runtime::{
    JobSpec, JobStatus, Limits, PtyConfig, PtyRefused, Runtime, SandboxConfig, SessionConfig,
    Sessions,
};

use crate::support::http::{Reply, Server};
use crate::support::runtime::{cache_dir, sandbox_with};

const NO_SPACE: &str = "No space left on device";
/// What the host adds to a job's stderr when the quota refused a write (the program itself
/// may only have seen EIO: wasi-libc reports every failed stream write as EIO).
const QUOTA_NOTE: &str = "wasbox: the sandbox's disk quota is full";

fn quota(bytes: u64, inodes: u64) -> wasbox_runtime::Sandbox {
    sandbox_with(
        Limits::default()
            .timeout(Duration::from_secs(60))
            .disk_bytes(bytes)
            .disk_inodes(inodes),
    )
}

async fn run(s: &wasbox_runtime::Sandbox, script: &str) -> wasbox_runtime::JobOutput {
    s.run(JobSpec::shell(script)).await.unwrap()
}

#[tokio::test]
async fn a_redirection_past_the_quota_fails_and_space_comes_back() {
    let s = quota(1 << 20, 1000);
    // The shell's own redirection (the host writes the file).
    let out = run(&s, "seq 1 400000 > big; echo status=$?; wc -c < big").await;
    assert!(out.stdout.starts_with("status=1\n"), "{out:?}");
    assert!(out.stderr.contains("seq: write error"), "{out:?}");
    assert!(out.stderr.contains(QUOTA_NOTE), "{out:?}");
    let written: u64 = out.stdout.lines().last().unwrap().trim().parse().unwrap();
    assert!(written <= 1 << 20, "{written} bytes passed a 1 MiB quota");
    // Removing the file gives its bytes back.
    let out = run(&s, "rm big && seq 1 100000 > ok && wc -c < ok").await;
    assert_eq!(out.status, JobStatus::Completed, "{out:?}");
    assert_eq!(out.stdout.trim(), "588895");
    assert!(!out.stderr.contains(QUOTA_NOTE), "{out:?}");
    // A truncating redirection gives the old bytes back before the new ones are charged.
    for _ in 0..3 {
        let out = run(&s, "seq 1 100000 > ok && echo fine").await;
        assert_eq!(out.stdout, "fine\n", "{out:?}");
    }
}

#[tokio::test]
async fn guest_writes_through_wasi_are_charged() {
    let s = quota(1 << 20, 1000);
    // python3 writes through wasi:filesystem streams.
    let out = run(
        &s,
        "python3 -c \"
import errno
try:
    with open('blob', 'wb') as f:
        for _ in range(64):
            f.write(b'x' * 65536)
    print('wrote all')
except OSError as e:
    print('errno', errno.errorcode[e.errno])
\"",
    )
    .await;
    assert!(
        ["errno EIO", "errno ENOSPC"].contains(&out.stdout.trim()),
        "{out:?}"
    );
    assert!(out.stderr.contains(QUOTA_NOTE), "{out:?}");
    // A sparse file of a terabyte is refused too: sizes count whole.
    let out = run(&s, "truncate -s 1T sparse; echo $?").await;
    assert_ne!(out.stdout.trim(), "0", "{out:?}");
    assert!(out.stderr.contains(NO_SPACE), "{out:?}");
    // Copies count like any other write.
    let out = run(
        &s,
        "rm -f blob; seq 1 100000 > a && cp a b && cp b c; echo $?",
    )
    .await;
    assert_ne!(out.stdout.trim(), "0", "{out:?}");
    assert!(out.stderr.contains("cp: "), "{out:?}");
    assert!(out.stderr.contains(QUOTA_NOTE), "{out:?}");
}

#[tokio::test]
async fn the_inode_quota_stops_a_file_storm() {
    let s = quota(1 << 30, 50);
    let out = run(
        &s,
        "i=0; while [ $i -lt 100 ]; do mkdir d$i 2>/dev/null || break; i=$((i+1)); done; echo made=$i",
    )
    .await;
    assert_eq!(out.stdout.trim(), "made=50", "{out:?}");
    let out = run(&s, "touch x; echo $?; ln -s d0 l; echo $?").await;
    assert_eq!(out.stdout, "1\n1\n", "{out:?}");
    assert!(out.stderr.contains(NO_SPACE), "{out:?}");
    let out = run(&s, "rmdir d1 d2 && touch x && echo ok").await;
    assert_eq!(out.stdout, "ok\n", "{out:?}");
}

#[tokio::test]
async fn the_files_api_is_charged_too() {
    let s = quota(1000, 100);
    s.write_file("a.txt", &[b'a'; 600]).unwrap();
    let e = s.write_file("b.txt", &[b'b'; 600]).unwrap_err();
    assert!(e.to_string().contains(NO_SPACE), "{e}");
    // Replacing a file charges only what it grows by.
    s.write_file("a.txt", &[b'a'; 900]).unwrap();
    s.write_file("a.txt", &[b'a'; 10]).unwrap();
    s.write_file("b.txt", &[b'b'; 900]).unwrap();
}

#[tokio::test]
async fn a_full_node_refuses_interactive_shells_and_a_child_fails_alone() {
    let runtime = Runtime::builder()
        .cache_dir(cache_dir())
        .max_instances(3)
        .reserve_for_jobs(1)
        .build()
        .unwrap();
    runtime.preload().await.unwrap();
    let sessions = Sessions::new(10);
    let ptys = shells(&runtime, &sessions, 2).await;
    assert_eq!(runtime.instances_in_use().0, 2);
    let third = sessions
        .create(SessionConfig::new("s2"), || {
            runtime.sandbox(Default::default())
        })
        .unwrap();
    let Err(refused) = third.open_pty("p2".into(), PtyConfig::default()).await else {
        panic!("a third shell was admitted past the limit");
    };
    assert!(
        refused
            .to_string()
            .contains("limit of 2 live sandbox processes"),
        "{refused}"
    );
    // A job still gets the place kept for jobs; its shell's child finds the node full and
    // fails alone, like fork with EAGAIN; the shell goes on.
    let out = third
        .sandbox()
        .run(JobSpec::shell("echo one; ls >/dev/null; echo after=$?"))
        .await
        .unwrap();
    assert_eq!(out.stdout, "one\nafter=126\n", "{out:?}");
    assert!(
        out.stderr.contains("limit of 3 live sandbox processes"),
        "{out:?}"
    );
    // Waiting for a place ends with the reason.
    let held = runtime.try_admit().unwrap();
    let e = runtime.admit(Duration::from_millis(100)).await.unwrap_err();
    assert!(e.to_string().contains("limit of 3"), "{e}");
    drop(held);
    sessions.end_all("test over");
    drop(ptys);
    // Every place comes back when the shells end.
    all_places_come_back(&runtime, "places were not given back").await;
}

/// Waits (up to 10 s) until `runtime` has no live process left, or fails with `what`.
async fn all_places_come_back(runtime: &Runtime, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while runtime.instances_in_use().0 > 0 {
        assert!(std::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A PTY answers once its program has started: one that cannot get its instance (here its
/// memory limit is below what the shell needs to start) is refused with the reason, and
/// leaves neither a PTY nor a place behind.
#[tokio::test]
async fn a_pty_whose_program_cannot_start_is_refused() {
    let runtime = Runtime::builder()
        .cache_dir(cache_dir())
        .max_instances(8)
        .build()
        .unwrap();
    let sessions = Sessions::new(4);
    let tight = sessions
        .create(SessionConfig::new("tight"), || {
            runtime
                .sandbox(SandboxConfig::default().limits(Limits::default().memory_bytes(64 << 10)))
        })
        .unwrap();
    let Err(refused) = tight.open_pty("p".into(), PtyConfig::default()).await else {
        panic!("a PTY was answered for a shell that cannot start");
    };
    let why = refused.to_string();
    assert!(why.contains("cannot start the program"), "{why}");
    assert!(why.contains("memory limit of"), "{why}");
    // Its own limit: no room another sandbox gives back would let it start.
    assert!(
        matches!(&refused, PtyRefused::Start(f) if !f.for_lack_of_room),
        "{refused:?}"
    );
    assert_eq!(tight.pty_count(), 0);
    // The place comes back as the failed job ends.
    all_places_come_back(&runtime, "the place was not given back").await;
    // A shell that can start is answered as before, and runs.
    let fine = sessions
        .create(SessionConfig::new("fine"), || {
            runtime.sandbox(Default::default())
        })
        .unwrap();
    let pty = fine
        .open_pty("p".into(), PtyConfig::default())
        .await
        .unwrap();
    pty.send(b"echo ok$((1+1))\n").await;
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("ok2") {
        let out = pty.recv(64 << 10, Duration::from_secs(5)).await;
        assert!(
            !out.exited && !out.data.is_empty(),
            "{}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&out.data);
    }
    sessions.end_all("test over");
}

/// `n` sessions (`s0`...) of `runtime`, each with a shell on a PTY.
async fn shells(
    runtime: &Runtime,
    sessions: &Sessions,
    n: usize,
) -> Vec<std::sync::Arc<wasbox_runtime::Pty>> {
    let mut ptys = Vec::new();
    for i in 0..n {
        let s = sessions
            .create(SessionConfig::new(format!("s{i}")), || {
                runtime.sandbox(Default::default())
            })
            .unwrap();
        ptys.push(
            s.open_pty(format!("p{i}"), PtyConfig::default())
                .await
                .unwrap(),
        );
    }
    ptys
}

/// Sends `line` to `pty` and reads until `want` appears; returns all that was read.
async fn answer(pty: &wasbox_runtime::Pty, line: &str, want: &str) -> String {
    pty.send(line.as_bytes()).await;
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains(want) {
        let out = pty.recv(64 << 10, Duration::from_secs(60)).await;
        assert!(
            !out.exited && !out.data.is_empty(),
            "waiting for {want:?} after {line:?}: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&out.data);
    }
    String::from_utf8_lossy(&seen).into_owned()
}

/// Past the address space's room for 4 GiB reservations (here one), shells and what they
/// start get compact memories: they run the same, a program may still use its whole
/// memory limit and no more, and the counts come back when they end.
#[tokio::test]
async fn past_the_room_for_4_gib_reservations_programs_get_compact_memories() {
    let runtime = Runtime::builder()
        .cache_dir(cache_dir())
        .wide_instances(1)
        .build()
        .unwrap();
    let sessions = Sessions::new(10);
    let ptys = shells(&runtime, &sessions, 2).await;
    for pty in &ptys {
        answer(pty, "echo ok$((6*7))\n", "ok42").await;
    }
    // The first shell reserved 4 GiB; the second is compact.
    assert_eq!(runtime.unpooled_instances(), (1, 1, 1));
    // Its commands are compact too (the wide room is still taken): a pipeline, a program
    // that fills 400 MiB of its 512 MiB limit, and one that asks for more than the limit
    // and is stopped as anywhere else. (node: the smallest program of the image that can
    // hold 400 MiB; every program named here is compiled again for compact memories.)
    for (line, want) in [
        (
            "printf '%s\\n' b a c | node -e 'let d = \"\"; process.stdin.on(\"data\", (c) => (d += c)).on(\"end\", () => console.log(\"<\" + d.trim().split(\"\\n\").sort().join(\"\") + \">\"))'\n",
            "<abc>",
        ),
        (
            "node -e 'const b = new Uint8Array(400 << 20); b[b.length - 1] = 7; console.log(\"held\", b.length >> 20)'\n",
            "held 400",
        ),
        (
            "node -e 'new Uint8Array(600 << 20)'\n",
            "memory limit of 512 MiB exceeded",
        ),
    ] {
        answer(&ptys[1], line, want).await;
    }
    sessions.end_all("test over");
    drop(ptys);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while runtime.unpooled_instances() != (0, 0, 1) {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            runtime.unpooled_instances()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn fresh_workspaces_live_in_memory_and_crashed_leftovers_are_swept() {
    if !std::path::Path::new("/dev/shm").is_dir() {
        return;
    }
    // A scratch root left by a process that no longer exists.
    let dead = std::process::Command::new("true").spawn().unwrap();
    let pid = dead.id();
    let mut dead = dead;
    dead.wait().unwrap();
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let stale = std::path::PathBuf::from(format!("/dev/shm/wasbox-{uid}.{pid}.stale"));
    std::fs::create_dir_all(stale.join("wasbox-x/sub")).unwrap();
    let runtime = Runtime::builder().cache_dir(cache_dir()).build().unwrap();
    assert!(
        !stale.exists(),
        "the crashed runtime's scratch was not swept"
    );
    let sandbox = runtime.sandbox(Default::default()).unwrap();
    assert!(
        sandbox.workspace().starts_with("/dev/shm"),
        "{}",
        sandbox.workspace().display()
    );
    let ws = sandbox.workspace().to_path_buf();
    let out = sandbox
        .run(JobSpec::shell(
            "mkdir -p a/b && echo x > a/b/f && chmod 0 a/b a",
        ))
        .await
        .unwrap();
    assert_eq!(out.status, JobStatus::Completed, "{out:?}");
    drop(sandbox);
    assert!(!ws.exists(), "the workspace outlived its sandbox");
}

#[test]
fn over_http_a_full_node_answers_problems_with_retry_after() {
    let s = Server::start(&[
        "--max-instances",
        "4",
        "--max-concurrent",
        "3",
        "--max-sessions",
        "10",
    ]);
    for i in 0..3 {
        let create =
            json!({"version": 1, "task_id": "t", "session_id": format!("s{i}"), "image": "bash"});
        assert_eq!(s.post("/v1/worker/sessions", &create).status, 200);
    }
    let open = |i: usize| {
        s.post(
            &format!("/v1/worker/sessions/s{i}/pty:open"),
            &json!({"version": 1, "task_id": "t", "session_id": format!("s{i}")}),
        )
    };
    // Two of the four places may hold shells; two are kept for jobs.
    assert_eq!(open(0).status, 200);
    assert_eq!(open(1).status, 200);
    let r = open(2);
    assert!(retry_later(&r, 503).contains("live sandbox processes"));
    // A job beside the shells runs.
    let job = |id: &str, cmd: serde_json::Value| {
        json!({"version": 1, "task_id": "t", "job_id": id,
               "sandbox": {"image": "alpine:latest", "command": cmd}})
    };
    let r = s.post("/v1/worker/jobs:run", &job("j1", json!(["echo", "hi"])));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["stdout"], "hi\n");
    // A job holding both places (sh and its sleep): the next one waits, then gets 429.
    let addr = s.addr;
    let long = std::thread::spawn(move || {
        let body =
            serde_json::to_vec(&job("j2", json!(["sh", "-c", "sleep 7; echo done"]))).unwrap();
        crate::support::http::request(
            addr,
            "POST",
            "/v1/worker/jobs:run",
            &[(
                "Authorization",
                &format!("Bearer {}", crate::support::http::TOKEN),
            )],
            &body,
        )
    });
    std::thread::sleep(Duration::from_millis(800));
    let started = std::time::Instant::now();
    let r = s.post(
        "/v1/worker/jobs:run",
        &json!({"version": 1, "task_id": "t", "job_id": "j3",
                "sandbox": {"image": "alpine:latest", "command": ["true"]}}),
    );
    assert_eq!(r.status, 429, "{}", r.text());
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "it did not wait"
    );
    let done = long.join().unwrap();
    assert_eq!(done.json()["stdout"], "done\n", "{}", done.text());
    // With the places back, the refused job runs when retried.
    let r = s.post(
        "/v1/worker/jobs:run",
        &json!({"version": 1, "task_id": "t", "job_id": "j3",
                "sandbox": {"image": "alpine:latest", "command": ["true"]}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
}

/// A shell that is admitted but cannot get its instance (here: the process's address space
/// is used up, past counts an operator set too high) is a refusal of `pty:open`, never a 200
/// for a shell that is already dead; the shells before it and a job beside still work.
#[test]
fn a_shell_that_cannot_start_is_refused_not_answered_dead() {
    use wasbox_runtime::capacity::{ADDRESS_SPACE_PER_INSTANCE, COMPACT_ADDRESS_SPACE};
    let session = |s: &Server, i: usize| {
        let id = format!("s{i}");
        let create = json!({"version": 1, "task_id": "t", "session_id": id, "image": "bash"});
        assert_eq!(s.post("/v1/worker/sessions", &create).status, 200);
        s.post(
            &format!("/v1/worker/sessions/{id}/pty:open"),
            &json!({"version": 1, "task_id": "t", "session_id": id}),
        )
    };
    // What a node with one shell maps, measured on a node without a limit (its shell
    // reserves 4 GiB). The limited node has too little address space for any 4 GiB
    // reservation, so its shells get compact memories: it has room for the node, three
    // compact shells, and 2 GiB for everything else.
    let used = {
        let s = Server::start(&[]);
        assert_eq!(session(&s, 0).status, 200);
        s.address_space_used()
    };
    // The counts are set above what this address space holds (by default the node would
    // size them from the limit and refuse earlier, with a 429).
    let s = Server::start_in_address_space(
        &["--max-instances", "64", "--max-sessions", "20"],
        used - ADDRESS_SPACE_PER_INSTANCE + 3 * COMPACT_ADDRESS_SPACE + (2 << 30),
    );
    let mut opened = Vec::new();
    let mut refusal = None;
    for i in 0..12 {
        let r = session(&s, i);
        if r.status != 200 {
            refusal = Some(r);
            break;
        }
        opened.push((i, r.json()["pty_id"].as_str().unwrap().to_string()));
    }
    let r = refusal.expect("twelve compact shells fit in the limit");
    assert!((3..=8).contains(&opened.len()), "{} shells", opened.len());
    let detail = retry_later(&r, 503);
    assert!(detail.contains("cannot start the program"), "{detail}");
    // Every shell that was answered 200 is alive and answers.
    for (i, pty) in &opened {
        let path = format!("/v1/worker/sessions/s{i}");
        let data = base64::engine::general_purpose::STANDARD.encode("echo alive$((40+2))\n");
        let sent = s.post(
            &format!("{path}/pty:send"),
            &json!({"version": 1, "task_id": "t", "pty_id": pty, "data_b64": data}),
        );
        assert_eq!(sent.status, 200, "{}", sent.text());
        let mut seen = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !String::from_utf8_lossy(&seen).contains("alive42") {
            assert!(
                std::time::Instant::now() < deadline,
                "shell s{i} did not answer"
            );
            let out = s
                .get(&format!(
                    "{path}/pty:recv?version=1&task_id=t&pty_id={pty}&wait_ms=500"
                ))
                .json();
            assert_ne!(out["exited"], true, "shell s{i} is dead");
            let chunk = out["data_b64"].as_str().unwrap_or_default();
            seen.extend(
                base64::engine::general_purpose::STANDARD
                    .decode(chunk)
                    .unwrap(),
            );
        }
    }
    // The refused shell's PTY is gone, and a job beside the shells runs.
    let r = s.post(
        "/v1/worker/jobs:run",
        &json!({"version": 1, "task_id": "t", "job_id": "beside",
                "sandbox": {"image": "alpine:latest", "command": ["sh", "-c", "echo beside"]}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["stdout"], "beside\n");
}

/// A node's memory budget (`--node-memory-mib`) bounds its idle shells too, and they leave
/// the memory jobs need to start: past it `pty:open` answers a problem naming the budget,
/// and a job beside the shells still runs.
#[test]
fn the_memory_budget_refuses_shells_and_keeps_room_for_jobs() {
    // 64 MiB, two places kept for jobs: shells may use the budget until 48 MiB are left.
    let s = Server::start(&[
        "--node-memory-mib",
        "64",
        "--max-concurrent",
        "2",
        "--max-sessions",
        "100",
    ]);
    let mut refused = None;
    for i in 0..100 {
        let id = format!("s{i}");
        let create = json!({"version": 1, "task_id": "t", "session_id": id, "image": "bash"});
        assert_eq!(s.post("/v1/worker/sessions", &create).status, 200);
        let r = s.post(
            &format!("/v1/worker/sessions/{id}/pty:open"),
            &json!({"version": 1, "task_id": "t", "session_id": id}),
        );
        if r.status != 200 {
            refused = Some((i, r));
            break;
        }
    }
    let (shells, r) = refused.expect("64 MiB held 100 shells");
    assert!(shells >= 1, "not even one shell fit");
    let detail = retry_later(&r, 503);
    assert!(detail.contains("memory budget"), "{detail}");
    assert!(detail.contains("of 64 MiB"), "{detail}");
    let r = s.post(
        "/v1/worker/jobs:run",
        &json!({"version": 1, "task_id": "t", "job_id": "beside",
                "sandbox": {"image": "alpine:latest", "command": ["sh", "-c", "echo beside"]}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["stdout"], "beside\n", "{}", r.text());
}

/// The detail of `r`, checked to be a problem with `status` that says to retry in a second.
fn retry_later(r: &Reply, status: u16) -> String {
    assert_eq!(r.status, status, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    assert_eq!(r.header("retry-after"), Some("1"));
    r.json()["detail"].as_str().unwrap().to_string()
}

/// Linear memory the node's sandbox processes hold, from its metrics.
fn memory_held(s: &Server) -> u64 {
    let text = s.get("/metrics").text();
    text.lines()
        .find_map(|l| l.strip_prefix("wasbox_sandbox_memory_bytes "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u64)
        .unwrap_or_else(|| panic!("no memory gauge in {text}"))
}

/// Starts a `python3` that sleeps `secs` as a submitted job; returns once its memory is held.
fn python_holding_memory(s: &Server, job_id: &str, secs: u32) -> u64 {
    let r = s.post(
        "/v1/worker/jobs:submit",
        &json!({"version": 1, "task_id": "t", "job_id": job_id, "sandbox": {"image": "alpine:latest",
                "command": ["python3", "-c", format!("import time; time.sleep({secs})")]}}),
    );
    assert_eq!(r.status, 202, "{}", r.text());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let held = memory_held(s);
        if held > 0 {
            return held;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the python job never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A job admitted (the node had its headroom free) whose program needs more memory than
/// the other sandboxes left waits for them like a job waiting for a place, then runs or is
/// refused with 429: it is never failed by their load. A program that needs more than the
/// node's whole budget fails as a job at once, with the reason (no retry would help).
#[test]
fn a_job_without_room_to_start_waits_then_runs_or_is_refused() {
    let python = |job_id: &str| {
        json!({"version": 1, "task_id": "t", "job_id": job_id,
               "sandbox": {"image": "alpine:latest", "command": ["python3", "-c", "print(6*7)"]}})
    };
    // What one python3 holds once started, on a node without a tight budget.
    let held = {
        let s = Server::start(&[]);
        python_holding_memory(&s, "measure", 30)
    };
    let held_mib = held >> 20;
    assert!(held_mib > 17, "python3 holds only {held_mib} MiB");
    // A budget that leaves, beside one such python3, more than the headroom a job needs to
    // be admitted (16 MiB) but less than a second python3 needs to start.
    let free_mib = (16 + held_mib) / 2;
    let budget = (held_mib + free_mib).to_string();
    let s = Server::start(&["--node-memory-mib", &budget]);
    python_holding_memory(&s, "hog", 60);
    let session =
        json!({"version": 1, "task_id": "t", "session_id": "s", "image": "alpine:latest"});
    assert_eq!(s.post("/v1/worker/sessions", &session).status, 200);
    let e2b = crate::e2b::create(&s);
    let began = std::time::Instant::now();
    std::thread::scope(|scope| {
        // While it waits, the same job asked again waits with it and is refused with it
        // (its id is free again), not answered with a server error.
        let twin = scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            s.post("/v1/worker/jobs:run", &python("refused"))
        });
        // A session's command and an E2B process wait, and are refused, the same way.
        let exec = scope.spawn(|| {
            s.post(
                "/v1/worker/sessions/s/exec",
                &json!({"version": 1, "command": ["python3", "-c", "print(6*7)"]}),
            )
        });
        let process = scope.spawn(|| {
            let start = json!({"process": {"cmd": "python3", "args": ["-c", "print(6*7)"]}});
            crate::e2b::stream(&s, &e2b, "/process.Process/Start", &start, &[])
        });
        let r = s.post("/v1/worker/jobs:run", &python("refused"));
        let detail = retry_later(&r, 429);
        assert!(detail.contains("memory budget"), "{detail}");
        assert!(detail.contains("python3"), "{detail}");
        assert!(
            began.elapsed() >= Duration::from_secs(4),
            "refused without waiting for room: {:?}",
            began.elapsed()
        );
        let detail = retry_later(&twin.join().unwrap(), 429);
        assert!(detail.contains("retry"), "{detail}");
        let detail = retry_later(&exec.join().unwrap(), 429);
        assert!(detail.contains("memory budget"), "{detail}");
        let msgs = process.join().unwrap();
        assert_eq!(msgs.len(), 1, "{msgs:?}");
        let error = &msgs[0].1["error"];
        assert_eq!(error["code"], "resource_exhausted", "{msgs:?}");
        assert!(
            error["message"].as_str().unwrap().contains("memory budget"),
            "{msgs:?}"
        );
    });
    // Nothing of the refused job was kept: its id runs when retried. Retried while the
    // memory comes back during its wait, it runs; so does a program its shell starts,
    // which waits for room like the job's first one.
    std::thread::scope(|scope| {
        let retry = scope.spawn(|| s.post("/v1/worker/jobs:run", &python("refused")));
        let child = scope.spawn(|| {
            s.post(
                "/v1/worker/jobs:run",
                &json!({"version": 1, "task_id": "t", "job_id": "child",
                        "sandbox": {"image": "alpine:latest",
                                    "command": ["sh", "-c", "python3 -c 'print(6*7)' && echo done"]}}),
            )
        });
        std::thread::sleep(Duration::from_millis(1000));
        let stop = json!({"version": 1, "task_id": "t", "job_id": "hog"});
        assert_eq!(
            s.post("/v1/worker/jobs:stop", &stop).json()["status"],
            "stopping"
        );
        for (r, stdout) in [
            (retry.join().unwrap(), "42\n"),
            (child.join().unwrap(), "42\ndone\n"),
        ] {
            assert_eq!(r.status, 200, "{}", r.text());
            assert_eq!(r.json()["status"], "completed", "{}", r.text());
            assert_eq!(r.json()["stdout"], stdout, "{}", r.text());
        }
    });
    // More than the whole budget: a failed job with the reason, answered at once.
    let small = Server::start(&["--node-memory-mib", "16"]);
    let r = small.post("/v1/worker/jobs:run", &python("too-big"));
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["status"], "failed", "{v}");
    assert!(
        v["stderr"]
            .as_str()
            .unwrap()
            .contains("more than the node's whole memory budget of 16 MiB"),
        "{v}"
    );
}

/// A command an agent starts (here bouvet's `exec`), and the agent's own instance, wait for
/// room other sandboxes hold like a job's program, instead of failing for their load.
#[tokio::test]
async fn an_agent_and_its_commands_wait_for_room_others_hold() {
    use wasbox_runtime::StopSignal;
    use wasbox_runtime::agent::bouvet::{BouvetInstance, builtin_agent};
    use wasbox_runtime::io::OutputSink;
    let runtime = |budget: Option<usize>| {
        let mut b = Runtime::builder().cache_dir(cache_dir());
        if let Some(bytes) = budget {
            b = b.node_memory_bytes(bytes);
        }
        b.build().unwrap()
    };
    let python =
        |secs: u32| JobSpec::new(["python3", "-c", &format!("import time; time.sleep({secs})")]);
    // What a sleeping python3 holds (its memory is held before it sleeps).
    let held = async |rt: &Runtime| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while rt.memory_in_use().0 == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "python3 never started"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        rt.memory_in_use().0
    };
    // A job that holds its room until stopped.
    let hold = |rt: &Runtime, spec: JobSpec| {
        let sandbox = rt.sandbox(Default::default()).unwrap();
        let stop = StopSignal::new();
        let spec = spec.stop_signal(stop.clone());
        (stop, tokio::spawn(async move { sandbox.run(spec).await }))
    };
    let bouvet = async |rt: &Runtime| {
        let agent = rt.bouvet_agent("bouvet", builtin_agent()).await.unwrap();
        BouvetInstance::new(
            agent,
            rt.sandbox(Default::default()).unwrap(),
            OutputSink::Null,
            Duration::from_secs(20),
        )
    };
    // Gives the room back a second from now.
    let release = async |stop: &StopSignal| {
        tokio::time::sleep(Duration::from_secs(1)).await;
        stop.stop();
    };
    let measure = runtime(None);
    let (stop, hog) = hold(&measure, python(30));
    let python_bytes = held(&measure).await;
    stop.stop();
    hog.await.unwrap().unwrap();
    // Beside one python3 there is less than a second one needs, with the agent running.
    let rt = runtime(Some(python_bytes + (20 << 20)));
    let (stop, hog) = hold(&rt, python(60));
    held(&rt).await;
    let mut instance = bouvet(&rt).await;
    instance.ping().await.unwrap();
    let began = std::time::Instant::now();
    let (out, ()) = tokio::join!(instance.exec("python3 -c 'print(6*7)'"), release(&stop));
    let out = out.unwrap();
    assert_eq!(
        (out.exit_code, out.stdout.as_str()),
        (0, "42\n"),
        "{}",
        out.stderr
    );
    assert!(began.elapsed() >= Duration::from_secs(1));
    hog.await.unwrap().unwrap();

    // The agent's own instance waits for a place the same way.
    let rt = Runtime::builder()
        .cache_dir(cache_dir())
        .max_instances(1)
        .build()
        .unwrap();
    let (stop, hog) = hold(&rt, JobSpec::new(["sleep", "30"]));
    while rt.instances_in_use().0 == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut instance = bouvet(&rt).await;
    let began = std::time::Instant::now();
    let (pinged, ()) = tokio::join!(instance.ping(), release(&stop));
    pinged.unwrap();
    assert!(began.elapsed() >= Duration::from_secs(1));
    hog.await.unwrap().unwrap();
}

#[tokio::test]
async fn children_spawned_as_their_job_ends_do_not_outlive_it() {
    // A background loop keeps starting long sleeps while the job's first process exits:
    // each spawn either is seen and ended with the job, or is refused; none keeps running
    // (and holding a place of the node) after the job's answer.
    let runtime = Runtime::builder()
        .cache_dir(cache_dir())
        .max_instances(640)
        .build()
        .unwrap();
    runtime.preload().await.unwrap();
    let sandbox = runtime.sandbox(Default::default()).unwrap();
    for round in 0..20 {
        let spec =
            JobSpec::shell("sh -c 'while :; do sleep 30 & done' >/dev/null 2>&1 & sleep 0.0$((RANDOM % 9)); exit 0")
                .timeout(Duration::from_secs(120));
        let out = sandbox.run(spec).await.unwrap();
        let mut lines: Vec<&str> = out.stderr.lines().collect();
        lines.dedup();
        assert_eq!(
            out.status,
            JobStatus::Completed,
            "round {round}: {:?} {lines:?}",
            out.status
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while runtime.instances_in_use().0 > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "round {round}: {} processes outlived their job",
                runtime.instances_in_use().0
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[tokio::test]
async fn a_large_workspace_on_disk_is_served_off_the_async_threads() {
    // On a disk, the guest's file I/O and the removal of a large workspace go to the
    // blocking pool; what the guest sees is the same.
    let disk = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let runtime = Runtime::builder()
        .cache_dir(cache_dir())
        .temp_dir(disk.path())
        .build()
        .unwrap();
    runtime.preload().await.unwrap();
    let sandbox = runtime.sandbox(Default::default()).unwrap();
    let workspace = sandbox.workspace().to_path_buf();
    assert!(workspace.starts_with(disk.path()));
    let out = sandbox
        .run(JobSpec::shell(
            "mkdir d && cd d && seq 1 600 | xargs touch && ls | wc -l && echo hi > /tmp/t && cat /tmp/t",
        ))
        .await
        .unwrap();
    assert_eq!(
        out.stdout.split_whitespace().collect::<Vec<_>>(),
        ["600", "hi"],
        "{out:?}"
    );
    sandbox
        .write_file_async("f.txt", bytes::Bytes::from_static(b"data"))
        .await
        .unwrap();
    assert_eq!(
        sandbox.read_file_async("f.txt", 100).await.unwrap(),
        b"data"
    );
    drop(sandbox);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while workspace.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the workspace was not removed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        std::fs::read_dir(disk.path()).unwrap().count(),
        0,
        "leftovers"
    );
}

/// An idle sandbox holds no descriptor: its workspace and `/tmp` are open only while in use
/// (closed about two seconds after), so a node's open-file limit does not bound its live
/// sandboxes. Each sandbox still has its own workspace and `/tmp`, kept between processes.
#[test]
fn an_idle_sandbox_holds_no_descriptor_and_keeps_its_files() {
    const N: usize = 40;
    let s = Server::start(&["--max-sessions", "64"]);
    let fds = || {
        std::fs::read_dir(format!("/proc/{}/fd", s.child.id()))
            .unwrap()
            .count()
    };
    let session = |i: usize| {
        let id = format!("s{i}");
        let create = json!({"version": 1, "task_id": "t", "session_id": id, "image": "bash"});
        assert_eq!(s.post("/v1/worker/sessions", &create).status, 200);
        let open = json!({"version": 1, "task_id": "t", "session_id": id});
        let r = s.post(&format!("/v1/worker/sessions/{id}/pty:open"), &open);
        assert_eq!(r.status, 200, "{}", r.text());
    };
    let exec = |i: usize, script: &str| {
        let body = json!({"version": 1, "task_id": "t", "command": ["sh", "-c", script]});
        let r = s.post(&format!("/v1/worker/sessions/s{i}/exec"), &body);
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()
    };
    // The first sandbox makes what the node shares (the image's tree, the `/tmp` placeholder).
    session(N);
    exec(N, "echo warm > /tmp/mark");
    let before = fds();
    for i in 0..N {
        session(i);
        let v = exec(
            i,
            &format!("mkdir -p /tmp/d && echo {i} > /tmp/d/mark && echo {i} > w && ls /tmp"),
        );
        assert_eq!(v["stdout"], "d\n", "{v}");
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let grown = fds().saturating_sub(before);
        if grown <= 4 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{N} idle sandboxes with shells hold {grown} more descriptors"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for i in 0..N {
        let v = exec(
            i,
            "cat /tmp/d/mark w; ls -d /tmp; cd /tmp/d && pwd && ls ../.. | grep -c .",
        );
        assert_eq!(v["stdout"], format!("{i}\n{i}\n/tmp\n/tmp/d\n10\n"), "{v}");
    }
}

/// `--vm-max-map-count` sizes the node for the raised limit (each live process holds about
/// seven memory mappings); `--print-config` shows both without changing the machine.
#[test]
fn the_memory_mapping_limit_sizes_the_node() {
    use crate::support::runtime::{run_bounded, text, wasbox};
    let shown = |extra: &[&str]| {
        let mut cmd = wasbox();
        cmd.args(["serve", "--print-config", "--token", "x"])
            .args(extra);
        let out = run_bounded(cmd, Duration::from_secs(30));
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let field = |shown: &str, key: &str| -> String {
        shown
            .lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
            .unwrap_or_else(|| panic!("no {key} in {shown}"))
            .to_string()
    };
    let before = std::fs::read_to_string("/proc/sys/vm/max_map_count").unwrap();
    let plain = shown(&[]);
    let raised = shown(&["--vm-max-map-count", "1000000", "--node-memory-mib", "4096"]);
    assert_eq!(field(&plain, "vm_max_map_count"), "null");
    assert_eq!(field(&raised, "vm_max_map_count"), "1000000");
    assert_eq!(field(&plain, "node_memory_mib"), "null");
    assert_eq!(field(&raised, "node_memory_mib"), "4096");
    let instances = |s: &str| field(s, "max_instances").parse::<usize>().unwrap();
    assert!(instances(&raised) >= instances(&plain), "{raised}");
    // With the usual limit, seven mappings per process bound the node.
    let maps: usize = before.trim().parse().unwrap();
    assert!(
        instances(&plain) <= maps.saturating_sub(8192) / 7 + 1,
        "{plain}"
    );
    assert_eq!(
        std::fs::read_to_string("/proc/sys/vm/max_map_count").unwrap(),
        before,
        "printing the configuration changed the machine"
    );
}
