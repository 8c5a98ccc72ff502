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
use wasmtime::component::{HasSelf, Linker, Resource, ResourceTable};

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

/// An answer read as the model produces it.
#[async_trait::async_trait]
pub trait ReplyStream: Send {
    /// The next piece, or `None` once the answer is complete.
    async fn next(&mut self) -> Result<Option<String>, ChatError>;
}

/// A whole answer given as one piece.
struct WholeReply(Option<String>);

#[async_trait::async_trait]
impl ReplyStream for WholeReply {
    async fn next(&mut self) -> Result<Option<String>, ChatError> {
        Ok(self.0.take())
    }
}

/// Where an agent's chat calls go.
#[async_trait::async_trait]
pub trait ChatBackend: Send + Sync {
    async fn chat(&self, req: &ChatRequest) -> Result<ChatCompletion, ChatError>;

    /// The answer as it is produced; by default the whole answer as one piece.
    async fn chat_stream(&self, req: &ChatRequest) -> Result<Box<dyn ReplyStream>, ChatError> {
        let c = self.chat(req).await?;
        Ok(Box::new(WholeReply(Some(c.content))))
    }
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

/// A response whose body is still to be read.
struct Answer {
    status: u16,
    body: hyper::body::Incoming,
    /// Ends the connection's task once the body is read or dropped.
    _conn: AbortOnDrop,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Answer {
    /// The whole body as text (at most [`MAX_RESPONSE_BYTES`]).
    async fn text(self) -> Result<String> {
        let limited = http_body_util::Limited::new(self.body, MAX_RESPONSE_BYTES);
        let bytes = limited
            .collect()
            .await
            .map_err(|e| anyhow::anyhow!("reading the answer: {e}"))?
            .to_bytes();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// POSTs JSON over plain HTTP/1.1 with `headers`; the answer's body is read by the caller.
async fn post(url: &str, headers: &[(&str, String)], body: &Value) -> Result<Answer> {
    let uri: hyper::Uri = url.parse().with_context(|| format!("bad URL `{url}`"))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some(other) => bail!("`{other}` URLs are not supported (use http://)"),
        None => bail!("`{url}` has no scheme (use http://host:port)"),
    }
    let host = uri.host().context("the URL has no host")?;
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
    let driver = AbortOnDrop(tokio::spawn(async move {
        let _ = conn.await;
    }));
    let path = uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/")
        .to_string();
    let mut request = hyper::Request::post(path)
        .header(hyper::header::HOST, host_header)
        .header(hyper::header::CONTENT_TYPE, "application/json");
    for (k, v) in headers {
        request = request.header(*k, v.as_str());
    }
    let request = request.body(Full::new(Bytes::from(serde_json::to_vec(body)?)))?;
    let response = sender.send_request(request).await?;
    Ok(Answer {
        status: response.status().as_u16(),
        body: response.into_body(),
        _conn: driver,
    })
}

/// POSTs JSON and returns the status and the body as text.
async fn post_json(url: &str, body: &Value) -> Result<(u16, String)> {
    let answer = post(url, &[("accept", "application/json".into())], body).await?;
    let status = answer.status;
    Ok((status, answer.text().await?))
}

/// No model at all: every call fails with this message (say how to configure one).
pub struct NoModel(pub String);

#[async_trait::async_trait]
impl ChatBackend for NoModel {
    async fn chat(&self, _: &ChatRequest) -> Result<ChatCompletion, ChatError> {
        Err(ChatError::Failed(self.0.clone()))
    }
}

/// An OpenAI-style chat completions endpoint (`POST {url}/chat/completions`, streamed with
/// `"stream": true` as server-sent events), called with a key the host read from its own
/// environment: the agent never holds the key or the URL, and neither appears in an event,
/// a log line or an error the agent sees.
#[derive(Clone)]
pub struct OpenAiClient {
    url: String,
    key: Option<String>,
    default_model: Option<String>,
}

impl std::fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("url", &self.url)
            .field("key", &self.key.as_ref().map(|_| "<set>"))
            .field("default_model", &self.default_model)
            .finish()
    }
}

/// A model name when neither the agent nor the operator names one.
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4o-mini";

impl OpenAiClient {
    /// `url` is the API base (`http://127.0.0.1:8080/v1`); `key` is sent as a bearer token.
    pub fn new(url: impl Into<String>, key: Option<String>, default_model: Option<String>) -> Self {
        OpenAiClient {
            url: url.into().trim_end_matches('/').to_string(),
            key: key.filter(|k| !k.is_empty()),
            default_model,
        }
    }

