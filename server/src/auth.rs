//! Bearer-token checks of the HTTP front-ends that have a token (the worker API and the
//! sidecar).

use axum::http::{HeaderMap, header};

/// Whether the request carries `Authorization: Bearer <token>`. The comparison takes the
/// same time wherever the tokens differ.
pub(crate) fn bearer_matches(headers: &HeaderMap, token: &str) -> bool {
    constant_time_eq(bearer(headers).as_bytes(), token.as_bytes())
}

/// The token of `Authorization: Bearer <token>`, or "" when there is none.
pub(crate) fn bearer(headers: &HeaderMap) -> &str {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("")
}

/// Whether two secrets are equal, in the same time wherever they differ.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_token_matches() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, v.parse().unwrap());
            h
        };
        assert!(bearer_matches(&with("Bearer s3cret"), "s3cret"));
        assert!(!bearer_matches(&with("Bearer s3cre"), "s3cret"));
        assert!(!bearer_matches(&with("Bearer s3cret2"), "s3cret"));
        assert!(!bearer_matches(&with("Basic s3cret"), "s3cret"));
        assert!(!bearer_matches(&HeaderMap::new(), "s3cret"));
    }
}
