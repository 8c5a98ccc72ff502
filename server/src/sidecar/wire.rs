//! The JSON of the sidecar protocol (`docs/specs/sidecar-protocol.zh.md`, and the sidecar
//! section of `docs/specs/COMPAT-NOTES.md`): request bodies as the successor implementation
//! sends them (camelCase, optional fields with defaults), and the answers and event data.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use wasbox_runtime::agent::sidecar::{
    Constraints, Parameter, RunEvent, RunRequest, Template, Tool, ToolResult, ToolStatus,
};

/// The body of `POST /runs`. Unknown fields are ignored.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct RunBody {
    pub run_id: Option<String>,
    pub record_id: Option<String>,
    pub agent_id: Option<String>,
    pub locale: Option<String>,
    pub prompt: Option<String>,
    pub conversation: Vec<MessageBody>,
    pub image_reference: Option<String>,
    pub image_base64: Option<String>,
    pub tool_inventory: Vec<ToolBody>,
    pub constraints: ConstraintsBody,
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
}

#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MessageBody {
    pub role: String,
    pub content: String,
}

#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolBody {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub timeout_sec: Option<u32>,
}

#[derive(Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct ConstraintsBody {
    pub allow_network: Option<bool>,
    pub max_tool_concurrency: Option<u32>,
    pub temperature: Option<f64>,
}

/// Roles a conversation message may have.
pub const ROLES: &[&str] = &["system", "user", "assistant"];

impl RunBody {
    /// The run request, or what is wrong with the body.
    pub fn into_request(self, run_id: String) -> Result<RunRequest, String> {
        for (i, m) in self.conversation.iter().enumerate() {
            if !ROLES.contains(&m.role.as_str()) {
                return Err(format!(
                    "conversation[{i}].role must be one of {} (got `{}`)",
                    ROLES.join(", "),
                    m.role
                ));
            }
        }
        if self.conversation.is_empty() && self.prompt.as_deref().is_none_or(str::is_empty) {
            return Err("conversation (or prompt) is required".into());
        }
        let mut seen = std::collections::HashSet::new();
        for (i, t) in self.tool_inventory.iter().enumerate() {
            if t.id.is_empty() {
                return Err(format!("toolInventory[{i}].id must not be empty"));
            }
            if !seen.insert(t.id.as_str()) {
                return Err(format!("toolInventory lists `{}` twice", t.id));
            }
        }
        if let Some(t) = self.constraints.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err("constraints.temperature must be between 0 and 2".into());
        }
        Ok(RunRequest {
            run_id,
            record_id: self.record_id,
            agent_id: self.agent_id,
            locale: self.locale,
            prompt: self.prompt,
            conversation: self
                .conversation
                .into_iter()
                .map(|m| (m.role, m.content))
                .collect(),
            image_reference: self.image_reference,
            image_base64: self.image_base64,
            tool_inventory: self
                .tool_inventory
                .into_iter()
                .map(|t| Tool {
                    id: t.id,
                    name: t.name,
                    timeout_sec: t.timeout_sec.unwrap_or(0),
                })
                .collect(),
            constraints: Constraints {
                allow_network: self.constraints.allow_network,
                max_tool_concurrency: self.constraints.max_tool_concurrency,
                temperature: self.constraints.temperature,
            },
            metadata: self.metadata,
        })
    }
}

/// The body of `POST /runs/{runId}/tools/{toolCallId}`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultBody {
    pub status: String,
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub stdout: String,
    #[serde(default)]
    pub stderr: String,
    #[serde(default)]
    pub duration_ms: u64,
}

impl ToolResultBody {
    pub fn into_result(self) -> Result<ToolResult, String> {
        let status = ToolStatus::parse(&self.status).ok_or_else(|| {
            format!(
                "status must be `ok`, `error` or `timeout` (got `{}`)",
                self.status
            )
        })?;
        Ok(ToolResult {
            status,
            exit_code: self.exit_code,
            stdout: self.stdout,
            stderr: self.stderr,
            duration_ms: self.duration_ms,
        })
    }
}

/// The body of `POST /runs/{runId}/cancel` (optional).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct CancelBody {
    pub reason: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ParameterWire<'a> {
    #[schema(value_type = String)]
    name: &'a str,
    #[serde(rename = "type")]
    #[schema(value_type = String)]
    kind: &'a str,
    #[schema(value_type = String)]
    description: &'a str,
    required: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    default: Option<&'a Value>,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateWire<'a> {
    #[schema(value_type = String)]
    id: &'a str,
    #[schema(value_type = String)]
    name: &'a str,
    #[schema(value_type = String)]
    description: &'a str,
    #[schema(value_type = String)]
    version: &'a str,
    parameters: Vec<ParameterWire<'a>>,
    #[schema(value_type = Vec<String>)]
    tools: &'a [String],
}

impl<'a> From<&'a Template> for TemplateWire<'a> {
    fn from(t: &'a Template) -> Self {
        TemplateWire {
            id: &t.id,
            name: &t.name,
            description: &t.description,
            version: &t.version,
            parameters: t
                .parameters
                .iter()
                .map(|p: &'a Parameter| ParameterWire {
                    name: &p.name,
                    kind: &p.kind,
                    description: &p.description,
                    required: p.required,
                    default: p.default.as_ref(),
                })
                .collect(),
            tools: &t.tools,
        }
    }
}

/// An event's SSE name and data (which always carries `runId` and a `timestamp`).
pub fn event(run_id: &str, timestamp: &str, e: &RunEvent) -> (&'static str, Value) {
    let (name, mut data) = match e {
        RunEvent::Started => ("run.started", json!({})),
        RunEvent::Thought { text } => ("run.thought", json!({ "text": text })),
        RunEvent::ToolCall {
            tool_call_id,
            tool_id,
            arguments,
            timeout_sec,
        } => (
            "run.tool_call",
            json!({"toolCallId": tool_call_id, "toolId": tool_id, "arguments": arguments, "timeoutSec": timeout_sec}),
        ),
        RunEvent::ToolProgress {
            tool_call_id,
            chunk,
        } => (
            "run.tool_progress",
            json!({"toolCallId": tool_call_id, "streamChunk": chunk}),
        ),
        RunEvent::Completed { response, metadata } => (
            "run.completed",
            json!({"response": response, "metadata": metadata.clone().unwrap_or_else(|| json!({}))}),
        ),
        RunEvent::Failed {
            error_code,
            message,
            details,
        } => (
            "run.failed",
            json!({"errorCode": error_code, "message": message, "details": details.clone().unwrap_or(Value::Null)}),
        ),
        RunEvent::Cancelled { reason } => ("run.cancelled", json!({ "reason": reason })),
        RunEvent::Debug { message, level } => {
            ("run.debug", json!({"message": message, "level": level}))
        }
    };
    let mut with_ids = json!({"runId": run_id, "timestamp": timestamp});
    if let (Some(a), Some(b)) = (with_ids.as_object_mut(), data.as_object_mut()) {
        a.append(b);
    }
    (name, with_ids)
}
