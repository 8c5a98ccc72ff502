//! Standard streams of sandboxed processes: bounded pipes between processes, bounded
//! capture buffers for job output, workspace files, host writers, and the size of the
//! terminal a job runs on.
//!
//! Everything here is host memory only; it never opens a path (callers hand in files they
//! opened inside the workspace).

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use wasmtime_wasi::cli::{IsTerminal, StdinStream, StdoutStream};
use wasmtime_wasi::p2::{InputStream, OutputStream, Pollable, StreamError, StreamResult};

use crate::limits::Quota;
use crate::sync::lock;

// ---------------------------------------------------------------------------------------
// Pipes
// ---------------------------------------------------------------------------------------

struct PipeState {
    buf: VecDeque<u8>,
    /// A terminal's input in canonical mode: a read takes at most one line, so that a
    /// program never holds lines typed ahead that Ctrl-C must flush.
    lines: bool,
    capacity: usize,
    readers: usize,
    writers: usize,
    read_wakers: Vec<Waker>,
    write_wakers: Vec<Waker>,
}

impl PipeState {
    fn wake_readers(&mut self) {
        self.read_wakers.drain(..).for_each(Waker::wake);
    }
    fn wake_writers(&mut self) {
        self.write_wakers.drain(..).for_each(Waker::wake);
    }
}

/// Creates a pipe that buffers up to `capacity` bytes.
pub fn pipe(capacity: usize) -> (PipeReader, PipeWriter) {
    let state = Arc::new(Mutex::new(PipeState {
        buf: VecDeque::new(),
        lines: false,
        capacity: capacity.max(1),
        readers: 1,
        writers: 1,
        read_wakers: Vec::new(),
        write_wakers: Vec::new(),
    }));
    (PipeReader(state.clone()), PipeWriter(state))
}

/// The read end of a pipe. Clones share the same position. End of file comes once every
/// writer is gone.
pub struct PipeReader(Arc<Mutex<PipeState>>);

/// The write end of a pipe. Writes fail with a broken pipe once every reader is gone.
pub struct PipeWriter(Arc<Mutex<PipeState>>);

impl Clone for PipeReader {
    fn clone(&self) -> Self {
        lock(&self.0).readers += 1;
        PipeReader(self.0.clone())
    }
}

impl Clone for PipeWriter {
    fn clone(&self) -> Self {
        lock(&self.0).writers += 1;
        PipeWriter(self.0.clone())
    }
}

impl Drop for PipeReader {
    fn drop(&mut self) {
        let mut s = lock(&self.0);
        s.readers -= 1;
        if s.readers == 0 {
            s.buf.clear();
            s.wake_writers();
        }
    }
}

impl Drop for PipeWriter {
    fn drop(&mut self) {
        let mut s = lock(&self.0);
        s.writers -= 1;
        if s.writers == 0 {
            s.wake_readers();
        }
    }
}

/// [`pipe`] for a terminal's input: each read takes at most one line, as `read(2)` of a
/// tty in canonical mode does.
pub(crate) fn line_pipe(capacity: usize) -> (PipeReader, PipeWriter) {
    let (r, w) = pipe(capacity);
    lock(&r.0).lines = true;
    (r, w)
}

impl PipeWriter {
    /// Drops what is buffered and not yet read (a terminal's input queue flushed by
    /// Ctrl-C); returns how many bytes that was.
    pub(crate) fn discard_unread(&self) -> usize {
        let mut s = lock(&self.0);
        let n = s.buf.len();
        s.buf.clear();
        s.wake_writers();
        n
    }
}

impl PipeReader {
    /// Takes up to `max` buffered bytes (empty at end of file), or registers the waker.
    fn poll_take(&self, cx: &mut Context<'_>, max: usize) -> Poll<Bytes> {
        let mut s = lock(&self.0);
        if !s.buf.is_empty() {
            let mut n = max.min(s.buf.len());
            if s.lines
                && let Some(end) = s.buf.iter().take(n).position(|b| *b == b'\n')
            {
                n = end + 1;
            }
            let out: Vec<u8> = s.buf.drain(..n).collect();
            s.wake_writers();
            return Poll::Ready(Bytes::from(out));
        }
        if s.writers == 0 {
            return Poll::Ready(Bytes::new());
        }
        s.read_wakers.push(cx.waker().clone());
        Poll::Pending
    }

