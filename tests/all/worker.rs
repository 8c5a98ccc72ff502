//! The worker API node (`wasbox serve`): the real binary over loopback HTTP.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::http::{Server, TOKEN, request};

fn job(job_id: &str, command: Value) -> Value {
    json!({
        "version": 1,
        "task_id": "task-1",
        "job_id": job_id,
        "sandbox": {"image": "alpine:latest", "command": command}
    })
}

/// Sends a job from another thread (so the test can act while it runs); join for the answer.
fn run_in_background(
    addr: std::net::SocketAddr,
    body: Value,
) -> std::thread::JoinHandle<crate::support::http::Reply> {
    std::thread::spawn(move || {
        let body = serde_json::to_vec(&body).unwrap();
        request(
            addr,
            "POST",
            "/v1/worker/jobs:run",
            &[("Authorization", &format!("Bearer {TOKEN}"))],
            &body,
        )
    })
}

fn problem(r: &crate::support::http::Reply, status: u16, kind: &str) -> Value {
    assert_eq!(r.status, status, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    let p = r.json();
    assert_eq!(p["type"], format!("urn:cynodeai:error:{kind}"), "{p}");
    assert_eq!(p["status"], status);
    assert!(p["title"].is_string() && p["detail"].is_string(), "{p}");
    p
}

#[test]
fn health_and_readiness() {
    let s = Server::start(&[]);
    let r = request(s.addr, "GET", "/healthz", &[], b"");
    assert_eq!((r.status, r.text().as_str()), (200, "ok"));
    let r = request(s.addr, "GET", "/readyz", &[], b"");
    assert_eq!((r.status, r.text().as_str()), (200, "ready"));
}

#[test]
fn run_a_job() {
    let s = Server::start(&[]);
    let mut req = job(
        "job-a",
        json!([
            "bash",
            "-lc",
            "echo hello; echo $CYNODE_TASK_ID $CYNODE_JOB_ID $CYNODE_WORKSPACE_DIR $KEY; pwd; echo oops >&2; exit 3"
        ]),
    );
    req["sandbox"]["env"] =
        json!({"KEY": "VALUE", "CYNODE_JOB_ID": "forged", "CYNODE_WORKSPACE_DIR": "/etc"});
    req["sandbox"]["timeout_seconds"] = json!(30);
    req["sandbox"]["network_policy"] = json!("restricted");
    req["unknown_field"] = json!("ignored");
    let r = s.post("/v1/worker/jobs:run", &req);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["version"], 1);
    assert_eq!(v["task_id"], "task-1");
    assert_eq!(v["job_id"], "job-a");
    assert_eq!(v["status"], "failed");
    assert_eq!(v["exit_code"], 3);
    assert_eq!(
        v["stdout"],
        "hello\ntask-1 job-a /workspace VALUE\n/workspace\n"
    );
    assert_eq!(v["stderr"], "oops\n");
    assert_eq!(v["truncated"], json!({"stdout": false, "stderr": false}));
    for t in ["started_at", "ended_at"] {
        let t = v[t].as_str().unwrap();
        assert!(
            t.len() >= 20 && t.ends_with('Z') && t.as_bytes()[10] == b'T',
            "{t}"
        );
    }
    let ok = s
        .post(
            "/v1/worker/jobs:run",
            &job("job-b", json!(["sh", "-c", "echo fine"])),
        )
        .json();
    assert_eq!(
        (ok["status"].as_str(), ok["exit_code"].as_i64()),
        (Some("completed"), Some(0))
    );
}

#[test]
fn authentication() {
    let s = Server::start(&[]);
    let body = serde_json::to_vec(&job("j", json!(["true"]))).unwrap();
    let r = request(s.addr, "POST", "/v1/worker/jobs:run", &[], &body);
    let p = problem(&r, 401, "authentication");
    assert_eq!(p["title"], "Unauthorized");
    assert_eq!(p["detail"], "Invalid or missing bearer token");
    let r = request(
        s.addr,
        "POST",
        "/v1/worker/jobs:run",
        &[("Authorization", "Bearer wrong")],
        &body,
    );
    problem(&r, 401, "authentication");
    let r = request(
        s.addr,
        "POST",
        "/v1/worker/jobs:run",
        &[("Authorization", TOKEN)],
        &body,
    );
    problem(&r, 401, "authentication");
    // The token is checked before the body is read: an oversized body still gets 401.
    let huge = vec![b'x'; 11 << 20];
    let r = request(s.addr, "POST", "/v1/worker/jobs:run", &[], &huge);
    problem(&r, 401, "authentication");
    let r = request(s.addr, "GET", "/v1/worker/sessions/x", &[], b"");
    problem(&r, 401, "authentication");
    assert!(!s.log().contains(TOKEN), "the token was logged");
}

