//! Network egress: where a sandbox may connect, and the host side of its HTTP requests.
//!
//! A sandbox reaches the network through `wasi:http/outgoing-handler`, served by the host
//! ([`NetHooks`]): the guest names a URL, the host resolves the name, checks every
//! address it got against the node's policy and the sandbox's own ([`Egress::check`]),
//! and connects to an address it checked (a name that resolves again to something else
//! later changes nothing). TLS is the host's (rustls, the system's roots plus the
//! operator's `--ca-cert`), so a guest needs none of its own. A redirect is a new request
//! the guest makes, checked again. Its own TCP client sockets (`wasi:sockets`) are checked
//! address by address ([`tcp`]); it has no listening socket and no UDP.
//!
//! The node's policy is the ceiling (nothing by default); a sandbox's policy can only
//! narrow it. Loopback, private and link-local ranges, and the node's own addresses and
//! listening ports, are reached only when the operator names them exactly (see
//! [`NetRule::allows`]). Connections and bytes are bounded per sandbox and per node, and
//! every connection, allowed or denied, is logged (target `wasbox::egress`) and counted
//! ([`EgressStats`]).

mod connection;
mod http;
pub mod rules;
pub(crate) mod tcp;
mod tls;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub(crate) use http::NetHooks;
use rules::{Destination, canonical, is_special};
pub use rules::{Host, NetRule, RuleError, parse_host, parse_rules};

use crate::sync::lock;

/// Where one sandbox may connect, within what the node allows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum NetworkPolicy {
    /// Nowhere (the default).
    #[default]
    None,
    /// Wherever the node's policy allows.
    Node,
    /// Within the node's policy: a destination any `allow` rule matches, or else one no
    /// `deny` rule covers (allow wins, as in E2B's `allowOut`/`denyOut`). The rules match
    /// plainly (`*` is whatever the node allows): which loopback, private or own addresses
    /// are reachable at all is the operator's choice alone.
    Rules {
        allow: Vec<NetRule>,
        deny: Vec<NetRule>,
    },
}

impl NetworkPolicy {
    /// Only what `rules` name (within the node's policy).
    pub fn allow_only(rules: Vec<NetRule>) -> NetworkPolicy {
        NetworkPolicy::Rules {
            allow: rules,
            deny: vec![NetRule::any()],
        }
    }

    fn permits(&self, d: &Destination<'_>) -> bool {
        match self {
            NetworkPolicy::None => false,
            NetworkPolicy::Node => true,
            NetworkPolicy::Rules { allow, deny } => {
                allow.iter().any(|r| r.covers(d)) || !deny.iter().any(|r| r.covers(d))
            }
        }
    }
}

/// The operator's egress settings for a node.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EgressConfig {
    /// Destinations sandboxes may reach at most (`--allow-net`); nothing when empty.
    pub allow: Vec<NetRule>,
    /// Destinations no sandbox reaches, whatever allows them (`--deny-net`).
    pub deny: Vec<NetRule>,
    /// PEM files of extra trusted roots for HTTPS (`--ca-cert`).
    pub ca_certs: Vec<PathBuf>,
    /// Connections open at once, all sandboxes together.
    pub max_connections: usize,
}

impl Default for EgressConfig {
    fn default() -> Self {
        EgressConfig {
            allow: Vec::new(),
            deny: Vec::new(),
            ca_certs: Vec::new(),
            max_connections: 1024,
        }
    }
}

impl EgressConfig {
    pub fn allow(mut self, rules: Vec<NetRule>) -> Self {
        self.allow = rules;
        self
    }
    pub fn deny(mut self, rules: Vec<NetRule>) -> Self {
        self.deny = rules;
        self
    }
    pub fn ca_certs(mut self, files: Vec<PathBuf>) -> Self {
        self.ca_certs = files;
        self
    }
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n;
        self
    }
}

/// One connection a sandbox made (reported when it closes, with its bytes) or one request a
/// policy or a limit refused, for an embedder's records (see
/// [`RuntimeBuilder::on_egress`](crate::RuntimeBuilder::on_egress)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EgressEvent {
    /// The sandbox's label (its session or sandbox id), `-` without one.
    pub sandbox: String,
    /// `host:port` as the guest asked for it.
    pub destination: String,
    /// The address connected to (none when refused before connecting).
    pub address: Option<SocketAddr>,
    pub allowed: bool,
    /// Why it was refused.
    pub reason: Option<String>,
    pub bytes_out: u64,
    pub bytes_in: u64,
}

