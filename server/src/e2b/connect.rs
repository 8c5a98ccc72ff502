//! The Connect protocol (connectrpc.com/docs/protocol) with the JSON codec, as envd speaks it:
//! unary calls (`application/json` in and out, errors as `{"code","message"}` with the HTTP
//! status of the code) and server streams (`application/connect+json`, each message in a
//! 5-byte envelope, the last one an end-of-stream envelope carrying the error, if any).
//! Client streams are read envelope by envelope. Written here rather than taken from a crate:
//! the framing is a few dozen lines, and the Rust Connect crates want protobuf code
//! generation for what are a handful of serde structs.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

/// Flag of an envelope holding the end-of-stream message.
const END_STREAM: u8 = 0x02;
/// Flag of a compressed envelope (never sent here; refused when received).
const COMPRESSED: u8 = 0x01;

/// A Connect error: a code from the protocol's list and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    pub code: Code,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    Canceled,
    InvalidArgument,
    DeadlineExceeded,
    NotFound,
    AlreadyExists,
    PermissionDenied,
    ResourceExhausted,
    FailedPrecondition,
    Unimplemented,
    Internal,
    Unavailable,
    Unauthenticated,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Canceled => "canceled",
            Code::InvalidArgument => "invalid_argument",
            Code::DeadlineExceeded => "deadline_exceeded",
            Code::NotFound => "not_found",
            Code::AlreadyExists => "already_exists",
            Code::PermissionDenied => "permission_denied",
            Code::ResourceExhausted => "resource_exhausted",
            Code::FailedPrecondition => "failed_precondition",
            Code::Unimplemented => "unimplemented",
            Code::Internal => "internal",
            Code::Unavailable => "unavailable",
            Code::Unauthenticated => "unauthenticated",
        }
    }

    /// The HTTP status of a unary error with this code (the protocol's table).
    pub fn http_status(self) -> StatusCode {
        match self {
            Code::Canceled => StatusCode::from_u16(499).unwrap_or(StatusCode::REQUEST_TIMEOUT),
            Code::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Code::InvalidArgument | Code::FailedPrecondition => StatusCode::BAD_REQUEST,
            Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
            Code::NotFound => StatusCode::NOT_FOUND,
            Code::AlreadyExists => StatusCode::CONFLICT,
            Code::PermissionDenied => StatusCode::FORBIDDEN,
            Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
            Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
            Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        }
    }
}

impl RpcError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Code::InvalidArgument, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Code::NotFound, message)
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({ "code": self.code.as_str(), "message": self.message })
    }

    /// The answer to a unary call that failed.
    pub fn unary_response(&self) -> Response {
        (
            self.code.http_status(),
            [(header::CONTENT_TYPE, "application/json")],
            self.json().to_string(),
        )
            .into_response()
    }
}

/// What kind of call a request is, from its content type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Unary,
    Stream,
}

/// Checks the request's content type and compression against what `framing` needs.
pub fn check_request(headers: &HeaderMap, framing: Framing) -> Result<(), Response> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let ok = match framing {
        Framing::Unary => ct == "application/json",
        Framing::Stream => ct == "application/connect+json",
    };
    if !ok {
        // The protocol answers an unsupported codec with 415 and an Accept-Post listing
        // what is supported.
        let want = match framing {
            Framing::Unary => "application/json",
            Framing::Stream => "application/connect+json",
        };
        let mut r = (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("content type {ct:?} is not supported here: send {want}"),
        )
            .into_response();
        r.headers_mut()
            .insert("accept-post", HeaderValue::from_static(want));
        return Err(r);
    }
    let encoding = match framing {
        Framing::Unary => headers.get(header::CONTENT_ENCODING),
        Framing::Stream => headers.get("connect-content-encoding"),
    };
    if let Some(e) = encoding.and_then(|v| v.to_str().ok())
        && !e.eq_ignore_ascii_case("identity")
    {
        let err = RpcError::new(
            Code::Unimplemented,
            format!("compression {e:?} is not supported: send identity"),
        );
        return Err(match framing {
            Framing::Unary => err.unary_response(),
            Framing::Stream => stream_error_response(&err),
        });
    }
    Ok(())
}

