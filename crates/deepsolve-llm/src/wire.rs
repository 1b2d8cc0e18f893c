//! The OpenAI chat-completions wire format: the request body we send and the stream chunks we
//! read back.
//!
//! Chunk types are deliberately lenient (every field optional, loosely typed fields kept as
//! [`Value`]) because OpenAI-compatible servers disagree on details: `null` vs missing,
//! `content` as a string or an array of parts, `arguments` as a string or an object.

use base64::display::Base64Display;
use base64::engine::general_purpose::STANDARD;
use deepsolve_core::{
    ChatRequest, Message, ReplySchema, Role, ToolCall, ToolChoice, ToolSpec, TurnImage,
};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value, json};

/// Request fields that `extra_body` may never replace: they define what is asked and how the
/// reply is read.
pub const RESERVED_KEYS: [&str; 3] = ["model", "messages", "stream"];

/// Longest provider error message we keep (in characters).
pub const MAX_ERROR_MESSAGE_CHARS: usize = 500;

/// `{base_url}/chat/completions`, with any trailing slash of `base_url` dropped.
pub fn chat_completions_url(base_url: &str) -> String {
    format!("{}/chat/completions", base_url.trim_end_matches('/'))
}

/// `{base_url}/models`, with any trailing slash of `base_url` dropped.
pub fn models_url(base_url: &str) -> String {
    format!("{}/models", base_url.trim_end_matches('/'))
}

/// Builds the streaming request body for `request`, then merges `extra_body` on top
/// (see [`crate::ClientConfig::extra_body`] for the merge rules).
pub fn build_request_body(
    model: &str,
    request: &ChatRequest,
    extra_body: &Map<String, Value>,
) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    let messages = request.messages.iter().map(message_to_wire).collect();
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools = request.tools.iter().map(tool_to_wire).collect();
        body.insert("tools".into(), Value::Array(tools));
        body.insert(
            "tool_choice".into(),
            tool_choice_value(&request.tool_choice),
        );
    }
    body.insert("max_tokens".into(), json!(request.max_tokens));
    if let Some(temperature) = temperature_value(request.temperature) {
        body.insert("temperature".into(), temperature);
    }
    if !request.stop.is_empty() {
        body.insert("stop".into(), json!(request.stop));
    }
    if let Some(format) = &request.response_format {
        body.insert("response_format".into(), response_format_value(format));
    }
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({ "include_usage": true }));
    merge_extra_body(&mut body, extra_body);
    Value::Object(body)
}

/// OpenAI's `response_format` for a JSON Schema (llama.cpp's server, vLLM and Ollama's
/// OpenAI route read the same shape). Not `strict`: OpenAI's strict mode refuses a root
/// `anyOf`, which the structured-output protocol's schema is.
fn response_format_value(format: &ReplySchema) -> Value {
    json!({
        "type": "json_schema",
        "json_schema": {"name": format.name, "schema": format.schema},
    })
}

fn merge_extra_body(body: &mut Map<String, Value>, extra_body: &Map<String, Value>) {
    for (key, value) in extra_body {
        if RESERVED_KEYS.contains(&key.as_str()) {
            continue;
        }
        if value.is_null() {
            body.remove(key);
        } else {
            body.insert(key.clone(), value.clone());
        }
    }
}

fn tool_choice_value(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto | ToolChoice::AutoAmong(_) => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required | ToolChoice::Among(_) => json!("required"),
        ToolChoice::Named(name) => json!({"type": "function", "function": {"name": name}}),
    }
}

/// An `f32` as the short decimal a human wrote (`0.3`, not `0.30000001192092896`);
/// non-finite values are left out so the server default applies.
fn temperature_value(temperature: f32) -> Option<Value> {
    if !temperature.is_finite() {
        return None;
    }
    let decimal: f64 = temperature.to_string().parse().ok()?;
    Some(json!(decimal))
}

/// One engine message in OpenAI shape.
///
/// Assistant messages with tool calls carry `content: null` when they have no text (the
/// OpenAI spec's form, accepted by Ollama, vLLM and llama.cpp) and their `reasoning_content`
/// when present (DeepSeek thinking mode rejects tool-call turns without it).
pub fn message_to_wire(message: &Message) -> Value {
    match message.role {
        Role::System => json!({ "role": "system", "content": message.content }),
        Role::User if message.has_images() => {
            json!({ "role": "user", "content": content_parts(message) })
        }
        Role::User => json!({ "role": "user", "content": message.content }),
        Role::Tool => json!({
            "role": "tool",
            "tool_call_id": message.tool_call_id.clone().unwrap_or_default(),
            "content": message.content,
        }),
        Role::Assistant => assistant_to_wire(message),
    }
}

