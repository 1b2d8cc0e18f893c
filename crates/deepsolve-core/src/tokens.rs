//! Token estimates (tiktoken o200k) for context accounting when the provider gives no usage.

use std::sync::LazyLock;

use tiktoken_rs::CoreBPE;

use crate::message::Message;

static BPE: LazyLock<Option<CoreBPE>> = LazyLock::new(|| tiktoken_rs::o200k_base().ok());

/// Per-message framing overhead in OpenAI's accounting.
const PER_MESSAGE: u64 = 4;

/// Text is tokenized this many bytes at a time at most.
const WINDOW_BYTES: usize = 16 * 1024;

/// Tokens in a text; falls back to a chars/4 estimate if the tokenizer could not be loaded.
///
/// Long text is counted window by window (cut at whitespace where possible; a cut costs at
/// most a token or two): the tokenizer's memory grows with the longest run it meets — some
/// 60 bytes per byte of a run of letters without a space — and model output is untrusted.
pub fn count(text: &str) -> u64 {
    if text.is_empty() {
        return 0;
    }
    match BPE.as_ref() {
        Some(bpe) => windows(text)
            .map(|w| bpe.encode_ordinary(w).len() as u64)
            .sum(),
        None => (text.chars().count() as u64).div_ceil(4),
    }
}

/// `text` in pieces of at most [`WINDOW_BYTES`] (a single character longer than that is
/// impossible: characters are at most 4 bytes).
fn windows(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let cut = window_end(rest);
        let (window, tail) = rest.split_at(cut);
        rest = tail;
        Some(window)
    })
}

/// Where the first window of `text` ends: all of it when short, else before the last
/// whitespace in the second half of the window, else at a character boundary.
fn window_end(text: &str) -> usize {
    if text.len() <= WINDOW_BYTES {
        return text.len();
    }
    let mut end = WINDOW_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    match text[..end].rfind(char::is_whitespace) {
        Some(space) if space > WINDOW_BYTES / 2 => space,
        _ => end,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_counted_in_windows_that_cover_it_exactly() {
        let prose = "The quick brown fox jumps over the lazy dog. ".repeat(2000);
        let run = "é".repeat(3 * WINDOW_BYTES);
        for text in [prose.as_str(), run.as_str(), "short"] {
            let pieces: Vec<&str> = windows(text).collect();
            assert_eq!(pieces.concat(), text);
            assert!(
                pieces
                    .iter()
                    .all(|p| !p.is_empty() && p.len() <= WINDOW_BYTES)
            );
        }
        // Cut at whitespace, prose counts as it would whole, within a token per window.
        let whole = BPE.as_ref().map(|b| b.encode_ordinary(&prose).len() as u64);
        if let Some(whole) = whole {
            let windows = windows(&prose).count() as u64;
            assert!(
                count(&prose).abs_diff(whole) <= windows,
                "{} vs {whole}",
                count(&prose)
            );
        }
    }
}
