//! The text-tag tool protocol (DESIGN §5.8) and vendor tool-call markup in plain content.
//!
//! A reply is read in this order: everything from the first `<tool_response` on is cut (the
//! model must never see results it invented); `<think>` blocks become reasoning; tool calls are
//! taken from `<tool_call>` blocks (Hermes/Qwen and ours), DeepSeek DSML, Kimi-style
//! `<|tool_call_begin|>` and DeepSeek-V3 `<｜tool▁call▁begin｜>` sections — never from inside
//! fenced code; what is left is the visible text, with an optional `<answer>` wrapper removed.

use serde_json::{Map, Value};

use crate::json_repair::{JsonError, parse_lenient};
use crate::message::{Message, Role};
use crate::model::ToolSpec;
use crate::normalize::normalize;
use crate::texts::{Text, Texts};

pub const RESPONSE_OPEN: &str = "<tool_response";
/// Stop sequences sent in tags mode.
pub const STOP_SEQUENCES: [&str; 2] = ["<tool_response>", "\n<tool_response>"];

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

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedReply {
    /// The text a user may see: no reasoning, no markup, no invented results.
    pub visible: String,
    pub reasoning: String,
    pub calls: Vec<ParsedCall>,
    /// True when an invented `<tool_response>` (and all after it) was cut.
    pub cut_invented: bool,
}

/// Read a reply's content. `cut_responses` is on in tags mode (and harmless elsewhere).
pub fn parse_reply(text: &str) -> ParsedReply {
    let (kept, mut cut_invented) = cut_at_invented_response(text);
    let (without_think, reasoning) = split_think(kept);
    let (visible, calls) = extract_calls(&without_think);
    // Taking sections out can join the text around them into a new `<tool_response`
    // (`<tool_res<think>…</think>ponse>`): cut again after every removal.
    let (visible, cut_visible) = cut_at_invented_response(&visible);
    let (reasoning, cut_reasoning) = cut_at_invented_response(&reasoning);
    cut_invented |= cut_visible || cut_reasoning;
    ParsedReply {
        visible: strip_answer_wrapper(visible).to_string(),
        reasoning: reasoning.to_string(),
        calls,
        cut_invented,
    }
}

fn cut_at_invented_response(text: &str) -> (&str, bool) {
    match text.find(RESPONSE_OPEN) {
        Some(i) => (&text[..i], true),
        None => (text, false),
    }
}

/// Split `<think>…</think>` out of content. A `</think>` with no opening tag means the
/// server stripped the opener: everything before it is reasoning.
pub fn split_think(text: &str) -> (String, String) {
    let mut visible = String::with_capacity(text.len());
    let mut reasoning = String::new();
    let mut rest = text;
    if let Some(close) = rest.find("</think>")
        && !rest[..close].contains("<think>")
    {
        reasoning.push_str(rest[..close].trim());
        rest = &rest[close + "</think>".len()..];
    }
    while let Some(open) = rest.find("<think>") {
        visible.push_str(&rest[..open]);
        let after = &rest[open + "<think>".len()..];
        let (thought, next) = match after.find("</think>") {
            Some(close) => (&after[..close], &after[close + "</think>".len()..]),
            None => (after, ""),
        };
        if !reasoning.is_empty() && !thought.trim().is_empty() {
            reasoning.push('\n');
        }
        reasoning.push_str(thought.trim());
        rest = next;
    }
    visible.push_str(rest);
    (visible, reasoning)
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

/// Byte ranges of fenced code blocks (```…```); an unclosed fence runs to the end.
fn fenced_ranges(text: &str) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    let mut from = 0;
    while let Some(open) = text[from..].find("```").map(|i| i + from) {
        let body = open + 3;
        match text[body..].find("```").map(|i| i + body) {
            Some(close) => {
                ranges.push((open, close + 3));
                from = close + 3;
            }
            None => {
                ranges.push((open, text.len()));
                break;
            }
        }
    }
    ranges
}

/// A kind of call markup: how a section opens and closes, and how to read its inside.
struct Markup {
    open: &'static str,
    close: &'static str,
    read: fn(&str) -> Vec<ParsedCall>,
}

const MARKUPS: &[Markup] = &[
    Markup {
        open: "<tool_call>",
        close: "</tool_call>",
        read: read_json_call,
    },
    Markup {
        open: "<｜DSML｜function_calls>",
        close: "</｜DSML｜function_calls>",
        read: read_dsml,
    },
    Markup {
        open: "<|tool_calls_section_begin|>",
        close: "<|tool_calls_section_end|>",
        read: read_kimi_section,
    },
    Markup {
        open: "<|tool_call_begin|>",
        close: "<|tool_call_end|>",
        read: read_kimi_call,
    },
    Markup {
        open: "<｜tool▁calls▁begin｜>",
        close: "<｜tool▁calls▁end｜>",
        read: read_deepseek_v3_section,
    },
];