/// What an embedder gets told of each [`EgressEvent`].
pub type EgressObserver = Arc<dyn Fn(&EgressEvent) + Send + Sync>;

/// Counts of a node's egress since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EgressStats {
    /// Connections made.
    pub allowed: u64,
    /// Requests refused by a policy or a limit.
    pub denied: u64,
    /// Connections open now.
    pub open: u64,
    pub bytes_out: u64,
    pub bytes_in: u64,
}

/// The node's egress: its policy, its TLS trust, its own endpoints and its counters.
pub(crate) struct Egress {
    allow: Vec<NetRule>,
    deny: Vec<NetRule>,
    /// The client TLS configuration, made on the first HTTPS request.
    tls: std::sync::OnceLock<Result<Arc<rustls::ClientConfig>, String>>,
    extra_roots: Vec<rustls::pki_types::CertificateDer<'static>>,
    /// The machine's own addresses (read once at start).
    own_addresses: Vec<IpAddr>,
    /// Where this node's own servers listen (the worker API, E2B's, ...).
    own_listeners: Mutex<Vec<SocketAddr>>,
    max_connections: usize,
    observer: Option<EgressObserver>,
    open: AtomicUsize,
    allowed: AtomicU64,
    denied: AtomicU64,
    bytes_out: AtomicU64,
    bytes_in: AtomicU64,
}

impl Egress {
    pub(crate) fn new(
        config: EgressConfig,
        observer: Option<EgressObserver>,
    ) -> anyhow::Result<Egress> {
        use anyhow::Context;
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let mut extra_roots = Vec::new();
        for file in &config.ca_certs {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(file)
                .and_then(|it| it.collect::<Result<_, _>>())
                .with_context(|| format!("reading CA certificates from {}", file.display()))?;
            anyhow::ensure!(
                !certs.is_empty(),
                "{} holds no PEM certificate",
                file.display()
            );
            extra_roots.extend(certs);
        }
        Ok(Egress {
            allow: config.allow,
            deny: config.deny,
            tls: std::sync::OnceLock::new(),
            extra_roots,
            own_addresses: own_addresses(),
            own_listeners: Mutex::new(Vec::new()),
            max_connections: config.max_connections,
            observer,
            open: AtomicUsize::new(0),
            allowed: AtomicU64::new(0),
            denied: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
        })
    }

    /// Tells the embedder's observer, if any.
    pub(crate) fn report(&self, event: EgressEvent) {
        if let Some(o) = &self.observer {
            o(&event);
        }
    }

    /// Whether the node lets any sandbox out at all.
    pub(crate) fn enabled(&self) -> bool {
        !self.allow.is_empty()
    }

    /// Records a listener of this node: no sandbox reaches it unless a rule names its
    /// address and port exactly.
    pub(crate) fn add_own_listener(&self, addr: SocketAddr) {
        lock(&self.own_listeners).push(addr);
    }

    pub(crate) fn stats(&self) -> EgressStats {
        EgressStats {
            allowed: self.allowed.load(Ordering::Relaxed),
            denied: self.denied.load(Ordering::Relaxed),
            open: self.open.load(Ordering::Relaxed) as u64,
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
            bytes_in: self.bytes_in.load(Ordering::Relaxed),
        }
    }

