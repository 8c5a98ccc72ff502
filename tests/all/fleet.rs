//! A fleet behind one endpoint: three `wasbox serve --fleet-node wasbox-N` nodes on loopback
//! and the real HAProxy with the configuration `deploy/` ships
//! (`deploy/kubernetes/proxy/haproxy.cfg`). `.ci/run` installs Debian's `haproxy` when it is
//! missing; without it the tests are skipped, which `WASBOX_REQUIRE_TOOLS` makes a failure.
//!
//! What they show: every id a node hands out routes back to it through the proxy (E2B's SDK
//! with 30 sandboxes; worker API sessions with their exec, files, PTY, forks and snapshots),
//! and a node that drains leaves the creates' rotation while the others serve on.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::http::{Reply, Server, TOKEN, request};
use crate::support::runtime::run_bounded;

const NODES: [&str; 3] = ["wasbox-0", "wasbox-1", "wasbox-2"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// HAProxy's binary, or `None` after [`crate::support::skip`] says why (`.ci/run` installs
/// it; deploy.rs checks the shipped configuration with it too).
pub(crate) fn haproxy() -> Option<PathBuf> {
    let found = [
        "/usr/sbin/haproxy",
        "/usr/local/sbin/haproxy",
        "/usr/bin/haproxy",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.exists());
    if found.is_none() {
        crate::support::skip("haproxy is not installed (.ci/run installs Debian's haproxy)");
    }
    found
}

/// HAProxy running the shipped configuration in front of `nodes`, stopped when dropped.
struct Proxy {
    addr: SocketAddr,
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Proxy {
    fn start(binary: &Path, nodes: &[Server]) -> Proxy {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("haproxy.log");
        // A free port: bound, read and released just before HAProxy binds it.
        let addr = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let mut cmd = Command::new(binary);
        cmd.arg("-db")
            .arg("-f")
            .arg(root().join("deploy/kubernetes/proxy/haproxy.cfg"))
            .env("WASBOX_PROXY_BIND", addr.to_string())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.path().join("haproxy.err")).unwrap());
        for (i, n) in nodes.iter().enumerate() {
            cmd.env(format!("WASBOX_NODE_{i}"), n.addr.to_string());
        }
        let child = cmd.spawn().expect("haproxy starts");
        let proxy = Proxy {
            addr,
            child,
            log,
            _dir: dir,
        };
        // Up when its own probe answers and a create reaches a node.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !std::net::TcpStream::connect(addr).is_ok_and(|_| {
            request(addr, "GET", "/proxy-healthz", &[], b"").status == 200
                && request(addr, "GET", "/readyz", &[], b"").status == 200
        }) {
            assert!(
                Instant::now() < deadline,
                "haproxy did not come up: {}",
                proxy.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        proxy
    }

    fn log(&self) -> String {
        let err = self.log.with_file_name("haproxy.err");
        format!(
            "{}{}",
            std::fs::read_to_string(&self.log).unwrap_or_default(),
            std::fs::read_to_string(err).unwrap_or_default()
        )
    }

    fn call(&self, method: &str, path: &str, body: &Value) -> Reply {
        let body = if body.is_null() {
            Vec::new()
        } else {
            serde_json::to_vec(body).unwrap()
        };
        request(
            self.addr,
            method,
            path,
            &[
                ("Authorization", &format!("Bearer {TOKEN}")),
                ("Content-Type", "application/json"),
            ],
            &body,
        )
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Three nodes and the proxy, or `None` (skipped) without HAProxy.
fn fleet(extra: &[&str]) -> Option<(Vec<Server>, Proxy)> {
    let binary = haproxy()?;
    let nodes: Vec<Server> = NODES
        .iter()
        .map(|n| {
            let mut args = vec!["--fleet-node", n];
            args.extend_from_slice(extra);
            Server::start(&args)
        })
        .collect();
    let proxy = Proxy::start(&binary, &nodes);
    Some((nodes, proxy))
}

/// The node an id routes to.
fn owner(id: &str) -> usize {
    NODES
        .iter()
        .position(|n| id.starts_with(&format!("{n}-")))
        .unwrap_or_else(|| panic!("`{id}` names no node of the fleet"))
}

/// A worker API session made through the proxy, named by the client or by its node; its id.
fn create(proxy: &Proxy, id: Option<&str>) -> String {
    let mut body = json!({"version": 1, "task_id": "t", "image": "bash"});
    if let Some(id) = id {
        body["session_id"] = json!(id);
    }
    let r = proxy.call("POST", "/v1/worker/sessions", &body);
    assert_eq!(r.status, 200, "{}\nproxy:\n{}", r.text(), proxy.log());
    r.json()["session_id"].as_str().unwrap().to_string()
}

fn exec(proxy: &Proxy, session: &str, script: &str) -> Reply {
    proxy.call(
        "POST",
        &format!("/v1/worker/sessions/{session}/exec"),
        &json!({"version": 1, "task_id": "t", "command": ["sh", "-c", script]}),
    )
}

fn stdout(r: &Reply) -> String {
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["stdout"].as_str().unwrap_or_default().to_string()
}

#[test]
fn e2b_sdk_through_the_proxy_reaches_each_sandbox_on_its_own_node() {
    // The code interpreter's SDK, with the newest `e2b` beside it: both are driven.
    crate::support::runtime::datasci_cache_dir();
    let Some(sdk) = crate::e2b::interpreter_sdk() else {
        return;
    };
    let Some((nodes, proxy)) = fleet(&[]) else {
        return;
    };
    let url = format!("http://{}", proxy.addr);
    let mut cmd = Command::new("python3");
    cmd.arg(root().join("tests/e2b/fleet_check.py"))
        .env("PYTHONPATH", &sdk)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("WASBOX_FLEET_SANDBOXES", "30")
        .env("WASBOX_FLEET_INTERPRETERS", "6")
        .env("E2B_API_URL", &url)
        .env("E2B_SANDBOX_URL", &url)
        .env("E2B_API_KEY", crate::e2b::api_key());
    let out = run_bounded(cmd, Duration::from_secs(300));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("all passed"),
        "{text}\n{}\nproxy log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        proxy.log()
    );
    let ids: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("sandbox "))
        .collect();
    assert_eq!(ids.len(), 36, "{text}");

    // Each node holds exactly the sandboxes whose ids carry its name: every request of the
    // SDKs (create, commands, files, connect, the code interpreter's runs) reached the
    // sandbox's own node, or it would have failed there. And the creates were spread over
    // all three.
    for (i, node) in nodes.iter().enumerate() {
        let r = request(
            node.addr,
            "GET",
            "/v2/sandboxes",
            &[("X-API-KEY", &crate::e2b::api_key())],
            b"",
        );
        assert_eq!(r.status, 200, "{}", r.text());
        let mut held: Vec<String> = r
            .json()
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["sandboxID"].as_str().unwrap().to_string())
            .collect();
        held.sort();
        let mut own: Vec<String> = ids
            .iter()
            .filter(|id| owner(id) == i)
            .map(|s| s.to_string())
            .collect();
        own.sort();
        assert_eq!(held, own, "node {}", NODES[i]);
        assert!(!own.is_empty(), "no sandbox was created on {}", NODES[i]);
        // And the node's telemetry (its inventory of sandboxes) names its own alone.
        let inventory = node.get("/v1/worker/telemetry/containers?limit=1000");
        assert_eq!(inventory.status, 200, "{}", inventory.text());
        let mut recorded: Vec<String> = inventory.json()["containers"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["container_id"].as_str()?.strip_prefix("session-e2b-"))
            .map(str::to_string)
            .collect();
        recorded.sort();
        assert_eq!(recorded, own, "telemetry of {}", NODES[i]);
        // envd reached by host name alone (`PORT-ID.DOMAIN`, as E2B's own proxy is), for a
        // sandbox of this node (found there: 401, for no access token is sent; any other
        // node would answer 502, for it has no such sandbox) and for one it does not have.
        assert_eq!(
            by_host(&proxy, &format!("49983-{}.fleet.test", own[0])),
            401
        );
        assert_eq!(
            by_host(&proxy, &format!("49983-{}-inothere.fleet.test", NODES[i])),
            502
        );
    }
}

