//! Destination rules and the addresses nobody reaches by accident.
//!
//! A rule is written as Deno's `--allow-net` values are: `example.org`, `*.example.org`
//! (its subdomains), `10.1.2.3`, `10.0.0.0/8`, `[::1]`, `fd00::/8`, or `*` (any host), each
//! with an optional `:port`. A host in a URL is read as a browser reads it
//! ([`parse_host`]): `2130706433`, `0177.0.0.1` and `0x7f.1` are IPv4 addresses, a trailing
//! dot is dropped and an IPv4-mapped IPv6 address is its IPv4 address, so none of them
//! slips past a rule written for the plain form.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// One destination pattern with an optional port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetRule {
    host: HostPattern,
    port: Option<u16>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum HostPattern {
    /// Any host (`*`).
    Any,
    /// Exactly this name (lower case, no trailing dot).
    Name(String),
    /// Any subdomain of this name (`*.example.org`).
    Subdomains(String),
    /// An address or a network (an address is a network of its full length).
    Net(IpAddr, u8),
}

/// A host as a URL names it: a name to resolve, or an address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    Name(String),
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// Reads the host part of a URL's authority (`[::1]`, `example.org.`, `0x7f.0.0.1`) as a
/// browser would: IPv4 in any of the forms `inet_aton` accepts, IPv6 in brackets (an
/// IPv4-mapped one becomes its IPv4 address), otherwise a name in lower case without its
/// trailing dot. `None` for what is neither (empty, stray characters).
pub fn parse_host(host: &str) -> Option<Host> {
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner.strip_suffix(']')?;
        let ip: Ipv6Addr = inner.parse().ok()?;
        return Some(Host::Ip(canonical(IpAddr::V6(ip))));
    }
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.is_empty() {
        return None;
    }
    if let Some(ip) = parse_ipv4_loose(host) {
        return Some(Host::Ip(IpAddr::V4(ip)));
    }
    if let Ok(ip) = host.parse::<Ipv6Addr>() {
        return Some(Host::Ip(canonical(IpAddr::V6(ip))));
    }
    let name = host.to_ascii_lowercase();
    // A name whose last label is a number was meant as an address (and is not one).
    let last = name.rsplit('.').next().unwrap_or_default();
    if last.bytes().all(|b| b.is_ascii_digit())
        || last
            .strip_prefix("0x")
            .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return None;
    }
    let valid = name.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    (valid && name.len() <= 253).then_some(Host::Name(name))
}

/// IPv4 as `inet_aton` and URL parsers read it: one to four parts, each decimal, octal
/// (leading `0`) or hexadecimal (`0x`), the last filling the bytes that are left.
/// `None` when any part is not a number (then the host is a name).
fn parse_ipv4_loose(s: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut numbers = Vec::with_capacity(4);
    for p in &parts {
        let (digits, radix) = if let Some(h) = p.strip_prefix("0x").or(p.strip_prefix("0X")) {
            (h, 16)
        } else if p.len() > 1 && p.starts_with('0') {
            (&p[1..], 8)
        } else {
            (*p, 10)
        };
        if p.is_empty() || !digits.bytes().all(|b| (b as char).is_digit(radix)) {
            return None;
        }
        let n = if digits.is_empty() {
            0
        } else {
            u64::from_str_radix(digits, radix).ok()?
        };
        numbers.push(n);
    }
    let (last, head) = numbers.split_last()?;
    if head.iter().any(|&n| n > 255) {
        return None;
    }
    let room = 8 * (4 - head.len() as u32);
    if room < 64 && *last >= 1u64 << room {
        return None;
    }
    let mut value: u64 = *last;
    for (i, &n) in head.iter().enumerate() {
        value |= n << (24 - 8 * i as u32);
    }
    Some(Ipv4Addr::from(value as u32))
}

/// An IPv4-mapped IPv6 address as its IPv4 address; every other address as it is.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

