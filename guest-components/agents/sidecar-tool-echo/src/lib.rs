//! `tool-echo`: an example agent template of the sidecar (world `wasbox:sidecar/agent`).
//! It says what it will do (`run.thought`), asks the host to run the first tool of the
//! request's inventory with `{"input": <the last user message>}` (`run.tool_call`, then it
//! waits for the host's result), and completes with a response that includes the tool's
//! stdout. The smallest agent that exercises a whole tool round trip.

wit_bindgen::generate!({
    path: "../../../wit/sidecar",
    world: "agent",
    // `wasbox:llm` is a package of its own: generate its bindings here too.
    generate_all,
});

use wasbox::sidecar::host;
use wasbox::sidecar::types::ToolStatus;

struct ToolEcho;

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn chinese(locale: &str) -> bool {
    locale.to_ascii_lowercase().starts_with("zh")
}

impl Guest for ToolEcho {
    fn describe(locale: String) -> Template {
        let (name, description) = if chinese(&locale) {
            (
                "工具回显",
                "用最后一条用户消息调用第一个可用工具，并返回工具的输出。",
            )
        } else {
            (
                "Tool echo",
                "Runs the first tool the host offers with the last user message, and answers with what the tool printed.",
            )
        };
        Template {
            id: "tool-echo".into(),
            name: name.into(),
            description: description.into(),
            version: "1.0.0".into(),
            parameters: Vec::new(),
            tools: Vec::new(),
        }
    }

    fn run(request: Request) -> Result<Completion, Failure> {
        let Some(tool) = request.tool_inventory.first() else {
            return Err(Failure {
                error_code: "NO_TOOL".into(),
                message: "the request offers no tool to run".into(),
                details_json: None,
            });
        };
        let input = request
            .conversation
            .iter()
            .rev()
            .find(|m| m.role == "user")
            .map(|m| m.content.clone())
            .or(request.prompt.clone())
            .unwrap_or_default();
        host::thought(&format!("I will run `{}` with the last message.", tool.id));
        let arguments = format!("{{\"input\":{}}}", json_string(&input));
        let result =
            host::call_tool(&tool.id, &arguments, tool.timeout_sec).map_err(|e| Failure {
                error_code: "TOOL_REFUSED".into(),
                message: e,
                details_json: None,
            })?;
        host::debug(
            &format!("the tool ended after {} ms", result.duration_ms),
            "info",
        );
        let status = match result.status {
            ToolStatus::Ok => "ok",
            ToolStatus::Error => "error",
            ToolStatus::Timeout => "timeout",
        };
        let exit = result
            .exit_code
            .map_or("null".to_string(), |c| c.to_string());
        Ok(Completion {
            response: format!("`{}` ({status}) said: {}", tool.id, result.stdout),
            metadata_json: Some(format!(
                "{{\"toolId\":{},\"toolStatus\":\"{status}\",\"exitCode\":{exit}}}",
                json_string(&tool.id)
            )),
        })
    }
}

export!(ToolEcho);