/// `GET /health` through the proxy with this `Host` and no other hint of the sandbox.
fn by_host(proxy: &Proxy, host: &str) -> u16 {
    use std::io::{BufReader, Write as _};
    let mut s = std::net::TcpStream::connect(proxy.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET /health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    crate::support::http::read_reply(&mut BufReader::new(s)).status
}

#[test]
fn worker_api_sessions_through_the_proxy_stay_on_their_node() {
    let Some((nodes, proxy)) = fleet(&[]) else {
        return;
    };
    // Sessions the nodes name, spread by the proxy.
    let mut ids = Vec::new();
    for _ in 0..6 {
        ids.push(create(&proxy, None));
    }
    let used: std::collections::BTreeSet<usize> = ids.iter().map(|id| owner(id)).collect();
    assert!(used.len() >= 2, "creates all went to one node: {ids:?}");

    for id in &ids {
        // Exec and files through the proxy, and the session is on its own node alone.
        let out = stdout(&exec(&proxy, id, "echo made-in $PWD > f.txt; cat f.txt"));
        assert_eq!(out, "made-in /workspace\n");
        let put = request(
            proxy.addr,
            "PUT",
            &format!("/v1/worker/sessions/{id}/files?path=up.txt"),
            &[("Authorization", &format!("Bearer {TOKEN}"))],
            b"uploaded",
        );
        assert!(put.status < 300, "{}", put.text());
        let got = proxy.call(
            "GET",
            &format!("/v1/worker/sessions/{id}/files?path=up.txt"),
            &Value::Null,
        );
        assert_eq!(
            (got.status, got.body.as_slice()),
            (200, &b"uploaded"[..]),
            "{}",
            got.text()
        );
        for (i, node) in nodes.iter().enumerate() {
            let direct = node.get(&format!("/v1/worker/sessions/{id}"));
            assert_eq!(direct.status == 200, i == owner(id), "{id} on {}", NODES[i]);
        }
    }

    // A PTY through the proxy.
    let id = &ids[0];
    let open = proxy.call(
        "POST",
        &format!("/v1/worker/sessions/{id}/pty:open"),
        &json!({"version": 1, "task_id": "t", "session_id": id, "cols": 80, "rows": 24}),
    );
    assert_eq!(open.status, 200, "{}", open.text());
    let pty = open.json()["pty_id"].as_str().unwrap().to_string();
    let send = proxy.call(
        "POST",
        &format!("/v1/worker/sessions/{id}/pty:send"),
        &json!({"version": 1, "task_id": "t", "session_id": id, "pty_id": pty,
                "data_b64": "ZWNobyBwdHktJCgoNio3KSkNCg=="}), // "echo pty-$((6*7))\r\n"
    );
    assert_eq!(send.status, 200, "{}", send.text());
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !seen.contains("pty-42") {
        assert!(Instant::now() < deadline, "PTY said {seen:?}");
        let r = proxy.call(
            "GET",
            &format!(
                "/v1/worker/sessions/{id}/pty:recv?version=1&task_id=t&pty_id={pty}&wait_ms=1000"
            ),
            &Value::Null,
        );
        assert_eq!(r.status, 200, "{}", r.text());
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(r.json()["data_b64"].as_str().unwrap())
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&bytes));
    }
    let close = proxy.call(
        "POST",
        &format!("/v1/worker/sessions/{id}/pty:close"),
        &json!({"version": 1, "task_id": "t", "session_id": id, "pty_id": pty}),
    );
    assert_eq!(close.status, 200, "{}", close.text());

    // Forks and snapshots are the node's: their ids route to it, and a restore from the
    // snapshot lands there too.
    let fork = proxy.call(
        "POST",
        &format!("/v1/worker/sessions/{id}:fork"),
        &json!({"version": 1, "count": 2}),
    );
    assert_eq!(fork.status, 200, "{}", fork.text());
    for child in fork.json()["session_ids"].as_array().unwrap() {
        let child = child.as_str().unwrap();
        assert_eq!(owner(child), owner(id));
        assert_eq!(
            stdout(&exec(&proxy, child, "cat f.txt")),
            "made-in /workspace\n"
        );
    }
    let snap = proxy.call(
        "POST",
        &format!("/v1/worker/sessions/{id}:snapshot"),
        &json!({"version": 1}),
    );
    assert_eq!(snap.status, 200, "{}", snap.text());
    let snap_id = snap.json()["snapshot_id"].as_str().unwrap().to_string();
    assert_eq!(owner(&snap_id), owner(id), "{snap_id}");
    let restored = proxy.call(
        "POST",
        "/v1/worker/sessions:restore",
        &json!({"version": 1, "snapshot_id": snap_id}),
    );
    assert_eq!(restored.status, 200, "{}", restored.text());
    let new = restored.json()["session_id"].as_str().unwrap().to_string();
    assert_eq!(owner(&new), owner(id));
    assert_eq!(
        stdout(&exec(&proxy, &new, "cat f.txt")),
        "made-in /workspace\n"
    );
    let download = proxy.call(
        "GET",
        &format!("/v1/worker/snapshots/{snap_id}"),
        &Value::Null,
    );
    assert_eq!(download.status, 200);

    // An id the client chooses goes to the node it names; one that names no node is
    // refused by whichever node gets it (421), for its later requests could not be routed.
    create(&proxy, Some("wasbox-2-mine"));
    assert_eq!(
        nodes[2].get("/v1/worker/sessions/wasbox-2-mine").status,
        200
    );
    let plain = proxy.call(
        "POST",
        "/v1/worker/sessions",
        &json!({"version": 1, "task_id": "t", "session_id": "mine", "image": "bash"}),
    );
    assert_eq!(plain.status, 421, "{}", plain.text());
    assert!(
        plain.text().contains("does not route to this node"),
        "{}",
        plain.text()
    );
    // And a job id likewise: routed by the body.
    let job = proxy.call(
        "POST",
        "/v1/worker/jobs:run",
        &json!({"version": 1, "task_id": "t", "job_id": "wasbox-1-job",
                "sandbox": {"image": "bash", "command": ["sh", "-c", "echo job"]}}),
    );
    assert_eq!(job.status, 200, "{}", job.text());
    assert_eq!(job.json()["stdout"], "job\n", "{}", job.text());
    assert_eq!(nodes[1].get("/v1/worker/jobs/wasbox-1-job").status, 200);
    assert_eq!(
        proxy
            .call("GET", "/v1/worker/jobs/wasbox-1-job", &Value::Null)
            .status,
        200
    );
}