#[test]
fn validation_errors() {
    let s = Server::start(&[]);
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"task_id": "t", "job_id": "j", "sandbox": {"image": "i", "command": ["true"]}}),
            "version is required",
        ),
        (
            json!({"version": 2, "task_id": "t", "job_id": "j", "sandbox": {"image": "i", "command": ["true"]}}),
            "version must be 1",
        ),
        (
            json!({"version": 1, "job_id": "j", "sandbox": {"image": "i", "command": ["true"]}}),
            "task_id is required",
        ),
        (
            json!({"version": 1, "task_id": "", "job_id": "j", "sandbox": {"image": "i", "command": ["true"]}}),
            "task_id is required",
        ),
        (
            json!({"version": 1, "task_id": "t", "sandbox": {"image": "i", "command": ["true"]}}),
            "job_id is required",
        ),
        (
            json!({"version": 1, "task_id": "t", "job_id": "j"}),
            "sandbox is required",
        ),
        (
            json!({"version": 1, "task_id": "t", "job_id": "j", "sandbox": {"command": ["true"]}}),
            "sandbox.image is required",
        ),
        (
            json!({"version": 1, "task_id": "t", "job_id": "j", "sandbox": {"image": "i", "command": []}}),
            "sandbox.command must not be empty",
        ),
        (
            json!({"version": 1, "task_id": "t", "job_id": "j", "sandbox": {"image": "i"}}),
            "sandbox.command is required",
        ),
        (
            json!({"version": 1, "task_id": "t", "job_id": "j", "sandbox": {"image": "i", "command": ["true"], "network_policy": "open"}}),
            "network_policy",
        ),
        (
            json!({"version": 1, "task_id": "t", "job_id": "j", "sandbox": {"image": "i", "command": ["true"], "timeout_seconds": 0}}),
            "timeout_seconds must be a positive integer",
        ),
    ];
    for (body, detail) in cases {
        let r = s.post("/v1/worker/jobs:run", &body);
        let p = problem(&r, 400, "validation");
        assert!(
            p["detail"].as_str().unwrap().contains(detail),
            "{body}: {p}"
        );
    }
    let auth = format!("Bearer {TOKEN}");
    let r = request(
        s.addr,
        "POST",
        "/v1/worker/jobs:run",
        &[("Authorization", &auth)],
        b"{not json",
    );
    let p = problem(&r, 400, "validation");
    assert!(
        p["detail"].as_str().unwrap().starts_with("invalid JSON"),
        "{p}"
    );
    let r = request(
        s.addr,
        "POST",
        "/v1/worker/jobs:run",
        &[("Authorization", &auth)],
        b"",
    );
    problem(&r, 400, "validation");
    let r = s.get("/v1/worker/nope");
    problem(&r, 404, "not_found");
    // The node still serves after all of that.
    let ok = s
        .post("/v1/worker/jobs:run", &job("after", json!(["echo", "ok"])))
        .json();
    assert_eq!(ok["stdout"], "ok\n");
}

#[test]
fn configured_limits_images_and_timeouts() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("node.yaml");
    std::fs::write(
        &yaml,
        "worker_api:\n  max_request_bytes: 4096\nsandbox:\n  timeouts:\n    default_seconds: 1\n    max_seconds: 2\n  images:\n    - match: \"bash:*\"\n      image: base\n",
    )
    .unwrap();
    let constraints = dir.path().join("node-config.json");
    std::fs::write(
        &constraints,
        r#"{"version":1,"constraints":{"max_request_bytes":2048}}"#,
    )
    .unwrap();
    let s = Server::start(&[
        "--config",
        yaml.to_str().unwrap(),
        "--constraints",
        constraints.to_str().unwrap(),
    ]);

    let mut ok = job("img", json!(["echo", "allowed"]));
    ok["sandbox"]["image"] = json!("bash:5.2");
    assert_eq!(
        s.post("/v1/worker/jobs:run", &ok).json()["stdout"],
        "allowed\n"
    );
    let p = problem(
        &s.post("/v1/worker/jobs:run", &job("img2", json!(["true"]))),
        400,
        "validation",
    );
    assert!(
        p["detail"].as_str().unwrap().contains("alpine:latest"),
        "{p}"
    );

    // 2048 bytes (the constraint beats the YAML's 4096).
    let mut big = job("big", json!(["true"]));
    big["sandbox"]["image"] = json!("bash:5");
    big["sandbox"]["env"] = json!({"PAD": "x".repeat(3000)});
    let r = s.post("/v1/worker/jobs:run", &big);
    let p = problem(&r, 413, "validation");
    assert_eq!(p["title"], "Request Entity Too Large");

    // Default 1 s, max 2 s: a 30 s request is cut to 2 s.
    let mut slow = job("slow", json!(["sh", "-c", "echo start; sleep 30"]));
    slow["sandbox"]["image"] = json!("bash:5");
    slow["sandbox"]["timeout_seconds"] = json!(30);
    let started = Instant::now();
    let v = s.post("/v1/worker/jobs:run", &slow).json();
    let took = started.elapsed();
    assert_eq!(
        (v["status"].as_str(), v["exit_code"].as_i64()),
        (Some("timeout"), Some(-1)),
        "{v}"
    );
    assert_eq!(v["stdout"], "start\n");
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(10),
        "{took:?}"
    );
    let mut dflt = slow.clone();
    dflt["job_id"] = json!("slow-default");
    dflt["sandbox"]
        .as_object_mut()
        .unwrap()
        .remove("timeout_seconds");
    let started = Instant::now();
    assert_eq!(
        s.post("/v1/worker/jobs:run", &dflt).json()["status"],
        "timeout"
    );
    assert!(
        started.elapsed() < Duration::from_millis(1900),
        "default timeout is 1 s"
    );
}