/// Networks that are not the public internet: loopback, private and shared ranges,
/// link-local (where cloud metadata services answer), multicast, reserved and
/// documentation ranges, and IPv6's translation prefixes that can carry one of those.
const SPECIAL_V4: &[([u8; 4], u8)] = &[
    ([0, 0, 0, 0], 8),
    ([10, 0, 0, 0], 8),
    ([100, 64, 0, 0], 10),
    ([127, 0, 0, 0], 8),
    ([169, 254, 0, 0], 16),
    ([172, 16, 0, 0], 12),
    ([192, 0, 0, 0], 24),
    ([192, 0, 2, 0], 24),
    ([192, 88, 99, 0], 24),
    ([192, 168, 0, 0], 16),
    ([198, 18, 0, 0], 15),
    ([198, 51, 100, 0], 24),
    ([203, 0, 113, 0], 24),
    ([224, 0, 0, 0], 4),
    ([240, 0, 0, 0], 4),
];

const SPECIAL_V6: &[(u128, u8)] = &[
    (0, 96),                                         // unspecified, loopback, IPv4-compatible
    (0x0064_ff9b_0000_0000_0000_0000_0000_0000, 96), // NAT64
    (0x0064_ff9b_0001_0000_0000_0000_0000_0000, 48), // local NAT64
    (0x0100_0000_0000_0000_0000_0000_0000_0000, 64), // discard
    (0x2001_0000_0000_0000_0000_0000_0000_0000, 23), // IETF protocol assignments
    (0x2001_0db8_0000_0000_0000_0000_0000_0000, 32), // documentation
    (0x2002_0000_0000_0000_0000_0000_0000_0000, 16), // 6to4 (carries an IPv4 address)
    (0xfc00_0000_0000_0000_0000_0000_0000_0000, 7),  // unique local (fd00:ec2::254 is here)
    (0xfe80_0000_0000_0000_0000_0000_0000_0000, 10), // link-local
    (0xfec0_0000_0000_0000_0000_0000_0000_0000, 10), // site-local
    (0xff00_0000_0000_0000_0000_0000_0000_0000, 8),  // multicast
];

/// The special network (see [`SPECIAL_V4`]) holding `ip`, if any.
fn special_block(ip: IpAddr) -> Option<(IpAddr, u8)> {
    match canonical(ip) {
        IpAddr::V4(v4) => SPECIAL_V4
            .iter()
            .map(|&(net, len)| (IpAddr::V4(Ipv4Addr::from(net)), len))
            .find(|&(net, len)| contains(net, len, IpAddr::V4(v4))),
        IpAddr::V6(v6) => SPECIAL_V6
            .iter()
            .map(|&(net, len)| (IpAddr::V6(Ipv6Addr::from(net)), len))
            .find(|&(net, len)| contains(net, len, IpAddr::V6(v6))),
    }
}

/// Whether `ip` is outside the public internet (loopback, private, link-local, ...).
pub fn is_special(ip: IpAddr) -> bool {
    special_block(ip).is_some()
}

fn contains(net: IpAddr, len: u8, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            u32::from(n) & mask == u32::from(a) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            u128::from(n) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

/// What is known of one destination when it is checked: the name the guest asked for (if
/// it asked by name), the address it resolved to, the port, and what the address is.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Destination<'a> {
    pub(crate) name: Option<&'a str>,
    pub(crate) ip: IpAddr,
    pub(crate) port: u16,
    /// Not the public internet (see [`is_special`]).
    pub(crate) special: bool,
    /// One of the node's own addresses with one of its own listening ports, or one of its
    /// own addresses at all.
    pub(crate) own_port: bool,
    pub(crate) own_address: bool,
}

impl NetRule {
    /// Whether the rule lets the guest reach `d`. A name or `*` never reaches a special
    /// address (a public name that resolves to 127.0.0.1 stays out); an address rule does
    /// only when its whole network lies inside the special range, that is when it names
    /// that range on purpose (`127.0.0.1`, `10.0.0.0/8`, not `0.0.0.0/0`). The node's own
    /// addresses need a rule of exactly that address, and its own listening ports a rule
    /// with exactly that port too.
    pub(crate) fn allows(&self, d: &Destination<'_>) -> bool {
        if self.port.is_some_and(|p| p != d.port) {
            return false;
        }
        if d.own_port && self.port != Some(d.port) {
            return false;
        }
        let public = !d.special && !d.own_address;
        match &self.host {
            HostPattern::Any => public,
            HostPattern::Name(_) | HostPattern::Subdomains(_) => {
                public && d.name.is_some_and(|n| self.names(n))
            }
            &HostPattern::Net(net, len) => {
                let ip = canonical(d.ip);
                if !contains(net, len, ip) {
                    return false;
                }
                let full = if net.is_ipv4() { 32 } else { 128 };
                if d.own_address && len != full {
                    return false;
                }
                !d.special
                    || special_block(net).is_some_and(|(block, block_len)| {
                        len >= block_len && contains(block, block_len, net)
                    })
            }
        }
    }

