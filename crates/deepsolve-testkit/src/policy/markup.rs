//! Wrappers that change how another policy's moves are *written*: as text-tag calls, with inline `<think>` reasoning, or as a vendor's tool-call markup in plain content.
//! The inner policy plays unchanged: it reads the neutral view of the conversation
//! ([`PolicyRequest`]) whatever the protocol.

use crate::policy::Policy;
use crate::reply::{Reply, Turn};
use crate::request::PolicyRequest;
use crate::tags::{self, INVENTED_MARKER, MarkupStyle};

/// Opens the reasoning [`ReasoningModel`] writes inline: it must never reach an answer.
pub const THINK_MARKER: &str = "THINK-TRACE";

/// `inner`'s tool calls written as `<tool_call>` blocks after its text (`finish_reason:
/// stop`, no native calls): a model without native tool calling, driven by the text-tag
/// protocol. Replies without calls pass unchanged.
///
/// With `invent_responses` the model also ignores the stop sequence and writes an invented
/// `<tool_response name=… id=…>INVENTED-RESULT-i</tool_response>` after each call (what small
/// models do). **Engine:** cuts the reply at the first `<tool_response` — so only the first
/// call of a reply survives — and never sends the invented text back (the request invariants
/// fail any request carrying [`INVENTED_MARKER`]). **Ending:** as `inner` (for one call per
/// round, as [`crate::WellBehaved`] makes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TagsMode<P> {
    pub inner: P,
    pub invent_responses: bool,
}

impl<P: Policy> Policy for TagsMode<P> {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        self.inner
            .reply(req)
            .map_turn(|turn| calls_as_tags(turn, self.invent_responses))
    }
}

fn calls_as_tags(turn: Turn, invent_responses: bool) -> Turn {
    if turn.tool_calls.is_empty() {
        return turn;
    }
    let mut text = turn.text.clone().unwrap_or_default();
    for (i, (name, arguments)) in turn.tool_calls.iter().enumerate() {
        push_line(&mut text, &tags::render_call(name, arguments));
        if invent_responses {
            let invented = format!("{INVENTED_MARKER}-{i}: {name} returned 42");
            push_line(
                &mut text,
                &tags::render_response(name, &format!("invented_{i}"), &invented),
            );
        }
    }
    as_plain_text(turn, text)
}

/// The turn as a plain-text reply: `text`, no native calls, `finish_reason: stop` (a server
/// without a tool parser sees an ordinary answer).
pub(crate) fn as_plain_text(turn: Turn, text: String) -> Turn {
    Turn {
        text: Some(text),
        tool_calls: Vec::new(),
        finish_reason: "stop".into(),
        ..turn
    }
}

/// Appends `block` on its own line.
pub(crate) fn push_line(text: &mut String, block: &str) {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(block);
}

/// `inner`'s replies preceded by `<think>…</think>` in `content` — a reasoning model served
/// without a reasoning parser (every reply, sub-calls and forced answers included). Native
/// calls stay native; wrap it in [`TagsMode`] for a reasoning model in tags mode.
///
/// **Engine:** moves the thought to reasoning; no [`THINK_MARKER`] text may reach an answer,
/// a summary or a tool's input. **Ending:** as `inner`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReasoningModel<P> {
    pub inner: P,
}

impl<P: Policy> Policy for ReasoningModel<P> {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        let thought = format!(
            "<think>\n{THINK_MARKER}: {} messages so far; deciding the next move.\n</think>\n\n",
            req.messages.len()
        );
        self.inner.reply(req).map_turn(|mut turn| {
            let text = turn.text.take().unwrap_or_default();
            turn.text = Some(format!("{thought}{text}"));
            turn
        })
    }
}

/// `inner`'s tool calls written as `style` markup after its text, in plain `content`
/// (`finish_reason: stop`, no native calls), while the engine speaks the native protocol: a
/// model served without its tool-call parser. Replies without calls pass unchanged.
///
/// **Engine:** recognises the markup as calls. **Ending:** as `inner`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorMarkup<P> {
    pub inner: P,
    pub style: MarkupStyle,
}

impl<P: Policy> Policy for VendorMarkup<P> {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        self.inner.reply(req).map_turn(|turn| {
            if turn.tool_calls.is_empty() {
                return turn;
            }
            let mut text = turn.text.clone().unwrap_or_default();
            push_line(
                &mut text,
                &tags::render_markup(self.style, &turn.tool_calls),
            );
            as_plain_text(turn, text)
        })
    }
}

/// A provider that rejects native tools: any request declaring `tools` gets the 400 "does not
/// support tools" ([`Reply::tools_unsupported`]); the rest go to `inner` (usually a
/// [`TagsMode`]).
///
/// **Engine:** `protocol: auto` falls back to tags and carries on; `native` ends with a
/// `model_error` (tools_unsupported). **Ending (auto):** as `inner`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NoNativeTools<P> {
    pub inner: P,
}

