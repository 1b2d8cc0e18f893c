//! Code as action: a fenced ```` ```python ```` block in the reply is a `code_execution` call
//! (a small model reaches for code on its own); the other tools — the plan and step tools
//! above all — are called with `<tool_call>` blocks, as in tags mode. A past block goes back
//! as it was written, its output as a user message holding an ```` ```output ```` block.
//!
//! The guard against invented results: the request stops at ```` ```output ```` (and at
//! `<tool_response>`), so the model cannot write the output; if the server ignored the stop,
//! everything after the code block is cut.

use super::fence::OUTPUT_FENCE;
use super::history::{self, CODE_TOOL, code_arguments, code_of, fence_for};
use super::markup::{self, ParsedCall, ParsedReply, THINK_CLOSE};
use super::tags::{self, render_call, render_response};
use super::{ToolProtocol, WireRequest};
use crate::message::{Message, ToolCall};
use crate::model::{ToolChoice, ToolSpec};
use crate::texts::{Text, Texts};

/// Code as action.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Code;

impl ToolProtocol for Code {
    fn manifest(&self, specs: &[ToolSpec], texts: &Texts) -> Option<String> {
        let mut out = String::new();
        if specs.iter().any(|s| s.name == CODE_TOOL) {
            out.push_str("\n\n");
            out.push_str(texts.get(Text::CodeManifest));
        }
        let others: Vec<ToolSpec> = specs
            .iter()
            .filter(|s| s.name != CODE_TOOL)
            .cloned()
            .collect();
        out.push_str(&tags::manifest(&others, texts));
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
                &|r| {
                    if r.name == CODE_TOOL {
                        render_output(r.content)
                    } else {
                        render_response(r.name, r.id, r.content)
                    }
                },
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

/// The output fence first (the stop that matters), then the tags protocol's stops.
fn stop_sequences() -> Vec<String> {
    let mut stop = vec![OUTPUT_FENCE.to_string()];
    stop.extend(tags::stop_sequences());
    stop
}

/// A past call as the model wrote it: a code block, or a `<tool_call>` block.
fn render_past_call(call: &ToolCall) -> String {
    match code_of(call) {
        Some(code) => {
            let fence = fence_for(&code);
            format!("{fence}python\n{}\n{fence}", code.trim_end())
        }
        None => render_call(&call.name, &call.arguments),
    }
}

/// A program's output as it goes back: an ```` ```output ```` block the output cannot close.
pub(crate) fn render_output(content: &str) -> String {
    let fence = fence_for(content);
    format!("{fence}output\n{}\n{fence}", content.trim_end())
}

/// Read a reply: the text before the first code block as in tags mode (its `<tool_call>`
/// blocks are calls), the block a `code_execution` call, and what follows the block cut.
pub(crate) fn read_reply(content: String) -> ParsedReply {
    // Code a reasoning model sketches while it thinks is not a call: look after the thinking.
    let thought_end = content
        .rfind(THINK_CLOSE)
        .map_or(0, |i| i + THINK_CLOSE.len());
    let blocks = history::blocks(&content[thought_end..]);
    let Some(block) = blocks.iter().find(|b| history::is_python(b)) else {
        return super::fence::read_reply(content);
    };
    let (start, end) = (thought_end + block.start, thought_end + block.end);
    let body = thought_end + block.body.start..thought_end + block.body.end;
    let code = content[body].trim_end().to_string();
    let tail = &content[end..];
    let mut parsed = markup::parse_reply(&content[..start]);
    let mut cut = !history::is_blank(tail);
    // An output fence inside the text before (a model answering its own earlier block).
    if let Some(at) = parsed.visible.find(OUTPUT_FENCE) {
        parsed.visible.truncate(at);
        cut = true;
    }
    parsed.visible = parsed.visible.trim().to_string();
    if !history::is_blank(&code) {
        parsed.calls.push(ParsedCall::Call {
            name: CODE_TOOL.to_string(),
            arguments: code_arguments(&code),
        });
    }
    parsed.cut_invented |= cut;
    parsed
}

/// A program written in a reply's prose: its first closed Python block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Program {
    /// The reply's text before the block.
    pub(crate) before: String,
    pub(crate) code: String,
    /// More than blank space followed the block: what the program would print, made up, or
    /// work written without having seen it.
    pub(crate) followed: bool,
}

/// The first Python block of `text`, if it is closed and holds code (an unclosed block was
/// cut off mid-program and would not run as written).
pub(crate) fn first_program(text: &str) -> Option<Program> {
    let blocks = history::blocks(text);
    let block = blocks.iter().find(|b| history::is_python(b))?;
    let code = text[block.body.clone()].trim_end();
    if !block.closed || history::is_blank(code) {
        return None;
    }
    Some(Program {
        before: text[..block.start].trim().to_string(),
        code: code.to_string(),
        followed: !history::is_blank(&text[block.end..]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;

    fn code_call(code: &str) -> ParsedCall {
        ParsedCall::Call {
            name: CODE_TOOL.into(),
            arguments: code_arguments(code),
        }
    }

    #[test]
    fn a_python_block_is_a_code_execution_call() {
        let r = read_reply("Compute it.\n```python\nprint(6 * 8)\n```".into());
        assert_eq!(r.visible, "Compute it.");
        assert_eq!(r.calls, [code_call("print(6 * 8)")]);
        assert!(!r.cut_invented);
    }

    /// What the 1.5B model did in tags mode: the block, then an output it made up.
    #[test]
    fn an_invented_output_after_the_block_is_cut() {
        let r = read_reply(
            "```python\nprint(6 * 8)\n```\n```output\n48.0\n```\nSo the answer is 48.0.".into(),
        );
        assert_eq!(r.calls, [code_call("print(6 * 8)")]);
        assert!(r.cut_invented);
        assert!(!r.visible.contains("48"), "{}", r.visible);
        // A second block is not run either: it was written without seeing the first's output.
        let r = read_reply("```python\nx = 1\n```\n```python\nprint(x)\n```".into());
        assert_eq!(r.calls, [code_call("x = 1")]);
        assert!(r.cut_invented);
    }

    /// What the 1.5B model wrote in a step's free round, on the native protocol.
    #[test]
    fn a_programs_text_code_and_what_followed_it_are_told_apart() {
        let text = "To find the eggs left:\n```python\nleft = 16 - 3 - 4\nprint(left)\n```\nAfter running this code, we get:\n```\n9\n```";
        let program = first_program(text).expect("a program");
        assert_eq!(program.before, "To find the eggs left:");
        assert_eq!(program.code, "left = 16 - 3 - 4\nprint(left)");
        assert!(program.followed);
        let alone = first_program("```python\nprint(1)\n```\n").expect("a program");
        assert!(alone.before.is_empty() && !alone.followed);
    }

    #[test]
    fn only_a_closed_python_block_with_code_is_a_program() {
        assert_eq!(first_program("So 6 * 7 = 42."), None);
        assert_eq!(first_program("```json\n{\"a\": 1}\n```"), None);
        assert_eq!(
            first_program("```python\nprint(6 *"),
            None,
            "cut off mid-program"
        );
        assert_eq!(first_program("```python\n\n```"), None);
        let second = first_program("```\nx\n```\n```py\nprint(2)\n```").expect("a program");
        assert_eq!(second.code, "print(2)");
        assert_eq!(second.before, "```\nx\n```");
    }

    #[test]
    fn code_sketched_while_thinking_is_not_a_call() {
        let r = read_reply(
            "<think>maybe\n```python\nprint(1)\n```\n</think>\nRun it.\n```python\nprint(6 * 8)\n```"
                .into(),
        );
        assert_eq!(r.calls, [code_call("print(6 * 8)")]);
        assert!(r.reasoning.contains("print(1)"));
        assert_eq!(r.visible, "Run it.");
    }

    #[test]
    fn spine_tools_are_tag_calls_beside_code() {
        let r = read_reply(
            "<tool_call>{\"name\": \"solve_finish_step\", \"arguments\": {\"step_id\": \"S1\", \"summary\": \"s\"}}</tool_call>"
                .into(),
        );
        let [ParsedCall::Call { name, .. }] = r.calls.as_slice() else {
            panic!("{r:?}");
        };
        assert_eq!(name, "solve_finish_step");
        // Without a code block the fence protocol's reading applies (an output fence is cut).
        let r = read_reply("The answer is 4.\n```output\n4\n```".into());
        assert!(r.cut_invented && r.visible == "The answer is 4.");
    }

    #[test]
    fn results_go_back_as_output_blocks_in_a_user_message() {
        let texts = Texts::builtin(crate::solve::Language::En);
        let code = ToolCall {
            id: "c1".into(),
            name: CODE_TOOL.into(),
            arguments: code_arguments("print('```')"),
        };
        let plan = ToolCall {
            id: "c2".into(),
            name: "solve_plan".into(),
            arguments: "{}".into(),
        };
        let req = Code.request(
            vec![
                Message::system("s"),
                Message::user("p"),
                Message::assistant_with_calls("Plan.", vec![plan.clone()], None),
                Message::tool_result(&plan, "planned"),
                Message::assistant_with_calls("Run.", vec![code.clone()], None),
                Message::tool_result(&code, "```\n"),
            ],
            &[],
            &ToolChoice::Auto,
            &texts,
        );
        assert_eq!(req.stop[0], OUTPUT_FENCE);
        assert!(req.tools.is_empty());
        assert!(req.messages[2].content.contains("<tool_call>"));
        assert!(req.messages[3].content.starts_with("<tool_response"));
        assert_eq!(
            req.messages[4].content,
            "Run.\n````python\nprint('```')\n````"
        );
        assert_eq!(req.messages[5].role, Role::User);
        assert_eq!(req.messages[5].content, "````output\n```\n````");
        // The past block reads back as the same call.
        assert_eq!(
            read_reply(req.messages[4].content.clone()).calls,
            [code_call("print('```')")]
        );
    }

    #[test]
    fn the_manifest_explains_code_blocks_only_when_code_runs() {
        let texts = Texts::builtin(crate::solve::Language::En);
        let spec = |name: &str| ToolSpec {
            name: name.into(),
            description: "d".into(),
            parameters: serde_json::json!({"type": "object"}),
        };
        let with = Code
            .manifest(&[spec(CODE_TOOL), spec("solve_plan")], &texts)
            .unwrap_or_default();
        assert!(with.contains("```python") && with.contains("### solve_plan"));
        assert!(!with.contains("### code_execution"));
        let without = Code
            .manifest(&[spec("solve_plan")], &texts)
            .unwrap_or_default();
        assert!(!without.contains("```python"));
    }
}
