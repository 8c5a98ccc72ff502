//! envd's `process.Process` service over a sandbox's session: `Start` runs a command (or a
//! program on a PTY) as a session exec whose output is streamed as it comes; the process
//! outlives the stream that started it, and `Connect` streams it again. Input, stdin's end,
//! signals, resizing and the process list are unary calls.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;
use wasbox_runtime::capacity::ROOM_WAIT;
use wasbox_runtime::io::{PipeReader, PipeWriter, pipe};
use wasbox_runtime::{Input, JobSpec, JobStatus, Output, Pty, PtyConfig, StopSignal};

use super::connect::{self, Code, Framing, RpcError, StreamSender};
use super::envd::Call;
use super::wire::{self, DataEvent, EndEvent, ProcessEvent};
use super::{MAX_MESSAGE_BYTES, MAX_PROCESSES, Sbx, SharedE2b};
use wasbox_runtime::sync::lock;

/// Bytes a process's output pipe holds before the process waits for its reader.
const PIPE_BYTES: usize = 64 << 10;
/// Events queued for one stream before the process waits for its client.
const STREAM_QUEUE: usize = 64;

/// The processes of one sandbox, by pid.
pub(crate) struct Table {
    next_pid: AtomicU32,
    procs: Mutex<HashMap<u32, Arc<Proc>>>,
}

impl Default for Table {
    fn default() -> Self {
        Table {
            next_pid: AtomicU32::new(1000),
            procs: Mutex::new(HashMap::new()),
        }
    }
}

impl Table {
    /// Ends every process (as SIGKILL would): for a pause that keeps only files.
    pub(crate) fn kill_all(&self) {
        for p in lock(&self.procs).values() {
            p.killed.store(true, Ordering::Release);
            p.stop.stop();
            if let Some(pty) = &p.pty {
                pty.close();
            }
        }
    }

    fn find(&self, sel: Option<&wire::ProcessSelector>) -> Result<Arc<Proc>, RpcError> {
        let sel = sel.ok_or_else(|| RpcError::invalid("process selector is required"))?;
        let procs = lock(&self.procs);
        let found = match (&sel.pid, &sel.tag) {
            (Some(pid), _) => procs.get(pid).cloned(),
            (None, Some(tag)) => procs
                .values()
                .find(|p| p.tag.as_deref() == Some(tag.as_str()))
                .cloned(),
            (None, None) => return Err(RpcError::invalid("process selector is empty")),
        };
        found.ok_or_else(|| {
            RpcError::not_found(match (&sel.pid, &sel.tag) {
                (Some(pid), _) => format!("process with pid {pid} not found"),
                (_, tag) => format!(
                    "process with tag {:?} not found",
                    tag.as_deref().unwrap_or("")
                ),
            })
        })
    }
}

/// A running process and whoever streams its events.
pub(crate) struct Proc {
    pid: u32,
    tag: Option<String>,
    config: wire::ProcessConfig,
    /// Its stdin while open (commands started with `stdin: true`).
    stdin: tokio::sync::Mutex<Option<PipeWriter>>,
    stop: StopSignal,
    pty: Option<Arc<Pty>>,
    killed: AtomicBool,
    state: Mutex<Streams>,
}

#[derive(Default)]
struct Streams {
    subscribers: Vec<mpsc::Sender<ProcessEvent>>,
    ended: bool,
}

impl Proc {
    /// A new stream of the process's events from now on, or `None` when it has ended.
    fn subscribe(&self) -> Option<mpsc::Receiver<ProcessEvent>> {
        let mut s = lock(&self.state);
        if s.ended {
            return None;
        }
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        s.subscribers.push(tx);
        Some(rx)
    }

    /// Hands an event to every stream, waiting for room (so a process never runs ahead of
    /// its readers by more than the queue); streams whose clients left are dropped.
    async fn emit(&self, ev: ProcessEvent) {
        let subs: Vec<_> = lock(&self.state).subscribers.clone();
        let mut gone = false;
        for tx in &subs {
            gone |= tx.send(ev.clone()).await.is_err();
        }
        if gone {
            lock(&self.state).subscribers.retain(|t| !t.is_closed());
        }
    }

    /// The process went with its sandbox: its streams end without an end event, as when
    /// a sandbox's envd goes away (the SDK then finds the sandbox gone and says so).
    fn abandon(&self) {
        let mut s = lock(&self.state);
        s.ended = true;
        s.subscribers.clear();
    }

