//! `wasbox:sandbox/door`: the process host (`wasbox:sandbox/process`) for a program that
//! cannot import it, through one import of bytes in and bytes out (see the interface's
//! documentation in `wit/sandbox/process.wit`). The scientific python3 reaches `subprocess`
//! and `os.system` this way (its side: `guest-components/python-sci/wasbox_door.py`).
//!
//! Every frame is read as untrusted input: a malformed one, an unknown operation, a handle
//! that is not the caller's (or not of the kind named) are answered with an `io` error, and
//! nothing else happens. A handle is the number of a resource in the calling process's own
//! table, so a process can reach no other's pipes or children.

use base64::Engine as _;
use serde_json::{Value, json};
use wasmtime::component::{Linker, Resource};

use super::HostState;
use super::process::ProcessHost;
use crate::bindings::process as wit;
use crate::bindings::process::HostPipeWriter as _;
use crate::bindings::process::{Host as _, HostChild as _, HostPipeReader as _};

/// The interface's name, as components import it.
pub(crate) const DOOR: &str = "wasbox:sandbox/door@0.2.0";

/// Most bytes one frame may hold (a request; an answer is bounded by what it carries).
const MAX_FRAME: usize = 8 << 20;

pub(crate) fn add_to_linker<E: Send + 'static>(
    linker: &mut Linker<HostState<E>>,
) -> wasmtime::Result<()> {
    linker
        .instance(DOOR)?
        .func_wrap_async("call", |mut store, (request,): (Vec<u8>,)| {
            Box::new(async move {
                let host: &mut HostState<E> = store.data_mut();
                let answer = match answer(&mut host.process, &request).await {
                    Ok(ok) => json!({ "ok": ok }),
                    Err(Refusal(kind, message)) => json!({ "err": [kind, message] }),
                };
                Ok((serde_json::to_vec(&answer).unwrap_or_default(),))
            })
        })
}

/// An error answer: its kind (`not-found`, `limit`, `io`) and message.
struct Refusal(&'static str, String);

impl From<wit::Error> for Refusal {
    fn from(e: wit::Error) -> Self {
        match e {
            wit::Error::NotFound(m) => Refusal("not-found", m),
            wit::Error::Limit(m) => Refusal("limit", m),
            wit::Error::Io(m) => Refusal("io", m),
        }
    }
}

impl From<wasmtime::Error> for Refusal {
    fn from(e: wasmtime::Error) -> Self {
        Refusal("io", format!("{e:#}"))
    }
}

fn bad(why: impl Into<String>) -> Refusal {
    Refusal("io", why.into())
}

/// The field `name` of `frame` as `T`.
fn field<T: serde::de::DeserializeOwned>(frame: &Value, name: &str) -> Result<T, Refusal> {
    let value = frame.get(name).cloned().unwrap_or(Value::Null);
    serde_json::from_value(value).map_err(|e| bad(format!("door: `{name}`: {e}")))
}

/// The handle in `frame[name]`, borrowed (the caller keeps it).
fn borrowed<T: 'static>(frame: &Value, name: &str) -> Result<Resource<T>, Refusal> {
    Ok(Resource::new_borrow(field::<u32>(frame, name)?))
}

/// The handle in `frame[name]`, given to the host (a drop, or an end a child takes).
fn owned<T: 'static>(frame: &Value, name: &str) -> Result<Resource<T>, Refusal> {
    Ok(Resource::new_own(field::<u32>(frame, name)?))
}

fn stdio(frame: &Value) -> Result<wit::Stdio, Refusal> {
    let kind: String = field(frame, "kind")?;
    let path = || field::<String>(frame, "path");
    Ok(match kind.as_str() {
        "inherit" => wit::Stdio::Inherit,
        "inherit-stdout" => wit::Stdio::InheritStdout,
        "inherit-stderr" => wit::Stdio::InheritStderr,
        "null" => wit::Stdio::Null,
        "same-as-stdout" => wit::Stdio::SameAsStdout,
        "pipe-reader" => wit::Stdio::PipeReader(owned(frame, "h")?),
        "pipe-writer" => wit::Stdio::PipeWriter(owned(frame, "h")?),
        "read-file" => wit::Stdio::ReadFile(path()?),
        "write-file" => wit::Stdio::WriteFile(path()?),
        "append-file" => wit::Stdio::AppendFile(path()?),
        other => return Err(bad(format!("door: no stdio kind {other:?}"))),
    })
}