#[test]
fn output_is_truncated_at_256_kib_on_a_character_boundary() {
    let s = Server::start(&[]);
    // "é\n" is 3 bytes: the 262144-byte limit falls just after the first byte of an é.
    let v = s
        .post(
            "/v1/worker/jobs:run",
            &job(
                "big",
                json!([
                    "sh",
                    "-c",
                    "yes é | head -c 400000; yes e | head -c 300000 >&2"
                ]),
            ),
        )
        .json();
    assert_eq!(v["truncated"], json!({"stdout": true, "stderr": true}));
    let out = v["stdout"].as_str().unwrap();
    assert_eq!(out.len(), 262143);
    assert!(out.ends_with("é\n"));
    assert_eq!(v["stderr"].as_str().unwrap().len(), 262144);
    assert_eq!(v["status"], "completed");
}

#[test]
fn a_hundred_concurrent_jobs() {
    let s = Server::start(&[]);
    let addr = s.addr;
    let threads: Vec<_> = (0..100)
        .map(|i| {
            std::thread::spawn(move || {
                let body = serde_json::to_vec(&job(
                    &format!("c{i}"),
                    json!(["sh", "-c", format!("echo job {i} | tr a-z A-Z")]),
                ))
                .unwrap();
                let auth = format!("Bearer {TOKEN}");
                let r = request(
                    addr,
                    "POST",
                    "/v1/worker/jobs:run",
                    &[("Authorization", &auth)],
                    &body,
                );
                (i, r.status, r.json())
            })
        })
        .collect();
    for t in threads {
        let (i, status, v) = t.join().unwrap();
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["job_id"], format!("c{i}"));
        assert_eq!(v["stdout"], format!("JOB {i}\n"));
    }
}

#[test]
fn concurrency_limit_gives_429() {
    let s = Server::start(&["--max-concurrent", "1"]);
    let addr = s.addr;
    let long = run_in_background(addr, job("long", json!(["sleep", "2"])));
    std::thread::sleep(Duration::from_millis(500));
    let r = s.post("/v1/worker/jobs:run", &job("second", json!(["true"])));
    problem(&r, 429, "rate_limit");
    assert_eq!(long.join().unwrap().json()["status"], "completed");
    assert_eq!(
        s.post("/v1/worker/jobs:run", &job("third", json!(["true"])))
            .status,
        200
    );
}

#[test]
fn a_repeated_job_id_runs_once() {
    let s = Server::start(&[]);
    let addr = s.addr;
    let send = move || {
        let body =
            serde_json::to_vec(&job("same", json!(["sh", "-c", "sleep 0.5; echo once"]))).unwrap();
        request(
            addr,
            "POST",
            "/v1/worker/jobs:run",
            &[("Authorization", &format!("Bearer {TOKEN}"))],
            &body,
        )
        .json()
    };
    let a = std::thread::spawn(send);
    std::thread::sleep(Duration::from_millis(100));
    let b = std::thread::spawn(send);
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    assert_eq!(a["stdout"], "once\n");
    assert_eq!(a, b, "both requests get the one run's answer");
    // A retry after it finished gets the same answer too.
    assert_eq!(send(), a);
}

#[test]
fn stop_a_running_job() {
    let s = Server::start(&[]);
    let addr = s.addr;
    let runner = run_in_background(
        addr,
        job("stoppable", json!(["sh", "-c", "echo began; sleep 60"])),
    );
    std::thread::sleep(Duration::from_millis(500));
    let stop = json!({"version": 1, "task_id": "task-1", "job_id": "stoppable"});
    let r = s.post("/v1/worker/jobs:stop", &stop).json();
    assert_eq!(r["status"], "stopping");
    let v = runner.join().unwrap().json();
    assert_eq!(v["status"], "failed");
    assert_eq!(v["stdout"], "began\n");
    assert!(
        v["stderr"].as_str().unwrap().contains("stopped by request"),
        "{v}"
    );
    let r = s.post("/v1/worker/jobs:stop", &stop).json();
    assert_eq!(r["status"], "not_running");
    let p = problem(
        &s.post("/v1/worker/jobs:stop", &json!({"version": 1})),
        400,
        "validation",
    );
    assert!(p["detail"].as_str().unwrap().contains("task_id"));
}

