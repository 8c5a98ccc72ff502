//! PTYs: an interactive program (by default `sh -i`) in a sandbox behind a terminal line
//! discipline kept on the host: echo, backspace, Ctrl-U, Ctrl-C (interrupts the running
//! program; the shell goes back to its prompt), Ctrl-D on an empty line (end of input), and
//! CRLF output. Every buffer is bounded: a canonical line holds at most [`MAX_LINE`] bytes
//! (more typed on one line is dropped, as a kernel tty does), and the program waits while
//! [`OUTPUT_BUFFER`] bytes are unread.
//!
//! Protocol-neutral: a front-end decides how bytes travel (base64 in JSON, a stream).

use crate::sync::lock;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, oneshot};

use crate::capacity::Admission;
use crate::host::StartHeard;
use crate::io::{PipeWriter, Terminal, pipe};
use crate::job::{JobSpec, Output, StopSignal};
use crate::runtime::Sandbox;

/// Longest canonical input line, as a Linux tty's `N_TTY_BUF_SIZE` minus its newline.
pub const MAX_LINE: usize = 4095;
/// Output kept for the reader; the program waits while this much is unread.
pub const OUTPUT_BUFFER: usize = 1 << 20;
/// Bytes of input that may wait for the program to read them.
pub const INPUT_BUFFER: usize = 64 << 10;
/// How long a `send` waits for a program that does not read its input.
const INPUT_WAIT: Duration = Duration::from_secs(5);
/// How long the end of a program waits for its output to reach the buffer.
const PUMP_DRAIN: Duration = Duration::from_secs(2);

/// What to start on a PTY.
#[derive(Clone, Debug)]
pub struct PtyConfig {
    /// Program and arguments (`sh -i` by default).
    pub argv: Vec<String>,
    pub cols: u16,
    pub rows: u16,
    /// Variables added to the sandbox's environment.
    pub env: Vec<(String, String)>,
    /// The program is stopped after this long.
    pub timeout: Duration,
    /// Its working directory (a sandbox path); the mount point when `None`.
    pub cwd: Option<String>,
}

impl Default for PtyConfig {
    fn default() -> Self {
        PtyConfig {
            argv: vec!["sh".into(), "-i".into()],
            cols: 80,
            rows: 24,
            env: Vec::new(),
            timeout: Duration::from_secs(3600),
            cwd: None,
        }
    }
}

/// Output read from a PTY.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PtyOutput {
    pub data: Vec<u8>,
    /// The program has ended and every byte of its output has been read.
    pub exited: bool,
    /// Its exit status, once `exited`.
    pub exit_code: Option<i32>,
}

/// An interactive program on a terminal. See the module documentation.
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
    /// The program has returned; its output may still be on its way to `output`.
    program_done: AtomicBool,
    /// The program has returned and all its output is in `output`.
    exited: AtomicBool,
    /// Told when `program_done` is set.
    done: Notify,
    last_activity: Mutex<Instant>,
    /// Bytes sent to it and read from it, for its log line.
    sent: AtomicU64,
    received: AtomicU64,
}

/// One piece of what the line discipline passes on.
enum Piece {
    /// Bytes for the program.
    Input(Vec<u8>),
    /// Ctrl-C.
    Interrupt,
    /// Ctrl-D on an empty line.
    EndOfInput,
}