    /// Whether a sandbox under `policy` may connect to `ip`:`port`, asked for as `name`
    /// (when it was asked for by name). The error says whose policy refused.
    pub(crate) fn check(
        &self,
        policy: &NetworkPolicy,
        name: Option<&str>,
        ip: IpAddr,
        port: u16,
    ) -> Result<(), &'static str> {
        let ip = canonical(ip);
        let own_address =
            ip.is_loopback() || ip.is_unspecified() || self.own_addresses.contains(&ip);
        let own_port = lock(&self.own_listeners).iter().any(|l| {
            l.port() == port
                && (canonical(l.ip()) == ip || (l.ip().is_unspecified() && own_address))
        });
        let d = Destination {
            name,
            ip,
            port,
            special: is_special(ip),
            own_port,
            own_address,
        };
        if self.deny.iter().any(|r| r.covers(&d)) {
            return Err("the node's policy denies it");
        }
        if !self.allow.iter().any(|r| r.allows(&d)) {
            return Err("the node's policy does not allow it");
        }
        if !policy.permits(&d) {
            return Err("the sandbox's policy does not allow it");
        }
        Ok(())
    }

    /// Whether a sandbox may connect to `ip`:`port` given as an address (a socket's
    /// `connect`): by an address rule, or by a rule naming a name the host resolved to
    /// that address for this sandbox (see [`SandboxNet::resolved`]).
    pub(crate) fn check_address(
        &self,
        sandbox: &SandboxNet,
        ip: IpAddr,
        port: u16,
    ) -> Result<(), &'static str> {
        let policy = sandbox.policy();
        let ip = canonical(ip);
        let by_address = self.check(&policy, None, ip, port);
        if by_address.is_ok() {
            return by_address;
        }
        let names: Vec<String> = lock(&sandbox.resolved)
            .iter()
            .filter(|(_, a)| *a == ip)
            .map(|(n, _)| n.clone())
            .collect();
        let mut result = by_address;
        for name in &names {
            result = self.check(&policy, Some(name), ip, port);
            if result.is_ok() {
                break;
            }
        }
        result
    }

    /// Whether a name may be looked up at all: never for a sandbox without network, nor
    /// for a name no rule of the node (or of the sandbox) could let through, so that a
    /// sandbox cannot send data out in the names it asks the host's resolver for. `port` is
    /// where it will connect, `None` for a plain lookup (`getaddrinfo`).
    pub(crate) fn may_resolve(
        &self,
        policy: &NetworkPolicy,
        name: &str,
        port: Option<u16>,
    ) -> Result<(), &'static str> {
        if !self.allow.iter().any(|r| r.may_match_name(name, port)) {
            return Err("the node's policy does not allow it");
        }
        let sandbox = match policy {
            NetworkPolicy::None => false,
            NetworkPolicy::Node => true,
            NetworkPolicy::Rules { allow, deny } => {
                allow.iter().any(|r| r.may_match_name(name, port))
                    || !deny
                        .iter()
                        .any(|r| r.is_everything() || r.covers_name(name, port))
            }
        };
        if sandbox {
            Ok(())
        } else {
            Err("the sandbox's policy does not allow it")
        }
    }

    /// The TLS client configuration: the system's trusted roots and the operator's.
    fn tls(&self) -> Result<Arc<rustls::ClientConfig>, String> {
        self.tls
            .get_or_init(|| {
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                let verifier = rustls_platform_verifier::Verifier::new_with_extra_roots(
                    self.extra_roots.iter().cloned(),
                    provider.clone(),
                )
                .map_err(|e| format!("TLS roots: {e}"))?;
                let mut config = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| format!("TLS: {e}"))?
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(verifier))
                    .with_no_client_auth();
                config.alpn_protocols = vec![b"http/1.1".to_vec()];
                Ok(Arc::new(config))
            })
            .clone()
    }
}

/// One sandbox's side of egress: its policy (replaceable while it runs) and what it uses.
pub(crate) struct SandboxNet {
    policy: Mutex<NetworkPolicy>,
    /// How the sandbox is named in the log (its session or sandbox id, when it has one).
    label: String,
    open: AtomicU32,
    bytes: AtomicU64,
    max_connections: u32,
    max_bytes: u64,
    /// The names the host resolved for the sandbox's sockets and the addresses they gave
    /// (the newest last, at most [`RESOLVED_KEPT`]): a `connect` to one of these addresses
    /// is checked against the rules naming the name.
    resolved: Mutex<std::collections::VecDeque<(String, IpAddr)>>,
}

/// How many resolved (name, address) pairs a sandbox's sockets keep.
const RESOLVED_KEPT: usize = 512;

impl SandboxNet {
    pub(crate) fn new(
        policy: NetworkPolicy,
        label: String,
        max_connections: u32,
        max_bytes: u64,
    ) -> SandboxNet {
        SandboxNet {
            policy: Mutex::new(policy),
            label,
            open: AtomicU32::new(0),
            bytes: AtomicU64::new(0),
            max_connections,
            max_bytes,
            resolved: Mutex::new(std::collections::VecDeque::new()),
        }
    }