/// The deadline the client set with `Connect-Timeout-Ms`, if any (at most 10 digits, as the
/// protocol says).
pub fn timeout(headers: &HeaderMap) -> Result<Option<Duration>, RpcError> {
    let Some(v) = headers.get("connect-timeout-ms") else {
        return Ok(None);
    };
    let s = v.to_str().unwrap_or("");
    if s.is_empty() || s.len() > 10 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(RpcError::invalid(format!(
            "Connect-Timeout-Ms {s:?} is not a number of milliseconds"
        )));
    }
    Ok(Some(Duration::from_millis(s.parse().unwrap_or(u64::MAX))))
}

/// Decodes a unary request's JSON body; an empty body is the empty message.
pub fn decode_unary<T: DeserializeOwned>(body: &[u8]) -> Result<T, RpcError> {
    let body = if body.iter().all(u8::is_ascii_whitespace) {
        b"{}".as_slice()
    } else {
        body
    };
    serde_json::from_slice(body).map_err(|e| RpcError::invalid(format!("bad request: {e}")))
}

/// Splits one enveloped message off the front of `buf`: `Ok(None)` when more bytes are
/// needed.
pub fn take_envelope(buf: &mut Vec<u8>, max: usize) -> Result<Option<(u8, Vec<u8>)>, RpcError> {
    if buf.len() < 5 {
        return Ok(None);
    }
    let flags = buf[0];
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    if flags & COMPRESSED != 0 {
        return Err(RpcError::new(
            Code::Unimplemented,
            "compressed messages are not supported",
        ));
    }
    if len > max {
        return Err(RpcError::new(
            Code::ResourceExhausted,
            format!("a message of {len} bytes is more than the limit of {max}"),
        ));
    }
    if buf.len() < 5 + len {
        return Ok(None);
    }
    let msg = buf[5..5 + len].to_vec();
    buf.drain(..5 + len);
    Ok(Some((flags, msg)))
}

/// Reads the single enveloped message of a server-stream request.
pub fn decode_stream_request<T: DeserializeOwned>(body: &[u8], max: usize) -> Result<T, RpcError> {
    let mut buf = body.to_vec();
    match take_envelope(&mut buf, max)? {
        Some((flags, msg)) if flags & END_STREAM == 0 && buf.is_empty() => decode_unary(&msg),
        Some(_) => Err(RpcError::invalid(
            "a server-stream request holds exactly one message",
        )),
        None => Err(RpcError::invalid("the request's envelope is incomplete")),
    }
}

/// Reads the messages of a client stream one by one from a request body.
pub struct EnvelopeReader {
    body: axum::body::BodyDataStream,
    buf: Vec<u8>,
    max: usize,
    done: bool,
}

impl EnvelopeReader {
    pub fn new(body: Body, max: usize) -> Self {
        EnvelopeReader {
            body: body.into_data_stream(),
            buf: Vec::new(),
            max,
            done: false,
        }
    }

    /// The next message, `Ok(None)` at the end of the stream.
    pub async fn next<T: DeserializeOwned>(&mut self) -> Result<Option<T>, RpcError> {
        loop {
            if let Some((flags, msg)) = take_envelope(&mut self.buf, self.max)? {
                if flags & END_STREAM != 0 {
                    self.done = true;
                    return Ok(None);
                }
                return decode_unary(&msg).map(Some);
            }
            if self.done {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(RpcError::invalid("the stream ended inside a message"))
                };
            }
            match self.body.next().await {
                Some(Ok(chunk)) => {
                    if self.buf.len() + chunk.len() > self.max + 5 {
                        return Err(RpcError::new(
                            Code::ResourceExhausted,
                            "a message is more than the limit",
                        ));
                    }
                    self.buf.extend_from_slice(&chunk);
                }
                Some(Err(e)) => return Err(RpcError::new(Code::Canceled, e.to_string())),
                None => self.done = true,
            }
        }
    }
}

/// One message in an envelope.
pub fn envelope(flags: u8, msg: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(5 + msg.len());
    out.push(flags);
    out.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    out.extend_from_slice(msg);
    Bytes::from(out)
}

/// The end-of-stream envelope: `{}` or `{"error": ...}`.
pub fn end_of_stream(error: Option<&RpcError>) -> Bytes {
    let body = match error {
        None => serde_json::json!({}),
        Some(e) => serde_json::json!({ "error": e.json() }),
    };
    envelope(END_STREAM, body.to_string().as_bytes())
}

/// The answer to a stream call that failed before its first message: HTTP 200 with only an
/// end-of-stream envelope, as the protocol has it.
pub fn stream_error_response(err: &RpcError) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/connect+json")],
        end_of_stream(Some(err)),
    )
        .into_response()
}