    /// The last event: every stream gets it and ends.
    async fn finish(&self, end: EndEvent) {
        let subs = {
            let mut s = lock(&self.state);
            s.ended = true;
            std::mem::take(&mut s.subscribers)
        };
        for tx in subs {
            let _ = tx.send(ProcessEvent::End(end.clone())).await;
        }
    }
}

/// The methods of `process.Process`, and how each answers.
const METHODS: &[(&str, Framing)] = &[
    ("Start", Framing::Stream),
    ("Connect", Framing::Stream),
    ("StreamInput", Framing::Stream),
    ("List", Framing::Unary),
    ("SendInput", Framing::Unary),
    ("CloseStdin", Framing::Unary),
    ("SendSignal", Framing::Unary),
    ("Update", Framing::Unary),
];

/// `POST /process.Process/{method}`.
pub async fn call(
    State(e2b): State<SharedE2b>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let call = match Call::begin(&e2b, &headers, &method, METHODS) {
        Ok(c) => c,
        Err(r) => return r,
    };
    if method == "StreamInput" {
        return stream_input(call.sbx, body).await;
    }
    let bytes = match call.body(body).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let (sbx, deadline, keepalive) = (&call.sbx, call.deadline, call.keepalive);
    let result = match method.as_str() {
        "Start" => match connect::decode_stream_request(&bytes, MAX_MESSAGE_BYTES) {
            Ok(req) => start(&e2b, sbx, req, deadline, keepalive).await,
            Err(e) => Err(e),
        },
        "Connect" => {
            match connect::decode_stream_request::<wire::SelectRequest>(&bytes, MAX_MESSAGE_BYTES) {
                Ok(req) => sbx.procs.find(req.process.as_ref()).and_then(|p| {
                    let rx = p
                        .subscribe()
                        .ok_or_else(|| RpcError::not_found("the process has ended"))?;
                    Ok(stream_events(p.pid, rx, deadline, keepalive))
                }),
                Err(e) => Err(e),
            }
        }
        _ => unary(sbx, &method, &bytes).await.map(|v| {
            (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                v.to_string(),
            )
                .into_response()
        }),
    };
    result.unwrap_or_else(|e| call.fail(e))
}

async fn unary(sbx: &Sbx, method: &str, body: &[u8]) -> Result<serde_json::Value, RpcError> {
    let empty = serde_json::json!({});
    match method {
        "List" => {
            connect::decode_unary::<serde_json::Value>(body)?;
            let procs = lock(&sbx.procs.procs);
            let mut list: Vec<wire::ProcessInfo> = procs
                .values()
                .map(|p| wire::ProcessInfo {
                    config: p.config.clone(),
                    pid: p.pid,
                    tag: p.tag.clone(),
                })
                .collect();
            list.sort_by_key(|p| p.pid);
            Ok(serde_json::json!({ "processes": list }))
        }
        "SendInput" => {
            let req: wire::SendInputRequest = connect::decode_unary(body)?;
            let p = sbx.procs.find(req.process.as_ref())?;
            let input = req.input.unwrap_or_default();
            send_input(&p, input).await?;
            Ok(empty)
        }
        "CloseStdin" => {
            let req: wire::SelectRequest = connect::decode_unary(body)?;
            let p = sbx.procs.find(req.process.as_ref())?;
            if p.pty.is_some() {
                return Err(RpcError::new(
                    Code::FailedPrecondition,
                    "a PTY has no stdin to close: send Ctrl-D (0x04) instead",
                ));
            }
            // Dropping the writer is the end of file the process reads.
            p.stdin.lock().await.take();
            Ok(empty)
        }
        "SendSignal" => {
            let req: wire::SendSignalRequest = connect::decode_unary(body)?;
            let p = sbx.procs.find(req.process.as_ref())?;
            match req.signal {
                wire::Signal::Kill | wire::Signal::Term => {
                    p.killed.store(true, Ordering::Release);
                    p.stop.stop();
                    if let Some(pty) = &p.pty {
                        pty.close();
                    }
                    Ok(empty)
                }
                wire::Signal::Unspecified => Err(RpcError::invalid("signal is required")),
            }
        }
        "Update" => {
            let req: wire::UpdateRequest = connect::decode_unary(body)?;
            let p = sbx.procs.find(req.process.as_ref())?;
            let Some(pty) = &p.pty else {
                return Err(RpcError::new(
                    Code::FailedPrecondition,
                    "the process has no PTY to resize",
                ));
            };
            if let Some(size) = req.pty.and_then(|p| p.size) {
                let (cols, rows) = pty_size(size)?;
                pty.resize(cols, rows);
            }
            Ok(empty)
        }
        other => Err(RpcError::new(
            Code::Unimplemented,
            format!("process.Process/{other} is not a method of this service"),
        )),
    }
}

