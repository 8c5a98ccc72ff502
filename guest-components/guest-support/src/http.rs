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
