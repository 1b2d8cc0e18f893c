//! What the mock model answers to one call: a [`Reply`].
//!
//! A reply is data, not behaviour: the same value is played over HTTP by the
//! [`MockServer`](crate::MockServer) (as SSE frames or a JSON completion) and in-process by the
//! [`ScriptedModel`](crate::ScriptedModel), so a scenario written once exercises both paths.

use std::time::Duration;

use serde_json::{Value, json};

/// Usage reported by the reply constructors: fixed, so token accounting is assertable (a
/// reply larger than the fixed completion count reports its own size instead: see
/// [`Turn::reported_usage`]).
pub const DEFAULT_USAGE: (u64, u64) = (100, 20);

/// How a [`Turn`] is cut into stream deltas. Real providers differ here (R10), so the engine's
/// delta accumulator is exercised against each shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeltaStyle {
    /// Send `index` on every tool-call delta (OpenAI does; some servers do not).
    pub with_index: bool,
    /// Send an `id` on the first delta of each tool call (without it the client must synthesise).
    pub with_id: bool,
    /// Repeat `id` and `function.name` on every delta of a call (some servers do; a client that
    /// concatenates them instead of replacing them breaks).
    pub repeat_id_and_name: bool,
    /// Characters of `arguments` per delta; 0 sends the whole string at once.
    pub args_chunk: usize,
    /// Characters of text / reasoning per delta; 0 sends the whole string at once.
    pub text_chunk: usize,
}

impl Default for DeltaStyle {
    fn default() -> Self {
        DeltaStyle {
            with_index: true,
            with_id: true,
            repeat_id_and_name: false,
            args_chunk: 8,
            text_chunk: 16,
        }
    }
}

/// One model turn: what the model "says" in a successful call.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub reasoning: Option<String>,
    pub text: Option<String>,
    /// `(name, raw arguments)`; ids are assigned when the turn is played, unique per server.
    pub tool_calls: Vec<(String, String)>,
    pub finish_reason: String,
    /// `(prompt_tokens, completion_tokens)`; `None` sends no usage chunk at all.
    pub usage: Option<(u64, u64)>,
    pub style: DeltaStyle,
}

impl Default for Turn {
    fn default() -> Self {
        Turn {
            reasoning: None,
            text: None,
            tool_calls: Vec::new(),
            finish_reason: "stop".into(),
            usage: Some(DEFAULT_USAGE),
            style: DeltaStyle::default(),
        }
    }
}

impl Turn {
    /// A plain text answer (`finish_reason: stop`).
    pub fn text(text: impl Into<String>) -> Self {
        Turn {
            text: Some(text.into()),
            ..Turn::default()
        }
    }

    /// Tool calls with raw argument strings (`finish_reason: tool_calls`).
    pub fn raw_calls<N: Into<String>, A: Into<String>>(calls: Vec<(N, A)>) -> Self {
        Turn {
            tool_calls: calls
                .into_iter()
                .map(|(n, a)| (n.into(), a.into()))
                .collect(),
            finish_reason: "tool_calls".into(),
            ..Turn::default()
        }
    }

    /// Tool calls with JSON arguments (`finish_reason: tool_calls`).
    pub fn calls<N: Into<String>>(calls: Vec<(N, Value)>) -> Self {
        Self::raw_calls(
            calls
                .into_iter()
                .map(|(n, a)| (n.into(), a.to_string()))
                .collect(),
        )
    }

    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    pub fn with_reasoning(mut self, reasoning: impl Into<String>) -> Self {
        self.reasoning = Some(reasoning.into());
        self
    }

    pub fn with_finish(mut self, finish_reason: impl Into<String>) -> Self {
        self.finish_reason = finish_reason.into();
        self
    }

    pub fn with_usage(mut self, usage: Option<(u64, u64)>) -> Self {
        self.usage = usage;
        self
    }

    pub fn with_style(mut self, style: DeltaStyle) -> Self {
        self.style = style;
        self
    }