    fn body(&self, req: &ChatRequest, stream: bool) -> (Value, String) {
        let model = req
            .model
            .clone()
            .or_else(|| self.default_model.clone())
            .unwrap_or_else(|| DEFAULT_OPENAI_MODEL.to_string());
        let mut body = json!({
            "model": model,
            "messages": req.messages.iter().map(|(role, content)| json!({"role": role, "content": content})).collect::<Vec<_>>(),
            "max_tokens": req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            "temperature": req.temperature.unwrap_or(DEFAULT_TEMPERATURE),
        });
        if stream {
            body["stream"] = json!(true);
        }
        (body, model)
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut h = vec![];
        if let Some(k) = &self.key {
            h.push(("authorization", format!("Bearer {k}")));
        }
        h
    }

    /// An error text with the key taken out, should a provider ever echo it.
    fn clean(&self, text: &str) -> String {
        match &self.key {
            Some(k) => text.replace(k.as_str(), "<key>"),
            None => text.to_string(),
        }
    }

    async fn send(&self, req: &ChatRequest, stream: bool) -> Result<(Answer, String), ChatError> {
        let (body, model) = self.body(req, stream);
        let url = format!("{}/chat/completions", self.url);
        let mut headers = self.headers();
        headers.push((
            "accept",
            if stream {
                "text/event-stream"
            } else {
                "application/json"
            }
            .into(),
        ));
        let answer = match tokio::time::timeout(LLM_CALL_TIMEOUT, post(&url, &headers, &body)).await
        {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => {
                return Err(ChatError::Failed(
                    self.clean(&format!("LLM endpoint unreachable: {e:#}")),
                ));
            }
            Err(_) => {
                return Err(ChatError::Failed(format!(
                    "LLM endpoint did not answer within {}s",
                    LLM_CALL_TIMEOUT.as_secs()
                )));
            }
        };
        if !(200..300).contains(&answer.status) {
            let status = answer.status;
            let text = answer.text().await.unwrap_or_default();
            let v: Option<Value> = serde_json::from_str(&text).ok();
            let message = v
                .as_ref()
                .and_then(|v| v.pointer("/error/message").or_else(|| v.get("error")))
                .map(|e| {
                    e.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| e.to_string())
                })
                .unwrap_or_else(|| text.trim().chars().take(500).collect());
            return Err(ChatError::Failed(
                self.clean(&format!("LLM error (HTTP {status}): {message}")),
            ));
        }
        Ok((answer, model))
    }
}

#[async_trait::async_trait]
impl ChatBackend for OpenAiClient {
    async fn chat(&self, req: &ChatRequest) -> Result<ChatCompletion, ChatError> {
        let (answer, model) = self.send(req, false).await?;
        let text = answer
            .text()
            .await
            .map_err(|e| ChatError::Failed(format!("reading the LLM's answer: {e:#}")))?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| ChatError::Failed(format!("the LLM's answer is not JSON: {e}")))?;
        let content = v
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ChatError::Failed("the LLM's answer has no choices[0].message.content".into())
            })?
            .to_string();
        let n = |k: &str| {
            v.pointer(&format!("/usage/{k}"))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        let (prompt, completion) = (n("prompt_tokens"), n("completion_tokens"));
        Ok(ChatCompletion {
            content,
            model: v
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or(model),
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: v
                .pointer("/usage/total_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(prompt + completion),
            cost_usd: 0.0,
        })
    }

    async fn chat_stream(&self, req: &ChatRequest) -> Result<Box<dyn ReplyStream>, ChatError> {
        let (answer, _) = self.send(req, true).await?;
        Ok(Box::new(EventReply {
            answer,
            buffer: Vec::new(),
            pending: std::collections::VecDeque::new(),
            done: false,
            read: 0,
        }))
    }
}

/// Server-sent events of a streamed chat completion: `data: {..."delta":{"content":...}}`
/// lines, then `data: [DONE]`.
struct EventReply {
    answer: Answer,
    buffer: Vec<u8>,
    pending: std::collections::VecDeque<String>,
    done: bool,
    read: usize,
}