/// The sending half of a server stream: messages are framed and flushed one by one.
#[derive(Clone)]
pub struct StreamSender(mpsc::Sender<Result<Bytes, std::io::Error>>);

impl StreamSender {
    /// Sends one message; `false` when the client has gone.
    pub async fn send<T: Serialize>(&self, msg: &T) -> bool {
        let json = serde_json::to_vec(msg).unwrap_or_else(|_| b"{}".to_vec());
        self.0.send(Ok(envelope(0, &json))).await.is_ok()
    }

    /// Ends the stream, with an error or without.
    pub async fn finish(self, error: Option<RpcError>) {
        let _ = self.0.send(Ok(end_of_stream(error.as_ref()))).await;
    }

    /// Drops the connection mid-stream, as a sandbox that went away drops envd's (the
    /// SDKs then ask whether the sandbox is alive and say it was killed).
    pub async fn abort(self) {
        let _ = self
            .0
            .send(Err(std::io::Error::other("the sandbox is gone")))
            .await;
    }

    /// Whether the client has gone (its connection closed).
    pub fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

/// A streaming answer and the sender that feeds it. Each message is a chunk of the HTTP/1.1
/// chunked body, written as soon as it is sent.
pub fn stream_response() -> (StreamSender, Response) {
    let (tx, mut rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    let body = Body::from_stream(futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)));
    let res = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/connect+json")],
        body,
    )
        .into_response();
    (StreamSender(tx), res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_round_trip_and_split_at_any_byte() {
        let a = envelope(0, br#"{"a":1}"#);
        let b = end_of_stream(None);
        let all: Vec<u8> = a.iter().chain(b.iter()).copied().collect();
        for cut in 0..all.len() {
            let mut buf = all[..cut].to_vec();
            let mut got = Vec::new();
            while let Some(m) = take_envelope(&mut buf, 1024).unwrap() {
                got.push(m);
            }
            buf.extend_from_slice(&all[cut..]);
            while let Some(m) = take_envelope(&mut buf, 1024).unwrap() {
                got.push(m);
            }
            assert_eq!(got.len(), 2, "cut at {cut}");
            assert_eq!(got[0], (0, br#"{"a":1}"#.to_vec()));
            assert_eq!(got[1], (END_STREAM, b"{}".to_vec()));
        }
    }

    #[test]
    fn oversized_and_compressed_envelopes_are_refused() {
        let mut big = envelope(0, &[b' '; 100]).to_vec();
        assert_eq!(
            take_envelope(&mut big, 10).unwrap_err().code,
            Code::ResourceExhausted
        );
        let mut z = envelope(COMPRESSED, b"x").to_vec();
        assert_eq!(
            take_envelope(&mut z, 10).unwrap_err().code,
            Code::Unimplemented
        );
    }

    #[test]
    fn end_of_stream_carries_the_error() {
        let e = end_of_stream(Some(&RpcError::not_found("no such process")));
        assert_eq!(e[0], END_STREAM);
        let v: serde_json::Value = serde_json::from_slice(&e[5..]).unwrap();
        assert_eq!(v["error"]["code"], "not_found");
        assert_eq!(v["error"]["message"], "no such process");
    }

    #[test]
    fn timeouts_are_checked() {
        let mut h = HeaderMap::new();
        assert_eq!(timeout(&h).unwrap(), None);
        h.insert("connect-timeout-ms", HeaderValue::from_static("1500"));
        assert_eq!(timeout(&h).unwrap(), Some(Duration::from_millis(1500)));
        h.insert("connect-timeout-ms", HeaderValue::from_static("-1"));
        assert!(timeout(&h).is_err());
        h.insert(
            "connect-timeout-ms",
            HeaderValue::from_static("12345678901"),
        );
        assert!(timeout(&h).is_err());
    }

    #[test]
    fn codes_map_to_the_protocols_statuses() {
        assert_eq!(Code::NotFound.http_status(), StatusCode::NOT_FOUND);
        assert_eq!(
            Code::Unauthenticated.http_status(),
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            Code::ResourceExhausted.http_status(),
            StatusCode::TOO_MANY_REQUESTS
        );
        assert_eq!(
            Code::DeadlineExceeded.http_status(),
            StatusCode::GATEWAY_TIMEOUT
        );
        assert_eq!(
            Code::Unimplemented.http_status(),
            StatusCode::NOT_IMPLEMENTED
        );
    }
}