/// Take every call section outside fenced code out of the text, in order of appearance.
pub fn extract_calls(text: &str) -> (String, Vec<ParsedCall>) {
    let fences = fenced_ranges(text);
    let in_fence = |i: usize| fences.iter().any(|(s, e)| i >= *s && i < *e);
    let mut visible = String::with_capacity(text.len());
    let mut calls = Vec::new();
    let mut pos = 0;
    loop {
        let next = MARKUPS
            .iter()
            .filter_map(|m| {
                let mut from = pos;
                while let Some(i) = text[from..].find(m.open).map(|i| i + from) {
                    if !in_fence(i) {
                        return Some((i, m));
                    }
                    from = i + m.open.len();
                }
                None
            })
            .min_by_key(|(i, _)| *i);
        let Some((start, markup)) = next else {
            visible.push_str(&text[pos..]);
            break;
        };
        visible.push_str(&text[pos..start]);
        let body_start = start + markup.open.len();
        let (body, end) = match text[body_start..].find(markup.close) {
            Some(i) => (
                &text[body_start..body_start + i],
                body_start + i + markup.close.len(),
            ),
            // Unclosed (the reply was cut at a stop sequence): read to the end.
            None => (&text[body_start..], text.len()),
        };
        calls.extend((markup.read)(body));
        pos = end;
    }
    (visible, calls)
}

fn malformed(raw: &str, error: MarkupError) -> ParsedCall {
    ParsedCall::Malformed {
        raw: raw.chars().take(500).collect(),
        error,
    }
}

/// `{"name": …, "arguments": {…}}` (also `parameters`/`args`, and arguments as a JSON string).
fn read_json_call(body: &str) -> Vec<ParsedCall> {
    let value = match parse_lenient(body) {
        Ok(v) => v,
        Err(e) => return vec![malformed(body, MarkupError::InvalidJson(e))],
    };
    let Value::Object(obj) = value else {
        return vec![malformed(body, MarkupError::NotAnObject)];
    };
    let name = obj
        .get("name")
        .or_else(|| obj.get("function"))
        .or_else(|| obj.get("tool"))
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or_default();
    if name.is_empty() {
        return vec![malformed(body, MarkupError::NoName)];
    }
    let args = obj
        .get("arguments")
        .or_else(|| obj.get("parameters"))
        .or_else(|| obj.get("args"))
        .cloned()
        .unwrap_or(Value::Object(Map::new()));
    let arguments = match args {
        Value::String(s) => s,
        other => other.to_string(),
    };
    vec![ParsedCall::Call {
        name: name.to_string(),
        arguments,
    }]
}

/// DeepSeek DSML: `<｜DSML｜invoke name="N">` with `<｜DSML｜parameter name="K" string="true|false">V</｜DSML｜parameter>`.
fn read_dsml(body: &str) -> Vec<ParsedCall> {
    const INVOKE: &str = "<｜DSML｜invoke name=\"";
    const INVOKE_END: &str = "</｜DSML｜invoke>";
    let mut calls = Vec::new();
    let mut rest = body;
    while let Some(i) = rest.find(INVOKE) {
        let after = &rest[i + INVOKE.len()..];
        let Some(q) = after.find('"') else {
            calls.push(malformed(after, MarkupError::UnterminatedName));
            break;
        };
        let name = after[..q].trim().to_string();
        let inner_start = after[q..]
            .find('>')
            .map(|j| q + j + 1)
            .unwrap_or(after.len());
        let (inner, next) = match after[inner_start..].find(INVOKE_END) {
            Some(j) => (
                &after[inner_start..inner_start + j],
                &after[inner_start + j + INVOKE_END.len()..],
            ),
            None => (&after[inner_start..], ""),
        };
        calls.push(ParsedCall::Call {
            name,
            arguments: Value::Object(read_dsml_parameters(inner)).to_string(),
        });
        rest = next;
    }
    calls
}

fn read_dsml_parameters(inner: &str) -> Map<String, Value> {
    const PARAM: &str = "<｜DSML｜parameter name=\"";
    const PARAM_END: &str = "</｜DSML｜parameter>";
    let mut args = Map::new();
    let mut rest = inner;
    while let Some(i) = rest.find(PARAM) {
        let after = &rest[i + PARAM.len()..];
        let Some(q) = after.find('"') else { break };
        let key = after[..q].to_string();
        let Some(gt) = after[q..].find('>').map(|j| q + j) else {
            break;
        };
        let is_string = after[q..gt].contains("string=\"true\"");
        let value_start = gt + 1;
        let (raw, next) = match after[value_start..].find(PARAM_END) {
            Some(j) => (
                &after[value_start..value_start + j],
                &after[value_start + j + PARAM_END.len()..],
            ),
            None => (&after[value_start..], ""),
        };
        let value = if is_string {
            Value::String(raw.to_string())
        } else {
            serde_json::from_str(raw.trim()).unwrap_or_else(|_| Value::String(raw.to_string()))
        };
        args.insert(key, value);
        rest = next;
    }
    args
}

