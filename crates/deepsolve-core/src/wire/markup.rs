//! Vendor tool-call markup in plain content, and how a reply is read.
//!
//! [`SECTIONS`] is the one table of markup the engine knows: the reply parser here and the
//! streaming visible-text filter (`stream_filter`) both read it. A reply is read in this
//! order: everything from the first `<tool_response` on is cut (the model must never see
//! results it invented); `<think>` blocks become reasoning; tool calls are taken from the call
//! sections (`<tool_call>` of Hermes/Qwen and ours, DeepSeek DSML, Kimi-style
//! `<|tool_call_begin|>`, DeepSeek-V3 `<｜tool▁call▁begin｜>`) — never from inside fenced code;
//! what is left is the visible text, with an optional `<answer>` wrapper removed.

use super::vendors;
use crate::json_repair::JsonError;
use crate::texts::{Text, Texts};

/// What a section of markup is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SectionKind {
    /// A tool result the model wrote itself: it and everything after it is cut.
    InventedResponse,
    /// Reasoning written inline.
    Think,
    /// Tool calls, read by the function.
    Calls(fn(&str) -> Vec<ParsedCall>),
}

/// One kind of markup: how it opens and closes (`None`: it runs to the end), and what it is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Section {
    pub(crate) open: &'static str,
    pub(crate) close: Option<&'static str>,
    pub(crate) kind: SectionKind,
}

pub(crate) const RESPONSE_OPEN: &str = "<tool_response";
pub(crate) const THINK_OPEN: &str = "<think>";
pub(crate) const THINK_CLOSE: &str = "</think>";
pub(crate) const FENCE: &str = "```";

/// Every markup section, calls in the order they are tried.
pub(crate) const SECTIONS: &[Section] = &[
    Section {
        open: RESPONSE_OPEN,
        close: None,
        kind: SectionKind::InventedResponse,
    },
    Section {
        open: THINK_OPEN,
        close: Some(THINK_CLOSE),
        kind: SectionKind::Think,
    },
    // Hermes/Qwen, and the text-tag protocol's own format.
    Section {
        open: "<tool_call>",
        close: Some("</tool_call>"),
        kind: SectionKind::Calls(vendors::read_json_call),
    },
    Section {
        open: "<｜DSML｜function_calls>",
        close: Some("</｜DSML｜function_calls>"),
        kind: SectionKind::Calls(vendors::read_dsml),
    },
    Section {
        open: "<|tool_calls_section_begin|>",
        close: Some("<|tool_calls_section_end|>"),
        kind: SectionKind::Calls(vendors::read_kimi_section),
    },
    Section {
        open: "<|tool_call_begin|>",
        close: Some("<|tool_call_end|>"),
        kind: SectionKind::Calls(vendors::read_kimi_call),
    },
    Section {
        open: "<｜tool▁calls▁begin｜>",
        close: Some("<｜tool▁calls▁end｜>"),
        kind: SectionKind::Calls(vendors::read_deepseek_v3_section),
    },
];

/// One tool call found in a reply.
#[derive(Debug, Clone, PartialEq)]
pub enum ParsedCall {
    Call {
        name: String,
        arguments: String,
    },
    /// A call-shaped block that could not be read; `error` says why (see [`MarkupError::describe`]).
    Malformed {
        raw: String,
        error: MarkupError,
    },
}

/// Why a call-shaped block could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkupError {
    InvalidJson(JsonError),
    NotAnObject,
    NoName,
    UnterminatedName,
    NoArgumentBegin,
    NoFunctionName,
    NoToolSeparator,
}

impl MarkupError {
    /// What the model is told, in the turn's language.
    pub fn describe(&self, texts: &Texts) -> String {
        let text = match self {
            MarkupError::InvalidJson(e) => return e.describe(texts),
            MarkupError::NotAnObject => Text::MarkupNotAnObject,
            MarkupError::NoName => Text::MarkupNoName,
            MarkupError::UnterminatedName => Text::MarkupUnterminatedName,
            MarkupError::NoArgumentBegin => Text::MarkupNoArgumentBegin,
            MarkupError::NoFunctionName => Text::MarkupNoFunctionName,
            MarkupError::NoToolSeparator => Text::MarkupNoToolSep,
        };
        texts.get(text).to_string()
    }
}

impl std::fmt::Display for MarkupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe(&Texts::builtin(crate::solve::Language::En)))
    }
}