#[test]
fn a_draining_node_leaves_the_rotation_while_the_others_serve_on() {
    let Some((mut nodes, proxy)) = fleet(&["--drain-delay", "4"]) else {
        return;
    };
    // Two sessions on each node, named by the client.
    let mut sessions = Vec::new();
    for n in NODES {
        for k in 0..2 {
            sessions.push(create(&proxy, Some(&format!("{n}-s{k}"))));
        }
    }
    // wasbox-1 is told to stop: it fails /readyz at once and goes on serving its own
    // sessions for the drain delay. Creates go on through the proxy as fast as they come,
    // from that moment: the ones that reach wasbox-1 before the proxy's health check takes
    // it out (up to a second) are refused there (503) and tried again on another node.
    let draining = nodes.remove(1);
    let _ = Command::new("kill")
        .args(["-TERM", &draining.child.id().to_string()])
        .status();
    let mut created = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(1500) {
        let id = create(&proxy, None);
        assert_ne!(owner(&id), 1, "a create went to the draining node");
        created.push(id);
    }
    assert_eq!(draining.get("/readyz").status, 503);
    assert_eq!(
        stdout(&exec(&proxy, "wasbox-1-s0", "echo still-served")),
        "still-served\n"
    );
    // Meanwhile and after, creates through the proxy all succeed, on the other nodes, and
    // no request for another node's session fails.
    while start.elapsed() < Duration::from_secs(6) {
        let id = create(&proxy, None);
        assert_ne!(owner(&id), 1, "a create went to the draining node");
        for s in sessions.iter().filter(|s| owner(s) != 1) {
            assert_eq!(stdout(&exec(&proxy, s, "echo ok")), "ok\n", "{s}");
        }
        created.push(id);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(created.len() >= 10, "{created:?}");
    for id in &created {
        assert_eq!(stdout(&exec(&proxy, id, "echo ok")), "ok\n", "{id}");
    }
    let mut draining = draining;
    assert!(draining.terminate().success(), "{}", draining.log());
}

/// `deploy/fleet-local`, the README's one command for a fleet on one machine: three nodes
/// and the proxy come up, a create through the endpoint gets a node's id, and SIGTERM stops
/// every process of it.
#[test]
fn fleet_local_starts_three_nodes_behind_one_endpoint() {
    if haproxy().is_none() {
        return;
    }
    // Four free ports in a row: the endpoint's and the nodes'.
    let port = (0..200)
        .map(|k| 20_000 + (std::process::id() as u16 % 500) * 64 + k * 4)
        .find(|p| (0..4).all(|i| TcpListener::bind(("127.0.0.1", p + i)).is_ok()))
        .expect("four free ports");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    use std::os::unix::process::CommandExt as _;
    let mut child = Command::new(root().join("deploy/fleet-local"))
        .env("WASBOX", env!("CARGO_BIN_EXE_wasbox"))
        .env("WASBOX_FLEET_PORT", port.to_string())
        .env("WASBOX_FLEET_DIR", dir.path().join("state"))
        .env("WASBOX_TOKEN", TOKEN)
        .env("WASBOX_CACHE_DIR", crate::support::runtime::cache_dir())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !std::fs::read_to_string(&out)
        .unwrap_or_default()
        .contains("Ctrl-C stops")
    {
        assert!(Instant::now() < deadline, "fleet-local did not come up");
        assert!(child.try_wait().unwrap().is_none(), "fleet-local ended");
        std::thread::sleep(Duration::from_millis(100));
    }
    let endpoint: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let r = request(
        endpoint,
        "POST",
        "/v1/worker/sessions",
        &[
            ("Authorization", &format!("Bearer {TOKEN}")),
            ("Content-Type", "application/json"),
        ],
        br#"{"version": 1, "task_id": "t", "image": "bash"}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    owner(r.json()["session_id"].as_str().unwrap());
    let pgid = child.id().to_string();
    let _ = Command::new("kill").args(["-TERM", &pgid]).status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "fleet-local did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Its nodes and its proxy went with it.
    let deadline = Instant::now() + Duration::from_secs(30);
    while (0..4).any(|i| std::net::TcpStream::connect(("127.0.0.1", port + i)).is_ok()) {
        assert!(
            Instant::now() < deadline,
            "a process of the fleet outlived it"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
