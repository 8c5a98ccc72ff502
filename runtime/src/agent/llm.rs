//! The host of `wasbox:llm`, the one way an agent of any protocol reaches a model, and the
//! backends a call can go to. [`LlmProxy`] is the term validator's proxy client (what the
//! term SDK's `LLM` class does, done by the host so that the agent never holds a socket):
//! `POST {LLM_PROXY_URL}/llm/proxy` with `{agent_hash, messages, model, max_tokens,
//! temperature, task_id}`, answered by `{success, content, model, usage, cost_usd}`.

use std::time::Duration;

use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use wasmtime::component::{HasSelf, Linker};

use crate::bindings::llm::wasbox::llm::llm as wit;
use crate::host::HostState;

/// Defaults of the SDK's `LLM` client when the agent sets none.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
pub const DEFAULT_TEMPERATURE: f64 = 0.3;
/// How long one proxy call may take.
pub const LLM_CALL_TIMEOUT: Duration = Duration::from_secs(300);
/// Largest proxy answer read.
const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// Where the agents' LLM calls go, and who they are billed to.
#[derive(Clone, Debug, Default)]
pub struct LlmProxy {
    /// `http://host:port` (a path prefix is kept); `None`: every call fails saying so.
    pub url: Option<String>,
    /// Sent as `agent_hash` (`TERM_AGENT_HASH`).
    pub agent_hash: String,
    /// Sent as `task_id` (`TERM_TASK_ID`).
    pub task_id: String,
    /// Model used when the agent names none (`LLM_MODEL`).
    pub default_model: Option<String>,
}

impl LlmProxy {
    /// From the host's environment: `LLM_PROXY_URL`, `TERM_AGENT_HASH`, `TERM_TASK_ID`,
    /// `LLM_MODEL`. The agent's environment plays no part.
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        LlmProxy {
            url: var("LLM_PROXY_URL"),
            agent_hash: var("TERM_AGENT_HASH").unwrap_or_default(),
            task_id: var("TERM_TASK_ID").unwrap_or_default(),
            default_model: var("LLM_MODEL"),
        }
    }
}

/// One chat request as the agent made it.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatRequest {
    pub messages: Vec<(String, String)>,
    pub model: Option<String>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f64>,
}

/// The proxy's answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatCompletion {
    pub content: String,
    pub model: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub cost_usd: f64,
}

/// Why a call failed.
#[derive(Clone, Debug, PartialEq)]
pub enum ChatError {
    /// The proxy refused for cost: the task must fail (`Cost limit exceeded: ...`).
    CostLimit(String),
    /// Anything else; the agent sees the message and may go on.
    Failed(String),
}

/// Where an agent's chat calls go.
#[async_trait::async_trait]
pub trait ChatBackend: Send + Sync {
    async fn chat(&self, req: &ChatRequest) -> Result<ChatCompletion, ChatError>;
}

