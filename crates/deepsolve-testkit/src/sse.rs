//! SSE builders: a [`Turn`] as OpenAI `chat.completion.chunk` frames, and the way back.
//!
//! The frame order is the one OpenAI-compatible servers use: a role chunk, reasoning deltas,
//! content deltas, tool-call deltas, a finish chunk, a usage chunk with empty `choices`, then
//! `data: [DONE]`. Other crates' tests use these builders to feed their parsers; the parser
//! here ([`parse_stream`]) exists so the builders are tested by a round trip and so scripted
//! `Reply::Raw` frames can be replayed in-process.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::reply::{DeltaStyle, Turn};

/// The terminal frame.
pub const DONE_FRAME: &str = "data: [DONE]\n\n";

/// What identifies one streamed completion: its id, the model name echoed back and the prefix
/// of the tool-call ids (ids are `<prefix><index>`, so keep prefixes unique per call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamMeta {
    pub completion_id: String,
    pub model: String,
    pub call_id_prefix: String,
}

impl StreamMeta {
    /// Meta for the `n`-th call of a server: ids `chatcmpl-mock-n` and `call_n_<i>`.
    pub fn numbered(n: u64, model: impl Into<String>) -> Self {
        StreamMeta {
            completion_id: format!("chatcmpl-mock-{n}"),
            model: model.into(),
            call_id_prefix: format!("call_{n}_"),
        }
    }

    /// The id given to the `i`-th tool call of the turn.
    pub fn call_id(&self, i: usize) -> String {
        format!("{}{i}", self.call_id_prefix)
    }
}

/// `data: <payload>\n\n`.
pub fn data_frame(payload: &str) -> String {
    format!("data: {payload}\n\n")
}

/// Split `text` into pieces of `size` characters (never inside a UTF-8 sequence); `size == 0`
/// or a short text gives one piece. An empty text gives no piece.
pub fn split_chars(text: &str, size: usize) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    if size == 0 {
        return vec![text];
    }
    let mut pieces = Vec::new();
    let mut start = 0;
    for (count, (offset, _)) in text.char_indices().enumerate() {
        if count > 0 && count % size == 0 {
            pieces.push(&text[start..offset]);
            start = offset;
        }
    }
    pieces.push(&text[start..]);
    pieces
}

fn chunk(meta: &StreamMeta, delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": meta.completion_id,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": meta.model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    })
}

fn usage_json(prompt: u64, completion: u64) -> Value {
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
}

