//! One connection of the bouvet front-end: the optional `CONNECT <port>` handshake of the
//! Firecracker vsock multiplexer, then newline-delimited JSON-RPC requests answered in order,
//! exactly one line each. Lines are read with a bound (a longer one is answered with a parse
//! error and skipped, never buffered), and a client that hangs up while its command runs
//! stops that command.

use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use wasbox_runtime::Sandbox;
use wasbox_runtime::agent::bouvet::{BouvetAgent, BouvetInstance, INTERNAL_ERROR, RpcError};
use wasbox_runtime::io::OutputSink;

use super::rpc::{self, Response};

/// What every connection of a server shares.
pub struct Shared {
    /// The agent, once loaded (or why it could not be).
    pub agent: tokio::sync::watch::Receiver<Option<Result<BouvetAgent, Arc<str>>>>,
    pub sandbox: Sandbox,
    pub log: OutputSink,
    pub call_timeout: Duration,
    pub max_line: usize,
    /// The port answered to a `CONNECT` whose port is not a number.
    pub port: u32,
}

/// One line read with a bound.
enum Line {
    Text(Vec<u8>),
    /// Longer than the bound; it was read to its end and dropped.
    TooLong,
    Eof,
}

async fn next_line<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    max: usize,
) -> std::io::Result<Line> {
    let mut buf = Vec::new();
    let mut too_long = false;
    loop {
        let available = r.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (too_long, buf.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::Eof,
                (false, false) => Line::Text(buf),
            });
        }
        let (chunk, used, end) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..i], i + 1, true),
            None => (available, available.len(), false),
        };
        if !too_long {
            if buf.len() + chunk.len() > max {
                too_long = true;
                buf = Vec::new();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        r.consume(used);
        if end {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Text(buf)
            });
        }
    }
}

/// Whether the peer closed the socket (both ways: POLLHUP), as opposed to only shutting down
/// its writing side (then it still waits for answers).
pub fn hung_up(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no timeout.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && (p.revents & (libc::POLLHUP | libc::POLLERR)) != 0
}

/// Resolves once the client is gone (read side at end of file and the socket hung up).
/// Pending forever once the client sends more (the next request waits in the buffer).
async fn client_gone<R: AsyncRead + Unpin>(r: &mut BufReader<R>, fd: RawFd) {
    match r.fill_buf().await {
        Ok([]) | Err(_) => {}
        Ok(_) => return std::future::pending().await,
    }
    loop {
        if hung_up(fd) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn send<W: AsyncWrite + Unpin>(w: &mut W, line: &str) -> std::io::Result<()> {
    w.write_all(line.as_bytes()).await?;
    w.write_all(b"\n").await?;
    w.flush().await
}

/// Serves one connection until the client closes it. With `busy`, the first line is
/// answered with a refusal (the server is at its connection limit) and the connection
/// closed: a `CONNECT` gets a reply that is not `OK`, which bouvet's client retries.
pub async fn serve<S>(stream: S, fd: RawFd, shared: Arc<Shared>, busy: Option<usize>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (rd, mut wr) = tokio::io::split(stream);
    let mut reader = BufReader::with_capacity(64 << 10, rd);
    let mut first = true;
    let mut instance: Option<BouvetInstance> = None;
    loop {
        let line = match next_line(&mut reader, shared.max_line).await {
            Ok(Line::Eof) | Err(_) => return,
            Ok(line) => line,
        };
        let text = match line {
            Line::TooLong => {
                let r = rpc::parse_error(format!(
                    "request line longer than {} bytes",
                    shared.max_line
                ));
                if send(&mut wr, &r.line()).await.is_err() {
                    return;
                }
                continue;
            }
            Line::Text(bytes) => bytes,
            Line::Eof => return,
        };
        let text = match String::from_utf8(text) {
            Ok(t) => t,
            Err(_) => {
                let r = rpc::parse_error("stream did not contain valid UTF-8");
                if send(&mut wr, &r.line()).await.is_err() {
                    return;
                }
                continue;
            }
        };
        let trimmed = text.trim();
        let was_first = std::mem::replace(&mut first, false);
        if was_first && let Some(port) = trimmed.strip_prefix("CONNECT ") {
            let reply = match busy {
                Some(max) => format!("BUSY at most {max} connections"),
                None => format!("OK {}", port.trim().parse::<u32>().unwrap_or(shared.port)),
            };
            if send(&mut wr, &reply).await.is_err() || busy.is_some() {
                return;
            }
            continue;
        }
        if trimmed.is_empty() {
            continue;
        }
        if let Some(max) = busy {
            let id = serde_json::from_str::<rpc::Request>(trimmed).map_or(0, |r| r.id);
            let refusal = RpcError::new(
                INTERNAL_ERROR,
                format!("server busy: at most {max} connections; try again"),
            );
            let _ = send(&mut wr, &Response::error(id, refusal).line()).await;
            return;
        }
        if instance.is_none() {
            match agent(&shared).await {
                Ok(agent) => {
                    instance = Some(BouvetInstance::new(
                        agent,
                        shared.sandbox.clone(),
                        shared.log.clone(),
                        shared.call_timeout,
                    ))
                }
                Err(why) => {
                    let id = serde_json::from_str::<rpc::Request>(trimmed).map_or(0, |r| r.id);
                    let e =
                        RpcError::new(INTERNAL_ERROR, format!("the agent is not available: {why}"));
                    if send(&mut wr, &Response::error(id, e).line()).await.is_err() {
                        return;
                    }
                    continue;
                }
            }
        }
        let inst = instance.as_mut().expect("made above");
        let response = tokio::select! {
            r = rpc::answer(inst, trimmed) => r,
            // Dropping the call, then the instance, stops what the call started.
            () = client_gone(&mut reader, fd) => return,
        };
        if send(&mut wr, &response.line()).await.is_err() {
            return;
        }
    }
}

/// The loaded agent, waiting for it while it compiles.
async fn agent(shared: &Shared) -> Result<BouvetAgent, Arc<str>> {
    let mut rx = shared.agent.clone();
    let loaded = rx
        .wait_for(Option::is_some)
        .await
        .map_err(|_| Arc::<str>::from("the server is shutting down"))?;
    loaded.clone().expect("checked")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_read_with_a_bound() {
        let input: &[u8] = b"short\nmuch too long a line\nok\nlast without newline";
        let mut r = BufReader::with_capacity(4, input);
        let mut got = Vec::new();
        loop {
            match next_line(&mut r, 8).await.unwrap() {
                Line::Eof => break,
                Line::TooLong => got.push("<too long>".to_string()),
                Line::Text(t) => got.push(String::from_utf8(t).unwrap()),
            }
        }
        assert_eq!(got, ["short", "<too long>", "ok", "<too long>"]);
    }
}