    /// Records that `name` resolved to `ip` for this sandbox.
    pub(crate) fn resolved(&self, name: &str, ip: IpAddr) {
        let ip = canonical(ip);
        let mut list = lock(&self.resolved);
        if let Some(i) = list.iter().position(|(n, a)| *a == ip && n == name) {
            list.remove(i);
        } else if list.len() >= RESOLVED_KEPT {
            list.pop_front();
        }
        list.push_back((name.to_string(), ip));
    }

    /// Whether another connection may open now (the count itself is taken when it opens).
    pub(crate) fn has_room(&self) -> Result<(), &'static str> {
        if self.open.load(Ordering::Acquire) >= self.max_connections {
            Err("the sandbox has as many connections open as it may")
        } else if self.bytes() >= self.max_bytes {
            Err("the sandbox has used its network byte limit")
        } else {
            Ok(())
        }
    }

    pub(crate) fn policy(&self) -> NetworkPolicy {
        lock(&self.policy).clone()
    }

    /// Replaces the policy; requests from now on are checked against the new one.
    pub(crate) fn set_policy(&self, policy: NetworkPolicy) {
        *lock(&self.policy) = policy;
    }

    /// Bytes sent and received so far, all connections together.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// The machine's interface addresses (none when they cannot be read).
fn own_addresses() -> Vec<IpAddr> {
    let mut out = Vec::new();
    // SAFETY: getifaddrs fills a list that is read here and freed once with freeifaddrs;
    // each address is read through the length its family implies.
    unsafe {
        let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
        if libc::getifaddrs(&mut list) != 0 {
            return out;
        }
        let mut cur = list;
        while !cur.is_null() {
            let addr = (*cur).ifa_addr;
            if !addr.is_null() {
                match i32::from((*addr).sa_family) {
                    libc::AF_INET => {
                        let sin = &*(addr as *const libc::sockaddr_in);
                        out.push(IpAddr::from(
                            u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
                        ));
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(addr as *const libc::sockaddr_in6);
                        out.push(canonical(IpAddr::from(sin6.sin6_addr.s6_addr)));
                    }
                    _ => {}
                }
            }
            cur = (*cur).ifa_next;
        }
        libc::freeifaddrs(list);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn egress(allow: &[&str], deny: &[&str]) -> Egress {
        Egress::new(
            EgressConfig::default()
                .allow(parse_rules(allow).unwrap())
                .deny(parse_rules(deny).unwrap()),
            None,
        )
        .unwrap()
    }

    #[test]
    fn nothing_leaves_by_default() {
        let e = egress(&[], &[]);
        let public: IpAddr = "93.184.216.34".parse().unwrap();
        assert!(!e.enabled());
        assert!(
            e.check(&NetworkPolicy::Node, Some("example.org"), public, 443)
                .is_err()
        );
        let e = egress(&["*"], &[]);
        assert!(
            e.check(&NetworkPolicy::Node, Some("example.org"), public, 443)
                .is_ok()
        );
        assert!(
            e.check(&NetworkPolicy::None, Some("example.org"), public, 443)
                .is_err()
        );
    }

    #[test]
    fn a_sandbox_narrows_the_node_and_deny_wins_on_the_node() {
        let e = egress(&["*.example.org", "10.0.0.0/8"], &["secret.example.org"]);
        let public: IpAddr = "93.184.216.34".parse().unwrap();
        let only_api = NetworkPolicy::allow_only(parse_rules(&["api.example.org"]).unwrap());
        assert!(
            e.check(&only_api, Some("api.example.org"), public, 443)
                .is_ok()
        );
        assert!(
            e.check(&only_api, Some("www.example.org"), public, 443)
                .is_err()
        );
        assert!(
            e.check(
                &NetworkPolicy::Node,
                Some("secret.example.org"),
                public,
                443
            )
            .is_err()
        );
        // The sandbox cannot widen: a name outside the node's rules stays out.
        let wide = NetworkPolicy::allow_only(vec![NetRule::any()]);
        assert!(e.check(&wide, Some("other.org"), public, 443).is_err());
        // E2B's shape: deny everything but one host.
        let e2b = NetworkPolicy::Rules {
            allow: parse_rules(&["api.example.org"]).unwrap(),
            deny: parse_rules(&["0.0.0.0/0"]).unwrap(),
        };
        assert!(e.check(&e2b, Some("api.example.org"), public, 443).is_ok());
        assert!(e.check(&e2b, Some("www.example.org"), public, 443).is_err());
        let private: IpAddr = "10.2.3.4".parse().unwrap();
        assert!(e.check(&NetworkPolicy::Node, None, private, 80).is_ok());
    }

    #[test]
    fn names_nobody_allows_are_never_looked_up() {
        let e = egress(&["*.example.org", "pypi.org:443"], &[]);
        assert!(
            e.may_resolve(&NetworkPolicy::Node, "a.example.org", Some(443))
                .is_ok()
        );
        assert!(
            e.may_resolve(&NetworkPolicy::Node, "pypi.org", Some(80))
                .is_err()
        );
        assert!(
            e.may_resolve(&NetworkPolicy::Node, "secret.attacker.net", Some(443))
                .is_err()
        );
        assert!(
            e.may_resolve(&NetworkPolicy::None, "a.example.org", Some(443))
                .is_err()
        );
        let only = NetworkPolicy::allow_only(parse_rules(&["pypi.org"]).unwrap());
        assert!(e.may_resolve(&only, "a.example.org", Some(443)).is_err());
        assert!(e.may_resolve(&only, "pypi.org", Some(443)).is_ok());
        let wide = egress(&["*"], &[]);
        assert!(
            wide.may_resolve(&NetworkPolicy::Node, "anything.net", Some(443))
                .is_ok()
        );
        // A plain lookup (no port yet): a name some rule names on some port.
        assert!(
            e.may_resolve(&NetworkPolicy::Node, "pypi.org", None)
                .is_ok()
        );
        assert!(
            e.may_resolve(&NetworkPolicy::Node, "b.example.org", None)
                .is_ok()
        );
        assert!(
            e.may_resolve(&NetworkPolicy::Node, "example.org", None)
                .is_err()
        );
        // A deny rule on one port does not stop a lookup for another.
        let port_only = NetworkPolicy::Rules {
            allow: vec![],
            deny: parse_rules(&["pypi.org:80"]).unwrap(),
        };
        assert!(e.may_resolve(&port_only, "pypi.org", None).is_ok());
        let all_ports = NetworkPolicy::Rules {
            allow: vec![],
            deny: parse_rules(&["pypi.org"]).unwrap(),
        };
        assert!(e.may_resolve(&all_ports, "pypi.org", None).is_err());
    }

    #[test]
    fn connections_by_address_follow_the_names_that_resolved_to_it() {
        let e = egress(&["*.example.org:443", "10.0.0.0/8"], &[]);
        let n = SandboxNet::new(NetworkPolicy::Node, "s".into(), 4, 1 << 20);
        let public: IpAddr = "93.184.216.34".parse().unwrap();
        assert!(
            e.check_address(&n, public, 443).is_err(),
            "no name for it yet"
        );
        n.resolved("api.example.org", public);
        assert!(e.check_address(&n, public, 443).is_ok());
        assert!(e.check_address(&n, public, 22).is_err(), "the rule's port");
        // A name that resolved to a private address stays out (DNS rebinding).
        let private: IpAddr = "10.1.2.3".parse().unwrap();
        n.resolved("evil.example.org", "127.0.0.1".parse().unwrap());
        assert!(
            e.check_address(&n, "127.0.0.1".parse().unwrap(), 443)
                .is_err()
        );
        assert!(
            e.check_address(&n, private, 5432).is_ok(),
            "an address rule"
        );
        // The memory is bounded: the oldest names go first.
        for i in 0..RESOLVED_KEPT {
            n.resolved(
                &format!("h{i}.example.org"),
                IpAddr::from([1, 1, (i / 256) as u8, i as u8]),
            );
        }
        assert!(e.check_address(&n, public, 443).is_err());
    }

    #[test]
    fn the_nodes_own_listeners_need_their_port_named() {
        let e = egress(&["127.0.0.1"], &[]);
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(e.check(&NetworkPolicy::Node, None, lo, 8080).is_ok());
        e.add_own_listener("0.0.0.0:8080".parse().unwrap());
        assert!(e.check(&NetworkPolicy::Node, None, lo, 8080).is_err());
        let e = egress(&["127.0.0.1:8080"], &[]);
        e.add_own_listener("127.0.0.1:8080".parse().unwrap());
        assert!(e.check(&NetworkPolicy::Node, None, lo, 8080).is_ok());
    }
}
