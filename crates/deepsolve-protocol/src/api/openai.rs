//! The OpenAI-compatible facade (`/v1/chat/completions`, `/v1/models`): the subset of
//! OpenAI's chat-completion shapes it reads and writes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The request. Sampling parameters of other models are accepted and ignored (the solve
/// knobs decide); unknown fields are tolerated, as OpenAI clients send many.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChatRequest {
    /// Must be `deepsolve`.
    pub model: String,
    /// The last user message is the problem; earlier user → assistant pairs are the history.
    pub messages: Vec<ChatMessage>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stream: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// A deepsolve extension: the caller's knowledge bases the solve may search (ids or
    /// names); the answer then ends with a `Sources` list of what it cites.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub knowledge_bases: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StreamOptions {
    /// Send a last chunk with the usage and no choices.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub include_usage: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChatMessage {
    /// `user`, `assistant`; `system`, `developer` and `tool` messages are ignored.
    pub role: String,
    /// A string, or an array of content parts: `text`, and in user messages `image_url` with
    /// a `data:` URL (`data:image/png;base64,…`; the server fetches no URL). The images of the
    /// user messages are the turn's.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub content: Value,
}

/// `GET /v1/models`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ModelList {
    /// Always `list`.
    pub object: String,
    pub data: Vec<ModelCard>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ModelCard {
    pub id: String,
    /// Always `model`.
    pub object: String,
    pub created: u64,
    pub owned_by: String,
}

/// Token counts, as OpenAI reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChatUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

impl From<crate::usage::Usage> for ChatUsage {
    fn from(usage: crate::usage::Usage) -> Self {
        ChatUsage {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            total_tokens: usage.total(),
        }
    }
}

/// The non-streaming answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChatCompletion {
    pub id: String,
    /// Always `chat.completion`.
    pub object: String,
    /// Seconds since the Unix epoch.
    pub created: u64,
    pub model: String,
    pub choices: Vec<ChatChoice>,
    pub usage: ChatUsage,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChatChoice {
    pub index: u32,
    pub message: AssistantMessage,
    pub finish_reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AssistantMessage {
    /// Always `assistant`.
    pub role: String,
    /// The answer.
    pub content: String,
    /// The solve's progress: the plan, finished steps, tool calls, replans.
    pub reasoning_content: String,
}

/// One `data:` line of the streaming answer (the stream ends with `data: [DONE]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChatCompletionChunk {
    pub id: String,
    /// Always `chat.completion.chunk`.
    pub object: String,
    pub created: u64,
    pub model: String,
    /// Empty in the closing usage-only chunk.
    pub choices: Vec<ChunkChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ChatUsage>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChunkChoice {
    pub index: u32,
    pub delta: ChunkDelta,
    /// `stop` in the closing chunk, `null` before.
    pub finish_reason: Option<String>,
}

/// What a chunk adds: progress as `reasoning_content`, the answer as `content`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChunkDelta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
}

/// How a streaming answer reports a failed turn (OpenAI's error shape, as a `data:` line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StreamError {
    pub error: StreamErrorDetail,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StreamErrorDetail {
    pub message: String,
    /// Always `server_error`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Always `turn_failed`.
    pub code: String,
}