#[test]
fn sessions_keep_their_workspace() {
    let s = Server::start(&[]);
    let create = json!({"version": 1, "task_id": "task-s", "session_id": "sess-1", "image": "bash:latest", "env": {"MODE": "test"}});
    let v = s.post("/v1/worker/sessions", &create).json();
    assert_eq!(
        (v["session_id"].as_str(), v["status"].as_str()),
        (Some("sess-1"), Some("running"))
    );
    problem(&s.post("/v1/worker/sessions", &create), 409, "conflict");

    let exec = |cmd: Value| {
        s.post(
            "/v1/worker/sessions/sess-1/exec",
            &json!({"version": 1, "task_id": "task-s", "command": cmd}),
        )
    };
    let v = exec(json!([
        "sh",
        "-c",
        "echo round1 > notes.txt; mkdir -p src; echo $MODE"
    ]))
    .json();
    assert_eq!(
        (v["status"].as_str(), v["stdout"].as_str()),
        (Some("completed"), Some("test\n"))
    );
    let v = exec(json!("cat notes.txt; ls")).json();
    assert_eq!(v["stdout"], "round1\nnotes.txt\nsrc\n");
    let v = exec(json!(["sh", "-c", "exit 4"])).json();
    assert_eq!(v["exit_code"], 4);
    // `cwd`: a directory of the workspace or the image, relative to the workspace or not;
    // one that is not a directory is refused before anything runs.
    let exec_in = |cwd: &str| {
        s.post(
            "/v1/worker/sessions/sess-1/exec",
            &json!({"version": 1, "task_id": "task-s", "command": "pwd; ls", "cwd": cwd}),
        )
    };
    assert_eq!(exec_in("src").json()["stdout"], "/workspace/src\n");
    assert_eq!(
        exec_in("/workspace/src/").json()["stdout"],
        "/workspace/src\n"
    );
    assert!(
        exec_in("/etc").json()["stdout"]
            .as_str()
            .unwrap()
            .starts_with("/etc\n")
    );
    for bad in ["missing", "/workspace/notes.txt", "/no/such/dir"] {
        let p = problem(&exec_in(bad), 400, "validation");
        assert!(p["detail"].as_str().unwrap().contains(bad), "{bad}: {p}");
    }

    let r = s.put(
        "/v1/worker/sessions/sess-1/files?path=src/main.py",
        b"print('hi')\n",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["size"], 12);
    assert_eq!(
        exec(json!(["cat", "/workspace/src/main.py"])).json()["stdout"],
        "print('hi')\n"
    );
    let r = s.get("/v1/worker/sessions/sess-1/files?path=notes.txt");
    assert_eq!((r.status, r.body.as_slice()), (200, b"round1\n".as_slice()));
    problem(
        &s.get("/v1/worker/sessions/sess-1/files?path=missing"),
        404,
        "not_found",
    );
    problem(
        &s.get("/v1/worker/sessions/sess-1/files?path=../../etc/passwd"),
        400,
        "validation",
    );
    problem(
        &s.get("/v1/worker/sessions/sess-1/files"),
        400,
        "validation",
    );

    let v = s.get("/v1/worker/sessions/sess-1").json();
    assert_eq!(v["exec_count"], 7);
    let v = s
        .post("/v1/worker/sessions/sess-1/end", &json!({"version": 1}))
        .json();
    assert_eq!(v["status"], "ended");
    problem(&exec(json!(["true"])), 404, "not_found");
    problem(&s.get("/v1/worker/sessions/sess-1"), 404, "not_found");
    problem(
        &s.post("/v1/worker/sessions/sess-1/end", &json!({"version": 1})),
        404,
        "not_found",
    );
}

#[test]
fn idle_sessions_are_reaped() {
    let s = Server::start(&[]);
    let create = json!({"version": 1, "task_id": "t", "session_id": "idle", "image": "x", "idle_timeout_seconds": 1});
    assert_eq!(s.post("/v1/worker/sessions", &create).status, 200);
    let exec = json!({"version": 1, "command": ["sh", "-c", "sleep 1.5; echo busy"]});
    // A running exec keeps the session alive past its idle limit.
    assert_eq!(
        s.post("/v1/worker/sessions/idle/exec", &exec).json()["stdout"],
        "busy\n"
    );
    std::thread::sleep(Duration::from_millis(1600));
    problem(&s.get("/v1/worker/sessions/idle"), 404, "not_found");
    let lifetime = json!({"version": 1, "task_id": "t", "session_id": "short", "image": "x", "max_lifetime_seconds": 1});
    assert_eq!(s.post("/v1/worker/sessions", &lifetime).status, 200);
    std::thread::sleep(Duration::from_millis(1600));
    problem(&s.get("/v1/worker/sessions/short"), 404, "not_found");
}

