//! The front-ends' routers driven in process (`tower::ServiceExt::oneshot`): handler logic
//! (auth, validation, problem bodies, the term runner's answers) without a server process.
//! The real runtime and guest programs still run the jobs.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt as _;
use wasbox::term::http::{AgentServer, router as term_router};
use wasbox::worker::config::{Flags, load};
use wasbox::worker::{Node, router as worker_router};
use wasbox_runtime::term::TaskMonitor;

use crate::support::runtime::runtime;

const TOKEN: &str = "in-process-token";

async fn call(
    app: &Router,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> (StatusCode, String, Vec<u8>) {
    let mut req = Request::builder().method(method).uri(path);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let res = app
        .clone()
        .oneshot(req.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    let status = res.status();
    let kind = res
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
        .await
        .unwrap()
        .to_vec();
    (status, kind, bytes)
}

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(bytes)))
}

fn node() -> Arc<Node> {
    let state = tempfile::tempdir().unwrap().keep();
    let flags = Flags {
        token: Some(TOKEN.into()),
        state_dir: Some(state),
        ..Flags::default()
    };
    let config = load(flags, |_| None).unwrap();
    Node::new(config, runtime().clone()).unwrap()
}

fn problem(status: StatusCode, kind: &str, bytes: &[u8]) -> Value {
    assert_eq!(
        kind,
        "application/problem+json",
        "{}",
        String::from_utf8_lossy(bytes)
    );
    let p = json_of(bytes);
    assert_eq!(p["status"], status.as_u16(), "{p}");
    assert!(
        p["type"]
            .as_str()
            .unwrap()
            .starts_with("urn:cynodeai:error:"),
        "{p}"
    );
    p
}

