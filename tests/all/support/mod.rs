//! What the tests share: one runtime per test binary and the real `wasbox` binary
//! ([`runtime`]), a small HTTP/1.1 client and a running `wasbox serve` ([`http`]), and a
//! server-sent events client ([`sse`]), and a JSON Schema check of answers against the
//! OpenAPI documents ([`schema`]).

pub mod fuzz;
pub mod http;
pub mod runtime;
pub mod schema;
pub mod sse;
