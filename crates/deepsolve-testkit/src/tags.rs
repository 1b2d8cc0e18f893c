//! The text-tag tool protocol as the mock model sees it, read and written here
//! independently of the engine's reader, `deepsolve_core::parse_reply` (two readings of one
//! format catch more bugs than a shared one).
//!
//! A tags-mode request declares no `tools`; its system prompt lists them, and it stops at
//! `<tool_response>`. The model calls tools by writing
//!
//! ```text
//! <tool_call>
//! {"name": "solve_plan", "arguments": {"analysis": "...", "steps": [{"goal": "..."}]}}
//! </tool_call>
//! ```
//!
//! Past calls come back as assistant text (the visible text, then the blocks); their results
//! as one user message per round of `<tool_response name="…" id="…">…</tool_response>` blocks,
//! possibly followed by the engine's progress block or nudges. [`neutral_messages`] turns such
//! a history into the native shape the policies read (assistant `tool_calls`, `tool`
//! messages), so every policy plays tags mode unchanged.

use deepsolve_core::parse_lenient;
use deepsolve_core::{Message, Role, ToolCall};
use serde_json::Value;

pub const CALL_OPEN: &str = "<tool_call>";
pub const CALL_CLOSE: &str = "</tool_call>";
/// Opens a result block (attributes follow); also what a model must never write itself.
pub const RESPONSE_OPEN: &str = "<tool_response";
pub const RESPONSE_CLOSE: &str = "</tool_response>";
/// The stop sequences of a tags-mode request.
pub const STOP_SEQUENCES: [&str; 2] = ["<tool_response>", "\n<tool_response>"];
/// The text of every result [`crate::TagsMode`] invents: it must never reach a request.
pub const INVENTED_MARKER: &str = "INVENTED-RESULT";

/// A tool the system prompt of a tags-mode request declares.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptTool {
    pub name: String,
    /// Its JSON Schema, when the prompt gives one that parses.
    pub parameters: Option<Value>,
}

/// One `<tool_response>` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagResponse {
    pub name: String,
    pub id: String,
    pub content: String,
}

/// A call as written in tags mode (and by Hermes/Qwen models): `arguments` is copied verbatim,
/// so broken argument text stays broken, as a model would write it.
pub fn render_call(name: &str, arguments: &str) -> String {
    let arguments = if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    };
    format!(
        "{CALL_OPEN}\n{{\"name\": {}, \"arguments\": {arguments}}}\n{CALL_CLOSE}",
        Value::from(name)
    )
}

/// A result block as the engine sends it back.
pub fn render_response(name: &str, id: &str, content: &str) -> String {
    format!("{RESPONSE_OPEN} name=\"{name}\" id=\"{id}\">\n{content}\n{RESPONSE_CLOSE}")
}

/// The `<tool_call>` blocks of `text` outside fenced code, as `(name, arguments)` — a block
/// that does not parse gives an empty name and its raw text as arguments, so positions still
/// line up with the results — and the text without them.
pub fn parse_calls(text: &str) -> (String, Vec<(String, String)>) {
    let fences = fenced_ranges(text);
    let mut visible = String::with_capacity(text.len());
    let mut calls = Vec::new();
    let mut pos = 0;
    while let Some(start) = next_unfenced(text, &fences, pos, CALL_OPEN) {
        visible.push_str(&text[pos..start]);
        let body_start = start + CALL_OPEN.len();
        let (body, end) = match text[body_start..].find(CALL_CLOSE) {
            Some(i) => (
                &text[body_start..body_start + i],
                body_start + i + CALL_CLOSE.len(),
            ),
            None => (&text[body_start..], text.len()),
        };
        calls.push(read_call(body));
        pos = end;
    }
    visible.push_str(&text[pos..]);
    (visible, calls)
}

/// The first `needle` at or after `from` that is not inside one of the `fences`.
fn next_unfenced(
    text: &str,
    fences: &[(usize, usize)],
    from: usize,
    needle: &str,
) -> Option<usize> {
    let mut at = from;
    while let Some(i) = text.get(at..)?.find(needle).map(|i| i + at) {
        if !fences.iter().any(|(s, e)| (*s..*e).contains(&i)) {
            return Some(i);
        }
        at = i + needle.len();
    }
    None
}