async fn answer(host: &mut ProcessHost, request: &[u8]) -> Result<Value, Refusal> {
    if request.len() > MAX_FRAME {
        return Err(bad(format!("door: a frame is at most {MAX_FRAME} bytes")));
    }
    let frame: Value =
        serde_json::from_slice(request).map_err(|e| bad(format!("door: not JSON: {e}")))?;
    let op: String = field(&frame, "op")?;
    let b64 = &base64::engine::general_purpose::STANDARD;
    Ok(match op.as_str() {
        "pipe" => {
            let (r, w) = host.pipe().await?;
            json!([r.rep(), w.rep()])
        }
        "spawn" => {
            let cmd = wit::Command {
                argv: field(&frame, "argv")?,
                env: field(&frame, "env")?,
                cwd: field(&frame, "cwd")?,
                stdin: stdio(frame.get("stdin").unwrap_or(&Value::Null))?,
                stdout: stdio(frame.get("stdout").unwrap_or(&Value::Null))?,
                stderr: stdio(frame.get("stderr").unwrap_or(&Value::Null))?,
            };
            json!(host.spawn(cmd).await??.rep())
        }
        "ready" | "ready-within" => {
            let handles: Vec<u32> = field(&frame, "readers")?;
            if handles.is_empty() {
                return Err(bad("door: `ready` needs a pipe end"));
            }
            let readers = handles.into_iter().map(Resource::new_borrow).collect();
            if op == "ready" {
                json!(host.ready(readers).await?)
            } else {
                json!(host.ready_within(readers, field(&frame, "millis")?).await?)
            }
        }
        "read" => {
            let data = host
                .read(borrowed(&frame, "h")?, field(&frame, "max")?)
                .await??;
            json!(b64.encode(data))
        }
        "write" => {
            let data: String = field(&frame, "data")?;
            let data = b64
                .decode(data)
                .map_err(|e| bad(format!("door: `data`: {e}")))?;
            host.write(borrowed(&frame, "h")?, data).await??;
            Value::Null
        }
        "dup-reader" => json!(
            wit::HostPipeReader::dup(host, borrowed(&frame, "h")?)
                .await?
                .rep()
        ),
        "dup-writer" => json!(
            wit::HostPipeWriter::dup(host, borrowed(&frame, "h")?)
                .await?
                .rep()
        ),
        "drop-reader" => {
            wit::HostPipeReader::drop(host, owned(&frame, "h")?).await?;
            Value::Null
        }
        "drop-writer" => {
            wit::HostPipeWriter::drop(host, owned(&frame, "h")?).await?;
            Value::Null
        }
        "drop-child" => {
            wit::HostChild::drop(host, owned(&frame, "h")?).await?;
            Value::Null
        }
        "child-id" => json!(host.id(borrowed(&frame, "h")?).await?),
        "wait" => json!(host.wait(borrowed(&frame, "h")?).await?),
        "wait-timeout" => json!(
            host.wait_timeout(borrowed(&frame, "h")?, field(&frame, "millis")?)
                .await?
        ),
        "kill" => {
            host.kill(borrowed(&frame, "h")?, field(&frame, "signal")?)
                .await?;
            Value::Null
        }
        "child-signal" => json!(wit::HostChild::signal(host, borrowed(&frame, "h")?).await?),
        "has-program" => json!(host.has_program(field(&frame, "name")?).await?),
        "self-pid" => json!(host.self_pid().await?),
        "start" => {
            let (argv, env, cwd) = host.start_args();
            json!({ "argv": argv, "env": env, "cwd": cwd })
        }
        "signal-process" => {
            host.signal_process(field(&frame, "pid")?, field(&frame, "signal")?)
                .await??;
            Value::Null
        }
        other => return Err(bad(format!("door: no operation {other:?}"))),
    })
}