    /// Whether the rule covers `d` as a deny rule: by name, subdomain or network, the
    /// special ranges included.
    pub(crate) fn covers(&self, d: &Destination<'_>) -> bool {
        if self.port.is_some_and(|p| p != d.port) {
            return false;
        }
        match &self.host {
            HostPattern::Any => true,
            HostPattern::Name(_) | HostPattern::Subdomains(_) => {
                d.name.is_some_and(|n| self.names(n))
            }
            &HostPattern::Net(net, len) => contains(net, len, canonical(d.ip)),
        }
    }

    /// Whether the rule could match a destination asked for as `name` on `port` (any port
    /// when `None`, a plain name lookup), whatever the name resolves to (false only when it
    /// surely cannot: another name or port).
    pub(crate) fn may_match_name(&self, name: &str, port: Option<u16>) -> bool {
        if port.zip(self.port).is_some_and(|(p, own)| p != own) {
            return false;
        }
        match &self.host {
            HostPattern::Any | HostPattern::Net(..) => true,
            HostPattern::Name(_) | HostPattern::Subdomains(_) => self.names(name),
        }
    }

    /// Whether the rule covers every address `name` could resolve to (`*`, or the name by
    /// name or subdomain), as a deny rule, on `port` (on every port when `None`).
    pub(crate) fn covers_name(&self, name: &str, port: Option<u16>) -> bool {
        if self.port.is_some_and(|own| port != Some(own)) {
            return false;
        }
        match &self.host {
            HostPattern::Any => true,
            HostPattern::Name(_) | HostPattern::Subdomains(_) => self.names(name),
            HostPattern::Net(_, len) => *len == 0,
        }
    }

    /// Whether a name rule names `name`: the name itself, or one of its subdomains for
    /// `*.name` (only at a dot: `*.ample.org` does not name `example.org`).
    fn names(&self, name: &str) -> bool {
        match &self.host {
            HostPattern::Name(n) => n == name,
            HostPattern::Subdomains(s) => name
                .strip_suffix(s.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            _ => false,
        }
    }

    /// The rule that matches every destination (`*`).
    pub fn any() -> NetRule {
        NetRule {
            host: HostPattern::Any,
            port: None,
        }
    }

    /// Whether this is `*` or a network of length 0 (all IPv4 or all IPv6 traffic).
    pub fn is_everything(&self) -> bool {
        self.port.is_none() && matches!(self.host, HostPattern::Any | HostPattern::Net(_, 0))
    }
}

/// Why a rule could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError(String);

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RuleError {}

impl FromStr for NetRule {
    type Err = RuleError;