#[test]
fn internal_errors_are_problems_without_causes() {
    // A node whose scratch directory is gone cannot make workspaces.
    let dir = tempfile::tempdir().unwrap();
    let scratch = dir.path().join("scratch");
    let s = Server::start_with(&[], &[("WASBOX_SCRATCH_DIR", scratch.to_str().unwrap())]);
    std::fs::remove_dir_all(&scratch).unwrap();
    let r = s.post("/v1/worker/jobs:run", &job("no-tmp", json!(["true"])));
    let p = problem(&r, 500, "internal");
    assert_eq!(p["detail"], "the node failed to process the request");
    assert_eq!(request(s.addr, "GET", "/healthz", &[], b"").status, 200);
}

#[test]
fn graceful_shutdown_lets_running_jobs_finish() {
    let mut s = Server::start(&[]);
    let addr = s.addr;
    let runner = run_in_background(
        addr,
        job("finishing", json!(["sh", "-c", "sleep 1; echo finished"])),
    );
    std::thread::sleep(Duration::from_millis(300));
    let status = s.terminate();
    assert!(status.success(), "{status:?}\n{}", s.log());
    let v = runner.join().unwrap().json();
    assert_eq!(
        (v["status"].as_str(), v["stdout"].as_str()),
        (Some("completed"), Some("finished\n"))
    );
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "still accepting after shutdown"
    );
}

/// A PTY client over the real HTTP endpoints.
struct PtyClient<'a> {
    s: &'a Server,
    session: &'a str,
    id: String,
}

impl PtyClient<'_> {
    fn open<'a>(s: &'a Server, session: &'a str) -> PtyClient<'a> {
        let r = s.post(
            &format!("/v1/worker/sessions/{session}/pty:open"),
            &json!({"version": 1, "task_id": "task-p", "session_id": session, "cols": 100, "rows": 30}),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        PtyClient {
            s,
            session,
            id: r.json()["pty_id"].as_str().unwrap().to_string(),
        }
    }

    fn body(&self, extra: Value) -> Value {
        let mut v = json!({"version": 1, "task_id": "task-p", "session_id": self.session, "pty_id": self.id});
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        v
    }

    fn send(&self, bytes: &[u8]) {
        use base64::Engine as _;
        let data = base64::engine::general_purpose::STANDARD.encode(bytes);
        let r = self.s.post(
            &format!("/v1/worker/sessions/{}/pty:send", self.session),
            &self.body(json!({"data_b64": data})),
        );
        assert_eq!(r.status, 200, "{}", r.text());
    }

    fn recv(&self, wait_ms: u64) -> Value {
        let r = self.s.get(&format!(
            "/v1/worker/sessions/{}/pty:recv?version=1&task_id=task-p&pty_id={}&wait_ms={wait_ms}",
            self.session, self.id
        ));
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()
    }

    /// Reads output until `want` appears (or 20 s pass); returns everything read.
    fn read_until(&self, want: &str) -> String {
        use base64::Engine as _;
        let mut all = String::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !all.contains(want) {
            assert!(Instant::now() < deadline, "never saw {want:?}; got {all:?}");
            let v = self.recv(1000);
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(v["data_b64"].as_str().unwrap())
                .unwrap();
            all.push_str(&String::from_utf8_lossy(&bytes));
            if v["exited"] == true && !all.contains(want) {
                panic!("program exited before {want:?}; got {all:?}");
            }
        }
        all
    }
}

