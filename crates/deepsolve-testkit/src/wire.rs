//! The OpenAI chat wire format, parsed and built here so the testkit never depends on the
//! client crate it tests (`deepsolve-llm`): two independent readings of the format catch more
//! bugs than one shared one.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use deepsolve_core::{ChatRequest, Message, Role, ToolCall, ToolChoice, TurnImage};
use serde_json::{Map, Value, json};

/// Why a wire request could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("the request body is not a JSON object")]
    NotAnObject,
    #[error("the request has no 'messages' array")]
    NoMessages,
    #[error("message #{index}: {message}")]
    BadMessage { index: usize, message: String },
}

/// The text of a wire `content`: a string, `null` (empty) or an array of parts (the `text`
/// parts joined; image parts are counted as `[image]` so they are not "empty").
pub fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|p| match p.get("type").and_then(Value::as_str) {
                Some("text") => p
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                Some(_) => "[image]".to_string(),
                None => String::new(),
            })
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

fn parse_role(role: &str) -> Option<Role> {
    match role {
        "system" | "developer" => Some(Role::System),
        "user" => Some(Role::User),
        "assistant" => Some(Role::Assistant),
        "tool" => Some(Role::Tool),
        _ => None,
    }
}

/// `arguments` as text: providers send a string; an object is re-serialised, not rejected.
fn arguments_text(args: Option<&Value>) -> String {
    match args {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn parse_tool_calls(value: Option<&Value>) -> Vec<ToolCall> {
    value
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .map(|c| ToolCall {
                    id: c
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    name: c
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    arguments: arguments_text(c.pointer("/function/arguments")),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The text parts of a wire `content` joined, and its image parts: the engine's shape of a
/// message with images (text in `content`, images in `images`). An image part this reader
/// cannot decode (not a `data:` URL, bad base64) is left out; the invariants name it.
fn content_and_images(content: Option<&Value>) -> (String, Arc<[TurnImage]>) {
    let Some(Value::Array(parts)) = content else {
        return (content_text(content), Arc::default());
    };
    let mut text = String::new();
    let mut images = Vec::new();
    for part in parts {
        match part.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(part.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("image_url") => {
                let url = part.pointer("/image_url/url").and_then(Value::as_str);
                if let Some(image) = url.and_then(|u| image_from_data_url(u, images.len() + 1)) {
                    images.push(image);
                }
            }
            _ => {}
        }
    }
    (text, images.into())
}

/// A `data:<mime>;base64,<payload>` URL as the `n`-th image of a message (its size read
/// from its header when it is a format the testkit reads; 0×0 otherwise).
pub fn image_from_data_url(url: &str, n: usize) -> Option<TurnImage> {
    let (mime, payload) = url.strip_prefix("data:")?.split_once(";base64,")?;
    let bytes = STANDARD.decode(payload).ok()?;
    let (width, height) = crate::images::dimensions(&bytes).unwrap_or((0, 0));
    Some(TurnImage {
        id: format!("image_{n}"),
        name: format!("image_{n}"),
        mime: mime.to_string(),
        width,
        height,
        bytes: bytes.into(),
    })
}

/// An image as the `data:` URL a client sends.
pub fn data_url(image: &TurnImage) -> String {
    format!(
        "data:{};base64,{}",
        image.mime,
        STANDARD.encode(&image.bytes)
    )
}

/// One wire message as the engine's [`Message`].
pub fn message_from_wire(index: usize, value: &Value) -> Result<Message, WireError> {
    let bad = |message: &str| WireError::BadMessage {
        index,
        message: message.to_string(),
    };
    let role = value
        .get("role")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no role"))?;
    let role = parse_role(role).ok_or_else(|| bad(&format!("unknown role '{role}'")))?;
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
    let (content, images) = content_and_images(value.get("content"));
    Ok(Message {
        role,
        content,
        images,
        tool_calls: parse_tool_calls(value.get("tool_calls")),
        tool_call_id: text("tool_call_id"),
        name: text("name"),
        reasoning_content: text("reasoning_content"),
    })
}

/// Every message of a wire request body.
pub fn messages_from_wire(body: &Value) -> Result<Vec<Message>, WireError> {
    if !body.is_object() {
        return Err(WireError::NotAnObject);
    }
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or(WireError::NoMessages)?;
    messages
        .iter()
        .enumerate()
        .map(|(i, m)| message_from_wire(i, m))
        .collect()
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// One [`Message`] in wire shape (assistant content `null` when it only carries tool calls).
pub fn message_to_wire(message: &Message) -> Value {
    let mut out = Map::new();
    out.insert("role".into(), json!(role_name(message.role)));
    let content = if message.content.is_empty() && !message.tool_calls.is_empty() {
        Value::Null
    } else if message.has_images() {
        let mut parts: Vec<Value> = message
            .images
            .iter()
            .map(|i| json!({"type": "image_url", "image_url": {"url": data_url(i)}}))
            .collect();
        if !message.content.is_empty() {
            parts.push(json!({"type": "text", "text": message.content}));
        }
        Value::Array(parts)
    } else {
        json!(message.content)
    };
    out.insert("content".into(), content);
    if !message.tool_calls.is_empty() {
        let calls: Vec<Value> = message
            .tool_calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some(id) = &message.tool_call_id {
        out.insert("tool_call_id".into(), json!(id));
    }
    if let Some(reasoning) = &message.reasoning_content {
        out.insert("reasoning_content".into(), json!(reasoning));
    }
    Value::Object(out)
}

/// A [`ChatRequest`] as the JSON body an OpenAI-compatible client would send. Used to run the
/// same invariant checks in-process as over HTTP.
pub fn request_to_wire(request: &ChatRequest, model: &str) -> Value {
    let mut body = json!({
        "model": model,
        "messages": request.messages.iter().map(message_to_wire).collect::<Vec<_>>(),
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect();
        body["tool_choice"] = tool_choice_value(&request.tool_choice);
    }
    if !request.stop.is_empty() {
        body["stop"] = json!(request.stop);
    }
    if let Some(format) = &request.response_format {
        body["response_format"] = json!({
            "type": "json_schema",
            "json_schema": {"name": format.name, "schema": format.schema},
        });
    }
    body
}

/// `tool_choice` as an OpenAI-compatible server receives it (the same shape as the client's).
pub(crate) fn tool_choice_value(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto | ToolChoice::AutoAmong(_) => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required | ToolChoice::Among(_) => json!("required"),
        ToolChoice::Named(name) => json!({"type": "function", "function": {"name": name}}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deepsolve_core::ToolSpec;

    #[test]
    fn messages_round_trip_through_the_wire() {
        let call = ToolCall {
            id: "c1".into(),
            name: "reason".into(),
            arguments: r#"{"query":"q"}"#.into(),
        };
        let messages = [
            Message::system("s"),
            Message::user("u"),
            Message::assistant_with_calls("", vec![call.clone()], Some("think".into())),
            Message::tool_result(&call, "r"),
        ];
        let wire: Vec<Value> = messages.iter().map(message_to_wire).collect();
        assert_eq!(wire[2]["content"], Value::Null);
        let back = messages_from_wire(&json!({"messages": wire})).unwrap();
        assert_eq!(back[..3], messages[..3]);
        // The tool name is not sent on the wire.
        assert_eq!(back[3].tool_call_id.as_deref(), Some("c1"));
    }

    #[test]
    fn content_parts_and_object_arguments_are_read() {
        let body = json!({"messages": [
            {"role": "user", "content": [{"type": "text", "text": "look: "}, {"type": "image_url", "image_url": {"url": "x"}}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": {"k": 1}}}]}
        ]});
        let m = messages_from_wire(&body).unwrap();
        assert_eq!(m[0].content, "look: ");
        assert!(m[0].images.is_empty(), "not a data: URL");
        assert_eq!(m[1].tool_calls[0].arguments, r#"{"k":1}"#);
    }

    #[test]
    fn images_round_trip_as_data_url_parts() {
        let png = crate::images::solid_png(3, 2, [0, 200, 0]);
        let image = image_from_data_url(
            &format!("data:image/png;base64,{}", STANDARD.encode(&png)),
            1,
        )
        .expect("an image");
        assert_eq!(
            (image.width, image.height, image.mime.as_str()),
            (3, 2, "image/png")
        );
        let message = Message::user_with_images("Which colour?", vec![image.clone()].into());
        let wire = message_to_wire(&message);
        assert_eq!(wire["content"][0]["type"], "image_url");
        assert_eq!(wire["content"][1]["text"], "Which colour?");
        let back = message_from_wire(0, &wire).unwrap();
        assert_eq!(back.content, "Which colour?");
        assert_eq!(back.images[..], [image]);
    }

    #[test]
    fn bad_bodies_are_typed_errors() {
        assert_eq!(messages_from_wire(&json!([])), Err(WireError::NotAnObject));
        assert_eq!(messages_from_wire(&json!({})), Err(WireError::NoMessages));
        assert!(matches!(
            messages_from_wire(&json!({"messages": [{"role": "robot"}]})),
            Err(WireError::BadMessage { index: 0, .. })
        ));
    }

    #[test]
    fn request_to_wire_declares_tools_and_choice() {
        let req = ChatRequest {
            messages: vec![Message::system("s"), Message::user("u")],
            tools: vec![ToolSpec {
                name: "reason".into(),
                description: "d".into(),
                parameters: json!({"type": "object"}),
            }],
            tool_choice: ToolChoice::None,
            max_tokens: 10,
            temperature: 0.3,
            stop: vec!["<tool_response>".into()],
            response_format: None,
        };
        let body = request_to_wire(&req, "m");
        assert_eq!(body["tool_choice"], "none");
        assert_eq!(body["tools"][0]["function"]["name"], "reason");
        assert_eq!(body["stop"][0], "<tool_response>");
        let bare = ChatRequest {
            tools: vec![],
            ..req
        };
        let body = request_to_wire(&bare, "m");
        assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
    }
}
