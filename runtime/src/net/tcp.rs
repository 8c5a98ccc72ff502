//! The host side of `wasi:sockets` for TCP clients (a program's own `socket`/`connect`,
//! Python's `socket` module): wasmtime-wasi's sockets, with the egress policy around them.
//!
//! - A name lookup (`getaddrinfo`) asks the host's resolver only for a name some rule of
//!   the node and the sandbox could allow ([`Egress::may_resolve`]), and the addresses it
//!   gives are remembered for the sandbox with the name ([`SandboxNet::resolved`]).
//! - A `connect` is checked by address before the host connects: an address rule allows
//!   it, or a rule naming a name the host resolved to that address for this sandbox
//!   ([`Egress::check_address`]), with the same rules as `wasi:http` for loopback, private
//!   and the node's own addresses. A name that later resolves elsewhere changes nothing:
//!   the guest connects to an address, the one that was checked.
//! - Binding, listening and UDP are refused: a sandbox opens no port on the host's
//!   interfaces and sends no datagram (DNS included) past the host's resolver.
//! - A connection counts among the sandbox's and the node's connections from `connect`'s
//!   end until its streams are dropped, and its bytes against the sandbox's limit.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use wasmtime::component::Resource;
use wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::{
    Host as _, HostResolveAddressStream as _, ResolveAddressStream,
};
use wasmtime_wasi::p2::bindings::sockets::network::{ErrorCode, IpAddress, Network};
use wasmtime_wasi::p2::bindings::sockets::tcp::HostTcpSocket as _;
use wasmtime_wasi::p2::{
    DynInputStream, DynOutputStream, InputStream, OutputStream, Pollable, SocketError, StreamError,
    StreamResult, TcpSocket,
};
use wasmtime_wasi::sockets::{SocketAddrUse, WasiSocketsCtxView};

use super::connection::{Connection, refused};
use super::rules::{Host, parse_host};
use super::{Egress, NetHooks, SandboxNet};
use crate::sync::lock;

/// The interfaces whose functions the host's linker takes from here, as wasmtime-wasi
/// names them.
pub(crate) const TCP_INTERFACE: &str = "wasi:sockets/tcp@0.2.12";
pub(crate) const LOOKUP_INTERFACE: &str = "wasi:sockets/ip-name-lookup@0.2.12";

/// Lookups in progress a store remembers the name of (beyond that, the oldest is
/// forgotten: its addresses then allow nothing by name).
const LOOKUPS_KEPT: usize = 64;

/// The check wasmtime-wasi makes before a socket binds or connects: a TCP `connect` to
/// where the policies allow, while the sandbox has connections and bytes left; nothing
/// else.
pub(crate) fn address_check(
    egress: Arc<Egress>,
    sandbox: Arc<SandboxNet>,
) -> impl Fn(SocketAddr, SocketAddrUse) -> Pin<Box<dyn Future<Output = bool> + Send + Sync>>
+ Send
+ Sync
+ 'static {
    move |addr: SocketAddr,
          use_: SocketAddrUse|
          -> Pin<Box<dyn Future<Output = bool> + Send + Sync>> {
        let verdict = match use_ {
            SocketAddrUse::TcpConnect => egress
                .check_address(&sandbox, addr.ip(), addr.port())
                .and_then(|()| sandbox.has_room()),
            // The check wasmtime-wasi makes for the port a connection gets (`start-bind`
            // itself is refused, so nothing else asks this).
            SocketAddrUse::TcpBind if addr.ip().is_unspecified() && addr.port() == 0 => Ok(()),
            SocketAddrUse::TcpBind => Err("a sandbox cannot listen on the host's network"),
            _ => Err("a sandbox has no UDP"),
        };
        if let Err(why) = verdict {
            refused(&egress, &sandbox, &addr.to_string(), why);
        }
        Box::pin(std::future::ready(verdict.is_ok()))
    }
}

/// `tcp-socket.start-bind`: refused. In WASI 0.2 a socket listens only once bound, so
/// this is what keeps a sandbox from opening a port on the host's interfaces; a client's
/// connection gets its local port without it.
pub(crate) fn start_bind(
    net: &NetHooks,
    address: wasmtime_wasi::p2::bindings::sockets::network::IpSocketAddress,
) -> Result<(), ErrorCode> {
    let address: SocketAddr = address.into();
    refused(
        &net.egress,
        &net.sandbox,
        &address.to_string(),
        "a sandbox cannot listen on the host's network",
    );
    Err(ErrorCode::AccessDenied)
}

/// A store's memory of its name lookups in progress (which name each stream resolves).
#[derive(Default)]
pub(crate) struct Lookups(HashMap<u32, String>);

