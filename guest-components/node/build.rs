//! Two things for the `node` program:
//!
//! - QuickJS recurses on the C stack: its wasm frames on the host's stack (see the runtime's
//!   engine configuration), and its address-taken locals on the program's shadow stack in
//!   linear memory, 1 MiB by default, which deep recursion through built-ins (`map`, `sort`,
//!   `replace` with a function) outgrows before the host's stack ends: 4 MiB. (QuickJS has
//!   no stack check of its own on WASI; a recursion without end ends the program with
//!   "maximum call stack size exceeded".)
//! - The prelude (`src/prelude.js`, some 1,700 lines) is compiled to QuickJS bytecode here,
//!   by the same QuickJS built for the build machine, so that no run parses it: parsing it
//!   was most of `node -e 1`. The bytecode format is QuickJS's own and the same on every
//!   target; main.rs falls back to the source if a run cannot read it.
use std::path::PathBuf;

fn main() {
    println!("cargo:rustc-link-arg-bins=-zstack-size=4194304");
    println!("cargo:rerun-if-changed=src/prelude.js");
    let source = std::fs::read_to_string("src/prelude.js").expect("reading src/prelude.js");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("prelude.qjsbc");
    std::fs::write(&out, compile(&source, c"prelude.js")).expect("writing the bytecode");
}

/// The bytecode of `source` as a global script.
fn compile(source: &str, name: &std::ffi::CStr) -> Vec<u8> {
    use rquickjs::qjs;
    let rt = rquickjs::Runtime::new().expect("a QuickJS runtime");
    let context = rquickjs::Context::full(&rt).expect("a QuickJS context");
    context.with(|ctx| {
        let raw = ctx.as_raw().as_ptr();
        let text = std::ffi::CString::new(source).expect("the prelude has no NUL");
        // SAFETY: `raw` is the live context of this closure; every value made here is freed
        // here, and the buffer QuickJS returns is copied before it is freed.
        unsafe {
            let f = qjs::JS_Eval(
                raw,
                text.as_ptr(),
                source.len() as _,
                name.as_ptr(),
                (qjs::JS_EVAL_TYPE_GLOBAL | qjs::JS_EVAL_FLAG_COMPILE_ONLY) as i32,
            );
            if qjs::JS_IsException(f) {
                let e = ctx.catch();
                panic!("the prelude does not compile: {e:?}");
            }
            let mut size = 0;
            let buf = qjs::JS_WriteObject(raw, &mut size, f, qjs::JS_WRITE_OBJ_BYTECODE as i32);
            assert!(
                !buf.is_null(),
                "QuickJS could not write the prelude's bytecode"
            );
            let bytes = std::slice::from_raw_parts(buf, size as usize).to_vec();
            qjs::js_free(raw, buf.cast());
            qjs::JS_FreeValue(raw, f);
            bytes
        }
    })
}
