//! E2B's code interpreter: the API the `e2b-code-interpreter` SDK reaches on a sandbox's
//! port 49999 (through `E2B_SANDBOX_URL`, with `E2b-Sandbox-Port: 49999`), over the
//! sandbox's session.
//!
//! A code context is a kernel process of the sandbox that keeps its state between runs:
//! `python3 -m wasbox_kernel` for Python (the image's; see its source for what a cell does)
//! or a non-interactive `sh` for bash. `POST /execute` writes the code to the kernel of its
//! context (the language's default context when none is named) and streams back what it
//! says, one JSON object a line (`stdout`, `stderr`, `result`, `error`,
//! `number_of_executions`), as E2B's server does. Runs in one context take turns; contexts
//! run side by side. A client that goes away mid-run (its timeout) interrupts the run: the
//! kernel is ended and the context starts a fresh one on its next run, its state lost
//! (WebAssembly cannot be interrupted and resumed). `/contexts` creates, lists, restarts
//! and removes contexts. These requests carry the sandbox's access token as
//! `X-Access-Token` or as `E2B-Traffic-Access-Token` (which the SDK sends once the create
//! answer names it: wasbox names the same token).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use wasbox_runtime::capacity::ROOM_WAIT;
use wasbox_runtime::io::{PipeReader, PipeWriter, pipe};
use wasbox_runtime::sync::lock;
use wasbox_runtime::{Input, JobSpec, Output, StopSignal};

use super::envd::{Target, gone, target_with};
use super::{HOME, MAX_TIMEOUT_SECS, Sbx, SharedE2b, error};

/// Contexts one sandbox has at most (each a running kernel once used).
pub(crate) const MAX_CONTEXTS: usize = 16;
/// The largest request accepted (the code of one run, with its environment).
const MAX_REQUEST_BYTES: usize = 4 << 20;
/// A kernel's output pipes.
const PIPE_BYTES: usize = 64 << 10;
/// The longest line of a kernel's output read as one piece (a longer one is cut).
const MAX_LINE_BYTES: usize = 8 << 20;
/// How long output of a kernel's children is waited for after a run's end (bash; a python
/// kernel marks the end of its stderr instead, see [`Piece::StderrEnd`]).
const STDERR_GRACE: Duration = Duration::from_millis(20);
/// How long a python kernel's stderr mark is waited for after its run's end.
const STDERR_MARK_WAIT: Duration = Duration::from_secs(1);
/// Where a kernel's events start (U+001E, record separator): other lines are plain output.
const MARK: u8 = 0x1e;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Language {
    Python,
    Bash,
}

impl Language {
    fn parse(name: Option<&str>) -> Result<Language, String> {
        match name.map(str::to_ascii_lowercase).as_deref() {
            None | Some("") | Some("python") | Some("python3") => Ok(Language::Python),
            Some("bash") | Some("sh") => Ok(Language::Bash),
            Some(other) => Err(format!(
                "the language '{other}' is not available in this sandbox (python, bash)"
            )),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::Bash => "bash",
        }
    }
}

/// The code contexts of one sandbox.
#[derive(Default)]
pub(crate) struct Contexts {
    all: Mutex<HashMap<String, Arc<Context>>>,
    /// The default context of each language, once used.
    defaults: Mutex<HashMap<&'static str, String>>,
}

impl Contexts {
    /// Ends every kernel (the sandbox ends, or keeps only its files).
    pub(crate) fn stop_all(&self) {
        for c in lock(&self.all).values() {
            lock(&c.stop).stop();
        }
    }

    fn get(&self, id: &str) -> Option<Arc<Context>> {
        lock(&self.all).get(id).cloned()
    }

    fn add(&self, language: Language, cwd: String) -> Result<Arc<Context>, String> {
        let mut all = lock(&self.all);
        if all.len() >= MAX_CONTEXTS {
            return Err(format!(
                "the sandbox has its most code contexts ({MAX_CONTEXTS}); remove one first"
            ));
        }
        let ctx = Arc::new(Context {
            id: crate::ids::uuid_v4(),
            language,
            cwd,
            kernel: tokio::sync::Mutex::new(None),
            stop: Mutex::new(StopSignal::new()),
            executions: AtomicU64::new(0),
        });
        all.insert(ctx.id.clone(), ctx.clone());
        Ok(ctx)
    }