#[test]
fn pty_round_trip() {
    let s = Server::start(&[]);
    let create = json!({"version": 1, "task_id": "task-p", "session_id": "ps", "image": "bash"});
    assert_eq!(s.post("/v1/worker/sessions", &create).status, 200);
    let pty = PtyClient::open(&s, "ps");
    pty.read_until("$ ");
    pty.send(b"echo hi\r");
    let out = pty.read_until("hi\r\n$ ");
    assert!(
        out.starts_with("echo hi\r\n"),
        "typed input is echoed: {out:?}"
    );

    // Line editing: backspace removes a character, Ctrl-U the whole line.
    pty.send(b"echo abX\x7fc\r");
    pty.read_until("abc\r\n$ ");
    pty.send(b"junk\x15echo clean\r");
    pty.read_until("clean\r\n$ ");

    // An expansion error abandons the command line; an interactive shell goes on (bash).
    pty.send(b"echo ${x:?unset here}; echo not-reached\r");
    pty.read_until("x: unset here\r\n$ ");
    pty.send(b"echo $((1/0)); echo not-reached\r");
    let out = pty.read_until("$ ");
    assert_eq!(
        out.matches("not-reached").count(),
        1,
        "only the echo: {out:?}"
    );
    pty.send(b"echo status=$?\r");
    pty.read_until("status=1\r\n$ ");

    // Ctrl-C interrupts the running program; the shell goes on.
    pty.send(b"sleep 100\r");
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    pty.send(b"\x03");
    pty.read_until("^C\r\n");
    pty.send(b"echo status=$?\r");
    pty.read_until("status=130\r\n$ ");
    assert!(started.elapsed() < Duration::from_secs(10));
    // Lines typed ahead while a program runs are flushed by Ctrl-C, never run after it
    // (the shell is given one line per read, as by a tty, so it holds none of them).
    pty.send(b"sleep 100\recho typed-ahead > ahead.txt\r");
    std::thread::sleep(Duration::from_millis(300));
    pty.send(b"\x03");
    pty.read_until("^C\r\n");
    pty.send(b"ls ahead.txt; echo done-$((6*7))\r");
    let out = pty.read_until("done-42");
    assert!(out.contains("No such file"), "{out:?}");

    // The program sees the terminal size, and a resize.
    pty.send(b"echo $COLUMNS $LINES\r");
    pty.read_until("100 30\r\n$ ");
    let r = s.post(
        "/v1/worker/sessions/ps/pty:resize",
        &pty.body(json!({"cols": 132, "rows": 43})),
    );
    assert_eq!(r.json()["status"], "resized");
    pty.send(b"echo $COLUMNS $LINES\r");
    pty.read_until("132 43\r\n$ ");

    // Files written in the PTY are in the session's workspace.
    pty.send(b"echo from-pty > p.txt\r");
    pty.read_until("$ ");
    let exec = s.post(
        "/v1/worker/sessions/ps/exec",
        &json!({"version": 1, "command": ["cat", "p.txt"]}),
    );
    assert_eq!(exec.json()["stdout"], "from-pty\n");

    // Ctrl-D ends input: the shell exits and the PTY reports it.
    pty.send(b"\x04");
    pty.read_until("exit\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = pty.recv(500);
        if v["exited"] == true {
            assert_eq!(v["exit_code"], 0);
            break;
        }
        assert!(Instant::now() < deadline, "pty never reported its exit");
    }
    let r = s.post("/v1/worker/sessions/ps/pty:close", &pty.body(json!({})));
    assert_eq!(r.json()["status"], "closed");
    problem(
        &s.post("/v1/worker/sessions/ps/pty:close", &pty.body(json!({}))),
        404,
        "not_found",
    );
}

#[test]
fn pty_errors_and_session_end() {
    let s = Server::start(&[]);
    let create = json!({"version": 1, "task_id": "task-p", "session_id": "pe", "image": "bash"});
    assert_eq!(s.post("/v1/worker/sessions", &create).status, 200);
    let pty = PtyClient::open(&s, "pe");
    pty.read_until("$ ");
    let bad = s.post(
        "/v1/worker/sessions/pe/pty:send",
        &pty.body(json!({"data_b64": "!!not base64"})),
    );
    problem(&bad, 400, "validation");
    let huge = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(vec![b'a'; 70_000])
    };
    let r = s.post(
        "/v1/worker/sessions/pe/pty:send",
        &pty.body(json!({"data_b64": huge})),
    );
    problem(&r, 413, "validation");
    let r = s.post(
        "/v1/worker/sessions/pe/pty:send",
        &json!({"version": 1, "task_id": "task-p", "pty_id": "nope", "data_b64": ""}),
    );
    problem(&r, 404, "not_found");
    let r = s.post(
        "/v1/worker/sessions/pe/pty:send",
        &json!({"version": 1, "task_id": "other", "pty_id": pty.id, "data_b64": ""}),
    );
    problem(&r, 400, "validation");
    let r = s.post(
        "/v1/worker/sessions/nope/pty:open",
        &json!({"version": 1, "task_id": "task-p"}),
    );
    problem(&r, 404, "not_found");
    // Ending the session ends its PTYs.
    assert_eq!(
        s.post("/v1/worker/sessions/pe/end", &json!({"version": 1}))
            .status,
        200
    );
    let r = s.get(&format!(
        "/v1/worker/sessions/pe/pty:recv?task_id=task-p&pty_id={}",
        pty.id
    ));
    problem(&r, 404, "not_found");
}

#[test]
fn pty_close_answers_once_its_program_has_ended() {
    // A fork refuses a session with a process running (409). `pty:close` answers after the
    // PTY's program has ended, so a fork asked for at once finds nothing running, even when
    // the PTY was busy (a pipeline of programs, each to be stopped).
    let s = Server::start(&[]);
    let create = json!({"version": 1, "task_id": "task-p", "session_id": "pc", "image": "bash"});
    assert_eq!(s.post("/v1/worker/sessions", &create).status, 200);
    for round in 0..20 {
        let pty = PtyClient::open(&s, "pc");
        pty.read_until("$ ");
        pty.send(b"yes | head -c 100000000 | wc -c; sleep 100\r");
        std::thread::sleep(Duration::from_millis(100));
        let r = s.post("/v1/worker/sessions/pc/pty:close", &pty.body(json!({})));
        assert_eq!(r.json()["status"], "closed");
        let fork = s.post(
            "/v1/worker/sessions/pc:fork",
            &json!({"version": 1, "count": 1}),
        );
        assert_eq!(fork.status, 200, "round {round}: {}", fork.text());
        let child = fork.json()["session_ids"][0].as_str().unwrap().to_string();
        assert_eq!(
            s.post(
                &format!("/v1/worker/sessions/{child}/end"),
                &json!({"version": 1})
            )
            .status,
            200
        );
    }
}

