//! End-to-end driver for E2B's API on `wasbox serve`: the time from "create a sandbox" to
//! "the first command's result is in", as an E2B user sees it.
//!
//! `cargo bench -p wasbox-benches --bench e2b` (builds `wasbox` in release mode first).
//! Measured here, in the same run:
//! - the wire by hand over one kept-alive loopback connection: `POST /v2/sandboxes`, then
//!   `process.Process/Start` of `/bin/bash -l -c "echo hello"` read to its end of stream
//!   (the sandbox is deleted after the clock stops);
//! - E2B's own Python SDK doing the same (`Sandbox.create()`, `commands.run("echo hello")`),
//!   when the tests have installed it under `target/e2b-sdk/` (`cargo test e2b`);
//! - a fleet of three nodes behind HAProxy with the configuration `deploy/` ships, through
//!   the proxy and direct to one of its nodes, interleaved (when HAProxy is installed);
//! - the baseline: a native `bash -c 'echo hello'` spawned by this driver.
//!
//! E2B's and Daytona's figures are the ones they publish (not measured here): about 0.44 s
//! and 0.11 s (median) from create to a first result. Every phase is bounded; loopback only.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use wasbox_benches::{percentile, release_wasbox};

const TOKEN: &str = "bench-token";
const ROUNDS: usize = 300;
const SDK_ROUNDS: usize = 50;
const PHASE_LIMIT: Duration = Duration::from_secs(60);

struct Conn {
    r: BufReader<TcpStream>,
    addr: String,
}

impl Conn {
    fn connect(addr: &str) -> Conn {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Conn {
            r: BufReader::new(s),
            addr: addr.into(),
        }
    }

    fn call(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, Vec<u8>) {
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        let s = self.r.get_mut();
        s.write_all(req.as_bytes()).unwrap();
        s.write_all(body).unwrap();
        let mut line = String::new();
        self.r.read_line(&mut line).unwrap();
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let (mut len, mut chunked) = (0usize, false);
        loop {
            line.clear();
            self.r.read_line(&mut line).unwrap();
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                }
                if k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked") {
                    chunked = true;
                }
            }
        }
        let mut out = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.r.read_line(&mut line).unwrap();
                let n = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
                let mut chunk = vec![0; n + 2];
                self.r.read_exact(&mut chunk).unwrap();
                if n == 0 {
                    break;
                }
                out.extend_from_slice(&chunk[..n]);
            }
        } else {
            out.resize(len, 0);
            self.r.read_exact(&mut out).unwrap();
        }
        (status, out)
    }
}

fn envelope(msg: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8];
    v.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    v.extend_from_slice(msg);
    v
}

