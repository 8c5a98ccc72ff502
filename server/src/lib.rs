//! `wasbox`, the command, as a library: the command line and the front-ends. Each front-end
//! is a thin translation of one wire format to calls of the runtime crate
//! (`wasbox-runtime`): it decodes a request, calls the runtime, and encodes the answer. No
//! sandbox logic lives here. Routers are public so that tests can drive them in process.
//!
//! - [`worker`]: the worker API node over HTTP (`wasbox serve`).
//! - [`term`]: term-challenge agents (term2 over HTTP, term1 over stdio; `wasbox term`).
//! - [`bouvet`]: bouvet's sandbox agent over JSON-RPC (`wasbox bouvet serve`), and its client.
//! - [`sidecar`]: an agent sidecar over HTTP and SSE (`wasbox sidecar serve`).
//! - [`e2b`]: E2B's control plane and envd API over the worker node's sessions, so E2B's
//!   SDKs drive `wasbox serve` unchanged.
//! - [`bench`]: what isolation costs here, side by side (`wasbox bench`).
//! - [`run`]: one job from the command line (`wasbox run`).

mod args;
mod auth;
pub mod bench;
pub mod bouvet;
pub mod cli;
pub mod e2b;
pub mod http;
mod ids;
pub mod logging;
pub mod problem;
mod rfc3339;
pub mod run;
pub mod shutdown;
pub mod sidecar;
pub mod template;
pub mod term;
pub mod volume_cli;
pub mod worker;
