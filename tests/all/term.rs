//! Term agents end to end: the real `wasbox agent ...` binary, real sockets and pipes, the
//! real example agents (Rust, and Python built with `wasbox agent build`), and a small LLM
//! proxy on loopback that answers from a script.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::http::{Reply, read_address, request};
use crate::support::runtime::{run_bounded, text, wasbox};

// ---------------------------------------------------------------------------------------
// A scripted LLM proxy
// ---------------------------------------------------------------------------------------

#[derive(Clone)]
enum Answer {
    /// HTTP status and JSON body.
    Json(u16, Value),
    /// Never answers (the connection stays open).
    Hang,
}

/// A successful completion whose content is `content`.
fn says(content: &str) -> Answer {
    Answer::Json(
        200,
        json!({
            "success": true,
            "content": content,
            "model": "test-model",
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            "cost_usd": 0.0001,
        }),
    )
}

fn command(cmd: &str) -> Answer {
    says(&json!({"command": cmd, "task_complete": false}).to_string())
}

fn complete() -> Answer {
    says(r#"{"command": null, "task_complete": true}"#)
}

struct LlmProxy {
    addr: SocketAddr,
    /// Every request body, in order.
    requests: Arc<Mutex<Vec<(String, Value)>>>,
}

impl LlmProxy {
    /// Answers each call with the next answer; the last one repeats.
    fn start(script: Vec<Answer>) -> LlmProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let (seen, script) = (seen.clone(), script.clone());
                std::thread::spawn(move || serve_one(conn, &seen, &script));
            }
        });
        LlmProxy { addr, requests }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn requests(&self) -> Vec<(String, Value)> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve_one(
    conn: TcpStream,
    seen: &Mutex<Vec<(String, Value)>>,
    script: &Mutex<VecDeque<Answer>>,
) {
    let mut r = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    if r.read_line(&mut line).is_err() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let mut len = 0;
    loop {
        let mut h = String::new();
        r.read_line(&mut h).unwrap();
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    seen.lock()
        .unwrap()
        .push((path, serde_json::from_slice(&body).unwrap_or(Value::Null)));
    let answer = {
        let mut s = script.lock().unwrap();
        if s.len() > 1 {
            s.pop_front().unwrap()
        } else {
            s.front().cloned().unwrap_or(Answer::Hang)
        }
    };
    let mut conn = conn;
    match answer {
        Answer::Hang => std::thread::sleep(Duration::from_secs(600)),
        Answer::Json(status, body) => {
            let body = body.to_string();
            let _ = write!(
                conn,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Agents
// ---------------------------------------------------------------------------------------

/// Builds a Python agent with `wasbox agent build` (once per test binary).
fn python_agent(source: &Path, cell: &'static OnceLock<PathBuf>) -> &'static Path {
    cell.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("term-agents");
        let out = dir.join(source.with_extension("wasm").file_name().unwrap());
        // Built from a copy: componentize-py leaves a `__pycache__` beside the sources it
        // imports, which in the repository would make the next build run the runtime's
        // build script again (it watches `guest-components/`).
        let copy = dir
            .join(format!(
                "src-{}",
                source.file_stem().unwrap().to_string_lossy()
            ))
            .join(source.file_name().unwrap());
        std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
        std::fs::copy(source, &copy).unwrap();
        let mut cmd = wasbox();
        cmd.args(["term", "build"]).arg(&copy).arg("-o").arg(&out);
        let o = run_bounded(cmd, Duration::from_secs(600));
        assert!(
            o.status.success(),
            "agent build failed: {}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
        out
    })
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `guest-components/agents/python/llm_agent.py`, built.
fn python_llm_agent() -> &'static Path {
    static CELL: OnceLock<PathBuf> = OnceLock::new();
    python_agent(
        &repo().join("guest-components/agents/python/llm_agent.py"),
        &CELL,
    )
}

/// `tests/agents/probe_agent.py`, built.
fn probe_agent() -> &'static Path {
    static CELL: OnceLock<PathBuf> = OnceLock::new();
    python_agent(&repo().join("tests/agents/probe_agent.py"), &CELL)
}

/// A running `wasbox agent serve`, killed when dropped.
struct AgentServer {
    addr: SocketAddr,
    child: Child,
    workdir: tempfile::TempDir,
    stderr: Arc<Mutex<String>>,
}

impl Drop for AgentServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl AgentServer {
    fn start(agent: &str, proxy: &LlmProxy) -> AgentServer {
        let workdir = tempfile::tempdir().unwrap();
        let mut cmd = wasbox();
        cmd.args([
            "term",
            "serve",
            agent,
            "--listen",
            "127.0.0.1:0",
            "--workdir",
        ])
        .arg(workdir.path())
        .env("LLM_PROXY_URL", proxy.url())
        .env("TERM_AGENT_HASH", "hash-123")
        .env("TERM_TASK_ID", "task-9")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start wasbox agent serve");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let addr = read_address(&mut out);
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = out.read_to_string(&mut rest);
        });
        AgentServer {
            addr,
            child,
            workdir,
            stderr,
        }
    }

    fn get(&self, path: &str) -> Reply {
        request(self.addr, "GET", path, &[], b"")
    }

    fn post(&self, path: &str, body: &str) -> Reply {
        request(self.addr, "POST", path, &[], body.as_bytes())
    }

    fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The validator's start-up: `/health` every 100 ms until it answers 200 with `ok`.
    /// (The validator gives up after 15 s; a cold compile of a large agent may take longer
    /// on a busy CI machine, so the test allows more.)
    fn wait_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let r = self.get("/health");
            if r.status == 200 && r.text().contains("ok") {
                return;
            }
            assert_eq!(r.status, 503, "{}", r.text());
            assert!(Instant::now() < deadline, "never healthy: {}", self.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The validator's polling: `/status` until `completed` or `failed`.
    fn wait_end(&self, limit: Duration) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let s = self.get("/status").json();
            if s["status"] == "completed" || s["status"] == "failed" {
                return s;
            }
            assert_eq!(s["status"], "running", "{s}");
            assert!(
                Instant::now() < deadline,
                "still running: {s}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The validator's whole sequence against a term2 agent.
fn validator_sequence(agent: &str) {
    let proxy = LlmProxy::start(vec![
        says(
            "I will create it.\n```json\n{\"command\": \"echo 'Hello, World!' > hello.txt\", \"task_complete\": false}\n```",
        ),
        command("cat hello.txt"),
        complete(),
    ]);
    let server = AgentServer::start(agent, &proxy);
    server.wait_healthy();
    assert_eq!(server.post("/health", "").json(), json!({"status": "ok"}));
    // The agent's OpenAPI document describes the answers this sequence gets.
    let doc = server.get("/openapi.json").json();
    assert_eq!(doc["openapi"], "3.1.0");
    let conforms = |method: &str, path: &str, r: &crate::support::http::Reply| {
        crate::openapi::conforms(&doc, method, path, r)
    };
    conforms("GET", "/health", &server.get("/health"));
    let idle = server.get("/status");
    conforms("GET", "/status", &idle);
    assert_eq!(idle.status, 200);
    assert_eq!(
        idle.json(),
        json!({"status":"idle","steps":0,"elapsed_secs":0,"error":null,"done":false,"history":[]})
    );

    let r = server.post(
        "/start",
        r#"{"instruction": "Create a file called hello.txt containing 'Hello, World!'", "max_steps": 500, "timeout_secs": 120}"#,
    );
    conforms("POST", "/start", &r);
    assert_eq!((r.status, r.json()), (200, json!({"status": "started"})));
    let end = server.wait_end(Duration::from_secs(120));
    conforms("GET", "/status", &server.get("/status"));
    assert_eq!(end["status"], "completed", "{end}\n{}", server.log());
    assert_eq!(end["done"], true);
    assert_eq!(end["error"], Value::Null);
    assert_eq!(end["steps"], 2);
    assert!(end["elapsed_secs"].is_u64());
    assert_eq!(
        end["history"],
        json!([
            {"step": 1, "command": "echo 'Hello, World!' > hello.txt", "output": null, "exit_code": 0},
            {"step": 2, "command": "cat hello.txt", "output": "Hello, World!\n", "exit_code": 0},
        ])
    );
    assert_eq!(
        std::fs::read_to_string(server.workdir.path().join("hello.txt")).unwrap(),
        "Hello, World!\n"
    );

    // What the proxy saw: the SDK's request, billed to the host's identifiers.
    let calls = proxy.requests();
    assert_eq!(calls.len(), 3);
    for (path, body) in &calls {
        assert_eq!(path, "/llm/proxy");
        assert_eq!(body["agent_hash"], "hash-123");
        assert_eq!(body["task_id"], "task-9");
        assert!(body["max_tokens"].is_u64(), "{body}");
        assert!(body["temperature"].is_f64(), "{body}");
        assert!(body.get("model").is_some(), "{body}");
        let msgs = body["messages"].as_array().unwrap();
        assert!(
            msgs.iter().any(|m| m["content"]
                .as_str()
                .unwrap()
                .contains("Create a file called hello.txt")),
            "{body}"
        );
    }
    // The agent showed the model what came of its first command.
    assert!(calls[2].1.to_string().contains("Hello, World!"));

    // A second task after the first ended starts fresh.
    let r = server.post("/start", r#"{"instruction": "again"}"#);
    assert_eq!(r.status, 200, "{}", r.text());
    let end = server.wait_end(Duration::from_secs(60));
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(end["steps"], 0);
    assert_eq!(end["history"], json!([]));
}

#[test]
fn validator_sequence_with_the_rust_example_agent() {
    validator_sequence("llm-agent");
}

#[test]
fn validator_sequence_with_the_python_example_agent() {
    validator_sequence(python_llm_agent().to_str().unwrap());
}

#[test]
fn start_errors_are_the_references() {
    let proxy = LlmProxy::start(vec![command("sleep 30")]);
    let server = AgentServer::start("llm-agent", &proxy);
    server.wait_healthy();
    let doc = server.get("/openapi.json").json();
    for (body, message) in [
        ("", "instruction required"),
        ("{}", "instruction required"),
        (r#"{"instruction": ""}"#, "instruction required"),
        (r#"{"instruction": 3}"#, "instruction required"),
        (
            r#"{"instruction": "x", "max_steps": 0}"#,
            "max_steps must be a positive integer",
        ),
        (
            r#"{"instruction": "x", "timeout_secs": -5}"#,
            "timeout_secs must be a positive integer",
        ),
    ] {
        let r = server.post("/start", body);
        crate::openapi::conforms(&doc, "POST", "/start", &r);
        assert_eq!(
            (r.status, r.json()),
            (400, json!({"error": message})),
            "{body}"
        );
    }
    let r = server.post("/start", "{\"instruction\": ");
    assert_eq!(r.status, 400);
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid JSON: "),
        "{}",
        r.text()
    );
    // Too large a body: an error in the same shape.
    let r = server.post("/start", &"x".repeat(11 << 20));
    crate::openapi::conforms(&doc, "POST", "/start", &r);
    assert_eq!(r.status, 413);
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid body: ")
    );
    // Unknown paths and methods: 404 like the reference.
    for (method, path) in [("GET", "/nope"), ("GET", "/start"), ("POST", "/status")] {
        let r = request(server.addr, method, path, &[], b"");
        assert_eq!((r.status, r.json()), (404, json!({"error": "not found"})));
    }
    // Nothing started so far.
    assert_eq!(server.get("/status").json()["status"], "idle");

    let r = server.post("/start", r#"{"instruction": "wait", "timeout_secs": 60}"#);
    assert_eq!(r.status, 200);
    let r = server.post("/start", r#"{"instruction": "again"}"#);
    crate::openapi::conforms(&doc, "POST", "/start", &r);
    assert_eq!(
        (r.status, r.json()),
        (409, json!({"error": "already running"}))
    );
    // The running command counts as a step before it ends.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = server.get("/status").json();
        if s["steps"] == 1 {
            assert_eq!(s["status"], "running");
            assert_eq!(s["history"], json!([]));
            break;
        }
        assert!(Instant::now() < deadline, "{s}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn max_steps_exceeded_fails_the_task() {
    let proxy = LlmProxy::start(vec![command("echo step")]);
    let server = AgentServer::start("llm-agent", &proxy);
    server.wait_healthy();
    server.post("/start", r#"{"instruction": "loop", "max_steps": 3}"#);
    let end = server.wait_end(Duration::from_secs(60));
    assert_eq!(end["status"], "failed");
    assert_eq!(end["error"], "Max steps (3) exceeded");
    assert_eq!(end["steps"], 3);
    assert_eq!(end["done"], false);
    assert_eq!(end["history"].as_array().unwrap().len(), 3);
}

#[test]
fn history_keeps_the_last_30_steps_cut_to_200_and_500_characters() {
    // 35 commands of 250 characters, each printing 600 characters ("é" counts once).
    let long = |i: usize| format!("printf 'é%.0s' $(seq 600) # {i:02} {}", "x".repeat(220));
    let mut script: Vec<Answer> = (0..35).map(|i| command(&long(i))).collect();
    script.push(complete());
    let proxy = LlmProxy::start(script);
    let server = AgentServer::start("llm-agent", &proxy);
    server.wait_healthy();
    server.post("/start", r#"{"instruction": "print a lot"}"#);
    let end = server.wait_end(Duration::from_secs(120));
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(end["steps"], 35);
    let history = end["history"].as_array().unwrap();
    assert_eq!(history.len(), 30);
    assert_eq!(history[0]["step"], 6);
    assert_eq!(history[29]["step"], 35);
    for h in history {
        let cmd = h["command"].as_str().unwrap();
        assert_eq!(cmd.chars().count(), 200);
        let out = h["output"].as_str().unwrap();
        assert_eq!(out, "é".repeat(500));
    }
    assert!(long(5).starts_with(history[0]["command"].as_str().unwrap()));
}

#[test]
fn global_timeout_stops_an_agent_stuck_in_a_call() {
    // The proxy never answers: the agent waits in `llm.chat` forever.
    let proxy = LlmProxy::start(vec![Answer::Hang]);
    let server = AgentServer::start("llm-agent", &proxy);
    server.wait_healthy();
    let started = Instant::now();
    server.post("/start", r#"{"instruction": "hang", "timeout_secs": 2}"#);
    let end = server.wait_end(Duration::from_secs(30));
    assert_eq!(end["status"], "failed");
    assert_eq!(end["error"], "Global timeout (2s) exceeded");
    assert!(started.elapsed() < Duration::from_secs(20));
    // The server goes on: the next task runs on a fresh instance.
    assert_eq!(server.get("/health").status, 200);
}

#[test]
fn global_timeout_stops_a_running_command() {
    let proxy = LlmProxy::start(vec![command("sleep 60")]);
    let server = AgentServer::start("llm-agent", &proxy);
    server.wait_healthy();
    let started = Instant::now();
    server.post("/start", r#"{"instruction": "sleep", "timeout_secs": 2}"#);
    let end = server.wait_end(Duration::from_secs(30));
    assert_eq!(end["status"], "failed");
    assert_eq!(end["error"], "Global timeout (2s) exceeded");
    assert_eq!(end["steps"], 1);
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn global_timeout_stops_an_agent_that_loops_forever() {
    let proxy = LlmProxy::start(vec![complete()]);
    let server = AgentServer::start(probe_agent().to_str().unwrap(), &proxy);
    server.wait_healthy();
    server.post("/start", r#"{"instruction": "loop", "timeout_secs": 2}"#);
    let end = server.wait_end(Duration::from_secs(60));
    assert_eq!(end["status"], "failed");
    assert_eq!(end["error"], "Global timeout (2s) exceeded");
    // The stuck instance is gone; a new task gets a fresh one that works.
    server.post("/start", r#"{"instruction": "sdk"}"#);
    let end = server.wait_end(Duration::from_secs(60));
    assert_eq!(end["status"], "completed", "{end}\n{}", server.log());
}

#[test]
fn python_agents_get_the_sdk_context() {
    let proxy = LlmProxy::start(vec![complete()]);
    let server = AgentServer::start(probe_agent().to_str().unwrap(), &proxy);
    server.wait_healthy();
    server.post("/start", r#"{"instruction": "sdk"}"#);
    let end = server.wait_end(Duration::from_secs(60));
    assert_eq!(end["status"], "completed", "{end}\n{}", server.log());
    let seen: Value = serde_json::from_str(
        &std::fs::read_to_string(server.workdir.path().join("results.json")).unwrap(),
    )
    .unwrap();
    // The working directory does not persist between calls.
    assert_eq!(seen["cd_tmp"], "/tmp");
    assert_eq!(seen["pwd_after"], "/app");
    assert_eq!(
        seen["timeout"],
        json!([-1, "", "Command timed out after 1s", true])
    );
    assert_eq!(seen["read"], "written by the agent\n");
    assert_eq!(seen["cwd_sub"], "/app/sub\nwritten by the agent\n");
    assert!(
        seen["missing"]
            .as_str()
            .unwrap()
            .contains("No such file or directory"),
        "{seen}"
    );
    assert_eq!(seen["both"], json!(["out\n\nerr\n", 3, false]));
    assert_eq!(
        seen["bad_cwd"],
        json!(["", "sh: cd: /nowhere: No such file or directory\n", 1])
    );
    assert_eq!(seen["step"], 6);
    // History output: stdout, "\n", stderr.
    let h = &end["history"][4];
    assert_eq!(h["output"], "out\n\nerr\n");
    assert_eq!(h["exit_code"], 3);
    assert_eq!(end["history"][2]["exit_code"], -1);
    assert!(server.log().contains("[agent] hello from python"));

    // An exception fails the task with its type and message.
    server.post("/start", r#"{"instruction": "fail"}"#);
    let end = server.wait_end(Duration::from_secs(60));
    assert_eq!(end["status"], "failed");
    assert_eq!(end["error"], "ValueError: bad thing");
    // Returning without done() completes the task: done is implied.
    server.post("/start", r#"{"instruction": "quiet"}"#);
    let end = server.wait_end(Duration::from_secs(60));
    assert_eq!(
        (&end["status"], &end["done"], &end["steps"]),
        (&json!("completed"), &json!(true), &json!(1))
    );
    // A command after done() fails it.
    server.post("/start", r#"{"instruction": "done twice"}"#);
    let end = server.wait_end(Duration::from_secs(60));
    assert_eq!(end["status"], "failed");
    assert_eq!(end["error"], "Task already marked as done");
}

#[test]
fn the_proxy_is_the_agents_only_way_out() {
    // A listener the agent will try to reach directly (it must see no connection).
    let bait = TcpListener::bind("127.0.0.1:0").unwrap();
    bait.set_nonblocking(true).unwrap();
    let bait_port = bait.local_addr().unwrap().port();
    let proxy = LlmProxy::start(vec![says("hi from the proxy")]);
    let server = AgentServer::start(probe_agent().to_str().unwrap(), &proxy);
    server.wait_healthy();
    for target in [bait_port, proxy.addr.port()] {
        let _ = std::fs::remove_file(server.workdir.path().join("net.txt"));
        server.post(
            "/start",
            &json!({"instruction": format!("net 127.0.0.1 {target}")}).to_string(),
        );
        let end = server.wait_end(Duration::from_secs(60));
        assert_eq!(end["status"], "completed", "{end}\n{}", server.log());
        let seen: Value = serde_json::from_str(
            &std::fs::read_to_string(server.workdir.path().join("net.txt")).unwrap(),
        )
        .unwrap();
        for way in ["socket", "raw", "urllib"] {
            let r = seen[way].as_str().unwrap();
            assert_ne!(r, "connected", "{way} reached port {target}");
            // Refused by the sandbox (an OS error), not a module missing from the build.
            assert!(r.contains("[Errno"), "{way}: {r}");
        }
        assert_eq!(seen["llm"], "hi from the proxy");
    }
    assert!(
        bait.accept().is_err(),
        "the agent connected to a port of the host"
    );
    // Only the host's calls reached the proxy, and only at /llm/proxy.
    assert!(
        proxy
            .requests()
            .iter()
            .all(|(path, body)| path == "/llm/proxy" && body["agent_hash"] == "hash-123")
    );
}

#[test]
fn a_cost_limit_refusal_fails_the_task() {
    let proxy = LlmProxy::start(vec![Answer::Json(
        402,
        json!({"success": false, "error": "cost_limit_exceeded: $5.00 of $5.00 used"}),
    )]);
    let server = AgentServer::start("llm-agent", &proxy);
    server.wait_healthy();
    server.post("/start", r#"{"instruction": "anything"}"#);
    let end = server.wait_end(Duration::from_secs(60));
    assert_eq!(end["status"], "failed");
    assert_eq!(
        end["error"],
        "Cost limit exceeded: cost_limit_exceeded: $5.00 of $5.00 used"
    );
}

#[test]
fn http_1_0_requests_are_answered_and_closed() {
    let proxy = LlmProxy::start(vec![complete()]);
    let server = AgentServer::start("llm-agent", &proxy);
    server.wait_healthy();
    for path in ["/health", "/status"] {
        // Like a bash `/dev/tcp` one-liner: write the request, read until the server closes.
        let mut s = TcpStream::connect(server.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw)
            .expect("the server closes the connection");
        let raw = text(&raw);
        assert!(raw.starts_with("HTTP/1.0 200 OK\r\n"), "{raw}");
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        assert!(head.split("\r\n").all(|l| !l.contains('\n')));
        let body: Value = serde_json::from_str(body).unwrap();
        assert!(body["status"] == "ok" || body["status"] == "idle", "{body}");
    }
}

// ---------------------------------------------------------------------------------------
// term1 (term SDK 1.x) over stdio
// ---------------------------------------------------------------------------------------

/// A harness-like driver: writes request lines, reads response lines.
struct StdioAgent {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Drop for StdioAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl StdioAgent {
    fn start(agent: &str, proxy: &LlmProxy) -> StdioAgent {
        let mut cmd = wasbox();
        cmd.args(["term", "stdio", agent])
            .env("LLM_PROXY_URL", proxy.url())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take();
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        StdioAgent {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    fn read(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(120))
            .expect("a response line")
    }

    fn exit_code(&mut self) -> i32 {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code().unwrap_or(-1);
            }
            assert!(Instant::now() < deadline, "the agent did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn stdio_agent_answers_a_harness_line_by_line() {
    let proxy = LlmProxy::start(vec![
        command("echo 'Hello, world!' > hello.txt"),
        command("cat hello.txt"),
        complete(),
    ]);
    let mut agent = StdioAgent::start("llm-agent-term1", &proxy);
    // Step 1 with the null fields left out, as some harnesses do.
    agent.send(
        r#"{"instruction": "Create hello.txt with 'Hello, world!'", "step": 1, "cwd": "/app"}"#,
    );
    assert_eq!(
        agent.read(),
        r#"{"command":"echo 'Hello, world!' > hello.txt","task_complete":false}"#
    );
    agent.send("");
    agent.send(r#"{"instruction": "Create hello.txt with 'Hello, world!'", "step": 2, "last_command": "echo 'Hello, world!' > hello.txt", "output": "", "exit_code": 0, "cwd": "/app"}"#);
    assert_eq!(
        agent.read(),
        r#"{"command":"cat hello.txt","task_complete":false}"#
    );
    agent.send(r#"{"instruction": "Create hello.txt with 'Hello, world!'", "step": 3, "last_command": "cat hello.txt", "output": "Hello, world!", "exit_code": 0, "cwd": "/app"}"#);
    assert_eq!(agent.read(), r#"{"command":null,"task_complete":true}"#);
    assert_eq!(agent.exit_code(), 0);
    // The agent kept its history between steps: the last prompt shows both commands.
    let calls = proxy.requests();
    assert_eq!(calls.len(), 3);
    let last = calls[2].1.to_string();
    assert!(
        last.contains("cat hello.txt") && last.contains("Hello, world!"),
        "{last}"
    );
}

#[test]
fn stdio_agent_gives_up_on_malformed_input_like_the_reference() {
    let proxy = LlmProxy::start(vec![complete()]);
    for bad in ["this is not json", "[1, 2]", r#"{"step": 1}"#] {
        let mut agent = StdioAgent::start("llm-agent-term1", &proxy);
        agent.send(bad);
        assert_eq!(
            agent.read(),
            r#"{"command":null,"task_complete":true}"#,
            "{bad}"
        );
        assert_eq!(agent.exit_code(), 1, "{bad}");
    }
    // An agent error (the LLM is unreachable) ends the episode the same way.
    let gone = LlmProxy::start(vec![Answer::Json(500, json!({"error": "upstream down"}))]);
    let mut agent = StdioAgent::start("llm-agent-term1", &gone);
    agent.send(r#"{"instruction": "x", "step": 1, "cwd": "/app"}"#);
    assert_eq!(agent.read(), r#"{"command":null,"task_complete":true}"#);
    assert_eq!(agent.exit_code(), 1);
}

// ---------------------------------------------------------------------------------------
// agent run, kinds
// ---------------------------------------------------------------------------------------

fn agent_run(agent: &str, proxy: &LlmProxy, workdir: &Path, extra: &[&str]) -> (i32, String) {
    let mut cmd = wasbox();
    cmd.args(["term", "run", agent, "--workdir"])
        .arg(workdir)
        .args(extra)
        .env("LLM_PROXY_URL", proxy.url());
    let o = run_bounded(cmd, Duration::from_secs(300));
    (
        o.status.code().unwrap_or(-1),
        format!("{}{}", text(&o.stdout), text(&o.stderr)),
    )
}

#[test]
fn term_run_drives_a_term2_agent() {
    let proxy = LlmProxy::start(vec![
        command("mkdir -p out && echo 42 > out/answer.txt"),
        command("cat out/answer.txt"),
        complete(),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let (code, transcript) = agent_run(
        "llm-agent",
        &proxy,
        dir.path(),
        &["--instruction", "write the answer"],
    );
    assert_eq!(code, 0, "{transcript}");
    assert!(transcript.contains("[1] $ mkdir -p out && echo 42 > out/answer.txt"));
    assert!(transcript.contains("[2] $ cat out/answer.txt\n42\n[exit 0]"));
    assert!(transcript.contains("completed in 2 steps"), "{transcript}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out/answer.txt")).unwrap(),
        "42\n"
    );

    // Out of steps: exit 1 with the reason.
    let proxy = LlmProxy::start(vec![command("true")]);
    let (code, transcript) = agent_run(
        "llm-agent",
        &proxy,
        dir.path(),
        &["--instruction", "x", "--max-steps", "2"],
    );
    assert_eq!(code, 1, "{transcript}");
    assert!(
        transcript.contains("Max steps (2) exceeded"),
        "{transcript}"
    );
}

#[test]
fn term_run_is_the_harness_of_a_term1_agent() {
    let proxy = LlmProxy::start(vec![
        command("mkdir sub"),
        command("cd sub"),
        command("pwd > where.txt; echo oops >&2; exit 4"),
        says(r#"{"command": "cat where.txt", "task_complete": true}"#),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let (code, transcript) = agent_run(
        "llm-agent-term1",
        &proxy,
        dir.path(),
        &["--instruction", "note where you are"],
    );
    assert_eq!(code, 0, "{transcript}");
    // `cd sub` moved the tracked directory; later commands ran there.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("sub/where.txt")).unwrap(),
        "/app/sub\n"
    );
    assert!(
        transcript.contains("[4] $ cat where.txt\n/app/sub\n[exit 0]"),
        "{transcript}"
    );
    // Each request told the agent what happened: output (stdout then stderr), exit code, cwd.
    let calls = proxy.requests();
    assert_eq!(calls.len(), 4);
    let third = calls[3].1.to_string();
    assert!(
        third.contains("oops") && third.contains("exit code: 4"),
        "{third}"
    );
}

#[test]
fn agents_are_told_apart_by_their_exports() {
    let dir = tempfile::tempdir().unwrap();
    // A command component (the built-in shell) is no agent: refused naming both worlds.
    let sh = PathBuf::from(wasbox_runtime::BUILT_GUESTS).join("sh.wasm");
    assert!(sh.is_file(), "{} is missing", sh.display());
    let proxy = LlmProxy::start(vec![complete()]);
    let (code, out) = agent_run(
        sh.to_str().unwrap(),
        &proxy,
        dir.path(),
        &["--instruction", "x"],
    );
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("wasbox:term/agent@2.0.0") && out.contains("wasbox:term/agent@1.0.0"),
        "{out}"
    );
    // Not a component at all.
    let junk = dir.path().join("junk.wasm");
    std::fs::write(&junk, b"not wasm").unwrap();
    let (code, out) = agent_run(
        junk.to_str().unwrap(),
        &proxy,
        dir.path(),
        &["--instruction", "x"],
    );
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("not a loadable component"), "{out}");
    // A term1 agent cannot be served over HTTP, nor a term2 agent over stdio.
    let mut cmd = wasbox();
    cmd.args([
        "term",
        "serve",
        "llm-agent-term1",
        "--listen",
        "127.0.0.1:0",
    ]);
    let o = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("needs a term2 agent"),
        "{}",
        text(&o.stderr)
    );
    let mut cmd = wasbox();
    cmd.args(["term", "stdio", "llm-agent"]);
    let o = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("needs a term1 agent"),
        "{}",
        text(&o.stderr)
    );
    // Unknown names are refused with the built-in list.
    let (code, out) = agent_run("no-such-agent", &proxy, dir.path(), &["--instruction", "x"]);
    assert_eq!(code, 2);
    assert!(out.contains("llm-agent, llm-agent-term1"), "{out}");
}

#[test]
fn serve_stops_promptly_on_sigterm_even_mid_task() {
    let proxy = LlmProxy::start(vec![command("sleep 60")]);
    let mut server = AgentServer::start("llm-agent", &proxy);
    server.wait_healthy();
    server.post("/start", r#"{"instruction": "wait"}"#);
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.get("/status").json()["steps"] != 1 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(50));
    }
    let stopped = Instant::now();
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = loop {
        if let Some(s) = server.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(30),
            "still running after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}\n{}", server.log());
    assert!(stopped.elapsed() < Duration::from_secs(20));
}

/// `tests/agents/echo_agent_term1.py` (term SDK 1.x), built.
fn python_term1_agent() -> &'static Path {
    static CELL: OnceLock<PathBuf> = OnceLock::new();
    python_agent(&repo().join("tests/agents/echo_agent_term1.py"), &CELL)
}

#[test]
fn python_term1_agents_build_and_run_under_the_harness() {
    let agent = python_term1_agent().to_str().unwrap();
    // The model answers in the legacy Terminal-Bench shape: its keystrokes are the command.
    let legacy = says(
        r#"{"analysis": "file made", "plan": "show it", "commands": [{"keystrokes": "cat hello.txt\n", "duration": 0.5}], "task_complete": false}"#,
    );
    let proxy = LlmProxy::start(vec![legacy.clone()]);
    let dir = tempfile::tempdir().unwrap();
    let (code, transcript) = agent_run(agent, &proxy, dir.path(), &["--instruction", "say hello"]);
    assert_eq!(code, 0, "{transcript}");
    assert!(transcript.contains("term SDK 1.x"), "{transcript}");
    assert!(
        transcript.contains("[2] $ cat hello.txt\nHello, world!\n[exit 0]"),
        "{transcript}"
    );
    assert!(
        transcript.contains("saw 2 commands, last output 'Hello, world!\\n'"),
        "{transcript}"
    );

    // Over stdio, the response lines carry `text` and the legacy fields as the agent set them.
    let mut stdio = StdioAgent::start(agent, &proxy);
    stdio.send(r#"{"instruction": "say hello", "step": 1, "last_command": null, "output": null, "exit_code": null, "cwd": "/app"}"#);
    assert_eq!(
        stdio.read(),
        r#"{"command":"echo 'Hello, world!' > hello.txt","task_complete":false,"text":"creating the file"}"#
    );
    stdio.send(r#"{"instruction": "say hello", "step": 2, "last_command": "echo 'Hello, world!' > hello.txt", "output": "", "exit_code": 0, "cwd": "/app"}"#);
    let line: Value = serde_json::from_str(&stdio.read()).unwrap();
    assert_eq!(
        line,
        json!({"command": null, "task_complete": false, "analysis": "file made", "plan": "show it",
               "commands": [{"keystrokes": "cat hello.txt\n", "duration": 0.5}]})
    );
    // An exception in solve: the reference's give-up line, exit 1.
    let mut stdio = StdioAgent::start(agent, &proxy);
    stdio.send(r#"{"instruction": "boom", "step": 1, "cwd": "/app"}"#);
    assert!(stdio.read().contains("\"task_complete\":false"));
    stdio.send(r#"{"instruction": "boom", "step": 2, "last_command": "x", "output": "", "exit_code": 0, "cwd": "/app"}"#);
    assert_eq!(stdio.read(), r#"{"command":null,"task_complete":true}"#);
    assert_eq!(stdio.exit_code(), 1);
}
