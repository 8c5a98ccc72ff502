//! End-to-end driver for the worker API: starts the real `wasbox serve` (release build) on
//! 127.0.0.1, sends `sh -c 'echo hello'` jobs over keep-alive HTTP connections, and spawns
//! the same command natively in the same run as the baseline.
//!
//! `cargo bench -p wasbox-benches --bench worker` (builds `wasbox` in release mode first).
//! `WASBOX_BENCH_BASELINE=/path/to/other/wasbox` measures another build beside this one,
//! alternating them twice, e.g. to check that a change keeps the numbers.
//! Every phase is bounded in requests and time; only loopback is used.

use std::io::{BufRead, BufReader as StdBufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use wasbox_benches::{Conn, TOKEN, percentile, release_wasbox};

const SEQUENTIAL: usize = 2000;
const PHASE: Duration = Duration::from_secs(3);
const PHASE_MAX_REQUESTS: u64 = 50_000;

/// Forks of 100 sessions measured.
const FORK_ROUNDS: usize = 7;
/// Sessions created from the template.
const TEMPLATE_SESSIONS: usize = 50;

fn job_body(n: u64) -> String {
    format!(
        r#"{{"version":1,"task_id":"bench","job_id":"job-{n}","sandbox":{{"image":"alpine:latest","command":["sh","-c","echo hello"]}}}}"#
    )
}

/// Every answer is checked: a fast wrong answer must not count.
fn check_exit(status: u16, body: &[u8]) {
    let text = String::from_utf8_lossy(body);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(r#""exit_code":0"#), "{text}");
}

fn check(status: u16, body: &[u8]) {
    let text = String::from_utf8_lossy(body);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(r#""stdout":"hello\n""#), "{text}");
}

fn us(d: Duration) -> String {
    format!("{:.0} us", d.as_secs_f64() * 1e6)
}

struct Row {
    name: String,
    p50: Duration,
    p99: Duration,
    per_sec: f64,
}

fn print(rows: &[Row]) {
    println!(
        "\n{:<46} {:>10} {:>10} {:>12}",
        "phase", "p50", "p99", "per second"
    );
    for r in rows {
        println!(
            "{:<46} {:>10} {:>10} {:>12.0}",
            r.name,
            us(r.p50),
            us(r.p99),
            r.per_sec
        );
    }
}

/// Starts `bin serve` and measures jobs and session execs against it.
fn measure_server(rt: &tokio::runtime::Runtime, bin: &std::path::Path, label: &str) -> Vec<Row> {
    // Its telemetry store in a directory of its own (by environment variable, which a
    // baseline binary without a store ignores).
    let state = tempfile::tempdir().expect("state dir");
    let mut server = Command::new(bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--token", TOKEN])
        .env("WASBOX_STORAGE_STATE_DIR", state.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start wasbox serve");
    let mut line = String::new();
    StdBufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line.trim().rsplit("http://").next().unwrap().to_string();

    let rows = rt.block_on(async {
        // Ready (the image is loaded) before measuring.
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let mut c = Conn::connect(&addr).await;
            if c.call("GET", "/readyz", "").await.0 == 200 {
                break;
            }
            assert!(Instant::now() < deadline, "server never became ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let counter = Arc::new(AtomicU64::new(0));
        let label = label.to_string();
        let mut rows = Vec::new();

        // Warm-up, then sequential latency on one connection.
        let mut c = Conn::connect(&addr).await;
        for _ in 0..200 {
            let n = counter.fetch_add(1, Ordering::Relaxed);
            let (s, b) = c.call("POST", "/v1/worker/jobs:run", &job_body(n)).await;
            check(s, &b);
        }
        let mut lat = Vec::with_capacity(SEQUENTIAL);
        let started = Instant::now();
        for _ in 0..SEQUENTIAL {
            let n = counter.fetch_add(1, Ordering::Relaxed);
            let t = Instant::now();
            let (s, b) = c.call("POST", "/v1/worker/jobs:run", &job_body(n)).await;
            lat.push(t.elapsed());
            check(s, &b);
        }
        let elapsed = started.elapsed();
        lat.sort();
        rows.push(Row {
            name: format!("{label} jobs:run, sequential"),
            p50: percentile(&lat, 0.5),
            p99: percentile(&lat, 0.99),
            per_sec: SEQUENTIAL as f64 / elapsed.as_secs_f64(),
        });

        for clients in [1usize, 8, 16, 64] {
            let started = Instant::now();
            let mut tasks = Vec::new();
            for _ in 0..clients {
                let addr = addr.clone();
                let counter = counter.clone();
                tasks.push(tokio::spawn(async move {
                    let mut c = Conn::connect(&addr).await;
                    let mut lat = Vec::new();
                    while started.elapsed() < PHASE
                        && (lat.len() as u64) < PHASE_MAX_REQUESTS / clients as u64
                    {
                        let n = counter.fetch_add(1, Ordering::Relaxed);
                        let t = Instant::now();
                        let (s, b) = c.call("POST", "/v1/worker/jobs:run", &job_body(n)).await;
                        lat.push(t.elapsed());
                        check(s, &b);
                    }
                    lat
                }));
            }
            let mut lat = Vec::new();
            for t in tasks {
                lat.extend(t.await.unwrap());
            }
            let elapsed = started.elapsed();
            lat.sort();
            rows.push(Row {
                name: format!("{label} jobs:run, {clients} concurrent clients"),
                p50: percentile(&lat, 0.5),
                p99: percentile(&lat, 0.99),
                per_sec: lat.len() as f64 / elapsed.as_secs_f64(),
            });
        }

        // Session exec round trip.
        let (s, b) = c
            .call(
                "POST",
                "/v1/worker/sessions",
                r#"{"version":1,"task_id":"bench","session_id":"bench-session","image":"alpine"}"#,
            )
            .await;
        assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
        let exec = r#"{"version":1,"command":["sh","-c","echo hello"]}"#;
        for _ in 0..200 {
            let (s, b) = c
                .call("POST", "/v1/worker/sessions/bench-session/exec", exec)
                .await;
            check(s, &b);
        }
        let mut lat = Vec::with_capacity(SEQUENTIAL);
        let started = Instant::now();
        for _ in 0..SEQUENTIAL {
            let t = Instant::now();
            let (s, b) = c
                .call("POST", "/v1/worker/sessions/bench-session/exec", exec)
                .await;
            lat.push(t.elapsed());
            check(s, &b);
        }
        let elapsed = started.elapsed();
        lat.sort();
        rows.push(Row {
            name: format!("{label} session exec, sequential"),
            p50: percentile(&lat, 0.5),
            p99: percentile(&lat, 0.99),
            per_sec: SEQUENTIAL as f64 / elapsed.as_secs_f64(),
        });

        if let Some(row) = wrk_jobs(&addr, &label, false) {
            rows.push(row);
        }
        if let Some(row) = wrk_jobs(&addr, &label, true) {
            rows.push(row);
        }

        // Fork of a session holding 1,000 files (50 MiB) into 100 sessions, over HTTP;
        // then one command in every copy (their directories are filled when reached).
        let fill = r#"{"version":1,"command":["sh","-c","for d in $(seq 0 19); do mkdir d$d; done; i=0; while [ $i -lt 1000 ]; do head -c 51200 /dev/zero > d$((i % 20))/f$i; i=$((i+1)); done"]}"#;
        let (s, b) = c
            .call("POST", "/v1/worker/sessions/bench-session/exec", fill)
            .await;
        check_exit(s, &b);
        let (mut forks, mut used) = (Vec::new(), Vec::new());
        for _ in 0..FORK_ROUNDS {
            let t = Instant::now();
            let (s, b) = c
                .call(
                    "POST",
                    "/v1/worker/sessions/bench-session:fork",
                    r#"{"version":1,"count":100}"#,
                )
                .await;
            forks.push(t.elapsed());
            assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
            let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
            let ids: Vec<String> = v["session_ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i.as_str().unwrap().to_string())
                .collect();
            let cat = r#"{"version":1,"command":["wc","-c","d7/f7"]}"#;
            let t = Instant::now();
            for id in &ids {
                let (s, b) = c
                    .call("POST", &format!("/v1/worker/sessions/{id}/exec"), cat)
                    .await;
                check_exit(s, &b);
            }
            used.push(t.elapsed());
            for id in &ids {
                let (s, b) = c
                    .call("POST", &format!("/v1/worker/sessions/{id}/end"), r#"{"version":1}"#)
                    .await;
                assert!(s < 300, "{}", String::from_utf8_lossy(&b));
            }
        }
        forks.sort();
        used.sort();
        rows.push(Row {
            name: format!("{label} :fork count=100 (1,000 files)"),
            p50: percentile(&forks, 0.5),
            p99: percentile(&forks, 0.99),
            per_sec: 100.0 / percentile(&forks, 0.5).as_secs_f64(),
        });
        rows.push(Row {
            name: format!("{label} then a wc in each of the 100"),
            p50: percentile(&used, 0.5),
            p99: percentile(&used, 0.99),
            per_sec: 100.0 / percentile(&used, 0.5).as_secs_f64(),
        });

        // The same 1,000 files as a template (`wasbox template build`, from the session's
        // snapshot), then sessions created from it by name, one at a time.
        let (s, tar) = c
            .call(
                "POST",
                "/v1/worker/sessions/bench-session:snapshot?download=1",
                r#"{"version":1}"#,
            )
            .await;
        assert_eq!(s, 200, "{}", String::from_utf8_lossy(&tar[..tar.len().min(500)]));
        let tar_file = state.path().join("bench-session.tar");
        std::fs::write(&tar_file, &tar).unwrap();
        let built = Command::new(bin)
            .args(["template", "build", "bench-tpl", "--from-snapshot"])
            .arg(&tar_file)
            .arg("--state-dir")
            .arg(state.path())
            .output();
        if built.as_ref().is_ok_and(|o| o.status.success()) {
            let mut creates = Vec::new();
            for i in 0..TEMPLATE_SESSIONS {
                let body = format!(
                    r#"{{"version":1,"task_id":"t","session_id":"tpl-{i}","image":"bench-tpl"}}"#
                );
                let t = Instant::now();
                let (s, b) = c.call("POST", "/v1/worker/sessions", &body).await;
                creates.push(t.elapsed());
                assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
            }
            // The first create reads the template from disk; the rest start from memory.
            let first = creates[0];
            let mut rest = creates[1..].to_vec();
            rest.sort();
            rows.push(Row {
                name: format!("{label} session from a template (1,000 files)"),
                p50: percentile(&rest, 0.5),
                p99: percentile(&rest, 0.99),
                per_sec: 1.0 / percentile(&rest, 0.5).as_secs_f64(),
            });
            rows.push(Row {
                name: format!("{label} the first one (template read from disk)"),
                p50: first,
                p99: first,
                per_sec: 1.0 / first.as_secs_f64(),
            });
            let cat = r#"{"version":1,"command":["wc","-c","d7/f7"]}"#;
            let (s, b) = c.call("POST", "/v1/worker/sessions/tpl-3/exec", cat).await;
            check_exit(s, &b);
            for i in 0..TEMPLATE_SESSIONS {
                let (s, b) = c
                    .call("POST", &format!("/v1/worker/sessions/tpl-{i}/end"), r#"{"version":1}"#)
                    .await;
                assert!(s < 300, "{}", String::from_utf8_lossy(&b));
            }
        }

        // Sessions with a volume of 1,000 files attached, against plain sessions, one at a
        // time, side by side (a binary without volumes skips this).
        let (s, _) = c
            .call("POST", "/v1/worker/volumes", r#"{"version":1,"name":"bench-vol"}"#)
            .await;
        if s == 201 {
            let with = r#""sandbox":{"volumes":[{"name":"bench-vol","path":"/data"}]}"#;
            let body = |i: usize, volume: bool| {
                format!(
                    r#"{{"version":1,"task_id":"t","session_id":"vol-{i}","image":"base"{}}}"#,
                    if volume { format!(",{with}") } else { String::new() }
                )
            };
            let (s, b) = c.call("POST", "/v1/worker/sessions", &body(0, true)).await;
            assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
            let fill = r#"{"version":1,"command":"cd /data && for d in 0 1 2 3 4 5 6 7 8 9; do mkdir $d; for f in $(seq 0 99); do echo $d$f > $d/$f; done; done"}"#;
            let (s, b) = c.call("POST", "/v1/worker/sessions/vol-0/exec", fill).await;
            check_exit(s, &b);
            let (s, b) = c.call("POST", "/v1/worker/sessions/vol-0/end", r#"{"version":1}"#).await;
            assert!(s < 300, "{}", String::from_utf8_lossy(&b));
            let mut plain = Vec::new();
            let mut attached = Vec::new();
            for i in 1..=TEMPLATE_SESSIONS {
                for (volume, into) in [(false, &mut plain), (true, &mut attached)] {
                    let t = Instant::now();
                    let (s, b) = c.call("POST", "/v1/worker/sessions", &body(i, volume)).await;
                    into.push(t.elapsed());
                    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
                    let (s, b) = c
                        .call("POST", &format!("/v1/worker/sessions/vol-{i}/end"), r#"{"version":1}"#)
                        .await;
                    assert!(s < 300, "{}", String::from_utf8_lossy(&b));
                }
            }
            plain.sort();
            attached.sort();
            for (name, lat) in [
                ("session (base), no volume", &plain),
                ("session with a volume of 1,000 files", &attached),
            ] {
                rows.push(Row {
                    name: format!("{label} {name}"),
                    p50: percentile(lat, 0.5),
                    p99: percentile(lat, 0.99),
                    per_sec: 1.0 / percentile(lat, 0.5).as_secs_f64(),
                });
            }
        }
        rows
    });
    let _ = server.kill();
    let _ = server.wait();
    rows
}

/// `jobs:run` at 16 connections driven by `wrk` (one thread, C, epoll), when it is installed:
/// a client that costs the shared two cores less than this driver does, so that the row
/// shows more of the server. Any answer but a 200 (or a socket error) fails the bench; the
/// bodies are not read by the script (a Lua callback per answer would make wrk the
/// bottleneck again): the phases above check every body of the same server.
///
/// With `random_ids` each job ID is a random UUID (as an orchestrator's would be) instead of
/// a counter: the telemetry store's indexes keyed by job then take every insert at a random
/// place instead of at the end, which costs the store's writer far more per job.
fn wrk_jobs(addr: &str, label: &str, random_ids: bool) -> Option<Row> {
    if Command::new("wrk").arg("--version").output().is_err() {
        println!("(wrk is not installed: `apt-get install wrk` adds the wrk row)");
        return None;
    }
    let script = tempfile::Builder::new().suffix(".lua").tempfile().unwrap();
    std::fs::write(
        script.path(),
        format!(
            r#"counter, tid = 0, 0
math.randomseed(os.time())
setup = function(thread) thread:set("tid", tid); tid = tid + 1 end
request = function()
  counter = counter + 1
  local id = string.format("wrk-%d-%d-%d", os.time(), tid, counter)
  if {random_ids} then
    id = string.format("%08x-%04x-4%03x-a%03x-%06x%06x", math.random(0, 0x7fffffff), math.random(0, 0xffff), math.random(0, 0xfff), math.random(0, 0xfff), math.random(0, 0xffffff), math.random(0, 0xffffff))
  end
  local body = string.format('{{"version":1,"task_id":"bench","job_id":"%s","sandbox":{{"image":"alpine:latest","command":["sh","-c","echo hello"]}}}}', id)
  return wrk.format("POST", "/v1/worker/jobs:run", {{["Authorization"]="Bearer {TOKEN}", ["Content-Type"]="application/json"}}, body)
end
done = function(summary, latency, requests)
  local e = summary.errors
  local b = e.status + e.connect + e.read + e.write + e.timeout
  io.write(string.format("WRK %d %d %.0f %.0f %d\n", summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), b))
end
"#
        ),
    )
    .unwrap();
    let run = |secs: u64| {
        let out = Command::new("wrk")
            .args(["-t1", "-c16", &format!("-d{secs}s"), "-s"])
            .arg(script.path())
            .arg(format!("http://{addr}"))
            .output()
            .expect("wrk");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    run(1);
    let out = run(3);
    let Some(line) = out.lines().find_map(|l| l.strip_prefix("WRK ")) else {
        panic!("wrk did not report: {out}");
    };
    let f: Vec<f64> = line
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    let [requests, duration_us, p50_us, p99_us, bad] = f[..] else {
        return None;
    };
    assert_eq!(bad, 0.0, "wrk saw {bad} wrong answers: {out}");
    Some(Row {
        name: format!(
            "{label} jobs:run, 16 connections (wrk{})",
            if random_ids {
                ", random UUID job IDs"
            } else {
                ""
            }
        ),
        p50: Duration::from_micros(p50_us as u64),
        p99: Duration::from_micros(p99_us as u64),
        per_sec: requests / (duration_us / 1e6),
    })
}

fn main() {
    let wasbox = release_wasbox();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // With WASBOX_BENCH_BASELINE=/path/to/another/wasbox, that build is measured too, in
    // alternation with this one (twice each), so that drift affects both alike.
    let mut servers = vec![("wasbox".to_string(), wasbox)];
    if let Some(other) = std::env::var_os("WASBOX_BENCH_BASELINE") {
        servers.push(("baseline".to_string(), std::path::PathBuf::from(other)));
    }
    let rounds = if servers.len() > 1 { 2 } else { 1 };
    let mut rows = Vec::new();
    for round in 0..rounds {
        for (label, bin) in &servers {
            let label = if rounds > 1 {
                format!("{label} (round {})", round + 1)
            } else {
                label.clone()
            };
            rows.extend(measure_server(&rt, bin, &label));
        }
    }
    // The baseline: the same command as a native process, spawned by this driver.
    let native = |_: usize| {
        let out = Command::new("sh")
            .args(["-c", "echo hello"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.stdout, b"hello\n");
    };
    let mut lat = Vec::new();
    let started = Instant::now();
    for i in 0..500 {
        let t = Instant::now();
        native(i);
        lat.push(t.elapsed());
    }
    let elapsed = started.elapsed();
    lat.sort();
    rows.push(Row {
        name: "native sh spawn, sequential".into(),
        p50: percentile(&lat, 0.5),
        p99: percentile(&lat, 0.99),
        per_sec: 500.0 / elapsed.as_secs_f64(),
    });
    let started = Instant::now();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn(move || {
                let mut lat = Vec::new();
                while started.elapsed() < PHASE && lat.len() < 5000 {
                    let t = Instant::now();
                    native(0);
                    lat.push(t.elapsed());
                }
                lat
            })
        })
        .collect();
    let mut lat: Vec<Duration> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let elapsed = started.elapsed();
    lat.sort();
    rows.push(Row {
        name: "native sh spawn, 8 concurrent".into(),
        p50: percentile(&lat, 0.5),
        p99: percentile(&lat, 0.99),
        per_sec: lat.len() as f64 / elapsed.as_secs_f64(),
    });
    print(&rows);
}