impl Pty {
    /// Starts `config.argv` in `sandbox` on a new terminal, in the place `admission` holds.
    /// The receiver hears once the program has its instance, or why it could not get one.
    pub(crate) fn start(
        sandbox: &Sandbox,
        id: String,
        config: PtyConfig,
        admission: Admission,
    ) -> (Arc<Pty>, StartHeard) {
        let (started, start_report) = oneshot::channel();
        let (in_r, in_w) = crate::io::line_pipe(INPUT_BUFFER);
        let (out_r, out_w) = pipe(64 << 10);
        let terminal = Terminal::new(config.cols.max(1), config.rows.max(1));
        let stop = StopSignal::new();
        let pty = Arc::new(Pty {
            id,
            input: Mutex::new(Some(in_w)),
            line: Mutex::new(Vec::new()),
            output: Mutex::new(VecDeque::new()),
            output_changed: Notify::new(),
            room: Notify::new(),
            terminal: terminal.clone(),
            stop: stop.clone(),
            exit_code: Mutex::new(None),
            exited: AtomicBool::new(false),
            program_done: AtomicBool::new(false),
            done: Notify::new(),
            last_activity: Mutex::new(Instant::now()),
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
        });
        let mut spec = JobSpec::new(config.argv)
            .stdin_pipe(in_r)
            .stdout(Output::Pipe(out_w.clone()))
            .stderr(Output::Pipe(out_w))
            .terminal(terminal)
            .stop_signal(stop)
            .timeout(config.timeout)
            .admission(admission)
            .report_start(started);
        spec.env = config.env;
        if let Some(cwd) = config.cwd {
            spec = spec.cwd(cwd);
        }
        // Output pump: program output -> CRLF -> the bounded buffer the reader drains.
        let pump = tokio::spawn({
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
                    pty.wait_for_room().await;
                    pty.push_output(&text);
                }
            }
        });
        let sandbox = sandbox.clone();
        tokio::spawn({
            let pty = pty.clone();
            async move {
                let code = match sandbox.run(spec).await {
                    Ok(out) => out.exit_code,
                    Err(e) => {
                        tracing::error!(error = %format!("{e:#}"), "pty program failed to start");
                        126
                    }
                };
                *lock(&pty.exit_code) = Some(code);
                // The program's last words may still be in the pipe: report the exit only
                // once the pump has moved them to the buffer (so a reader that sees
                // `exited` has everything). The pump stops waiting for room now.
                pty.program_done.store(true, Ordering::Release);
                pty.done.notify_waiters();
                pty.room.notify_waiters();
                let _ = tokio::time::timeout(PUMP_DRAIN, pump).await;
                pty.exited.store(true, Ordering::Release);
                pty.output_changed.notify_waiters();
                tracing::info!(
                    pty_id = %pty.id,
                    exit_code = code,
                    bytes_in = pty.sent.load(Ordering::Relaxed),
                    bytes_out = pty.received.load(Ordering::Relaxed),
                    "pty program ended"
                );
            }
        });
        (pty, start_report)
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// When it was last sent to, read from or resized.
    pub fn last_activity(&self) -> Instant {
        *lock(&self.last_activity)
    }

    fn touch(&self) {
        *lock(&self.last_activity) = Instant::now();
    }

    /// The program's exit status, once it has ended.
    pub fn exit_code(&self) -> Option<i32> {
        *lock(&self.exit_code)
    }

    /// Types `data` on the terminal: the line discipline echoes it and passes whole lines
    /// (and Ctrl-C, Ctrl-D) to the program.
    pub async fn send(&self, data: &[u8]) {
        self.touch();
        self.sent.fetch_add(data.len() as u64, Ordering::Relaxed);
        for piece in self.discipline(data) {
            match piece {
                Piece::Interrupt => {
                    // Like a terminal without NOFLSH: the interrupt flushes the input
                    // typed ahead that no program has read yet, so it is not run after.
                    let writer = lock(&self.input).clone();
                    if let Some(w) = writer {
                        w.discard_unread();
                    }
                    // With no program running, wake the shell's read of its prompt so it
                    // sees the interrupt.
                    if !self.stop.interrupt() {
                        self.write_input(b"\n").await;
                    }
                }
                Piece::EndOfInput => {
                    lock(&self.input).take();
                }
                Piece::Input(bytes) => self.write_input(&bytes).await,
            }
        }
    }

    async fn write_input(&self, bytes: &[u8]) {
        let writer = lock(&self.input).clone();
        if let Some(w) = writer {
            // The program may not read: give up after a while rather than hang the sender.
            let _ = tokio::time::timeout(INPUT_WAIT, w.write_all(bytes)).await;
        }
    }

    /// Up to `max` bytes of output, waiting up to `wait` for some to arrive.
    pub async fn recv(&self, max: usize, wait: Duration) -> PtyOutput {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let changed = self.output_changed.notified();
            if !lock(&self.output).is_empty() || self.exited.load(Ordering::Acquire) {
                break;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                break;
            }
        }
        self.touch();
        let data: Vec<u8> = {
            let mut out = lock(&self.output);
            let n = max.max(1).min(out.len());
            out.drain(..n).collect()
        };
        self.room.notify_waiters();
        self.received
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        let exited = self.exited.load(Ordering::Acquire) && lock(&self.output).is_empty();
        PtyOutput {
            data,
            exited,
            exit_code: if exited { self.exit_code() } else { None },
        }
    }

    /// Changes the size the program sees (`COLUMNS`/`LINES` of its next command).
    pub fn resize(&self, cols: u16, rows: u16) {
        self.touch();
        self.terminal.resize(cols.max(1), rows.max(1));
    }

    pub fn size(&self) -> (u16, u16) {
        self.terminal.size()
    }

    /// Ends the program and the PTY.
    pub fn close(&self) {
        self.stop.stop();
        lock(&self.input).take();
        self.room.notify_waiters();
    }

    /// Waits up to `wait` for the program to have ended (its instance gone, so the
    /// sandbox no longer counts it as running). True when it has.
    pub async fn ended(&self, wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let done = self.done.notified();
            if self.program_done.load(Ordering::Acquire) {
                return true;
            }
            if tokio::time::timeout_at(deadline, done).await.is_err() {
                return self.program_done.load(Ordering::Acquire);
            }
        }
    }

    /// Waits until the reader has made room in the output buffer (or the program ended).
    async fn wait_for_room(&self) {
        loop {
            let room = self.room.notified();
            if lock(&self.output).len() < OUTPUT_BUFFER || self.program_done.load(Ordering::Acquire)
            {
                return;
            }
            room.await;
        }
    }

    fn push_output(&self, bytes: &[u8]) {
        lock(&self.output).extend(bytes);
        self.output_changed.notify_waiters();
    }

    /// Echo of typed input; dropped while the output buffer is full (nobody reads).
    fn echo(&self, bytes: &[u8]) {
        let mut out = lock(&self.output);
        if out.len() + bytes.len() <= OUTPUT_BUFFER {
            out.extend(bytes);
            drop(out);
            self.output_changed.notify_waiters();
        }
    }

    /// Applies the line discipline to typed bytes; returns what goes to the program.
    fn discipline(&self, data: &[u8]) -> Vec<Piece> {
        let mut to_program = Vec::new();
        let mut line = lock(&self.line);
        for &b in data {
            match b {
                b'\r' | b'\n' => {
                    self.echo(b"\r\n");
                    let mut l = std::mem::take(&mut *line);
                    l.push(b'\n');
                    to_program.push(Piece::Input(l));
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
                    to_program.push(Piece::Interrupt);
                }
                0x04 => {
                    if line.is_empty() {
                        to_program.push(Piece::EndOfInput);
                    } else {
                        to_program.push(Piece::Input(std::mem::take(&mut *line)));
                    }
                }
                _ if line.len() >= MAX_LINE => {} // the line is full: dropped, as by a tty
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
