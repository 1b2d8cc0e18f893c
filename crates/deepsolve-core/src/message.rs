//! Chat messages as the engine keeps them (provider-neutral).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::image::TurnImage;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// One tool call as the model asked for it. `arguments` is the raw text the model wrote:
/// parsing, repair and validation happen at dispatch, so nothing is lost for the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// One message. Its content is `content` (text) and, in a user message, `images`: image
/// parts shown with the text (the problem's figure). Almost every message has no image: it
/// then costs nothing more than its text and goes out as plain text; one with images goes out
/// as a list of parts, the images first (see the wire formats).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    #[serde(default)]
    pub content: String,
    /// User messages only: the images of this message's content, in order. Shared, so
    /// cloning a message for every request copies no image.
    #[serde(skip)]
    pub images: Arc<[TurnImage]>,
    /// Assistant messages only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// Tool messages only: the call this result answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Tool messages only: the tool's name (used by the text-tag protocol).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Assistant messages only: the model's reasoning, sent back on tool-call turns where the
    /// provider demands it; never folded into summaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
}

impl Message {
    fn plain(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
            images: Arc::default(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            reasoning_content: None,
        }
    }

    pub fn system(content: impl Into<String>) -> Self {
        Self::plain(Role::System, content)
    }

    pub fn user(content: impl Into<String>) -> Self {
        Self::plain(Role::User, content)
    }

    /// A user message whose content is `images` and then `text` (the problem and its
    /// figures, for a model that sees images).
    pub fn user_with_images(text: impl Into<String>, images: Arc<[TurnImage]>) -> Self {
        Message {
            images,
            ..Self::plain(Role::User, text)
        }
    }

    /// The message has image parts.
    pub fn has_images(&self) -> bool {
        !self.images.is_empty()
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Self::plain(Role::Assistant, content)
    }

    pub fn assistant_with_calls(
        content: impl Into<String>,
        tool_calls: Vec<ToolCall>,
        reasoning_content: Option<String>,
    ) -> Self {
        Message {
            tool_calls,
            reasoning_content,
            ..Self::plain(Role::Assistant, content)
        }
    }

    pub fn tool_result(call: &ToolCall, content: impl Into<String>) -> Self {
        Message {
            tool_call_id: Some(call.id.clone()),
            name: Some(call.name.clone()),
            ..Self::plain(Role::Tool, content)
        }
    }
}