async fn send_input(p: &Proc, input: wire::ProcessInput) -> Result<(), RpcError> {
    if let Some(data) = input.pty {
        let pty = p
            .pty
            .as_ref()
            .ok_or_else(|| RpcError::new(Code::FailedPrecondition, "the process has no PTY"))?;
        pty.send(&data).await;
    }
    if let Some(data) = input.stdin {
        if let Some(pty) = &p.pty {
            pty.send(&data).await;
            return Ok(());
        }
        let stdin = p.stdin.lock().await;
        let w = stdin.as_ref().ok_or_else(|| {
            RpcError::new(
                Code::FailedPrecondition,
                "the process's stdin is closed, or it was started without stdin",
            )
        })?;
        w.write_all(&data).await.map_err(|_| {
            RpcError::new(
                Code::FailedPrecondition,
                "the process no longer reads its stdin",
            )
        })?;
    }
    Ok(())
}

/// `StreamInput`: a `start` naming the process, then `data` messages in order.
async fn stream_input(sbx: Arc<Sbx>, body: Body) -> Response {
    let mut reader = connect::EnvelopeReader::new(body, MAX_MESSAGE_BYTES);
    let mut target: Option<Arc<Proc>> = None;
    let result: Result<(), RpcError> = async {
        while let Some(msg) = reader.next::<wire::StreamInputRequest>().await? {
            if let Some(start) = msg.start {
                target = Some(sbx.procs.find(start.process.as_ref())?);
            }
            if let Some(data) = msg.data {
                let p = target
                    .as_ref()
                    .ok_or_else(|| RpcError::invalid("the first message must be a start"))?;
                send_input(p, data.input.unwrap_or_default()).await?;
            }
        }
        Ok(())
    }
    .await;
    let (tx, res) = connect::stream_response();
    tokio::spawn(async move {
        match result {
            Ok(()) => {
                tx.send(&serde_json::json!({})).await;
                tx.finish(None).await;
            }
            Err(e) => tx.finish(Some(e)).await,
        }
    });
    res
}

fn pty_size(size: wire::PtySize) -> Result<(u16, u16), RpcError> {
    let ok = |n: u32| (1..=1000).contains(&n);
    if !ok(size.cols) || !ok(size.rows) {
        return Err(RpcError::invalid(format!(
            "a PTY of {}x{} is not possible: 1 to 1000 columns and rows",
            size.cols, size.rows
        )));
    }
    Ok((size.cols as u16, size.rows as u16))
}

