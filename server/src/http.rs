//! The HTTP accept loop every server of wasbox shares (worker API, term agent, sidecar):
//! bounded connections and a deadline for each request's head, so that a few hundred slow
//! or idle clients cannot hold a server; graceful shutdown that lets requests in flight
//! finish.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use http_body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Connections a server holds open at once by default; more are answered 503 and closed.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// How long a client may take to send a request's head (request line and headers) by
/// default; a connection that sends nothing gets as long.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client may take to send a request's body by default.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(60);

/// The bounds a server puts on its clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub body_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
        }
    }
}

/// The error a handler's body read gets when the client took longer than the body
/// deadline; [`is_body_timeout`] tells it apart (the worker API answers 408).
#[derive(Debug)]
pub struct BodyTimedOut(Duration);

impl std::fmt::Display for BodyTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the request body did not arrive within {} s",
            self.0.as_secs()
        )
    }
}

impl std::error::Error for BodyTimedOut {}

/// Whether `e` (or one of its causes) is a [`BodyTimedOut`].
pub fn is_body_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if err.is::<BodyTimedOut>() {
            return true;
        }
        cur = err.source();
    }
    false
}

/// A request body that fails once its deadline passes.
struct DeadlineBody {
    inner: Body,
    deadline: Pin<Box<tokio::time::Sleep>>,
    limit: Duration,
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimedOut(self.limit))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
/// How long a server waits for requests in flight after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// What a connection past the limit gets before it is closed.
static BUSY: std::sync::LazyLock<Vec<u8>> = std::sync::LazyLock::new(|| {
    let body = r#"{"type":"urn:cynodeai:error:rate_limit","title":"Service Unavailable","status":503,"detail":"too many connections; try again"}"#;
    format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\n\
         Retry-After: 1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
});

/// Connections the kernel may hold for a listener before it accepts them (capped by
/// `net.core.somaxconn`): a burst of a thousand clients connecting at once is queued, not
/// dropped.
const LISTEN_BACKLOG: u32 = 4096;

/// A TCP listener on `addr` with a deep accept queue (and `SO_REUSEADDR`, so a restarted
/// server gets its port back at once).
pub fn bind(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets requests in flight end
/// (for up to 30 s). Connections past `limits.max_connections` are answered 503 and closed;
/// a request whose head or body is slower than its deadline ends its connection (the head)
/// or fails the handler's read (the body).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let body_timeout = limits.body_timeout;
    let app = app.layer(axum::middleware::map_request(
        move |req: Request| async move {
            req.map(|inner| {
                Body::new(DeadlineBody {
                    inner,
                    deadline: Box::pin(tokio::time::sleep(body_timeout)),
                    limit: body_timeout,
                })
            })
        },
    ));
    let header_timeout = limits.header_timeout;
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors or a connection reset before accept: go on after a
                    // pause instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tokio::spawn(async move {
                let mut stream = stream;
                let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&BUSY)).await;
            });
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let builder = builder.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            // hyper's deadline starts with a request's first byte: a client that connects
            // and sends nothing gets the same 10 s.
            let mut first = [0u8; 1];
            if !matches!(
                tokio::time::timeout(header_timeout, stream.peek(&mut first)).await,
                Ok(Ok(1))
            ) {
                return;
            }
            let conn = builder
                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                .into_owned();
            let _ = watcher.watch(conn).await;
            drop(permit);
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown()).await;
    Ok(())
}

/// A file's bytes as a response body, read in 256 KiB chunks as the client takes them.
pub fn file_body(file: tokio::fs::File) -> axum::body::Body {
    let stream = futures_util::stream::unfold(file, |mut f| async move {
        use tokio::io::AsyncReadExt as _;
        let mut buf = vec![0u8; 256 << 10];
        match f.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok::<_, std::io::Error>(bytes::Bytes::from(buf)), f))
            }
            Err(e) => Some((Err(e), f)),
        }
    });
    axum::body::Body::from_stream(stream)
}

/// A streamed body written by blocking code (`write` runs on the blocking pool; the client
/// reading slowly holds it back). An error ends the body early, so the client sees a
/// truncated response rather than a complete-looking one.
pub fn written_body(
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()> + Send + 'static,
) -> axum::body::Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<bytes::Bytes>>(4);
    tokio::task::spawn_blocking(move || {
        let mut out = std::io::BufWriter::with_capacity(256 << 10, ChannelWriter(tx.clone()));
        let done = write(&mut out).and_then(|_| std::io::Write::flush(&mut out));
        if let Err(e) = done {
            tracing::warn!(error = %e, "a streamed response failed");
            let _ = tx.blocking_send(Err(e));
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    axum::body::Body::from_stream(stream)
}

struct ChannelWriter(tokio::sync::mpsc::Sender<std::io::Result<bytes::Bytes>>);

impl std::io::Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .blocking_send(Ok(bytes::Bytes::copy_from_slice(buf)))
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busy_answer_is_well_formed() {
        let text = std::str::from_utf8(&BUSY).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("Content-Length: {}", body.len())));
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["status"], 503);
    }
}
