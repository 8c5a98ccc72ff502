//! One connection of a sandbox, whichever way it was made (`wasi:http` or `wasi:sockets`):
//! its place among the sandbox's and the node's connections, its bytes, its records.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::{Egress, EgressEvent, SandboxNet};

/// Counts, reports and logs a connection the policy or a limit refused.
pub(super) fn refused(egress: &Egress, sandbox: &SandboxNet, destination: &str, why: &str) {
    egress.denied.fetch_add(1, Ordering::Relaxed);
    egress.report(EgressEvent {
        sandbox: sandbox.label.clone(),
        destination: destination.to_string(),
        address: None,
        allowed: false,
        reason: Some(why.to_string()),
        bytes_out: 0,
        bytes_in: 0,
    });
    tracing::info!(
        target: "wasbox::egress",
        sandbox = %sandbox.label,
        destination = %destination,
        allowed = false,
        "connection refused: {why}"
    );
}

/// One open connection of a sandbox: its place among the sandbox's and the node's, its
/// bytes, and its log line when it closes.
pub(super) struct Connection {
    egress: Arc<Egress>,
    sandbox: Arc<SandboxNet>,
    destination: String,
    address: SocketAddr,
    bytes_out: u64,
    bytes_in: u64,
}

impl Connection {
    pub(super) fn open(
        egress: &Arc<Egress>,
        sandbox: &Arc<SandboxNet>,
        destination: String,
        address: SocketAddr,
    ) -> std::result::Result<Connection, &'static str> {
        if sandbox.open.fetch_add(1, Ordering::AcqRel) >= sandbox.max_connections {
            sandbox.open.fetch_sub(1, Ordering::AcqRel);
            return Err("the sandbox has as many connections open as it may");
        }
        if egress.open.fetch_add(1, Ordering::AcqRel) >= egress.max_connections {
            egress.open.fetch_sub(1, Ordering::AcqRel);
            sandbox.open.fetch_sub(1, Ordering::AcqRel);
            return Err("the node has as many connections open as it may");
        }
        if sandbox.bytes() >= sandbox.max_bytes {
            egress.open.fetch_sub(1, Ordering::AcqRel);
            sandbox.open.fetch_sub(1, Ordering::AcqRel);
            return Err("the sandbox has used its network byte limit");
        }
        egress.allowed.fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            target: "wasbox::egress",
            sandbox = %sandbox.label,
            destination = %destination,
            address = %address,
            allowed = true,
            "connection opened"
        );
        Ok(Connection {
            egress: egress.clone(),
            sandbox: sandbox.clone(),
            destination,
            address,
            bytes_out: 0,
            bytes_in: 0,
        })
    }

    /// Counts `n` bytes; an error once the sandbox is past its limit.
    pub(super) fn count(&mut self, n: usize, outgoing: bool) -> io::Result<()> {
        let n = n as u64;
        if outgoing {
            self.bytes_out += n;
            self.egress.bytes_out.fetch_add(n, Ordering::Relaxed);
        } else {
            self.bytes_in += n;
            self.egress.bytes_in.fetch_add(n, Ordering::Relaxed);
        }
        let total = self.sandbox.bytes.fetch_add(n, Ordering::Relaxed) + n;
        if total > self.sandbox.max_bytes {
            return Err(io::Error::other(format!(
                "network byte limit of {} bytes reached",
                self.sandbox.max_bytes
            )));
        }
        Ok(())
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.sandbox.open.fetch_sub(1, Ordering::AcqRel);
        self.egress.open.fetch_sub(1, Ordering::AcqRel);
        self.egress.report(EgressEvent {
            sandbox: self.sandbox.label.clone(),
            destination: self.destination.clone(),
            address: Some(self.address),
            allowed: true,
            reason: None,
            bytes_out: self.bytes_out,
            bytes_in: self.bytes_in,
        });
        tracing::info!(
            target: "wasbox::egress",
            sandbox = %self.sandbox.label,
            destination = %self.destination,
            address = %self.address,
            bytes_out = self.bytes_out,
            bytes_in = self.bytes_in,
            "connection closed"
        );
    }
}

/// A TCP stream whose bytes are counted against its sandbox's limit.
pub(super) struct Counted {
    inner: TcpStream,
    conn: Connection,
}

impl Counted {
    pub(super) fn new(inner: TcpStream, conn: Connection) -> Counted {
        Counted { inner, conn }
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let n = buf.filled().len() - before;
                Poll::Ready(this.conn.count(n, false))
            }
            other => other,
        }
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_write(cx, buf) {
            Poll::Ready(Ok(n)) => Poll::Ready(this.conn.count(n, true).map(|()| n)),
            other => other,
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
