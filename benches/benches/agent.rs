//! Term agents: what hosting an agent in wasbox costs, against the same work done natively,
//! in one run.
//!
//! - `agent/start-rust`, `agent/start-python`: a fresh agent instance set up and cleaned up
//!   (the Rust `llm-agent`; the Python `llm_agent.py` built with componentize-py), against a
//!   native `python3` process importing what that agent and its SDK import.
//! - `agent/task`: a task of 3 steps (4 LLM calls answered by a loopback proxy, 3 `sh -c`
//!   commands) run by `llm-agent` in an existing sandbox, against the same work done
//!   natively: 4 HTTP POSTs to the same proxy and 3 `sh -c` spawns.
//!
//! `cargo bench -p wasbox-benches --bench agent` prints criterion's figures and then a table
//! of medians with the ratio native / wasbox.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use criterion::{Criterion, criterion_group};
use wasbox_runtime::io::OutputSink;
use wasbox_runtime::term::{
    AgentEnv, AgentRunner, LlmProxy, TaskMonitor, TaskSpec, TaskStatus, builtin_agent,
};
use wasbox_runtime::{Runtime, SandboxConfig};

const COMMAND: &str = "echo step";
const STEPS: usize = 3;

/// A proxy answering, in a cycle, `STEPS` commands and then completion.
fn start_proxy() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let n = calls.fetch_add(1, Ordering::Relaxed);
            answer(conn, n % (STEPS + 1) == STEPS);
        }
    });
    addr
}

fn answer(conn: TcpStream, complete: bool) {
    let mut r = BufReader::new(conn.try_clone().unwrap());
    let mut len = 0;
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    let content = if complete {
        r#"{"command": null, "task_complete": true}"#.to_string()
    } else {
        serde_json::json!({"command": COMMAND, "task_complete": false}).to_string()
    };
    let body = serde_json::json!({
        "success": true, "content": content, "model": "bench",
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}, "cost_usd": 0.0,
    })
    .to_string();
    let mut conn = conn;
    let _ = write!(
        conn,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// What a native agent does per LLM call: one POST on a new connection.
fn native_post(addr: SocketAddr) -> String {
    let body = serde_json::json!({"messages": [{"role": "user", "content": "next?"}]}).to_string();
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /llm/proxy HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    reply
}

/// The interpreter itself, not a launcher in front of it.
fn python3() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// What `llm_agent.py` and the SDK import.
const PYTHON_IMPORTS: &str =
    "import json, re, sys, time, traceback, dataclasses, typing, socket, urllib.request";

fn agent(c: &mut Criterion) {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let runtime = Runtime::new().expect("runtime");
    tokio.block_on(runtime.preload()).expect("preload");
    let proxy = start_proxy();
    let sandbox = runtime
        .sandbox(SandboxConfig::default().mount("/app"))
        .unwrap();
    let env = |url: Option<String>| AgentEnv {
        sandbox: sandbox.clone(),
        llm: LlmProxy {
            url,
            ..LlmProxy::default()
        },
        log: OutputSink::Null,
        env: Vec::new(),
        on_event: None,
    };

    let rust_agent = tokio
        .block_on(runtime.term_agent("llm-agent", builtin_agent("llm-agent").unwrap()))
        .unwrap();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let py_wasm = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-llm_agent.wasm");
    wasbox::term::build::python_agent(
        &root.join("guest-components/agents/python/llm_agent.py"),
        &py_wasm,
    )
    .expect("building the Python example agent");
    let py_agent = tokio
        .block_on(runtime.term_agent("llm_agent", std::fs::read(&py_wasm).unwrap()))
        .unwrap();
    let python = python3();

    let mut group = c.benchmark_group("agent/start-rust");
    group.bench_function("wasbox", |b| {
        b.iter(|| {
            tokio.block_on(async {
                let mut r = AgentRunner::new(rust_agent.clone(), env(None), TaskMonitor::new());
                r.setup().await.unwrap();
                r.cleanup().await;
            })
        })
    });
    group.finish();

    let native_python = || {
        let out = Command::new(&python)
            .args(["-c", PYTHON_IMPORTS])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success());
    };
    let mut group = c.benchmark_group("agent/start-python");
    group.bench_function("wasbox", |b| {
        b.iter(|| {
            tokio.block_on(async {
                let mut r = AgentRunner::new(py_agent.clone(), env(None), TaskMonitor::new());
                r.setup().await.unwrap();
                r.cleanup().await;
            })
        })
    });
    group.bench_function("native", |b| b.iter(native_python));
    group.finish();

    // The task: check once that it does what the native side does.
    let mut runner = AgentRunner::new(
        rust_agent.clone(),
        env(Some(format!("http://{proxy}"))),
        TaskMonitor::new(),
    );
    let end = tokio.block_on(runner.run_task(&TaskSpec::new("bench")));
    assert_eq!(end.status, TaskStatus::Completed, "{end:?}");
    assert_eq!(end.steps as usize, STEPS);
    let native_task = || {
        for _ in 0..STEPS {
            assert!(native_post(proxy).contains("\"success\":true"));
            let out = Command::new("sh")
                .args(["-c", COMMAND])
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert_eq!(out.stdout, b"step\n");
        }
        assert!(native_post(proxy).contains("task_complete"));
    };
    let mut group = c.benchmark_group("agent/task");
    group.bench_function("wasbox", |b| {
        b.iter(|| {
            let end = tokio.block_on(runner.run_task(&TaskSpec::new("bench")));
            assert_eq!(end.status, TaskStatus::Completed);
        })
    });
    group.bench_function("native", |b| b.iter(native_task));
    group.finish();
}

criterion_group!(benches, agent);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    wasbox_benches::print_ratios(&[
        ("agent/start-python", "wasbox", "native"),
        ("agent/task", "wasbox", "native"),
    ]);
    wasbox_benches::print_medians(&[("agent/start-rust", "wasbox")]);
}
