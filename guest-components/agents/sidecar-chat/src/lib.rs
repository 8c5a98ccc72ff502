//! `chat`: an example agent template of the sidecar (world `wasbox:sidecar/agent`). It
//! sends the conversation to the model through the host's `wasbox:llm` (the host holds the
//! key), relays the answer as it streams in as `run.thought` events, and completes with the
//! whole answer.

wit_bindgen::generate!({
    path: "../../../wit/sidecar",
    world: "agent",
    // `wasbox:llm` is a package of its own: generate its bindings here too.
    generate_all,
});

use wasbox::llm::llm::{self, ChatOptions, Message as LlmMessage};
use wasbox::sidecar::host;
use wasbox::sidecar::types::Parameter;

struct Chat;

fn chinese(locale: &str) -> bool {
    locale.to_ascii_lowercase().starts_with("zh")
}

fn llm_failure(message: String) -> Failure {
    Failure {
        error_code: "LLM_ERROR".into(),
        message,
        details_json: None,
    }
}

impl Guest for Chat {
    fn describe(locale: String) -> Template {
        let (name, description, model) = if chinese(&locale) {
            (
                "对话",
                "把对话发给模型，边生成边展示，并返回模型的回答。",
                "模型名称（默认由宿主决定）",
            )
        } else {
            (
                "Chat",
                "Sends the conversation to the model, shows the answer as it is written, and completes with it.",
                "The model to use (the host's default when absent)",
            )
        };
        Template {
            id: "chat".into(),
            name: name.into(),
            description: description.into(),
            version: "1.0.0".into(),
            parameters: vec![Parameter {
                name: "model".into(),
                kind: "string".into(),
                description: model.into(),
                required: false,
                default_json: None,
            }],
            tools: Vec::new(),
        }
    }

    fn run(request: Request) -> Result<Completion, Failure> {
        let mut messages: Vec<LlmMessage> = request
            .conversation
            .iter()
            .map(|m| LlmMessage {
                role: m.role.clone(),
                content: m.content.clone(),
            })
            .collect();
        if let Some(prompt) = request.prompt.as_ref().filter(|p| !p.is_empty()) {
            messages.push(LlmMessage {
                role: "user".into(),
                content: prompt.clone(),
            });
        }
        if messages.is_empty() {
            return Err(Failure {
                error_code: "EMPTY_CONVERSATION".into(),
                message: "there is nothing to answer: the conversation is empty".into(),
                details_json: None,
            });
        }
        let options = ChatOptions {
            model: None,
            max_tokens: None,
            temperature: request.constraints.temperature,
        };
        let stream = llm::chat_stream(&messages, &options).map_err(llm_failure)?;
        let mut answer = String::new();
        while let Some(piece) = stream.next().map_err(llm_failure)? {
            host::thought(&piece);
            answer.push_str(&piece);
        }
        Ok(Completion {
            response: answer,
            metadata_json: None,
        })
    }
}

export!(Chat);
