//! The host of `wasbox:llm`, the one way an agent of any protocol reaches a model, and the
//! backends a call can go to. [`LlmProxy`] is the term validator's proxy client (what the
//! term SDK's `LLM` class does, done by the host so that the agent never holds a socket):
//! `POST {LLM_PROXY_URL}/llm/proxy` with `{agent_hash, messages, model, max_tokens,
//! temperature, task_id}`, answered by `{success, content, model, usage, cost_usd}`.
//!
//! Every call goes through one pooled client per process ([`client`]): HTTPS with the
//! system's trusted roots (and `SSL_CERT_FILE`), connections kept alive per host, no
//! redirects. Plain HTTP is for loopback; a call that carries an API key is refused over
//! plain HTTP to any other host, so that a key never crosses a network in clear.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use bytes::Bytes;
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
/// How long a connection may take to open (TCP and TLS).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an idle pooled connection is kept.
const POOL_IDLE: Duration = Duration::from_secs(90);

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
        let (prompt, completion, total) = token_counts(&v);
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
            total_tokens: total,
            cost_usd: v.get("cost_usd").and_then(Value::as_f64).unwrap_or(0.0),
        })
    }
}

/// The process's one client for LLM calls, made on first use: pooled, HTTPS with the
/// system's roots, no redirects (a key goes only where the operator said).
fn client() -> Result<&'static reqwest::Client> {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    if let Some(c) = CLIENT.get() {
        return Ok(c);
    }
    // The process's TLS cryptography (ring's); an error only means one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let made = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .pool_idle_timeout(POOL_IDLE)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("wasbox/", env!("CARGO_PKG_VERSION")))
        .build()
        .context("setting up the HTTPS client")?;
    Ok(CLIENT.get_or_init(|| made))
}

/// Whether a URL's host is this machine's loopback (`localhost`, 127.0.0.0/8, `[::1]`).
fn is_loopback(url: &reqwest::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Some(url::Host::Domain(d)) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
        None => false,
    }
}

/// `url` checked: `https`, or `http` where nothing secret goes or the host is loopback.
fn checked_url(url: &str, carries_key: bool) -> Result<reqwest::Url> {
    let parsed = reqwest::Url::parse(url).with_context(|| format!("bad URL `{url}`"))?;
    match parsed.scheme() {
        "https" => {}
        "http" if !carries_key || is_loopback(&parsed) => {}
        "http" => bail!(
            "an API key is never sent over plain HTTP to another host: use https:// (plain \
             http is for loopback)"
        ),
        other => bail!("`{other}` URLs are not supported (use https://, or http:// on loopback)"),
    }
    if parsed.host().is_none() {
        bail!("`{url}` has no host");
    }
    Ok(parsed)
}

/// A response whose body is still to be read.
struct Answer {
    status: u16,
    /// Its body is server-sent events (`text/event-stream`).
    event_stream: bool,
    response: reqwest::Response,
    /// Body bytes read so far.
    read: usize,
}

impl Answer {
    /// The next piece of the body (`None` at its end); past [`MAX_RESPONSE_BYTES`], an error.
    async fn chunk(&mut self) -> Result<Option<Bytes>> {
        let Some(data) = self
            .response
            .chunk()
            .await
            .map_err(|e| anyhow::anyhow!("reading the answer: {}", reason(&e)))?
        else {
            return Ok(None);
        };
        self.read += data.len();
        if self.read > MAX_RESPONSE_BYTES {
            bail!("the answer is longer than {MAX_RESPONSE_BYTES} bytes");
        }
        Ok(Some(data))
    }