fn read_kimi_section(body: &str) -> Vec<ParsedCall> {
    let (_, calls) = extract_calls(body);
    calls
}

/// `functions.NAME:IDX<|tool_call_argument_begin|>{json}`.
fn read_kimi_call(body: &str) -> Vec<ParsedCall> {
    const ARGS: &str = "<|tool_call_argument_begin|>";
    let Some((head, json)) = body.split_once(ARGS) else {
        return vec![malformed(body, MarkupError::NoArgumentBegin)];
    };
    let name = head.trim().trim_start_matches("functions.");
    let name = name.split(':').next().unwrap_or_default().trim();
    if name.is_empty() {
        return vec![malformed(body, MarkupError::NoFunctionName)];
    }
    vec![ParsedCall::Call {
        name: name.to_string(),
        arguments: json.trim().to_string(),
    }]
}

/// `<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{…}\n```<｜tool▁call▁end｜>`.
fn read_deepseek_v3_section(body: &str) -> Vec<ParsedCall> {
    const BEGIN: &str = "<｜tool▁call▁begin｜>";
    const SEP: &str = "<｜tool▁sep｜>";
    const END: &str = "<｜tool▁call▁end｜>";
    body.split(BEGIN)
        .skip(1)
        .map(|call| {
            let call = call.split(END).next().unwrap_or_default();
            let Some((_, rest)) = call.split_once(SEP) else {
                return malformed(call, MarkupError::NoToolSeparator);
            };
            let (name, args) = rest.split_once('\n').unwrap_or((rest, "{}"));
            let args = args
                .trim()
                .trim_start_matches("```json")
                .trim_start_matches("```");
            let args = args.trim().trim_end_matches("```").trim();
            ParsedCall::Call {
                name: name.trim().to_string(),
                arguments: if args.is_empty() {
                    "{}".into()
                } else {
                    args.to_string()
                },
            }
        })
        .collect()
}

/// How a past call is written back into an assistant message in tags mode.
pub fn render_call(name: &str, arguments: &str) -> String {
    let args = parse_lenient(arguments).unwrap_or_else(|_| Value::String(arguments.to_string()));
    let body = serde_json::json!({"name": name, "arguments": args});
    format!("<tool_call>\n{body}\n</tool_call>")
}

/// How a result goes back to the model in tags mode.
pub fn render_response(name: &str, id: &str, content: &str) -> String {
    let attr = |s: &str| s.replace(['"', '<', '>'], "");
    format!(
        "<tool_response name=\"{}\" id=\"{}\">\n{content}\n</tool_response>",
        attr(name),
        attr(id)
    )
}

/// Rewrite a normalised history for the text protocol: calls become `<tool_call>` text in
/// the assistant message, results become `<tool_response>` blocks in a user message.
pub fn to_text_protocol(messages: Vec<Message>, texts: &Texts) -> Vec<Message> {
    let converted = messages
        .into_iter()
        .map(|m| match m.role {
            Role::Assistant if !m.tool_calls.is_empty() => {
                let mut content = m.content.trim_end().to_string();
                for call in &m.tool_calls {
                    if !content.is_empty() {
                        content.push('\n');
                    }
                    content.push_str(&render_call(&call.name, &call.arguments));
                }
                Message::assistant(content)
            }
            Role::Tool => Message::user(render_response(
                m.name.as_deref().unwrap_or_default(),
                m.tool_call_id.as_deref().unwrap_or_default(),
                &m.content,
            )),
            _ => m,
        })
        .collect();
    normalize(converted, texts.get(Text::NoResult))
}

/// The tools section of the system prompt in tags mode.
pub fn manifest(specs: &[ToolSpec], texts: &Texts) -> String {
    let mut out = format!("\n\n{}\n", texts.get(Text::TagsManifest));
    for spec in specs {
        let parameters = spec.parameters.to_string();
        let tool = texts.render(
            Text::TagsManifestTool,
            &[
                ("name", &spec.name),
                ("description", &spec.description),
                ("parameters", &parameters),
            ],
        );
        out.push_str(&format!("\n{tool}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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

    #[test]
    fn rendering_round_trips() {
        let text = render_call("reason", r#"{"query":"q"}"#);
        assert_eq!(
            parse_reply(&text).calls,
            [call("reason", r#"{"query":"q"}"#)]
        );
        assert!(
            render_response("a\"b", "id<1>", "x")
                .starts_with("<tool_response name=\"ab\" id=\"id1\">")
        );
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

        #[test]
        fn any_rendered_calls_come_back(names in prop::collection::vec("[a-z_]{1,12}", 1..5), q in "[a-zA-Z0-9 ]{0,20}") {
            let args = serde_json::json!({"query": q}).to_string();
            let text: String = names.iter().map(|n| render_call(n, &args)).collect::<Vec<_>>().join("\nand\n");
            let parsed = parse_reply(&text);
            let want: Vec<ParsedCall> = names.iter().map(|n| call(n, &args)).collect();
            prop_assert_eq!(parsed.calls, want);
        }
    }
}
