//! `wasbox term stdio`: the term SDK 1.x agent side (`docs/specs/term-agent-stdio-sdk1.md`):
//! one request line in (null fields may be left out), one response line out, flushed. The
//! agent's own output goes to stderr; stdout is the protocol.

use std::io::Write as _;

use anyhow::{Context as _, Result, bail};
use serde_json::{Map, Value, json};
use tokio::io::AsyncBufReadExt as _;
use wasbox_runtime::term::{
    AgentRunner, SolveRequest, SolveResponse, TASK_MOUNT, TaskMonitor, TermVersion,
};

use super::StdioArgs;
use super::agent::{env_for, load, preload_in_background, runtime, stderr_sink, task_sandbox};

/// What the reference agent prints when it cannot go on.
const GIVE_UP: &str = r#"{"command":null,"task_complete":true}"#;

fn say(line: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()?;
    Ok(())
}

/// A request line of SDK 1.x; the null fields may be missing.
pub fn parse_request(line: &str) -> Result<SolveRequest, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("invalid JSON: {e}"))?;
    let obj = value.as_object().ok_or("a request must be a JSON object")?;
    let text = |k: &str| -> Result<Option<String>, String> {
        match obj.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("`{k}` must be a string or null")),
        }
    };
    let instruction = text("instruction")?.ok_or("`instruction` is missing")?;
    let step = match obj.get("step") {
        None | Some(Value::Null) => 1,
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or("`step` must be a positive integer")?,
    };
    let exit_code = match obj.get("exit_code") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .ok_or("`exit_code` must be an integer or null")?,
        ),
    };
    Ok(SolveRequest {
        instruction,
        step,
        last_command: text("last_command")?,
        output: text("output")?,
        exit_code,
        cwd: text("cwd")?.unwrap_or_else(|| TASK_MOUNT.to_string()),
    })
}

/// A response line: `command` and `task_complete` always, `text` and the legacy fields
/// only when the agent set them.
pub fn response_line(r: &SolveResponse) -> String {
    let mut obj = Map::new();
    obj.insert("command".into(), json!(r.command));
    obj.insert("task_complete".into(), json!(r.task_complete));
    let mut optional = |key: &str, v: &Option<String>| {
        if let Some(s) = v.as_ref().filter(|s| !s.is_empty()) {
            obj.insert(key.into(), json!(s));
        }
    };
    optional("text", &r.text);
    optional("analysis", &r.analysis);
    optional("plan", &r.plan);
    if !r.commands.is_empty() {
        obj.insert(
            "commands".into(),
            Value::Array(
                r.commands
                    .iter()
                    .map(|k| match k.duration {
                        Some(d) => json!({"keystrokes": k.keystrokes, "duration": d}),
                        None => json!({"keystrokes": k.keystrokes}),
                    })
                    .collect(),
            ),
        );
    }
    Value::Object(obj).to_string()
}

/// Answers request lines until end of input, completion or an error.
pub async fn main(args: StdioArgs) -> Result<i32> {
    let runtime = runtime()?;
    let sandbox = task_sandbox(&runtime, args.workdir)?;
    let agent = load(&runtime, &args.agent).await?;
    if agent.version() != TermVersion::Term1 {
        bail!(
            "`{}` is a {} agent; `term stdio` needs a term1 agent (use `term serve`)",
            args.agent,
            agent.version().as_str()
        );
    }
    // stdout is the protocol: the agent's own output goes to stderr.
    let mut runner = AgentRunner::new(
        agent,
        env_for(sandbox, stderr_sink(), None),
        TaskMonitor::new(),
    );
    preload_in_background(&runtime);
    if let Err(e) = runner.setup().await {
        eprintln!("[wasbox] agent setup failed: {e}");
        say(GIVE_UP)?;
        return Ok(1);
    }
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await.context("reading stdin")? {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let request = match parse_request(line) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("[wasbox] invalid request: {e}");
                say(GIVE_UP)?;
                runner.cleanup().await;
                return Ok(1);
            }
        };
        match runner.solve(&request).await {
            Ok(response) => {
                say(&response_line(&response))?;
                if response.task_complete {
                    break;
                }
            }
            Err(e) => {
                eprintln!("[wasbox] agent error: {e}");
                say(GIVE_UP)?;
                runner.cleanup().await;
                return Ok(1);
            }
        }
    }
    runner.cleanup().await;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_may_omit_null_fields() {
        let r = parse_request(r#"{"instruction":"do","step":1,"cwd":"/app"}"#).unwrap();
        assert_eq!(r.last_command, None);
        assert_eq!(r.exit_code, None);
        let r = parse_request(
            r#"{"instruction":"do","step":2,"last_command":"ls","output":"a","exit_code":0,"cwd":"/app"}"#,
        )
        .unwrap();
        assert_eq!((r.step, r.exit_code), (2, Some(0)));
        assert!(parse_request("nope").is_err());
        assert!(parse_request("[1]").is_err());
    }

    #[test]
    fn responses_carry_text_only_when_set() {
        let r = SolveResponse {
            command: Some("ls".into()),
            ..SolveResponse::default()
        };
        assert_eq!(
            response_line(&r),
            r#"{"command":"ls","task_complete":false}"#
        );
        let r = SolveResponse {
            task_complete: true,
            text: Some("done".into()),
            ..SolveResponse::default()
        };
        assert_eq!(
            response_line(&r),
            r#"{"command":null,"task_complete":true,"text":"done"}"#
        );
    }
}