    fn from_str(text: &str) -> Result<NetRule, RuleError> {
        let bad = |why: &str| RuleError(format!("network rule `{text}`: {why}"));
        let s = text.trim();
        if s.is_empty() {
            return Err(bad("empty"));
        }
        // The port: after `]` for bracketed IPv6, after the only `:` otherwise (a bare
        // IPv6 address or network has several and no port).
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let close = rest
                .find(']')
                .ok_or_else(|| bad("no `]` after an IPv6 address"))?;
            let after = &rest[close + 1..];
            let (prefix, port) = match after.split_once(':') {
                Some((prefix, port)) => (prefix, Some(port)),
                None => (after, None),
            };
            (format!("{}{}", &rest[..close], prefix), port)
        } else if s.matches(':').count() == 1 {
            let (h, p) = s.split_once(':').unwrap_or((s, ""));
            (h.to_string(), Some(p))
        } else {
            (s.to_string(), None)
        };
        let port = match port {
            None => None,
            Some(p) => Some(
                p.parse::<u16>()
                    .ok()
                    .filter(|&p| p != 0)
                    .ok_or_else(|| bad("the port must be a number from 1 to 65535"))?,
            ),
        };
        let host = if host == "*" {
            HostPattern::Any
        } else if let Some((addr, len)) = host.split_once('/') {
            let ip: IpAddr = addr
                .parse()
                .map_err(|_| bad("a network is an address, `/` and a prefix length"))?;
            let full = if ip.is_ipv4() { 32 } else { 128 };
            let len: u8 = len
                .parse()
                .ok()
                .filter(|&l| l <= full)
                .ok_or_else(|| bad("the prefix length is out of range"))?;
            HostPattern::Net(ip, len)
        } else if let Some(suffix) = host.strip_prefix("*.") {
            match parse_host(suffix) {
                Some(Host::Name(n)) => HostPattern::Subdomains(n),
                _ => return Err(bad("`*.` must be followed by a domain name")),
            }
        } else {
            match parse_host(&host) {
                Some(Host::Ip(ip)) => {
                    let ip = canonical(ip);
                    HostPattern::Net(ip, if ip.is_ipv4() { 32 } else { 128 })
                }
                Some(Host::Name(n)) => HostPattern::Name(n),
                None => return Err(bad("not a host name, address or network")),
            }
        };
        Ok(NetRule { host, port })
    }
}

impl fmt::Display for NetRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bracket =
            matches!(self.host, HostPattern::Net(IpAddr::V6(_), 128)) && self.port.is_some();
        match &self.host {
            HostPattern::Any => f.write_str("*")?,
            HostPattern::Name(n) => f.write_str(n)?,
            HostPattern::Subdomains(s) => write!(f, "*.{s}")?,
            HostPattern::Net(ip, len) => {
                let full = if ip.is_ipv4() { 32 } else { 128 };
                match (bracket, *len == full) {
                    (true, _) => write!(f, "[{ip}]")?,
                    (false, true) => write!(f, "{ip}")?,
                    (false, false) => write!(f, "{ip}/{len}")?,
                }
            }
        }
        match self.port {
            Some(p) => write!(f, ":{p}"),
            None => Ok(()),
        }
    }
}

