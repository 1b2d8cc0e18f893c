//! Local token estimates, used only when the provider reports no usage.
//!
//! The engine's estimator (a pass over the text by character class, calibrated against
//! o200k, the tokenizer of current OpenAI models) is an approximation for every family, which
//! is why such usage is marked `estimated`.

use deepsolve_core::{ChatRequest, ToolCall};

/// Per-message framing tokens (role markers and separators) in OpenAI's chat format.
const MESSAGE_OVERHEAD: u64 = 4;
/// Tokens that prime the assistant's reply.
const REPLY_PRIMING: u64 = 3;

/// Estimated tokens in `text`: the engine's own estimate, so usage and context accounting agree.
pub fn count_tokens(text: &str) -> u64 {
    deepsolve_core::count_tokens(text)
}

/// Estimated prompt tokens of `request`: messages (with their tool calls, sent-back
/// reasoning and images, at the engine's fixed cost each), framing, and the tool declarations.
pub fn prompt_tokens(request: &ChatRequest) -> u64 {
    let messages: u64 = request
        .messages
        .iter()
        .map(|m| {
            let reasoning = m.reasoning_content.as_deref().unwrap_or_default();
            MESSAGE_OVERHEAD
                + deepsolve_core::IMAGE_TOKENS * m.images.len() as u64
                + count_tokens(&m.content)
                + count_tokens(reasoning)
                + calls_tokens(&m.tool_calls)
        })
        .sum();
    let tools: u64 = request
        .tools
        .iter()
        .map(|t| {
            count_tokens(&t.name)
                + count_tokens(&t.description)
                + count_tokens(&t.parameters.to_string())
        })
        .sum();
    messages + tools + REPLY_PRIMING
}

/// Estimated completion tokens: visible text, reasoning and tool calls.
pub fn completion_tokens(text: &str, reasoning: &str, calls: &[ToolCall]) -> u64 {
    count_tokens(text) + count_tokens(reasoning) + calls_tokens(calls)
}

fn calls_tokens(calls: &[ToolCall]) -> u64 {
    calls
        .iter()
        .map(|c| count_tokens(&c.name) + count_tokens(&c.arguments))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_plausible() {
        assert_eq!(count_tokens(""), 0);
        let n = count_tokens("The quick brown fox jumps over the lazy dog.");
        assert!((8..=12).contains(&n), "{n}");
    }
}
