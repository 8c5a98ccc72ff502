//! What the tests share: one runtime per test binary and the real `wasbox` binary
//! ([`runtime`]), a small HTTP/1.1 client and a running `wasbox serve` ([`http`]), and a
//! server-sent events client ([`sse`]), and a JSON Schema check of answers against the
//! OpenAPI documents ([`schema`]), certificates for TLS on loopback ([`tls`]), and [`skip`]
//! for a test that cannot run here.

pub mod fuzz;
pub mod http;
pub mod runtime;
pub mod schema;
pub mod sse;
pub mod tls;

/// Ends a test that cannot run on this machine (a tool or a device missing): it fails when
/// `WASBOX_REQUIRE_TOOLS` is set (as `.ci/run` sets it), so that a missing install step never
/// passes as a test; elsewhere it says why on stderr. Call it, then `return`.
pub fn skip(why: &str) {
    assert!(
        std::env::var_os("WASBOX_REQUIRE_TOOLS").is_none(),
        "cannot run: {why} (WASBOX_REQUIRE_TOOLS is set)"
    );
    eprintln!("skipped: {why}");
}
