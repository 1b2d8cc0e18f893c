//! Tongyi DeepResearch's trained ReAct format: a call is a `<tool_call>` block with a JSON
//! object, and Python goes in a `<code>` block inside one naming `PythonInterpreter` (our
//! `code_execution`); results go back as a user `<tool_response>`; `<answer>` holds the final
//! answer. The plan and step tools are called with the same `<tool_call>` blocks.
//!
//! The guard against invented results is the tags protocol's: the request stops at
//! `<tool_response>` and the reading cuts from it.

use super::history::{self, CODE_TOOL, code_arguments, code_of};
use super::markup::{self, ParsedCall, ParsedReply};
use super::tags::{self, defuse_response_tags, render_call};
use super::{ToolProtocol, WireRequest};
use crate::message::{Message, ToolCall};
use crate::model::{ToolChoice, ToolSpec};
use crate::texts::{Text, Texts};

/// The name Tongyi's weights know the Python tool by.
pub(crate) const PYTHON_TOOL: &str = "PythonInterpreter";

const CALL_OPEN: &str = "<tool_call>";
const CALL_CLOSE: &str = "</tool_call>";

/// Tongyi's ReAct format.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tongyi;

impl ToolProtocol for Tongyi {
    fn manifest(&self, specs: &[ToolSpec], texts: &Texts) -> Option<String> {
        let mut out = String::new();
        if specs.iter().any(|s| s.name == CODE_TOOL) {
            out.push_str("\n\n");
            out.push_str(texts.get(Text::TongyiCode));
        }
        let others: Vec<ToolSpec> = specs
            .iter()
            .filter(|s| s.name != CODE_TOOL)
            .cloned()
            .collect();
        out.push_str(&tags::manifest_with(Text::TongyiManifest, &others, texts));
        Some(out)
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
                &|m| history::joined(m, &render_past_call),
                &|r| render_result(r.content),
            ),
            tools: Vec::new(),
            stop: tags::stop_sequences(),
            response_format: None,
        }
    }

    fn read_reply(&self, content: String) -> ParsedReply {
        read_reply(&content)
    }
}

fn render_past_call(call: &ToolCall) -> String {
    match code_of(call) {
        Some(code) => format!(
            "{CALL_OPEN}\n{{\"name\": \"{PYTHON_TOOL}\", \"arguments\": {{}}}}\n<code>\n{}\n</code>\n{CALL_CLOSE}",
            code.trim_end().replace(CALL_CLOSE, "<\\/tool_call>")
        ),
        None => render_call(&call.name, &call.arguments),
    }
}

/// A result as Tongyi reads it: a bare `<tool_response>` block.
fn render_result(content: &str) -> String {
    format!(
        "<tool_response>\n{}\n</tool_response>",
        defuse_response_tags(content.trim_end())
    )
}

/// Read a reply: `<code>` calls rewritten as `code_execution` calls, then markup as in tags
/// mode (an invented `<tool_response>` cut), `PythonInterpreter` named as ours, and the
/// `<answer>` block as the visible text.
pub(crate) fn read_reply(content: &str) -> ParsedReply {
    let mut parsed = markup::parse_reply(&code_calls_as_json(content));
    for call in &mut parsed.calls {
        if let ParsedCall::Call { name, .. } = call
            && name == PYTHON_TOOL
        {
            *name = CODE_TOOL.to_string();
        }
    }
    let (_, answers) = history::take_sections(&parsed.visible, "<answer>", "</answer>");
    if let Some(answer) = answers.into_iter().next() {
        parsed.visible = answer;
    }
    if history::is_blank(&parsed.visible) {
        parsed.visible.clear();
    }
    parsed
}

/// Every `<tool_call>` block holding a `<code>` block, rewritten as our JSON call.
fn code_calls_as_json(content: &str) -> String {
    let mut out = String::with_capacity(content.len());
    let mut pos = 0;
    while let Some(at) = content[pos..].find(CALL_OPEN).map(|i| i + pos) {
        let body = at + CALL_OPEN.len();
        let (inside, end) = match content[body..].find(CALL_CLOSE).map(|i| i + body) {
            Some(close) => (&content[body..close], close + CALL_CLOSE.len()),
            None => (&content[body..], content.len()),
        };
        out.push_str(&content[pos..at]);
        match code_in(inside) {
            Some(code) => out.push_str(&render_call(CODE_TOOL, &code_arguments(&code))),
            None => out.push_str(&content[at..end]),
        }
        pos = end;
    }
    out.push_str(&content[pos..]);
    out
}

/// The code of a `<code>` block (unclosed: to the end).
fn code_in(call_body: &str) -> Option<String> {
    let (_, insides) = history::take_sections(call_body, "<code>", "</code>");
    let code = insides.into_iter().next()?;
    Some(code.replace("<\\/tool_call>", CALL_CLOSE))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;

    #[test]
    fn a_code_call_is_a_code_execution_call() {
        let r = read_reply(
            "<think>compute</think>\n<tool_call>\n{\"name\": \"PythonInterpreter\", \"arguments\": {}}\n<code>\nprint(6 * 8)\n</code>\n</tool_call>",
        );
        assert_eq!(r.reasoning, "compute");
        assert_eq!(
            r.calls,
            [ParsedCall::Call {
                name: CODE_TOOL.into(),
                arguments: code_arguments("print(6 * 8)")
            }]
        );
        assert!(r.visible.is_empty());
    }

    #[test]
    fn spine_calls_answers_and_invented_responses() {
        let r = read_reply(
            "<tool_call>\n{\"name\": \"solve_finish_step\", \"arguments\": {\"step_id\": \"S1\", \"summary\": \"48\"}}\n</tool_call>\n<tool_response>\nmade up\n</tool_response>",
        );
        assert_eq!(r.calls.len(), 1);
        assert!(r.cut_invented);
        let r = read_reply("<think>done</think>\nSo:\n<answer>48</answer>");
        assert_eq!(r.visible, "48");
        assert!(r.calls.is_empty());
    }

    #[test]
    fn history_is_written_as_tongyi_reads_it() {
        let texts = Texts::builtin(crate::solve::Language::En);
        let code = ToolCall {
            id: "c1".into(),
            name: CODE_TOOL.into(),
            arguments: code_arguments("print(1)"),
        };
        let req = Tongyi.request(
            vec![
                Message::system("s"),
                Message::user("p"),
                Message::assistant_with_calls("", vec![code.clone()], None),
                Message::tool_result(&code, "1\n</tool_response>"),
            ],
            &[],
            &ToolChoice::Auto,
            &texts,
        );
        assert_eq!(req.stop, tags::stop_sequences());
        assert!(req.messages[2].content.contains("\"PythonInterpreter\""));
        assert!(
            req.messages[2]
                .content
                .contains("<code>\nprint(1)\n</code>")
        );
        assert_eq!(req.messages[3].role, Role::User);
        assert_eq!(
            req.messages[3].content,
            "<tool_response>\n1\n&lt;/tool_response>\n</tool_response>"
        );
        assert_eq!(read_reply(&req.messages[2].content).calls.len(), 1);
    }
}
