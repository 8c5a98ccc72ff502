//! The host side of bouvet's agent protocol: an `AgentClient` with the documented API
//! (`docs/specs/bouvet-agent-client-vsock.md`), for platforms that embed wasbox and talk to
//! `wasbox bouvet serve` (or to bouvet's own agent in a VM) over a Unix socket.
//!
//! Beyond the reference: every response's id is checked against its request. An answer
//! that arrives after its call timed out (with a smaller id) is skipped instead of being
//! taken for the next call's, so one slow command cannot shift every later answer.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter, ReadHalf, WriteHalf};
use tokio::net::UnixStream;

/// The vsock port the guest agent listens on (sent in the handshake).
pub const GUEST_PORT: u32 = 52;
/// How long `connect` keeps trying, in all.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Between two connection attempts.
pub const RETRY_INTERVAL: Duration = Duration::from_millis(100);
/// How long one call waits for its answer.
pub const RPC_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a call failed, as the reference client reports it.
#[derive(Debug)]
pub enum ClientError {
    /// The socket could not be connected, or the handshake failed.
    Connection(String),
    /// The agent was not reachable within [`CONNECT_TIMEOUT`].
    AgentTimeout(Duration),
    /// The agent answered with an error, or no answer came in time (`code` -1).
    Rpc {
        code: i32,
        message: String,
    },
    Json(serde_json::Error),
    Io(std::io::Error),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Connection(m) => write!(f, "connection failed: {m}"),
            ClientError::AgentTimeout(d) => write!(f, "agent timeout after {d:?}"),
            ClientError::Rpc { code, message } => write!(f, "RPC error {code}: {message}"),
            ClientError::Json(e) => write!(f, "JSON error: {e}"),
            ClientError::Io(e) => write!(f, "I/O error: {e}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<serde_json::Error> for ClientError {
    fn from(e: serde_json::Error) -> Self {
        ClientError::Json(e)
    }
}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> Self {
        ClientError::Io(e)
    }
}

/// What `exec` and `exec_code` return.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecResult {
    /// -1 if the process could not start (or ran past the server's timeout).
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl ExecResult {
    pub fn success(&self) -> bool {
        self.exit_code == 0
    }
}

/// One entry of `list_dir`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub name: String,
    pub is_dir: bool,
    /// Bytes (0 for directories and anything not a regular file).
    pub size: u64,
}

#[derive(Deserialize)]
struct PingResponse {
    #[allow(dead_code)]
    pong: bool,
}

#[derive(Deserialize)]
struct ReadFileResponse {
    content: String,
}

#[derive(Deserialize)]
struct WriteFileResponse {
    #[allow(dead_code)]
    success: bool,
}

#[derive(Deserialize)]
struct ListDirResponse {
    entries: Vec<FileEntry>,
}

/// A connection to a sandbox agent. Calls take `&mut self`: one at a time.
pub struct AgentClient {
    reader: BufReader<ReadHalf<UnixStream>>,
    writer: BufWriter<WriteHalf<UnixStream>>,
    next_id: u64,
}

impl AgentClient {
    /// Connects to the agent's Unix socket and performs the `CONNECT 52` handshake, trying
    /// again every 100 ms for up to 10 s (the agent may still be starting).
    pub async fn connect(path: &Path) -> Result<Self, ClientError> {
        let start = Instant::now();
        loop {
            match Self::try_connect(path).await {
                Ok(client) => return Ok(client),
                Err(e) => {
                    if start.elapsed() >= CONNECT_TIMEOUT {
                        tracing::debug!(error = %e, "giving up connecting to the agent");
                        return Err(ClientError::AgentTimeout(CONNECT_TIMEOUT));
                    }
                    tokio::time::sleep(RETRY_INTERVAL).await;
                }
            }
        }
    }

