//! How a component instance ended, read in one place for programs and agents alike: an exit
//! code, a deadline or stop (epoch interrupt), a write to a pipe with no reader, a memory
//! limit, or another trap. A shell's exit statuses follow from it.

use wasmtime::Trap;
use wasmtime_wasi::I32Exit;

use crate::io::BrokenPipe;
use crate::limits::{EXIT_SIGPIPE, EXIT_TIMEOUT, EXIT_TRAP};

/// Which memory limit an allocation went over. Carried by the trap that ends the instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryExceeded {
    /// The process's own limit (`Limits::memory_bytes`).
    Process(usize),
    /// The budget all processes of its sandbox share (`Limits::sandbox_memory_bytes`).
    Sandbox(usize),
    /// The budget of every sandbox of the runtime together, held by others: the same
    /// growth can succeed once they give memory back.
    Node(usize),
    /// More than the whole of that budget, which no wait makes room for.
    NodeWhole(usize),
}

impl std::fmt::Display for MemoryExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemoryExceeded::Process(n) => write!(f, "memory limit of {} MiB exceeded", n >> 20),
            MemoryExceeded::Sandbox(n) => {
                write!(f, "sandbox memory budget of {} MiB exceeded", n >> 20)
            }
            MemoryExceeded::Node(n) => {
                write!(f, "the node's memory budget of {} MiB is used up", n >> 20)
            }
            MemoryExceeded::NodeWhole(n) => {
                write!(
                    f,
                    "more than the node's whole memory budget of {} MiB",
                    n >> 20
                )
            }
        }
    }
}

impl std::error::Error for MemoryExceeded {}

/// Whether a trap's message is of a memory access just below address 0, where a program
/// whose shadow stack sits first in its linear memory (as Rust's and C's wasm programs'
/// does) lands when its stack overflows: the address wraps past 4 GiB.
fn below_address_zero(message: &str) -> bool {
    const AT: &str = "memory fault at wasm address 0x";
    message
        .find(AT)
        .map(|i| &message[i + AT.len()..])
        .and_then(|rest| {
            let hex: String = rest.chars().take_while(char::is_ascii_hexdigit).collect();
            u64::from_str_radix(&hex, 16).ok()
        })
        .is_some_and(|addr| (0xffff_0000..0x1_0001_0000).contains(&addr))
}

/// How an instance ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Exit {
    /// It returned (0 for success, 1 for an error) or called `exit` with this code.
    Code(i32),
    /// Its job's deadline passed or the job was stopped.
    Interrupted,
    /// It wrote to a pipe nobody reads any more (as after SIGPIPE).
    BrokenPipe,
    /// An allocation went over a memory limit.
    OutOfMemory(MemoryExceeded),
    /// Any other trap, with its message on one line.
    Trap(String),
}

impl Exit {
    /// The end of a `wasi:cli/run` call.
    pub(crate) fn of_run(result: wasmtime::Result<Result<(), ()>>) -> Exit {
        match result {
            Ok(Ok(())) => Exit::Code(0),
            Ok(Err(())) => Exit::Code(1),
            Err(e) => Exit::of_error(&e),
        }
    }

    /// The end of a call that failed in wasmtime (a trap, `exit`, an interrupt).
    pub(crate) fn of_error(e: &wasmtime::Error) -> Exit {
        if let Some(exit) = e.downcast_ref::<I32Exit>() {
            return Exit::Code(exit.0);
        }
        if let Some(Trap::Interrupt) = e.downcast_ref::<Trap>() {
            return Exit::Interrupted;
        }
        if e.downcast_ref::<BrokenPipe>().is_some() {
            return Exit::BrokenPipe;
        }
        if let Some(Trap::StackOverflow) = e.downcast_ref::<Trap>() {
            return Exit::Trap(
                "maximum call stack size exceeded (the wasm call stack is exhausted)".into(),
            );
        }
        let text = format!("{e:#}").replace('\n', " ");
        if below_address_zero(&text) {
            return Exit::Trap(format!(
                "maximum call stack size exceeded (the program's stack ran below address 0: {text})"
            ));
        }
        for cause in e.chain() {
            if let Some(m) = cause.downcast_ref::<MemoryExceeded>() {
                return Exit::OutOfMemory(*m);
            }
        }
        Exit::Trap(text)
    }

    /// The status a shell reports: the code itself, 124 after a deadline, 141 after a broken
    /// pipe, 134 for a trap (like SIGABRT).
    pub(crate) fn status(&self) -> i32 {
        match self {
            Exit::Code(n) => *n,
            Exit::Interrupted => EXIT_TIMEOUT,
            Exit::BrokenPipe => EXIT_SIGPIPE,
            Exit::OutOfMemory(_) | Exit::Trap(_) => EXIT_TRAP,
        }
    }

    /// Why an instance was ended abnormally (for `PROGRAM: terminated: REASON`), if it was.
    pub(crate) fn reason(&self) -> Option<String> {
        match self {
            Exit::OutOfMemory(m) => Some(m.to_string()),
            Exit::Trap(m) => Some(m.clone()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_a_shell() {
        assert_eq!(Exit::of_run(Ok(Ok(()))).status(), 0);
        assert_eq!(Exit::of_run(Ok(Err(()))).status(), 1);
        let exit = wasmtime::Error::new(I32Exit(42));
        assert_eq!(Exit::of_error(&exit), Exit::Code(42));
        let interrupted = wasmtime::Error::new(Trap::Interrupt);
        assert_eq!(Exit::of_error(&interrupted).status(), 124);
        let pipe = wasmtime::Error::new(BrokenPipe);
        assert_eq!(Exit::of_error(&pipe).status(), 141);
        let oom = wasmtime::Error::new(MemoryExceeded::Process(64 << 20)).context("growing");
        let e = Exit::of_error(&oom);
        assert_eq!(e.status(), 134);
        assert_eq!(e.reason().unwrap(), "memory limit of 64 MiB exceeded");
        let deep = wasmtime::Error::new(Trap::StackOverflow);
        assert_eq!(
            Exit::of_error(&deep).reason().unwrap(),
            "maximum call stack size exceeded (the wasm call stack is exhausted)"
        );
        let overflow = wasmtime::Error::msg(
            "memory fault at wasm address 0xffffffc8 in linear memory of size 0x5e0000",
        );
        assert!(
            Exit::of_error(&overflow)
                .reason()
                .unwrap()
                .starts_with("maximum call stack size exceeded")
        );
        let stray = wasmtime::Error::msg(
            "memory fault at wasm address 0x7fff0000 in linear memory of size 0x5e0000",
        );
        assert!(
            Exit::of_error(&stray)
                .reason()
                .unwrap()
                .starts_with("memory fault")
        );
        let trap = wasmtime::Error::msg("unreachable\nexecuted");
        assert_eq!(
            Exit::of_error(&trap).reason().unwrap(),
            "unreachable executed"
        );
    }
}