/// Reads rules from values that may each be a comma-separated list (`--allow-net a,b`).
pub fn parse_rules<S: AsRef<str>>(values: &[S]) -> Result<Vec<NetRule>, RuleError> {
    values
        .iter()
        .flat_map(|v| v.as_ref().split(','))
        .filter(|s| !s.trim().is_empty())
        .map(str::parse)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest(name: Option<&str>, ip: &str, port: u16) -> Destination<'static> {
        let ip: IpAddr = ip.parse().unwrap();
        let name: Option<&'static str> = name.map(|n| &*Box::leak(n.to_string().into_boxed_str()));
        Destination {
            name,
            ip,
            port,
            special: is_special(ip),
            own_port: false,
            own_address: false,
        }
    }

    fn rule(s: &str) -> NetRule {
        s.parse().unwrap()
    }

    #[test]
    fn hosts_are_read_as_browsers_read_them() {
        let v4 = |s: &str| Some(Host::Ip(s.parse().unwrap()));
        assert_eq!(parse_host("2130706433"), v4("127.0.0.1"));
        assert_eq!(parse_host("0177.0.0.1"), v4("127.0.0.1"));
        assert_eq!(parse_host("0x7f.1"), v4("127.0.0.1"));
        assert_eq!(parse_host("127.1"), v4("127.0.0.1"));
        assert_eq!(parse_host("127.0.0.1."), v4("127.0.0.1"));
        assert_eq!(parse_host("[::ffff:127.0.0.1]"), v4("127.0.0.1"));
        assert_eq!(parse_host("[::ffff:7f00:1]"), v4("127.0.0.1"));
        assert_eq!(parse_host("169.254.169.254"), v4("169.254.169.254"));
        assert_eq!(
            parse_host("Example.ORG."),
            Some(Host::Name("example.org".into()))
        );
        assert_eq!(
            parse_host("256.1.1.1"),
            None,
            "not an address, not a name either"
        );
        assert_eq!(parse_host("1.2.3.4.5"), None);
        assert_eq!(parse_host("ex ample.org"), None);
        assert_eq!(parse_host(""), None);
        assert_eq!(parse_host("a..b"), None);
        assert_eq!(
            parse_host("1e100.net"),
            Some(Host::Name("1e100.net".into()))
        );
    }

    #[test]
    fn rules_are_read_in_denos_syntax() {
        for text in [
            "example.org",
            "*.example.org",
            "10.1.2.3",
            "10.0.0.0/8",
            "[::1]:8080",
            "fd00::/8",
            "example.org:443",
            "127.0.0.1:8080",
            "*",
        ] {
            assert_eq!(rule(text).to_string(), text, "{text}");
        }
        assert_eq!(rule("[::1]").to_string(), "::1");
        assert_eq!(rule("[::ffff:10.0.0.1]").to_string(), "10.0.0.1");
        for bad in [
            "",
            "example.org:0",
            "example.org:x",
            "10.0.0.0/33",
            "*.",
            "a b",
            "[::1",
        ] {
            assert!(bad.parse::<NetRule>().is_err(), "{bad} should be refused");
        }
        let rules = parse_rules(&["a.org,b.org:80", "10.0.0.0/8"]).unwrap();
        assert_eq!(rules.len(), 3);
    }

    #[test]
    fn names_and_subdomains_match_as_written() {
        let d = dest(Some("api.example.org"), "93.184.216.34", 443);
        assert!(rule("*.example.org").allows(&d));
        assert!(!rule("example.org").allows(&d));
        assert!(rule("api.example.org:443").allows(&d));
        assert!(!rule("api.example.org:80").allows(&d));
        assert!(!rule("*.ample.org").allows(&d), "a suffix only at a dot");
        assert!(!rule("*.example.org").allows(&dest(Some("example.org"), "93.184.216.34", 443)));
        assert!(rule("93.184.216.0/24").allows(&d));
    }

    #[test]
    fn special_addresses_need_an_address_rule_of_their_own_range() {
        // A public name resolving to loopback (DNS rebinding) stays out.
        let rebound = dest(Some("evil.example.org"), "127.0.0.1", 80);
        assert!(!rule("evil.example.org").allows(&rebound));
        assert!(!rule("*").allows(&rebound));
        assert!(!rule("0.0.0.0/0").allows(&rebound));
        assert!(rule("127.0.0.1").allows(&rebound));
        assert!(rule("127.0.0.0/8").allows(&rebound));
        let metadata = dest(None, "169.254.169.254", 80);
        assert!(!rule("*").allows(&metadata));
        assert!(
            !rule("169.0.0.0/8").allows(&metadata),
            "wider than the special range"
        );
        assert!(rule("169.254.169.254").allows(&metadata));
        let ec2_v6 = dest(None, "fd00:ec2::254", 80);
        assert!(!rule("::/0").allows(&ec2_v6));
        assert!(rule("fd00:ec2::254").allows(&ec2_v6));
        // IPv4-mapped IPv6 is its IPv4 address, for rules and for classes.
        let mapped = dest(None, "::ffff:127.0.0.1", 80);
        assert!(mapped.special);
        assert!(rule("127.0.0.1").allows(&mapped));
        for ip in [
            "10.1.1.1",
            "172.16.0.1",
            "192.168.1.1",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "224.0.0.1",
            "255.255.255.255",
            "64:ff9b::7f00:1",
            "2002:7f00:1::",
        ] {
            assert!(is_special(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "1.1.1.1", "2606:4700::1111"] {
            assert!(!is_special(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn own_addresses_and_ports_need_exact_rules() {
        let mut d = dest(None, "127.0.0.1", 9000);
        d.own_port = true;
        d.own_address = true;
        assert!(!rule("127.0.0.1").allows(&d));
        assert!(!rule("127.0.0.0/8:9000").allows(&d));
        assert!(rule("127.0.0.1:9000").allows(&d));
    }

    #[test]
    fn deny_rules_cover_special_ranges_too() {
        let d = dest(Some("x.internal"), "10.0.0.5", 443);
        assert!(rule("10.0.0.0/8").covers(&d));
        assert!(rule("*.internal").covers(&d));
        assert!(rule("*").covers(&d));
        assert!(!rule("10.0.0.0/8:80").covers(&d));
    }
}
