//! PTYs of session sandboxes (worker-api-node.md, "Session Sandbox PTY"): an interactive
//! `sh -i` in the session's sandbox behind a terminal line discipline kept here on the
//! host: echo, backspace, Ctrl-U, Ctrl-C (interrupts the running program), Ctrl-D (end of
//! input), and CRLF output. Input and output buffers are bounded.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use wasbox_runtime::stdio::{PipeWriter, pipe};
use wasbox_runtime::{JobSpec, Output, StopSignal, Terminal};

use super::sessions::{Session, find, respond};
use super::{SharedNode, check_version, lock, read_json, required};
use crate::problem::Problem;

/// Largest `data_b64` payload of one `pty:send`, decoded.
pub const MAX_SEND_BYTES: usize = 64 << 10;
/// Largest `data_b64` payload one `pty:recv` returns, decoded.
const MAX_RECV_BYTES: usize = 64 << 10;
/// Output kept for the client; the program waits while this much is unread.
const OUTPUT_BUFFER: usize = 1 << 20;
/// Longest a `pty:recv` long-poll waits.
const MAX_WAIT: Duration = Duration::from_secs(30);
/// PTYs one session may have open.
pub const MAX_PTYS: usize = 8;

pub struct Pty {
    id: String,
    input: Mutex<Option<PipeWriter>>,
    line: Mutex<Vec<u8>>,
    output: Mutex<VecDeque<u8>>,
    output_changed: Notify,
    room: Notify,
    terminal: Terminal,
    stop: StopSignal,
    exit_code: Mutex<Option<i32>>,
    exited: AtomicBool,
    pub(super) last_activity: Mutex<Instant>,
    sent: std::sync::atomic::AtomicU64,
    received: std::sync::atomic::AtomicU64,
}

impl Pty {
    /// Ends the program and the PTY.
    pub fn close(&self) {
        self.stop.stop();
        lock(&self.input).take();
        self.room.notify_waiters();
    }

    fn echo(&self, bytes: &[u8]) {
        lock(&self.output).extend(bytes);
        self.output_changed.notify_waiters();
    }

    /// Applies the line discipline to typed bytes; returns what goes to the program.
    fn discipline(&self, data: &[u8]) -> Vec<Vec<u8>> {
        let mut to_program = Vec::new();
        let mut line = lock(&self.line);
        for &b in data {
            match b {
                b'\r' | b'\n' => {
                    self.echo(b"\r\n");
                    let mut l = std::mem::take(&mut *line);
                    l.push(b'\n');
                    to_program.push(l);
                }
                0x7f | 0x08 => {
                    if !line.is_empty() {
                        // Drop one whole UTF-8 character.
                        while let Some(last) = line.pop() {
                            if last & 0xc0 != 0x80 {
                                break;
                            }
                        }
                        self.echo(b"\x08 \x08");
                    }
                }
                0x15 => {
                    let n = String::from_utf8_lossy(&line).chars().count();
                    line.clear();
                    self.echo(&b"\x08 \x08".repeat(n));
                }
                0x03 => {
                    line.clear();
                    self.echo(b"^C\r\n");
                    to_program.push(Vec::new()); // marker: interrupt
                }
                0x04 => {
                    if line.is_empty() {
                        to_program.push(vec![0x04]); // marker: end of input
                    } else {
                        to_program.push(std::mem::take(&mut *line));
                    }
                }
                b'\t' => {
                    line.push(b);
                    self.echo(b"\t");
                }
                b if b < 0x20 => {}
                b => {
                    line.push(b);
                    self.echo(&[b]);
                }
            }
        }
        to_program
    }
}

/// The identifying fields every PTY request carries (worker-api-node.md, "Session Sandbox
/// PTY": version, task_id, session_id, pty_id), beside the operation's own fields.
#[derive(Deserialize)]
struct PtyRequest<T> {
    version: Option<i64>,
    task_id: Option<String>,
    session_id: Option<String>,
    pty_id: Option<String>,
    #[serde(flatten)]
    fields: T,
}