/// `Start`: runs the command and answers with its event stream.
async fn start(
    e2b: &SharedE2b,
    sbx: &Arc<Sbx>,
    req: wire::StartRequest,
    deadline: Option<Duration>,
    keepalive: Option<Duration>,
) -> Result<Response, RpcError> {
    let config = req
        .process
        .ok_or_else(|| RpcError::invalid("process is required"))?;
    if config.cmd.is_empty() {
        return Err(RpcError::invalid("process.cmd is required"));
    }
    let strings = std::iter::once(&config.cmd)
        .chain(&config.args)
        .chain(config.envs.keys())
        .chain(config.envs.values())
        .chain(config.cwd.iter());
    for s in strings {
        if s.contains('\0') {
            return Err(RpcError::invalid(
                "a NUL byte in the process's command or environment",
            ));
        }
    }
    if config.envs.keys().any(|k| k.is_empty() || k.contains('=')) {
        return Err(RpcError::invalid(
            "an environment variable with no name or with '='",
        ));
    }
    let cwd = match config.cwd.as_deref().filter(|c| !c.is_empty()) {
        None => sbx.session.sandbox().workdir().to_string(),
        Some(c) => {
            let abs = sbx.session.sandbox().absolute_path(c);
            if !sbx.session.sandbox().is_dir(&abs) {
                return Err(RpcError::invalid(format!(
                    "cwd '{c}' does not exist or is not a directory"
                )));
            }
            abs
        }
    };
    if lock(&sbx.procs.procs).len() >= MAX_PROCESSES {
        return Err(RpcError::new(
            Code::ResourceExhausted,
            format!("the sandbox runs its most processes ({MAX_PROCESSES}) already"),
        ));
    }
    let pid = sbx.procs.next_pid.fetch_add(1, Ordering::Relaxed);
    let mut argv = vec![config.cmd.clone()];
    argv.extend(config.args.iter().cloned());
    let env: Vec<(String, String)> = config
        .envs
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .chain(std::iter::once(("PWD".to_string(), cwd.clone())))
        .collect();
    let stop = StopSignal::new();

    if let Some(pty_req) = req.pty {
        let (cols, rows) = pty_size(pty_req.size.unwrap_or(wire::PtySize { cols: 80, rows: 24 }))?;
        let mut env = env;
        env.push(("TERM".into(), "xterm-256color".into()));
        let pty = sbx
            .session
            .open_pty(
                format!("e2b-{pid}"),
                PtyConfig {
                    argv,
                    cols,
                    rows,
                    env,
                    timeout: Duration::from_secs(super::MAX_TIMEOUT_SECS as u64),
                    cwd: Some(cwd),
                },
            )
            .await
            .map_err(|e| RpcError::new(Code::ResourceExhausted, e.to_string()))?;
        let proc = Arc::new(Proc {
            pid,
            tag: req.tag,
            config,
            stdin: tokio::sync::Mutex::new(None),
            stop,
            pty: Some(pty.clone()),
            killed: AtomicBool::new(false),
            state: Mutex::new(Streams::default()),
        });
        let rx = proc.subscribe().expect("a new process has not ended");
        lock(&sbx.procs.procs).insert(pid, proc.clone());
        let sbx = sbx.clone();
        tokio::spawn(async move {
            let code = loop {
                let out = pty.recv(32 << 10, Duration::from_secs(1)).await;
                if !out.data.is_empty() {
                    proc.emit(ProcessEvent::Data(DataEvent::Pty(out.data)))
                        .await;
                }
                if out.exited {
                    break out.exit_code;
                }
            };
            sbx.session.close_pty(&format!("e2b-{pid}"));
            if sbx.session.is_ended() && !proc.killed.load(Ordering::Acquire) {
                proc.abandon();
                lock(&sbx.procs.procs).remove(&pid);
                return;
            }
            // Out of the table before its end is told: a client that saw the end and
            // lists the processes must not find it.
            lock(&sbx.procs.procs).remove(&pid);
            proc.finish(end_event(
                code.unwrap_or(-1),
                proc.killed.load(Ordering::Acquire),
                None,
            ))
            .await;
        });
        return Ok(stream_events(pid, rx, deadline, keepalive));
    }

    let admission = e2b
        .node
        .runtime
        .admit(ROOM_WAIT)
        .await
        .map_err(|why| RpcError::new(Code::ResourceExhausted, why.to_string()))?;
    let (out_r, out_w) = pipe(PIPE_BYTES);
    let (err_r, err_w) = pipe(PIPE_BYTES);
    let (report, started) = tokio::sync::oneshot::channel();
    let mut spec = JobSpec::new(argv)
        .cwd(cwd)
        .stdout(Output::Pipe(out_w))
        .stderr(Output::Pipe(err_w))
        .stop_signal(stop.clone())
        .admission(admission)
        .report_start(report)
        .start_wait(ROOM_WAIT);
    spec.env = env;
    let stdin = if req.stdin == Some(true) {
        let (in_r, in_w) = pipe(PIPE_BYTES);
        spec.stdin = Input::Pipe(in_r);
        Some(in_w)
    } else {
        None
    };
    let proc = Arc::new(Proc {
        pid,
        tag: req.tag,
        config,
        stdin: tokio::sync::Mutex::new(stdin),
        stop,
        pty: None,
        killed: AtomicBool::new(false),
        state: Mutex::new(Streams::default()),
    });
    let rx = proc.subscribe().expect("a new process has not ended");
    lock(&sbx.procs.procs).insert(pid, proc.clone());
    let sbx = sbx.clone();
    tokio::spawn(async move {
        let pumps = [
            tokio::spawn(pump(proc.clone(), out_r, DataEvent::Stdout)),
            tokio::spawn(pump(proc.clone(), err_r, DataEvent::Stderr)),
        ];
        let out = sbx.session.exec(spec).await;
        for p in pumps {
            let _ = p.await;
        }
        let killed = proc.killed.load(Ordering::Acquire);
        // Refused for lack of room: the caller got the error, not a stream.
        let refused = out.as_ref().is_ok_and(|o| o.lacked_room().is_some());
        if refused || (sbx.session.is_ended() && !killed) {
            proc.abandon();
            lock(&sbx.procs.procs).remove(&pid);
            return;
        }
        let end = match out {
            Ok(o) if o.status == JobStatus::Timeout => end_event(-1, true, None),
            Ok(o) => end_event(o.exit_code, killed, None),
            Err(e) => end_event(-1, false, Some(format!("{e:#}"))),
        };
        // Out of the table before its end is told (see above).
        lock(&sbx.procs.procs).remove(&pid);
        proc.finish(end).await;
    });
    // Its program waits for room other sandboxes hold, like a job; one that finds none is
    // refused as a process the node has no place for is.
    if let Ok(Err(failed)) = started.await
        && failed.for_lack_of_room
    {
        return Err(RpcError::new(
            Code::ResourceExhausted,
            format!("cannot start the process: {failed}"),
        ));
    }
    Ok(stream_events(pid, rx, deadline, keepalive))
}