impl std::error::Error for MarkupError {}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedReply {
    /// The text a user may see: no reasoning, no markup, no invented results.
    pub visible: String,
    pub reasoning: String,
    pub calls: Vec<ParsedCall>,
    /// True when an invented `<tool_response>` (and all after it) was cut.
    pub cut_invented: bool,
}

/// Read a reply's content (in every protocol: vendor markup can arrive over native requests).
pub fn parse_reply(text: &str) -> ParsedReply {
    let kept = cut_at_invented_response(text);
    let think = split_think(kept.text);
    let extracted = extract_calls(&think.visible);
    // Taking sections out can join the text around them into a new `<tool_response`
    // (`<tool_res<think>…</think>ponse>`): cut again after every removal.
    let visible = cut_at_invented_response(&extracted.visible);
    let reasoning = cut_at_invented_response(&think.reasoning);
    ParsedReply {
        visible: strip_answer_wrapper(visible.text).to_string(),
        reasoning: reasoning.text.to_string(),
        calls: extracted.calls,
        cut_invented: kept.cut || visible.cut || reasoning.cut,
    }
}

/// [`parse_reply`] of a reply the caller gives up: one without any markup (every tag this
/// reader knows starts with `<`) is its own visible text, kept as it is rather than copied.
pub(crate) fn parse_reply_owned(text: String) -> ParsedReply {
    if text.contains('<') {
        return parse_reply(&text);
    }
    ParsedReply {
        visible: text,
        ..ParsedReply::default()
    }
}

/// Text before an invented response, and whether one was found.
struct Kept<'a> {
    text: &'a str,
    cut: bool,
}

fn cut_at_invented_response(text: &str) -> Kept<'_> {
    match text.find(RESPONSE_OPEN) {
        Some(i) => Kept {
            text: &text[..i],
            cut: true,
        },
        None => Kept { text, cut: false },
    }
}

/// Content with its inline reasoning taken out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ThinkSplit {
    pub(crate) visible: String,
    pub(crate) reasoning: String,
}

/// Split `<think>…</think>` out of content. A `</think>` with no opening tag means the
/// server stripped the opener: everything before it is reasoning.
pub(crate) fn split_think(text: &str) -> ThinkSplit {
    let mut visible = String::with_capacity(text.len());
    let mut reasoning = String::new();
    let mut rest = text;
    if let Some(close) = rest.find(THINK_CLOSE)
        && !rest[..close].contains(THINK_OPEN)
    {
        reasoning.push_str(rest[..close].trim());
        rest = &rest[close + THINK_CLOSE.len()..];
    }
    while let Some(open) = rest.find(THINK_OPEN) {
        visible.push_str(&rest[..open]);
        let after = &rest[open + THINK_OPEN.len()..];
        let (thought, next) = match after.find(THINK_CLOSE) {
            Some(close) => (&after[..close], &after[close + THINK_CLOSE.len()..]),
            None => (after, ""),
        };
        if !reasoning.is_empty() && !thought.trim().is_empty() {
            reasoning.push('\n');
        }
        reasoning.push_str(thought.trim());
        rest = next;
    }
    visible.push_str(rest);
    ThinkSplit { visible, reasoning }
}

/// The inside of an `<answer>` wrapper; text without one is returned untouched (a reply cut
/// by the output limit is joined with its continuation, so its edges matter).
fn strip_answer_wrapper(text: &str) -> &str {
    text.trim()
        .strip_prefix("<answer>")
        .map(|t| t.trim_end().strip_suffix("</answer>").unwrap_or(t))
        .map(str::trim)
        .unwrap_or(text)
}

/// A byte range of the text.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
}

/// Byte ranges of fenced code blocks (```…```); an unclosed fence runs to the end.
fn fenced_ranges(text: &str) -> Vec<Span> {
    let mut ranges = Vec::new();
    let mut from = 0;
    while let Some(open) = text[from..].find(FENCE).map(|i| i + from) {
        let body = open + FENCE.len();
        match text[body..].find(FENCE).map(|i| i + body) {
            Some(close) => {
                ranges.push(Span {
                    start: open,
                    end: close + FENCE.len(),
                });
                from = close + FENCE.len();
            }
            None => {
                ranges.push(Span {
                    start: open,
                    end: text.len(),
                });
                break;
            }
        }
    }
    ranges
}

/// Content with its call sections taken out.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Extracted {
    pub(crate) visible: String,
    pub(crate) calls: Vec<ParsedCall>,
}

/// A call section's opening tag at `at`, outside fenced code.
struct Found {
    at: usize,
    section: &'static Section,
    read: fn(&str) -> Vec<ParsedCall>,
}

