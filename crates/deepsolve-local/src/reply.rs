//! Reading a finished reply the way an OpenAI-compatible server with a tool-call parser does:
//! calls written as Hermes `<tool_call>{json}</tool_call>` blocks (core's markup reader), as
//! a fenced JSON block naming an offered tool, or as a reply that is nothing but such JSON
//! (the last two are what Qwen2.5-Coder writes) become tool calls,
//! `<think>` becomes reasoning, and the rest is the content.
//!
//! When anything is doubtful — a malformed call block, an invented `<tool_response>` — the
//! reply is handed over untouched: the engine reads markup in every protocol and tells the
//! model what was wrong, which a parser here could only hide.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use deepsolve_core::{ParsedCall, ToolCall, ToolChoice, ToolSpec, parse_lenient, parse_reply};

/// The content, reasoning and calls of one reply.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadReply {
    pub text: String,
    pub reasoning: String,
    pub calls: Vec<ToolCall>,
}

/// Read `raw` (the whole generated text) for a request offering `tools` under `choice`.
pub fn read_reply(raw: &str, tools: &[ToolSpec], choice: &ToolChoice) -> ReadReply {
    let untouched = || ReadReply {
        text: raw.to_string(),
        ..ReadReply::default()
    };
    if tools.is_empty() || *choice == ToolChoice::None {
        // (`Required` replies are decoded under a grammar and read as one call elsewhere.)
        return untouched();
    }
    let parsed = parse_reply(raw);
    if parsed.cut_invented
        || parsed
            .calls
            .iter()
            .any(|c| matches!(c, ParsedCall::Malformed { .. }))
    {
        return untouched();
    }
    let mut calls: Vec<ToolCall> = parsed
        .calls
        .into_iter()
        .filter_map(|c| match c {
            ParsedCall::Call { name, arguments } => Some(new_call(name, arguments)),
            ParsedCall::Malformed { .. } => None,
        })
        .collect();
    let mut fenced = take_fenced_calls(&parsed.visible, tools);
    if calls.is_empty() && fenced.calls.is_empty() {
        // The whole reply a bare call (what Qwen2.5-Coder writes at temperature 0).
        fenced.calls = bare_calls(&parsed.visible, tools);
        if fenced.calls.is_empty() {
            return untouched();
        }
        fenced.text.clear();
    }
    calls.extend(fenced.calls);
    ReadReply {
        text: fenced.text.trim().to_string(),
        reasoning: parsed.reasoning,
        calls,
    }
}

/// A call with a fresh id: ids are unique in the process, as a provider's are in a turn.
fn new_call(name: String, arguments: String) -> ToolCall {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    ToolCall {
        id: format!("call_local_{n}"),
        name,
        arguments,
    }
}

struct Fenced {
    text: String,
    calls: Vec<ToolCall>,
}

/// Fenced blocks (```` ```json ```` or a bare ```` ``` ````) that hold a call of an offered
/// tool — `{"name": …, "arguments": {…}}`, or a list of them — are taken out of `text`;
/// any other code block stays.
fn take_fenced_calls(text: &str, tools: &[ToolSpec]) -> Fenced {
    let mut out = Fenced {
        text: String::with_capacity(text.len()),
        calls: Vec::new(),
    };
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after_open = &rest[open + 3..];
        let Some(line_end) = after_open.find('\n') else {
            break;
        };
        let info = after_open[..line_end].trim();
        let body_start = &after_open[line_end + 1..];
        let (body, after) = match body_start.find("```") {
            Some(close) => (&body_start[..close], &body_start[close + 3..]),
            // Unclosed: the reply ended (or stopped) inside the block.
            None => (body_start, ""),
        };
        let block_end = rest.len() - after.len();
        let calls = if info.is_empty() || info.eq_ignore_ascii_case("json") {
            calls_in_json(body, tools)
        } else {
            Vec::new()
        };
        if calls.is_empty() {
            out.text.push_str(&rest[..block_end]);
        } else {
            out.text.push_str(&rest[..open]);
            out.calls.extend(calls);
        }
        rest = after;
    }
    out.text.push_str(rest);
    out
}

/// The calls of a reply that is nothing but JSON.
fn bare_calls(text: &str, tools: &[ToolSpec]) -> Vec<ToolCall> {
    if looks_like_json(text) {
        calls_in_json(text, tools)
    } else {
        Vec::new()
    }
}

/// Text that starts as a JSON object or list (after whitespace).
pub(crate) fn looks_like_json(text: &str) -> bool {
    matches!(text.trim_start().chars().next(), Some('{' | '['))
}

/// The calls a JSON text holds, when every one of them names an offered tool.
fn calls_in_json(body: &str, tools: &[ToolSpec]) -> Vec<ToolCall> {
    let Ok(value) = parse_lenient(body.trim()) else {
        return Vec::new();
    };
    let items = match value {
        Value::Array(items) => items,
        single => vec![single],
    };
    let calls: Option<Vec<ToolCall>> = items.iter().map(|item| call_of(item, tools)).collect();
    calls.unwrap_or_default()
}

/// `{"name": tool, "arguments": {…}}` (also `"parameters"`, or arguments as a JSON string).
fn call_of(item: &Value, tools: &[ToolSpec]) -> Option<ToolCall> {
    let object = item.as_object()?;
    let name = object.get("name")?.as_str()?;
    tools.iter().find(|t| t.name == name)?;
    let arguments = match object.get("arguments").or_else(|| object.get("parameters")) {
        None => "{}".to_string(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Object(map)) => Value::Object(map.clone()).to_string(),
        Some(_) => return None,
    };
    Some(new_call(name.to_string(), arguments))
}

/// The first offered tool a whole reply of bare JSON calls, if it is nothing but calls.
pub(crate) fn bare_call_name(text: &str, tools: &[String]) -> Option<String> {
    let specs: Vec<ToolSpec> = tools
        .iter()
        .map(|name| ToolSpec {
            name: name.clone(),
            description: String::new(),
            parameters: Value::Null,
        })
        .collect();
    bare_calls(text, &specs).into_iter().next().map(|c| c.name)
}

/// The name of the tool a streamed call names, read from the first bytes of its JSON
/// (`{"name": "web_search", …`), once the name is complete.
pub(crate) fn streamed_call_name(head: &str) -> Option<&str> {
    let at = head.find("\"name\"")?;
    let rest = head[at + 6..].trim_start().strip_prefix(':')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    let end = rest.find('"')?;
    Some(&rest[..end])
}
