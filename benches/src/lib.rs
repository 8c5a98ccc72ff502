//! Shared pieces of the wasbox benchmarks: the release binary the end-to-end drivers run,
//! percentiles, and reading criterion's medians back to print them side by side with their
//! native baselines.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// The bearer token the end-to-end drivers start `wasbox serve` with.
pub const TOKEN: &str = "bench-token";

/// Cargo's target directory.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// Builds the release `wasbox` (a no-op when it is up to date) and returns its path.
pub fn release_wasbox() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let built = std::process::Command::new(cargo)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .args(["build", "--release", "--quiet", "-p", "wasbox"])
        .status()
        .expect("cargo build");
    assert!(built.success(), "building wasbox failed");
    target_dir().join("release/wasbox")
}

/// The `q` quantile (0 to 1) of sorted latencies; zero for none.
pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Criterion's output directory (`target/criterion`).
pub fn criterion_dir() -> PathBuf {
    target_dir().join("criterion")
}

/// The median (in nanoseconds) criterion measured for `group/id`, if it ran.
pub fn median_ns(group: &str, id: &str) -> Option<f64> {
    // Criterion names a group's directory after the group with `/` replaced by `_`.
    let dir = group.replace('/', "_");
    let path = criterion_dir()
        .join(dir)
        .join(id)
        .join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["median"]["point_estimate"].as_f64()
}

fn human(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.1} us", ns / 1e3)
    }
}

/// Prints one table row per (group, wasbox id, native id): both medians and native/wasbox.
pub fn print_ratios(rows: &[(&str, &str, &str)]) {
    println!();
    println!(
        "{:<36} {:>12} {:>12} {:>16}",
        "benchmark (medians)", "wasbox", "native", "native / wasbox"
    );
    for (group, ours, native) in rows {
        let label = format!("{group} {ours}");
        match (median_ns(group, ours), median_ns(group, native)) {
            (Some(a), Some(b)) => println!(
                "{:<36} {:>12} {:>12} {:>15.1}x",
                label,
                human(a),
                human(b),
                b / a
            ),
            _ => println!("{label:<36} (not measured in this run)"),
        }
    }
}

/// Prints the medians of benchmarks that have no native counterpart.
pub fn print_medians(rows: &[(&str, &str)]) {
    for (group, id) in rows {
        let label = format!("{group} {id}");
        match median_ns(group, id) {
            Some(a) => println!("{label:<36} {:>12} {:>12} {:>16}", human(a), "-", "-"),
            None => println!("{label:<36} (not measured in this run)"),
        }
    }
}

/// A kept-alive HTTP/1.1 connection to a `wasbox serve` on loopback, sending the bench's
/// bearer token.
pub struct Conn {
    stream: BufReader<TcpStream>,
    addr: String,
}

impl Conn {
    pub async fn connect(addr: &str) -> Conn {
        let s = TcpStream::connect(addr).await.expect("connect");
        s.set_nodelay(true).unwrap();
        Conn {
            stream: BufReader::new(s),
            addr: addr.to_string(),
        }
    }

    /// One request on the kept-alive connection; returns the status and body. A connection
    /// the server closed while it was idle (after `--header-timeout`, as any client pool
    /// sees) is opened again and the request sent on the new one.
    pub async fn call(&mut self, method: &str, path: &str, body: &str) -> (u16, Vec<u8>) {
        // One poll of a peek, without a timer (a zero timeout still waits for the timer
        // wheel's next millisecond): end of stream means the server closed it.
        let mut probe = [0u8; 1];
        let closed = {
            use std::future::Future as _;
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            let mut peek = std::pin::pin!(self.stream.get_mut().peek(&mut probe));
            matches!(
                peek.as_mut().poll(&mut cx),
                std::task::Poll::Ready(Ok(0)) | std::task::Poll::Ready(Err(_))
            )
        };
        if closed {
            *self = Conn::connect(&self.addr).await;
        }
        self.call_once(method, path, body).await
    }

    pub async fn call_once(&mut self, method: &str, path: &str, body: &str) -> (u16, Vec<u8>) {
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        self.stream
            .get_mut()
            .write_all(req.as_bytes())
            .await
            .unwrap();
        let mut line = String::new();
        self.stream.read_line(&mut line).await.unwrap();
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let mut len = 0usize;
        loop {
            line.clear();
            self.stream.read_line(&mut line).await.unwrap();
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; len];
        self.stream.read_exact(&mut body).await.unwrap();
        (status, body)
    }
}
