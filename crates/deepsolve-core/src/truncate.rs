//! Head+tail truncation of what the model sees: the full text still goes to
//! events, the turn log and artifacts.

use crate::texts::{Text, Texts};

pub(crate) const MAX_BYTES: usize = 10 * 1024;
pub(crate) const MAX_LINES: usize = 256;

/// Keep the head and the tail of `text` within `max_bytes` and `max_lines`, with a marker
/// saying how much was left out. Returns the text unchanged when it fits.
pub(crate) fn head_tail(text: &str, max_bytes: usize, max_lines: usize, texts: &Texts) -> String {
    let lines = text.split_inclusive('\n').count();
    if text.len() <= max_bytes && lines <= max_lines {
        return text.to_string();
    }
    let half_bytes = max_bytes / 2;
    let half_lines = (max_lines / 2).max(1);
    let head = take_head(text, half_bytes, half_lines);
    let tail = take_tail(&text[head.len()..], half_bytes, half_lines);
    let omitted = &text[head.len()..text.len() - tail.len()];
    let marker = texts.render(
        Text::OutputOmitted,
        &[
            ("lines", &omitted.split_inclusive('\n').count()),
            ("bytes", &omitted.len()),
        ],
    );
    format!("{head}\n{marker}\n{tail}")
}

fn take_head(text: &str, max_bytes: usize, max_lines: usize) -> &str {
    let mut end = 0;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        if n >= max_lines || end + line.len() > max_bytes {
            if n == 0 {
                end = floor_char_boundary(text, max_bytes);
            }
            break;
        }
        end += line.len();
    }
    &text[..end]
}

fn take_tail(text: &str, max_bytes: usize, max_lines: usize) -> &str {
    let mut start = text.len();
    for (n, line) in text.split_inclusive('\n').rev().enumerate() {
        if n >= max_lines || text.len() - start + line.len() > max_bytes {
            if n == 0 {
                start = ceil_char_boundary(text, text.len().saturating_sub(max_bytes));
            }
            break;
        }
        start -= line.len();
    }
    &text[start..]
}

/// `text` cut to at most `max_bytes` (at a character boundary), with `…` where it was cut: for
/// messages that quote model output (a validator echoing a megabyte-long argument).
pub(crate) fn clip(mut text: String, max_bytes: usize) -> String {
    if text.len() > max_bytes {
        text.truncate(floor_char_boundary(&text, max_bytes));
        text.push('…');
    }
    text
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char_boundary(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn head_tail(text: &str, max_bytes: usize, max_lines: usize) -> String {
        let en = Texts::builtin(crate::solve::Language::En);
        super::head_tail(text, max_bytes, max_lines, &en)
    }

    #[test]
    fn short_text_is_untouched() {
        assert_eq!(head_tail("abc\ndef", 100, 10), "abc\ndef");
    }

    #[test]
    fn keeps_head_and_tail_lines() {
        let text: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let out = head_tail(&text, MAX_BYTES, MAX_LINES);
        assert!(out.starts_with("line 0\n"));
        assert!(out.trim_end().ends_with("line 999"));
        assert!(out.contains("lines,") && out.contains("omitted"));
        assert!(out.lines().count() <= MAX_LINES + 2);
    }

    #[test]
    fn one_huge_line_is_cut_by_bytes() {
        let text = "x".repeat(100_000);
        let out = head_tail(&text, MAX_BYTES, MAX_LINES);
        assert!(out.len() < MAX_BYTES + 100);
    }

    #[test]
    fn clip_cuts_long_text_at_a_char_boundary() {
        assert_eq!(clip("short".into(), 10), "short");
        assert_eq!(clip("ééé".into(), 3), "é…");
    }

    proptest! {
        #[test]
        fn bounded_and_utf8_safe(s in "(.|\n){0,3000}", bytes in 16usize..2000, lines in 2usize..50) {
            let out = head_tail(&s, bytes, lines);
            prop_assert!(out.len() <= bytes + 80 || out == s);
        }
    }
}
