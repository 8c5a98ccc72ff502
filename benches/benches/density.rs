//! End-to-end density driver: one `wasbox serve` (release build, default configuration) on
//! 127.0.0.1 holding N sessions, each with an interactive `sh` on a PTY that answered
//! `echo`, then a `jobs:run` beside them. Reports the server's resident memory, open files
//! and memory mappings per session, and how long opening them took.
//!
//! `cargo bench -p wasbox-benches --bench density` (10,000 sessions;
//! `WASBOX_DENSITY_SESSIONS=N` for another count; `WASBOX_DENSITY_ARGS="--vm-max-map-count
//! 262144"` adds flags to `wasbox serve`: that one raises the machine's limit of memory
//! mappings, which 10,000 shells need). Loopback only; every request is checked, and the run
//! stops at the first refusal with the server's answer.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use wasbox_benches::{Conn, TOKEN, release_wasbox};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A number from a `/proc/PID/status` line (`VmRSS:  1234 kB`).
fn status_kib(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn count_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

fn count_maps(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap()
        .lines()
        .count()
}

/// Opens session `i` with a shell on a PTY and waits until it answers `echo`.
async fn open_session(c: &mut Conn, i: usize) -> Result<(), String> {
    let id = format!("dens-{i}");
    let create =
        format!(r#"{{"version":1,"task_id":"bench","session_id":"{id}","image":"alpine:latest"}}"#);
    let (s, b) = c.call("POST", "/v1/worker/sessions", &create).await;
    if s != 200 {
        return Err(format!("session {i}: {s} {}", String::from_utf8_lossy(&b)));
    }
    let open = format!(r#"{{"version":1,"task_id":"bench","session_id":"{id}"}}"#);
    let (s, b) = c
        .call("POST", &format!("/v1/worker/sessions/{id}/pty:open"), &open)
        .await;
    if s != 200 {
        return Err(format!("pty:open {i}: {s} {}", String::from_utf8_lossy(&b)));
    }
    let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
    let pty = v["pty_id"].as_str().unwrap().to_string();
    let want = format!("ok-{i}");
    let send = format!(
        r#"{{"version":1,"task_id":"bench","session_id":"{id}","pty_id":"{pty}","data_b64":"{}"}}"#,
        b64(format!("echo ok-$((1000000+{i}-1000000))\n").as_bytes())
    );
    let (s, b) = c
        .call("POST", &format!("/v1/worker/sessions/{id}/pty:send"), &send)
        .await;
    if s != 200 {
        return Err(format!("pty:send {i}: {s} {}", String::from_utf8_lossy(&b)));
    }
    // The answer, not the echoed command line (which holds `$((` instead of the digits).
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !seen.contains(&want) {
        if Instant::now() > deadline {
            return Err(format!("shell {i} never answered; it wrote {seen:?}"));
        }
        let path = format!(
            "/v1/worker/sessions/{id}/pty:recv?version=1&task_id=bench&pty_id={pty}&wait_ms=1000"
        );
        let (s, b) = c.call("GET", &path, "").await;
        if s != 200 {
            return Err(format!("pty:recv {i}: {s} {}", String::from_utf8_lossy(&b)));
        }
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(v["data_b64"].as_str().unwrap_or(""))
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&bytes));
    }
    Ok(())
}

fn main() {
    let n: usize = std::env::var("WASBOX_DENSITY_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let bin = release_wasbox();
    let state = tempfile::tempdir().expect("state dir");
    let extra = std::env::var("WASBOX_DENSITY_ARGS").unwrap_or_default();
    let mut server = Command::new(&bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--token", TOKEN])
        .args(extra.split_whitespace())
        .env("WASBOX_STORAGE_STATE_DIR", state.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start wasbox serve");
    let pid = server.id();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line.trim().rsplit("http://").next().unwrap().to_string();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let result = rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut c = Conn::connect(&addr).await;
        while c.call("GET", "/readyz", "").await.0 != 200 {
            assert!(Instant::now() < deadline, "server never became ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (_, stats) = c.call("GET", "/v1/worker/telemetry/node:stats", "").await;
        let stats: serde_json::Value = serde_json::from_slice(&stats).unwrap_or_default();
        // One session first, so that what every session shares exists before measuring.
        open_session(&mut c, n).await.expect("the first session");
        let (rss0, fds0, maps0) = (status_kib(pid, "VmRSS:"), count_fds(pid), count_maps(pid));
        let started = Instant::now();
        let mut live = 0;
        let mut stopped = None;
        for i in 0..n {
            if let Err(e) = open_session(&mut c, i).await {
                stopped = Some(e);
                break;
            }
            live += 1;
            if live % 1000 == 0 {
                eprintln!("density: {live} sessions in {:.1?}", started.elapsed());
            }
        }
        let took = started.elapsed();
        let (rss1, fds1, maps1) = (status_kib(pid, "VmRSS:"), count_fds(pid), count_maps(pid));
        // A sandbox's directories are closed about two seconds after their last use: what an
        // idle node holds is counted once they have been.
        tokio::time::sleep(Duration::from_secs(4)).await;
        let fds_idle = count_fds(pid);
        let job = r#"{"version":1,"task_id":"bench","job_id":"beside","sandbox":{"image":"alpine:latest","command":["sh","-c","echo beside"]}}"#;
        let (js, jb) = c.call("POST", "/v1/worker/jobs:run", job).await;
        let beside = js == 200 && String::from_utf8_lossy(&jb).contains(r#""stdout":"beside\n""#);
        // How many live processes have 4 GiB reservations and how many compact memories.
        let (_, metrics) = c.call("GET", "/metrics", "").await;
        let instances: Vec<String> = String::from_utf8_lossy(&metrics)
            .lines()
            .filter(|l| l.starts_with("wasbox_instances_"))
            .map(str::to_string)
            .collect();
        let per = |a: u64, b: u64| (b.saturating_sub(a)) as f64 / live.max(1) as f64;
        println!("\ndensity over HTTP: one `wasbox serve` with flags [{extra}]");
        println!("node:stats before: {}", serde_json::to_string(&stats).unwrap_or_default());
        println!("sessions with a shell that answered echo: {live} of {n} asked");
        if let Some(e) = &stopped {
            println!("stopped: {e}");
        }
        println!(
            "opening them took {:.1?} ({:.0} us per session: create, pty:open, send, recv)",
            took,
            took.as_secs_f64() * 1e6 / live.max(1) as f64
        );
        println!(
            "server resident memory: {} -> {} KiB, {:.1} KiB per session",
            rss0,
            rss1,
            per(rss0, rss1)
        );
        println!(
            "open files: {fds0} -> {fds1} just after ({:.2} per session), {fds_idle} after 4 s idle ({:.2} per session); memory mappings: {maps0} -> {maps1} ({:.2} per session)",
            per(fds0 as u64, fds1 as u64),
            per(fds0 as u64, fds_idle as u64),
            per(maps0 as u64, maps1 as u64)
        );
        println!("{}", instances.join(", "));
        println!(
            "jobs:run beside them: {js} {}",
            if beside { "(answered)" } else { "(FAILED)" }
        );
        beside && stopped.is_none()
    });
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        result,
        "the density run did not reach its count or the job failed"
    );
}