/// `ip-name-lookup.resolve-addresses`: refused without asking the resolver for a name no
/// rule could allow; otherwise wasmtime-wasi's, remembering the name.
pub(crate) fn resolve_addresses(
    view: &mut WasiSocketsCtxView<'_>,
    net: &mut NetHooks,
    network: Resource<Network>,
    name: String,
) -> wasmtime::Result<Result<Resource<ResolveAddressStream>, ErrorCode>> {
    let looked_up = match parse_host(&name) {
        // An address is no lookup: wasmtime-wasi gives it back as it is.
        Some(Host::Ip(_)) => None,
        Some(Host::Name(n)) => {
            if let Err(why) = net.egress.may_resolve(&net.sandbox.policy(), &n, None) {
                refused(&net.egress, &net.sandbox, &n, why);
                return Ok(Err(ErrorCode::PermanentResolverFailure));
            }
            Some(n)
        }
        None => return Ok(Err(ErrorCode::InvalidArgument)),
    };
    match view.resolve_addresses(network, name) {
        Ok(stream) => {
            if let Some(n) = looked_up {
                let lookups = &mut net.lookups.0;
                if lookups.len() >= LOOKUPS_KEPT
                    && let Some(old) = lookups.keys().next().copied()
                {
                    lookups.remove(&old);
                }
                lookups.insert(stream.rep(), n);
            }
            Ok(Ok(stream))
        }
        Err(e) => Ok(Err(error_code(e)?)),
    }
}

/// `resolve-address-stream.resolve-next-address`: wasmtime-wasi's, recording each address
/// with the name it came from.
pub(crate) fn resolve_next_address(
    view: &mut WasiSocketsCtxView<'_>,
    net: &mut NetHooks,
    stream: Resource<ResolveAddressStream>,
) -> wasmtime::Result<Result<Option<IpAddress>, ErrorCode>> {
    let rep = stream.rep();
    match view.resolve_next_address(stream) {
        Ok(Some(address)) => {
            if let Some(name) = net.lookups.0.get(&rep) {
                net.sandbox.resolved(name, ip_of(&address));
            }
            Ok(Ok(Some(address)))
        }
        Ok(None) => {
            net.lookups.0.remove(&rep);
            Ok(Ok(None))
        }
        Err(e) => Ok(Err(error_code(e)?)),
    }
}

/// A connection's receiving and sending streams.
type Streams = (Resource<DynInputStream>, Resource<DynOutputStream>);

/// `tcp-socket.finish-connect`: wasmtime-wasi's, with the connection taken among the
/// sandbox's and the node's and its streams counted.
pub(crate) fn finish_connect(
    view: &mut WasiSocketsCtxView<'_>,
    net: &NetHooks,
    socket: Resource<TcpSocket>,
) -> wasmtime::Result<Result<Streams, ErrorCode>> {
    let rep = socket.rep();
    let (input, output) = match view.finish_connect(socket) {
        Ok(streams) => streams,
        Err(e) => return Ok(Err(error_code(e)?)),
    };
    let parent = Resource::<TcpSocket>::new_borrow(rep);
    let remote: SocketAddr = match view.remote_address(Resource::new_borrow(rep)) {
        Ok(a) => a.into(),
        Err(e) => return Ok(Err(error_code(e)?)),
    };
    let inner_in = view.table.delete(input)?;
    let inner_out = view.table.delete(output)?;
    let conn = match Connection::open(&net.egress, &net.sandbox, remote.to_string(), remote) {
        Ok(c) => Arc::new(Mutex::new(c)),
        Err(why) => {
            refused(&net.egress, &net.sandbox, &remote.to_string(), why);
            return Ok(Err(ErrorCode::AccessDenied));
        }
    };
    let input: DynInputStream = Box::new(CountedInput {
        inner: inner_in,
        conn: conn.clone(),
    });
    let output: DynOutputStream = Box::new(CountedOutput {
        inner: inner_out,
        conn,
    });
    Ok(Ok((
        view.table.push_child(input, &parent)?,
        view.table.push_child(output, &parent)?,
    )))
}

/// A socket error as the guest receives it, or the trap it stands for.
fn error_code(e: SocketError) -> wasmtime::Result<ErrorCode> {
    e.downcast()
}

fn ip_of(address: &IpAddress) -> IpAddr {
    match *address {
        IpAddress::Ipv4((a, b, c, d)) => IpAddr::V4(Ipv4Addr::new(a, b, c, d)),
        IpAddress::Ipv6((a, b, c, d, e, f, g, h)) => {
            IpAddr::V6(Ipv6Addr::new(a, b, c, d, e, f, g, h))
        }
    }
}

fn limit_error(e: std::io::Error) -> StreamError {
    StreamError::LastOperationFailed(e.into())
}

/// The receiving side of a sandbox's TCP connection, counted.
struct CountedInput {
    inner: DynInputStream,
    conn: Arc<Mutex<Connection>>,
}

#[async_trait::async_trait]
impl Pollable for CountedInput {
    async fn ready(&mut self) {
        self.inner.ready().await
    }
}

#[async_trait::async_trait]
impl InputStream for CountedInput {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        let bytes = self.inner.read(size)?;
        lock(&self.conn)
            .count(bytes.len(), false)
            .map_err(limit_error)?;
        Ok(bytes)
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await
    }
}

/// The sending side of a sandbox's TCP connection, counted; nothing more is sent once
/// the sandbox is past its byte limit.
struct CountedOutput {
    inner: DynOutputStream,
    conn: Arc<Mutex<Connection>>,
}

#[async_trait::async_trait]
impl Pollable for CountedOutput {
    async fn ready(&mut self) {
        self.inner.ready().await
    }
}

#[async_trait::async_trait]
impl OutputStream for CountedOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        let n = bytes.len();
        lock(&self.conn).count(0, true).map_err(limit_error)?;
        self.inner.write(bytes)?;
        lock(&self.conn).count(n, true).map_err(limit_error)
    }

    fn flush(&mut self) -> StreamResult<()> {
        self.inner.flush()
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        self.inner.check_write()
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await
    }
}