    /// Ready once data is buffered or every writer is gone.
    pub(crate) fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = lock(&self.0);
        if !s.buf.is_empty() || s.writers == 0 {
            return Poll::Ready(());
        }
        s.read_wakers.push(cx.waker().clone());
        Poll::Pending
    }

    /// Reads up to `max` bytes, waiting for data; an empty result is end of file.
    pub async fn read(&self, max: usize) -> Bytes {
        std::future::poll_fn(|cx| self.poll_take(cx, max.max(1))).await
    }
}

impl PipeWriter {
    /// Room for at least one byte, or `Err` when the reader is gone.
    fn poll_room(&self, cx: &mut Context<'_>) -> Poll<Result<usize, ()>> {
        let mut s = lock(&self.0);
        if s.readers == 0 {
            return Poll::Ready(Err(()));
        }
        let room = s.capacity.saturating_sub(s.buf.len());
        if room > 0 {
            return Poll::Ready(Ok(room));
        }
        s.write_wakers.push(cx.waker().clone());
        Poll::Pending
    }

    fn push(&self, data: &[u8]) -> Result<(), ()> {
        let mut s = lock(&self.0);
        if s.readers == 0 {
            return Err(());
        }
        s.buf.extend(data);
        s.wake_readers();
        Ok(())
    }

    /// Writes all of `data`, waiting for room; fails with a broken pipe once no one reads.
    pub async fn write_all(&self, mut data: &[u8]) -> std::io::Result<()> {
        while !data.is_empty() {
            let room = std::future::poll_fn(|cx| self.poll_room(cx))
                .await
                .map_err(|()| broken_pipe())?;
            let n = room.min(data.len());
            self.push(&data[..n]).map_err(|()| broken_pipe())?;
            data = &data[n..];
        }
        Ok(())
    }
}

fn broken_pipe() -> std::io::Error {
    std::io::Error::from(std::io::ErrorKind::BrokenPipe)
}

// ---------------------------------------------------------------------------------------
// Terminal
// ---------------------------------------------------------------------------------------

/// The size of the terminal a job runs on; resizing is seen by its programs (through the
/// `terminal-size` import). Cheap to clone.
#[derive(Clone)]
pub struct Terminal(Arc<Mutex<(u16, u16)>>);

impl Terminal {
    pub fn new(cols: u16, rows: u16) -> Self {
        Terminal(Arc::new(Mutex::new((cols, rows))))
    }
    pub fn resize(&self, cols: u16, rows: u16) {
        *lock(&self.0) = (cols, rows);
    }
    pub fn size(&self) -> (u16, u16) {
        *lock(&self.0)
    }
}

// ---------------------------------------------------------------------------------------
// Capture
// ---------------------------------------------------------------------------------------

struct CaptureState {
    data: Vec<u8>,
    limit: usize,
    truncated: bool,
}

/// A bounded in-memory capture of one output stream. Bytes past the limit are dropped and
/// the capture is marked truncated.
#[derive(Clone)]
pub struct Capture(Arc<Mutex<CaptureState>>);

impl Capture {
    pub fn new(limit: usize) -> Self {
        Capture(Arc::new(Mutex::new(CaptureState {
            data: Vec::new(),
            limit,
            truncated: false,
        })))
    }

    fn push(&self, bytes: &[u8]) {
        let mut s = lock(&self.0);
        let room = s.limit.saturating_sub(s.data.len());
        if bytes.len() > room {
            s.truncated = true;
        }
        let n = room.min(bytes.len());
        s.data.extend_from_slice(&bytes[..n]);
    }

    /// The captured text and whether anything was dropped. A truncated capture is cut back
    /// to the last whole UTF-8 character; other invalid UTF-8 is replaced with U+FFFD.
    pub fn text(&self) -> (String, bool) {
        let s = lock(&self.0);
        let mut end = s.data.len();
        if s.truncated {
            end = utf8_boundary(&s.data);
        }
        (
            String::from_utf8_lossy(&s.data[..end]).into_owned(),
            s.truncated,
        )
    }
}

