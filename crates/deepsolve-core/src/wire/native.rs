//! The native protocol: tools declared in the request, calls in the provider's tool-call
//! fields, results as tool messages.

use super::{ToolProtocol, WireRequest};
use crate::message::Message;
use crate::model::{ToolChoice, ToolSpec};
use crate::texts::Texts;

/// The provider's native tool calling.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Native;

impl ToolProtocol for Native {
    fn manifest(&self, _specs: &[ToolSpec], _texts: &Texts) -> Option<String> {
        None
    }

    fn request(
        &self,
        messages: Vec<Message>,
        specs: &[ToolSpec],
        _tool_choice: &ToolChoice,
        _texts: &Texts,
    ) -> WireRequest {
        WireRequest {
            messages,
            tools: specs.to_vec(),
            stop: Vec::new(),
            response_format: None,
        }
    }
}