/// What a pipe carries, as data events, until the process closes it.
async fn pump(proc: Arc<Proc>, r: PipeReader, wrap: fn(Vec<u8>) -> DataEvent) {
    loop {
        let chunk = r.read(32 << 10).await;
        if chunk.is_empty() {
            break;
        }
        proc.emit(ProcessEvent::Data(wrap(chunk.to_vec()))).await;
    }
}

/// The end event: an exit status, or `signal: killed` for a process stopped by a signal,
/// the sandbox's end or its deadline.
fn end_event(code: i32, killed: bool, error: Option<String>) -> EndEvent {
    match (error, killed) {
        (Some(e), _) => EndEvent {
            exit_code: -1,
            exited: false,
            status: "error".into(),
            error: Some(e),
        },
        (None, true) => EndEvent {
            exit_code: -1,
            exited: false,
            status: "signal: killed".into(),
            error: None,
        },
        (None, false) => EndEvent {
            exit_code: code,
            exited: true,
            status: format!("exit status {code}"),
            error: None,
        },
    }
}

/// The answer of `Start` and `Connect`: the start event, then the process's events as they
/// come, keepalives between them, and the end of the stream after the end event (or at the
/// client's deadline, with `deadline_exceeded`; the process goes on).
fn stream_events(
    pid: u32,
    mut rx: mpsc::Receiver<ProcessEvent>,
    deadline: Option<Duration>,
    keepalive: Option<Duration>,
) -> Response {
    let (tx, res) = connect::stream_response();
    tokio::spawn(async move {
        let send = |tx: &StreamSender, ev: ProcessEvent| {
            let tx = tx.clone();
            async move { tx.send(&wire::EventMessage { event: &ev }).await }
        };
        if !send(&tx, ProcessEvent::Start { pid }).await {
            return;
        }
        let until = deadline.map(|d| tokio::time::Instant::now() + d);
        let mut ping =
            keepalive.map(|k| tokio::time::interval_at(tokio::time::Instant::now() + k, k));
        loop {
            let next = async {
                match ping.as_mut() {
                    Some(p) => {
                        p.tick().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let expired = async {
                match until {
                    Some(u) => tokio::time::sleep_until(u).await,
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                ev = rx.recv() => match ev {
                    Some(ev) => {
                        let last = matches!(ev, ProcessEvent::End(_));
                        if !send(&tx, ev).await {
                            return;
                        }
                        if last {
                            tx.finish(None).await;
                            return;
                        }
                    }
                    None => {
                        // The process went with its sandbox (killed, or its timeout).
                        tx.abort().await;
                        return;
                    }
                },
                () = next => {
                    if !send(&tx, ProcessEvent::Keepalive {}).await {
                        return;
                    }
                }
                () = expired => {
                    tx.finish(Some(RpcError::new(Code::DeadlineExceeded, "the stream's deadline passed; the process goes on"))).await;
                    return;
                }
            }
        }
    });
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_events_say_how_the_process_ended() {
        let e = end_event(3, false, None);
        assert_eq!(
            (e.exit_code, e.exited, e.status.as_str()),
            (3, true, "exit status 3")
        );
        let e = end_event(137, true, None);
        assert_eq!(
            (e.exit_code, e.exited, e.status.as_str()),
            (-1, false, "signal: killed")
        );
        let e = end_event(0, false, Some("no such program".into()));
        assert_eq!(e.error.as_deref(), Some("no such program"));
    }

    #[test]
    fn pty_sizes_are_bounded() {
        assert_eq!(
            pty_size(wire::PtySize { cols: 80, rows: 24 }).unwrap(),
            (80, 24)
        );
        assert!(pty_size(wire::PtySize { cols: 0, rows: 24 }).is_err());
        assert!(
            pty_size(wire::PtySize {
                cols: 80,
                rows: 5000
            })
            .is_err()
        );
    }
}
