//! Network egress, in process, beside native curl on the same machine and the same servers
//! (both on 127.0.0.1, started here; nothing leaves the machine).
//!
//! `cargo bench -p wasbox-benches --bench egress` prints:
//! - `1 MiB over HTTPS`: medians over ROUNDS downloads, `curl -s -o /dev/null` in an
//!   existing sandbox (the host resolves, checks, connects and does TLS; the guest gets the
//!   bytes) against the native `curl` process doing the same, and their ratio;
//! - `requests/s`: small HTTP answers through the egress layer, two sandboxes each running
//!   `curl` in a loop (one connection per request, as curl makes them), against two native
//!   loops of `curl` processes.
//!
//! It needs `openssl` (a certificate for the test server) and `curl` on the host.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasbox_benches::percentile;
use wasbox_runtime::{EgressConfig, JobSpec, NetworkPolicy, Runtime, SandboxConfig};

const ROUNDS: usize = 21;
const REQUESTS: usize = 400;
const BLOB: usize = 1 << 20;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    percentile(&v, 0.5)
}

/// A CA and a certificate for 127.0.0.1 in `dir`, made by openssl.
fn certificates(dir: &Path) -> bool {
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    let p = |n: &str| dir.join(n).display().to_string();
    let key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    [
        format!(
            "req -x509 -days 2 -subj /CN=bench-ca {key} -keyout {} -out {}",
            p("ca.key"),
            p("ca.pem")
        ),
        format!(
            "req -subj /CN=127.0.0.1 {key} -keyout {} -out {}",
            p("key.pem"),
            p("leaf.csr")
        ),
        format!(
            "x509 -req -days 2 -CAcreateserial -in {} -CA {} -CAkey {} -extfile {} -out {}",
            p("leaf.csr"),
            p("ca.pem"),
            p("ca.key"),
            p("leaf.ext"),
            p("cert.pem")
        ),
    ]
    .iter()
    .all(|args| {
        Command::new("openssl")
            .args(args.split(' '))
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Serves `body` for every request on 127.0.0.1, over TLS with the certificate in `dir` when
/// given; one thread per connection, one request per connection.
fn serve(body: Arc<Vec<u8>>, tls: Option<&Path>) -> u16 {
    use rustls::pki_types::pem::PemObject;
    let config = tls.map(|dir| {
        let certs = rustls::pki_types::CertificateDer::pem_file_iter(dir.join("cert.pem"))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = rustls::pki_types::PrivateKeyDer::from_pem_file(dir.join("key.pem")).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Arc::new(
            rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(certs, key)
                .unwrap(),
        )
    });
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let (body, config) = (body.clone(), config.clone());
            std::thread::spawn(move || {
                let _ = conn.set_nodelay(true);
                let stream: Box<dyn ReadWrite> = match config {
                    Some(c) => Box::new(rustls::StreamOwned::new(
                        rustls::ServerConnection::new(c).unwrap(),
                        conn,
                    )),
                    None => Box::new(conn),
                };
                let mut r = BufReader::new(stream);
                let mut line = String::new();
                loop {
                    line.clear();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if line.trim_end().is_empty() {
                        break;
                    }
                }
                let mut w = r.into_inner();
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = w.write_all(head.as_bytes());
                let _ = w.write_all(&body);
                let _ = w.flush();
            });
        }
    });
    port
}

trait ReadWrite: Read + Write + Send {}
impl<T: Read + Write + Send> ReadWrite for T {}

fn native(args: &[&str]) -> Duration {
    let t = Instant::now();
    let ok = Command::new("curl")
        .args(args)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "native curl {args:?} failed");
    t.elapsed()
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    if !certificates(dir.path()) || Command::new("curl").arg("--version").output().is_err() {
        eprintln!("egress bench: needs openssl and curl on the host; skipped");
        return;
    }
    let blob: Vec<u8> = (0..BLOB).map(|i| (i * 7 + i / 251) as u8).collect();
    let https = serve(Arc::new(blob), Some(dir.path()));
    let http = serve(Arc::new(b"ok\n".to_vec()), None);
    let ca = dir.path().join("ca.pem");
    let https_url = format!("https://127.0.0.1:{https}/blob");
    let http_url = format!("http://127.0.0.1:{http}/small");

    let rt = tokio::runtime::Runtime::new().unwrap();
    let runtime = Runtime::builder()
        .egress(
            EgressConfig::default()
                .allow(
                    wasbox_runtime::net::parse_rules(&[
                        format!("127.0.0.1:{https}"),
                        format!("127.0.0.1:{http}"),
                    ])
                    .unwrap(),
                )
                .ca_certs(vec![ca.clone()]),
        )
        .build()
        .unwrap();
    let sandbox = || {
        runtime
            .sandbox(SandboxConfig::default().network(NetworkPolicy::Node))
            .unwrap()
    };
    let one = sandbox();
    let download = format!("curl -fsS -o /dev/null {https_url}");
    // Warm: the programs compiled, the TLS roots loaded.
    let out = rt.block_on(one.run(JobSpec::shell(&download))).unwrap();
    assert_eq!(out.exit_code, 0, "{}", out.stderr);

    let inside = median(
        (0..ROUNDS)
            .map(|_| {
                let t = Instant::now();
                let out = rt.block_on(one.run(JobSpec::shell(&download))).unwrap();
                assert_eq!(out.exit_code, 0, "{}", out.stderr);
                t.elapsed()
            })
            .collect(),
    );
    let ca_arg = ca.display().to_string();
    let outside = median(
        (0..ROUNDS)
            .map(|_| native(&["-fsS", "--cacert", &ca_arg, "-o", "/dev/null", &https_url]))
            .collect(),
    );
    println!(
        "1 MiB over HTTPS        wasbox {:>9.2?}   native curl {:>9.2?}   ratio {:.2}",
        inside,
        outside,
        inside.as_secs_f64() / outside.as_secs_f64()
    );

    // Requests per second: two sandboxes, REQUESTS each.
    let script = format!(
        "i=0; while [ $i -lt {REQUESTS} ]; do curl -fsS -o /dev/null {http_url} || exit 1; i=$((i+1)); done"
    );
    let (a, b) = (sandbox(), sandbox());
    let t = Instant::now();
    let (ra, rb) = rt.block_on(async {
        tokio::join!(
            a.run(JobSpec::shell(&script)),
            b.run(JobSpec::shell(&script))
        )
    });
    let took = t.elapsed();
    for r in [ra, rb] {
        let r = r.unwrap();
        assert_eq!(r.exit_code, 0, "{}", r.stderr);
    }
    let rps = (2 * REQUESTS) as f64 / took.as_secs_f64();
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..REQUESTS {
                    native(&["-fsS", "-o", "/dev/null", &http_url]);
                }
            });
        }
    });
    let native_rps = (2 * REQUESTS) as f64 / t.elapsed().as_secs_f64();
    println!(
        "requests/s, 2 loops     wasbox {rps:>9.0}   native curl {native_rps:>9.0}   ratio {:.2}",
        rps / native_rps
    );
    let stats = runtime.egress_stats();
    println!(
        "egress counted: {} connections, {} denied, {} bytes in",
        stats.allowed, stats.denied, stats.bytes_in
    );
}
