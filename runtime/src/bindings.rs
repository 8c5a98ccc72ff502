//! The one place that calls `bindgen!`: host bindings for the WIT packages of `wit/`.

mod generated {
    wasmtime::component::bindgen!({
        path: "../wit/sandbox",
        world: "process-user",
        imports: { default: async | trappable },
    });
}

pub(crate) use generated::wasbox::sandbox::process;

/// `wasbox:term@2.0.0`, world `agent` (term SDK 2.0).
pub(crate) mod term2 {
    wasmtime::component::bindgen!({
        path: "../wit/term",
        world: "agent",
        imports: { default: async | trappable },
        exports: { default: async },
    });
}

/// `wasbox:term@1.0.0`, world `agent-v1` (term SDK 1.x).
pub(crate) mod term1 {
    wasmtime::component::bindgen!({
        path: "../wit/term-v1",
        world: "agent-v1",
        imports: { default: async | trappable },
        exports: { default: async },
    });
}
