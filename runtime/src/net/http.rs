//! The host side of `wasi:http/outgoing-handler`: resolve, check, connect to the checked
//! address, TLS, HTTP/1.1, with every connection bounded, counted and logged.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use super::connection::{Connection, Counted, refused};
use super::rules::{Host, canonical, parse_host};
use super::{Egress, SandboxNet};

/// How long a name lookup or a connection (TCP and TLS) may take, at most.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The network side of one store: its sandbox and the node's egress, the `wasi:http`
/// hooks, and its sockets' lookups in progress.
pub(crate) struct NetHooks {
    pub(crate) egress: Arc<Egress>,
    pub(crate) sandbox: Arc<SandboxNet>,
    pub(crate) lookups: super::tcp::Lookups,
    /// The process's TLS connections (`wasbox:sandbox/tls`).
    pub(crate) tls: super::tls::TlsConnections,
}

impl NetHooks {
    pub(crate) fn new(egress: Arc<Egress>, sandbox: Arc<SandboxNet>) -> NetHooks {
        NetHooks {
            egress,
            sandbox,
            lookups: Default::default(),
            tls: Default::default(),
        }
    }
}

type IoFuture = Box<dyn Future<Output = std::result::Result<(), Error>> + Send>;

impl WasiHttpHooks for NetHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _response_error: Box<dyn Future<Output = std::result::Result<(), Error>> + Send>,
    ) -> Box<dyn Future<Output = Result<(http::Response<WasiBody>, IoFuture)>> + Send> {
        let egress = self.egress.clone();
        let sandbox = self.sandbox.clone();
        Box::new(async move { send(egress, sandbox, request, options).await })
    }
}

async fn send(
    egress: Arc<Egress>,
    sandbox: Arc<SandboxNet>,
    mut request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
) -> Result<(http::Response<WasiBody>, IoFuture)> {
    let uri = request.uri().clone();
    let tls = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
    let authority = uri.authority().ok_or(Error::HttpRequestUriInvalid)?;
    let host = parse_host(authority.host()).ok_or(Error::HttpRequestUriInvalid)?;
    let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let connect_timeout = options
        .and_then(|o| o.connect_timeout)
        .unwrap_or(CONNECT_TIMEOUT)
        .min(CONNECT_TIMEOUT);
    let first_byte_timeout = options.and_then(|o| o.first_byte_timeout);

    let denied = |why: &str| refused(&egress, &sandbox, &format!("{host}:{port}"), why);

    // Nothing is asked of the resolver for a name no policy could let through.
    if !egress.enabled() {
        denied("the node allows no network access");
        return Err(Error::HttpRequestDenied);
    }
    let policy = sandbox.policy();
    let (name, addresses): (Option<&str>, Vec<IpAddr>) = match &host {
        Host::Ip(ip) => (None, vec![*ip]),
        Host::Name(n) => {
            if let Err(why) = egress.may_resolve(&policy, n, Some(port)) {
                denied(why);
                return Err(Error::HttpRequestDenied);
            }
            let found =
                tokio::time::timeout(connect_timeout, tokio::net::lookup_host((n.as_str(), port)))
                    .await
                    .map_err(|_| Error::DnsTimeout)?
                    .map_err(|e| Error::DnsError {
                        rcode: Some(e.to_string()),
                        info_code: None,
                    })?;
            (Some(n.as_str()), found.map(|a| canonical(a.ip())).collect())
        }
    };
    let mut why = "the name has no address";
    let mut chosen = None;
    for ip in addresses {
        match egress.check(&policy, name, ip, port) {
            Ok(()) => {
                chosen = Some(ip);
                break;
            }
            Err(w) => why = w,
        }
    }
    let Some(ip) = chosen else {
        denied(why);
        return Err(Error::HttpRequestDenied);
    };
    let target = SocketAddr::new(ip, port);
    let guard = match Connection::open(&egress, &sandbox, format!("{host}:{port}"), target) {
        Ok(g) => g,
        Err(why) => {
            denied(why);
            return Err(Error::ConnectionLimitReached);
        }
    };

    let stream = match tokio::time::timeout(connect_timeout, TcpStream::connect(target)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(connect_error(e)),
        Err(_) => return Err(Error::ConnectionTimeout),
    };
    let _ = stream.set_nodelay(true);
    let stream = Counted::new(stream, guard);
    let io: Box<dyn Stream> = if tls {
        let config = egress.tls().map_err(|e| Error::InternalError(Some(e)))?;
        let server_name = match &host {
            Host::Name(n) => rustls::pki_types::ServerName::try_from(n.clone())
                .map_err(|_| Error::HttpRequestUriInvalid)?,
            Host::Ip(ip) => rustls::pki_types::ServerName::IpAddress((*ip).into()),
        };
        let connector = tokio_rustls::TlsConnector::from(config);
        match tokio::time::timeout(connect_timeout, connector.connect(server_name, stream)).await {
            Ok(Ok(s)) => Box::new(s),
            Ok(Err(e)) => return Err(tls_error(&e)),
            Err(_) => return Err(Error::ConnectionTimeout),
        }
    } else {
        Box::new(stream)
    };
    let (mut sender, connection) = tokio::time::timeout(
        connect_timeout,
        hyper::client::conn::http1::Builder::new()
            .handshake::<_, WasiBody>(hyper_util::rt::TokioIo::new(io)),
    )
    .await
    .map_err(|_| Error::ConnectionTimeout)??;

    // The request line carries the path only: the host is in `Host`.
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    *request.uri_mut() = http::Uri::builder()
        .path_and_query(path)
        .build()
        .map_err(|_| Error::HttpRequestUriInvalid)?;

    // The connection is driven by a task of its own while the response comes; its end
    // (the body read to the end, or an error) is what the returned future reports.
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let driver = tokio::spawn(async move {
        let _ = done_tx.send(connection.await.map_err(Error::from));
    });
    let abort = AbortOnDrop(driver);
    let response = match first_byte_timeout {
        Some(t) => tokio::time::timeout(t, sender.send_request(request))
            .await
            .map_err(|_| Error::ConnectionReadTimeout)?,
        None => sender.send_request(request).await,
    }
    .map_err(Error::from)?;
    let response = response.map(|body: Incoming| body.map_err(Error::from).boxed_unsync());
    let io: IoFuture = Box::new(async move {
        let _abort = abort;
        done_rx.await.unwrap_or(Ok(()))
    });
    Ok((response, io))
}

type Result<T> = std::result::Result<T, Error>;

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn connect_error(e: io::Error) -> Error {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => Error::ConnectionRefused,
        io::ErrorKind::TimedOut => Error::ConnectionTimeout,
        _ => Error::DestinationUnavailable,
    }
}

/// A handshake's failure as wasi:http tells it: a certificate the verifier refused, or
/// anything else of TLS (rustls's own error, which tokio-rustls wraps in the I/O error).
fn tls_error(e: &io::Error) -> Error {
    let certificate = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|r| {
            matches!(
                r,
                rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented
            )
        });
    if certificate {
        Error::TlsCertificateError
    } else {
        Error::TlsProtocolError
    }
}

trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}