/// Byte ranges of fenced code: from a line opening with ``` to the next such line (or the
/// end), as Markdown reads them.
fn fenced_ranges(text: &str) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    let mut open: Option<usize> = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with("```") {
            match open.take() {
                Some(start) => ranges.push((start, offset + line.len())),
                None => open = Some(offset),
            }
        }
        offset += line.len();
    }
    if let Some(start) = open {
        ranges.push((start, text.len()));
    }
    ranges
}

fn read_call(body: &str) -> (String, String) {
    let value = serde_json::from_str::<Value>(body.trim()).or_else(|_| parse_lenient(body));
    let Ok(Value::Object(object)) = value else {
        return (String::new(), body.trim().to_string());
    };
    let name = object
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let arguments = match object.get("arguments") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => "{}".to_string(),
    };
    (name.to_string(), arguments)
}

/// The `<tool_response>` blocks of `text`, and the text around them (trimmed).
pub fn parse_responses(text: &str) -> (Vec<TagResponse>, String) {
    let mut responses = Vec::new();
    let mut rest = String::new();
    let mut pos = 0;
    while let Some(start) = text[pos..].find(RESPONSE_OPEN).map(|i| i + pos) {
        let Some(head_end) = text[start..].find('>').map(|i| i + start) else {
            break;
        };
        rest.push_str(&text[pos..start]);
        let head = &text[start + RESPONSE_OPEN.len()..head_end];
        let body_start = head_end + 1;
        let (body, end) = match text[body_start..].find(RESPONSE_CLOSE) {
            Some(i) => (
                &text[body_start..body_start + i],
                body_start + i + RESPONSE_CLOSE.len(),
            ),
            None => (&text[body_start..], text.len()),
        };
        responses.push(TagResponse {
            name: attribute(head, "name").unwrap_or_default(),
            id: attribute(head, "id").unwrap_or_default(),
            content: strip_one_newline(body).to_string(),
        });
        pos = end;
    }
    rest.push_str(&text[pos..]);
    (responses, rest.trim().to_string())
}

/// `key="value"` inside a tag head.
fn attribute(head: &str, key: &str) -> Option<String> {
    let pattern = format!("{key}=\"");
    let at = head
        .match_indices(&pattern)
        // `id="` must not match inside `call_id="`: the key starts the head or follows a space.
        .find(|(i, _)| *i == 0 || head[..*i].ends_with(char::is_whitespace))?
        .0
        + pattern.len();
    let len = head[at..].find('"')?;
    Some(head[at..at + len].to_string())
}

/// The engine writes `>\n{content}\n<`: one newline on each side belongs to the markup.
fn strip_one_newline(body: &str) -> &str {
    let body = body.strip_prefix('\n').unwrap_or(body);
    body.strip_suffix('\n').unwrap_or(body)
}

/// A tags-mode history in the native shape: assistant `<tool_call>` blocks become
/// `tool_calls`, each `<tool_response>` of the user message after them a `tool` message (in
/// order, the i-th result answering the i-th call and lending it its id), and the rest of that
/// user message a user message after the results. Messages without tags pass unchanged.
pub fn neutral_messages(messages: &[Message]) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    // Index in `out` of the assistant message whose calls the next results answer.
    let mut calling: Option<usize> = None;
    for message in messages {
        let converted = match message.role {
            Role::Assistant if message.tool_calls.is_empty() => assistant_calls(message, out.len()),
            Role::User => user_results(message, calling.map(|i| &mut out[i])),
            _ => None,
        };
        match converted {
            Some(mut messages) => {
                calling = (message.role == Role::Assistant).then_some(out.len());
                out.append(&mut messages);
            }
            None => {
                calling = None;
                out.push(message.clone());
            }
        }
    }
    out
}

/// The assistant message with its `<tool_call>` blocks as calls (ids provisional until the
/// results name them), or `None` without blocks.
fn assistant_calls(message: &Message, position: usize) -> Option<Vec<Message>> {
    let (visible, calls) = parse_calls(&message.content);
    if calls.is_empty() {
        return None;
    }
    let calls = calls
        .into_iter()
        .enumerate()
        .map(|(i, (name, arguments))| ToolCall {
            id: format!("tags_{position}_{i}"),
            name,
            arguments,
        })
        .collect();
    Some(vec![Message::assistant_with_calls(
        visible.trim(),
        calls,
        message.reasoning_content.clone(),
    )])
}