#[tokio::test]
async fn worker_auth_validation_and_readiness() {
    let node = node();
    let app = worker_router(node.clone());
    let (s, _, body) = call(&app, "GET", "/healthz", None, "").await;
    assert_eq!((s, body.as_slice()), (StatusCode::OK, &b"ok"[..]));
    let (s, _, body) = call(&app, "GET", "/readyz", None, "").await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
    assert!(String::from_utf8_lossy(&body).contains("loading"));
    node.prepare().await;
    let (s, _, _) = call(&app, "GET", "/readyz", None, "").await;
    assert_eq!(s, StatusCode::OK);

    for token in [None, Some("wrong"), Some("in-process-toke")] {
        let (s, kind, body) = call(&app, "POST", "/v1/worker/jobs:run", token, "{}").await;
        assert_eq!(s, StatusCode::UNAUTHORIZED);
        let p = problem(s, &kind, &body);
        assert_eq!(p["type"], "urn:cynodeai:error:authentication");
    }
    let (s, kind, body) = call(&app, "GET", "/nowhere", None, "").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    problem(s, &kind, &body);

    for (body, detail) in [
        ("", "request body is empty"),
        ("{", "invalid JSON"),
        (r#"{"version": 2}"#, "version must be 1"),
        (r#"{"version": 1, "job_id": "j"}"#, "task_id is required"),
        (
            r#"{"version": 1, "task_id": "t", "job_id": "j", "sandbox": {"image": "x", "command": []}}"#,
            "sandbox.command must not be empty",
        ),
    ] {
        let (s, kind, bytes) = call(&app, "POST", "/v1/worker/jobs:run", Some(TOKEN), body).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
        let p = problem(s, &kind, &bytes);
        assert!(p["detail"].as_str().unwrap().contains(detail), "{p}");
    }
}

#[tokio::test]
async fn worker_jobs_and_sessions_in_process() {
    let node = node();
    node.prepare().await;
    let app = worker_router(node);
    let job = json!({"version": 1, "task_id": "t", "job_id": "in-process",
        "sandbox": {"image": "alpine", "command": ["sh", "-c", "echo $CYNODE_JOB_ID; exit 4"]}});
    let (s, _, body) = call(
        &app,
        "POST",
        "/v1/worker/jobs:run",
        Some(TOKEN),
        &job.to_string(),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let v = json_of(&body);
    assert_eq!(
        (v["status"].as_str(), v["exit_code"].as_i64()),
        (Some("failed"), Some(4))
    );
    assert_eq!(v["stdout"], "in-process\n");

    let create = json!({"version": 1, "task_id": "t", "session_id": "s1", "image": "alpine"});
    let (s, _, _) = call(
        &app,
        "POST",
        "/v1/worker/sessions",
        Some(TOKEN),
        &create.to_string(),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, kind, body) = call(
        &app,
        "POST",
        "/v1/worker/sessions",
        Some(TOKEN),
        &create.to_string(),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT);
    problem(s, &kind, &body);
    let exec = json!({"version": 1, "command": "echo kept > f; cat f"});
    let (s, _, body) = call(
        &app,
        "POST",
        "/v1/worker/sessions/s1/exec",
        Some(TOKEN),
        &exec.to_string(),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(json_of(&body)["stdout"], "kept\n");
    let (s, _, body) = call(&app, "GET", "/v1/worker/sessions/s1", Some(TOKEN), "").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(json_of(&body)["exec_count"], 1);
    let (s, _, body) = call(&app, "POST", "/v1/worker/sessions/s1/end", Some(TOKEN), "").await;
    assert_eq!(
        (s, json_of(&body)["status"].as_str()),
        (StatusCode::OK, Some("ended"))
    );
    let (s, kind, body) = call(
        &app,
        "POST",
        "/v1/worker/sessions/s1/exec",
        Some(TOKEN),
        &exec.to_string(),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    problem(s, &kind, &body);
}

#[tokio::test]
async fn term2_answers_like_the_reference_runner() {
    let monitor = TaskMonitor::new();
    let (server, mut tasks) = AgentServer::new(monitor.clone());
    let app = term_router(server.clone());
    let (s, _, body) = call(&app, "GET", "/health", None, "").await;
    assert_eq!(
        (s, json_of(&body)),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "initializing"})
        )
    );
    // Before the agent is ready, a valid task is refused the way the reference refuses it.
    let (s, _, body) = call(&app, "POST", "/start", None, r#"{"instruction": "x"}"#).await;
    assert_eq!(
        (s, json_of(&body)),
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"error": "runner not initialized"})
        )
    );
    server.set_ready();
    let (s, _, body) = call(&app, "POST", "/health", None, "").await;
    assert_eq!(
        (s, json_of(&body)),
        (StatusCode::OK, json!({"status": "ok"}))
    );
    let (s, _, body) = call(&app, "GET", "/status", None, "").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        json_of(&body),
        json!({"status":"idle","steps":0,"elapsed_secs":0,"error":null,"done":false,"history":[]})
    );
    let (s, _, body) = call(&app, "POST", "/start", None, "{}").await;
    assert_eq!(
        (s, json_of(&body)),
        (
            StatusCode::BAD_REQUEST,
            json!({"error": "instruction required"})
        )
    );
    let (s, _, body) = call(
        &app,
        "POST",
        "/start",
        None,
        r#"{"instruction": "go", "max_steps": 3}"#,
    )
    .await;
    assert_eq!(
        (s, json_of(&body)),
        (StatusCode::OK, json!({"status": "started"}))
    );
    let task = tasks.recv().await.unwrap();
    assert_eq!((task.instruction.as_str(), task.max_steps), ("go", 3));
    let (s, _, body) = call(&app, "POST", "/start", None, r#"{"instruction": "again"}"#).await;
    assert_eq!(
        (s, json_of(&body)),
        (StatusCode::CONFLICT, json!({"error": "already running"}))
    );
    let (s, _, body) = call(&app, "GET", "/status", None, "").await;
    assert_eq!(
        (s, json_of(&body)["status"].as_str()),
        (StatusCode::OK, Some("running"))
    );
    for (method, path) in [("GET", "/nope"), ("GET", "/start"), ("DELETE", "/status")] {
        let (s, _, body) = call(&app, method, path, None, "").await;
        assert_eq!(
            (s, json_of(&body)),
            (StatusCode::NOT_FOUND, json!({"error": "not found"}))
        );
    }
}

/// The fuzz tests' verdict on an answer: no client input is a server error, and every
/// refusal is a problem.
fn sound_answer(what: &str, s: StatusCode, kind: &str, bytes: &[u8]) {
    assert!(
        !s.is_server_error(),
        "{what}: {s} {}",
        String::from_utf8_lossy(bytes)
    );
    if s.is_client_error() {
        problem(s, kind, bytes);
    } else if kind.starts_with("application/json") {
        json_of(bytes);
    }
}

