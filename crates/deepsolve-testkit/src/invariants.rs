//! Request invariants: properties every chat request the engine sends must have — one leading
//! system message, every tool call paired with one result, only offered tools — in the
//! text-tag protocol too: no invented `<tool_response>` in assistant
//! text, no invented result ([`INVENTED_MARKER`]) anywhere, every `<tool_call>` answered. The mock checks them on every captured request, so a scenario that "works"
//! while sending a provider-rejectable request still fails its test.
//!
//! [`check_request`] is a pure function over the wire JSON, usable from any test.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::tags::{self, INVENTED_MARKER};
use crate::wire::content_text;

/// The engine's marker for injected blocks.
pub const MARKER_PREFIX: &str = "[deepsolve:";

/// Which optional rules apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvariantConfig {
    /// Fail a request whose messages are estimated (chars / 4) above this many tokens.
    pub max_prompt_tokens: Option<u64>,
    /// Demand exactly one `system` message, first (R6). On by default.
    pub require_system: bool,
    /// Demand that tool results directly follow their assistant message, as OpenAI does (a
    /// user message in between is a provider 400). On by default.
    pub tool_results_adjacent: bool,
    /// Demand that every tool named in history calls is declared in `tools`. Off by default:
    /// a model may call a tool that was not offered (the engine refuses it), and that call
    /// stays in the history legitimately.
    pub history_tools_offered: bool,
    /// Tags mode (no `tools`, stopped at `<tool_response>`): demand that the user message after
    /// an assistant message with `<tool_call>` blocks answers each with one `<tool_response>`,
    /// in order. On by default.
    pub tags_results_paired: bool,
}

impl Default for InvariantConfig {
    fn default() -> Self {
        InvariantConfig {
            max_prompt_tokens: None,
            require_system: true,
            tool_results_adjacent: true,
            history_tools_offered: false,
            tags_results_paired: true,
        }
    }
}

impl InvariantConfig {
    pub fn with_max_prompt_tokens(mut self, tokens: u64) -> Self {
        self.max_prompt_tokens = Some(tokens);
        self
    }
}

/// Every broken invariant of one request body, as human-readable lines (empty = clean).
pub fn check_request(body: &Value, config: &InvariantConfig) -> Vec<String> {
    let mut out = Vec::new();
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        out.push("the request has no 'messages' array".to_string());
        return out;
    };
    let views: Vec<View<'_>> = messages.iter().map(View::of).collect();
    check_system(&views, config, &mut out);
    check_pairing(&views, config, &mut out);
    check_unique_ids(&views, &mut out);
    check_empty(&views, &mut out);
    check_content_parts(messages, &mut out);
    check_alternation(&views, &mut out);
    check_tools(body, &views, config, &mut out);
    check_budget(&views, config, &mut out);
    check_no_invented_results(&views, &mut out);
    check_no_invented_marker(body, messages, &mut out);
    if config.tags_results_paired && is_tags_mode(body) {
        check_tags_pairing(&views, &mut out);
    }
    out
}

/// No `tools` declared and stopped at `<tool_response>`: the text-tag protocol.
fn is_tags_mode(body: &Value) -> bool {
    let no_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    let stops = match body.get("stop") {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    no_tools && stops.iter().any(|s| s.contains("<tool_response>"))
}

/// The parts of a wire message the rules read.
struct View<'a> {
    role: &'a str,
    content: String,
    calls: Vec<CallView<'a>>,
    tool_call_id: Option<&'a str>,
}

struct CallView<'a> {
    id: &'a str,
    name: &'a str,
    kind: Option<&'a str>,
    arguments: Option<&'a Value>,
}

impl<'a> View<'a> {
    fn of(message: &'a Value) -> Self {
        let calls = message
            .get("tool_calls")
            .and_then(Value::as_array)
            .map(|calls| {
                calls
                    .iter()
                    .map(|c| CallView {
                        id: c.get("id").and_then(Value::as_str).unwrap_or_default(),
                        name: c
                            .pointer("/function/name")
                            .and_then(Value::as_str)
                            .unwrap_or_default(),
                        kind: c.get("type").and_then(Value::as_str),
                        arguments: c.pointer("/function/arguments"),
                    })
                    .collect()
            })
            .unwrap_or_default();
        View {
            role: message.get("role").and_then(Value::as_str).unwrap_or("?"),
            content: content_text(message.get("content")),
            calls,
            tool_call_id: message.get("tool_call_id").and_then(Value::as_str),
        }
    }
}