/// A message with images as OpenAI content parts: each image as an `image_url` part with a
/// `data:` URL, then the text (when there is any). Images first: their parts stay byte-stable
/// while text is appended to the message (prefix caching), and vision models read a figure
/// before the question about it best.
fn content_parts(message: &Message) -> Value {
    let mut parts: Vec<Value> = message
        .images
        .iter()
        .map(|image| {
            json!({
                "type": "image_url",
                "image_url": { "url": DataUrl(image).to_string() },
            })
        })
        .collect();
    if !message.content.is_empty() {
        parts.push(json!({ "type": "text", "text": message.content }));
    }
    Value::Array(parts)
}

/// An image as a `data:` URL (`data:image/png;base64,…`). Serialised as it is displayed
/// (`collect_str`): the request body gets the base64 without a second copy of the image.
struct DataUrl<'a>(&'a TurnImage);

impl Serialize for DataUrl<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl std::fmt::Display for DataUrl<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "data:{};base64,{}",
            self.0.mime,
            Base64Display::new(&self.0.bytes, &STANDARD)
        )
    }
}

fn assistant_to_wire(message: &Message) -> Value {
    let mut out = Map::new();
    out.insert("role".into(), json!("assistant"));
    if message.tool_calls.is_empty() {
        out.insert("content".into(), json!(message.content));
        return Value::Object(out);
    }
    let content = if message.content.is_empty() {
        Value::Null
    } else {
        json!(message.content)
    };
    out.insert("content".into(), content);
    let calls = message.tool_calls.iter().map(tool_call_to_wire).collect();
    out.insert("tool_calls".into(), Value::Array(calls));
    if let Some(reasoning) = message
        .reasoning_content
        .as_deref()
        .filter(|r| !r.is_empty())
    {
        out.insert("reasoning_content".into(), json!(reasoning));
    }
    Value::Object(out)
}

fn tool_call_to_wire(call: &ToolCall) -> Value {
    json!({
        "id": call.id,
        "type": "function",
        "function": { "name": call.name, "arguments": call.arguments },
    })
}

/// The request body of [`build_request_body`] as JSON bytes, written straight from `request`:
/// no copy of the conversation is built on the way (it can hold megabytes of model output),
/// and the buffer is sized exactly, once. The JSON is the same as `build_request_body`'s.
pub fn request_body_bytes(
    model: &str,
    request: &ChatRequest,
    extra_body: &Map<String, Value>,
) -> Vec<u8> {
    let empty = ChatRequest {
        messages: Vec::new(),
        tools: request.tools.clone(),
        tool_choice: request.tool_choice.clone(),
        max_tokens: request.max_tokens,
        temperature: request.temperature,
        stop: request.stop.clone(),
        response_format: request.response_format.clone(),
    };
    let Value::Object(fields) = build_request_body(model, &empty, extra_body) else {
        return Vec::new();
    };
    let body = Body {
        fields: &fields,
        messages: &request.messages,
    };
    let mut size = ByteCount(0);
    // Neither writer can fail, and every value here encodes: strings, numbers, maps.
    let _ = serde_json::to_writer(&mut size, &body);
    let mut out = Vec::with_capacity(size.0);
    let _ = serde_json::to_writer(&mut out, &body);
    out
}

/// Counts the bytes written to it.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The body's small fields, with `messages` written from the request itself.
struct Body<'a> {
    fields: &'a Map<String, Value>,
    messages: &'a [Message],
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.fields.len()))?;
        for (key, value) in self.fields {
            if key == "messages" {
                map.serialize_entry(key, &WireMessages(self.messages))?;
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

struct WireMessages<'a>(&'a [Message]);

impl Serialize for WireMessages<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(WireMessage))
    }
}

/// One message in the shape of [`message_to_wire`], keys in the same (sorted) order.
struct WireMessage<'a>(&'a Message);

impl Serialize for WireMessage<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let m = self.0;
        let mut map = serializer.serialize_map(None)?;
        let role = match m.role {
            Role::System => "system",
            Role::User => "user",
            Role::Tool => "tool",
            Role::Assistant => "assistant",
        };
        let with_calls = m.role == Role::Assistant && !m.tool_calls.is_empty();
        if with_calls && m.content.is_empty() {
            map.serialize_entry("content", &Value::Null)?;
        } else if m.role == Role::User && m.has_images() {
            map.serialize_entry("content", &WireParts(m))?;
        } else {
            map.serialize_entry("content", &m.content)?;
        }
        let reasoning = m.reasoning_content.as_deref().filter(|r| !r.is_empty());
        if let (true, Some(reasoning)) = (with_calls, reasoning) {
            map.serialize_entry("reasoning_content", reasoning)?;
        }
        map.serialize_entry("role", role)?;
        if m.role == Role::Tool {
            let id = m.tool_call_id.as_deref().unwrap_or_default();
            map.serialize_entry("tool_call_id", id)?;
        }
        if with_calls {
            let calls: Vec<WireCall<'_>> = m.tool_calls.iter().map(WireCall).collect();
            map.serialize_entry("tool_calls", &calls)?;
        }
        map.end()
    }
}