impl<P: Policy> Policy for NoNativeTools<P> {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if req.has_native_tools() {
            return Reply::tools_unsupported();
        }
        self.inner.reply(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WellBehaved;
    use crate::tags::STOP_SEQUENCES;
    use deepsolve_core::{ChatRequest, Message, ToolChoice};

    fn tags_request() -> PolicyRequest {
        let system = format!(
            "You solve.\n\n## Tools\n\n### solve_plan\nPlan.\nArguments (JSON Schema): {{\"type\":\"object\"}}\n\n### solve_finish_step\nFinish.\nArguments (JSON Schema): {{\"type\":\"object\"}}\n\n### reason\nDerive.\nArguments (JSON Schema): {}",
            r#"{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}"#
        );
        PolicyRequest::from_chat(&ChatRequest {
            messages: vec![Message::system(system), Message::user("Solve x+1=2.")],
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            max_tokens: 100,
            temperature: 0.0,
            stop: STOP_SEQUENCES.iter().map(|s| s.to_string()).collect(),
            response_format: None,
        })
    }

    fn text(reply: &Reply) -> &str {
        reply
            .turn()
            .and_then(|t| t.text.as_deref())
            .unwrap_or_default()
    }

    #[test]
    fn tags_mode_writes_calls_as_text() {
        let req = tags_request();
        assert!(req.is_tags_mode() && !req.is_subcall());
        let reply = TagsMode {
            inner: WellBehaved::new(2),
            invent_responses: false,
        }
        .reply(&req);
        let turn = reply.turn().expect("turn");
        assert!(turn.tool_calls.is_empty());
        assert_eq!(turn.finish_reason, "stop");
        let (_, calls) = tags::parse_calls(text(&reply));
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].0, "solve_plan");
        assert!(!text(&reply).contains("<tool_response"));
    }

    #[test]
    fn inventing_writes_a_response_after_each_call() {
        let reply = TagsMode {
            inner: WellBehaved::new(2),
            invent_responses: true,
        }
        .reply(&tags_request());
        let (responses, _) = tags::parse_responses(text(&reply));
        assert_eq!(responses.len(), 1);
        assert_eq!(responses[0].name, "solve_plan");
        assert!(responses[0].content.starts_with("INVENTED-RESULT-0"));
    }

    #[test]
    fn answers_pass_unchanged() {
        let req = PolicyRequest {
            tool_choice: Some("none".into()),
            ..tags_request()
        };
        let plain = WellBehaved::new(2).reply(&req);
        let tags = TagsMode {
            inner: WellBehaved::new(2),
            invent_responses: true,
        };
        assert_eq!(tags.reply(&req), plain);
        let vendor = VendorMarkup {
            inner: WellBehaved::new(2),
            style: MarkupStyle::KimiK2,
        };
        assert_eq!(vendor.reply(&req), plain);
    }

    #[test]
    fn reasoning_model_thinks_inline_before_its_move() {
        let reply = TagsMode {
            inner: ReasoningModel {
                inner: WellBehaved::new(2),
            },
            invent_responses: false,
        }
        .reply(&tags_request());
        let text = text(&reply);
        assert!(
            text.starts_with("<think>\nTHINK-TRACE: 2 messages"),
            "{text}"
        );
        let think_end = text.find("</think>").expect("closed");
        assert!(text.find("<tool_call>").expect("call") > think_end);
    }

    #[test]
    fn vendor_markup_replaces_native_calls() {
        let native = PolicyRequest {
            tools: vec!["solve_plan".into(), "reason".into()],
            prompt_tools: Vec::new(),
            tool_choice: Some("auto".into()),
            stop: Vec::new(),
            ..tags_request()
        };
        let reply = VendorMarkup {
            inner: WellBehaved::new(2),
            style: MarkupStyle::DeepSeekDsml,
        }
        .reply(&native);
        let turn = reply.turn().expect("turn");
        assert!(turn.tool_calls.is_empty());
        assert!(
            text(&reply)
                .starts_with("<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"solve_plan\">"),
            "{}",
            text(&reply)
        );
    }

    #[test]
    fn no_native_tools_rejects_tools_and_serves_the_rest() {
        let policy = NoNativeTools {
            inner: TagsMode {
                inner: WellBehaved::new(2),
                invent_responses: false,
            },
        };
        let native = PolicyRequest {
            tools: vec!["solve_plan".into()],
            prompt_tools: Vec::new(),
            ..tags_request()
        };
        assert_eq!(policy.reply(&native), Reply::tools_unsupported());
        assert!(text(&policy.reply(&tags_request())).contains("<tool_call>"));
    }
}
