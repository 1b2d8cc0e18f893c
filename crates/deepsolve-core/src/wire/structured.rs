//! Structured output, for endpoints without tool calling that honour `response_format:
//! json_schema` (or a grammar): every reply is a JSON object, either
//! `{"analysis": …, "call": {"name": …, "parameters": {…}}}` or `{"analysis": …, "answer": …}`,
//! the schema built from the offered tools' own schemas. The `analysis` comes first so the
//! model reasons before it commits to a call. (A schema's keys are written in alphabetical
//! order and a grammar follows that order: hence `analysis` before `answer`/`call`, and
//! `parameters` after `name`, so the tool is named before its arguments are written.) A round's `tool_choice` narrows the schema
//! (none: an answer; required: a call; named: that tool's call) without touching the prompt.
//!
//! The guard against invented results: the schema ends the reply with the object, so there is
//! nowhere to write a result; if the server ignored it, whatever follows the object is cut
//! (and a reply that is not JSON at all is read as in tags mode).

use serde_json::{Map, Value, json};

use super::history;
use super::markup::{self, MarkupError, ParsedCall, ParsedReply};
use super::tags::{self, render_response};
use super::{ToolProtocol, WireRequest};
use crate::json_repair::parse_lenient;
use crate::message::Message;
use crate::model::{ReplySchema, ToolChoice, ToolSpec};
use crate::texts::{Text, Texts};

/// The schema's name in the request.
pub(crate) const SCHEMA_NAME: &str = "deepsolve_reply";

/// Structured output.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Structured;

impl ToolProtocol for Structured {
    fn manifest(&self, specs: &[ToolSpec], texts: &Texts) -> Option<String> {
        Some(tags::manifest_with(Text::StructuredManifest, specs, texts))
    }

    fn request(
        &self,
        messages: Vec<Message>,
        specs: &[ToolSpec],
        tool_choice: &ToolChoice,
        texts: &Texts,
    ) -> WireRequest {
        WireRequest {
            messages: history::rewrite(messages, texts, &render_calls, &|r| {
                render_response(r.name, r.id, r.content)
            }),
            tools: Vec::new(),
            stop: tags::stop_sequences(),
            response_format: Some(ReplySchema {
                name: SCHEMA_NAME.to_string(),
                schema: reply_schema(specs, tool_choice),
            }),
        }
    }

    fn read_reply(&self, content: String) -> ParsedReply {
        read_reply(content)
    }

    /// The reply is a JSON object: the live view shows none of it (the answer comes with the
    /// `answer` event, read from the object).
    fn live_cuts(&self) -> &'static [&'static str] {
        &["{"]
    }
}

/// A past reply as the model wrote it: one object per call, the message's text (or, when it
/// has none, its reasoning: where the analysis went) as the first one's analysis (`<` spelled
/// `\u003c`, as in tags mode).
fn render_calls(message: &Message) -> String {
    let reasoning = message.reasoning_content.as_deref().unwrap_or_default();
    let text = match message.content.trim() {
        "" => reasoning.trim(),
        content => content,
    };
    let mut analysis = Some(text);
    let objects: Vec<String> = message
        .tool_calls
        .iter()
        .map(|call| {
            let args = parse_lenient(&call.arguments)
                .unwrap_or_else(|_| Value::String(call.arguments.clone()));
            let call = json!({"name": call.name, "parameters": args});
            let object = match analysis.take() {
                Some(text) => json!({"analysis": text, "call": call}),
                None => json!({"call": call}),
            };
            object.to_string().replace('<', "\\u003c")
        })
        .collect();
    objects.join("\n")
}