    /// The whole body as text (at most [`MAX_RESPONSE_BYTES`]).
    async fn text(mut self) -> Result<String> {
        let mut bytes = Vec::new();
        while let Some(data) = self.chunk().await? {
            bytes.extend_from_slice(&data);
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// A transport error with its causes (`connection refused`, a certificate's problem).
fn reason(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// POSTs JSON with `headers`; the answer's body is read by the caller. `carries_key` says
/// that a header holds a credential (see [`checked_url`]).
async fn post(
    url: &str,
    headers: &[(&str, String)],
    body: &Value,
    carries_key: bool,
) -> Result<Answer> {
    let url = checked_url(url, carries_key)?;
    let mut request = client()?.post(url).json(body);
    for (k, v) in headers {
        request = request.header(*k, v.as_str());
    }
    let response = request
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("{}", reason(&e.without_url())))?;
    let event_stream = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
    Ok(Answer {
        status: response.status().as_u16(),
        event_stream,
        response,
        read: 0,
    })
}

/// POSTs JSON and returns the status and the body as text.
async fn post_json(url: &str, body: &Value) -> Result<(u16, String)> {
    let answer = post(url, &[("accept", "application/json".into())], body, false).await?;
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
        let sent = post(&url, &headers, &body, self.key.is_some());
        let answer = match tokio::time::timeout(LLM_CALL_TIMEOUT, sent).await {
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
        completion(answer, model).await
    }

    async fn chat_stream(&self, req: &ChatRequest) -> Result<Box<dyn ReplyStream>, ChatError> {
        let (answer, model) = self.send(req, true).await?;
        if !answer.event_stream {
            // A server that ignored `"stream": true` answered as a whole.
            let whole = completion(answer, model).await?;
            return Ok(Box::new(WholeReply(Some(whole.content))));
        }
        Ok(Box::new(EventReply {
            answer,
            buffer: Vec::new(),
            pending: std::collections::VecDeque::new(),
            done: false,
            pieces: 0,
        }))
    }
}

/// An answer's `usage` (the proxy's and OpenAI's alike): prompt, completion and total tokens,
/// the total their sum when the answer gives none, 0 for what is missing.
fn token_counts(answer: &Value) -> (u64, u64, u64) {
    let n = |k: &str| {
        answer
            .pointer(&format!("/usage/{k}"))
            .and_then(Value::as_u64)
    };
    let (prompt, completion) = (
        n("prompt_tokens").unwrap_or(0),
        n("completion_tokens").unwrap_or(0),
    );
    (
        prompt,
        completion,
        n("total_tokens").unwrap_or(prompt + completion),
    )
}

/// A whole chat completion (`choices[0].message.content`, `usage`, `model`).
async fn completion(answer: Answer, model: String) -> Result<ChatCompletion, ChatError> {
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
    let (prompt, completion, total) = token_counts(&v);
    Ok(ChatCompletion {
        content,
        model: v
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or(model),
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: total,
        cost_usd: 0.0,
    })
}

/// Server-sent events of a streamed chat completion: `data: {..."delta":{"content":...}}`
/// lines, then `data: [DONE]`. A stream that ends without `[DONE]` keeps what it gave; one
/// that gave nothing is an error, not an empty answer.
struct EventReply {
    answer: Answer,
    buffer: Vec<u8>,
    pending: std::collections::VecDeque<String>,
    done: bool,
    /// Pieces of content read so far.
    pieces: usize,
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
                self.pieces += 1;
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
            let chunk = tokio::time::timeout(LLM_CALL_TIMEOUT, self.answer.chunk())
                .await
                .map_err(|_| ChatError::Failed("the LLM stopped answering".into()))?
                .map_err(|e| ChatError::Failed(format!("reading the LLM's answer: {e:#}")))?;
            match chunk {
                Some(data) => {
                    self.buffer.extend_from_slice(&data);
                    self.parse_lines()?;
                }
                None => {
                    // A last line without its newline still counts.
                    self.buffer.push(b'\n');
                    self.parse_lines()?;
                    if !self.done && self.pieces == 0 {
                        return Err(ChatError::Failed(
                            "the LLM's stream ended without an answer (no content, no [DONE])"
                                .into(),
                        ));
                    }
                    self.done = true;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_carries_a_key_only_to_loopback() {
        for url in [
            "http://127.0.0.1:8080/v1",
            "http://127.9.9.9/v1",
            "http://[::1]:80/v1",
            "http://[::ffff:127.0.0.1]/v1",
            "http://localhost:1/v1",
            "http://LOCALHOST./v1",
            "http://api.localhost/v1",
            "https://api.example.com/v1",
        ] {
            assert!(checked_url(url, true).is_ok(), "{url}");
        }
        for url in [
            "http://api.example.com/v1",
            "http://10.0.0.1/v1",
            "http://[::ffff:10.0.0.1]/v1",
            "http://localhost.example.com/v1",
            "http://127.0.0.1.example.com/v1",
        ] {
            let e = checked_url(url, true).unwrap_err().to_string();
            assert!(e.contains("use https://"), "{url}: {e}");
            // Nothing secret: the term validator's proxy may be anywhere.
            assert!(checked_url(url, false).is_ok(), "{url}");
        }
        for url in ["ftp://127.0.0.1/", "127.0.0.1:80", "unix:/x"] {
            assert!(checked_url(url, false).is_err(), "{url}");
        }
    }
}