/// The length of `data` without an incomplete UTF-8 sequence at its end.
pub fn utf8_boundary(data: &[u8]) -> usize {
    let len = data.len();
    // A UTF-8 character is at most 4 bytes: look at most 3 bytes back for its lead byte.
    for back in 1..=len.min(3) {
        let b = data[len - back];
        if b & 0b1100_0000 == 0b1000_0000 {
            continue; // continuation byte
        }
        let need = if b & 0b1000_0000 == 0 {
            1
        } else if b & 0b1110_0000 == 0b1100_0000 {
            2
        } else if b & 0b1111_0000 == 0b1110_0000 {
            3
        } else if b & 0b1111_1000 == 0b1111_0000 {
            4
        } else {
            1
        };
        return if need > back { len - back } else { len };
    }
    len
}

// ---------------------------------------------------------------------------------------
// Sinks and sources
// ---------------------------------------------------------------------------------------

/// A host writer that receives a stream as it is produced (e.g. the terminal of `wasbox run`).
pub type SharedWriter = Arc<Mutex<Box<dyn Write + Send>>>;

/// A host writer that passes on at most `limit` bytes, then one note, then nothing: a guest
/// that floods its log cannot fill the operator's disk.
pub struct CappedWriter<W> {
    inner: W,
    left: usize,
    limit: usize,
}

impl<W: Write> CappedWriter<W> {
    pub fn new(inner: W, limit: usize) -> Self {
        CappedWriter {
            inner,
            left: limit,
            limit,
        }
    }

    pub fn into_inner(self) -> W {
        self.inner
    }
}

impl<W: Write> Write for CappedWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Ok(buf.len());
        }
        let n = buf.len().min(self.left);
        self.inner.write_all(&buf[..n])?;
        self.left -= n;
        if self.left == 0 {
            writeln!(
                self.inner,
                "\n[wasbox] the agent wrote more than {} MiB of logs; the rest is dropped",
                self.limit >> 20
            )?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// An agent's log: this process's stderr, at most `limit` bytes of it.
pub fn capped_stderr(limit: usize) -> OutputSink {
    OutputSink::Writer(Arc::new(Mutex::new(Box::new(CappedWriter::new(
        std::io::stderr(),
        limit,
    )))))
}

/// Where a process's stdout or stderr goes.
#[derive(Clone)]
pub enum OutputSink {
    Null,
    Capture(Capture),
    Pipe(PipeWriter),
    File(Arc<SinkFile>),
    Writer(SharedWriter),
}

/// A file a process's output goes to, and the quota its growth is charged to.
pub struct SinkFile {
    file: Mutex<std::fs::File>,
    /// `None` for a file outside any sandbox (the embedder's).
    quota: Option<(Arc<Quota>, bool)>,
}

impl SinkFile {
    fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
        use std::io::Seek as _;
        let mut file = lock(&self.file);
        let mut growth = 0;
        if let Some((quota, append)) = &self.quota {
            let size = file.metadata()?.len();
            let start = if *append {
                size
            } else {
                file.stream_position()?
            };
            growth = start
                .saturating_add(bytes.len() as u64)
                .saturating_sub(size);
            if !quota.reserve_bytes(growth) {
                return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
            }
        }
        let r = file.write_all(bytes);
        if r.is_err()
            && let Some((quota, _)) = &self.quota
        {
            quota.release_bytes(growth);
        }
        r
    }
}

/// Where a process's stdin comes from.
#[derive(Clone)]
pub enum InputSource {
    Null,
    Pipe(PipeReader),
    File(Arc<Mutex<std::fs::File>>),
}

impl OutputSink {
    pub fn file(file: std::fs::File) -> Self {
        OutputSink::File(Arc::new(SinkFile {
            file: Mutex::new(file),
            quota: None,
        }))
    }

    /// A sandbox file opened for `>` (or `>>` when `append`) whose growth `quota` pays for.
    pub(crate) fn file_in_quota(file: std::fs::File, append: bool, quota: Arc<Quota>) -> Self {
        OutputSink::File(Arc::new(SinkFile {
            file: Mutex::new(file),
            quota: Some((quota, append)),
        }))
    }