/// The schema of one round's reply.
pub(crate) fn reply_schema(specs: &[ToolSpec], tool_choice: &ToolChoice) -> Value {
    let call = |spec: &ToolSpec| {
        variant(
            "call",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "const": spec.name},
                    "parameters": spec.parameters,
                },
                "required": ["name", "parameters"],
                "additionalProperties": false,
            }),
        )
    };
    let answer = variant("answer", json!({"type": "string"}));
    let variants: Vec<Value> = match tool_choice {
        ToolChoice::None => vec![answer],
        ToolChoice::Named(name) if specs.iter().any(|s| &s.name == name) => {
            specs.iter().filter(|s| &s.name == name).map(call).collect()
        }
        ToolChoice::Among(names) if specs.iter().any(|s| names.contains(&s.name)) => specs
            .iter()
            .filter(|s| names.contains(&s.name))
            .map(call)
            .collect(),
        ToolChoice::Required | ToolChoice::Named(_) | ToolChoice::Among(_) if !specs.is_empty() => {
            specs.iter().map(call).collect()
        }
        ToolChoice::AutoAmong(names) => specs
            .iter()
            .filter(|s| names.contains(&s.name))
            .map(call)
            .chain([answer])
            .collect(),
        _ => specs.iter().map(call).chain([answer]).collect(),
    };
    match <[Value; 1]>::try_from(variants) {
        Ok([only]) => only,
        Err(variants) => json!({ "anyOf": variants }),
    }
}

/// `{"analysis": string, key: value}`, the analysis first.
fn variant(key: &str, value: Value) -> Value {
    let mut properties = Map::new();
    properties.insert("analysis".into(), json!({"type": "string"}));
    properties.insert(key.into(), value);
    json!({
        "type": "object",
        "properties": properties,
        "required": ["analysis", key],
        "additionalProperties": false,
    })
}

/// Read a reply: the JSON object's analysis as reasoning, its call or its answer; text after
/// the object cut. Not JSON: read as markup (the server ignored the schema).
pub(crate) fn read_reply(content: String) -> ParsedReply {
    let think = markup::split_think(&content);
    let text = think.visible.trim_start();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let (value, rest) = match stream.next() {
        Some(Ok(value @ Value::Object(_))) => (value, &text[stream.byte_offset()..]),
        // Repairable JSON (a missing brace at a length cut), but only an object from the start.
        _ if text.starts_with('{') => match parse_lenient(text) {
            Ok(value @ Value::Object(_)) => (value, ""),
            _ => return markup::parse_reply_owned(content),
        },
        _ => return markup::parse_reply_owned(content),
    };
    let mut parsed = ParsedReply {
        reasoning: think.reasoning,
        cut_invented: !history::is_blank(rest),
        ..ParsedReply::default()
    };
    let Value::Object(mut obj) = value else {
        return parsed;
    };
    if let Some(analysis) = obj.remove("analysis").as_ref().and_then(Value::as_str)
        && !analysis.trim().is_empty()
    {
        if !parsed.reasoning.is_empty() {
            parsed.reasoning.push('\n');
        }
        parsed.reasoning.push_str(analysis.trim());
    }
    match (obj.remove("call"), obj.remove("answer")) {
        (Some(call), _) => parsed.calls.push(read_call(call)),
        (None, Some(Value::String(answer))) => parsed.visible = answer.trim().to_string(),
        (None, Some(other)) => parsed.visible = other.to_string(),
        // An object that is neither: its text is the answer rather than nothing.
        (None, None) => parsed.visible = Value::Object(obj).to_string(),
    }
    parsed
}

