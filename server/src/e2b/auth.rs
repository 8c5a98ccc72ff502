//! The control plane's credential: the node's token as `X-API-KEY` (itself or in E2B's
//! `e2b_` form) or as a bearer token. Envd's routes are guarded by each sandbox's own access
//! token instead (`envd`).

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;

use super::{SharedE2b, error};

pub(super) async fn api_key(State(e2b): State<SharedE2b>, req: Request, next: Next) -> Response {
    let token = e2b.node.config().token.clone();
    let headers = req.headers();
    let key = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let ok = match key {
        Some(k) => api_key_matches(&k, &token),
        None => crate::auth::bearer_matches(headers, &token),
    };
    if !ok {
        return error(
            StatusCode::UNAUTHORIZED,
            "Invalid API key: send the node's token as X-API-KEY",
        );
    }
    next.run(req).await
}

/// Whether `key` is the node's token, as itself or in E2B's key form: `e2b_` and the
/// token's bytes in lowercase hex (older SDKs refuse any key not of that form).
fn api_key_matches(key: &str, token: &str) -> bool {
    let as_e2b = api_key_for(token);
    crate::auth::constant_time_eq(key.as_bytes(), token.as_bytes())
        | crate::auth::constant_time_eq(key.as_bytes(), as_e2b.as_bytes())
}

/// The node's token in E2B's API key form (`e2b_` and hex).
pub fn api_key_for(token: &str) -> String {
    let mut s = String::with_capacity(4 + 2 * token.len());
    s.push_str("e2b_");
    for b in token.bytes() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_keys_are_the_token_or_its_e2b_form() {
        assert_eq!(api_key_for("tok"), "e2b_746f6b");
        assert!(api_key_matches("tok", "tok"));
        assert!(api_key_matches("e2b_746f6b", "tok"));
        assert!(!api_key_matches("e2b_746f6c", "tok"));
        assert!(!api_key_matches("", "tok"));
        assert!(!api_key_matches("e2b_", "tok"));
    }
}