    fn default_for(&self, language: Language) -> Result<Arc<Context>, String> {
        let mut defaults = lock(&self.defaults);
        if let Some(ctx) = defaults.get(language.name()).and_then(|id| self.get(id)) {
            return Ok(ctx);
        }
        let ctx = self.add(language, HOME.to_string())?;
        defaults.insert(language.name(), ctx.id.clone());
        Ok(ctx)
    }

    fn remove(&self, id: &str) -> Option<Arc<Context>> {
        let ctx = lock(&self.all).remove(id)?;
        lock(&self.defaults).retain(|_, d| d != id);
        Some(ctx)
    }
}

/// One code context: its kernel (started on its first run) and how it was made.
struct Context {
    id: String,
    language: Language,
    cwd: String,
    /// Held for the length of a run: runs in one context take turns.
    kernel: tokio::sync::Mutex<Option<Kernel>>,
    /// Ends the context's current kernel from outside a run (removal, restart, the sandbox's
    /// end).
    stop: Mutex<StopSignal>,
    /// Runs so far (a bash kernel's count; Python's kernel counts its own).
    executions: AtomicU64,
}

impl Context {
    fn describe(&self) -> Value {
        json!({"id": self.id, "language": self.language.name(), "cwd": self.cwd})
    }

    /// Ends the kernel; the next run starts a fresh one.
    fn restart(&self) {
        let mut stop = lock(&self.stop);
        stop.stop();
        *stop = StopSignal::new();
    }
}

/// What a kernel process says, in order.
enum Piece {
    /// One line of its stdout (with its newline, when it had one).
    Line(Vec<u8>),
    /// A chunk of its stderr.
    Stderr(Vec<u8>),
    /// A python kernel's mark on its stderr (the line `U+001E`), written after a run's
    /// output: everything the run wrote to stderr came before it.
    StderrEnd,
    /// It ended, and why.
    Ended(String),
}

/// A running kernel process.
struct Kernel {
    stdin: PipeWriter,
    out: mpsc::Receiver<Piece>,
    stop: StopSignal,
    /// Its stderr marks seen, and its runs ended (python).
    marks: u64,
    runs: u64,
}

impl Kernel {
    async fn start(
        e2b: &SharedE2b,
        sbx: &Arc<Sbx>,
        ctx: &Context,
        stop: StopSignal,
    ) -> Result<Kernel, String> {
        let argv: &[&str] = match ctx.language {
            Language::Python => &["python3", "-u", "-m", "wasbox_kernel"],
            Language::Bash => &["sh"],
        };
        let admission = e2b
            .node
            .runtime
            .admit(ROOM_WAIT)
            .await
            .map_err(|why| format!("cannot start the kernel: {why}"))?;
        let (in_r, in_w) = pipe(PIPE_BYTES);
        let (out_r, out_w) = pipe(PIPE_BYTES);
        let (err_r, err_w) = pipe(PIPE_BYTES);
        let mut spec = JobSpec::new(argv.iter().copied())
            .cwd(ctx.cwd.clone())
            .timeout(Duration::from_secs(MAX_TIMEOUT_SECS as u64))
            .stdout(Output::Pipe(out_w))
            .stderr(Output::Pipe(err_w))
            .stop_signal(stop.clone())
            .admission(admission)
            .start_wait(ROOM_WAIT);
        spec.stdin = Input::Pipe(in_r);
        spec.env.push(("PWD".into(), ctx.cwd.clone()));
        let (tx, rx) = mpsc::channel(256);
        let session = sbx.session.clone();
        let ctx_marks = ctx.language == Language::Python;
        tokio::spawn(async move {
            let pumps = [
                tokio::spawn(lines(out_r, tx.clone())),
                tokio::spawn(chunks(err_r, tx.clone(), ctx_marks)),
            ];
            let out = session.exec(spec).await;
            for p in pumps {
                let _ = p.await;
            }
            let why = match out {
                Ok(o) => match o.start_failure {
                    Some(f) => format!("the kernel could not start: {f}"),
                    None => format!("the kernel ended ({})", o.status.as_str()),
                },
                Err(e) => format!("the kernel failed: {e:#}"),
            };
            let _ = tx.send(Piece::Ended(why)).await;
        });
        Ok(Kernel {
            stdin: in_w,
            out: rx,
            stop,
            marks: 0,
            runs: 0,
        })
    }
}