    /// Room to write now: `Ok(0)` means wait. Writing to a pipe nobody reads any more ends
    /// the writer, as SIGPIPE would (see [`BrokenPipe`]).
    ///
    /// Any room at all is reported as [`WRITE_PERMIT`]: a program's single `write` of up to
    /// that much is taken whole (a pipe holds it beyond its capacity, and its writer then
    /// waits until the reader is below capacity again). Programs that do not retry short
    /// writes (CPython's `sys.stdout.write` here) would otherwise lose all but the first
    /// chunk.
    fn poll_room(&self, cx: &mut Context<'_>) -> Poll<StreamResult<usize>> {
        match self {
            OutputSink::Pipe(w) => w
                .poll_room(cx)
                .map_ok(|_| WRITE_PERMIT)
                .map_err(|()| sigpipe()),
            _ => Poll::Ready(Ok(WRITE_PERMIT)),
        }
    }

    fn write_now(&self, bytes: &[u8]) -> StreamResult<()> {
        match self {
            OutputSink::Null => Ok(()),
            OutputSink::Capture(c) => {
                c.push(bytes);
                Ok(())
            }
            OutputSink::Pipe(w) => w.push(bytes).map_err(|()| sigpipe()),
            OutputSink::File(f) => f
                .write(bytes)
                .map_err(|e| StreamError::LastOperationFailed(e.into())),
            OutputSink::Writer(w) => {
                let mut w = lock(w);
                w.write_all(bytes)
                    .and_then(|()| w.flush())
                    .map_err(|e| StreamError::LastOperationFailed(e.into()))
            }
        }
    }

    /// Writes all of `data`, waiting for room in a pipe.
    pub async fn write_all(&self, data: &[u8]) -> std::io::Result<()> {
        match self {
            OutputSink::Pipe(w) => w.write_all(data).await,
            other => other
                .write_now(data)
                .map_err(|e| std::io::Error::other(e.to_string())),
        }
    }
}

/// The trap that ends a process which wrote to a pipe with no reader left: the host
/// reports it as exit status 141 (128 + SIGPIPE) and prints nothing, like a shell would.
#[derive(Debug)]
pub struct BrokenPipe;

impl std::fmt::Display for BrokenPipe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("write to a pipe with no reader")
    }
}

impl std::error::Error for BrokenPipe {}

fn sigpipe() -> StreamError {
    StreamError::Trap(wasmtime::Error::new(BrokenPipe))
}

/// Largest write a sink takes at once (see [`OutputSink::poll_room`]).
pub const WRITE_PERMIT: usize = 16 << 20;
/// Largest read from a file at once.
const SINK_CHUNK: usize = 64 << 10;

impl InputSource {
    pub fn file(file: std::fs::File) -> Self {
        InputSource::File(Arc::new(Mutex::new(file)))
    }

    fn poll_read(&self, cx: &mut Context<'_>, max: usize) -> Poll<std::io::Result<Bytes>> {
        match self {
            InputSource::Null => Poll::Ready(Ok(Bytes::new())),
            InputSource::Pipe(r) => r.poll_take(cx, max).map(Ok),
            InputSource::File(f) => {
                let mut buf = vec![0; max.min(SINK_CHUNK)];
                let n = lock(f).read(&mut buf)?;
                buf.truncate(n);
                Poll::Ready(Ok(Bytes::from(buf)))
            }
        }
    }
}

/// One open handle of a guest onto an [`OutputSink`].
struct OutputHandle {
    sink: OutputSink,
}

#[async_trait::async_trait]
impl Pollable for OutputHandle {
    async fn ready(&mut self) {
        let _ = std::future::poll_fn(|cx| self.sink.poll_room(cx)).await;
    }
}

#[async_trait::async_trait]
impl OutputStream for OutputHandle {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.sink.write_now(&bytes)
    }
    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }
    fn check_write(&mut self) -> StreamResult<usize> {
        let waker = Waker::noop();
        match self.sink.poll_room(&mut Context::from_waker(waker)) {
            Poll::Ready(r) => r,
            Poll::Pending => Ok(0),
        }
    }
}

