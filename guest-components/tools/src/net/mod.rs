//! HTTP(S) for `curl` and `wget`, over `wasi:http/outgoing-handler`: the host resolves,
//! checks the sandbox's network policy, connects and does TLS; a program here builds the
//! request, streams its body and reads the answer. Redirects are followed here, each one
//! a new request the host checks again.

pub mod curl;
pub mod wget;

pub use guest_support::http::{Failure, Request, Response, Target, base64, now, send};

/// A URL as the tools need it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    pub https: bool,
    /// User and password from `user:pass@host` (percent-decoded), if given.
    pub userinfo: Option<(String, String)>,
    /// The host as written (`example.org`, `127.0.0.1`, `[::1]`).
    pub host: String,
    pub port: Option<u16>,
    /// Path and query, starting with `/` (the fragment dropped).
    pub path: String,
}

/// Why a URL could not be used: (curl's exit code, message).
pub type UrlError = (i32, String);

impl Url {
    /// Reads `http://...` or `https://...`; a URL without a scheme is `http://`, as curl
    /// reads it.
    pub fn parse(text: &str) -> Result<Url, UrlError> {
        let text = text.trim();
        let (scheme, rest) = match text.split_once("://") {
            Some((s, r)) => (s.to_ascii_lowercase(), r),
            None => ("http".to_string(), text),
        };
        let https = match scheme.as_str() {
            "http" => false,
            "https" => true,
            other => {
                return Err((1, format!("Protocol \"{other}\" not supported")));
            }
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        let tail = tail.split('#').next().unwrap_or_default();
        let path = if tail.starts_with('?') {
            format!("/{tail}")
        } else if tail.is_empty() {
            "/".to_string()
        } else {
            tail.to_string()
        };
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => {
                let (user, pass) = u.split_once(':').unwrap_or((u, ""));
                (Some((percent_decode(user), percent_decode(pass))), h)
            }
            None => (None, authority),
        };
        let (host, port) = if let Some(inner) = hostport.strip_prefix('[') {
            let close = inner
                .find(']')
                .ok_or((3, "URL rejected: Bad IPv6 address".to_string()))?;
            let host = format!("[{}]", &inner[..close]);
            let after = &inner[close + 1..];
            let port = match after.strip_prefix(':') {
                Some(p) if !p.is_empty() => Some(parse_port(p)?),
                _ => None,
            };
            (host, port)
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) if !p.is_empty() => (h.to_string(), Some(parse_port(p)?)),
                Some((h, _)) => (h.to_string(), None),
                None => (hostport.to_string(), None),
            }
        };
        if host.is_empty() {
            return Err((3, "URL rejected: No host part in the URL".to_string()));
        }
        let path = path.replace(' ', "%20");
        Ok(Url {
            https,
            userinfo,
            host,
            port,
            path,
        })
    }

    /// `host[:port]` as the request's authority (no user information).
    pub fn authority(&self) -> String {
        match self.port {
            Some(p) => format!("{}:{p}", self.host),
            None => self.host.clone(),
        }
    }

    pub fn port_or_default(&self) -> u16 {
        self.port.unwrap_or(if self.https { 443 } else { 80 })
    }

    /// The URL as text, as curl shows it (`%{url_effective}`).
    pub fn to_text(&self) -> String {
        format!(
            "{}://{}{}",
            if self.https { "https" } else { "http" },
            self.authority(),
            self.path
        )
    }

    /// Resolves a `Location` against this URL.
    pub fn join(&self, location: &str) -> Result<Url, UrlError> {
        if location.contains("://") {
            return Url::parse(location);
        }
        if let Some(rest) = location.strip_prefix("//") {
            let scheme = if self.https { "https" } else { "http" };
            return Url::parse(&format!("{scheme}://{rest}"));
        }
        let mut url = self.clone();
        url.userinfo = None;
        if location.starts_with('/') {
            url.path = location.to_string();
        } else if location.starts_with('?') {
            let base = self.path.split('?').next().unwrap_or("/");
            url.path = format!("{base}{location}");
        } else {
            let base = self.path.split('?').next().unwrap_or("/");
            let dir = &base[..base.rfind('/').map_or(0, |i| i + 1)];
            url.path = format!("{dir}{location}");
        }
        url.path = normalize_dots(&url.path);
        Ok(url)
    }

    /// The last segment of the path (`-O`, wget's file name), without the query.
    pub fn file_name(&self) -> String {
        let path = self.path.split('?').next().unwrap_or_default();
        percent_decode(path.rsplit('/').next().unwrap_or_default())
    }
}

fn parse_port(p: &str) -> Result<u16, UrlError> {
    p.parse::<u16>().map_err(|_| {
        (
            3,
            "URL rejected: Port number was not a decimal number between 0 and 65535".to_string(),
        )
    })
}

/// `/a/./b/../c` as `/a/c`.
fn normalize_dots(path: &str) -> String {
    let (p, q) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    };
    let mut out: Vec<&str> = Vec::new();
    for seg in p.split('/').skip(1) {
        match seg {
            "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s),
        }
    }
    let trailing = p.ends_with("/.") || p.ends_with("/..");
    let mut s = format!("/{}", out.join("/"));
    if trailing && !s.ends_with('/') {
        s.push('/');
    }
    match q {
        Some(q) => format!("{s}?{q}"),
        None => s,
    }
}

pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// `application/x-www-form-urlencoded` and URL escaping of everything but unreserved bytes.
pub fn percent_encode(s: &[u8]) -> String {
    let mut out = String::new();
    for &c in s {
        if c.is_ascii_alphanumeric() || b"-._~".contains(&c) {
            out.push(c as char);
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
    out
}

/// The standard reason phrase of a status code (the host does not pass the server's on).
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        203 => "Non-Authoritative Information",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}
