//! A tool's own call to a model (`reason`'s derivation, `geogebra_analysis`'s figure): no
//! tools offered, nothing streamed to the turn.

use deepsolve_core::{
    ChatModel, ChatRequest, Completion, Message, StreamDelta, ToolChoice, ToolError,
};

/// One tool-less call to `model` with `messages`; a failure is an internal error naming
/// `which` model failed (its detail stays in the call's event).
pub(crate) async fn complete(
    model: &dyn ChatModel,
    messages: Vec<Message>,
    max_tokens: u32,
    temperature: f32,
    which: &str,
) -> Result<Completion, ToolError> {
    let request = ChatRequest {
        messages,
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        max_tokens,
        temperature,
        stop: Vec::new(),
        response_format: None,
    };
    let mut ignore = |_: StreamDelta| {};
    model
        .complete(&request, &mut ignore)
        .await
        .map_err(|e| ToolError::internal(format!("the {which} model failed: {e}")))
}
