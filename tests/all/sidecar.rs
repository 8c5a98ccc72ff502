//! `wasbox sidecar serve`, the real binary on loopback: a whole run with a tool round trip
//! read from the real SSE stream, replay with `Last-Event-ID`, every error code, the run
//! limit, cancel while waiting for a tool and while the agent spins, tool timeouts, debug
//! events, and an OpenAI-style model whose key never leaves the host.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::Child;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::http::{Reply, address_in, request};
use crate::support::runtime::{spawn_server, wasbox};
use crate::support::sse::{SseEvent, SseStream};

const TOKEN: &str = "sidecar-test-token";
const KEY: &str = "sk-test-SECRET-4242";

/// A running `wasbox sidecar serve`, killed when dropped.
struct Sidecar {
    addr: SocketAddr,
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Sidecar {
    fn start(agents: &[&str], extra: &[&str], env: &[(&str, &str)]) -> Sidecar {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("sidecar.log");
        let mut cmd = wasbox();
        cmd.args(["sidecar", "serve"])
            .args(agents)
            .args(["--listen", "127.0.0.1:0", "--token", TOKEN])
            .args(extra)
            .env("WASBOX_LOG", "debug")
            .envs(env.iter().copied());
        let (child, line) = spawn_server(cmd, &log);
        Sidecar {
            addr: address_in(&line),
            child,
            log,
            _dir: dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn call(&self, method: &str, path: &str, body: &str, headers: &[(&str, &str)]) -> Reply {
        let auth = format!("Bearer {TOKEN}");
        let mut all = vec![("Authorization", auth.as_str())];
        all.extend_from_slice(headers);
        request(self.addr, method, path, &all, body.as_bytes())
    }

    fn post(&self, path: &str, body: &Value) -> Reply {
        self.call(
            "POST",
            path,
            &body.to_string(),
            &[("Content-Type", "application/json")],
        )
    }

    fn events(&self, run_id: &str, last: Option<u64>) -> SseStream {
        let auth = format!("Bearer {TOKEN}");
        let last = last.map(|l| l.to_string());
        let mut headers = vec![
            ("Authorization", auth.as_str()),
            ("X-Sidecar-Protocol", "1.0"),
        ];
        if let Some(l) = &last {
            headers.push(("Last-Event-ID", l.as_str()));
        }
        let s = SseStream::open(self.addr, &format!("/runs/{run_id}/events"), &headers);
        assert_eq!(s.status, 200, "events of {run_id}");
        s
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- sidecar log ---\n{}", self.log());
        }
    }
}

fn test_agent() -> String {
    let p = PathBuf::from(wasbox_runtime::BUILT_GUESTS).join("sidecar_test.wasm");
    assert!(p.is_file(), "{} is missing", p.display());
    p.to_string_lossy().into_owned()
}

/// The protocol's error body.
fn error(r: &Reply, status: u16, code: &str) -> Value {
    assert_eq!(r.status, status, "{}", r.text());
    assert_eq!(r.header("x-sidecar-protocol"), Some("1.0"));
    let v = r.json();
    assert_eq!(v["error"], code, "{v}");
    assert!(v["message"].is_string() && v["traceId"].is_string(), "{v}");
    v
}

fn run_body(run_id: &str, agent: &str, extra: Value) -> Value {
    let mut body = json!({
        "runId": run_id,
        "agentId": agent,
        "locale": "en",
        "conversation": [{"role": "user", "content": "hello tools"}],
        "toolInventory": [{"id": "shell", "name": "Shell", "timeoutSec": 30}],
    });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    body
}

fn wait_for(stream: &mut SseStream, name: &str) -> SseEvent {
    loop {
        let e = stream
            .next_event()
            .unwrap_or_else(|| panic!("the stream ended before {name}"));
        if e.name == name {
            return e;
        }
    }
}

#[test]
fn a_whole_run_with_a_tool_round_trip() {
    let s = Sidecar::start(&["tool-echo", "chat"], &["--debug-events"], &[]);
    // The sidecar's OpenAPI document describes the answers of this run.
    let doc = s.call("GET", "/openapi.json", "", &[]).json();
    assert_eq!(doc["openapi"], "3.1.0");
    let conforms =
        |method: &str, path: &str, r: &Reply| crate::openapi::conforms(&doc, method, path, r);
    let status = s.call("GET", "/status", "", &[]);
    conforms("GET", "/status", &status);
    assert_eq!(status.status, 200);
    assert_eq!(status.header("x-sidecar-protocol"), Some("1.0"));
    let v = status.json();
    assert_eq!(v["protocolVersion"], "1.0");
    assert_eq!(v["maxConcurrentRuns"], 8);
    let etag = v["agentsEtag"].as_str().unwrap().to_string();

    let agents = s.call("GET", "/agents?locale=en", "", &[]);
    conforms("GET", "/agents", &agents);
    assert_eq!(agents.status, 200);
    assert_eq!(agents.header("etag"), Some(etag.as_str()));
    let list = agents.json();
    let ids: Vec<&str> = list["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["tool-echo", "chat"]);
    assert_eq!(list["agents"][0]["name"], "Tool echo");
    assert_eq!(list["agents"][1]["parameters"][0]["name"], "model");
    assert_eq!(list["agents"][1]["parameters"][0]["type"], "string");
    let zh = s.call("GET", "/agents?locale=zh-CN", "", &[]).json();
    assert_eq!(zh["agents"][0]["name"], "工具回显");
    // Unchanged templates: 304, by query or by If-None-Match.
    let r = s.call(
        "GET",
        &format!("/agents?locale=en&etag={}", etag.trim_matches('"')),
        "",
        &[],
    );
    assert_eq!(r.status, 304);
    let r = s.call("GET", "/agents", "", &[("If-None-Match", etag.as_str())]);
    conforms("GET", "/agents", &r);
    assert_eq!(r.status, 304);
    assert_eq!(r.header("x-sidecar-protocol"), Some("1.0"));

    let started = Instant::now();
    let r = s.post("/runs", &run_body("run-1", "tool-echo", json!({})));
    conforms("POST", "/runs", &r);
    assert_eq!(r.status, 202, "{}", r.text());
    assert_eq!(r.json(), json!({"runId": "run-1", "status": "accepted"}));
    assert_eq!(r.header("location"), Some("/runs/run-1/events"));
    let mut events = s.events("run-1", None);
    assert_eq!(events.header("content-type"), Some("text/event-stream"));
    let first = events.next_event().unwrap();
    assert_eq!(first.name, "run.started");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "run.started within 5 s"
    );
    assert_eq!(first.id.as_deref(), Some("1"));
    assert_eq!(first.json()["runId"], "run-1");
    assert!(first.json()["timestamp"].as_str().unwrap().ends_with('Z'));
    let thought = events.next_event().unwrap();
    assert_eq!(thought.name, "run.thought");
    assert!(thought.json()["text"].as_str().unwrap().contains("shell"));
    let call = events.next_event().unwrap();
    assert_eq!(call.name, "run.tool_call", "{call:?}");
    let c = call.json();
    assert_eq!(c["toolId"], "shell");
    assert_eq!(c["arguments"], json!({"input": "hello tools"}));
    assert_eq!(c["timeoutSec"], 30);
    let call_id = c["toolCallId"].as_str().unwrap().to_string();

    let r = s.post(
        &format!("/runs/run-1/tools/{call_id}"),
        &json!({"status": "ok", "exitCode": 0, "stdout": "HELLO TOOLS", "stderr": "", "durationMs": 12}),
    );
    assert_eq!(r.status, 202, "{}", r.text());
    // The same call cannot be answered twice.
    let r = s.post(
        &format!("/runs/run-1/tools/{call_id}"),
        &json!({"status": "ok"}),
    );
    error(&r, 404, "TOOL_CALL_NOT_FOUND");

    let rest = events.all();
    let names: Vec<&str> = rest.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["run.debug", "run.completed"], "{rest:?}");
    let done = rest.last().unwrap().json();
    assert!(
        done["response"].as_str().unwrap().contains("HELLO TOOLS"),
        "{done}"
    );
    assert_eq!(
        done["metadata"],
        json!({"toolId": "shell", "toolStatus": "ok", "exitCode": 0})
    );
    // Ids go up one by one.
    let ids: Vec<u64> = [&first, &thought, &call]
        .into_iter()
        .chain(rest.iter())
        .map(|e| e.id.as_ref().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ids, [1, 2, 3, 4, 5]);
    // After the end, the whole run can be read again, and the stream ends.
    let again = s.events("run-1", None).all();
    assert_eq!(again.len(), 5);
}

/// How the test model answers a streamed request.
#[derive(Clone, Copy, PartialEq)]
enum Streams {
    /// Server-sent events, then `[DONE]`.
    Events,
    /// A whole JSON answer, as a server that ignores `"stream": true` does.
    Ignored,
    /// An event stream that ends with no content and no `[DONE]`.
    Empty,
}

/// An OpenAI-style endpoint on loopback: answers chat completions (streamed as SSE when
/// asked), checking the bearer key, and records every request with its headers. Whole
/// answers keep the connection open for the next request; connections are counted.
struct Model {
    addr: SocketAddr,
    tls: bool,
    seen: Arc<Mutex<Vec<(String, Value)>>>,
    connections: Arc<AtomicUsize>,
}

/// A connection the model reads and writes: plain TCP or TLS.
trait Conn: Read + Write + Send {}
impl<T: Read + Write + Send> Conn for T {}

impl Model {
    /// `pieces` is what a streamed answer is made of.
    fn start(pieces: Vec<String>) -> Model {
        Model::serve(pieces, Streams::Events, None)
    }

