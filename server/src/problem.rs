//! RFC 9457 problem details: the one error type of the HTTP front-ends. The body carries a
//! stable `type`, a `title` and a `detail` meant for the caller; internal causes go to the
//! log, never into the body.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// Every worker API route's error answer in the OpenAPI document: one response, referenced
/// by each operation as its `default`.
#[derive(utoipa::ToResponse)]
#[response(
    description = "An RFC 9457 problem: 400 invalid, 401 no or wrong token, 404 not found, 409 conflict (the id exists; processes run in the session), 413 too large, 421 an id that routes to another node of the fleet, 422 not a valid snapshot, 429 busy (with Retry-After), 503 not ready or draining (with Retry-After), 507 the snapshot store is full",
    content_type = "application/problem+json"
)]
#[allow(dead_code)]
pub struct ProblemResponse(Problem);

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Problem {
    #[serde(rename = "type")]
    #[schema(value_type = String)]
    pub kind: &'static str,
    #[schema(value_type = String)]
    pub title: &'static str,
    pub status: u16,
    pub detail: String,
    /// Seconds after which the same request may succeed: sent as `Retry-After`.
    #[serde(skip)]
    #[schema(ignore)]
    pub retry_after: Option<u64>,
}

const VALIDATION: &str = "urn:cynodeai:error:validation";
const AUTHENTICATION: &str = "urn:cynodeai:error:authentication";
const NOT_FOUND: &str = "urn:cynodeai:error:not_found";
const CONFLICT: &str = "urn:cynodeai:error:conflict";
const RATE_LIMIT: &str = "urn:cynodeai:error:rate_limit";
const INTERNAL: &str = "urn:cynodeai:error:internal";

impl Problem {
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(VALIDATION, "Bad Request", StatusCode::BAD_REQUEST, detail)
    }
    pub fn unauthorized() -> Self {
        Self::new(
            AUTHENTICATION,
            "Unauthorized",
            StatusCode::UNAUTHORIZED,
            "Invalid or missing bearer token",
        )
    }
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(NOT_FOUND, "Not Found", StatusCode::NOT_FOUND, detail)
    }
    pub fn conflict(detail: impl Into<String>) -> Self {
        Self::new(CONFLICT, "Conflict", StatusCode::CONFLICT, detail)
    }
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            VALIDATION,
            "Request Entity Too Large",
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body exceeds the limit of {limit} bytes"),
        )
    }
    pub fn busy(detail: impl Into<String>) -> Self {
        Self::new(
            RATE_LIMIT,
            "Too Many Requests",
            StatusCode::TOO_MANY_REQUESTS,
            detail,
        )
    }
    /// An internal failure: the cause is logged, the caller sees a generic detail.
    pub fn internal(cause: &anyhow::Error) -> Self {
        tracing::error!(error = %format!("{cause:#}"), "internal error");
        Self::new(
            INTERNAL,
            "Internal Server Error",
            StatusCode::INTERNAL_SERVER_ERROR,
            "the node failed to process the request",
        )
    }
    /// A problem for any error status, typed by its class (what a front-end's own
    /// refusals, such as a malformed query, are turned into).
    pub fn with_status(status: StatusCode, detail: impl Into<String>) -> Self {
        let kind = match status.as_u16() {
            401 => AUTHENTICATION,
            404 => NOT_FOUND,
            409 => CONFLICT,
            429 => RATE_LIMIT,
            400..=499 => VALIDATION,
            _ => INTERNAL,
        };
        let title = status.canonical_reason().unwrap_or("Error");
        Self::new(kind, title, status, detail)
    }

    /// The node cannot start what was asked now (its live-process limit or memory budget):
    /// 503, a rate-limit problem, and when to try again.
    pub fn at_capacity(detail: impl Into<String>) -> Self {
        Self::new(
            RATE_LIMIT,
            "Service Unavailable",
            StatusCode::SERVICE_UNAVAILABLE,
            detail,
        )
        .retry_after(1)
    }
    pub fn unavailable(detail: impl Into<String>) -> Self {
        Self::new(
            INTERNAL,
            "Service Unavailable",
            StatusCode::SERVICE_UNAVAILABLE,
            detail,
        )
    }

    fn new(
        kind: &'static str,
        title: &'static str,
        status: StatusCode,
        detail: impl Into<String>,
    ) -> Self {
        Problem {
            kind,
            title,
            status: status.as_u16(),
            detail: detail.into(),
            retry_after: None,
        }
    }

    /// Tells the caller when to try again (`Retry-After`, in seconds).
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self).unwrap_or_default();
        let mut res = (status, body).into_response();
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let Some(s) = self.retry_after {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        res
    }
}