/// The role chunk and the content deltas of `text`: the start of any streamed answer.
pub fn text_chunks(text: &str, meta: &StreamMeta, text_chunk: usize) -> Vec<Value> {
    let mut out = vec![chunk(
        meta,
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    out.extend(
        split_chars(text, text_chunk)
            .into_iter()
            .map(|piece| chunk(meta, json!({"content": piece}), None)),
    );
    out
}

struct CallHead<'a> {
    index: usize,
    id: &'a str,
    name: &'a str,
}

/// One tool-call delta. The first delta of a call carries `type`, the id and the name; later
/// ones carry only arguments, unless the style repeats id and name (never `type`, which is how
/// a client without index or id tells a new call from a continuation).
fn call_delta(style: DeltaStyle, head: &CallHead<'_>, first: bool, args: &str) -> Value {
    let mut delta = Map::new();
    if style.with_index {
        delta.insert("index".into(), json!(head.index));
    }
    let mut function = Map::new();
    if first || style.repeat_id_and_name {
        if style.with_id {
            delta.insert("id".into(), json!(head.id));
        }
        function.insert("name".into(), json!(head.name));
    }
    if first {
        delta.insert("type".into(), json!("function"));
    }
    function.insert("arguments".into(), json!(args));
    delta.insert("function".into(), Value::Object(function));
    Value::Object(delta)
}

/// Every chunk of `turn` as JSON, in stream order, without the `[DONE]` terminator.
pub fn chunks(turn: &Turn, meta: &StreamMeta) -> Vec<Value> {
    ChunkIter::new(turn.clone(), meta.clone()).collect()
}

/// The full SSE body of `turn`: one `data:` frame per chunk, then `data: [DONE]`.
pub fn frames(turn: &Turn, meta: &StreamMeta) -> Vec<String> {
    FrameIter::new(turn.clone(), meta.clone()).collect()
}

/// The chunks of a turn one at a time, in the order of [`chunks`], so that a reply of many
/// megabytes streams without all its chunks being built first.
#[derive(Debug, Clone)]
pub struct ChunkIter {
    turn: Turn,
    meta: StreamMeta,
    stage: Stage,
    /// Byte offset into the text being cut into pieces.
    pos: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Role,
    Reasoning,
    Text,
    /// The `n`-th tool call; `first` until its first delta is out.
    Call {
        n: usize,
        first: bool,
    },
    Finish,
    Usage,
    Done,
}

impl ChunkIter {
    pub fn new(turn: Turn, meta: StreamMeta) -> Self {
        ChunkIter {
            turn,
            meta,
            stage: Stage::Role,
            pos: 0,
        }
    }

    /// The next piece of `text` after `pos`, `size` characters long (0: all of it).
    fn piece(text: &str, pos: &mut usize, size: usize) -> Option<(usize, usize)> {
        let rest = text.get(*pos..).filter(|r| !r.is_empty())?;
        let len = match size {
            0 => rest.len(),
            n => rest.char_indices().nth(n).map_or(rest.len(), |(i, _)| i),
        };
        let start = *pos;
        *pos += len;
        Some((start, *pos))
    }

    /// The next stage, with the cursor back at the start of its text.
    fn advance(&mut self, stage: Stage) {
        self.stage = stage;
        self.pos = 0;
    }

    fn reasoning_chunk(&mut self) -> Option<Value> {
        let text = self.turn.reasoning.as_deref().unwrap_or("");
        let (a, b) = Self::piece(text, &mut self.pos, self.turn.style.text_chunk)?;
        Some(chunk(
            &self.meta,
            json!({"reasoning_content": &text[a..b]}),
            None,
        ))
    }

    fn text_chunk(&mut self) -> Option<Value> {
        let text = self.turn.text.as_deref().unwrap_or("");
        let (a, b) = Self::piece(text, &mut self.pos, self.turn.style.text_chunk)?;
        Some(chunk(&self.meta, json!({"content": &text[a..b]}), None))
    }

    /// The next delta of call `n`: its first always goes out (empty arguments included).
    fn call_chunk(&mut self, n: usize, first: bool) -> Option<Value> {
        let (name, args) = self.turn.tool_calls.get(n)?;
        let style = self.turn.style;
        let piece = match Self::piece(args, &mut self.pos, style.args_chunk) {
            Some((a, b)) => &args[a..b],
            None if first => "",
            None => return None,
        };
        let id = self.meta.call_id(n);
        let head = CallHead {
            index: n,
            id: &id,
            name,
        };
        let delta = call_delta(style, &head, first, piece);
        Some(chunk(&self.meta, json!({"tool_calls": [delta]}), None))
    }

    fn usage_chunk(&self) -> Option<Value> {
        let (prompt, completion) = self.turn.reported_usage()?;
        Some(json!({
            "id": self.meta.completion_id,
            "object": "chat.completion.chunk",
            "created": 0,
            "model": self.meta.model,
            "choices": [],
            "usage": usage_json(prompt, completion),
        }))
    }
}

impl Iterator for ChunkIter {
    type Item = Value;

    fn next(&mut self) -> Option<Value> {
        loop {
            match self.stage {
                Stage::Role => {
                    self.advance(Stage::Reasoning);
                    let delta = json!({"role": "assistant", "content": ""});
                    return Some(chunk(&self.meta, delta, None));
                }
                Stage::Reasoning => match self.reasoning_chunk() {
                    Some(c) => return Some(c),
                    None => self.advance(Stage::Text),
                },
                Stage::Text => match self.text_chunk() {
                    Some(c) => return Some(c),
                    None => self.advance(Stage::Call { n: 0, first: true }),
                },
                Stage::Call { n, .. } if n >= self.turn.tool_calls.len() => {
                    self.advance(Stage::Finish);
                }
                Stage::Call { n, first } => match self.call_chunk(n, first) {
                    Some(c) => {
                        self.stage = Stage::Call { n, first: false };
                        return Some(c);
                    }
                    None => self.advance(Stage::Call {
                        n: n + 1,
                        first: true,
                    }),
                },
                Stage::Finish => {
                    self.advance(Stage::Usage);
                    let reason = self.turn.finish_reason.as_str();
                    return Some(chunk(&self.meta, json!({}), Some(reason)));
                }
                Stage::Usage => {
                    self.advance(Stage::Done);
                    if let Some(c) = self.usage_chunk() {
                        return Some(c);
                    }
                }
                Stage::Done => return None,
            }
        }
    }
}

/// The SSE frames of a turn one at a time (each chunk's `data:` frame, then `[DONE]`).
#[derive(Debug, Clone)]
pub struct FrameIter {
    chunks: ChunkIter,
    done: bool,
}

impl FrameIter {
    pub fn new(turn: Turn, meta: StreamMeta) -> Self {
        FrameIter {
            chunks: ChunkIter::new(turn, meta),
            done: false,
        }
    }
}

impl Iterator for FrameIter {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        if let Some(chunk) = self.chunks.next() {
            return Some(data_frame(&chunk.to_string()));
        }
        if std::mem::replace(&mut self.done, true) {
            return None;
        }
        Some(DONE_FRAME.to_string())
    }
}

