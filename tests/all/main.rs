//! End-to-end tests: the real `wasbox` binary and the real runtime with the real guest
//! programs of the built-in image. Nothing is mocked. Handler logic is also driven in
//! process through the front-ends' routers (`routers`).

mod architecture;
mod bench;
mod bouvet;
mod cache;
mod capacity;
mod cli;
mod containment;
mod coreutils;
mod corpus;
mod datasci;
mod deploy;
mod e2b;
mod egress;
mod fleet;
mod fuzz;
mod host_files;
mod limits;
mod malformed;
mod node;
mod openapi;
mod orchestrator;
mod pipes;
mod python;
mod routers;
mod shell;
mod sidecar;
mod snapshot;
mod soak;
mod support;
mod telemetry;
mod template;
mod term;
mod tools;
mod volume;
mod worker;
