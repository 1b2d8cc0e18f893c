//! The neutral history rewritten for a text protocol: each assistant message's calls written
//! as the protocol writes them, each result as a user message. Folding, pairing and gates
//! work on the neutral history; this runs just before the request.

use crate::message::{Message, Role, ToolCall};
use crate::normalize::normalize;
use crate::texts::{Text, Texts};

/// One result as the history holds it.
pub(crate) struct ResultView<'a> {
    pub(crate) name: &'a str,
    pub(crate) id: &'a str,
    pub(crate) content: &'a str,
}

/// Rewrite `messages`: an assistant message with calls through `assistant` (its text), results
/// through `result` (as user messages).
pub(crate) fn rewrite(
    messages: Vec<Message>,
    texts: &Texts,
    assistant: &dyn Fn(&Message) -> String,
    result: &dyn Fn(ResultView<'_>) -> String,
) -> Vec<Message> {
    let converted = messages
        .into_iter()
        .map(|m| match m.role {
            Role::Assistant if !m.tool_calls.is_empty() => Message::assistant(assistant(&m)),
            Role::Tool => Message::user(result(ResultView {
                name: m.name.as_deref().unwrap_or_default(),
                id: m.tool_call_id.as_deref().unwrap_or_default(),
                content: &m.content,
            })),
            _ => m,
        })
        .collect();
    normalize(converted, texts.get(Text::NoResult))
}

/// An assistant message's text with each call written after it, one per line.
pub(crate) fn joined(message: &Message, render: &dyn Fn(&ToolCall) -> String) -> String {
    let mut out = message.content.trim_end().to_string();
    for call in &message.tool_calls {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&render(call));
    }
    out
}

/// The code of a `code_execution` call's arguments, when they hold one.
pub(crate) fn code_of(call: &ToolCall) -> Option<String> {
    if call.name != CODE_TOOL {
        return None;
    }
    let args = crate::json_repair::parse_lenient(&call.arguments).ok()?;
    args.get("code")?.as_str().map(str::to_string)
}

/// The tool a code block runs in.
pub(crate) const CODE_TOOL: &str = "code_execution";

/// The arguments of a `code_execution` call running `code`.
pub(crate) fn code_arguments(code: &str) -> String {
    serde_json::json!({ "code": code }).to_string()
}

/// A fence of backticks longer than any run of backticks in `content` (at least three), so
/// that the content cannot close its block early.
pub(crate) fn fence_for(content: &str) -> String {
    let longest = content.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat((longest + 1).max(3))
}

/// True when the text holds anything but whitespace.
pub(crate) fn is_blank(text: &str) -> bool {
    text.trim().is_empty()
}

/// A fenced block: ```` ```lang ```` … ```` ``` ````.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Block {
    /// Where its opening fence starts.
    pub(crate) start: usize,
    /// Just past its closing fence (the text's end when it is not closed).
    pub(crate) end: usize,
    pub(crate) closed: bool,
    /// The info string after the opening fence, trimmed and lowercased.
    pub(crate) lang: String,
    pub(crate) body: std::ops::Range<usize>,
}

/// The fenced blocks of `text`, in order: an opening run of three or more backticks closed
/// by a run at least as long (so a block can hold shorter runs). An unclosed block runs to
/// the end.
pub(crate) fn blocks(text: &str) -> Vec<Block> {
    const FENCE: &str = "```";
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(start) = text[from..].find(FENCE).map(|i| i + from) {
        let run = text[start..].bytes().take_while(|b| *b == b'`').count();
        let fence = &text[start..start + run];
        let after = start + run;
        let line_end = text[after..].find('\n').map_or(text.len(), |i| i + after);
        let info = &text[after..line_end];
        // ```` ```{…}``` ```` on one line: no info string, the body starts at once.
        let one_line = info.contains(fence);
        let (lang, body_start) = if one_line {
            (String::new(), after)
        } else {
            (
                info.trim().to_ascii_lowercase(),
                (line_end + 1).min(text.len()),
            )
        };
        match text[body_start..].find(fence).map(|i| i + body_start) {
            Some(close) => {
                let close_run = text[close..].bytes().take_while(|b| *b == b'`').count();
                out.push(Block {
                    start,
                    end: close + close_run,
                    closed: true,
                    lang,
                    body: body_start..close,
                });
                from = close + close_run;
            }
            None => {
                out.push(Block {
                    start,
                    end: text.len(),
                    closed: false,
                    lang,
                    body: body_start..text.len(),
                });
                break;
            }
        }
    }
    out
}

/// Could this block hold a call written as JSON (untagged, `json`, `tool_call`, `tool`)?
pub(crate) fn may_hold_a_call(block: &Block) -> bool {
    matches!(block.lang.as_str(), "" | "json" | "tool_call" | "tool")
}

/// Is this a block of Python code (the block a model writes to run code)?
pub(crate) fn is_python(block: &Block) -> bool {
    matches!(block.lang.as_str(), "python" | "py" | "python3")
}

/// `text` without its `open`…`close` sections, and their insides (an unclosed section runs
/// to the end).
pub(crate) fn take_sections(text: &str, open: &str, close: &str) -> (String, Vec<String>) {
    let mut rest = String::with_capacity(text.len());
    let mut insides = Vec::new();
    let mut pos = 0;
    while let Some(at) = text[pos..].find(open).map(|i| i + pos) {
        rest.push_str(&text[pos..at]);
        let body = at + open.len();
        let (inside, next) = match text[body..].find(close).map(|i| i + body) {
            Some(end) => (&text[body..end], end + close.len()),
            None => (&text[body..], text.len()),
        };
        insides.push(inside.trim().to_string());
        pos = next;
    }
    rest.push_str(&text[pos..]);
    (rest, insides)
}

/// `tag` and its closing tag in `content` spelled with `&lt;`: a result cannot close its
/// block early or forge another.
pub(crate) fn defuse_tag(content: &str, tag: &str) -> String {
    let close = format!("</{tag}");
    let open = format!("<{tag}");
    content
        .replace(&close, &format!("&lt;/{tag}"))
        .replace(&open, &format!("&lt;{tag}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_found_with_their_languages() {
        let text = "a\n```python\nprint(1)\n```\nb\n```json\n{}\n```\n```output\n1";
        let found = blocks(text);
        assert_eq!(found.len(), 3);
        assert_eq!(found[0].lang, "python");
        assert_eq!(&text[found[0].body.clone()], "print(1)\n");
        assert_eq!(&text[found[1].body.clone()], "{}\n");
        assert!(!found[2].closed && found[2].lang == "output");
        assert_eq!(&text[found[2].body.clone()], "1");
        assert!(blocks("no fences").is_empty());
        let one_line = blocks("```{\"a\": 1}```");
        assert_eq!(one_line.len(), 1);
        assert!(one_line[0].closed);
        let longer = "````python\nprint('```')\n````\nafter";
        let found = blocks(longer);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].lang, "python");
        assert_eq!(&longer[found[0].body.clone()], "print('```')\n");
        assert_eq!(&longer[found[0].end..], "\nafter");
    }

    #[test]
    fn a_fence_outlasts_the_backticks_inside() {
        assert_eq!(fence_for("plain"), "```");
        assert_eq!(fence_for("a ``` b"), "````");
        assert_eq!(fence_for("`````"), "``````");
    }
}
