//! The policy both example agents share (SDK 2.0 `llm-agent` and term SDK 1.x `llm-agent-term1`):
//! send the instruction and the recent history to the LLM, read its reply as
//! `{"command": string|null, "task_complete": bool}`, run the command, stop when the task is
//! complete. Nothing here knows about WIT; each agent crate wires it to its world.

/// What the model is told about the protocol.
pub const SYSTEM_PROMPT: &str = "\
You are an agent solving a task in a Linux shell. The working directory is the task \
directory. Each turn, answer with one JSON object and nothing else:
{\"command\": \"<one shell command to run next, or null>\", \"task_complete\": <true|false>}
You will see each command's output and exit code. Set task_complete to true once the task \
is done (you may give a last command with it).";

/// Commands shown to the model (the most recent ones).
pub const HISTORY_TURNS: usize = 10;
/// Output characters shown per command (the end of the output is kept).
pub const OUTPUT_CHARS: usize = 2000;
/// Unusable replies in a row before the agent gives up.
pub const MAX_BAD_REPLIES: u32 = 3;

/// One command the agent ran and what came of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Turn {
    pub command: String,
    pub output: String,
    pub exit_code: i32,
}

/// The chat to send: (role, content) pairs.
pub fn messages(instruction: &str, history: &[Turn]) -> Vec<(String, String)> {
    let mut user = format!("Task:\n{instruction}\n");
    if history.is_empty() {
        user.push_str("\nNo command has run yet.\n");
    } else {
        let skip = history.len().saturating_sub(HISTORY_TURNS);
        user.push_str("\nCommands so far (oldest first):\n");
        for (i, t) in history.iter().enumerate().skip(skip) {
            user.push_str(&format!(
                "\n[{}] $ {}\nexit code: {}\n{}\n",
                i + 1,
                t.command,
                t.exit_code,
                tail(&t.output, OUTPUT_CHARS)
            ));
        }
    }
    user.push_str("\nReply with the JSON object only.");
    vec![
        ("system".to_string(), SYSTEM_PROMPT.to_string()),
        ("user".to_string(), user),
    ]
}

/// The last `n` characters of `s`, marked when cut.
fn tail(s: &str, n: usize) -> String {
    let count = s.chars().count();
    if count <= n {
        return s.to_string();
    }
    let cut: String = s.chars().skip(count - n).collect();
    format!("[... {} characters cut]\n{cut}", count - n)
}

/// What the model decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The command to run next, if any (never empty).
    pub command: Option<String>,
    pub task_complete: bool,
}

/// Reads the model's reply: the first balanced `{...}` in it (the model may wrap it in
/// prose or a code fence), as JSON with `command` and `task_complete`.
pub fn parse_reply(reply: &str) -> Result<Decision, String> {
    let object = first_object(reply).ok_or("the reply has no JSON object")?;
    let value: serde_json::Value =
        serde_json::from_str(object).map_err(|e| format!("the reply's object is not JSON: {e}"))?;
    let command = match value.get("command") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) if s.trim().is_empty() => None,
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        Some(other) => return Err(format!("`command` must be a string or null, not {other}")),
    };
    let task_complete = match value.get("task_complete") {
        None | Some(serde_json::Value::Null) => false,
        Some(serde_json::Value::Bool(b)) => *b,
        Some(other) => {
            return Err(format!(
                "`task_complete` must be true or false, not {other}"
            ));
        }
    };
    Ok(Decision {
        command,
        task_complete,
    })
}

/// The first balanced `{...}` of `text`, braces inside JSON strings not counted.
pub fn first_object(text: &str) -> Option<&str> {
    let start = text.find('{')?;
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in text[start..].char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&text[start..start + i + 1]);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_wrapped_in_prose_are_read() {
        let d = parse_reply(
            "Sure! ```json\n{\"command\": \"echo '}'\", \"task_complete\": false}\n``` {x}",
        )
        .unwrap();
        assert_eq!(d.command.as_deref(), Some("echo '}'"));
        assert!(!d.task_complete);
        let d = parse_reply("{\"command\": null, \"task_complete\": true}").unwrap();
        assert_eq!(
            d,
            Decision {
                command: None,
                task_complete: true
            }
        );
        assert!(parse_reply("no json here").is_err());
        assert!(parse_reply("{\"command\": 3}").is_err());
    }
}