fn check_system(views: &[View<'_>], config: &InvariantConfig, out: &mut Vec<String>) {
    let systems: Vec<usize> = (0..views.len())
        .filter(|&i| views[i].role == "system")
        .collect();
    if config.require_system {
        match systems.as_slice() {
            [] => out.push("there is no system message".to_string()),
            [0] => {}
            [first] => out.push(format!("the system message is #{first}, not first")),
            many => out.push(format!(
                "{} system messages (#{}); expected exactly one, first",
                many.len(),
                join_indices(many)
            )),
        }
    }
    for &i in systems.iter().filter(|&&i| i > 0) {
        if views[i].content.contains(MARKER_PREFIX) {
            out.push(format!(
                "message #{i}: a non-leading system message carries a '{MARKER_PREFIX}' marker (injected blocks must be user-role)"
            ));
        }
    }
}

fn join_indices(indices: &[usize]) -> String {
    indices
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", #")
}

/// Every call answered by exactly one result before the next assistant message; no orphans.
fn check_pairing(views: &[View<'_>], config: &InvariantConfig, out: &mut Vec<String>) {
    let mut pending: Vec<(&str, usize)> = Vec::new();
    let mut answered: HashSet<&str> = HashSet::new();
    let mut interrupted = false;
    for (i, view) in views.iter().enumerate() {
        match view.role {
            "assistant" => {
                flush_unanswered(&mut pending, Some(i), out);
                pending = view
                    .calls
                    .iter()
                    .filter(|c| !c.id.is_empty())
                    .map(|c| (c.id, i))
                    .collect();
                interrupted = false;
            }
            "tool" => {
                let Some(id) = view.tool_call_id else {
                    out.push(format!("message #{i}: tool message without a tool_call_id"));
                    continue;
                };
                if let Some(pos) = pending.iter().position(|(p, _)| *p == id) {
                    let (_, owner) = pending.remove(pos);
                    if interrupted && config.tool_results_adjacent {
                        out.push(format!(
                            "message #{i}: the result for '{id}' is separated from its assistant message #{owner} by a non-tool message"
                        ));
                    }
                    answered.insert(id);
                } else if answered.contains(id) {
                    out.push(format!(
                        "message #{i}: tool_call_id '{id}' is answered more than once"
                    ));
                } else {
                    out.push(format!(
                        "message #{i}: orphan tool result '{id}' (no matching call in the preceding assistant message)"
                    ));
                }
            }
            _ => interrupted |= !pending.is_empty(),
        }
    }
    flush_unanswered(&mut pending, None, out);
}

fn flush_unanswered(pending: &mut Vec<(&str, usize)>, next: Option<usize>, out: &mut Vec<String>) {
    for (id, owner) in pending.drain(..) {
        let before = match next {
            Some(n) => format!("before the next assistant message #{n}"),
            None => "by the end of the request".to_string(),
        };
        out.push(format!(
            "message #{owner}: tool call '{id}' has no tool result {before}"
        ));
    }
}

fn check_unique_ids(views: &[View<'_>], out: &mut Vec<String>) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, view) in views.iter().enumerate() {
        for call in &view.calls {
            if call.id.is_empty() {
                out.push(format!("message #{i}: a tool call has no id"));
            } else if let Some(first) = seen.insert(call.id, i) {
                out.push(format!(
                    "tool call id '{}' is used more than once (messages #{first} and #{i})",
                    call.id
                ));
            }
        }
    }
}

fn check_empty(views: &[View<'_>], out: &mut Vec<String>) {
    for (i, view) in views.iter().enumerate() {
        if view.content.trim().is_empty() && view.calls.is_empty() {
            out.push(format!("message #{i} ({}) is empty", view.role));
        }
    }
}

/// Content as a list of parts only where it carries an image: in a user message, each
/// image an `image_url` part whose URL is a `data:` URL of a PNG, JPEG, WebP or GIF that its
/// bytes really are (the engine never sends a URL for the provider to fetch), each text part
/// a string. Text alone goes as a plain string.
fn check_content_parts(messages: &[Value], out: &mut Vec<String>) {
    for (i, message) in messages.iter().enumerate() {
        let Some(parts) = message.get("content").and_then(Value::as_array) else {
            continue;
        };
        let role = message.get("role").and_then(Value::as_str).unwrap_or("?");
        if role != "user" {
            out.push(format!(
                "message #{i} ({role}): content parts outside a user message"
            ));
        }
        let mut images = 0;
        for (k, part) in parts.iter().enumerate() {
            match part.get("type").and_then(Value::as_str) {
                Some("text") if part.get("text").is_some_and(Value::is_string) => {}
                Some("image_url") => {
                    images += 1;
                    let url = part.pointer("/image_url/url").and_then(Value::as_str);
                    if let Some(problem) = image_url_problem(url) {
                        out.push(format!("message #{i}, part {k}: {problem}"));
                    }
                }
                other => out.push(format!(
                    "message #{i}, part {k}: not a text or image_url part ({other:?})"
                )),
            }
        }
        if images == 0 {
            out.push(format!(
                "message #{i}: content parts without an image (text goes as a plain string)"
            ));
        }
    }
}

/// What is wrong with an `image_url` part's URL, if anything.
fn image_url_problem(url: Option<&str>) -> Option<String> {
    const TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/webp", "image/gif"];
    let Some(url) = url else {
        return Some("an image_url part without a url".into());
    };
    let Some((mime, payload)) = url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"))
    else {
        return Some(format!(
            "the image is not a base64 data: URL ({})",
            head(url)
        ));
    };
    if !TYPES.contains(&mime) {
        return Some(format!(
            "the image's type {mime} is not PNG, JPEG, WebP or GIF"
        ));
    }
    use base64::Engine as _;
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(payload) else {
        return Some("the image's base64 does not decode".into());
    };
    let format = image::guess_format(&bytes).ok().map(|f| f.to_mime_type());
    (format != Some(mime)).then(|| format!("the image says {mime} but its bytes are {format:?}"))
}

fn head(text: &str) -> String {
    text.chars().take(40).collect()
}

fn check_alternation(views: &[View<'_>], out: &mut Vec<String>) {
    for (i, pair) in views.windows(2).enumerate() {
        let role = pair[0].role;
        if role == pair[1].role && (role == "user" || role == "assistant") {
            out.push(format!("messages #{i} and #{} are both '{role}'", i + 1));
        }
    }
}

/// The names declared in `tools`, with a violation for each malformed or repeated entry.
fn declared_tools<'a>(body: &'a Value, out: &mut Vec<String>) -> Vec<&'a str> {
    let mut names: Vec<&str> = Vec::new();
    let Some(tools) = body.get("tools").and_then(Value::as_array) else {
        return names;
    };
    for (i, tool) in tools.iter().enumerate() {
        let name = tool
            .pointer("/function/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if tool.get("type").and_then(Value::as_str) != Some("function") || name.is_empty() {
            out.push(format!("tools[{i}] is not a named function tool"));
        } else if names.contains(&name) {
            out.push(format!("tool '{name}' is declared twice"));
        } else {
            names.push(name);
        }
    }
    names
}

fn check_tools(body: &Value, views: &[View<'_>], config: &InvariantConfig, out: &mut Vec<String>) {
    let declared = declared_tools(body, out);
    match body.get("tool_choice") {
        None | Some(Value::Null) => {}
        Some(_) if declared.is_empty() => {
            out.push("tool_choice is set but no tools are declared".to_string())
        }
        Some(Value::String(choice)) if ["auto", "none", "required"].contains(&choice.as_str()) => {}
        Some(Value::Object(choice)) => {
            let name = choice
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !declared.contains(&name) {
                out.push(format!("tool_choice names '{name}', which is not declared"));
            }
        }
        Some(other) => out.push(format!("tool_choice {other} is not auto/none/required")),
    }
    for (i, view) in views.iter().enumerate() {
        for call in &view.calls {
            if call.name.is_empty() || call.kind != Some("function") {
                out.push(format!(
                    "message #{i}: tool call '{}' is not a named function call",
                    call.id
                ));
            }
            if !matches!(call.arguments, Some(Value::String(_))) {
                out.push(format!(
                    "message #{i}: the arguments of tool call '{}' are not a string",
                    call.id
                ));
            }
            if config.history_tools_offered && !declared.contains(&call.name) {
                out.push(format!(
                    "message #{i}: history calls '{}', which is not declared",
                    call.name
                ));
            }
        }
    }
}

/// The prompt size the budget rule uses: characters of contents, tool names and arguments,
/// over 4 (rounded up). Tool declarations are not counted.
pub fn estimate_prompt_tokens(body: &Value) -> u64 {
    body.get("messages")
        .and_then(Value::as_array)
        .map_or(0, |messages| {
            let views: Vec<View<'_>> = messages.iter().map(View::of).collect();
            views_chars(&views).div_ceil(4)
        })
}

fn views_chars(views: &[View<'_>]) -> u64 {
    let call_chars = |c: &CallView<'_>| {
        c.name.chars().count()
            + c.arguments
                .and_then(Value::as_str)
                .map_or(0, |a| a.chars().count())
    };
    views
        .iter()
        .map(|v| v.content.chars().count() + v.calls.iter().map(call_chars).sum::<usize>())
        .sum::<usize>() as u64
}

fn check_budget(views: &[View<'_>], config: &InvariantConfig, out: &mut Vec<String>) {
    let Some(max) = config.max_prompt_tokens else {
        return;
    };
    let tokens = views_chars(views).div_ceil(4);
    if tokens > max {
        out.push(format!(
            "the prompt is ~{tokens} tokens (chars/4), over the budget of {max}"
        ));
    }
}

fn check_no_invented_results(views: &[View<'_>], out: &mut Vec<String>) {
    for (i, view) in views.iter().enumerate() {
        if view.role == "assistant" && view.content.contains("<tool_response") {
            out.push(format!(
                "message #{i}: assistant content contains '<tool_response' (invented tool output must be cut)"
            ));
        }
    }
}

/// Only a model inventing tool results writes [`INVENTED_MARKER`] (see [`crate::TagsMode`]):
/// anywhere in a request, in any field, it means invented output was fed back.
fn check_no_invented_marker(body: &Value, messages: &[Value], out: &mut Vec<String>) {
    let mut found = false;
    for (i, message) in messages.iter().enumerate() {
        if message.to_string().contains(INVENTED_MARKER) {
            found = true;
            out.push(format!(
                "message #{i} carries '{INVENTED_MARKER}': a tool result the model invented reached the request"
            ));
        }
    }
    if !found && body.to_string().contains(INVENTED_MARKER) {
        out.push(format!(
            "the request carries '{INVENTED_MARKER}': a tool result the model invented reached it"
        ));
    }
}

/// Each assistant message's `<tool_call>` blocks answered, in order, by the `<tool_response>`
/// blocks of the user message right after it.
fn check_tags_pairing(views: &[View<'_>], out: &mut Vec<String>) {
    for (i, view) in views.iter().enumerate() {
        if view.role != "assistant" {
            continue;
        }
        let (_, calls) = tags::parse_calls(&view.content);
        if calls.is_empty() {
            continue;
        }
        let Some(next) = views.get(i + 1).filter(|v| v.role == "user") else {
            out.push(format!(
                "message #{i}: {} <tool_call> block(s) without a user message of results after them",
                calls.len()
            ));
            continue;
        };
        let (responses, _) = tags::parse_responses(&next.content);
        if responses.len() != calls.len() {
            out.push(format!(
                "message #{i}: {} <tool_call> block(s) but {} <tool_response> block(s) in message #{}",
                calls.len(),
                responses.len(),
                i + 1
            ));
            continue;
        }
        for (k, ((name, _), response)) in calls.iter().zip(&responses).enumerate() {
            // An attribute cannot hold quotes or angle brackets: a name the model wrote with
            // them is answered under the name without them.
            let attribute: String = name
                .chars()
                .filter(|c| !matches!(c, '"' | '<' | '>'))
                .collect();
            if !name.is_empty() && attribute != response.name {
                out.push(format!(
                    "message #{}: <tool_response> {k} names '{}' but answers a call to '{name}'",
                    i + 1,
                    response.name
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str, name: &str) -> Value {
        json!({"id": id, "type": "function", "function": {"name": name, "arguments": "{}"}})
    }

    fn tools() -> Value {
        json!([{"type": "function", "function": {"name": "reason", "description": "", "parameters": {}}}])
    }

    fn check(messages: Value) -> Vec<String> {
        check_request(
            &json!({"messages": messages, "tools": tools(), "tool_choice": "auto"}),
            &InvariantConfig::default(),
        )
    }

    fn assert_one(violations: Vec<String>, needle: &str) {
        assert!(
            violations.iter().any(|v| v.contains(needle)),
            "expected a violation containing {needle:?}, got {violations:#?}"
        );
    }

    #[test]
    fn image_parts_are_data_urls_of_what_their_bytes_are() {
        use base64::Engine as _;
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        let png = b64(&crate::images::solid_png(2, 2, [0, 0, 0]));
        let image = |url: String| json!({"type": "image_url", "image_url": {"url": url}});
        let with = |parts: Value| {
            check(json!([
                {"role": "system", "content": "s"},
                {"role": "user", "content": parts},
            ]))
        };
        let good = with(
            json!([image(format!("data:image/png;base64,{png}")), {"type": "text", "text": "u"}]),
        );
        assert!(good.is_empty(), "{good:#?}");
        assert_one(
            with(json!([image("https://example.com/a.png".into())])),
            "not a base64 data: URL",
        );
        assert_one(
            with(json!([image(format!("data:image/jpeg;base64,{png}"))])),
            "says image/jpeg",
        );
        assert_one(
            with(json!([image(format!(
                "data:image/png;base64,{}",
                b64(b"text")
            ))])),
            "says image/png",
        );
        assert_one(
            with(json!([{"type": "text", "text": "u"}])),
            "without an image",
        );
        assert_one(
            check(json!([
                {"role": "system", "content": "s"},
                {"role": "user", "content": "u"},
                {"role": "assistant", "content": [image(format!("data:image/png;base64,{png}"))]},
            ])),
            "outside a user message",
        );
    }

    #[test]
    fn a_good_request_is_clean() {
        let v = check(json!([
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": null, "tool_calls": [call("a", "reason"), call("b", "reason")]},
            {"role": "tool", "tool_call_id": "a", "content": "ra"},
            {"role": "tool", "tool_call_id": "b", "content": "rb"},
            {"role": "user", "content": "[deepsolve:progress] round 2 of 12"},
            {"role": "assistant", "content": "done"},
        ]));
        assert!(v.is_empty(), "{v:#?}");
    }

    #[test]
    fn system_rules() {
        assert_one(
            check(json!([{"role": "user", "content": "u"}])),
            "no system message",
        );
        assert_one(
            check(json!([{"role": "user", "content": "u"}, {"role": "system", "content": "s"}])),
            "not first",
        );
        let v = check(json!([
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "system", "content": "[deepsolve:progress] x"},
        ]));
        assert_one(v.clone(), "2 system messages");
        assert_one(v, "non-leading system message carries");
    }

    #[test]
    fn unanswered_calls_are_reported() {
        assert_one(
            check(json!([
                {"role": "system", "content": "s"},
                {"role": "user", "content": "u"},
                {"role": "assistant", "content": "", "tool_calls": [call("a", "reason")]},
                {"role": "assistant", "content": "x"},
            ])),
            "tool call 'a' has no tool result before the next assistant message #3",
        );
        assert_one(
            check(json!([
                {"role": "system", "content": "s"},
                {"role": "user", "content": "u"},
                {"role": "assistant", "content": "", "tool_calls": [call("a", "reason")]},
            ])),
            "by the end of the request",
        );
    }

    #[test]
    fn orphan_and_double_results_are_reported() {
        let v = check(json!([
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": "", "tool_calls": [call("a", "reason")]},
            {"role": "tool", "tool_call_id": "a", "content": "r"},
            {"role": "tool", "tool_call_id": "a", "content": "r"},
            {"role": "tool", "tool_call_id": "zz", "content": "r"},
            {"role": "tool", "content": "r"},
        ]));
        assert_one(v.clone(), "answered more than once");
        assert_one(v.clone(), "orphan tool result 'zz'");
        assert_one(v, "without a tool_call_id");
    }

    #[test]
    fn results_must_follow_their_call() {
        let messages = json!([
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": "", "tool_calls": [call("a", "reason")]},
            {"role": "user", "content": "nudge"},
            {"role": "tool", "tool_call_id": "a", "content": "r"},
        ]);
        assert_one(
            check(messages.clone()),
            "separated from its assistant message #2",
        );
        let lax = InvariantConfig {
            tool_results_adjacent: false,
            ..InvariantConfig::default()
        };
        assert!(check_request(&json!({"messages": messages}), &lax).is_empty());
    }

    #[test]
    fn duplicate_and_missing_ids_are_reported() {
        let v = check(json!([
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": "", "tool_calls": [call("a", "reason")]},
            {"role": "tool", "tool_call_id": "a", "content": "r"},
            {"role": "assistant", "content": "", "tool_calls": [call("a", "reason"), call("", "reason")]},
            {"role": "tool", "tool_call_id": "a", "content": "r"},
        ]));
        assert_one(v.clone(), "'a' is used more than once (messages #2 and #4)");
        assert_one(v, "a tool call has no id");
    }

    #[test]
    fn empty_messages_are_reported_except_assistant_calls() {
        let v = check(json!([
            {"role": "system", "content": "s"},
            {"role": "user", "content": "  "},
            {"role": "assistant", "content": null, "tool_calls": [call("a", "reason")]},
            {"role": "tool", "tool_call_id": "a", "content": ""},
            {"role": "assistant", "content": null, "reasoning_content": "thinking"},
        ]));
        assert_one(v.clone(), "message #1 (user) is empty");
        assert_one(v.clone(), "message #3 (tool) is empty");
        assert_one(v.clone(), "message #4 (assistant) is empty");
        assert!(!v.iter().any(|x| x.contains("#2 (assistant)")));
    }

    #[test]
    fn consecutive_roles_are_reported() {
        assert_one(
            check(json!([
                {"role": "system", "content": "s"},
                {"role": "user", "content": "u"},
                {"role": "user", "content": "[deepsolve:nudge] go"},
            ])),
            "messages #1 and #2 are both 'user'",
        );
        assert_one(
            check(json!([
                {"role": "system", "content": "s"},
                {"role": "user", "content": "u"},
                {"role": "assistant", "content": "a"},
                {"role": "assistant", "content": "b"},
            ])),
            "both 'assistant'",
        );
    }

    #[test]
    fn tool_choice_needs_tools() {
        let messages =
            json!([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]);
        let cfg = InvariantConfig::default();
        assert_one(
            check_request(&json!({"messages": messages, "tool_choice": "none"}), &cfg),
            "tool_choice is set but no tools are declared",
        );
        assert_one(
            check_request(
                &json!({"messages": messages, "tools": tools(), "tool_choice": "sometimes"}),
                &cfg,
            ),
            "is not auto/none/required",
        );
        assert_one(
            check_request(
                &json!({"messages": messages, "tools": tools(), "tool_choice": {"type": "function", "function": {"name": "web_search"}}}),
                &cfg,
            ),
            "names 'web_search', which is not declared",
        );
        assert!(check_request(&json!({"messages": messages}), &cfg).is_empty());
    }

    #[test]
    fn malformed_tools_and_calls_are_reported() {
        let body = json!({
            "messages": [
                {"role": "system", "content": "s"},
                {"role": "user", "content": "u"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "a", "function": {"name": "web_search", "arguments": {"q": 1}}}
                ]},
                {"role": "tool", "tool_call_id": "a", "content": "r"},
            ],
            "tools": [
                {"type": "function", "function": {"name": "reason"}},
                {"type": "function", "function": {"name": "reason"}},
                {"type": "function", "function": {}},
            ],
        });
        let cfg = InvariantConfig {
            history_tools_offered: true,
            ..InvariantConfig::default()
        };
        let v = check_request(&body, &cfg);
        assert_one(v.clone(), "tool 'reason' is declared twice");
        assert_one(v.clone(), "tools[2] is not a named function tool");
        assert_one(v.clone(), "tool call 'a' is not a named function call");
        assert_one(v.clone(), "arguments of tool call 'a' are not a string");
        assert_one(v, "history calls 'web_search', which is not declared");
        // Off by default: an unoffered call in history is legitimate.
        let v = check_request(&body, &InvariantConfig::default());
        assert!(!v.iter().any(|x| x.contains("history calls")));
    }

    #[test]
    fn prompt_budget_is_estimated_from_chars() {
        let body = json!({"messages": [
            {"role": "system", "content": "x".repeat(400)},
            {"role": "user", "content": "y".repeat(400)},
        ]});
        assert_eq!(estimate_prompt_tokens(&body), 200);
        let tight = InvariantConfig::default().with_max_prompt_tokens(199);
        assert_one(
            check_request(&body, &tight),
            "~200 tokens (chars/4), over the budget of 199",
        );
        let ok = InvariantConfig::default().with_max_prompt_tokens(200);
        assert!(check_request(&body, &ok).is_empty());
    }

    #[test]
    fn invented_tool_responses_are_reported() {
        assert_one(
            check(json!([
                {"role": "system", "content": "s"},
                {"role": "user", "content": "u"},
                {"role": "assistant", "content": "<tool_call>{}</tool_call>\n<tool_response>42</tool_response>"},
            ])),
            "contains '<tool_response'",
        );
    }

    #[test]
    fn invented_markers_are_reported_anywhere() {
        let v = check(json!([
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": "fine", "reasoning_content": "it said INVENTED-RESULT-0"},
        ]));
        assert_one(v, "message #2 carries 'INVENTED-RESULT'");
        let body = json!({"messages": [{"role": "system", "content": "s"}], "metadata": "INVENTED-RESULT"});
        assert_one(
            check_request(&body, &InvariantConfig::default()),
            "the request carries 'INVENTED-RESULT'",
        );
    }

    fn tags_body(messages: Value) -> Value {
        json!({"messages": messages, "stop": ["<tool_response>", "\n<tool_response>"]})
    }

    #[test]
    fn tags_mode_results_pair_with_calls() {
        let call = |name: &str| tags::render_call(name, "{}");
        let response = |name: &str, id: &str| tags::render_response(name, id, "ok");
        let good = tags_body(json!([
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": format!("Go.\n{}\n{}", call("solve_plan"), call("reason"))},
            {"role": "user", "content": format!("{}\n{}\n\n[deepsolve:progress] x", response("solve_plan", "a"), response("reason", "b"))},
            {"role": "assistant", "content": "done"},
        ]));
        let v = check_request(&good, &InvariantConfig::default());
        assert!(v.is_empty(), "{v:#?}");

        let short = tags_body(json!([
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": format!("{}\n{}", call("solve_plan"), call("reason"))},
            {"role": "user", "content": response("reason", "a")},
        ]));
        let v = check_request(&short, &InvariantConfig::default());
        assert_one(
            v,
            "2 <tool_call> block(s) but 1 <tool_response> block(s) in message #3",
        );

        let swapped = tags_body(json!([
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": call("solve_plan")},
            {"role": "user", "content": response("reason", "a")},
        ]));
        let v = check_request(&swapped, &InvariantConfig::default());
        assert_one(v, "names 'reason' but answers a call to 'solve_plan'");

        let dangling = tags_body(json!([
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": call("solve_plan")},
        ]));
        assert_one(
            check_request(&dangling, &InvariantConfig::default()),
            "without a user message of results",
        );
        // Native requests, and tags mode with the rule off, are not read for tags.
        let off = InvariantConfig {
            tags_results_paired: false,
            ..InvariantConfig::default()
        };
        assert!(check_request(&dangling, &off).is_empty());
        let mut native = dangling.clone();
        native["stop"] = json!([]);
        assert!(check_request(&native, &InvariantConfig::default()).is_empty());
    }

    #[test]
    fn a_body_without_messages_is_reported() {
        assert_eq!(
            check_request(&json!({"model": "m"}), &InvariantConfig::default()),
            vec!["the request has no 'messages' array".to_string()]
        );
    }
}
