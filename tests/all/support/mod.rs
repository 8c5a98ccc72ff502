//! What the tests share: one runtime per test binary and the real `wasbox` binary
//! ([`runtime`]), a small HTTP/1.1 client and a running `wasbox serve` ([`http`]), and a
//! server-sent events client ([`sse`]).

pub mod fuzz;
pub mod http;
pub mod runtime;
pub mod sse;
