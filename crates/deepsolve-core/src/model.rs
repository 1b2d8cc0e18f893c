//! The `ChatModel` trait: the one door between the loop and any LLM.

use std::time::Duration;

use async_trait::async_trait;
use deepsolve_protocol::ErrorKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::{Message, ToolCall};

/// Token usage and the tool protocol are wire types (events, the turn record).
pub use deepsolve_protocol::{Protocol, Usage};

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object (`additionalProperties: false`).
    pub parameters: Value,
}

/// The largest length bound (`maxLength`, `maxItems`) a schema shown to a model keeps. A
/// decoding grammar holds such a bound by repeating a rule, and llama.cpp refuses more than
/// 2 000 repetitions; its server then decodes with no grammar at all (`code_execution`'s
/// 200 000-character bound let a `"required"` call come back as prose).
const OFFERED_MAX_LENGTH: u64 = 2_000;

impl ToolSpec {
    /// The tool as a model is offered it: length bounds above 2 000 (`OFFERED_MAX_LENGTH`) are left
    /// out of its schema. A call is still checked against the whole schema before it runs.
    pub fn as_offered(&self) -> ToolSpec {
        ToolSpec {
            parameters: without_long_bounds(&self.parameters),
            ..self.clone()
        }
    }
}

fn without_long_bounds(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => map
            .iter()
            .filter(|(key, value)| {
                let bound = matches!(key.as_str(), "maxLength" | "maxItems");
                !(bound && value.as_u64().is_some_and(|n| n > OFFERED_MAX_LENGTH))
            })
            .map(|(key, value)| (key.clone(), without_long_bounds(value)))
            .collect(),
        Value::Array(items) => items.iter().map(without_long_bounds).collect(),
        other => other.clone(),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoice {
    Auto,
    /// Tools stay declared (prefix cache) but the model may not call them.
    None,
    /// The reply must be a call of one of the tools (OpenAI's `"required"`; the local model
    /// enforces it with a grammar).
    Required,
    /// The reply must be a call of this tool (OpenAI's `{"type": "function", "function":
    /// {"name": …}}`); the tool list stays as declared, so the prompt's prefix does not move.
    Named(String),
    /// The reply must be a call of one of these tools; the tool list stays as declared. An
    /// endpoint is sent `"required"` (the narrowing holds only where the decoder is ours: the
    /// local model's grammar admits just these names).
    Among(Vec<String>),
    /// The reply may be text or a call of one of these tools; the tool list stays as
    /// declared. An endpoint is sent `"auto"` (the narrowing holds only where the decoder is
    /// ours: once the local model opens a call, its grammar admits just these names).
    AutoAmong(Vec<String>),
}

impl ToolChoice {
    /// The reply may be text or a call: `auto`, narrowed or not.
    pub fn is_auto(&self) -> bool {
        matches!(self, ToolChoice::Auto | ToolChoice::AutoAmong(_))
    }
}

/// What an endpoint honours at decoding time, as far as is known: the probe's verdict for an
/// HTTP endpoint, known by construction for the in-process model. The default knows nothing,
/// and the engine then relies on the prompt alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Honours {
    /// Something was learnt (a probe ran, or the model runs in-process): all the flags false
    /// then means "not honoured", not "unknown".
    pub probed: bool,
    /// Native tool calls come back as calls.
    pub native_tools: bool,
    /// `tool_choice: "required"` yields a call.
    pub tool_choice_required: bool,
    /// A named `tool_choice` yields a call of that tool.
    pub tool_choice_named: bool,
    /// `response_format: json_schema` constrains the reply.
    pub json_schema: bool,
    /// Stop sequences end the reply.
    pub stop_sequences: bool,
    /// The context window the server really has (prompt and reply), when it says.
    pub context_window: Option<u64>,
    /// The model planned with `solve_plan` when nothing forced it (the probe's first check);
    /// `None` when not known.
    #[serde(default)]
    pub plans_unforced: Option<bool>,
}

/// A JSON Schema the reply must match (OpenAI's `response_format: {"type": "json_schema"}`;
/// the local model enforces it with a grammar). Used by the structured-output protocol.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplySchema {
    /// A short name for the schema (`[a-zA-Z0-9_-]`, as OpenAI requires).
    pub name: String,
    pub schema: Value,
}

#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub tool_choice: ToolChoice,
    pub max_tokens: u32,
    pub temperature: f32,
    pub stop: Vec<String>,
    /// The reply must be JSON matching this schema (`None`: free text).
    pub response_format: Option<ReplySchema>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    Stop,
    ToolCalls,
    Length,
    ContentFilter,
    Other(String),
}

impl FinishReason {
    pub fn parse(s: &str) -> Self {
        match s {
            "stop" | "eos" | "end_turn" => FinishReason::Stop,
            "tool_calls" | "function_call" | "tool_use" => FinishReason::ToolCalls,
            "length" | "max_tokens" => FinishReason::Length,
            "content_filter" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::Length => "length",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Other(s) => s,
        }
    }
}