/// The user message as `tool` messages plus what remains of it, or `None` without results.
/// Results pair with `calling`'s calls by position; each gives its call the engine's id (and
/// its name, when the block could not be read).
fn user_results(message: &Message, mut calling: Option<&mut Message>) -> Option<Vec<Message>> {
    let (responses, rest) = parse_responses(&message.content);
    if responses.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(responses.len() + 1);
    for (i, response) in responses.into_iter().enumerate() {
        let call = calling.as_deref_mut().and_then(|m| m.tool_calls.get_mut(i));
        let id = match call {
            Some(call) => {
                if !response.id.is_empty() {
                    call.id = response.id.clone();
                }
                if call.name.is_empty() {
                    call.name = response.name.clone();
                }
                call.id.clone()
            }
            None => response.id.clone(),
        };
        out.push(Message {
            role: Role::Tool,
            content: response.content,
            images: Default::default(),
            tool_calls: Vec::new(),
            tool_call_id: Some(id),
            name: Some(response.name),
            reasoning_content: None,
        });
    }
    if !rest.is_empty() || message.has_images() {
        out.push(Message::user_with_images(rest, message.images.clone()));
    }
    Some(out)
}

/// The tools a tags-mode system prompt declares, in order, each once. Two shapes are read:
/// Markdown sections (`### name`, the description, then a line with the JSON Schema, as
/// deepsolve writes them) and one-line JSON declarations (`{"name", "description",
/// "parameters"}` or `{"type": "function", "function": {…}}`, as Hermes-style `<tools>` blocks
/// list them). A JSON object with `arguments` is a call example, not a declaration.
pub fn prompt_tools(system: &str) -> Vec<PromptTool> {
    let mut tools: Vec<PromptTool> = Vec::new();
    let mut section: Option<usize> = None;
    for line in system.lines() {
        let trimmed = line.trim();
        if let Some(name) = heading_tool_name(trimmed) {
            section = push_tool(&mut tools, name.to_string(), None);
            continue;
        }
        if trimmed.starts_with('#') {
            section = None;
            continue;
        }
        if let Some(tool) = json_declaration(trimmed) {
            section = None;
            push_tool(&mut tools, tool.name, tool.parameters);
            continue;
        }
        if let Some(i) = section
            && tools[i].parameters.is_none()
        {
            tools[i].parameters = first_json_object(trimmed);
        }
    }
    tools
}

/// Adds `name` unless known (then fills in missing parameters); returns its position.
fn push_tool(
    tools: &mut Vec<PromptTool>,
    name: String,
    parameters: Option<Value>,
) -> Option<usize> {
    if let Some(i) = tools.iter().position(|t| t.name == name) {
        if tools[i].parameters.is_none() {
            tools[i].parameters = parameters;
        }
        return Some(i);
    }
    tools.push(PromptTool { name, parameters });
    Some(tools.len() - 1)
}

/// `### name` (any heading level from 2) whose text is one identifier-like word.
fn heading_tool_name(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("##")?.trim_start_matches('#');
    let name = rest.trim().trim_matches('`');
    let identifier = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    // "## Tools" is a section title, not a tool: tool names are lower-case by convention.
    (identifier && !name.starts_with(|c: char| c.is_ascii_uppercase())).then_some(name)
}

fn json_declaration(line: &str) -> Option<PromptTool> {
    let value = first_json_object(line.trim_start_matches("<tools>"))?;
    let declaration = value
        .get("function")
        .filter(|f| f.is_object())
        .unwrap_or(&value);
    if declaration.get("arguments").is_some() {
        return None;
    }
    let name = declaration.get("name")?.as_str()?.to_string();
    let described =
        declaration.get("parameters").is_some() || declaration.get("description").is_some();
    described.then(|| PromptTool {
        name,
        parameters: declaration.get("parameters").cloned(),
    })
}

/// The first JSON object in `line`, read from its first `{` (trailing text ignored).
fn first_json_object(line: &str) -> Option<Value> {
    let start = line.find('{')?;
    let mut values = serde_json::Deserializer::from_str(&line[start..]).into_iter::<Value>();
    values.next()?.ok().filter(Value::is_object)
}

/// How a vendor writes native-style calls as plain text (models served without a tool-call
/// parser put these in `content`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkupStyle {
    /// Hermes / Qwen: `<tool_call>` JSON blocks (the same as the tags protocol).
    Hermes,
    /// DeepSeek V3.2 DSML: `<｜DSML｜function_calls>` with one `invoke` per call.
    DeepSeekDsml,
    /// Kimi K2: `<|tool_calls_section_begin|>` with `functions.NAME:IDX` calls.
    KimiK2,
}

