//! HTTP(S) for `curl` and `wget`, over `wasi:http/outgoing-handler`: the host resolves,
//! checks the sandbox's network policy, connects and does TLS; a program here builds the
//! request, streams its body and reads the answer. Redirects are followed here, each one
//! a new request the host checks again.

pub mod curl;
pub mod wget;

pub use guest_support::http::{Failure, Request, Response, Target, Url, base64, now, send};

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