/// A pipe's content as lines.
async fn lines(r: PipeReader, tx: mpsc::Sender<Piece>) {
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let chunk = r.read(32 << 10).await;
        if chunk.is_empty() {
            break;
        }
        pending.extend_from_slice(&chunk);
        while let Some(at) = pending.iter().position(|&b| b == b'\n') {
            let rest = pending.split_off(at + 1);
            let line = std::mem::replace(&mut pending, rest);
            if tx.send(Piece::Line(line)).await.is_err() {
                return;
            }
        }
        if pending.len() > MAX_LINE_BYTES {
            let line = std::mem::take(&mut pending);
            if tx.send(Piece::Line(line)).await.is_err() {
                return;
            }
        }
    }
    if !pending.is_empty() {
        let _ = tx.send(Piece::Line(pending)).await;
    }
}

/// A pipe's content as chunks; with `marks`, the line `U+001E` is a [`Piece::StderrEnd`]
/// wherever it falls in the chunks (a mark split between two is found too).
async fn chunks(r: PipeReader, tx: mpsc::Sender<Piece>, marks: bool) {
    // Whether the last chunk ended a line (a mark starts a line) and then a lone `U+001E`.
    let (mut at_line_start, mut held) = (true, false);
    loop {
        let chunk = r.read(32 << 10).await;
        if chunk.is_empty() {
            if held {
                let _ = tx.send(Piece::Stderr(vec![MARK])).await;
            }
            return;
        }
        if !marks {
            if tx.send(Piece::Stderr(chunk.to_vec())).await.is_err() {
                return;
            }
            continue;
        }
        let mut data: Vec<u8> = Vec::with_capacity(chunk.len() + 1);
        if held {
            data.push(MARK);
            held = false;
        }
        data.extend_from_slice(&chunk);
        let mut pieces = Vec::new();
        let mut start = 0;
        let mut i = 0;
        while i < data.len() {
            let line_start = if i == 0 {
                at_line_start
            } else {
                data[i - 1] == b'\n'
            };
            if line_start && data[i] == MARK {
                if i + 1 == data.len() {
                    // Perhaps a mark whose newline comes in the next chunk.
                    if start < i {
                        pieces.push(Piece::Stderr(data[start..i].to_vec()));
                    }
                    start = data.len();
                    held = true;
                    break;
                }
                if data[i + 1] == b'\n' {
                    if start < i {
                        pieces.push(Piece::Stderr(data[start..i].to_vec()));
                    }
                    pieces.push(Piece::StderrEnd);
                    i += 2;
                    start = i;
                    continue;
                }
            }
            i += 1;
        }
        if start < data.len() {
            pieces.push(Piece::Stderr(data[start..].to_vec()));
        }
        at_line_start = held || data.last() == Some(&b'\n');
        for p in pieces {
            if tx.send(p).await.is_err() {
                return;
            }
        }
    }
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn output_event(kind: &str, data: &[u8]) -> Value {
    json!({"type": kind, "text": String::from_utf8_lossy(data), "timestamp": now_ns()})
}

/// The sandbox a code-interpreter request is for, if its token is the sandbox's.
fn sandbox(e2b: &SharedE2b, headers: &HeaderMap) -> Result<Arc<Sbx>, Response> {
    match target_with(
        e2b,
        headers,
        &["x-access-token", "e2b-traffic-access-token"],
    ) {
        Target::Found(s) => Ok(s),
        Target::Gone(id) => Err(error(StatusCode::BAD_GATEWAY, gone(&id))),
        Target::Unauthorized => Err(error(StatusCode::UNAUTHORIZED, "invalid access token")),
    }
}

fn read_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Response> {
    if body.len() > MAX_REQUEST_BYTES {
        return Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request is larger than {MAX_REQUEST_BYTES} bytes"),
        ));
    }
    serde_json::from_slice(body)
        .map_err(|e| error(StatusCode::BAD_REQUEST, format!("invalid request: {e}")))
}

#[derive(Deserialize)]
struct ExecuteRequest {
    code: String,
    #[serde(default)]
    context_id: Option<String>,
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    env_vars: Option<HashMap<String, String>>,
}