fn read_call(call: Value) -> ParsedCall {
    let raw = call.to_string();
    let Value::Object(obj) = call else {
        return ParsedCall::Malformed {
            raw,
            error: MarkupError::NotAnObject,
        };
    };
    let Some(name) = obj.get("name").and_then(Value::as_str).map(str::trim) else {
        return ParsedCall::Malformed {
            raw,
            error: MarkupError::NoName,
        };
    };
    let arguments = match obj.get("parameters").or_else(|| obj.get("arguments")) {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => "{}".to_string(),
    };
    ParsedCall::Call {
        name: name.to_string(),
        arguments,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: "d".into(),
            parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        }
    }

    #[test]
    fn a_call_and_an_answer_are_read() {
        let r = read_reply(
            r#"{"analysis": "plan first", "call": {"name": "solve_plan", "parameters": {"analysis": "a"}}}"#
                .into(),
        );
        assert_eq!(r.reasoning, "plan first");
        assert_eq!(
            r.calls,
            [ParsedCall::Call {
                name: "solve_plan".into(),
                arguments: r#"{"analysis":"a"}"#.into()
            }]
        );
        assert!(r.visible.is_empty() && !r.cut_invented);
        let r = read_reply(r#"{"analysis": "done", "answer": "x = 2"}"#.into());
        assert_eq!(r.visible, "x = 2");
        assert!(r.calls.is_empty());
    }

    #[test]
    fn text_after_the_object_is_cut_as_invented() {
        let r = read_reply(
            "{\"analysis\": \"t\", \"call\": {\"name\": \"code_execution\", \"arguments\": {\"code\": \"print(2)\"}}}\n<tool_response>2</tool_response>\n{\"answer\": \"2\"}"
                .into(),
        );
        assert_eq!(r.calls.len(), 1);
        assert!(r.cut_invented);
        assert!(r.visible.is_empty());
    }

    #[test]
    fn a_reply_that_ignored_the_schema_is_read_as_markup() {
        let r = read_reply("The answer is 4.".into());
        assert_eq!(r.visible, "The answer is 4.");
        let r = read_reply(
            "<tool_call>{\"name\": \"reason\", \"arguments\": {}}</tool_call><tool_response>x"
                .into(),
        );
        assert_eq!(r.calls.len(), 1);
        assert!(r.cut_invented);
        let r = read_reply(r#"{"analysis": "t", "call": {"arguments": {}}}"#.into());
        assert!(matches!(
            r.calls[..],
            [ParsedCall::Malformed {
                error: MarkupError::NoName,
                ..
            }]
        ));
    }

    #[test]
    fn the_schema_follows_the_rounds_tool_choice() {
        let specs = [spec("solve_plan"), spec("reason")];
        let auto = reply_schema(&specs, &ToolChoice::Auto);
        let variants = auto["anyOf"].as_array().map(Vec::len);
        assert_eq!(variants, Some(3));
        assert_eq!(
            auto["anyOf"][0]["properties"]["call"]["properties"]["name"]["const"],
            "solve_plan"
        );
        assert_eq!(
            auto["anyOf"][0]["properties"]["call"]["properties"]["parameters"],
            specs[0].parameters
        );
        // The analysis is the first property as written, so a grammar writes it first; the
        // tool is named before its parameters.
        let text = auto.to_string();
        let at = |key: &str| text.find(key).unwrap_or(usize::MAX);
        assert!(at("\"analysis\"") < at("\"call\""), "{text}");
        assert!(at("\"name\"") < at("\"parameters\""), "{text}");
        let answer = auto["anyOf"][2].to_string();
        assert!(answer.find("analysis") < answer.find("answer"), "{answer}");
        let none = reply_schema(&specs, &ToolChoice::None);
        assert_eq!(none["required"], json!(["analysis", "answer"]));
        let plan_or_answer =
            reply_schema(&specs, &ToolChoice::AutoAmong(vec!["solve_plan".into()]));
        let kinds: Vec<String> = (plan_or_answer["anyOf"].as_array().into_iter().flatten())
            .map(|v| v["properties"]["call"]["properties"]["name"]["const"].to_string())
            .collect();
        assert_eq!(
            kinds,
            ["\"solve_plan\"", "null"],
            "the plan's call or the answer"
        );
        let required = reply_schema(&specs, &ToolChoice::Required);
        assert_eq!(required["anyOf"].as_array().map(Vec::len), Some(2));
        let named = reply_schema(&specs, &ToolChoice::Named("reason".into()));
        assert_eq!(
            named["properties"]["call"]["properties"]["name"]["const"],
            "reason"
        );
    }

    #[test]
    fn the_request_carries_the_schema_and_no_native_tools() {
        let texts = Texts::builtin(crate::solve::Language::En);
        let call = crate::message::ToolCall {
            id: "c1".into(),
            name: "reason".into(),
            arguments: r#"{"q":"x"}"#.into(),
        };
        let req = Structured.request(
            vec![
                Message::system("s"),
                Message::user("p"),
                Message::assistant_with_calls("", vec![call.clone()], Some("thinking".into())),
                Message::tool_result(&call, "42"),
            ],
            &[spec("reason")],
            &ToolChoice::Auto,
            &texts,
        );
        assert!(req.tools.is_empty());
        let format = req.response_format.as_ref().map(|f| f.name.as_str());
        assert_eq!(format, Some(SCHEMA_NAME));
        assert_eq!(
            req.messages[2].content,
            r#"{"analysis":"thinking","call":{"name":"reason","parameters":{"q":"x"}}}"#,
            "{}",
            req.messages[2].content
        );
        assert!(req.messages[3].content.starts_with("<tool_response"));
    }
}
