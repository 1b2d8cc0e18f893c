//! The code-fence protocol: tools described in the system prompt, a call is a fenced JSON
//! object `{"name": …, "arguments": {…}}` (what many small models write when they are
//! offered tools in a prompt), a Hermes `<tool_call>` block counts too. Results go back as
//! `<tool_response>` blocks in a user message, as in tags mode.
//!
//! The guard against invented results: the request stops at `<tool_response>` and at an
//! ```` ```output ```` fence; the reading cuts from either, and drops whatever follows the
//! last call (the model has not seen the result yet, so anything after it is made up).

use serde_json::Value;

use super::history::{self, Block};
use super::markup::{self, MarkupError, ParsedCall, ParsedReply};
use super::tags::{self, render_response};
use super::vendors::read_json_call;
use super::{ToolProtocol, WireRequest};
use crate::json_repair::parse_lenient;
use crate::message::Message;
use crate::model::{ToolChoice, ToolSpec};
use crate::texts::{Text, Texts};

/// Where an invented program output would begin.
pub(crate) const OUTPUT_FENCE: &str = "```output";

/// The code-fence protocol.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Fence;

impl ToolProtocol for Fence {
    fn manifest(&self, specs: &[ToolSpec], texts: &Texts) -> Option<String> {
        Some(tags::manifest_with(Text::FenceManifest, specs, texts))
    }

    fn request(
        &self,
        messages: Vec<Message>,
        _specs: &[ToolSpec],
        _tool_choice: &ToolChoice,
        texts: &Texts,
    ) -> WireRequest {
        WireRequest {
            messages: history::rewrite(
                messages,
                texts,
                &|m| history::joined(m, &|c| render_call(&c.name, &c.arguments)),
                &|r| render_response(r.name, r.id, r.content),
            ),
            tools: Vec::new(),
            stop: stop_sequences(),
            response_format: None,
        }
    }

    fn read_reply(&self, content: String) -> ParsedReply {
        read_reply(content)
    }

    fn live_cuts(&self) -> &'static [&'static str] {
        &[OUTPUT_FENCE]
    }
}

/// The tags protocol's stops and the output fence.
fn stop_sequences() -> Vec<String> {
    let mut stop = tags::stop_sequences();
    stop.push(OUTPUT_FENCE.to_string());
    stop
}

/// How a past call is written back: a fenced JSON object (`<` spelled `\u003c`, as in tags
/// mode, and no backtick can close the fence early).
pub(crate) fn render_call(name: &str, arguments: &str) -> String {
    let args = parse_lenient(arguments).unwrap_or_else(|_| Value::String(arguments.to_string()));
    let body = serde_json::json!({"name": name, "arguments": args})
        .to_string()
        .replace('<', "\\u003c")
        .replace('`', "\\u0060");
    format!("```json\n{body}\n```")
}

/// Read a reply: markup first (an invented `<tool_response>` cut, `<think>`, `<tool_call>`),
/// then an invented output fence cut, then the fenced calls.
pub(crate) fn read_reply(content: String) -> ParsedReply {
    let mut parsed = markup::parse_reply_owned(content);
    if let Some(at) = parsed.visible.find(OUTPUT_FENCE) {
        parsed.visible.truncate(at);
        parsed.visible.truncate(parsed.visible.trim_end().len());
        parsed.cut_invented = true;
    }
    let text = std::mem::take(&mut parsed.visible);
    let mut visible = String::with_capacity(text.len());
    let mut pos = 0;
    let mut last_call_end = None;
    for block in history::blocks(&text) {
        let Some(call) = fenced_call(&text, &block) else {
            continue;
        };
        visible.push_str(&text[pos..block.start]);
        parsed.calls.push(call);
        pos = block.end;
        last_call_end = Some(block.end);
    }
    match last_call_end {
        Some(end) => {
            // After the last call the model has seen no result: what it wrote is made up.
            parsed.cut_invented |= !history::is_blank(&text[end..]);
            parsed.visible = visible.trim().to_string();
        }
        None => parsed.visible = text,
    }
    parsed
}