/// `POST /execute`: runs code in a context, streaming what it says.
pub(super) async fn execute(
    State(e2b): State<SharedE2b>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let sbx = match sandbox(&e2b, &headers) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let req: ExecuteRequest = match read_json(&body) {
        Ok(r) => r,
        Err(r) => return r,
    };
    let env = req.env_vars.unwrap_or_default();
    if req.code.contains('\0')
        || env
            .iter()
            .any(|(k, v)| k.is_empty() || k.contains(['=', '\0']) || v.contains('\0'))
    {
        return error(
            StatusCode::BAD_REQUEST,
            "a NUL byte in the code, or an environment variable with no name, '=' or NUL",
        );
    }
    let ctx = match (&req.context_id, &req.language) {
        (Some(_), Some(_)) => {
            return error(
                StatusCode::BAD_REQUEST,
                "name a context or a language, not both",
            );
        }
        (Some(id), None) => match sbx.contexts.get(id) {
            Some(c) => c,
            None => return context_not_found(id),
        },
        (None, language) => {
            let ctx =
                Language::parse(language.as_deref()).and_then(|l| sbx.contexts.default_for(l));
            match ctx {
                Ok(c) => c,
                Err(why) => return error(StatusCode::BAD_REQUEST, why),
            }
        }
    };
    let (tx, mut rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    tokio::spawn(run(e2b, sbx, ctx, req.code, env, tx));
    (
        [(axum::http::header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))),
    )
        .into_response()
}

type Lines = mpsc::Sender<Result<Bytes, std::io::Error>>;

async fn send(tx: &Lines, event: &Value) -> bool {
    let mut line = event.to_string();
    line.push('\n');
    tx.send(Ok(Bytes::from(line))).await.is_ok()
}

/// An error event of the run itself (its kernel could not start, or went away).
fn error_event(name: &str, value: &str) -> Value {
    json!({"type": "error", "name": name, "value": value, "traceback": ""})
}

/// One run: the context's kernel (started if need be) gets the code; its events go to the
/// client until the run ends. A client that leaves ends the kernel.
async fn run(
    e2b: SharedE2b,
    sbx: Arc<Sbx>,
    ctx: Arc<Context>,
    code: String,
    env: HashMap<String, String>,
    tx: Lines,
) {
    let mut slot = tokio::select! {
        slot = ctx.kernel.lock() => slot,
        _ = tx.closed() => return,
    };
    let stop = lock(&ctx.stop).clone();
    if slot.as_ref().is_some_and(|k| !k.stop.same_as(&stop)) {
        // Restarted (or removed) since it last ran.
        *slot = None;
    }
    let kernel = match slot.take() {
        Some(k) => k,
        None => match Kernel::start(&e2b, &sbx, &ctx, stop).await {
            Ok(k) => k,
            Err(why) => {
                send(&tx, &error_event("KernelError", &why)).await;
                return;
            }
        },
    };
    let request = match ctx.language {
        Language::Python => {
            let mut line = json!({"code": code, "env_vars": env}).to_string();
            line.push('\n');
            line
        }
        Language::Bash => bash_request(&code, &env),
    };
    if kernel.stdin.write_all(request.as_bytes()).await.is_err() {
        send(
            &tx,
            &error_event("KernelError", "the kernel no longer reads its input"),
        )
        .await;
        return;
    }
    let mut kernel = kernel;
    match relay(&mut kernel, &ctx, &tx).await {
        // The kernel waits for the context's next run.
        Relayed::Done => *slot = Some(kernel),
        // A fresh one starts on the next run.
        Relayed::KernelGone => {}
        // The client left (its timeout): the run is interrupted by ending the kernel.
        Relayed::ClientGone => ctx.restart(),
    }
}

/// How a run's relay of its kernel's output ended.
enum Relayed {
    Done,
    KernelGone,
    ClientGone,
}