/// What one model call produced, after the stream ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub text: String,
    pub reasoning: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: FinishReason,
    pub usage: Usage,
}

/// Live output while a call streams. The client handles retries itself and reports them here.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamDelta {
    Text(String),
    Reasoning(String),
    /// A native tool call naming `name` began streaming; its arguments follow. Not visible
    /// output: it lets the loop tell the tool early (see `Tool::announced`).
    ToolCallStarted {
        name: String,
    },
    Retrying {
        attempt: u32,
        max: u32,
        reason: String,
        delay_ms: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("authentication failed ({status}): {message}")]
    Auth { status: u16, message: String },
    #[error("the prompt exceeds the model's context length: {message}")]
    ContextLength { message: String },
    #[error("the provider does not support tool calling: {message}")]
    ToolsUnsupported { message: String },
    #[error("rate limited after {attempts} attempts: {message}")]
    RateLimited { attempts: u32, message: String },
    #[error("server error {status} after {attempts} attempts: {message}")]
    Server {
        status: u16,
        attempts: u32,
        message: String,
    },
    #[error("request rejected ({status}): {message}")]
    BadRequest { status: u16, message: String },
    #[error("transport error after {attempts} attempts: {message}")]
    Transport { attempts: u32, message: String },
    #[error("no data from the model for {}s", .after.as_secs())]
    IdleTimeout { after: Duration },
    /// The stream broke after visible output had already been shown: not retried.
    #[error("the stream broke after output had started: {message}")]
    StreamCut { message: String },
    #[error("unreadable reply from the model: {message}")]
    Protocol { message: String },
    /// The reply (content, reasoning and tool-call arguments together) grew past the per-reply
    /// cap; the stream was dropped there.
    #[error(
        "the model's reply exceeded {limit_bytes} bytes (content, reasoning and tool-call \
         arguments together; the cap is llm.max_reply_mb)"
    )]
    ReplyTooLarge { limit_bytes: u64 },
}

impl ModelError {
    /// A short stable name for events and metrics.
    pub fn kind(&self) -> &'static str {
        self.error_kind().as_str()
    }

    /// The kind of the `error` event that reports this failure.
    pub fn error_kind(&self) -> ErrorKind {
        match self {
            ModelError::Auth { .. } => ErrorKind::Auth,
            ModelError::ContextLength { .. } => ErrorKind::ContextLength,
            ModelError::ToolsUnsupported { .. } => ErrorKind::ToolsUnsupported,
            ModelError::RateLimited { .. } => ErrorKind::RateLimited,
            ModelError::Server { .. } => ErrorKind::Server,
            ModelError::BadRequest { .. } => ErrorKind::BadRequest,
            ModelError::Transport { .. } => ErrorKind::Transport,
            ModelError::IdleTimeout { .. } => ErrorKind::IdleTimeout,
            ModelError::StreamCut { .. } => ErrorKind::StreamCut,
            ModelError::Protocol { .. } => ErrorKind::Protocol,
            ModelError::ReplyTooLarge { .. } => ErrorKind::ReplyTooLarge,
        }
    }
}

/// Where live deltas go while a call streams.
pub type DeltaSink<'a> = &'a mut (dyn FnMut(StreamDelta) + Send);

#[async_trait]
pub trait ChatModel: Send + Sync {
    /// The model's name, for events and logs.
    fn name(&self) -> &str;

    /// Run one streaming chat completion. Retries of transient failures happen inside, before
    /// any visible output; dropping the future cancels the call.
    async fn complete(
        &self,
        request: &ChatRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<Completion, ModelError>;

    /// What this model's endpoint honours at decoding time (default: nothing known).
    fn honours(&self) -> Honours {
        Honours::default()
    }
}

#[async_trait]
impl<T: ChatModel + ?Sized> ChatModel for std::sync::Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<Completion, ModelError> {
        (**self).complete(request, on_delta).await
    }

    fn honours(&self) -> Honours {
        (**self).honours()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_is_offered_without_the_bounds_no_grammar_can_hold() {
        let spec = ToolSpec {
            name: "code_execution".into(),
            description: "Run Python.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "code": {"type": "string", "minLength": 1, "maxLength": 200_000},
                    "label": {"type": "string", "maxLength": 80},
                    "lines": {"type": "array", "items": {"type": "string", "maxLength": 100_000}, "maxItems": 5_000},
                    "maxLength": {"type": "integer", "maxLength": 3}
                },
                "required": ["code"],
                "additionalProperties": false
            }),
        };
        let offered = spec.as_offered();
        assert_eq!(
            offered.parameters,
            json!({
                "type": "object",
                "properties": {
                    "code": {"type": "string", "minLength": 1},
                    "label": {"type": "string", "maxLength": 80},
                    "lines": {"type": "array", "items": {"type": "string"}},
                    "maxLength": {"type": "integer", "maxLength": 3}
                },
                "required": ["code"],
                "additionalProperties": false
            })
        );
        assert_eq!(
            (offered.name, offered.description),
            (spec.name, spec.description)
        );
    }
}