#[test]
fn not_ready_until_the_image_is_compiled() {
    // A compile cache holding every program of the image but `sh` (copied from the tests'
    // cache; its entries still hold elsewhere): the node is not ready until it has
    // compiled that one.
    let cache = tempfile::tempdir().unwrap();
    let mut copied = 0;
    for entry in std::fs::read_dir(crate::support::runtime::cache_dir()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().unwrap().is_file() && !name.starts_with("sh-") {
            std::fs::copy(entry.path(), cache.path().join(&name)).unwrap();
            copied += 1;
        }
    }
    assert!(copied > 4, "{copied}");
    let s = Server::start_unready(&["--cache-dir", cache.path().to_str().unwrap()]);
    let r = request(s.addr, "GET", "/readyz", &[], b"");
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.text(), "the sandbox image is still loading");
    assert_eq!(request(s.addr, "GET", "/healthz", &[], b"").text(), "ok");
    s.wait_ready();
    let v = s
        .post(
            "/v1/worker/jobs:run",
            &job("after-ready", json!(["echo", "ready"])),
        )
        .json();
    assert_eq!(v["stdout"], "ready\n");
}

#[test]
fn every_refusal_at_the_edge_is_a_problem() {
    let s = Server::start(&[]);
    let auth = format!("Bearer {TOKEN}");
    // NUL anywhere in a JSON body: an argument, an environment name or value, an id.
    let mut with_nul_arg = job("nul-1", json!(["echo", "a\u{0}b"]));
    let p = problem(
        &s.post("/v1/worker/jobs:run", &with_nul_arg),
        400,
        "validation",
    );
    assert!(
        p["detail"].as_str().unwrap().contains("sandbox.command[1]"),
        "{p}"
    );
    with_nul_arg["sandbox"]["command"] = json!(["true"]);
    with_nul_arg["sandbox"]["env"] = json!({"A\u{0}B": "1"});
    problem(
        &s.post("/v1/worker/jobs:run", &with_nul_arg),
        400,
        "validation",
    );
    let create = json!({"version": 1, "task_id": "t", "session_id": "s\u{0}1", "image": "bash"});
    problem(&s.post("/v1/worker/sessions", &create), 400, "validation");
    // Query values and path segments axum itself refuses.
    let create = json!({"version": 1, "task_id": "t", "session_id": "q1", "image": "bash"});
    assert_eq!(s.post("/v1/worker/sessions", &create).status, 200);
    let r = s.get("/v1/worker/sessions/q1/pty:recv?version=1&task_id=t&pty_id=x&wait_ms=abc");
    let p = problem(&r, 400, "validation");
    assert!(p["detail"].as_str().unwrap().contains("wait_ms"), "{p}");
    let r = request(
        s.addr,
        "GET",
        "/v1/worker/sessions/%FF%FE/files?path=a",
        &[("Authorization", &auth)],
        b"",
    );
    problem(&r, 400, "validation");
    // A wrong method keeps its Allow header.
    let r = request(
        s.addr,
        "GET",
        "/v1/worker/jobs:run",
        &[("Authorization", &auth)],
        b"",
    );
    problem(&r, 405, "validation");
    assert!(
        r.header("allow").is_some_and(|a| a.contains("POST")),
        "{:?}",
        r.header("allow")
    );
    // The node still serves.
    let r = s.post("/v1/worker/jobs:run", &job("after", json!(["echo", "ok"])));
    assert_eq!(r.json()["stdout"], "ok\n");
}

/// Waits until the server closes `s` (reading whatever it sends); the bytes and how long
/// it took.
fn until_closed(s: &mut std::net::TcpStream, limit: Duration) -> (Vec<u8>, Duration) {
    use std::io::Read as _;
    let start = Instant::now();
    s.set_read_timeout(Some(limit)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the server kept the connection past {limit:?}: {e}"),
        }
    }
    (got, start.elapsed())
}