/// The non-streaming (`stream: false`) completion body of `turn`.
pub fn completion_json(turn: &Turn, meta: &StreamMeta) -> Value {
    let mut message = json!({"role": "assistant", "content": turn.text});
    if let Some(reasoning) = &turn.reasoning {
        message["reasoning_content"] = json!(reasoning);
    }
    if !turn.tool_calls.is_empty() {
        message["tool_calls"] = turn
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| {
                json!({"id": meta.call_id(i), "type": "function", "function": {"name": name, "arguments": args}})
            })
            .collect();
    }
    let mut body = json!({
        "id": meta.completion_id,
        "object": "chat.completion",
        "created": 0,
        "model": meta.model,
        "choices": [{"index": 0, "message": message, "finish_reason": turn.finish_reason}],
    });
    if let Some((prompt, completion)) = turn.reported_usage() {
        body["usage"] = usage_json(prompt, completion);
    }
    body
}

/// Why an SSE body could not be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("frame {index} is not JSON: {message}")]
    NotJson { index: usize, message: String },
}

/// A tool call recovered from the deltas.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedCall {
    pub id: Option<String>,
    pub name: String,
    pub arguments: String,
}

/// Everything a stream carried, accumulated the way a correct client does (R10): tool-call
/// deltas keyed by `index`, else by `id`, else a delta with `type` starts a new call and one
/// without continues the last; ids and names replaced, never concatenated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedStream {
    pub reasoning: String,
    pub text: String,
    pub tool_calls: Vec<ParsedCall>,
    pub finish_reason: Option<String>,
    pub usage: Option<(u64, u64)>,
    /// `data: [DONE]` was seen.
    pub done: bool,
    /// Number of JSON chunks read.
    pub chunks: usize,
}

impl ParsedStream {
    /// The stream as a [`Turn`] (default style; empty text/reasoning become `None`).
    pub fn to_turn(&self) -> Turn {
        Turn {
            reasoning: (!self.reasoning.is_empty()).then(|| self.reasoning.clone()),
            text: (!self.text.is_empty()).then(|| self.text.clone()),
            tool_calls: self
                .tool_calls
                .iter()
                .map(|c| (c.name.clone(), c.arguments.clone()))
                .collect(),
            finish_reason: self.finish_reason.clone().unwrap_or_default(),
            usage: self.usage,
            style: DeltaStyle::default(),
        }
    }

