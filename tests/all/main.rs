//! End-to-end tests: the real `wasbox` binary and the real runtime with the real guest
//! programs of the built-in image. Nothing is mocked.

mod architecture;
mod cli;
mod containment;
mod coreutils;
mod corpus;
mod harness;
mod http;
mod limits;
mod node;
mod pipes;
mod python;
mod shell;
mod term;
mod worker;
