//! A minimal HTTP/1.1 client for the tests (one request per connection), and a helper that
//! starts `wasbox serve` on 127.0.0.1:0 and reads the bound address from its output.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Child;
use std::time::{Duration, Instant};

use crate::support::runtime::{spawn_server, wasbox};

pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends one request and reads the whole reply (Connection: close).
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    // The head and the body go as two writes: without TCP_NODELAY the body waits for the
    // head's ACK, which the server delays (40 ms on Linux) while it waits for the body.
    s.set_nodelay(true).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    // A server may answer (401, 413) and close before reading a large body: the reply
    // still counts, so a failed write is not an error here.
    let _ = s.write_all(body);
    read_reply(&mut BufReader::new(s))
}

/// A reply's status line and headers (names as sent).
pub fn read_head(r: &mut impl BufRead) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    r.read_line(&mut line).expect("status line");
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    (status, headers)
}

pub fn read_reply(r: &mut impl BufRead) -> Reply {
    let (status, headers) = read_head(r);
    let mut line = String::new();
    let len = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok());
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let mut body = Vec::new();
    if let Some(n) = len {
        body.resize(n, 0);
        r.read_exact(&mut body).unwrap();
    } else if chunked {
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            let n = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).unwrap();
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        r.read_to_end(&mut body).unwrap();
    }
    Reply {
        status,
        headers,
        body,
    }
}

/// The address a server prints first (`... http://IP:PORT`).
pub fn read_address(out: &mut impl BufRead) -> SocketAddr {
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    address_in(&line)
}

/// The address in a server's first line (`... http://IP:PORT`).
pub fn address_in(line: &str) -> SocketAddr {
    line.trim()
        .rsplit("http://")
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
}

pub const TOKEN: &str = "test-token-0123456789";

/// A running `wasbox serve`, stopped when dropped.
pub struct Server {
    pub addr: SocketAddr,
    pub child: Child,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Starts a server with `extra` arguments and waits until it is ready.
    pub fn start(extra: &[&str]) -> Server {
        Self::start_with(extra, &[])
    }

    pub fn start_with(extra: &[&str], env: &[(&str, &str)]) -> Server {
        let server = Self::spawn(extra, env);
        server.wait_ready();
        server
    }

    /// Starts a server without waiting for it to be ready.
    pub fn start_unready(extra: &[&str]) -> Server {
        Self::spawn(extra, &[])
    }

    /// Starts a server whose process may map at most `bytes` of address space
    /// (`RLIMIT_AS`), and waits until it is ready.
    pub fn start_in_address_space(extra: &[&str], bytes: u64) -> Server {
        let server = Self::spawn_limited(extra, &[], Some(bytes));
        server.wait_ready();
        server
    }

    /// The process's virtual memory size (`VmSize`), in bytes.
    pub fn address_space_used(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmSize:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmSize in /proc/PID/status");
        kib << 10
    }

    fn spawn(extra: &[&str], env: &[(&str, &str)]) -> Server {
        Self::spawn_limited(extra, env, None)
    }

    fn spawn_limited(extra: &[&str], env: &[(&str, &str)], address_space: Option<u64>) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        let mut cmd = wasbox();
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--token", TOKEN]);
        // A state directory of its own unless the test gives one.
        if !extra.contains(&"--state-dir") {
            cmd.arg("--state-dir").arg(dir.path().join("state"));
        }
        cmd.args(extra)
            .env("WASBOX_LOG", "info")
            .envs(env.iter().copied());
        if let Some(bytes) = address_space {
            use std::os::unix::process::CommandExt as _;
            let limit = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            // SAFETY: setrlimit is async-signal-safe and only reads `limit`, a copy owned by
            // the closure.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_AS, &limit) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        let (child, line) = spawn_server(cmd, &log);
        Server {
            addr: address_in(&line),
            child,
            log,
            _dir: dir,
        }
    }

    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let r = request(self.addr, "GET", "/readyz", &[], b"");
            if r.status == 200 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "server never became ready: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// An authenticated JSON POST.
    pub fn post(&self, path: &str, body: &serde_json::Value) -> Reply {
        let body = serde_json::to_vec(body).unwrap();
        request(
            self.addr,
            "POST",
            path,
            &[
                ("Authorization", &format!("Bearer {TOKEN}")),
                ("Content-Type", "application/json"),
            ],
            &body,
        )
    }

    /// An authenticated POST of `body` as `content_type` (a tar upload, say).
    pub fn post_bytes(&self, path: &str, content_type: &str, body: &[u8]) -> Reply {
        request(
            self.addr,
            "POST",
            path,
            &[
                ("Authorization", &format!("Bearer {TOKEN}")),
                ("Content-Type", content_type),
            ],
            body,
        )
    }

    pub fn get(&self, path: &str) -> Reply {
        request(
            self.addr,
            "GET",
            path,
            &[("Authorization", &format!("Bearer {TOKEN}"))],
            b"",
        )
    }

    pub fn put(&self, path: &str, body: &[u8]) -> Reply {
        request(
            self.addr,
            "PUT",
            path,
            &[("Authorization", &format!("Bearer {TOKEN}"))],
            body,
        )
    }

    /// An authenticated request of any method.
    pub fn call(&self, method: &str, path: &str, body: &[u8]) -> Reply {
        request(
            self.addr,
            method,
            path,
            &[("Authorization", &format!("Bearer {TOKEN}"))],
            body,
        )
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "server did not exit: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- server log ---\n{}", self.log());
        }
    }
}