    /// True when the stream ended properly (a finish reason and `[DONE]`).
    pub fn is_complete(&self) -> bool {
        self.done && self.finish_reason.is_some()
    }
}

/// The `data:` payloads of an SSE body, one per event (multi-line data joined with `\n`);
/// comments, `event:`/`id:` lines and blank events are skipped.
pub fn data_payloads(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for line in body.lines() {
        if line.is_empty() {
            if !current.is_empty() {
                out.push(current.join("\n"));
                current.clear();
            }
        } else if let Some(rest) = line.strip_prefix("data:") {
            current.push(rest.strip_prefix(' ').unwrap_or(rest));
        }
    }
    if !current.is_empty() {
        out.push(current.join("\n"));
    }
    out
}

/// Read an SSE body back into what it carried.
pub fn parse_stream(body: &str) -> Result<ParsedStream, SseError> {
    let mut acc = Accumulator::default();
    for (index, payload) in data_payloads(body).iter().enumerate() {
        if payload.trim() == "[DONE]" {
            acc.out.done = true;
            continue;
        }
        let value: Value = serde_json::from_str(payload).map_err(|e| SseError::NotJson {
            index,
            message: e.to_string(),
        })?;
        acc.chunk(&value);
    }
    Ok(acc.out)
}

#[derive(Default)]
struct Accumulator {
    out: ParsedStream,
    by_index: HashMap<u64, usize>,
}