/// One sandbox: create, first command, result. Returns the time to the result.
fn one(c: &mut Conn, key: &str) -> Duration {
    let t = Instant::now();
    let (s, body) = c.call(
        "POST",
        "/v2/sandboxes",
        &[("X-API-KEY", key), ("Content-Type", "application/json")],
        br#"{"templateID":"base","timeout":60}"#,
    );
    assert_eq!(s, 201, "{}", String::from_utf8_lossy(&body));
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let id = v["sandboxID"].as_str().unwrap().to_string();
    let token = v["envdAccessToken"].as_str().unwrap().to_string();
    let (s, body) = c.call(
        "POST",
        "/process.Process/Start",
        &[
            ("E2b-Sandbox-Id", &id),
            ("X-Access-Token", &token),
            ("Content-Type", "application/connect+json"),
        ],
        &envelope(br#"{"process":{"cmd":"/bin/bash","args":["-l","-c","echo hello"]}}"#),
    );
    let elapsed = t.elapsed();
    let text = String::from_utf8_lossy(&body);
    assert_eq!(s, 200);
    // "hello\n" in base64, and a clean end.
    assert!(
        text.contains("aGVsbG8K") && text.contains(r#""exitCode":0"#),
        "{text}"
    );
    let (s, _) = c.call(
        "DELETE",
        &format!("/sandboxes/{id}"),
        &[("X-API-KEY", key)],
        b"",
    );
    assert_eq!(s, 204);
    elapsed
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// Starts `wasbox serve` with `extra` arguments on a loopback port and waits until it is
/// ready; returns it, its address and its state directory (kept while it runs).
fn start_node(bin: &Path, extra: &[&str]) -> (std::process::Child, String, tempfile::TempDir) {
    let state = tempfile::tempdir().unwrap();
    let mut server = Command::new(bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--token", TOKEN])
        .args(extra)
        .env("WASBOX_STORAGE_STATE_DIR", state.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start wasbox serve");
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line.trim().rsplit("http://").next().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(120);
    while Conn::connect(&addr).call("GET", "/readyz", &[], b"").0 != 200 {
        assert!(Instant::now() < deadline, "server never became ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    (server, addr, state)
}

/// Create -> first command through HAProxy in front of three nodes (the configuration
/// `deploy/` ships) and direct to one of them, interleaved in one run, so that the
/// difference is the proxy's cost; `None` without HAProxy.
fn fleet_rows(bin: &Path, key: &str) -> Option<Vec<(String, Duration, Duration)>> {
    let haproxy = ["/usr/sbin/haproxy", "/usr/local/sbin/haproxy"]
        .iter()
        .map(Path::new)
        .find(|p| p.exists());
    let Some(haproxy) = haproxy else {
        eprintln!(
            "HAProxy is not installed (apt-get install haproxy): the fleet rows are left out"
        );
        return None;
    };
    let nodes: Vec<_> = (0..3)
        .map(|i| start_node(bin, &["--fleet-node", &format!("wasbox-{i}")]))
        .collect();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let proxy_addr = format!("127.0.0.1:{port}");
    let mut cmd = Command::new(haproxy);
    cmd.arg("-db")
        .arg("-f")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes/proxy/haproxy.cfg"))
        .env("WASBOX_PROXY_BIND", &proxy_addr)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    for (i, (_, addr, _)) in nodes.iter().enumerate() {
        cmd.env(format!("WASBOX_NODE_{i}"), addr);
    }
    let mut proxy = cmd.spawn().expect("haproxy");
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(&proxy_addr).is_err()
        || Conn::connect(&proxy_addr)
            .call("GET", "/readyz", &[], b"")
            .0
            != 200
    {
        assert!(Instant::now() < deadline, "haproxy did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut direct = Conn::connect(&nodes[0].1);
    let mut via = Conn::connect(&proxy_addr);
    for _ in 0..20 {
        one(&mut direct, key);
        one(&mut via, key);
    }
    let (mut d, mut v) = (Vec::new(), Vec::new());
    let started = Instant::now();
    while d.len() < ROUNDS && started.elapsed() < PHASE_LIMIT {
        d.push(one(&mut direct, key));
        v.push(one(&mut via, key));
    }
    d.sort();
    v.sort();
    let _ = proxy.kill();
    let _ = proxy.wait();
    for (mut child, _, _) in nodes {
        let _ = child.kill();
        let _ = child.wait();
    }
    Some(vec![
        (
            format!("wasbox fleet node, direct ({} sandboxes)", d.len()),
            percentile(&d, 0.5),
            percentile(&d, 0.9),
        ),
        (
            format!("wasbox fleet of 3 through HAProxy ({} sandboxes)", v.len()),
            percentile(&v, 0.5),
            percentile(&v, 0.9),
        ),
    ])
}

fn main() {
    let bin = release_wasbox();
    let (mut server, addr, _state) = start_node(&bin, &[]);
    let key = wasbox::e2b::api_key_for(TOKEN);

    let mut rows: Vec<(String, Option<Duration>, Option<Duration>, String)> = Vec::new();
    let mut c = Conn::connect(&addr);
    for _ in 0..20 {
        one(&mut c, &key);
    }
    let mut lat = Vec::new();
    let started = Instant::now();
    while lat.len() < ROUNDS && started.elapsed() < PHASE_LIMIT {
        lat.push(one(&mut c, &key));
    }
    lat.sort();
    rows.push((
        format!("wasbox, the wire by hand ({} sandboxes)", lat.len()),
        Some(percentile(&lat, 0.5)),
        Some(percentile(&lat, 0.9)),
        "measured".into(),
    ));

    // E2B's Python SDK, when the tests installed it.
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/e2b-sdk/python-2.63.0");
    if sdk.join(".installed").exists() {
        let script = format!(
            r#"
import json, time
from e2b import Sandbox
lat = []
for i in range({n}):
    t = time.perf_counter()
    s = Sandbox.create(timeout=60)
    r = s.commands.run("echo hello")
    lat.append(time.perf_counter() - t)
    assert r.stdout == "hello\n"
    s.kill()
lat = sorted(lat[5:])
print(json.dumps({{"p50": lat[len(lat) // 2], "p90": lat[int(len(lat) * 0.9)], "n": len(lat)}}))
"#,
            n = SDK_ROUNDS + 5
        );
        let out = Command::new("python3")
            .args(["-c", &script])
            .env("PYTHONPATH", &sdk)
            .env("E2B_API_URL", format!("http://{addr}"))
            .env("E2B_SANDBOX_URL", format!("http://{addr}"))
            .env("E2B_API_KEY", &key)
            .output()
            .expect("python3");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let secs = |k: &str| Duration::from_secs_f64(v[k].as_f64().unwrap());
        rows.push((
            format!("wasbox, E2B's Python SDK 2.63.0 ({} sandboxes)", v["n"]),
            Some(secs("p50")),
            Some(secs("p90")),
            "measured".into(),
        ));
    } else {
        eprintln!(
            "E2B's Python SDK is not installed under target/e2b-sdk (run `cargo test -p wasbox --test all e2b::python_sdk_newest`): its row is left out"
        );
    }

    let fleet = fleet_rows(&bin, &key);
    for (name, p50, p90) in fleet.iter().flatten() {
        rows.push((name.clone(), Some(*p50), Some(*p90), "measured".into()));
    }

    // The native baseline: the same command as a process of this machine.
    let mut lat = Vec::new();
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let out = Command::new("bash")
            .args(["-c", "echo hello"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        lat.push(t.elapsed());
        assert_eq!(out.stdout, b"hello\n");
    }
    lat.sort();
    let native = percentile(&lat, 0.5);
    rows.push((
        "native `bash -c` spawn (no sandbox)".into(),
        Some(native),
        Some(percentile(&lat, 0.9)),
        "measured".into(),
    ));
    rows.push((
        "E2B (published)".into(),
        Some(Duration::from_millis(440)),
        None,
        "published".into(),
    ));
    rows.push((
        "Daytona (published median)".into(),
        Some(Duration::from_millis(110)),
        None,
        "published".into(),
    ));

    println!("\ncreate -> first command -> result, on this machine (loopback):");
    println!(
        "{:<52} {:>11} {:>11} {:>11}  source",
        "", "p50", "p90", "vs native"
    );
    for (name, p50, p90, source) in &rows {
        let f = |d: &Option<Duration>| d.map_or("-".into(), ms);
        let ratio = p50.map_or("-".into(), |p| {
            format!("{:.1}x", p.as_secs_f64() / native.as_secs_f64())
        });
        println!(
            "{name:<52} {:>11} {:>11} {ratio:>11}  {source}",
            f(p50),
            f(p90)
        );
    }
    if let Some([direct, via]) = fleet.as_deref() {
        println!(
            "the proxy's cost per create -> first command -> result (two requests and a delete): {} at the median",
            ms(via.1.saturating_sub(direct.1))
        );
    }
    let _ = server.kill();
    let _ = server.wait();
}