    async fn try_connect(path: &Path) -> Result<Self, ClientError> {
        let stream = UnixStream::connect(path)
            .await
            .map_err(|e| ClientError::Connection(format!("socket connect failed: {e}")))?;
        let (rd, wr) = tokio::io::split(stream);
        let mut reader = BufReader::new(rd);
        let mut writer = BufWriter::new(wr);
        writer
            .write_all(format!("CONNECT {GUEST_PORT}\n").as_bytes())
            .await
            .map_err(|e| ClientError::Connection(format!("handshake write failed: {e}")))?;
        writer.flush().await?;
        let mut reply = String::new();
        let read = tokio::time::timeout(CONNECT_TIMEOUT, reader.read_line(&mut reply)).await;
        if !matches!(read, Ok(Ok(n)) if n > 0) || !reply.starts_with("OK ") {
            return Err(ClientError::Connection(format!(
                "handshake failed: {}",
                reply.trim()
            )));
        }
        Ok(AgentClient {
            reader,
            writer,
            next_id: 1,
        })
    }

    /// Sends one request and waits (up to 30 s) for the answer with its id.
    pub async fn call<P: Serialize, R: DeserializeOwned>(
        &mut self,
        method: &str,
        params: P,
    ) -> Result<R, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut line = serde_json::to_string(&request)?;
        line.push('\n');
        self.writer.write_all(line.as_bytes()).await?;
        self.writer.flush().await?;
        let deadline = tokio::time::Instant::now() + RPC_TIMEOUT;
        loop {
            let mut answer = String::new();
            match tokio::time::timeout_at(deadline, self.reader.read_line(&mut answer)).await {
                Err(_) => {
                    return Err(ClientError::Rpc {
                        code: -1,
                        message: "response timeout".into(),
                    });
                }
                Ok(Err(e)) => return Err(e.into()),
                Ok(Ok(0)) => {
                    return Err(ClientError::Io(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the agent closed the connection",
                    )));
                }
                Ok(Ok(_)) => {}
            }
            let response: Value = serde_json::from_str(&answer)?;
            let got = response.get("id").and_then(Value::as_u64);
            let error = response.get("error").filter(|e| !e.is_null());
            match got {
                // A late answer to a call that timed out: not ours.
                Some(n) if n < id && !(n == 0 && error.is_some()) => {
                    tracing::debug!(stale = n, expected = id, "skipping a late answer");
                    continue;
                }
                Some(n) if n == id || n == 0 => {}
                other => {
                    return Err(ClientError::Rpc {
                        code: -1,
                        message: format!("response id {other:?} does not match request id {id}"),
                    });
                }
            }
            if let Some(error) = response.get("error") {
                let code = error.get("code").and_then(Value::as_i64).unwrap_or(-1) as i32;
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown error")
                    .to_string();
                return Err(ClientError::Rpc { code, message });
            }
            let result = response
                .get("result")
                .cloned()
                .ok_or_else(|| ClientError::Rpc {
                    code: -1,
                    message: "missing result in response".into(),
                })?;
            return Ok(serde_json::from_value(result)?);
        }
    }

    /// Checks that the agent answers.
    pub async fn ping(&mut self) -> Result<(), ClientError> {
        let _: PingResponse = self.call("ping", json!({})).await?;
        Ok(())
    }

    /// Runs a shell command (`sh -c`).
    pub async fn exec(&mut self, cmd: &str) -> Result<ExecResult, ClientError> {
        self.call("exec", json!({ "cmd": cmd })).await
    }

    /// Runs code: `python`, `python3`, `node`, `javascript`, `js`, `bash` or `sh`.
    pub async fn exec_code(&mut self, lang: &str, code: &str) -> Result<ExecResult, ClientError> {
        self.call("exec_code", json!({ "lang": lang, "code": code }))
            .await
    }

    /// Reads a text file of the sandbox.
    pub async fn read_file(&mut self, path: &str) -> Result<String, ClientError> {
        let r: ReadFileResponse = self.call("read_file", json!({ "path": path })).await?;
        Ok(r.content)
    }

    /// Writes a file of the sandbox (its parent directories are made).
    pub async fn write_file(&mut self, path: &str, content: &str) -> Result<(), ClientError> {
        let _: WriteFileResponse = self
            .call("write_file", json!({ "path": path, "content": content }))
            .await?;
        Ok(())
    }

    /// Lists a directory of the sandbox, sorted by name.
    pub async fn list_dir(&mut self, path: &str) -> Result<Vec<FileEntry>, ClientError> {
        let r: ListDirResponse = self.call("list_dir", json!({ "path": path })).await?;
        Ok(r.entries)
    }
}