#[test]
fn fuzz_worker_api_bodies() {
    use crate::support::fuzz;
    const KEYS: &[&str] = &[
        "version",
        "task_id",
        "job_id",
        "session_id",
        "sandbox",
        "image",
        "command",
        "env",
        "cwd",
        "timeout_seconds",
        "network_policy",
        "stdin",
        "max_lifetime_seconds",
        "idle_timeout_seconds",
        "pty_id",
        "data_b64",
        "cols",
        "rows",
        "wait_ms",
    ];
    let rt = tokio::runtime::Runtime::new().unwrap();
    let node = node();
    rt.block_on(node.prepare());
    let app = worker_router(node.clone());
    let create = r#"{"version":1,"task_id":"t","session_id":"fz","image":"x"}"#;
    let (s, _, _) = rt.block_on(call(
        &app,
        "POST",
        "/v1/worker/sessions",
        Some(TOKEN),
        create,
    ));
    assert_eq!(s, StatusCode::OK);
    let (_, _, opened) = rt.block_on(call(
        &app,
        "POST",
        "/v1/worker/sessions/fz/pty:open",
        Some(TOKEN),
        r#"{"version":1,"task_id":"t"}"#,
    ));
    let pty_id = json_of(&opened)["pty_id"].as_str().unwrap().to_string();
    let routes: Vec<(&str, String, Value)> = vec![
        (
            "POST",
            "/v1/worker/jobs:run".into(),
            json!({"version": 1, "task_id": "t", "job_id": "j", "sandbox": {
                "image": "alpine", "command": ["echo", "x"], "env": {"A": "b"},
                "cwd": "/workspace", "timeout_seconds": 5, "network_policy": "none"}}),
        ),
        (
            "POST",
            "/v1/worker/jobs:stop".into(),
            json!({"version": 1, "task_id": "t", "job_id": "j"}),
        ),
        (
            "POST",
            "/v1/worker/sessions".into(),
            json!({"version": 1, "task_id": "t", "session_id": "s", "image": "x",
                   "max_lifetime_seconds": 60, "idle_timeout_seconds": 30}),
        ),
        (
            "POST",
            "/v1/worker/sessions/fz/exec".into(),
            json!({"version": 1, "command": ["echo", "x"], "env": {"A": "b"},
                   "cwd": "/workspace", "timeout_seconds": 5}),
        ),
        (
            "POST",
            "/v1/worker/sessions/fz/pty:send".into(),
            json!({"version": 1, "task_id": "t", "pty_id": pty_id, "data_b64": "ZWNobyBoaQ0="}),
        ),
        (
            "POST",
            "/v1/worker/sessions/fz/pty:resize".into(),
            json!({"version": 1, "task_id": "t", "pty_id": pty_id, "cols": 100, "rows": 30}),
        ),
        (
            "POST",
            "/v1/worker/sessions/fz/pty:open".into(),
            json!({"version": 1, "task_id": "t", "cols": 80, "rows": 24}),
        ),
    ];
    for (method, path, template) in routes {
        fuzz::runner()
            .run(&fuzz::body(template, KEYS), |body| {
                let req = Request::builder()
                    .method(method)
                    .uri(path.as_str())
                    .header("authorization", format!("Bearer {TOKEN}"))
                    .header("content-type", "application/json")
                    .body(Body::from(body.clone()))
                    .unwrap();
                let res = rt.block_on(app.clone().oneshot(req)).unwrap();
                let status = res.status();
                let kind = res
                    .headers()
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                let bytes = rt
                    .block_on(axum::body::to_bytes(res.into_body(), usize::MAX))
                    .unwrap();
                sound_answer(
                    &format!("{method} {path} {}", String::from_utf8_lossy(&body)),
                    status,
                    &kind,
                    &bytes,
                );
                Ok(())
            })
            .unwrap();
    }
    // Query strings too: any text as a file path or a PTY read's parameters.
    fuzz::runner()
        .run(&proptest::prelude::any::<String>(), |text| {
            let q: String = text.bytes().map(|b| format!("%{b:02X}")).collect();
            for uri in [
                format!("/v1/worker/sessions/fz/files?path={q}"),
                format!("/v1/worker/sessions/fz/pty:recv?task_id=t&pty_id={q}&wait_ms={q}"),
                format!("/v1/worker/sessions/{q}/files?path=a"),
            ] {
                let (s, kind, bytes) = rt.block_on(call(&app, "GET", &uri, Some(TOKEN), ""));
                if s != StatusCode::OK {
                    sound_answer(&uri, s, &kind, &bytes);
                }
            }
            Ok(())
        })
        .unwrap();
    // The node still serves.
    let ok = r#"{"version":1,"task_id":"t","job_id":"after-fuzz","sandbox":{"image":"x","command":["echo","ok"]}}"#;
    let (s, _, bytes) = rt.block_on(call(&app, "POST", "/v1/worker/jobs:run", Some(TOKEN), ok));
    assert_eq!(s, StatusCode::OK);
    assert_eq!(json_of(&bytes)["stdout"], "ok\n");
}
