//! The one place that calls `bindgen!`: host bindings for the WIT packages of `wit/`. Each
//! world's imports are implemented by the module that hosts it; `wasbox:llm` is generated
//! once and shared by every agent world.

mod generated {
    wasmtime::component::bindgen!({
        path: "../wit/sandbox",
        world: "process-user",
        imports: { default: async | trappable },
    });
}

/// `wasbox:sandbox/process`: how a process starts others (imported by the shell).
pub(crate) use generated::wasbox::sandbox::process;

/// `wasbox:sandbox/tls`: TLS client connections made by the host (imported by python3).
pub(crate) use generated::wasbox::sandbox::tls;

/// `wasbox:llm@1.0.0`: chat completions served by the host.
pub(crate) mod llm {
    wasmtime::component::bindgen!({
        path: "../wit/llm",
        world: "imports",
        imports: { default: async | trappable },
    });
}

/// `wasbox:term@2.0.0`, world `agent` (term SDK 2.0).
pub(crate) mod term2 {
    wasmtime::component::bindgen!({
        path: "../wit/term2",
        world: "agent",
        imports: { default: async | trappable },
        exports: { default: async },
        with: { "wasbox:llm/llm": super::llm::wasbox::llm::llm },
    });
}

/// `wasbox:term@1.0.0`, world `agent` (term SDK 1.x).
pub(crate) mod term1 {
    wasmtime::component::bindgen!({
        path: "../wit/term1",
        world: "agent",
        imports: { default: async | trappable },
        exports: { default: async },
        with: { "wasbox:llm/llm": super::llm::wasbox::llm::llm },
    });
}

/// `wasbox:bouvet@0.1.0`, world `agent` (bouvet's sandbox agent).
pub(crate) mod bouvet {
    wasmtime::component::bindgen!({
        path: "../wit/bouvet",
        world: "agent",
        imports: { default: async | trappable },
        exports: { default: async },
        with: { "wasbox:sandbox/process": super::generated::wasbox::sandbox::process },
    });
}

/// `wasbox:sidecar@1.0.0`, world `agent` (SnapDescribe's agent sidecar).
pub(crate) mod sidecar {
    wasmtime::component::bindgen!({
        path: "../wit/sidecar",
        world: "agent",
        imports: { default: async | trappable },
        exports: { default: async },
        with: { "wasbox:llm/llm": super::llm::wasbox::llm::llm },
    });
}