impl EventReply {
    /// Takes the complete lines of the buffer.
    fn parse_lines(&mut self) -> Result<(), ChatError> {
        while let Some(i) = self.buffer.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buffer.drain(..=i).collect();
            let line = String::from_utf8_lossy(&line);
            let Some(data) = line.trim_end().strip_prefix("data:") else {
                continue;
            };
            let data = data.trim();
            if data == "[DONE]" {
                self.done = true;
                return Ok(());
            }
            let v: Value = serde_json::from_str(data)
                .map_err(|e| ChatError::Failed(format!("a streamed piece is not JSON: {e}")))?;
            if let Some(piece) = v
                .pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
                && !piece.is_empty()
            {
                self.pending.push_back(piece.to_string());
            }
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl ReplyStream for EventReply {
    async fn next(&mut self) -> Result<Option<String>, ChatError> {
        loop {
            if let Some(piece) = self.pending.pop_front() {
                return Ok(Some(piece));
            }
            if self.done {
                return Ok(None);
            }
            let frame = tokio::time::timeout(LLM_CALL_TIMEOUT, self.answer.body.frame())
                .await
                .map_err(|_| ChatError::Failed("the LLM stopped answering".into()))?;
            match frame {
                None => {
                    self.done = true;
                    self.parse_lines()?;
                }
                Some(Err(e)) => {
                    return Err(ChatError::Failed(format!("reading the LLM's answer: {e}")));
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.read += data.len();
                        if self.read > MAX_RESPONSE_BYTES {
                            return Err(ChatError::Failed("the LLM's answer is too long".into()));
                        }
                        self.buffer.extend_from_slice(&data);
                        self.parse_lines()?;
                    }
                }
            }
        }
    }
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
    /// Replies being streamed, at most [`MAX_STREAMS`] at once.
    streams: ResourceTable,
    /// Set when the backend refused for good (a cost limit): the call ends the agent, and
    /// this is the reason its task fails with.
    pub(crate) fatal: Option<String>,
}

impl LlmHost {
    pub(crate) fn new(backend: Arc<dyn ChatBackend>, on_call: Option<LlmObserver>) -> Self {
        let mut streams = ResourceTable::new();
        streams.set_max_capacity(MAX_STREAMS);
        LlmHost {
            backend,
            on_call,
            streams,
            fatal: None,
        }
    }

    fn tell(&self, call: LlmCall) {
        if let Some(f) = &self.on_call {
            f(&call);
        }
    }
}

/// Streamed replies one agent may read at once.
const MAX_STREAMS: usize = 16;

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

impl LlmHost {
    /// The result of a failed call as the agent sees it; a cost limit ends the agent.
    fn refused<T>(&mut self, e: ChatError) -> wasmtime::Result<Result<T, String>> {
        match e {
            ChatError::CostLimit(m) => {
                self.fatal = Some(m.clone());
                Err(wasmtime::Error::msg(m))
            }
            ChatError::Failed(m) => {
                self.tell(LlmCall {
                    ok: false,
                    detail: m.clone(),
                });
                Ok(Err(m))
            }
        }
    }
}

fn chat_request(messages: Vec<wit::Message>, options: wit::ChatOptions) -> ChatRequest {
    ChatRequest {
        messages: messages.into_iter().map(|m| (m.role, m.content)).collect(),
        model: options.model,
        max_tokens: options.max_tokens,
        temperature: options.temperature,
    }
}

impl wit::HostReplyStream for LlmHost {
    async fn next(
        &mut self,
        stream: Resource<wit::ReplyStream>,
    ) -> wasmtime::Result<Result<Option<String>, String>> {
        let reply = self
            .streams
            .get_mut(&Resource::<Box<dyn ReplyStream>>::new_borrow(stream.rep()))?;
        match reply.next().await {
            Ok(piece) => Ok(Ok(piece)),
            Err(e) => self.refused(e),
        }
    }

    async fn drop(&mut self, stream: Resource<wit::ReplyStream>) -> wasmtime::Result<()> {
        self.streams
            .delete(Resource::<Box<dyn ReplyStream>>::new_own(stream.rep()))?;
        Ok(())
    }
}

impl wit::Host for LlmHost {
    async fn chat_stream(
        &mut self,
        messages: Vec<wit::Message>,
        options: wit::ChatOptions,
    ) -> wasmtime::Result<Result<Resource<wit::ReplyStream>, String>> {
        let request = chat_request(messages, options);
        match self.backend.chat_stream(&request).await {
            Ok(reply) => {
                self.tell(LlmCall {
                    ok: true,
                    detail: "streaming an answer".into(),
                });
                let r = self
                    .streams
                    .push(reply)
                    .map_err(|_| wasmtime::Error::msg("too many streamed replies open"))?;
                Ok(Ok(Resource::new_own(r.rep())))
            }
            Err(e) => self.refused(e),
        }
    }

    async fn chat(
        &mut self,
        messages: Vec<wit::Message>,
        options: wit::ChatOptions,
    ) -> wasmtime::Result<Result<wit::Completion, String>> {
        let request = chat_request(messages, options);
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
            Err(e) => self.refused(e),
        }
    }
}