    fn serve(
        pieces: Vec<String>,
        streams: Streams,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> Model {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let (log, count, secure) = (seen.clone(), connections.clone(), tls.is_some());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                count.fetch_add(1, Ordering::SeqCst);
                let (log, pieces, tls) = (log.clone(), pieces.clone(), tls.clone());
                std::thread::spawn(move || {
                    let conn: Box<dyn Conn> = match tls {
                        Some(config) => {
                            let session = rustls::ServerConnection::new(config).unwrap();
                            Box::new(rustls::StreamOwned::new(session, conn))
                        }
                        None => Box::new(conn),
                    };
                    let mut conn = BufReader::new(conn);
                    while Model::answer(&mut conn, &log, &pieces, streams) {}
                });
            }
        });
        Model {
            addr,
            tls: secure,
            seen,
            connections,
        }
    }

    fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}/v1", self.addr)
    }

    /// Answers one request; false once the connection is to close.
    fn answer(
        r: &mut BufReader<Box<dyn Conn>>,
        log: &Mutex<Vec<(String, Value)>>,
        pieces: &[String],
        streams: Streams,
    ) -> bool {
        let mut head = String::new();
        let mut len = 0;
        let mut line = String::new();
        loop {
            line.clear();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return false;
            }
            if line.trim_end().is_empty() {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
            head.push_str(&line);
        }
        let mut body = vec![0; len];
        if r.read_exact(&mut body).is_err() {
            return false;
        }
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        log.lock().unwrap().push((head.clone(), body.clone()));
        let conn = r.get_mut();
        if !head.contains(&format!("Bearer {KEY}")) {
            let err =
                json!({"error": {"message": format!("bad key; you sent: {head}")}}).to_string();
            let _ = write!(
                conn,
                "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{err}",
                err.len()
            );
            let _ = conn.flush();
            return false;
        }
        if body["stream"] == true && streams != Streams::Ignored {
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
            );
            if streams == Streams::Events {
                for p in pieces {
                    let chunk = json!({"choices": [{"index": 0, "delta": {"content": p}}]});
                    let _ = write!(conn, "data: {chunk}\n\n");
                    let _ = conn.flush();
                }
                let _ = write!(conn, "data: [DONE]\n\n");
            }
            let _ = conn.flush();
            return false;
        }
        let answer = json!({
            "model": "test-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": pieces.concat()}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
        })
        .to_string();
        let _ = write!(
            conn,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{answer}",
            answer.len()
        );
        conn.flush().is_ok()
    }
}