/// A message's content parts in the shape of `content_parts`, keys in the same order.
struct WireParts<'a>(&'a Message);

impl Serialize for WireParts<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct ImageUrl<'a> {
            url: DataUrl<'a>,
        }
        #[derive(Serialize)]
        struct ImagePart<'a> {
            image_url: ImageUrl<'a>,
            r#type: &'static str,
        }
        #[derive(Serialize)]
        struct TextPart<'a> {
            text: &'a str,
            r#type: &'static str,
        }
        let m = self.0;
        let text = usize::from(!m.content.is_empty());
        let mut seq = serializer.serialize_seq(Some(m.images.len() + text))?;
        for image in m.images.iter() {
            seq.serialize_element(&ImagePart {
                image_url: ImageUrl {
                    url: DataUrl(image),
                },
                r#type: "image_url",
            })?;
        }
        if text == 1 {
            seq.serialize_element(&TextPart {
                text: &m.content,
                r#type: "text",
            })?;
        }
        seq.end()
    }
}

/// One call in the shape of `tool_call_to_wire`.
struct WireCall<'a>(&'a ToolCall);

impl Serialize for WireCall<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Function<'a> {
            arguments: &'a str,
            name: &'a str,
        }
        let call = self.0;
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry(
            "function",
            &Function {
                arguments: &call.arguments,
                name: &call.name,
            },
        )?;
        map.serialize_entry("id", &call.id)?;
        map.serialize_entry("type", "function")?;
        map.end()
    }
}

/// One offered tool in OpenAI shape.
pub fn tool_to_wire(tool: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    })
}

// ---------------------------------------------------------------------------------------------
// Reading: stream chunks