/// `calls` (`(name, raw arguments)`) in `style`.
pub fn render_markup(style: MarkupStyle, calls: &[(String, String)]) -> String {
    match style {
        MarkupStyle::Hermes => calls
            .iter()
            .map(|(name, args)| render_call(name, args))
            .collect::<Vec<_>>()
            .join("\n"),
        MarkupStyle::DeepSeekDsml => render_dsml(calls),
        MarkupStyle::KimiK2 => render_kimi(calls),
    }
}

const DSML: &str = "｜DSML｜";

fn render_dsml(calls: &[(String, String)]) -> String {
    let mut out = format!("<{DSML}function_calls>\n");
    for (name, arguments) in calls {
        out.push_str(&format!("<{DSML}invoke name=\"{name}\">\n"));
        match serde_json::from_str::<Value>(arguments) {
            Ok(Value::Object(args)) => {
                for (key, value) in &args {
                    out.push_str(&dsml_parameter(key, value));
                }
            }
            // Not an object: written as it came, the way a confused model would.
            _ => out.push_str(&format!("{arguments}\n")),
        }
        out.push_str(&format!("</{DSML}invoke>\n"));
    }
    out.push_str(&format!("</{DSML}function_calls>"));
    out
}

/// Strings are written raw (`string="true"`), everything else as JSON.
fn dsml_parameter(key: &str, value: &Value) -> String {
    let (is_string, text) = match value {
        Value::String(s) => ("true", s.clone()),
        other => ("false", other.to_string()),
    };
    format!("<{DSML}parameter name=\"{key}\" string=\"{is_string}\">{text}</{DSML}parameter>\n")
}