impl Accumulator {
    fn chunk(&mut self, value: &Value) {
        self.out.chunks += 1;
        if let Some(usage) = value.get("usage").filter(|u| u.is_object()) {
            let field = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
            self.out.usage = Some((field("prompt_tokens"), field("completion_tokens")));
        }
        let Some(choice) = value.pointer("/choices/0") else {
            return;
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.out.finish_reason = Some(reason.to_string());
        }
        let Some(delta) = choice.get("delta") else {
            return;
        };
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.out.text.push_str(text);
        }
        for key in ["reasoning_content", "reasoning"] {
            if let Some(text) = delta.get(key).and_then(Value::as_str) {
                self.out.reasoning.push_str(text);
            }
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                self.tool_call(call);
            }
        }
    }

    fn slot(&mut self, call: &Value) -> usize {
        let calls = &mut self.out.tool_calls;
        if let Some(index) = call.get("index").and_then(Value::as_u64) {
            return *self.by_index.entry(index).or_insert_with(|| {
                calls.push(ParsedCall::default());
                calls.len() - 1
            });
        }
        if let Some(id) = call.get("id").and_then(Value::as_str) {
            if let Some(pos) = calls.iter().position(|c| c.id.as_deref() == Some(id)) {
                return pos;
            }
            calls.push(ParsedCall::default());
            return calls.len() - 1;
        }
        if calls.is_empty() || call.get("type").is_some() {
            calls.push(ParsedCall::default());
        }
        calls.len() - 1
    }

    fn tool_call(&mut self, call: &Value) {
        let slot = self.slot(call);
        let Some(entry) = self.out.tool_calls.get_mut(slot) else {
            return;
        };
        if let Some(id) = call.get("id").and_then(Value::as_str) {
            entry.id = Some(id.to_string());
        }
        let function = call.get("function");
        if let Some(name) = function
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            entry.name = name.to_string();
        }
        if let Some(args) = function
            .and_then(|f| f.get("arguments"))
            .and_then(Value::as_str)
        {
            entry.arguments.push_str(args);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> StreamMeta {
        StreamMeta::numbered(7, "mock-model")
    }

    fn sample() -> Turn {
        Turn {
            reasoning: Some("Thinking about the integral — ∫ x dx.".into()),
            text: Some("Let me plan this properly before computing anything.".into()),
            tool_calls: vec![
                (
                    "solve_plan".into(),
                    r#"{"analysis":"a","steps":[{"goal":"g1"},{"goal":"g2"}]}"#.into(),
                ),
                (
                    "reason".into(),
                    r#"{"query":"why is 2+2=4? ünïcödé"}"#.into(),
                ),
            ],
            finish_reason: "tool_calls".into(),
            usage: Some((123, 450)),
            style: DeltaStyle::default(),
        }
    }

    fn round_trip(style: DeltaStyle) -> ParsedStream {
        let turn = sample().with_style(style);
        let body: String = frames(&turn, &meta()).concat();
        let parsed = parse_stream(&body).unwrap();
        let mut back = parsed.to_turn();
        back.style = style;
        assert_eq!(back, turn, "style {style:?}");
        assert!(parsed.is_complete());
        parsed
    }

    #[test]
    fn split_chars_respects_char_boundaries() {
        assert_eq!(split_chars("abcdefg", 3), vec!["abc", "def", "g"]);
        assert_eq!(split_chars("ünï", 1), vec!["ü", "n", "ï"]);
        assert_eq!(split_chars("abc", 0), vec!["abc"]);
        assert!(split_chars("", 4).is_empty());
    }

    #[test]
    fn default_style_round_trips_with_ids() {
        let parsed = round_trip(DeltaStyle::default());
        let ids: Vec<_> = parsed.tool_calls.iter().map(|c| c.id.clone()).collect();
        assert_eq!(ids, vec![Some("call_7_0".into()), Some("call_7_1".into())]);
        assert!(parsed.chunks > 10, "arguments were split into many deltas");
    }

    #[test]
    fn every_style_round_trips() {
        for with_index in [true, false] {
            for with_id in [true, false] {
                for repeat_id_and_name in [true, false] {
                    for args_chunk in [0, 1, 8] {
                        // Without index and id, `type` on the first delta starts each call.
                        round_trip(DeltaStyle {
                            with_index,
                            with_id,
                            repeat_id_and_name,
                            args_chunk,
                            text_chunk: 5,
                        });
                    }
                }
            }
        }
    }

    #[test]
    fn repeated_ids_and_names_appear_on_every_delta() {
        let style = DeltaStyle {
            repeat_id_and_name: true,
            ..DeltaStyle::default()
        };
        let turn = sample().with_style(style);
        let call_chunks: Vec<Value> = chunks(&turn, &meta())
            .into_iter()
            .filter(|c| c.pointer("/choices/0/delta/tool_calls").is_some())
            .collect();
        assert!(call_chunks.len() > 2);
        for c in &call_chunks {
            let d = &c["choices"][0]["delta"]["tool_calls"][0];
            assert!(
                d["id"].is_string() && d["function"]["name"].is_string(),
                "{d}"
            );
        }
    }

    #[test]
    fn usage_chunk_has_empty_choices_and_comes_last() {
        let cs = chunks(&sample(), &meta());
        let last = cs.last().unwrap();
        assert_eq!(last["choices"], json!([]));
        assert_eq!(last["usage"]["total_tokens"], 573);
        let finish = &cs[cs.len() - 2];
        assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
        let no_usage = chunks(&sample().with_usage(None), &meta());
        assert!(no_usage.iter().all(|c| c.get("usage").is_none()));
    }

    #[test]
    fn parser_tolerates_sse_noise_and_reports_bad_json() {
        let body = ": comment\nevent: x\ndata:{\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]";
        let parsed = parse_stream(body).unwrap();
        assert_eq!(parsed.text, "a");
        assert!(parsed.done);
        assert!(matches!(
            parse_stream("data: {nope\n\n"),
            Err(SseError::NotJson { index: 0, .. })
        ));
    }

    #[test]
    fn completion_json_has_the_message() {
        let body = completion_json(&sample(), &meta());
        assert_eq!(
            body["choices"][0]["message"]["tool_calls"][1]["function"]["name"],
            "reason"
        );
        assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(body["usage"]["prompt_tokens"], 123);
    }
}
