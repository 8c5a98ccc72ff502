//! The host side of `wasbox:sandbox/tls`: TLS client connections for programs with no TLS
//! of their own (Python's `ssl.SSLContext.wrap_socket`). The destination is checked as a
//! TCP `connect` of the sandbox is ([`Egress::check_address`]): an address rule, or a rule
//! naming a name the host resolved to that address for this sandbox. The connection counts
//! among the sandbox's and the node's, its bytes against the sandbox's limit, and the
//! server's certificate is verified for the name the program gave, with the roots every
//! HTTPS request of the sandbox uses.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use wasmtime::Result;
use wasmtime::component::{Resource, ResourceTable};

use super::NetHooks;
use super::connection::{Connection, Counted, refused};
use super::http::CONNECT_TIMEOUT;
use super::rules::canonical;
use crate::bindings::tls as wit;
use wit::TlsError;

/// TLS connections one process may hold at once (the sandbox's own limit applies too).
const MAX_OPEN: usize = 32;

/// The most one read returns.
const MAX_READ: u32 = 1 << 20;

/// A process's TLS connections.
#[derive(Default)]
pub(crate) struct TlsConnections {
    table: ResourceTable,
    open: usize,
}

struct TlsConnection {
    stream: TlsStream<Counted>,
}

fn cast<T: 'static, U: 'static>(r: &Resource<T>) -> Resource<U> {
    if r.owned() {
        Resource::new_own(r.rep())
    } else {
        Resource::new_borrow(r.rep())
    }
}

/// What a wait may last: the call's own, never more than the host's connect limit for a
/// connection and none for a read or write without one.
fn limit(timeout_ms: Option<u64>) -> Option<Duration> {
    timeout_ms.map(Duration::from_millis)
}

async fn within<T>(
    wait: Option<Duration>,
    f: impl std::future::Future<Output = std::io::Result<T>>,
) -> Result<T, TlsError> {
    let r = match wait {
        Some(d) => tokio::time::timeout(d, f)
            .await
            .map_err(|_| TlsError::Timeout)?,
        None => f.await,
    };
    r.map_err(|e| TlsError::Io(e.to_string()))
}

impl NetHooks {
    fn connection(&mut self, r: &Resource<wit::Connection>) -> Result<&mut TlsConnection> {
        Ok(self.tls.table.get_mut(&cast(r))?)
    }

    async fn open_tls(
        &mut self,
        address: &str,
        port: u16,
        server_name: &str,
        timeout_ms: Option<u64>,
    ) -> Result<TlsConnection, TlsError> {
        let egress = self.egress.clone();
        let sandbox = self.sandbox.clone();
        let destination = format!("{server_name}:{port}");
        let denied = |why: &str| {
            refused(&egress, &sandbox, &destination, why);
            TlsError::Refused(why.to_string())
        };
        let ip: IpAddr = address
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .map_err(|_| TlsError::Io(format!("not an IP address: {address:?}")))?;
        let ip = canonical(ip);
        egress.check_address(&sandbox, ip, port).map_err(&denied)?;
        if self.tls.open >= MAX_OPEN {
            return Err(denied(
                "the process has as many TLS connections open as it may",
            ));
        }
        let name = rustls::pki_types::ServerName::try_from(server_name.to_string())
            .map_err(|_| TlsError::Handshake(format!("not a server name: {server_name:?}")))?;
        let config = egress.tls().map_err(TlsError::Io)?;
        let target = SocketAddr::new(ip, port);
        let guard =
            Connection::open(&egress, &sandbox, destination.clone(), target).map_err(denied)?;
        let wait = limit(timeout_ms)
            .unwrap_or(CONNECT_TIMEOUT)
            .min(CONNECT_TIMEOUT);
        let connect = async {
            let tcp = TcpStream::connect(target)
                .await
                .map_err(|e| TlsError::Io(e.to_string()))?;
            let _ = tcp.set_nodelay(true);
            tokio_rustls::TlsConnector::from(config)
                .connect(name, Counted::new(tcp, guard))
                .await
                .map_err(
                    |e| match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                        Some(r) => TlsError::Handshake(r.to_string()),
                        None => TlsError::Io(e.to_string()),
                    },
                )
        };
        let stream = tokio::time::timeout(wait, connect)
            .await
            .map_err(|_| TlsError::Timeout)??;
        Ok(TlsConnection { stream })
    }
}

impl wit::Host for NetHooks {
    async fn connect(
        &mut self,
        address: String,
        port: u16,
        server_name: String,
        timeout_ms: Option<u64>,
    ) -> Result<Result<Resource<wit::Connection>, TlsError>> {
        let conn = match self
            .open_tls(&address, port, &server_name, timeout_ms)
            .await
        {
            Ok(c) => c,
            Err(e) => return Ok(Err(e)),
        };
        let r = self.tls.table.push(conn)?;
        self.tls.open += 1;
        Ok(Ok(cast(&r)))
    }
}

impl wit::HostConnection for NetHooks {
    async fn read(
        &mut self,
        r: Resource<wit::Connection>,
        max: u32,
        timeout_ms: Option<u64>,
    ) -> Result<Result<Vec<u8>, TlsError>> {
        let conn = self.connection(&r)?;
        let mut buf = vec![0; max.clamp(1, MAX_READ) as usize];
        Ok(
            match within(limit(timeout_ms), conn.stream.read(&mut buf)).await {
                Ok(n) => {
                    buf.truncate(n);
                    Ok(buf)
                }
                // A server that closes without close_notify: the end of the stream, as
                // Python's `ssl` reads it with `suppress_ragged_eofs`.
                Err(TlsError::Io(m)) if m.contains("close_notify") => Ok(Vec::new()),
                Err(e) => Err(e),
            },
        )
    }

    async fn write(
        &mut self,
        r: Resource<wit::Connection>,
        data: Vec<u8>,
        timeout_ms: Option<u64>,
    ) -> Result<Result<(), TlsError>> {
        let conn = self.connection(&r)?;
        let stream = &mut conn.stream;
        Ok(within(limit(timeout_ms), async {
            stream.write_all(&data).await?;
            stream.flush().await
        })
        .await)
    }

    async fn version(&mut self, r: Resource<wit::Connection>) -> Result<String> {
        let conn = self.connection(&r)?;
        let version = conn.stream.get_ref().1.protocol_version();
        Ok(match version {
            Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3",
            Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2",
            _ => "TLS",
        }
        .to_string())
    }

    async fn cipher(&mut self, r: Resource<wit::Connection>) -> Result<String> {
        let conn = self.connection(&r)?;
        let suite = conn.stream.get_ref().1.negotiated_cipher_suite();
        Ok(suite
            .and_then(|s| s.suite().as_str())
            .unwrap_or("unknown")
            .to_string())
    }

    async fn shutdown(&mut self, r: Resource<wit::Connection>) -> Result<()> {
        let conn = self.connection(&r)?;
        let _ = tokio::time::timeout(Duration::from_secs(1), conn.stream.shutdown()).await;
        Ok(())
    }

    async fn drop(&mut self, r: Resource<wit::Connection>) -> Result<()> {
        self.tls.table.delete::<TlsConnection>(cast(&r))?;
        self.tls.open = self.tls.open.saturating_sub(1);
        Ok(())
    }
}
