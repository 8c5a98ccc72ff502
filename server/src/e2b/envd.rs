//! What every envd request starts with: the sandbox it is for (`E2b-Sandbox-Id`, or a
//! `<port>-<id>.<domain>` host) and its access token; for the Connect services, the framing,
//! the deadline and the keep-alive interval too ([`Call`]). And envd's `GET /health`.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::connect::{self, Code, Framing, RpcError};
use super::{E2b, MAX_MESSAGE_BYTES, Sbx, SharedE2b, error};

/// The sandbox an envd request is for (`E2b-Sandbox-Id`, or a `<port>-<id>.<domain>` host)
/// and whether its access token is right.
pub(crate) enum Target {
    Found(Arc<Sbx>),
    /// No such sandbox, or it has ended.
    Gone(String),
    Unauthorized,
}

pub(crate) fn target(e2b: &E2b, headers: &HeaderMap) -> Target {
    target_with(e2b, headers, &["x-access-token"])
}

/// As [`target`], the token read from the first of `token_headers` present.
pub(crate) fn target_with(e2b: &E2b, headers: &HeaderMap, token_headers: &[&str]) -> Target {
    let id = headers
        .get("e2b-sandbox-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| {
            let host = headers.get("host")?.to_str().ok()?;
            let first = host.split('.').next()?;
            let (_, id) = first.split_once('-')?;
            Some(id.to_string())
        })
        .unwrap_or_default();
    let Some(s) = e2b.get(&id) else {
        return Target::Gone(id);
    };
    let given = token_headers
        .iter()
        .find_map(|h| headers.get(*h))
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !crate::auth::constant_time_eq(given.as_bytes(), s.token.as_bytes()) {
        return Target::Unauthorized;
    }
    s.session.touch();
    Target::Found(s)
}

/// What E2B's edge says of a sandbox it does not have (the SDKs recognise the words).
pub(crate) fn gone(id: &str) -> String {
    format!("The sandbox {id} was not found")
}

/// `GET /health`: 204 for a live sandbox, 502 for one that is gone (as E2B's edge answers
/// for a sandbox it cannot reach).
pub(super) async fn health(State(e2b): State<SharedE2b>, headers: HeaderMap) -> Response {
    match target(&e2b, &headers) {
        Target::Found(_) => StatusCode::NO_CONTENT.into_response(),
        Target::Gone(id) => error(StatusCode::BAD_GATEWAY, gone(&id)),
        Target::Unauthorized => error(StatusCode::UNAUTHORIZED, "invalid access token"),
    }
}

/// A Connect call to one of envd's services, past its preamble: the request's framing is
/// right, the sandbox exists and the token is its own, the deadline (`connect-timeout-ms`)
/// and the keep-alive interval are read. Errors from here on are answered in the call's
/// framing ([`Call::fail`]).
pub(crate) struct Call {
    pub sbx: Arc<Sbx>,
    pub framing: Framing,
    pub deadline: Option<Duration>,
    /// `keepalive-ping-interval` (seconds, 1 to 300) of a streamed answer.
    pub keepalive: Option<Duration>,
}

impl Call {
    /// The preamble of a call to `method` of a service with `methods`, or the answer that
    /// ends it. A method the service does not have is a plain 404, as envd's Connect handlers
    /// answer a path they do not serve.
    pub(crate) fn begin(
        e2b: &E2b,
        headers: &HeaderMap,
        method: &str,
        methods: &[(&str, Framing)],
    ) -> Result<Call, Response> {
        let Some(&(_, framing)) = methods.iter().find(|(m, _)| *m == method) else {
            return Err((
                StatusCode::NOT_FOUND,
                [(
                    axum::http::header::CONTENT_TYPE,
                    "text/plain; charset=utf-8",
                )],
                "404 page not found\n",
            )
                .into_response());
        };
        connect::check_request(headers, framing)?;
        let fail = |e: RpcError| answer_error(framing, &e);
        let sbx = match target(e2b, headers) {
            Target::Found(s) => s,
            Target::Gone(id) => return Err(fail(RpcError::new(Code::Unavailable, gone(&id)))),
            Target::Unauthorized => {
                return Err(fail(RpcError::new(
                    Code::Unauthenticated,
                    "invalid access token",
                )));
            }
        };
        let deadline = connect::timeout(headers).map_err(fail)?;
        let keepalive = headers
            .get("keepalive-ping-interval")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .map(|s| Duration::from_secs(s.clamp(1, 300)));
        Ok(Call {
            sbx,
            framing,
            deadline,
            keepalive,
        })
    }

    /// `e` as the answer, in the call's framing.
    pub(crate) fn fail(&self, e: RpcError) -> Response {
        answer_error(self.framing, &e)
    }

    /// The whole request body, at most a Connect message and its envelope.
    pub(crate) async fn body(&self, body: Body) -> Result<Bytes, Response> {
        axum::body::to_bytes(body, MAX_MESSAGE_BYTES + 5)
            .await
            .map_err(|_| {
                self.fail(RpcError::new(
                    Code::ResourceExhausted,
                    "the request is larger than the limit",
                ))
            })
    }
}

fn answer_error(framing: Framing, e: &RpcError) -> Response {
    match framing {
        Framing::Unary => e.unary_response(),
        Framing::Stream => connect::stream_error_response(e),
    }
}
