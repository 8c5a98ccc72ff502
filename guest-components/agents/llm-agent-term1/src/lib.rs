//! `llm-agent-term1`: an example term agent of term SDK 1.x (world `wasbox:term/agent@1.0.0`).
//!
//! The harness owns the loop: it sends one request per step (the instruction, the last
//! command, its output and exit code, the working directory) and runs the command this
//! agent answers with. The agent keeps its own history between calls: the instance lives as
//! long as the episode.
//!
//! The policy (prompt and reply format) is in `agent-policy`, shared with `llm-agent`.

// The generated bindings pass the response record's fields one by one.
#![allow(clippy::too_many_arguments)]

use std::cell::RefCell;

use agent_policy::{MAX_BAD_REPLIES, Turn, messages, parse_reply};

wit_bindgen::generate!({
    path: "../../../wit/term1",
    world: "agent",
    // `wasbox:llm` is a package of its own: generate its bindings here too.
    generate_all,
});

use wasbox::llm::llm::{self, ChatOptions, Message};

thread_local! {
    static HISTORY: RefCell<Vec<Turn>> = const { RefCell::new(Vec::new()) };
}

struct LlmAgentTerm1;

impl Guest for LlmAgentTerm1 {
    fn setup() -> Result<(), String> {
        Ok(())
    }

    fn solve(request: Request) -> Result<Response, String> {
        HISTORY.with_borrow_mut(|h| {
            if request.step <= 1 {
                h.clear();
            }
            if let Some(command) = request.last_command.clone() {
                h.push(Turn {
                    command,
                    output: request.output.clone().unwrap_or_default(),
                    exit_code: request.exit_code.unwrap_or(0),
                });
            }
        });
        let chat: Vec<Message> = HISTORY
            .with_borrow(|h| messages(&request.instruction, h))
            .into_iter()
            .map(|(role, content)| Message { role, content })
            .collect();
        let options = ChatOptions {
            model: None,
            max_tokens: None,
            temperature: None,
        };
        let mut last_error = String::new();
        for _ in 0..MAX_BAD_REPLIES {
            let reply = llm::chat(&chat, &options).map_err(|e| format!("LLM error: {e}"))?;
            match parse_reply(&reply.content) {
                Ok(d) if d.command.is_some() || d.task_complete => {
                    return Ok(Response {
                        command: d.command,
                        task_complete: d.task_complete,
                        text: None,
                        analysis: None,
                        plan: None,
                        commands: Vec::new(),
                    });
                }
                Ok(_) => last_error = "no command and not complete".into(),
                Err(e) => last_error = e,
            }
            eprintln!("[llm-agent-term1] unusable reply: {last_error}");
        }
        Err(format!(
            "{MAX_BAD_REPLIES} unusable replies in a row (last: {last_error})"
        ))
    }

    fn cleanup() {}
}

export!(LlmAgentTerm1);