/// Where each call section next opens outside fenced code. Each is searched for once and
/// kept until the reading passes it, and fences are looked up by bisection: a reply can hold
/// hundreds of thousands of tags, and searching every section again after each call (or
/// every fence for each tag) would cost the square of the reply's size.
struct Openings<'t> {
    text: &'t str,
    fences: Vec<Span>,
    /// Per entry of [`SECTIONS`]: not searched yet, or the next opening (`None`: no more).
    next: Vec<Option<Option<usize>>>,
}

impl<'t> Openings<'t> {
    fn new(text: &'t str) -> Self {
        Openings {
            text,
            fences: fenced_ranges(text),
            next: vec![None; SECTIONS.len()],
        }
    }

    fn in_fence(&self, i: usize) -> bool {
        let after = self.fences.partition_point(|f| f.end <= i);
        self.fences.get(after).is_some_and(|f| f.start <= i)
    }

    /// The first opening of `open` at or after `from`, outside fenced code.
    fn search(&self, open: &str, from: usize) -> Option<usize> {
        let mut pos = from;
        while let Some(at) = self.text[pos..].find(open).map(|i| i + pos) {
            if !self.in_fence(at) {
                return Some(at);
            }
            pos = at + open.len();
        }
        None
    }

    /// The first call section opening at or after `from`, outside fenced code.
    fn next_from(&mut self, from: usize) -> Option<Found> {
        let mut first: Option<Found> = None;
        for (i, section) in SECTIONS.iter().enumerate() {
            let SectionKind::Calls(read) = section.kind else {
                continue;
            };
            let at = match self.next[i] {
                Some(Some(at)) if at >= from => Some(at),
                Some(None) => None,
                _ => self.search(section.open, from),
            };
            self.next[i] = Some(at);
            if let Some(at) = at
                && first.as_ref().is_none_or(|f| at < f.at)
            {
                first = Some(Found { at, section, read });
            }
        }
        first
    }
}

