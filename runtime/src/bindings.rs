//! The one place that calls `bindgen!`: host bindings for the `wasbox:sandbox` WIT package.

mod generated {
    wasmtime::component::bindgen!({
        path: "../wit/sandbox",
        world: "process-user",
        imports: { default: async | trappable },
    });
}

pub(crate) use generated::wasbox::sandbox::process;