    /// The `(prompt_tokens, completion_tokens)` the mock reports for this turn: `usage`, with
    /// the completion count raised to the reply's own size (~4 characters a token) when that is
    /// larger. The engine projects the next request from reported usage, so a mock that said
    /// "20 tokens" for a 3 MB reply would hide it from the context limits, which no provider
    /// does.
    pub fn reported_usage(&self) -> Option<(u64, u64)> {
        let (prompt, completion) = self.usage?;
        let chars = self.text.as_deref().map_or(0, str::len)
            + self.reasoning.as_deref().map_or(0, str::len)
            + self.tool_calls.iter().map(|(_, a)| a.len()).sum::<usize>();
        Some((prompt, completion.max((chars as u64).div_ceil(4))))
    }

    /// True when the turn shows nothing to the user: no text and no tool call.
    pub fn has_no_visible_output(&self) -> bool {
        self.text.as_deref().is_none_or(str::is_empty) && self.tool_calls.is_empty()
    }
}

/// What the mock answers to one chat-completions call.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A successful turn, streamed as SSE (or a JSON completion when `stream` is false).
    Turn(Turn),
    /// An HTTP error status with a JSON body and extra headers (e.g. `Retry-After`).
    Status {
        status: u16,
        body: Value,
        headers: Vec<(String, String)>,
    },
    /// Status and headers are sent, then the connection closes without any data.
    CutBeforeOutput,
    /// Some text deltas, then the connection closes without a finish chunk or `[DONE]`.
    CutAfterText(String),
    /// Some text deltas (possibly none), then no byte for the duration, then the connection
    /// closes: exercises the stream idle timeout.
    StallAfterText(String, Duration),
    /// Waits before the first byte (status line included), then plays the inner reply.
    Delayed(Duration, Box<Reply>),
    /// Literal SSE `data:` payloads, each sent as `data: <payload>\n\n` (include `[DONE]`
    /// yourself if you want it).
    Raw(Vec<String>),
}

impl From<Turn> for Reply {
    fn from(turn: Turn) -> Self {
        Reply::Turn(turn)
    }
}

impl Reply {
    /// A plain text answer.
    pub fn text(text: impl Into<String>) -> Self {
        Reply::Turn(Turn::text(text))
    }

    /// Tool calls with JSON arguments: `Reply::calls(vec![("solve_plan", json!({...}))])`.
    pub fn calls<N: Into<String>>(calls: Vec<(N, Value)>) -> Self {
        Reply::Turn(Turn::calls(calls))
    }

    /// Tool calls with raw (possibly broken) argument text.
    pub fn raw_calls<N: Into<String>, A: Into<String>>(calls: Vec<(N, A)>) -> Self {
        Reply::Turn(Turn::raw_calls(calls))
    }

    /// `len` characters of reasoning, no visible output, `finish_reason: length`: a reasoning
    /// model that burned its whole budget thinking (R11).
    pub fn reasoning_only(len: usize) -> Self {
        let reasoning: String = "Let me think about this carefully. "
            .chars()
            .cycle()
            .take(len)
            .collect();
        Reply::Turn(Turn {
            reasoning: Some(reasoning),
            finish_reason: "length".into(),
            ..Turn::default()
        })
    }

    /// An HTTP error with an OpenAI-shaped body `{"error": {"message", "type", "code"}}`.
    pub fn status(status: u16, message: impl Into<String>) -> Self {
        Self::error_with_code(status, message, Value::Null)
    }

    /// An HTTP error whose body carries an error `code` (how providers say *which* 400 it is).
    pub fn error_with_code(status: u16, message: impl Into<String>, code: Value) -> Self {
        Reply::Status {
            status,
            body: json!({"error": {"message": message.into(), "type": error_type(status), "code": code}}),
            headers: Vec::new(),
        }
    }

    /// 429, with a `Retry-After` header (seconds) when given.
    pub fn rate_limited(retry_after: Option<u64>) -> Self {
        let mut reply =
            Self::error_with_code(429, "Rate limit reached", json!("rate_limit_exceeded"));
        if let (Some(secs), Reply::Status { headers, .. }) = (retry_after, &mut reply) {
            headers.push(("retry-after".into(), secs.to_string()));
        }
        reply
    }

