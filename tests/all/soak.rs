//! The soak test, run on demand (ignored by default): 1,000 clients running jobs at once
//! and 200 sessions (exec, files, a PTY each) against one `wasbox serve` for several
//! minutes. Every answer must be the expected one and the server's resident memory must
//! stay flat after the warm-up.
//!
//! `cargo test --release -p wasbox --test all soak -- --ignored --nocapture`
//! (`WASBOX_SOAK_SECS`, default 300; `WASBOX_SOAK_JOBS`, default 1000;
//! `WASBOX_SOAK_SESSIONS`, default 200).

use std::io::{BufReader, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::http::{Reply, Server, TOKEN, read_reply};

fn setting(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One keep-alive connection (a soak makes too many requests for a connection each).
struct Conn {
    addr: SocketAddr,
    io: Option<(BufReader<TcpStream>, TcpStream)>,
}

impl Conn {
    fn new(addr: SocketAddr) -> Conn {
        Conn { addr, io: None }
    }

    fn send(&mut self, method: &str, path: &str, body: &[u8]) -> Reply {
        if self.io.is_none() {
            let s = TcpStream::connect(self.addr).expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
            s.set_nodelay(true).unwrap();
            self.io = Some((BufReader::new(s.try_clone().unwrap()), s));
        }
        let (r, w) = self.io.as_mut().unwrap();
        let t0 = Instant::now();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: soak\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let sent = w
            .write_all(head.as_bytes())
            .and_then(|()| w.write_all(body));
        let reply = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read_reply(r)));
        let reply = match (sent, reply) {
            (Ok(()), Ok(reply)) => reply,
            (sent, _) => {
                self.io = None;
                panic!(
                    "{method} {path}: no answer after {:?} (write: {sent:?})",
                    t0.elapsed()
                );
            }
        };
        if reply
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
        {
            self.io = None;
        }
        reply
    }

    fn post(&mut self, path: &str, body: &Value) -> Reply {
        self.send("POST", path, &serde_json::to_vec(body).unwrap())
    }
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

#[derive(Default)]
struct Tally {
    jobs: AtomicU64,
    execs: AtomicU64,
    files: AtomicU64,
    pty: AtomicU64,
    errors: AtomicU64,
}

impl Tally {
    fn fail(&self, what: String) {
        if self.errors.fetch_add(1, Ordering::Relaxed) < 10 {
            eprintln!("soak: unexpected: {what}");
        }
    }
}

#[test]
#[ignore = "a soak of several minutes; run on demand"]
fn soak() {
    let secs = setting("WASBOX_SOAK_SECS", 300);
    let clients = setting("WASBOX_SOAK_JOBS", 1000) as usize;
    let sessions = setting("WASBOX_SOAK_SESSIONS", 200) as usize;
    let s = Server::start(&[
        "--max-concurrent",
        &(clients + sessions).to_string(),
        "--max-connections",
        &(2 * (clients + sessions) + 64).to_string(),
    ]);
    let pid = s.child.id();
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let mut threads = Vec::new();
    for c in 0..clients {
        let (stop, tally, addr) = (stop.clone(), tally.clone(), s.addr);
        threads.push(
            std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || {
                    let mut conn = Conn::new(addr);
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        n += 1;
                        let body = json!({"version": 1, "task_id": "soak",
                            "job_id": format!("c{c}-{n}"),
                            "sandbox": {"image": "x", "command": ["sh", "-c",
                                "sleep 0.$((RANDOM % 5)); echo $(( $1 * 2 ))", "sh", n.to_string()]}});
                        let r = conn.post("/v1/worker/jobs:run", &body);
                        let v = if r.status == 200 { r.json() } else { Value::Null };
                        if v["stdout"] == format!("{}\n", n * 2) {
                            tally.jobs.fetch_add(1, Ordering::Relaxed);
                        } else {
                            tally.fail(format!("job: {} {}", r.status, r.text()));
                        }
                    }
                })
                .unwrap(),
        );
    }
    for i in 0..sessions {
        let (stop, tally, addr) = (stop.clone(), tally.clone(), s.addr);
        threads.push(
            std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || {
                    use base64::Engine as _;
                    let b64 = base64::engine::general_purpose::STANDARD;
                    let mut conn = Conn::new(addr);
                    let id = format!("soak-{i}");
                    let create = json!({"version": 1, "task_id": "soak", "session_id": id, "image": "x"});
                    let r = conn.post("/v1/worker/sessions", &create);
                    if r.status != 200 {
                        tally.fail(format!("session: {} {}", r.status, r.text()));
                        return;
                    }
                    let r = conn.post(
                        &format!("/v1/worker/sessions/{id}/pty:open"),
                        &json!({"version": 1, "task_id": "soak"}),
                    );
                    let pty = r.json()["pty_id"].as_str().unwrap_or_default().to_string();
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        n += 1;
                        let exec = json!({"version": 1, "command": ["sh", "-c",
                            "echo $1 > n.txt; cat n.txt", "sh", n.to_string()]});
                        let r = conn.post(&format!("/v1/worker/sessions/{id}/exec"), &exec);
                        if r.status == 200 && r.json()["stdout"] == format!("{n}\n") {
                            tally.execs.fetch_add(1, Ordering::Relaxed);
                        } else {
                            tally.fail(format!("exec: {} {}", r.status, r.text()));
                        }
                        let path = format!("/v1/worker/sessions/{id}/files?path=f.bin");
                        let data = vec![(n % 251) as u8; 4096];
                        let w = conn.send("PUT", &path, &data);
                        let r = conn.send("GET", &path, b"");
                        if w.status == 200 && r.status == 200 && r.body == data {
                            tally.files.fetch_add(1, Ordering::Relaxed);
                        } else {
                            tally.fail(format!("files: {} {}", w.status, r.status));
                        }
                        let line = format!("echo tick-{n}\r");
                        let send = json!({"version": 1, "task_id": "soak", "pty_id": pty,
                            "data_b64": b64.encode(line)});
                        conn.post(&format!("/v1/worker/sessions/{id}/pty:send"), &send);
                        let want = format!("tick-{n}\r\n$ ");
                        let deadline = Instant::now() + Duration::from_secs(30);
                        let mut seen = String::new();
                        while !seen.contains(&want) && Instant::now() < deadline {
                            let r = conn.send(
                                "GET",
                                &format!("/v1/worker/sessions/{id}/pty:recv?task_id=soak&pty_id={pty}&wait_ms=1000"),
                                b"",
                            );
                            let data = r.json()["data_b64"].as_str().map(|d| b64.decode(d));
                            match data {
                                Some(Ok(d)) => seen.push_str(&String::from_utf8_lossy(&d)),
                                _ => break,
                            }
                        }
                        if seen.contains(&want) {
                            tally.pty.fetch_add(1, Ordering::Relaxed);
                        } else {
                            tally.fail(format!("pty: never saw {want:?}: {seen:?}"));
                        }
                        std::thread::sleep(Duration::from_millis(200));
                    }
                    conn.post(&format!("/v1/worker/sessions/{id}/end"), &json!({"version": 1}));
                })
                .unwrap(),
        );
    }
    let started = Instant::now();
    let warmup = Duration::from_secs((secs / 5).clamp(10, 60));
    let mut samples = Vec::new();
    while started.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_secs(5));
        let rss = rss_kib(pid);
        samples.push((started.elapsed().as_secs(), rss));
        eprintln!(
            "soak: {:>4} s  rss {:>7} KiB  jobs {}  execs {}  files {}  pty {}  errors {}",
            started.elapsed().as_secs(),
            rss,
            tally.jobs.load(Ordering::Relaxed),
            tally.execs.load(Ordering::Relaxed),
            tally.files.load(Ordering::Relaxed),
            tally.pty.load(Ordering::Relaxed),
            tally.errors.load(Ordering::Relaxed),
        );
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("a client thread panicked");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let jobs = tally.jobs.load(Ordering::Relaxed);
    eprintln!(
        "soak: {jobs} jobs ({:.0}/s), {} execs, {} file round trips, {} PTY round trips in {elapsed:.0} s",
        jobs as f64 / elapsed,
        tally.execs.load(Ordering::Relaxed),
        tally.files.load(Ordering::Relaxed),
        tally.pty.load(Ordering::Relaxed),
    );
    assert_eq!(
        tally.errors.load(Ordering::Relaxed),
        0,
        "unexpected answers"
    );
    assert!(jobs > 0);
    // Flat: after the warm-up, resident memory grows by no more than a quarter (plus
    // 32 MiB of allocator slack) however long the soak runs.
    let after_warmup: Vec<u64> = samples
        .iter()
        .filter(|(t, _)| *t >= warmup.as_secs())
        .map(|(_, r)| *r)
        .collect();
    if let (Some(first), Some(max)) = (after_warmup.first(), after_warmup.iter().max()) {
        assert!(
            *max <= first + first / 4 + 32 * 1024,
            "resident memory grew from {first} KiB to {max} KiB: {samples:?}"
        );
    }
}