/// Passes what the kernel says to the client until the run's end mark.
async fn relay(kernel: &mut Kernel, ctx: &Context, tx: &Lines) -> Relayed {
    loop {
        let piece = tokio::select! {
            p = kernel.out.recv() => p,
            _ = tx.closed() => return Relayed::ClientGone,
        };
        let events = match piece {
            Some(Piece::Line(line)) if line.first() == Some(&MARK) => {
                match kernel_event(ctx, &line[1..]) {
                    KernelEvent::Forward(events) => events,
                    KernelEvent::End(events) => {
                        // Output of children that came just before the end: until the
                        // kernel's stderr mark (python), or a pause (bash).
                        kernel.runs += 1;
                        let python = ctx.language == Language::Python;
                        let wait = if python {
                            STDERR_MARK_WAIT
                        } else {
                            STDERR_GRACE
                        };
                        while !python || kernel.marks < kernel.runs {
                            match tokio::time::timeout(wait, kernel.out.recv()).await {
                                Ok(Some(Piece::Stderr(c))) => {
                                    send(tx, &output_event("stderr", &c)).await;
                                }
                                Ok(Some(Piece::StderrEnd)) => kernel.marks += 1,
                                _ => break,
                            }
                        }
                        // A mark that never came (a broken kernel) is not waited for again.
                        kernel.marks = kernel.marks.max(kernel.runs);
                        for e in &events {
                            send(tx, e).await;
                        }
                        return Relayed::Done;
                    }
                }
            }
            Some(Piece::Line(line)) => vec![output_event("stdout", &line)],
            Some(Piece::Stderr(chunk)) => vec![output_event("stderr", &chunk)],
            Some(Piece::StderrEnd) => {
                kernel.marks += 1;
                Vec::new()
            }
            Some(Piece::Ended(why)) => {
                send(tx, &error_event("KernelDied", &why)).await;
                return Relayed::KernelGone;
            }
            None => return Relayed::KernelGone,
        };
        for e in &events {
            if !send(tx, e).await {
                return Relayed::ClientGone;
            }
        }
    }
}

enum KernelEvent {
    /// Events to pass on.
    Forward(Vec<Value>),
    /// The run is over, after these.
    End(Vec<Value>),
}

/// An event line of a kernel (after its mark).
fn kernel_event(ctx: &Context, line: &[u8]) -> KernelEvent {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end();
    match ctx.language {
        Language::Python => match serde_json::from_str::<Value>(text) {
            Ok(v) if v["type"] == "end_of_execution" => KernelEvent::End(Vec::new()),
            Ok(v) if v.is_object() => KernelEvent::Forward(vec![v]),
            _ => KernelEvent::Forward(vec![output_event("stdout", line)]),
        },
        Language::Bash => {
            let Some(status) = text.strip_prefix("WASBOX-END ") else {
                return KernelEvent::Forward(vec![output_event("stdout", line)]);
            };
            let n = ctx.executions.fetch_add(1, Ordering::Relaxed) + 1;
            let mut events = Vec::new();
            if status != "0" {
                // As Jupyter's bash kernel reports a failed command: its exit status.
                events.push(json!({"type": "error", "name": "", "value": status, "traceback": ""}));
            }
            events.push(json!({"type": "number_of_executions", "execution_count": n}));
            KernelEvent::End(events)
        }
    }
}

/// The code of a bash run as the `sh` kernel reads it: evaluated as a whole (so that a
/// syntax error is the run's, not the kernel's), its environment exported first, then the
/// end mark with its status.
fn bash_request(code: &str, env: &HashMap<String, String>) -> String {
    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let mut out = String::new();
    for (k, v) in env {
        if k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            out.push_str(&format!("export {k}={}\n", quote(v)));
        }
    }
    out.push_str(&format!("eval {}\n", quote(code)));
    out.push_str("printf '\\036WASBOX-END %d\\n' \"$?\"\n");
    out
}

#[derive(Deserialize)]
struct CreateContext {
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
}

/// `POST /contexts`: a new context (Python unless named), in `cwd` (the home directory
/// unless named).
pub(super) async fn create(
    State(e2b): State<SharedE2b>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let sbx = match sandbox(&e2b, &headers) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let req: CreateContext = if body.is_empty() {
        CreateContext {
            language: None,
            cwd: None,
        }
    } else {
        match read_json(&body) {
            Ok(r) => r,
            Err(r) => return r,
        }
    };
    let language = match Language::parse(req.language.as_deref()) {
        Ok(l) => l,
        Err(why) => return error(StatusCode::BAD_REQUEST, why),
    };
    let cwd = match req.cwd.as_deref().filter(|c| !c.is_empty()) {
        None => HOME.to_string(),
        Some(c) => {
            let sandbox = sbx.session.sandbox();
            let abs = sandbox.absolute_path(c);
            if c.contains('\0') || !sandbox.is_dir(&abs) {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("cwd '{c}' does not exist or is not a directory"),
                );
            }
            abs
        }
    };
    match sbx.contexts.add(language, cwd) {
        Ok(ctx) => axum::Json(ctx.describe()).into_response(),
        Err(why) => error(StatusCode::TOO_MANY_REQUESTS, why),
    }
}