/// Finds the session, reads the body and checks the identifying fields.
async fn decode<T: DeserializeOwned>(
    node: &SharedNode,
    id: &str,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Arc<Session>, PtyRequest<T>), Problem> {
    let session = find(node, id)?;
    let req: PtyRequest<T> = read_json(headers, body, node.config.max_request_bytes).await?;
    check_version(req.version)?;
    check_ids(&session, &req.task_id, &req.session_id)?;
    Ok((session, req))
}

fn check_ids(
    session: &Session,
    task_id: &Option<String>,
    session_id: &Option<String>,
) -> Result<(), Problem> {
    let task = required("task_id", task_id)?;
    if task != session.task_id() {
        return Err(Problem::bad_request(format!(
            "task_id `{task}` does not match the session's task"
        )));
    }
    if let Some(s) = session_id.as_deref().filter(|s| *s != session.id()) {
        return Err(Problem::bad_request(format!(
            "session_id `{s}` does not match the path"
        )));
    }
    Ok(())
}

fn find_pty(session: &Session, pty_id: &Option<String>) -> Result<Arc<Pty>, Problem> {
    let pty_id = required("pty_id", pty_id)?;
    session
        .pty(pty_id)
        .ok_or_else(|| Problem::not_found(format!("pty `{pty_id}` does not exist")))
}

/// The answer of every PTY operation; `recv` adds its data.
#[derive(Serialize)]
struct PtyReply {
    version: u32,
    task_id: String,
    session_id: String,
    pty_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'static str>,
    /// Bytes accepted by `pty:send`.
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<usize>,
}

impl PtyReply {
    fn new(session: &Session, pty: &Pty) -> Self {
        PtyReply {
            version: 1,
            task_id: session.task_id().to_string(),
            session_id: session.id().to_string(),
            pty_id: pty.id.clone(),
            status: None,
            bytes: None,
        }
    }
}

#[derive(Deserialize)]
struct OpenFields {
    command: Option<Vec<String>>,
    cols: Option<u16>,
    rows: Option<u16>,
}

/// A random id in UUID v4 form.
fn new_id() -> String {
    let mut b = [0u8; 16];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut f, &mut b);
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