/// One `data:` payload of the stream (or a whole non-streaming reply: `message` is accepted
/// as an alias of `delta`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ChatChunk {
    #[serde(default, deserialize_with = "null_as_default")]
    pub choices: Vec<ChunkChoice>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// llama.cpp's server: its own timings, with the prompt tokens taken from its cache.
    #[serde(default)]
    pub timings: Option<WireTimings>,
    /// A mid-stream error (`{"error": {...}}` or `{"error": "text"}`).
    #[serde(default)]
    pub error: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ChunkChoice {
    #[serde(default)]
    pub index: Option<u64>,
    #[serde(default, alias = "message")]
    pub delta: Option<ChunkDelta>,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ChunkDelta {
    /// A string, or (Mistral and others) an array of `{type, text}` parts.
    #[serde(default)]
    pub content: Option<Value>,
    /// DeepSeek, vLLM, SGLang, DashScope.
    #[serde(default)]
    pub reasoning_content: Option<Value>,
    /// OpenRouter, newer vLLM, Ollama.
    #[serde(default)]
    pub reasoning: Option<Value>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub tool_calls: Vec<WireToolCallDelta>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct WireToolCallDelta {
    #[serde(default)]
    pub index: Option<u64>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub function: Option<WireFunctionDelta>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct WireFunctionDelta {
    #[serde(default)]
    pub name: Option<String>,
    /// Normally a string fragment; some servers send a whole JSON object.
    #[serde(default)]
    pub arguments: Option<Value>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct WireUsage {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    #[serde(default)]
    pub total_tokens: Option<u64>,
    /// OpenAI's (and newer llama.cpp's) `prompt_tokens_details.cached_tokens`.
    #[serde(default)]
    pub prompt_tokens_details: Option<WirePromptDetails>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct WirePromptDetails {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

/// llama.cpp server's `timings` (in its last chunk): `cache_n` prompt tokens came from its
/// KV cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
pub struct WireTimings {
    #[serde(default)]
    pub cache_n: Option<u64>,
}

fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

// ---------------------------------------------------------------------------------------------
// Reading: error payloads

/// The fields of a provider error we decide on, parsed from any of the shapes seen in the wild:
/// `{"error": {"message", "code", "type", "param"}}` (OpenAI), `{"error": "text"}` (Ollama),
/// a top-level `{"message", "type", "code": 400}` (older vLLM), `{"detail": "text"}` (FastAPI
/// servers) or a plain-text body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderError {
    /// Truncated to [`MAX_ERROR_MESSAGE_CHARS`].
    pub message: String,
    /// `code` as text (`"context_length_exceeded"`, or `"400"` when numeric).
    pub code: Option<String>,
    /// `type`.
    pub kind: Option<String>,
    /// `param` (`"tools"`, `"tool_choice"`, …).
    pub param: Option<String>,
    /// An HTTP status carried inside the payload (numeric `code` or `status`), useful for
    /// errors that arrive mid-stream under a 200.
    pub status: Option<u16>,
}

impl ProviderError {
    /// Parses an HTTP error body.
    pub fn from_body(body: &str) -> Self {
        match serde_json::from_str::<Value>(body) {
            Ok(value) if value.is_object() => Self::from_value(&value),
            _ => ProviderError {
                message: truncate_message(body.trim()),
                ..Default::default()
            },
        }
    }

    /// Parses an error JSON value: an envelope with `error`, or the error object itself.
    pub fn from_value(value: &Value) -> Self {
        let inner = value.get("error").unwrap_or(value);
        if let Some(text) = inner.as_str() {
            return ProviderError {
                message: truncate_message(text),
                status: numeric_status(value.get("code").or(value.get("status"))),
                ..Default::default()
            };
        }
        let text_field = |name: &str| inner.get(name).and_then(scalar_text);
        let message = text_field("message")
            .or_else(|| value.get("detail").and_then(scalar_text))
            .unwrap_or_else(|| inner.to_string());
        ProviderError {
            message: truncate_message(&message),
            code: text_field("code"),
            kind: text_field("type"),
            param: text_field("param"),
            status: numeric_status(inner.get("code").or(inner.get("status"))),
        }
    }

    /// `code` and `type`, lower-cased, for matching on machine-readable fields.
    pub(crate) fn codes(&self) -> impl Iterator<Item = String> + '_ {
        self.code
            .iter()
            .chain(self.kind.iter())
            .map(|s| s.to_ascii_lowercase())
    }
}

fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn numeric_status(value: Option<&Value>) -> Option<u16> {
    let value = value?;
    let number = value
        .as_u64()
        .or_else(|| value.as_str().and_then(|s| s.parse().ok()))?;
    u16::try_from(number)
        .ok()
        .filter(|s| (100..=599).contains(s))
}

/// Truncates at a character boundary, marking the cut.
pub fn truncate_message(text: &str) -> String {
    match text.char_indices().nth(MAX_ERROR_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_bytes_are_the_body_value_written_out() {
        let call = |id: &str, args: &str| ToolCall {
            id: id.into(),
            name: "python".into(),
            arguments: args.into(),
        };
        let mut with_reasoning = Message::assistant_with_calls(
            "",
            vec![call("c1", "{\"code\":\"print(1)\"}")],
            Some("think \"hard\"\n".into()),
        );
        with_reasoning.name = Some("ignored".into());
        let request = ChatRequest {
            messages: vec![
                Message::system("sys"),
                Message::user_with_images("look \"here\"", vec![image(), image()].into()),
                Message::user_with_images("", vec![image()].into()),
                Message::user("é \u{1F980} \\ \""),
                with_reasoning,
                Message::tool_result(&call("c1", ""), "1\n"),
                Message::assistant_with_calls(
                    "text too",
                    vec![call("c2", "")],
                    Some(String::new()),
                ),
                Message::tool_result(&call("c2", ""), ""),
                Message::assistant("done"),
            ],
            tools: vec![ToolSpec {
                name: "python".into(),
                description: "runs code".into(),
                parameters: json!({"type": "object"}),
            }],
            tool_choice: ToolChoice::Auto,
            max_tokens: 100,
            temperature: 0.3,
            stop: vec!["<tool_response>".into()],
            response_format: None,
        };
        let mut extra = Map::new();
        extra.insert("enable_thinking".into(), json!(false));
        extra.insert("stream_options".into(), Value::Null);
        extra.insert("messages".into(), json!("cannot replace"));
        for extra in [Map::new(), extra] {
            let value = build_request_body("m", &request, &extra);
            let bytes = request_body_bytes("m", &request, &extra);
            assert_eq!(serde_json::to_vec(&value).expect("json"), bytes);
        }
    }

    #[test]
    fn a_reply_schema_is_sent_as_response_format_json_schema() {
        let mut request = ChatRequest {
            messages: vec![Message::user("q")],
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            max_tokens: 10,
            temperature: 0.0,
            stop: Vec::new(),
            response_format: None,
        };
        let plain = build_request_body("m", &request, &Map::new());
        assert!(plain.get("response_format").is_none());
        request.response_format = Some(ReplySchema {
            name: "deepsolve_reply".into(),
            schema: json!({"type": "object", "required": ["answer"]}),
        });
        let body = build_request_body("m", &request, &Map::new());
        assert_eq!(
            body["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "deepsolve_reply",
                   "schema": {"type": "object", "required": ["answer"]}}})
        );
        let bytes = request_body_bytes("m", &request, &Map::new());
        assert_eq!(serde_json::to_vec(&body).expect("json"), bytes);
    }

    #[test]
    fn a_named_tool_choice_is_the_openai_function_object() {
        let request = ChatRequest {
            messages: vec![Message::user("q")],
            tools: vec![ToolSpec {
                name: "solve_plan".into(),
                description: "plans".into(),
                parameters: json!({"type": "object"}),
            }],
            tool_choice: ToolChoice::Named("solve_plan".into()),
            max_tokens: 10,
            temperature: 0.0,
            stop: Vec::new(),
            response_format: None,
        };
        let body = build_request_body("m", &request, &Map::new());
        assert_eq!(
            body["tool_choice"],
            json!({"type": "function", "function": {"name": "solve_plan"}})
        );
    }

    fn image() -> TurnImage {
        TurnImage {
            id: "image_1".into(),
            name: "a.png".into(),
            mime: "image/png".into(),
            width: 1,
            height: 1,
            bytes: std::sync::Arc::from(&b"\x89PNG\xff\x00"[..]),
        }
    }

    #[test]
    fn images_go_as_data_url_parts_before_the_text_and_text_alone_as_a_string() {
        let with = message_to_wire(&Message::user_with_images(
            "Find angle C.",
            vec![image()].into(),
        ));
        assert_eq!(
            with,
            json!({"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR/8A"}},
                {"type": "text", "text": "Find angle C."}
            ]})
        );
        let alone = message_to_wire(&Message::user_with_images("", vec![image()].into()));
        assert_eq!(alone["content"].as_array().map(Vec::len), Some(1));
        assert_eq!(
            message_to_wire(&Message::user("Find angle C.")),
            json!({"role": "user", "content": "Find angle C."})
        );
    }

    #[test]
    fn parses_the_common_error_shapes() {
        let openai = ProviderError::from_body(
            r#"{"error":{"message":"too long","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
        );
        assert_eq!(openai.message, "too long");
        assert_eq!(openai.code.as_deref(), Some("context_length_exceeded"));
        assert_eq!(openai.kind.as_deref(), Some("invalid_request_error"));
        assert_eq!(openai.param.as_deref(), Some("messages"));

        let ollama = ProviderError::from_body(r#"{"error":"model does not support tools"}"#);
        assert_eq!(ollama.message, "model does not support tools");

        let vllm = ProviderError::from_body(
            r#"{"object":"error","message":"bad","type":"BadRequestError","param":null,"code":400}"#,
        );
        assert_eq!(vllm.message, "bad");
        assert_eq!(vllm.code.as_deref(), Some("400"));
        assert_eq!(vllm.status, Some(400));

        let plain = ProviderError::from_body("  upstream exploded \n");
        assert_eq!(plain.message, "upstream exploded");

        let fastapi = ProviderError::from_body(r#"{"detail":"Not Found"}"#);
        assert_eq!(fastapi.message, "Not Found");
    }

    #[test]
    fn truncates_long_messages_on_a_char_boundary() {
        let long = "é".repeat(MAX_ERROR_MESSAGE_CHARS + 10);
        let cut = truncate_message(&long);
        assert_eq!(cut.chars().count(), MAX_ERROR_MESSAGE_CHARS + 1);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn temperature_is_sent_as_written() {
        assert_eq!(temperature_value(0.3), Some(json!(0.3)));
        assert_eq!(temperature_value(f32::NAN), None);
    }

    #[test]
    fn chunks_tolerate_nulls_and_message_alias() {
        let chunk: ChatChunk =
            serde_json::from_str(r#"{"choices":null,"usage":{"prompt_tokens":3}}"#).expect("ok");
        assert!(chunk.choices.is_empty());
        assert_eq!(chunk.usage.and_then(|u| u.prompt_tokens), Some(3));
        let whole: ChatChunk = serde_json::from_str(
            r#"{"choices":[{"index":0,"message":{"content":"hi","tool_calls":null},"finish_reason":"stop"}]}"#,
        )
        .expect("ok");
        let delta = whole.choices[0].delta.as_ref().expect("delta");
        assert_eq!(delta.content, Some(json!("hi")));
    }
}
