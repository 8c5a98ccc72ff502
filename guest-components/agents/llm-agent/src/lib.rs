//! `llm-agent`: an example term agent of term SDK 2.0 (world `wasbox:term/agent@2.0.0`).
//!
//! How to write an agent, in full: implement the three exports (`setup`, `run`, `cleanup`)
//! and use the imports. `context::shell` runs a command in the task directory and counts as
//! a step; `context::done` marks the task complete; `llm::chat` is the only way out of the
//! sandbox. The host enforces `max_steps` and the global timeout: past them the task fails
//! at the next `shell` call, and a stuck agent is stopped.
//!
//! The policy (prompt and reply format) is in `agent-policy`, shared with `llm-agent-term1`.

use agent_policy::{MAX_BAD_REPLIES, Turn, messages, parse_reply};

wit_bindgen::generate!({
    path: "../../../wit/term2",
    world: "agent",
    // `wasbox:llm` is a package of its own: generate its bindings here too.
    generate_all,
});

use wasbox::llm::llm::{self, ChatOptions, Message};
use wasbox::term::context;

struct LlmAgent;

impl Guest for LlmAgent {
    fn setup() -> Result<(), String> {
        Ok(())
    }

    fn run(task: Task) -> Result<(), String> {
        let mut history: Vec<Turn> = Vec::new();
        let mut bad = 0;
        loop {
            let chat: Vec<Message> = messages(&task.instruction, &history)
                .into_iter()
                .map(|(role, content)| Message { role, content })
                .collect();
            let options = ChatOptions {
                model: None,
                max_tokens: None,
                temperature: None,
            };
            let reply = llm::chat(&chat, &options).map_err(|e| format!("LLM error: {e}"))?;
            let decision = match parse_reply(&reply.content) {
                Ok(d) if d.command.is_some() || d.task_complete => d,
                Ok(_) => {
                    bad += 1;
                    context::log("the model gave no command and did not finish");
                    if bad >= MAX_BAD_REPLIES {
                        return Err(format!("{bad} replies in a row without a command"));
                    }
                    continue;
                }
                Err(e) => {
                    bad += 1;
                    context::log(&format!("unusable reply: {e}"));
                    if bad >= MAX_BAD_REPLIES {
                        return Err(format!("{bad} unusable replies in a row (last: {e})"));
                    }
                    continue;
                }
            };
            bad = 0;
            if let Some(command) = decision.command {
                let r = context::shell(&command, None, None);
                let mut output = r.stdout;
                if !r.stderr.is_empty() {
                    output.push_str(&r.stderr);
                }
                history.push(Turn {
                    command,
                    output,
                    exit_code: r.exit_code,
                });
            }
            if decision.task_complete {
                context::done();
                return Ok(());
            }
        }
    }

    fn cleanup() {}
}

export!(LlmAgent);