pub async fn open(
    State(node): State<SharedNode>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        node.accepting()?;
        let (session, req) = decode::<OpenFields>(&node, &id, &headers, body).await?;
        let req = req.fields;
        let argv = match req.command {
            Some(c) if !c.is_empty() => c,
            Some(_) => return Err(Problem::bad_request("command must not be empty")),
            None => vec!["sh".into(), "-i".into()],
        };
        let (cols, rows) = (req.cols.unwrap_or(80).max(1), req.rows.unwrap_or(24).max(1));
        if session.pty_count() >= MAX_PTYS {
            return Err(Problem::busy(format!("a session may have at most {MAX_PTYS} open PTYs")));
        }
        let (in_r, in_w) = pipe(MAX_SEND_BYTES);
        let (out_r, out_w) = pipe(64 << 10);
        let terminal = Terminal::new(cols, rows);
        let stop = StopSignal::new();
        let pty = Arc::new(Pty {
            id: new_id(),
            input: Mutex::new(Some(in_w)),
            line: Mutex::new(Vec::new()),
            output: Mutex::new(VecDeque::new()),
            output_changed: Notify::new(),
            room: Notify::new(),
            terminal: terminal.clone(),
            stop: stop.clone(),
            exit_code: Mutex::new(None),
            exited: AtomicBool::new(false),
            last_activity: Mutex::new(Instant::now()),
            sent: Default::default(),
            received: Default::default(),
        });
        let mut spec = JobSpec::new(argv)
            .stdin_pipe(in_r)
            .stdout(Output::Pipe(out_w.clone()))
            .stderr(Output::Pipe(out_w))
            .terminal(terminal)
            .stop_signal(stop)
            .timeout(session.remaining());
        spec.env = session.env();
        // Output pump: program output -> CRLF -> the bounded buffer the client drains.
        tokio::spawn({
            let pty = pty.clone();
            async move {
                let mut last = 0u8;
                loop {
                    let chunk = out_r.read(16 << 10).await;
                    if chunk.is_empty() {
                        break;
                    }
                    let mut text = Vec::with_capacity(chunk.len() + 16);
                    for &b in chunk.iter() {
                        if b == b'\n' && last != b'\r' {
                            text.push(b'\r');
                        }
                        text.push(b);
                        last = b;
                    }
                    loop {
                        let room = pty.room.notified();
                        if lock(&pty.output).len() < OUTPUT_BUFFER || pty.exited.load(Ordering::Acquire) {
                            break;
                        }
                        room.await;
                    }
                    pty.echo(&text);
                }
            }
        });
        let sandbox = session.sandbox().clone();
        tokio::spawn({
            let pty = pty.clone();
            let (task_id, session_id) = (session.task_id().to_string(), session.id().to_string());
            async move {
                let code = match sandbox.run(spec).await {
                    Ok(out) => out.exit_code,
                    Err(e) => {
                        tracing::error!(error = %format!("{e:#}"), "pty program failed to start");
                        126
                    }
                };
                *lock(&pty.exit_code) = Some(code);
                pty.exited.store(true, Ordering::Release);
                pty.output_changed.notify_waiters();
                tracing::info!(
                    task_id = %task_id,
                    session_id = %session_id,
                    pty_id = %pty.id,
                    exit_code = code,
                    bytes_in = pty.sent.load(Ordering::Relaxed),
                    bytes_out = pty.received.load(Ordering::Relaxed),
                    "pty program ended"
                );
            }
        });
        session.add_pty(pty.id.clone(), pty.clone());
        tracing::info!(task_id = %session.task_id(), session_id = %session.id(), pty_id = %pty.id, cols, rows, "pty opened");
        Ok(PtyReply::new(&session, &pty))
    }
    .await;
    respond(result)
}

#[derive(Deserialize)]
struct SendFields {
    data_b64: Option<String>,
}

pub async fn send(
    State(node): State<SharedNode>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        let (session, req) = decode::<SendFields>(&node, &id, &headers, body).await?;
        let pty = find_pty(&session, &req.pty_id)?;
        let encoded = req
            .fields
            .data_b64
            .as_deref()
            .ok_or_else(|| Problem::bad_request("data_b64 is required"))?;
        let data = B64
            .decode(encoded)
            .map_err(|e| Problem::bad_request(format!("data_b64 is not base64: {e}")))?;
        if data.len() > MAX_SEND_BYTES {
            return Err(Problem::too_large(MAX_SEND_BYTES));
        }
        session.touch();
        *lock(&pty.last_activity) = Instant::now();
        pty.sent.fetch_add(data.len() as u64, Ordering::Relaxed);
        for piece in pty.discipline(&data) {
            match piece.as_slice() {
                [] => {
                    // Ctrl-C. With no program running, wake the shell's read of its
                    // prompt so it sees the interrupt.
                    if !pty.stop.interrupt() {
                        write_input(&pty, b"\n").await;
                    }
                }
                [0x04] => {
                    lock(&pty.input).take();
                }
                bytes => write_input(&pty, bytes).await,
            }
        }
        Ok(PtyReply {
            bytes: Some(data.len()),
            ..PtyReply::new(&session, &pty)
        })
    }
    .await;
    respond(result)
}

async fn write_input(pty: &Pty, bytes: &[u8]) {
    let writer = lock(&pty.input).clone();
    if let Some(w) = writer {
        // The program may not read: give up after a while rather than hang the request.
        let _ = tokio::time::timeout(Duration::from_secs(5), w.write_all(bytes)).await;
    }
}