/// Runs the chat agent once against `s` and returns its events.
fn chat_run(s: &Sidecar, run_id: &str) -> Vec<SseEvent> {
    let r = s.post(
        "/runs",
        &json!({"runId": run_id, "conversation": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(r.status, 202, "{}", r.text());
    s.events(run_id, None).all()
}

/// The model over HTTPS, trusted through a CA of the test's own (`SSL_CERT_FILE`, read with
/// the system's roots): the run gets the streamed answer and the key travels only inside TLS.
#[test]
fn the_model_is_reached_over_https() {
    let Some(tls) = crate::support::tls::Certificates::make() else {
        return;
    };
    let model = Model::serve(
        vec!["over ".into(), "tls".into()],
        Streams::Events,
        Some(tls.server_config()),
    );
    let ca = tls.ca.display().to_string();
    let s = Sidecar::start(
        &["chat"],
        &["--llm-url", &model.url(), "--llm-key-env", "TEST_LLM_KEY"],
        &[("TEST_LLM_KEY", KEY), ("SSL_CERT_FILE", &ca)],
    );
    let events = chat_run(&s, "tls");
    let end = events.last().unwrap();
    assert_eq!(end.name, "run.completed", "{events:?}\n{}", s.log());
    assert_eq!(end.json()["response"], "over tls");
    assert!(
        model.seen.lock().unwrap()[0]
            .0
            .contains(&format!("Bearer {KEY}"))
    );

    // Without the CA the certificate is nobody's: the call fails, saying why.
    let s = Sidecar::start(
        &["chat"],
        &["--llm-url", &model.url(), "--llm-key-env", "TEST_LLM_KEY"],
        &[("TEST_LLM_KEY", KEY)],
    );
    let events = chat_run(&s, "untrusted");
    let end = events.last().unwrap();
    assert_eq!(end.name, "run.failed", "{events:?}");
    assert!(end.data.contains("certificate"), "{}", end.data);
    assert_eq!(
        model.seen.lock().unwrap().len(),
        1,
        "a request got through unverified TLS"
    );
}

/// A server that ignores `"stream": true` answers as a whole: that answer is the reply. Calls
/// share one pooled connection. A stream that ends with nothing is an error, not "".
#[test]
fn whole_answers_to_streamed_calls_pooled_connections_and_empty_streams() {
    let model = Model::serve(
        vec!["whole ".into(), "answer".into()],
        Streams::Ignored,
        None,
    );
    let s = Sidecar::start(
        &["chat"],
        &["--llm-url", &model.url(), "--llm-key-env", "TEST_LLM_KEY"],
        &[("TEST_LLM_KEY", KEY)],
    );
    for run in ["w1", "w2", "w3"] {
        let events = chat_run(&s, run);
        let end = events.last().unwrap();
        assert_eq!(end.name, "run.completed", "{events:?}\n{}", s.log());
        assert_eq!(end.json()["response"], "whole answer");
    }
    assert_eq!(model.seen.lock().unwrap().len(), 3);
    assert_eq!(
        model.connections.load(Ordering::SeqCst),
        1,
        "three calls, one kept-alive connection"
    );

    let empty = Model::serve(vec!["never".into()], Streams::Empty, None);
    let s = Sidecar::start(
        &["chat"],
        &["--llm-url", &empty.url(), "--llm-key-env", "TEST_LLM_KEY"],
        &[("TEST_LLM_KEY", KEY)],
    );
    let events = chat_run(&s, "empty");
    let end = events.last().unwrap();
    assert_eq!(end.name, "run.failed", "{events:?}");
    assert_eq!(end.json()["errorCode"], "LLM_ERROR", "{}", end.data);
    assert!(end.data.contains("ended without an answer"), "{}", end.data);
}

#[test]
fn replay_from_last_event_id_gives_exactly_the_missed_events() {
    let pieces: Vec<String> = (0..130).map(|i| format!("w{i} ")).collect();
    let model = Model::start(pieces.clone());
    let s = Sidecar::start(
        &["chat"],
        &["--llm-url", &model.url(), "--llm-key-env", "TEST_LLM_KEY"],
        &[("TEST_LLM_KEY", KEY)],
    );
    let r = s.post(
        "/runs",
        &json!({"runId": "long", "conversation": [{"role": "user", "content": "count"}]}),
    );
    assert_eq!(r.status, 202, "{}", r.text());
    let mut live = s.events("long", None);
    // Read 40 events, then drop the connection as a network would. 40 keeps the resume point
    // inside the replay window (the last 100 of 132) however far the run gets meanwhile.
    let seen: Vec<SseEvent> = (0..40).map(|_| live.next_event().unwrap()).collect();
    drop(live);
    assert_eq!(seen[0].name, "run.started");
    let last: u64 = seen[39].id.as_ref().unwrap().parse().unwrap();
    let mut resumed = s.events("long", Some(last));
    let rest = resumed.all();
    // Exactly the events after `last`: no gap, no repeat, to the terminal event.
    let ids: Vec<u64> = rest
        .iter()
        .map(|e| e.id.as_ref().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ids.first(), Some(&(last + 1)), "{ids:?}");
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{ids:?}");
    let end = rest.last().unwrap();
    assert_eq!(end.name, "run.completed");
    assert_eq!(end.json()["response"], pieces.concat());
    // 1 started + 130 thoughts + 1 completed = 132 events; a fresh reader gets the last 100.
    assert_eq!(ids.last(), Some(&132));
    let all = s.events("long", Some(0)).all();
    assert_eq!(all.len(), 100);
    assert_eq!(all[0].id.as_deref(), Some("33"));
    // The key went to the model, from the host; it is in no event and no log line.
    let seen = model.seen.lock().unwrap().clone();
    assert!(
        seen.iter()
            .all(|(head, _)| head.contains(&format!("Bearer {KEY}")))
    );
    assert_eq!(
        seen[0].1["messages"],
        json!([{"role": "user", "content": "count"}])
    );
    for e in rest.iter().chain(all.iter()) {
        assert!(!e.data.contains(KEY), "{e:?}");
    }
    assert!(!s.log().contains(KEY), "the key is in the log");
    assert!(!s.log().contains("SECRET"), "the key is in the log");
}

#[test]
fn a_model_error_reaches_the_agent_without_the_key() {
    let model = Model::start(vec!["x".into()]);
    // The wrong key: the model answers 401 and echoes what it was sent.
    let s = Sidecar::start(
        &["chat"],
        &["--llm-url", &model.url(), "--llm-key-env", "TEST_LLM_KEY"],
        &[("TEST_LLM_KEY", "sk-wrong-SECRET-0000")],
    );
    let r = s.post(
        "/runs",
        &json!({"runId": "e", "conversation": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(r.status, 202);
    let events = s.events("e", None).all();
    let end = events.last().unwrap();
    assert_eq!(end.name, "run.failed", "{events:?}");
    let v = end.json();
    assert_eq!(v["errorCode"], "LLM_ERROR");
    assert!(v["message"].as_str().unwrap().contains("HTTP 401"), "{v}");
    assert!(!end.data.contains("sk-wrong-SECRET-0000"), "{v}");
    assert!(!s.log().contains("sk-wrong-SECRET-0000"));
}

#[test]
fn every_error_code() {
    let s = Sidecar::start(
        &["tool-echo", &test_agent()],
        &["--max-concurrent-runs", "1"],
        &[],
    );
    let doc = s.call("GET", "/openapi.json", "", &[]).json();
    let conforms =
        |method: &str, path: &str, r: &Reply| crate::openapi::conforms(&doc, method, path, r);
    // 401: no token, a wrong one; the protocol header is still sent.
    for auth in [None, Some("Bearer nope")] {
        let headers: Vec<(&str, &str)> = auth.map(|a| ("Authorization", a)).into_iter().collect();
        let r = request(s.addr, "GET", "/status", &headers, b"");
        error(&r, 401, "UNAUTHORIZED");
    }
    // 400: another protocol major version, bad bodies.
    let r = s.call("GET", "/status", "", &[("X-Sidecar-Protocol", "2.0")]);
    error(&r, 400, "INVALID_REQUEST");
    let r = s.call("GET", "/status", "", &[("X-Sidecar-Protocol", "1.4")]);
    assert_eq!(r.status, 200);
    for body in [
        "{oops".to_string(),
        json!({"agentId": "tool-echo"}).to_string(),
        json!({"agentId": "tool-echo", "conversation": [{"role": "robot", "content": "x"}]})
            .to_string(),
        json!({"agentId": "nobody", "conversation": [{"role": "user", "content": "x"}]})
            .to_string(),
        json!({"conversation": [{"role": "user", "content": "x"}]}).to_string(),
        json!({"runId": "../etc", "agentId": "tool-echo", "prompt": "x"}).to_string(),
    ] {
        let r = s.call("POST", "/runs", &body, &[]);
        conforms("POST", "/runs", &r);
        error(&r, 400, "INVALID_REQUEST");
    }
    let r = s.call("GET", "/agents?locale=../../x", "", &[]);
    error(&r, 400, "INVALID_REQUEST");
    // 500: the test agent fails to describe itself in locale `crash`; the trace id is logged.
    let r = s.call("GET", "/agents?locale=crash", "", &[]);
    let v = error(&r, 500, "INTERNAL_ERROR");
    assert!(
        !v["message"].as_str().unwrap().contains("purpose"),
        "causes stay in the log"
    );
    let trace = v["traceId"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !s.log().contains(&trace) {
        assert!(Instant::now() < deadline, "trace id {trace} not in the log");
        std::thread::sleep(Duration::from_millis(50));
    }
    // 410: unknown runs.
    error(
        &s.call("GET", "/runs/ghost/events", "", &[]),
        410,
        "RUN_NOT_FOUND",
    );
    error(
        &s.post("/runs/ghost/cancel", &json!({})),
        410,
        "RUN_NOT_FOUND",
    );
    error(
        &s.post("/runs/ghost/tools/call-1", &json!({"status": "ok"})),
        410,
        "RUN_NOT_FOUND",
    );
    // A run that waits for its tool holds the only slot: 429 with retryAfterSec.
    let r = s.post("/runs", &run_body("r1", "tool-echo", json!({})));
    assert_eq!(r.status, 202);
    let r = s.post("/runs", &run_body("r2", "tool-echo", json!({})));
    conforms("POST", "/runs", &r);
    let v = error(&r, 429, "TOO_MANY_RUNS");
    assert_eq!(v["retryAfterSec"], 5);
    assert_eq!(r.header("retry-after"), Some("5"));
    // 409: a run id taken.
    let r = s.post("/runs", &run_body("r1", "tool-echo", json!({})));
    error(&r, 409, "RUN_CONFLICT");
    // 400 for a tool result of the wrong shape, 404 for a call nobody waits for.
    let mut ev = s.events("r1", None);
    let call = wait_for(&mut ev, "run.tool_call").json();
    let call_id = call["toolCallId"].as_str().unwrap();
    let r = s.post(
        &format!("/runs/r1/tools/{call_id}"),
        &json!({"status": "maybe"}),
    );
    error(&r, 400, "INVALID_REQUEST");
    let r = s.post("/runs/r1/tools/call-99", &json!({"status": "ok"}));
    conforms("POST", "/runs/r1/tools/call-99", &r);
    error(&r, 404, "TOOL_CALL_NOT_FOUND");
    // An unknown path.
    error(&s.call("GET", "/nope", "", &[]), 404, "NOT_FOUND");
    // A failing and a crashing agent end their runs with run.failed; the server goes on.
    s.post("/runs/r1/cancel", &json!({}));
    assert_eq!(wait_for(&mut ev, "run.cancelled").name, "run.cancelled");
    let test = PathBuf::from(test_agent());
    let test_id = test.file_stem().unwrap().to_string_lossy().into_owned();
    for (prompt, code) in [("fail", "NOT_TODAY"), ("crash", "AGENT_CRASHED")] {
        let id = format!("run-{prompt}");
        let r = s.post(
            "/runs",
            &json!({"runId": id, "agentId": test_id, "prompt": prompt}),
        );
        assert_eq!(r.status, 202, "{}", r.text());
        let end = s.events(&id, None).all().pop().unwrap();
        assert_eq!(end.name, "run.failed");
        assert_eq!(end.json()["errorCode"], code, "{end:?}");
    }
    let r = s.post("/runs/run-fail/cancel", &json!({}));
    conforms("POST", "/runs/run-fail/cancel", &r);
    error(&r, 409, "RUN_CONFLICT");
    let r = s.call("GET", "/runs/ghost/events", "", &[]);
    conforms("GET", "/runs/ghost/events", &r);
}

#[test]
fn cancel_while_waiting_for_a_tool_and_while_spinning() {
    let s = Sidecar::start(&["tool-echo", &test_agent()], &[], &[]);
    // Mid-tool.
    let r = s.post("/runs", &run_body("wait", "tool-echo", json!({})));
    assert_eq!(r.status, 202);
    let mut ev = s.events("wait", None);
    let call = wait_for(&mut ev, "run.tool_call").json();
    let asked = Instant::now();
    let r = s.post(
        "/runs/wait/cancel",
        &json!({"reason": "user closed the window"}),
    );
    assert_eq!(
        (r.status, r.json()),
        (202, json!({"runId": "wait", "status": "cancelling"}))
    );
    let end = ev.next_event().unwrap();
    assert_eq!(end.name, "run.cancelled");
    assert_eq!(end.json()["reason"], "user closed the window");
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "{:?}",
        asked.elapsed()
    );
    assert!(
        ev.next_event().is_none(),
        "the stream ends after a terminal event"
    );
    // A result that comes too late finds nobody waiting.
    let call_id = call["toolCallId"].as_str().unwrap();
    error(
        &s.post(
            &format!("/runs/wait/tools/{call_id}"),
            &json!({"status": "ok"}),
        ),
        404,
        "TOOL_CALL_NOT_FOUND",
    );

    // Mid-loop: the agent never calls the host again.
    let test = PathBuf::from(test_agent());
    let test_id = test.file_stem().unwrap().to_string_lossy().into_owned();
    let r = s.post(
        "/runs",
        &json!({"runId": "spin", "agentId": test_id, "prompt": "spin"}),
    );
    assert_eq!(r.status, 202, "{}", r.text());
    let mut ev = s.events("spin", None);
    wait_for(&mut ev, "run.thought");
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    s.post("/runs/spin/cancel", &json!({}));
    let end = ev.next_event().unwrap();
    assert_eq!(end.name, "run.cancelled");
    assert_eq!(end.json()["reason"], "cancelled by the host");
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "{:?}",
        asked.elapsed()
    );
    // The sidecar goes on.
    let r = s.post(
        "/runs",
        &json!({"runId": "after", "agentId": test_id, "prompt": "hi"}),
    );
    assert_eq!(r.status, 202);
    assert_eq!(
        s.events("after", None).all().pop().unwrap().json()["response"],
        "you said: hi"
    );
}

#[test]
fn a_tool_nobody_answers_times_out_and_debug_events_stay_off() {
    let s = Sidecar::start(&["tool-echo"], &[], &[]);
    let body = run_body(
        "slow",
        "tool-echo",
        json!({"toolInventory": [{"id": "shell", "timeoutSec": 1}]}),
    );
    let started = Instant::now();
    assert_eq!(s.post("/runs", &body).status, 202);
    let events = s.events("slow", None).all();
    let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
    // No run.debug without --debug-events.
    assert_eq!(
        names,
        [
            "run.started",
            "run.thought",
            "run.tool_call",
            "run.completed"
        ]
    );
    assert_eq!(events[2].json()["timeoutSec"], 1);
    let done = events[3].json();
    assert!(
        done["response"].as_str().unwrap().contains("(timeout)"),
        "{done}"
    );
    assert_eq!(done["metadata"]["toolStatus"], "timeout");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_tool_outside_the_inventory_is_refused_before_any_event() {
    let s = Sidecar::start(&[&test_agent()], &[], &[]);
    let r = s.post(
        "/runs",
        &json!({"runId": "u", "prompt": "unlisted",
        "toolInventory": [{"id": "shell", "timeoutSec": 5}]}),
    );
    assert_eq!(r.status, 202, "{}", r.text());
    let events = s.events("u", None).all();
    let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        ["run.started", "run.completed"],
        "no run.tool_call was sent"
    );
    let response = events[1].json()["response"].as_str().unwrap().to_string();
    assert_eq!(
        response,
        "refused: tool `not-offered` is not in this run's tool inventory"
    );
    // tool-echo, offered no tool at all, fails on its own.
    let s = Sidecar::start(&["tool-echo"], &[], &[]);
    let r = s.post(
        "/runs",
        &run_body("none", "tool-echo", json!({"toolInventory": []})),
    );
    assert_eq!(r.status, 202);
    let events = s.events("none", None).all();
    let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["run.started", "run.failed"]);
    assert_eq!(events[1].json()["errorCode"], "NO_TOOL");
}

#[test]
fn fuzz_request_bodies_and_headers() {
    use crate::support::fuzz;
    const KEYS: &[&str] = &[
        "agent",
        "agentId",
        "input",
        "messages",
        "role",
        "content",
        "model",
        "runId",
        "toolCallId",
        "result",
        "output",
        "error",
        "isError",
        "config",
        "metadata",
    ];
    let s = Sidecar::start(&[&test_agent()], &[], &[("TEST_API_KEY", KEY)]);
    let routes = [
        (
            "/runs",
            json!({"agent": "sidecar_test", "input": {"messages": [
            {"role": "user", "content": "hi"}]}}),
        ),
        (
            "/runs/nope/tools/call-1",
            json!({"result": "x", "isError": false}),
        ),
        ("/runs/nope/cancel", json!({})),
    ];
    for (path, template) in routes {
        fuzz::runner()
            .run(&fuzz::body(template, KEYS), |body| {
                let r = s.call(
                    "POST",
                    path,
                    &String::from_utf8_lossy(&body),
                    &[("Content-Type", "application/json")],
                );
                assert!(
                    r.status < 500,
                    "{path} {}: {}",
                    String::from_utf8_lossy(&body),
                    r.text()
                );
                if r.status >= 400 {
                    let v = r.json();
                    assert!(v["error"].is_string() && v["message"].is_string(), "{v}");
                }
                Ok(())
            })
            .unwrap();
    }
    // Any Last-Event-ID on a stream of a run that does not exist: a protocol error.
    fuzz::runner()
        .run(&proptest::prelude::any::<String>(), |text| {
            let id: String = text.chars().filter(|c| !c.is_control()).collect();
            let auth = format!("Bearer {TOKEN}");
            let r = request(
                s.addr,
                "GET",
                "/runs/none/events",
                &[("Authorization", &auth), ("Last-Event-ID", &id)],
                b"",
            );
            assert!((400..500).contains(&r.status), "{id:?}: {}", r.text());
            Ok(())
        })
        .unwrap();
    assert_eq!(s.call("GET", "/status", "", &[]).status, 200);
}