fn context_not_found(id: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!("Context with id {id} not found"),
    )
}

/// `GET /contexts`.
pub(super) async fn list(State(e2b): State<SharedE2b>, headers: HeaderMap) -> Response {
    let sbx = match sandbox(&e2b, &headers) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let mut all: Vec<Value> = lock(&sbx.contexts.all)
        .values()
        .map(|c| c.describe())
        .collect();
    all.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    axum::Json(all).into_response()
}

/// `DELETE /contexts/{id}`: ends its kernel and forgets it.
pub(super) async fn remove(
    State(e2b): State<SharedE2b>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let sbx = match sandbox(&e2b, &headers) {
        Ok(s) => s,
        Err(r) => return r,
    };
    match sbx.contexts.remove(&id) {
        Some(ctx) => {
            ctx.restart();
            StatusCode::NO_CONTENT.into_response()
        }
        None => context_not_found(&id),
    }
}

/// `POST /contexts/{id}/restart`: a fresh kernel, its state cleared.
pub(super) async fn restart(
    State(e2b): State<SharedE2b>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let sbx = match sandbox(&e2b, &headers) {
        Ok(s) => s,
        Err(r) => return r,
    };
    match sbx.contexts.get(&id) {
        Some(ctx) => {
            ctx.restart();
            ctx.executions.store(0, Ordering::Relaxed);
            StatusCode::NO_CONTENT.into_response()
        }
        None => context_not_found(&id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_are_read_as_e2b_names_them() {
        assert_eq!(Language::parse(None), Ok(Language::Python));
        assert_eq!(Language::parse(Some("Python")), Ok(Language::Python));
        assert_eq!(Language::parse(Some("bash")), Ok(Language::Bash));
        assert!(Language::parse(Some("r")).unwrap_err().contains("'r'"));
    }

    #[test]
    fn bash_code_is_quoted_whole() {
        let mut env = HashMap::new();
        env.insert("A".to_string(), "it's".to_string());
        env.insert("bad-name".to_string(), "x".to_string());
        let req = bash_request("echo 'x'; exit 3", &env);
        assert_eq!(
            req,
            "export A='it'\\''s'\neval 'echo '\\''x'\\''; exit 3'\n\
             printf '\\036WASBOX-END %d\\n' \"$?\"\n"
        );
    }
}

#[cfg(test)]
mod stderr_marks {
    use super::*;

    /// What `chunks` makes of these writes to a python kernel's stderr: its text (marks as
    /// `|`), however the writes cut the marks.
    async fn seen(writes: &[&[u8]]) -> String {
        let (r, w) = pipe(PIPE_BYTES);
        let (tx, mut rx) = mpsc::channel(64);
        let pump = tokio::spawn(chunks(r, tx, true));
        for data in writes {
            w.write_all(data).await.unwrap();
            // Each write its own chunk.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(w);
        pump.await.unwrap();
        let mut out = String::new();
        while let Some(p) = rx.recv().await {
            match p {
                Piece::Stderr(c) => out.push_str(&String::from_utf8_lossy(&c)),
                Piece::StderrEnd => out.push('|'),
                _ => {}
            }
        }
        out
    }

    #[tokio::test]
    async fn a_mark_is_found_wherever_the_chunks_cut_it() {
        assert_eq!(seen(&[b"a\n\x1e\nb\n"]).await, "a\n|b\n");
        assert_eq!(seen(&[b"\x1e\n", b"\x1e\n"]).await, "||");
        assert_eq!(seen(&[b"a\n\x1e", b"\nb"]).await, "a\n|b");
        assert_eq!(seen(&[b"a\n", b"\x1e", b"\n"]).await, "a\n|");
        // Not at a line's start, or not followed by a newline: text.
        assert_eq!(seen(&[b"a\x1e\n"]).await, "a\x1e\n");
        assert_eq!(seen(&[b"\x1ex\n"]).await, "\x1ex\n");
        assert_eq!(seen(&[b"a\n\x1e"]).await, "a\n\x1e");
    }
}