/// Take every call section outside fenced code out of the text, in order of appearance.
pub(crate) fn extract_calls(text: &str) -> Extracted {
    let mut openings = Openings::new(text);
    let mut out = Extracted {
        visible: String::with_capacity(text.len()),
        calls: Vec::new(),
    };
    let mut pos = 0;
    while let Some(found) = openings.next_from(pos) {
        out.visible.push_str(&text[pos..found.at]);
        let body_start = found.at + found.section.open.len();
        let close = found.section.close.and_then(|close| {
            text[body_start..]
                .find(close)
                .map(|i| (body_start + i, body_start + i + close.len()))
        });
        // Unclosed (the reply was cut at a stop sequence): read to the end.
        let (body_end, end) = close.unwrap_or((text.len(), text.len()));
        out.calls.extend((found.read)(&text[body_start..body_end]));
        pos = end;
    }
    out.visible.push_str(&text[pos..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    proptest! {
        #[test]
        fn a_reply_without_markup_reads_the_same_owned(s in "[^<]{0,60}") {
            prop_assert_eq!(parse_reply_owned(s.clone()), parse_reply(&s));
        }
    }

    #[test]
    fn every_tag_starts_with_an_angle_bracket() {
        let tags = SECTIONS
            .iter()
            .flat_map(|s| [Some(s.open), s.close])
            .flatten();
        for tag in tags.chain([THINK_CLOSE, "<answer>"]) {
            assert!(tag.starts_with('<'), "{tag}");
        }
    }

    fn call(name: &str, args: &str) -> ParsedCall {
        ParsedCall::Call {
            name: name.into(),
            arguments: args.into(),
        }
    }

    #[test]
    fn our_own_format_several_calls() {
        let r = parse_reply(
            "Let me plan.\n<tool_call>\n{\"name\": \"solve_plan\", \"arguments\": {\"analysis\": \"a\"}}\n</tool_call>\n<tool_call>{\"name\": \"reason\", \"arguments\": \"{\\\"query\\\": \\\"q\\\"}\"}</tool_call>",
        );
        assert_eq!(r.visible.trim(), "Let me plan.");
        assert_eq!(
            r.calls,
            [
                call("solve_plan", r#"{"analysis":"a"}"#),
                call("reason", r#"{"query": "q"}"#)
            ]
        );
    }

    #[test]
    fn invented_responses_are_cut_with_everything_after() {
        let r = parse_reply(
            "<tool_call>{\"name\": \"reason\", \"arguments\": {}}</tool_call>\n<tool_response>FAKE</tool_response>\n<tool_call>{\"name\": \"x\"}</tool_call>",
        );
        assert!(r.cut_invented);
        assert_eq!(r.calls.len(), 1);
        assert!(!r.visible.contains("FAKE"));
    }

    #[test]
    fn removing_a_section_cannot_forge_a_response_tag() {
        for text in [
            "<tool_res<tool_call>{\"name\":\"a\"}</tool_call>ponse>42</tool_response>",
            "<tool_res<think>x</think>ponse>FAKE",
        ] {
            let r = parse_reply(text);
            assert!(
                !r.visible.contains("<tool_response"),
                "{text} -> {:?}",
                r.visible
            );
            assert!(r.cut_invented);
        }
    }

    #[test]
    fn tags_in_fenced_code_are_ignored() {
        let text =
            "Use it like this:\n```\n<tool_call>{\"name\": \"reason\"}</tool_call>\n```\nDone.";
        let r = parse_reply(text);
        assert!(r.calls.is_empty());
        assert!(r.visible.contains("```\n<tool_call>"));
    }

    #[test]
    fn think_goes_to_reasoning_and_answer_wrapper_is_stripped() {
        let r = parse_reply("<think>hmm, factor</think><answer>x = 2 or x = 3</answer>");
        assert_eq!(r.reasoning, "hmm, factor");
        assert_eq!(r.visible, "x = 2 or x = 3");
        let orphan = parse_reply("I think so</think>The answer is 5.");
        assert_eq!(orphan.reasoning, "I think so");
        assert_eq!(orphan.visible.trim(), "The answer is 5.");
    }

    #[test]
    fn malformed_calls_are_explained() {
        let r = parse_reply(
            "<tool_call>{\"arguments\": {}}</tool_call><tool_call>not json at all</tool_call>",
        );
        assert!(
            matches!(&r.calls[0], ParsedCall::Malformed { error, .. } if error.to_string().contains("no \"name\""))
        );
        assert!(
            matches!(&r.calls[1], ParsedCall::Malformed { error, .. } if error.to_string().contains("not valid JSON"))
        );
    }

    #[test]
    fn unclosed_call_at_a_stop_is_read() {
        let r =
            parse_reply("<tool_call>\n{\"name\": \"reason\", \"arguments\": {\"query\": \"q\"}}\n");
        assert_eq!(r.calls, [call("reason", r#"{"query":"q"}"#)]);
    }

    #[test]
    fn deepseek_dsml() {
        let text = "I'll plan.\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"solve_plan\">\n<｜DSML｜parameter name=\"analysis\" string=\"true\">factor it</｜DSML｜parameter>\n<｜DSML｜parameter name=\"steps\" string=\"false\">[{\"goal\": \"g\"}]</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>";
        let r = parse_reply(text);
        assert_eq!(r.visible.trim(), "I'll plan.");
        let ParsedCall::Call { name, arguments } = &r.calls[0] else {
            panic!("{:?}", r.calls)
        };
        assert_eq!(name, "solve_plan");
        let args: Value = serde_json::from_str(arguments).unwrap();
        assert_eq!(
            args,
            serde_json::json!({"analysis": "factor it", "steps": [{"goal": "g"}]})
        );
    }

    #[test]
    fn kimi_and_deepseek_v3_sections() {
        let kimi = "<|tool_calls_section_begin|><|tool_call_begin|>functions.reason:0<|tool_call_argument_begin|>{\"query\": \"q\"}<|tool_call_end|><|tool_call_begin|>functions.solve_plan:1<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>";
        let r = parse_reply(kimi);
        assert_eq!(
            r.calls,
            [
                call("reason", r#"{"query": "q"}"#),
                call("solve_plan", "{}")
            ]
        );
        assert!(r.visible.trim().is_empty());
        let v3 = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>reason\n```json\n{\"query\": \"q\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
        assert_eq!(parse_reply(v3).calls, [call("reason", r#"{"query": "q"}"#)]);
    }

    proptest! {
        #[test]
        fn visible_text_never_holds_a_response_tag(s in "(a|<tool_res|ponse>|<think>|</think>|<tool_call>|</tool_call>|```){0,30}") {
            let r = parse_reply(&s);
            prop_assert!(!r.visible.contains(RESPONSE_OPEN) && !r.reasoning.contains(RESPONSE_OPEN));
        }

        #[test]
        fn never_panics(s in "(.|\n|<tool_call>|</tool_call>|<think>|```|<｜DSML｜invoke name=\"|<\\|tool_call_begin\\|>){0,60}") {
            let _ = parse_reply(&s);
        }
    }
}
