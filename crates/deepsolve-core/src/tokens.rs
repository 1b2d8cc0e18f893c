//! Token estimates (tiktoken o200k) for context accounting when the provider gives no usage.

use std::sync::LazyLock;

use tiktoken_rs::CoreBPE;

use crate::message::Message;

static BPE: LazyLock<Option<CoreBPE>> = LazyLock::new(|| tiktoken_rs::o200k_base().ok());

/// Per-message framing overhead in OpenAI's accounting.
const PER_MESSAGE: u64 = 4;

/// Tokens in a text; falls back to a chars/4 estimate if the tokenizer could not be loaded.
pub fn count(text: &str) -> u64 {
    if text.is_empty() {
        return 0;
    }
    match BPE.as_ref() {
        Some(bpe) => bpe.encode_ordinary(text).len() as u64,
        None => (text.chars().count() as u64).div_ceil(4),
    }
}

/// Tokens a message adds to a prompt.
pub fn message_tokens(m: &Message) -> u64 {
    let calls: u64 = m
        .tool_calls
        .iter()
        .map(|c| count(&c.name) + count(&c.arguments) + 8)
        .sum();
    PER_MESSAGE + count(&m.content) + calls
}

/// Warm the tokenizer (it takes a moment to load) off the hot path.
pub fn warm_up() {
    LazyLock::force(&BPE);
}
