//! End-to-end driver for `wasbox bouvet serve`: the release binary on a Unix socket, driven
//! by the `AgentClient` of the `wasbox` crate (the documented bouvet client API), with
//! `exec {cmd: "echo hi"}` round trips sequentially and from 16 connections at once; the
//! same command spawned natively by the driver in the same run is the baseline.
//!
//! `cargo bench -p wasbox-benches --bench bouvet`. Bounded in requests and time; a Unix
//! socket in a temporary directory only.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use wasbox::bouvet::client::AgentClient;
use wasbox_benches::{percentile, release_wasbox};

const SEQUENTIAL: usize = 2000;
const CONNECTIONS: usize = 16;
const PHASE: Duration = Duration::from_secs(3);
const PHASE_MAX_REQUESTS: usize = 50_000;

fn row(name: &str, mut lat: Vec<Duration>, elapsed: Duration) {
    lat.sort();
    println!(
        "{:<44} {:>9.0} us {:>9.0} us {:>10.0}",
        name,
        percentile(&lat, 0.5).as_secs_f64() * 1e6,
        percentile(&lat, 0.99).as_secs_f64() * 1e6,
        lat.len() as f64 / elapsed.as_secs_f64()
    );
}

fn main() {
    let wasbox = release_wasbox();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("v.sock");
    let mut server = Command::new(wasbox)
        .args(["bouvet", "serve", "--uds"])
        .arg(&socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start wasbox bouvet serve");
    let mut line = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "\n{:<44} {:>12} {:>12} {:>10}",
        "phase", "p50", "p99", "per second"
    );
    rt.block_on(async {
        let mut client = AgentClient::connect(&socket).await.expect("connect");
        // Warm: the first command compiles or loads the programs.
        for _ in 0..200 {
            let r = client.exec("echo hi").await.unwrap();
            assert_eq!(r.stdout, "hi\n");
        }
        let mut lat = Vec::with_capacity(SEQUENTIAL);
        let started = Instant::now();
        for _ in 0..SEQUENTIAL {
            let t = Instant::now();
            let r = client.exec("echo hi").await.unwrap();
            lat.push(t.elapsed());
            assert_eq!(r.exit_code, 0);
        }
        row("wasbox bouvet exec, sequential", lat, started.elapsed());

        let started = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..CONNECTIONS {
            let socket = socket.clone();
            tasks.push(tokio::spawn(async move {
                let mut c = AgentClient::connect(&socket).await.expect("connect");
                let mut lat = Vec::new();
                while started.elapsed() < PHASE && lat.len() < PHASE_MAX_REQUESTS / CONNECTIONS {
                    let t = Instant::now();
                    let r = c.exec("echo hi").await.unwrap();
                    lat.push(t.elapsed());
                    assert_eq!(r.stdout, "hi\n");
                }
                lat
            }));
        }
        let mut lat = Vec::new();
        for t in tasks {
            lat.extend(t.await.unwrap());
        }
        row(
            &format!("wasbox bouvet exec, {CONNECTIONS} connections"),
            lat,
            started.elapsed(),
        );
    });
    let _ = server.kill();
    let _ = server.wait();

    let native = || {
        let out = Command::new("sh")
            .args(["-c", "echo hi"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.stdout, b"hi\n");
    };
    let mut lat = Vec::new();
    let started = Instant::now();
    for _ in 0..500 {
        let t = Instant::now();
        native();
        lat.push(t.elapsed());
    }
    row("native sh -c spawn, sequential", lat, started.elapsed());
}