fn render_kimi(calls: &[(String, String)]) -> String {
    let mut out = String::from("<|tool_calls_section_begin|>");
    for (i, (name, arguments)) in calls.iter().enumerate() {
        out.push_str(&format!(
            "<|tool_call_begin|>functions.{name}:{i}<|tool_call_argument_begin|>{arguments}<|tool_call_end|>"
        ));
    }
    out.push_str("<|tool_calls_section_end|>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn calls_are_read_outside_fences_in_order() {
        let text = "Let me plan.\n<tool_call>\n{\"name\": \"solve_plan\", \"arguments\": {\"analysis\": \"a\"}}\n</tool_call>\n```\n<tool_call>{\"name\": \"example\"}</tool_call>\n```\n<tool_call>{\"name\": \"reason\", \"arguments\": \"{\\\"query\\\": \\\"q\\\"}\"}</tool_call>";
        let (visible, calls) = parse_calls(text);
        assert_eq!(
            calls,
            [
                ("solve_plan".to_string(), r#"{"analysis":"a"}"#.to_string()),
                ("reason".to_string(), r#"{"query": "q"}"#.to_string()),
            ]
        );
        assert!(visible.starts_with("Let me plan.\n"));
        assert!(visible.contains("{\"name\": \"example\"}"), "{visible}");
    }

    #[test]
    fn broken_blocks_keep_their_place() {
        let (_, calls) = parse_calls(
            "<tool_call>{\"name\": \"solve_plan\", \"arguments\": {\"steps\": [###]}</tool_call>\n<tool_call>{\"name\":\"reason\"}</tool_call>",
        );
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].0, "");
        assert_eq!(calls[1], ("reason".to_string(), "{}".to_string()));
    }

    #[test]
    fn rendered_calls_read_back() {
        let block = render_call("solve_plan", r#"{"analysis":"a","steps":[{"goal":"g"}]}"#);
        assert_eq!(
            block,
            "<tool_call>\n{\"name\": \"solve_plan\", \"arguments\": {\"analysis\":\"a\",\"steps\":[{\"goal\":\"g\"}]}}\n</tool_call>"
        );
        let (visible, calls) = parse_calls(&block);
        assert_eq!(visible, "");
        assert_eq!(calls[0].1, r#"{"analysis":"a","steps":[{"goal":"g"}]}"#);
        assert!(render_call("f", "").contains("\"arguments\": {}"));
    }

    #[test]
    fn responses_and_the_rest_of_the_message() {
        let text = format!(
            "{}\n{}\n\n[deepsolve:progress] round 2 of 12",
            render_response("solve_plan", "call_1", "{\"status\": \"planned\"}"),
            render_response("reason", "call_2", "line 1\nline 2\n")
        );
        let (responses, rest) = parse_responses(&text);
        assert_eq!(
            responses,
            [
                TagResponse {
                    name: "solve_plan".into(),
                    id: "call_1".into(),
                    content: "{\"status\": \"planned\"}".into()
                },
                TagResponse {
                    name: "reason".into(),
                    id: "call_2".into(),
                    content: "line 1\nline 2\n".into()
                },
            ]
        );
        assert_eq!(rest, "[deepsolve:progress] round 2 of 12");
        assert_eq!(
            attribute(" call_id=\"x\" id=\"y\"", "id").as_deref(),
            Some("y")
        );
    }

    #[test]
    fn histories_become_native() {
        let messages = vec![
            Message::system("s"),
            Message::user("problem"),
            Message::assistant(format!(
                "Planning.\n{}\n{}",
                render_call("solve_plan", "{}"),
                render_call("reason", r#"{"query":"q"}"#)
            )),
            Message::user(format!(
                "{}\n{}\n\n[deepsolve:nudge] go on",
                render_response("solve_plan", "c1", "planned"),
                render_response("reason", "c2", "Answer: 4")
            )),
            Message::assistant("The answer is 4."),
        ];
        let neutral = neutral_messages(&messages);
        let roles: Vec<Role> = neutral.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::System,
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::Tool,
                Role::User,
                Role::Assistant
            ]
        );
        let calls = &neutral[2].tool_calls;
        assert_eq!(neutral[2].content, "Planning.");
        assert_eq!(
            (calls[0].id.as_str(), calls[0].name.as_str()),
            ("c1", "solve_plan")
        );
        assert_eq!(
            (calls[1].id.as_str(), calls[1].arguments.as_str()),
            ("c2", r#"{"query":"q"}"#)
        );
        assert_eq!(neutral[4].tool_call_id.as_deref(), Some("c2"));
        assert_eq!(neutral[4].content, "Answer: 4");
        assert_eq!(neutral[5].content, "[deepsolve:nudge] go on");
        // Nothing to convert: the same messages.
        assert_eq!(neutral_messages(&messages[..2]), messages[..2]);
    }

    #[test]
    fn prompt_tools_in_both_shapes() {
        let markdown = "You solve.\n\n# Calling tools\n\n<tool_call>\n{\"name\": \"TOOL_NAME\", \"arguments\": {\"ARG\": \"VALUE\"}}\n</tool_call>\n\n## Tools\n\n### solve_plan\nPlan the solve.\nArguments (JSON Schema): {\"type\":\"object\",\"required\":[\"analysis\"]}\n\n### reason\nDerive.\nArguments (JSON Schema): {\"type\":\"object\"}\n";
        let tools = prompt_tools(markdown);
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["solve_plan", "reason"]);
        assert_eq!(
            tools[0].parameters,
            Some(json!({"type": "object", "required": ["analysis"]}))
        );
        let hermes = "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"web_search\", \"description\": \"d\", \"parameters\": {\"type\": \"object\"}}}\n</tools>";
        let tools = prompt_tools(hermes);
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0].name, "web_search");
        assert!(prompt_tools("Derive step by step.").is_empty());
    }

    #[test]
    fn vendor_markup_shapes() {
        let calls = vec![
            (
                "solve_plan".to_string(),
                r#"{"analysis":"a","steps":[{"goal":"g"}]}"#.to_string(),
            ),
            ("reason".to_string(), r#"{"query":"q"}"#.to_string()),
        ];
        assert_eq!(
            render_markup(MarkupStyle::DeepSeekDsml, &calls),
            "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"solve_plan\">\n<｜DSML｜parameter name=\"analysis\" string=\"true\">a</｜DSML｜parameter>\n<｜DSML｜parameter name=\"steps\" string=\"false\">[{\"goal\":\"g\"}]</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"reason\">\n<｜DSML｜parameter name=\"query\" string=\"true\">q</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"
        );
        assert_eq!(
            render_markup(MarkupStyle::KimiK2, &calls[1..]),
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.reason:0<|tool_call_argument_begin|>{\"query\":\"q\"}<|tool_call_end|><|tool_calls_section_end|>"
        );
        let hermes = render_markup(MarkupStyle::Hermes, &calls);
        assert_eq!(parse_calls(&hermes).1, calls);
    }
}
