//! An HTTP client over `wasi:http/outgoing-handler` for the guests (`curl`, `wget`,
//! node's `fetch`): the host resolves, checks the sandbox's network policy, connects and
//! does TLS; here a request is built, its body streamed and the answer read.

use std::time::Duration;

use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
};
use wasip2::io::streams::{InputStream, StreamError};

/// Where a request goes: `https` or not, `host[:port]`, and the path with its query.
pub struct Target<'a> {
    pub https: bool,
    pub authority: &'a str,
    pub path: &'a str,
}

/// One request to send.
pub struct Request<'a> {
    pub method: &'a str,
    pub target: Target<'a>,
    pub headers: &'a [(String, String)],
    pub body: Option<&'a [u8]>,
    /// When the whole transfer must be over (`--max-time`).
    pub deadline: Option<u64>,
    pub connect_timeout: Option<Duration>,
}

/// An answer whose body is still to be read.
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, Vec<u8>)>,
    // Dropped in this order: the stream before its body.
    stream: Option<InputStream>,
    body: Option<IncomingBody>,
    deadline: Option<u64>,
}

/// Why a transfer failed, as the host said.
#[derive(Debug, Clone)]
pub enum Failure {
    Http(ErrorCode),
    /// `--max-time` passed.
    Timeout,
    /// Something the host refused without a code.
    Other(String),
}

impl Response {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    }

    /// The next piece of the body; `None` at its end.
    pub fn chunk(&mut self) -> Result<Option<Vec<u8>>, Failure> {
        let Some(stream) = &self.stream else {
            return Ok(None);
        };
        if let Some(deadline) = self.deadline {
            let ready = stream.subscribe();
            if !wait(&ready, deadline) {
                return Err(Failure::Timeout);
            }
        }
        let read = match self.deadline {
            Some(_) => stream.read(64 * 1024),
            None => stream.blocking_read(64 * 1024),
        };
        match read {
            Ok(data) => Ok(Some(data)),
            Err(StreamError::Closed) => {
                self.stream = None;
                if let Some(body) = self.body.take() {
                    drop(IncomingBody::finish(body));
                }
                Ok(None)
            }
            Err(StreamError::LastOperationFailed(e)) => {
                Err(match wasip2::http::types::http_error_code(&e) {
                    Some(code) => Failure::Http(code),
                    None => Failure::Other(e.to_debug_string()),
                })
            }
        }
    }
}

/// Waits for `p` until `deadline` (monotonic nanoseconds); false when the deadline came first.
fn wait(p: &wasip2::io::poll::Pollable, deadline: u64) -> bool {
    let timer = wasip2::clocks::monotonic_clock::subscribe_instant(deadline);
    let ready = wasip2::io::poll::poll(&[p, &timer]);
    ready.contains(&0)
}

pub fn now() -> u64 {
    wasip2::clocks::monotonic_clock::now()
}

/// Sends one request and waits for its answer's head.
pub fn send(req: &Request<'_>) -> Result<Response, Failure> {
    let mut fields = Vec::new();
    for (k, v) in req.headers {
        fields.push((k.clone(), v.as_bytes().to_vec()));
    }
    let headers =
        Fields::from_list(&fields).map_err(|e| Failure::Other(format!("bad header: {e:?}")))?;
    let request = OutgoingRequest::new(headers);
    let method = match req.method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "CONNECT" => Method::Connect,
        "OPTIONS" => Method::Options,
        "TRACE" => Method::Trace,
        "PATCH" => Method::Patch,
        other => Method::Other(other.to_string()),
    };
    let bad = |what: &str| Failure::Other(format!("bad {what}"));
    request.set_method(&method).map_err(|()| bad("method"))?;
    let scheme = if req.target.https {
        Scheme::Https
    } else {
        Scheme::Http
    };
    request
        .set_scheme(Some(&scheme))
        .map_err(|()| bad("scheme"))?;
    request
        .set_authority(Some(req.target.authority))
        .map_err(|()| bad("host"))?;
    request
        .set_path_with_query(Some(req.target.path))
        .map_err(|()| bad("path"))?;
    let options = RequestOptions::new();
    if let Some(t) = req.connect_timeout {
        let _ = options.set_connect_timeout(Some(t.as_nanos() as u64));
    }
    let body = request.body().map_err(|()| bad("body"))?;
    let future = outgoing_handler::handle(request, Some(options)).map_err(Failure::Http)?;
    if let Some(data) = req.body {
        let out = body.write().map_err(|()| bad("body"))?;
        for piece in data.chunks(4096) {
            if out.blocking_write_and_flush(piece).is_err() {
                break;
            }
        }
        drop(out);
    }
    OutgoingBody::finish(body, None).map_err(Failure::Http)?;
    let ready = future.subscribe();
    match req.deadline {
        Some(deadline) => {
            if !wait(&ready, deadline) {
                return Err(Failure::Timeout);
            }
        }
        None => ready.block(),
    }
    drop(ready);
    let answer = match future.get() {
        Some(Ok(Ok(r))) => r,
        Some(Ok(Err(code))) => return Err(Failure::Http(code)),
        _ => return Err(Failure::Other("no answer".into())),
    };
    let status = answer.status();
    let headers = answer.headers().entries();
    let incoming = answer.consume().map_err(|()| bad("answer"))?;
    let stream = incoming.stream().map_err(|()| bad("answer"))?;
    Ok(Response {
        status,
        headers,
        stream: Some(stream),
        body: Some(incoming),
        deadline: req.deadline,
    })
}

/// Standard base64 with padding (Basic authorization, integrity strings).
pub fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A URL as the HTTP clients of the guests need it (`curl`, `wget`, `git`, node's `fetch`).
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