/// The call a fenced block holds: a JSON object with a `name` and its `arguments`. Other
/// fenced code (a program, a data file, an answer's JSON) is not a call.
fn fenced_call(text: &str, block: &Block) -> Option<ParsedCall> {
    if !history::may_hold_a_call(block) {
        return None;
    }
    let body = text[block.body.clone()].trim();
    if !body.starts_with('{') {
        return None;
    }
    match parse_lenient(body) {
        Ok(Value::Object(obj))
            if obj.contains_key("name")
                && (obj.contains_key("arguments") || obj.contains_key("parameters")) =>
        {
            read_json_call(body).into_iter().next()
        }
        Ok(_) => None,
        // Call-shaped but unreadable: the model is told why.
        Err(e) if body.contains("\"name\"") && body.contains("\"arguments\"") => {
            Some(ParsedCall::Malformed {
                raw: body.chars().take(500).collect(),
                error: MarkupError::InvalidJson(e),
            })
        }
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: &str) -> ParsedCall {
        ParsedCall::Call {
            name: name.into(),
            arguments: args.into(),
        }
    }

    #[test]
    fn a_fenced_json_call_is_a_call_and_other_fences_are_not() {
        let r = read_reply(
            "Let me plan.\n```json\n{\"name\": \"solve_plan\", \"arguments\": {\"analysis\": \"a\"}}\n```"
                .into(),
        );
        assert_eq!(r.visible, "Let me plan.");
        assert_eq!(r.calls, [call("solve_plan", r#"{"analysis":"a"}"#)]);
        assert!(!r.cut_invented);
        let answer = "The data:\n```json\n{\"x\": 1}\n```\n```python\nprint(1)\n```";
        let r = read_reply(answer.into());
        assert!(r.calls.is_empty());
        assert_eq!(r.visible, answer);
    }

    #[test]
    fn a_hermes_block_counts_too() {
        let r = read_reply(
            "<tool_call>\n{\"name\": \"reason\", \"arguments\": {\"query\": \"q\"}}\n</tool_call>"
                .into(),
        );
        assert_eq!(r.calls, [call("reason", r#"{"query":"q"}"#)]);
    }

    #[test]
    fn what_follows_the_last_call_is_cut_as_invented() {
        let r = read_reply(
            "```json\n{\"name\": \"code_execution\", \"arguments\": {\"code\": \"print(6*8)\"}}\n```\nThe output is 48.0, so the answer is 48."
                .into(),
        );
        assert_eq!(r.calls.len(), 1);
        assert!(r.cut_invented);
        assert!(!r.visible.contains("48"), "{}", r.visible);
        let r = read_reply("The answer is 4.\n```output\n4\n```".into());
        assert!(r.cut_invented);
        assert_eq!(r.visible, "The answer is 4.");
    }

    #[test]
    fn an_unreadable_fenced_call_is_reported() {
        let r =
            read_reply("```json\n{\"name\": \"reason\", \"arguments\": {\"query\": }\n```".into());
        assert!(
            matches!(r.calls[..], [ParsedCall::Malformed { .. }]),
            "{r:?}"
        );
    }

    #[test]
    fn a_rendered_call_reads_back_and_cannot_break_its_fence() {
        let text = render_call(
            "code_execution",
            r#"{"code": "s = '```'\nprint('<tool_response>')"}"#,
        );
        assert!(!text.contains("<tool_response"));
        assert_eq!(text.matches("```").count(), 2, "{text}");
        let r = read_reply(text);
        let [ParsedCall::Call { name, arguments }] = r.calls.as_slice() else {
            panic!("{r:?}");
        };
        assert_eq!(name, "code_execution");
        assert!(arguments.contains("```"));
    }

    #[test]
    fn the_request_stops_at_results_and_output_fences() {
        let texts = Texts::builtin(crate::solve::Language::En);
        let call = crate::message::ToolCall {
            id: "c1".into(),
            name: "reason".into(),
            arguments: r#"{"query":"q"}"#.into(),
        };
        let req = Fence.request(
            vec![
                Message::system("s"),
                Message::user("p"),
                Message::assistant_with_calls("", vec![call.clone()], None),
                Message::tool_result(&call, "42"),
            ],
            &[],
            &ToolChoice::Auto,
            &texts,
        );
        assert!(req.stop.iter().any(|s| s == OUTPUT_FENCE));
        assert!(req.stop.iter().any(|s| s == "<tool_response>"));
        assert!(req.tools.is_empty() && req.response_format.is_none());
        assert!(req.messages[2].content.starts_with("```json\n{"));
        assert_eq!(req.messages[3].role, crate::message::Role::User);
        assert!(
            req.messages[3]
                .content
                .starts_with("<tool_response name=\"reason\"")
        );
    }
}
