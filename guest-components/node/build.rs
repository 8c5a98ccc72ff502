//! QuickJS recurses on the C stack: its wasm frames on the host's stack (see the runtime's
//! engine configuration), and its address-taken locals on the program's shadow stack in
//! linear memory, 1 MiB by default, which deep recursion through built-ins (`map`, `sort`,
//! `replace` with a function) outgrows before the host's stack ends: 4 MiB. (QuickJS has no
//! stack check of its own on WASI; a recursion without end ends the program with "maximum
//! call stack size exceeded".)
fn main() {
    println!("cargo:rustc-link-arg-bins=-zstack-size=4194304");
}
