//! The JSON-RPC 2.0 lines of bouvet's agent protocol (`docs/specs/bouvet-agent-client-vsock.md`
//! and the bouvet section of `docs/specs/COMPAT-NOTES.md`): one request line in, one response
//! line out, with the reference agent's shapes, codes and messages. Each method is one call
//! of the agent component.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use wasbox_runtime::agent::bouvet::{
    BouvetInstance, INVALID_PARAMS, METHOD_NOT_FOUND, PARSE_ERROR, RpcError,
};

/// A request line. `jsonrpc` must be present (its value is not checked) and `id` a
/// non-negative integer, as the reference requires; anything else is a parse error.
#[derive(Debug, Deserialize)]
pub struct Request {
    #[allow(dead_code)]
    pub jsonrpc: String,
    pub id: u64,
    pub method: String,
    #[serde(default)]
    pub params: Value,
}

/// A response line: `result` on success, `error` (and no `result`) on failure.
#[derive(Debug, Serialize)]
pub struct Response {
    pub jsonrpc: &'static str,
    pub id: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorObject>,
}

#[derive(Debug, Serialize)]
pub struct ErrorObject {
    pub code: i32,
    pub message: String,
}

impl Response {
    pub fn success(id: u64, result: Value) -> Self {
        Response {
            jsonrpc: "2.0",
            id,
            result: Some(result),
            error: None,
        }
    }

    pub fn error(id: u64, e: RpcError) -> Self {
        Response {
            jsonrpc: "2.0",
            id,
            result: None,
            error: Some(ErrorObject {
                code: e.code,
                message: e.message,
            }),
        }
    }

    /// The line to send (without its newline).
    pub fn line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| {
            r#"{"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"cannot encode the response"}}"#
                .to_string()
        })
    }
}

// The parameter types carry the reference's names: serde's messages ("invalid type: null,
// expected struct ExecParams") are then the reference's too.
#[derive(Deserialize)]
struct ExecParams {
    cmd: String,
}

#[derive(Deserialize)]
struct ExecCodeParams {
    lang: String,
    code: String,
}

#[derive(Deserialize)]
struct ReadFileParams {
    path: String,
}

#[derive(Deserialize)]
struct WriteFileParams {
    path: String,
    content: String,
}

#[derive(Deserialize)]
struct ListDirParams {
    path: String,
}

// Results, as structs so that fields keep the reference's order.
#[derive(Serialize)]
struct ExecResultWire {
    exit_code: i32,
    stdout: String,
    stderr: String,
}

#[derive(Serialize)]
struct EntryWire {
    name: String,
    is_dir: bool,
    size: u64,
}

fn to_value(v: impl Serialize) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn exec_result(r: wasbox_runtime::agent::bouvet::ExecResult) -> Value {
    to_value(ExecResultWire {
        exit_code: r.exit_code,
        stdout: r.stdout,
        stderr: r.stderr,
    })
}

fn params<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, RpcError> {
    serde_json::from_value(value)
        .map_err(|e| RpcError::new(INVALID_PARAMS, format!("invalid params: {e}")))
}

/// A parse error, answered with id 0 as the reference does.
pub fn parse_error(detail: impl std::fmt::Display) -> Response {
    Response::error(
        0,
        RpcError::new(PARSE_ERROR, format!("parse error: {detail}")),
    )
}

/// Answers one request line (already trimmed, not blank).
pub async fn answer(instance: &mut BouvetInstance, line: &str) -> Response {
    let req: Request = match serde_json::from_str(line) {
        Ok(r) => r,
        Err(e) => return parse_error(e),
    };
    let id = req.id;
    match dispatch(instance, req).await {
        Ok(result) => Response::success(id, result),
        Err(e) => Response::error(id, e),
    }
}

async fn dispatch(instance: &mut BouvetInstance, req: Request) -> Result<Value, RpcError> {
    match req.method.as_str() {
        "ping" => {
            instance.ping().await?;
            Ok(json!({"pong": true}))
        }
        "exec" => {
            let p: ExecParams = params(req.params)?;
            Ok(exec_result(instance.exec(&p.cmd).await?))
        }
        "exec_code" => {
            let p: ExecCodeParams = params(req.params)?;
            Ok(exec_result(instance.exec_code(&p.lang, &p.code).await?))
        }
        "read_file" => {
            let p: ReadFileParams = params(req.params)?;
            Ok(json!({"content": instance.read_file(&p.path).await?}))
        }
        "write_file" => {
            let p: WriteFileParams = params(req.params)?;
            Ok(json!({"success": instance.write_file(&p.path, &p.content).await?}))
        }
        "list_dir" => {
            let p: ListDirParams = params(req.params)?;
            let entries: Vec<EntryWire> = instance
                .list_dir(&p.path)
                .await?
                .into_iter()
                .map(|e| EntryWire {
                    name: e.name,
                    is_dir: e.is_dir,
                    size: e.size,
                })
                .collect();
            Ok(json!({ "entries": to_value(entries) }))
        }
        other => Err(RpcError::new(
            METHOD_NOT_FOUND,
            format!("method not found: {other}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_parsed_like_the_reference() {
        let ok = |l: &str| serde_json::from_str::<Request>(l).is_ok();
        assert!(ok(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#));
        assert!(ok(r#"{"jsonrpc":"1.0","id":7,"method":"x","params":[1]}"#));
        assert!(!ok(r#"{"id":1,"method":"ping"}"#), "jsonrpc is required");
        assert!(
            !ok(r#"{"jsonrpc":"2.0","method":"ping"}"#),
            "id is required"
        );
        assert!(!ok(r#"{"jsonrpc":"2.0","id":"1","method":"ping"}"#));
        assert!(!ok(r#"{"jsonrpc":"2.0","id":-1,"method":"ping"}"#));
        assert!(
            !ok(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#),
            "no batches"
        );
        let line = parse_error("x").line();
        assert_eq!(
            line,
            r#"{"jsonrpc":"2.0","id":0,"error":{"code":-32700,"message":"parse error: x"}}"#
        );
        let line = Response::success(3, json!({"pong": true})).line();
        assert_eq!(line, r#"{"jsonrpc":"2.0","id":3,"result":{"pong":true}}"#);
    }

    #[test]
    fn bad_params_name_the_reference_types() {
        let e = params::<ExecParams>(Value::Null).err().unwrap();
        assert_eq!(e.code, -32602);
        assert_eq!(
            e.message,
            "invalid params: invalid type: null, expected struct ExecParams"
        );
        let e = params::<WriteFileParams>(json!({"path": "/x"}))
            .err()
            .unwrap();
        assert_eq!(e.message, "invalid params: missing field `content`");
    }
}