#[test]
fn slow_and_surplus_clients_are_bounded() {
    use std::io::Write as _;
    use std::net::TcpStream;
    let s = Server::start(&[
        "--max-connections",
        "2",
        "--header-timeout",
        "3",
        "--body-timeout",
        "2",
    ]);
    // The readiness probes' connections end on the server's side shortly after their
    // answers; give them that time, so that the two below get both places.
    std::thread::sleep(Duration::from_millis(500));
    // Two connections that never finish a request's head hold both places...
    let mut silent = TcpStream::connect(s.addr).unwrap();
    let mut partial = TcpStream::connect(s.addr).unwrap();
    partial
        .write_all(b"GET /v1/worker/sessions/x HTTP/1.1\r\nHost: a\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // ...so a third is answered 503 with a problem and closed.
    let mut third = TcpStream::connect(s.addr).unwrap();
    third
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    let (busy, _) = until_closed(&mut third, Duration::from_secs(5));
    let busy = String::from_utf8_lossy(&busy);
    assert!(busy.starts_with("HTTP/1.1 503"), "{busy}");
    assert!(busy.contains("application/problem+json"), "{busy}");
    assert!(busy.contains("Retry-After: 1"), "{busy}");
    // The slow two are closed at their deadline, and their places come back.
    for c in [&mut silent, &mut partial] {
        let (got, took) = until_closed(c, Duration::from_secs(20));
        assert!(
            !String::from_utf8_lossy(&got).contains(" 503 "),
            "a slow client was refused, not held"
        );
        assert!(took < Duration::from_secs(10), "closed after {took:?}");
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while request(s.addr, "GET", "/healthz", &[], b"").status != 200 {
        assert!(Instant::now() < deadline, "the places never came back");
        std::thread::sleep(Duration::from_millis(50));
    }

    // A body slower than its deadline is 408, and the server goes on serving.
    let mut slow = TcpStream::connect(s.addr).unwrap();
    slow.write_all(
        format!(
            "POST /v1/worker/jobs:run HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"version\""
        )
        .as_bytes(),
    )
    .unwrap();
    let (answer, took) = until_closed(&mut slow, Duration::from_secs(20));
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("application/problem+json"), "{answer}");
    assert!(took < Duration::from_secs(10), "answered after {took:?}");
    let v = s
        .post(
            "/v1/worker/jobs:run",
            &job("after-slow", json!(["echo", "ok"])),
        )
        .json();
    assert_eq!(v["stdout"], "ok\n", "{v}");
}

#[test]
fn a_server_killed_under_load_restarts_clean() {
    use crate::support::http::address_in;
    use crate::support::runtime::{spawn_server, wasbox};
    let dir = tempfile::tempdir().unwrap();
    let scratch = dir.path().join("scratch");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let start = |log: &str| {
        let mut cmd = wasbox();
        cmd.args(["serve", "--listen", &listen, "--token", TOKEN])
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .env("WASBOX_SCRATCH_DIR", &scratch)
            .env("WASBOX_LOG", "info");
        let (child, line) = spawn_server(cmd, &dir.path().join(log));
        let addr = address_in(&line);
        let deadline = Instant::now() + Duration::from_secs(60);
        while request(addr, "GET", "/readyz", &[], b"").status != 200 {
            assert!(Instant::now() < deadline, "never ready");
            std::thread::sleep(Duration::from_millis(50));
        }
        (child, addr)
    };
    let auth = format!("Bearer {TOKEN}");
    let post = |addr, path: &str, body: Value| {
        request(
            addr,
            "POST",
            path,
            &[("Authorization", &auth)],
            &serde_json::to_vec(&body).unwrap(),
        )
    };

    let (mut first, addr) = start("first.log");
    // Sessions with files in their workspaces, a PTY, and jobs running when it dies.
    for i in 0..5 {
        let create =
            json!({"version": 1, "task_id": "t", "session_id": format!("s{i}"), "image": "x"});
        assert_eq!(post(addr, "/v1/worker/sessions", create).status, 200);
        let exec = json!({"version": 1, "command": ["sh", "-c", "mkdir -p d && seq 1 1000 > d/f"]});
        assert_eq!(
            post(addr, &format!("/v1/worker/sessions/s{i}/exec"), exec).status,
            200
        );
    }
    let pty = post(
        addr,
        "/v1/worker/sessions/s0/pty:open",
        json!({"version": 1, "task_id": "t"}),
    );
    assert_eq!(pty.status, 200, "{}", pty.text());
    let running: Vec<_> = (0..4)
        .map(|i| run_in_background(addr, job(&format!("long{i}"), json!(["sleep", "30"]))))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let leftovers = std::fs::read_dir(&scratch).unwrap().count();
    assert_eq!(leftovers, 1, "one scratch root for the running server");
    first.kill().unwrap(); // SIGKILL: no cleanup at all
    first.wait().unwrap();
    for r in running {
        // The connections die with the server; none of them hangs.
        let _ = r.join();
    }
    let root = std::fs::read_dir(&scratch)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(
        std::fs::read_dir(&root).unwrap().count() >= 5,
        "the killed server left its workspaces behind"
    );

    // Same port, same scratch directory: it starts, and what the killed one left is gone.
    let (mut second, addr) = start("second.log");
    assert!(
        !root.exists(),
        "the killed server's workspaces were not removed"
    );
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 1);
    let v = post(
        addr,
        "/v1/worker/jobs:run",
        job("after", json!(["echo", "ok"])),
    )
    .json();
    assert_eq!(v["stdout"], "ok\n", "{v}");
    let r = request(
        addr,
        "GET",
        "/v1/worker/sessions/s0",
        &[("Authorization", &auth)],
        b"",
    );
    assert_eq!(r.status, 404, "sessions do not survive a crash");
    second.kill().unwrap();
    second.wait().unwrap();
}