    /// A 500 from the provider.
    pub fn server_error() -> Self {
        Self::status(
            500,
            "The server had an error while processing your request.",
        )
    }

    /// The provider's "prompt too long" 400.
    pub fn context_length_exceeded() -> Self {
        Self::error_with_code(
            400,
            "This model's maximum context length is 8192 tokens.",
            json!("context_length_exceeded"),
        )
    }

    /// The provider's "this model does not take tools" 400 (triggers the tags fallback).
    pub fn tools_unsupported() -> Self {
        Self::error_with_code(
            400,
            "This model does not support tools.",
            json!("tools_unsupported"),
        )
    }

    /// Wait `delay` before the first byte, then play `reply`.
    pub fn delayed(delay: Duration, reply: Reply) -> Self {
        Reply::Delayed(delay, Box::new(reply))
    }

    /// Apply `f` to the turn inside (through any `Delayed`); other replies pass unchanged.
    pub fn map_turn(self, f: impl FnOnce(Turn) -> Turn) -> Self {
        match self {
            Reply::Turn(turn) => Reply::Turn(f(turn)),
            Reply::Delayed(delay, inner) => Reply::Delayed(delay, Box::new(inner.map_turn(f))),
            other => other,
        }
    }

    /// The turn inside, if this reply is (a delayed) successful turn.
    pub fn turn(&self) -> Option<&Turn> {
        match self {
            Reply::Turn(turn) => Some(turn),
            Reply::Delayed(_, inner) => inner.turn(),
            _ => None,
        }
    }

    /// A short name for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Reply::Turn(t) if !t.tool_calls.is_empty() => "tool_calls",
            Reply::Turn(t) if t.has_no_visible_output() => "empty",
            Reply::Turn(_) => "text",
            Reply::Status { .. } => "status",
            Reply::CutBeforeOutput => "cut_before_output",
            Reply::CutAfterText(_) => "cut_after_text",
            Reply::StallAfterText(..) => "stall",
            Reply::Delayed(..) => "delayed",
            Reply::Raw(_) => "raw",
        }
    }
}

fn error_type(status: u16) -> &'static str {
    match status {
        401 | 403 => "authentication_error",
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_set_finish_reasons() {
        assert_eq!(Reply::text("hi").turn().unwrap().finish_reason, "stop");
        let calls = Reply::calls(vec![("solve_plan", json!({"analysis": "a"}))]);
        let t = calls.turn().unwrap();
        assert_eq!(t.finish_reason, "tool_calls");
        assert_eq!(t.tool_calls[0].1, r#"{"analysis":"a"}"#);
        let r = Reply::reasoning_only(50);
        let t = r.turn().unwrap();
        assert_eq!(t.finish_reason, "length");
        assert_eq!(t.reasoning.as_ref().unwrap().chars().count(), 50);
        assert!(t.has_no_visible_output());
    }

    #[test]
    fn rate_limited_carries_retry_after() {
        let Reply::Status {
            status,
            headers,
            body,
        } = Reply::rate_limited(Some(3))
        else {
            panic!("not a status")
        };
        assert_eq!(status, 429);
        assert_eq!(headers, vec![("retry-after".to_string(), "3".to_string())]);
        assert_eq!(body["error"]["type"], "rate_limit_error");
    }

    #[test]
    fn map_turn_reaches_through_delays() {
        let r = Reply::delayed(Duration::from_millis(1), Reply::text("x"))
            .map_turn(|t| t.with_finish("length"));
        assert_eq!(r.turn().unwrap().finish_reason, "length");
        assert_eq!(
            Reply::CutBeforeOutput.map_turn(|t| t),
            Reply::CutBeforeOutput
        );
    }

    #[test]
    fn a_reply_larger_than_the_fixed_count_reports_its_own_size() {
        assert_eq!(Turn::text("4").reported_usage(), Some(DEFAULT_USAGE));
        let large = Turn::text("x".repeat(4000)).with_reasoning("y".repeat(400));
        assert_eq!(large.reported_usage(), Some((DEFAULT_USAGE.0, 1100)));
        assert_eq!(Turn::text("4").with_usage(None).reported_usage(), None);
    }
}