impl AsyncWrite for OutputHandle {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.sink.poll_room(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(_)) => Poll::Ready(Err(broken_pipe())),
            Poll::Ready(Ok(room)) => {
                let n = room.min(buf.len());
                Poll::Ready(
                    self.sink
                        .write_now(&buf[..n])
                        .map(|()| n)
                        .map_err(|e| std::io::Error::other(e.to_string())),
                )
            }
        }
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl IsTerminal for OutputSink {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for OutputSink {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(OutputHandle { sink: self.clone() })
    }
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(OutputHandle { sink: self.clone() })
    }
}

/// One open handle of a guest onto an [`InputSource`].
struct InputHandle {
    source: InputSource,
    eof: bool,
}

#[async_trait::async_trait]
impl Pollable for InputHandle {
    async fn ready(&mut self) {
        if let InputSource::Pipe(r) = &self.source {
            std::future::poll_fn(|cx| r.poll_readable(cx)).await
        }
    }
}

#[async_trait::async_trait]
impl InputStream for InputHandle {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        if self.eof {
            return Err(StreamError::Closed);
        }
        let waker = Waker::noop();
        match self
            .source
            .poll_read(&mut Context::from_waker(waker), size.max(1))
        {
            Poll::Pending => Ok(Bytes::new()),
            Poll::Ready(Ok(b)) if b.is_empty() => {
                self.eof = true;
                Err(StreamError::Closed)
            }
            Poll::Ready(Ok(b)) => Ok(b),
            Poll::Ready(Err(e)) => Err(StreamError::LastOperationFailed(e.into())),
        }
    }
}

impl AsyncRead for InputHandle {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.source.poll_read(cx, buf.remaining()) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(b)) => {
                buf.put_slice(&b);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
        }
    }
}

impl IsTerminal for InputSource {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdinStream for InputSource {
    fn p2_stream(&self) -> Box<dyn InputStream> {
        Box::new(InputHandle {
            source: self.clone(),
            eof: false,
        })
    }
    fn async_stream(&self) -> Box<dyn AsyncRead + Send + Sync> {
        Box::new(InputHandle {
            source: self.clone(),
            eof: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_writers_keep_the_first_bytes_and_one_note() {
        let mut log = CappedWriter::new(Vec::new(), 10);
        log.write_all(b"0123456").unwrap();
        log.write_all(b"789abcdef").unwrap();
        log.write_all(b"more").unwrap();
        let text = String::from_utf8(log.into_inner()).unwrap();
        assert!(
            text.starts_with("0123456789\n[wasbox] the agent wrote more than"),
            "{text}"
        );
        assert!(!text.contains("abc"));
        assert_eq!(text.matches("more").count(), 1, "{text}");
    }

    #[test]
    fn utf8_boundary_cuts_incomplete_characters() {
        let s = "aé€😀".as_bytes(); // 1 + 2 + 3 + 4 bytes
        assert_eq!(utf8_boundary(s), s.len());
        assert_eq!(utf8_boundary(&s[..2]), 1); // half of é
        assert_eq!(utf8_boundary(&s[..3]), 3);
        assert_eq!(utf8_boundary(&s[..5]), 3); // 2 of 3 bytes of €
        assert_eq!(utf8_boundary(&s[..9]), 6); // 3 of 4 bytes of 😀
        assert_eq!(utf8_boundary(b""), 0);
    }

    #[test]
    fn capture_truncates_on_a_character_boundary() {
        let c = Capture::new(4);
        c.push("ab€".as_bytes()); // 5 bytes: the euro sign straddles the limit
        assert_eq!(c.text(), ("ab".to_string(), true));
        let c = Capture::new(10);
        c.push(b"hello");
        assert_eq!(c.text(), ("hello".to_string(), false));
    }

    #[tokio::test]
    async fn pipe_end_of_file_and_broken_pipe() {
        let (r, w) = pipe(4);
        let w2 = w.clone();
        let writer = tokio::spawn(async move { w2.write_all(b"hello world").await });
        drop(w);
        let mut got = Vec::new();
        loop {
            let b = r.read(3).await;
            if b.is_empty() {
                break;
            }
            got.extend_from_slice(&b);
        }
        writer.await.unwrap().unwrap();
        assert_eq!(got, b"hello world");

        let (r, w) = pipe(4);
        drop(r);
        let err = w.write_all(b"x").await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe);
    }
}