#[derive(Deserialize)]
pub struct RecvQuery {
    version: Option<i64>,
    task_id: Option<String>,
    session_id: Option<String>,
    pty_id: Option<String>,
    wait_ms: Option<u64>,
    max_bytes: Option<usize>,
}

#[derive(Serialize)]
struct RecvReply {
    #[serde(flatten)]
    ids: PtyReply,
    data_b64: String,
    /// The program has ended (and every byte of its output has been returned).
    exited: bool,
    exit_code: Option<i32>,
}

pub async fn recv(
    State(node): State<SharedNode>,
    Path(id): Path<String>,
    Query(q): Query<RecvQuery>,
) -> Response {
    let result = async {
        let session = find(&node, &id)?;
        if q.version.is_some() {
            check_version(q.version)?;
        }
        check_ids(&session, &q.task_id, &q.session_id)?;
        let pty = find_pty(&session, &q.pty_id)?;
        let wait = Duration::from_millis(q.wait_ms.unwrap_or(0)).min(MAX_WAIT);
        let max = q
            .max_bytes
            .unwrap_or(MAX_RECV_BYTES)
            .clamp(1, MAX_RECV_BYTES);
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let changed = pty.output_changed.notified();
            if !lock(&pty.output).is_empty() || pty.exited.load(Ordering::Acquire) {
                break;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                break;
            }
        }
        session.touch();
        *lock(&pty.last_activity) = Instant::now();
        let data: Vec<u8> = {
            let mut out = lock(&pty.output);
            let n = max.min(out.len());
            out.drain(..n).collect()
        };
        pty.room.notify_waiters();
        pty.received.fetch_add(data.len() as u64, Ordering::Relaxed);
        let exited = pty.exited.load(Ordering::Acquire) && lock(&pty.output).is_empty();
        Ok(RecvReply {
            ids: PtyReply::new(&session, &pty),
            data_b64: B64.encode(&data),
            exited,
            exit_code: if exited { *lock(&pty.exit_code) } else { None },
        })
    }
    .await;
    respond(result)
}

#[derive(Deserialize)]
struct ResizeFields {
    cols: Option<u16>,
    rows: Option<u16>,
}

pub async fn resize(
    State(node): State<SharedNode>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        let (session, req) = decode::<ResizeFields>(&node, &id, &headers, body).await?;
        let pty = find_pty(&session, &req.pty_id)?;
        let size = (req.fields.cols.filter(|c| *c > 0), req.fields.rows.filter(|r| *r > 0));
        let (Some(cols), Some(rows)) = size else {
            return Err(Problem::bad_request("cols and rows must be positive integers"));
        };
        pty.terminal.resize(cols, rows);
        session.touch();
        tracing::info!(task_id = %session.task_id(), session_id = %session.id(), pty_id = %pty.id, cols, rows, "pty resized");
        Ok(PtyReply {
            status: Some("resized"),
            ..PtyReply::new(&session, &pty)
        })
    }
    .await;
    respond(result)
}

#[derive(Deserialize)]
struct NoFields {}

pub async fn close(
    State(node): State<SharedNode>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        let (session, req) = decode::<NoFields>(&node, &id, &headers, body).await?;
        let pty_id = required("pty_id", &req.pty_id)?;
        let pty = session
            .remove_pty(pty_id)
            .ok_or_else(|| Problem::not_found(format!("pty `{pty_id}` does not exist")))?;
        pty.close();
        tracing::info!(task_id = %session.task_id(), session_id = %session.id(), pty_id = %pty.id, "pty closed");
        Ok(PtyReply {
            status: Some("closed"),
            ..PtyReply::new(&session, &pty)
        })
    }
    .await;
    respond(result)
}

/// The PTYs of one session.
pub type PtyTable = Mutex<HashMap<String, Arc<Pty>>>;