#[async_trait::async_trait]
impl ChatBackend for LlmProxy {
    async fn chat(&self, req: &ChatRequest) -> Result<ChatCompletion, ChatError> {
        let Some(base) = &self.url else {
            return Err(ChatError::Failed(
                "no LLM proxy configured (the host's LLM_PROXY_URL is not set)".into(),
            ));
        };
        let model = req.model.clone().or_else(|| self.default_model.clone());
        let body = json!({
            "agent_hash": self.agent_hash,
            "messages": req.messages.iter().map(|(role, content)| json!({"role": role, "content": content})).collect::<Vec<_>>(),
            "model": model,
            "max_tokens": req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            "temperature": req.temperature.unwrap_or(DEFAULT_TEMPERATURE),
            "task_id": self.task_id,
        });
        let url = format!("{}/llm/proxy", base.trim_end_matches('/'));
        let (status, text) = match tokio::time::timeout(LLM_CALL_TIMEOUT, post_json(&url, &body))
            .await
        {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return Err(ChatError::Failed(format!("LLM proxy unreachable: {e:#}"))),
            Err(_) => {
                return Err(ChatError::Failed(format!(
                    "LLM proxy did not answer within {}s",
                    LLM_CALL_TIMEOUT.as_secs()
                )));
            }
        };
        let value: Option<Value> = serde_json::from_str(&text).ok();
        let message = value
            .as_ref()
            .and_then(|v| v.get("error"))
            .map(|e| match e {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .unwrap_or_else(|| text.trim().to_string());
        if text.contains("cost_limit_exceeded") {
            return Err(ChatError::CostLimit(format!(
                "Cost limit exceeded: {message}"
            )));
        }
        let Some(v) = value.filter(|_| (200..300).contains(&status)) else {
            return Err(ChatError::Failed(format!(
                "LLM proxy error (HTTP {status}): {message}"
            )));
        };
        if v.get("success").and_then(Value::as_bool) != Some(true) {
            return Err(ChatError::Failed(format!("LLM proxy error: {message}")));
        }
        let usage = v.get("usage").cloned().unwrap_or(Value::Null);
        let n = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
        let (prompt, completion) = (n("prompt_tokens"), n("completion_tokens"));
        Ok(ChatCompletion {
            content: v
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            model: v
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or(model)
                .unwrap_or_default(),
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: usage
                .get("total_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(prompt + completion),
            cost_usd: v.get("cost_usd").and_then(Value::as_f64).unwrap_or(0.0),
        })
    }
}

/// POSTs JSON over plain HTTP/1.1 and returns the status and the body as text.
async fn post_json(url: &str, body: &Value) -> Result<(u16, String)> {
    let uri: hyper::Uri = url.parse().with_context(|| format!("bad URL `{url}`"))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some(other) => bail!("`{other}` proxy URLs are not supported (use http://)"),
        None => bail!("`{url}` has no scheme (use http://host:port)"),
    }
    let host = uri.host().context("the proxy URL has no host")?;
    let port = uri.port_u16().unwrap_or(80);
    let host_header = match uri.port_u16() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    let connect_host = host.trim_start_matches('[').trim_end_matches(']');
    let stream = tokio::net::TcpStream::connect((connect_host, port))
        .await
        .with_context(|| format!("connecting to {host_header}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    let path = uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/")
        .to_string();
    let request = hyper::Request::post(path)
        .header(hyper::header::HOST, host_header)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(hyper::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(body)?)))?;
    let response = sender.send_request(request).await?;
    let status = response.status().as_u16();
    let limited = http_body_util::Limited::new(response.into_body(), MAX_RESPONSE_BYTES);
    let bytes = limited
        .collect()
        .await
        .map_err(|e| anyhow::anyhow!("reading the answer: {e}"))?
        .to_bytes();
    driver.abort();
    Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
}

/// What an LLM call came to, as the host reports it (never the key or the URL).
#[derive(Clone, Debug)]
pub struct LlmCall {
    pub ok: bool,
    /// `model: N tokens, $cost`, or the error.
    pub detail: String,
}

/// Told about every LLM call an agent makes.
pub type LlmObserver = Arc<dyn Fn(&LlmCall) + Send + Sync>;

/// The host side of `wasbox:llm`, held by each agent protocol's store data.
pub(crate) struct LlmHost {
    backend: Arc<dyn ChatBackend>,
    on_call: Option<LlmObserver>,
    /// Set when the backend refused for good (a cost limit): the call ends the agent, and
    /// this is the reason its task fails with.
    pub(crate) fatal: Option<String>,
}

impl LlmHost {
    pub(crate) fn new(backend: Arc<dyn ChatBackend>, on_call: Option<LlmObserver>) -> Self {
        LlmHost {
            backend,
            on_call,
            fatal: None,
        }
    }

    fn tell(&self, call: LlmCall) {
        if let Some(f) = &self.on_call {
            f(&call);
        }
    }
}

/// Store data of a protocol whose world imports `wasbox:llm`.
pub(crate) trait HasLlm {
    fn llm(&mut self) -> &mut LlmHost;
}

/// Adds `wasbox:llm/llm` to a protocol's linker.
pub(crate) fn add_to_linker<E: HasLlm + Send + 'static>(
    linker: &mut Linker<HostState<E>>,
) -> wasmtime::Result<()> {
    wit::add_to_linker::<HostState<E>, HasSelf<LlmHost>>(linker, |s| s.ext.llm())
}

impl wit::Host for LlmHost {
    async fn chat(
        &mut self,
        messages: Vec<wit::Message>,
        options: wit::ChatOptions,
    ) -> wasmtime::Result<Result<wit::Completion, String>> {
        let request = ChatRequest {
            messages: messages.into_iter().map(|m| (m.role, m.content)).collect(),
            model: options.model,
            max_tokens: options.max_tokens,
            temperature: options.temperature,
        };
        match self.backend.chat(&request).await {
            Ok(c) => {
                self.tell(LlmCall {
                    ok: true,
                    detail: format!("{}: {} tokens, ${:.4}", c.model, c.total_tokens, c.cost_usd),
                });
                Ok(Ok(wit::Completion {
                    content: c.content,
                    model: c.model,
                    usage: wit::Usage {
                        prompt_tokens: c.prompt_tokens,
                        completion_tokens: c.completion_tokens,
                        total_tokens: c.total_tokens,
                    },
                    cost_usd: c.cost_usd,
                }))
            }
            Err(ChatError::CostLimit(m)) => {
                self.fatal = Some(m.clone());
                Err(wasmtime::Error::msg(m))
            }
            Err(ChatError::Failed(m)) => {
                self.tell(LlmCall {
                    ok: false,
                    detail: m.clone(),
                });
                Ok(Err(m))
            }
        }
    }
}
