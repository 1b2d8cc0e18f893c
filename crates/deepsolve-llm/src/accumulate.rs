//! Turning stream chunks into a [`Completion`].
//!
//! Servers stream tool calls in many shapes, and naive accumulators either
//! concatenate ids and names that are repeated in every chunk (`call_1call_1…`,
//! `searchsearch`) or lose calls that come without an `index`. The rules here are written
//! down in [`ToolCallAccumulator`] and property-tested.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

use deepsolve_core::{
    ChatRequest, Completion, FinishReason, ModelError, StreamDelta, ToolCall, Usage,
};
use serde_json::Value;

use crate::estimate;
use crate::wire::{ChatChunk, ChunkDelta, WireToolCallDelta, WireUsage};

/// One tool-call fragment, provider-neutral.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCallDelta {
    pub index: Option<u64>,
    pub id: Option<String>,
    pub name: Option<String>,
    pub arguments: Option<String>,
}

impl From<&WireToolCallDelta> for ToolCallDelta {
    fn from(wire: &WireToolCallDelta) -> Self {
        let function = wire.function.as_ref();
        ToolCallDelta {
            index: wire.index,
            id: wire.id.clone(),
            name: function.and_then(|f| f.name.clone()),
            arguments: function
                .and_then(|f| f.arguments.as_ref())
                .and_then(arguments_text),
        }
    }
}

/// Arguments as text: fragments are strings; a server that sends a whole object gets it
/// re-serialised (the dispatcher parses the text later either way).
fn arguments_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// A call being assembled.
#[derive(Debug, Clone, Default)]
struct PartialCall {
    /// The stream index this call was first seen under, if any.
    index: Option<u64>,
    id: String,
    name: String,
    arguments: String,
    /// Where `arguments` stands as a JSON value, kept up to date fragment by fragment.
    shape: JsonShape,
}

/// Assembles tool calls from deltas.
///
/// Which call a delta belongs to:
/// 1. **By `index`** when the delta has one: the same index is the same call. (Exception: if
///    that call already has an id and the delta brings a *different* id, a server is reusing
///    the index for a new call, so a new call starts and takes over the index.)
/// 2. **Else by `id`**: a known id continues its call, an unknown id starts a new one.
/// 3. **Else by position** — the delta has neither index nor id:
///    - with a non-empty `function.name`, it starts a new call (Ollama sends each whole call in
///      one chunk without index or id), *unless* the last touched call has the same name and
///      its arguments so far are empty or not yet a complete JSON value — then the server is
///      just repeating the name while streaming arguments, and the delta continues that call;
///    - with only arguments, it continues the last touched call (or starts one if there is
///      none).
///
/// Calls come out in `index` order when all of them had one, else in order of appearance.
/// Within a call, `id` and `name` are *replaced* by each non-empty value (servers that repeat
/// them in every chunk would otherwise produce `call_1call_1`), and `arguments` fragments are
/// concatenated. At [`ToolCallAccumulator::finish`], calls without a name are dropped (nothing
/// could run them), and calls without an id, or whose id repeats an earlier call's in this
/// reply, get a synthesised one ([`synthesize_call_id`]) so every tool result pairs with exactly
/// one call.
#[derive(Debug, Default)]
pub struct ToolCallAccumulator {
    calls: Vec<PartialCall>,
    by_index: HashMap<u64, usize>,
    by_id: HashMap<String, usize>,
    last: Option<usize>,
}

impl ToolCallAccumulator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one fragment. Returns the call's name when this fragment gave it one it did
    /// not have (the call began streaming).
    pub fn push(&mut self, delta: ToolCallDelta) -> Option<String> {
        let id = delta.id.filter(|s| !s.is_empty());
        let name = delta.name.filter(|s| !s.is_empty());
        let slot = self.resolve(delta.index, id.as_deref(), name.as_deref());
        self.last = Some(slot);
        if let Some(id) = id {
            self.by_id.insert(id.clone(), slot);
            self.calls[slot].id = id;
        }
        let call = &mut self.calls[slot];
        let mut named = None;
        if let Some(name) = name {
            if call.name != name {
                named = Some(name.clone());
            }
            call.name = name;
        }
        if let Some(arguments) = delta.arguments {
            call.shape.feed(&arguments);
            call.arguments.push_str(&arguments);
        }
        named
    }

    /// True when at least one call with a name has been seen.
    pub fn has_calls(&self) -> bool {
        self.calls.iter().any(|c| !c.name.is_empty())
    }

    /// The finished calls: in `index` order when every call had an index (the index is the
    /// call's position in the reply, and servers may interleave their fragments), otherwise in
    /// order of first appearance.
    pub fn finish(mut self) -> Vec<ToolCall> {
        if self.calls.iter().all(|c| c.index.is_some()) {
            self.calls.sort_by_key(|c| c.index);
        }
        let mut seen = HashSet::new();
        self.calls
            .into_iter()
            .filter(|c| !c.name.is_empty())
            .map(|c| {
                let id = if c.id.is_empty() || !seen.insert(c.id.clone()) {
                    synthesize_call_id()
                } else {
                    c.id
                };
                let mut arguments = c.arguments;
                arguments.shrink_to_fit();
                ToolCall {
                    id,
                    name: c.name,
                    arguments,
                }
            })
            .collect()
    }

    fn resolve(&mut self, index: Option<u64>, id: Option<&str>, name: Option<&str>) -> usize {
        if let Some(index) = index {
            return self.resolve_by_index(index, id);
        }
        if let Some(id) = id {
            return match self.by_id.get(id) {
                Some(&slot) => slot,
                None => self.new_call(),
            };
        }
        match (name, self.last) {
            (Some(name), Some(last)) if self.continues(last, name) => last,
            (Some(_), _) | (None, None) => self.new_call(),
            (None, Some(last)) => last,
        }
    }

    fn resolve_by_index(&mut self, index: u64, id: Option<&str>) -> usize {
        if let Some(&slot) = self.by_index.get(&index) {
            let existing = &self.calls[slot].id;
            let new_call = matches!(id, Some(id) if !existing.is_empty() && existing != id);
            if !new_call {
                return slot;
            }
        }
        let slot = self.new_call();
        self.calls[slot].index = Some(index);
        self.by_index.insert(index, slot);
        slot
    }

    /// Whether a name-only delta continues call `slot` (the name is being repeated) rather than
    /// starting a new call.
    fn continues(&mut self, slot: usize, name: &str) -> bool {
        let call = &mut self.calls[slot];
        call.name == name && (call.arguments.is_empty() || !call.shape.is_complete(&call.arguments))
    }

    fn new_call(&mut self) -> usize {
        self.calls.push(PartialCall::default());
        self.calls.len() - 1
    }
}

/// Whether arguments streamed so far form one complete JSON value, answered without re-reading
/// the whole text for every delta: a server that repeats the call's name in every chunk asks
/// after each fragment, and a full parse each time would cost the square of the reply's size.
///
/// A scanner follows strings and brackets as fragments arrive; the strict parse runs only
/// once the top-level value has closed, and its answer is kept until more text arrives. Text
/// after a closed value can never make it complete again.
#[derive(Debug, Clone, Default)]
struct JsonShape {
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// The top-level object, array or string has closed.
    closed: bool,
    /// Something other than whitespace followed the closed value.
    trailing: bool,
    /// Something other than whitespace, a bracket or a quote came first: a number, a literal,
    /// or not JSON at all.
    bare: bool,
    /// The strict answer for the text as it was last asked about, until more text comes.
    verdict: Option<bool>,
}

/// A bare top-level value longer than this is not taken for a complete one: no tool takes a
/// scalar, and parsing a long one after every fragment would be quadratic again.
const MAX_BARE_LEN: usize = 64;

impl JsonShape {
    fn feed(&mut self, fragment: &str) {
        // Whitespace never completes a value or breaks a complete one: keep the answer, or a
        // stream of blank fragments would make every question a full parse again.
        if fragment.bytes().all(|b| b.is_ascii_whitespace()) {
            return;
        }
        self.verdict = None;
        for byte in fragment.bytes() {
            self.step(byte);
        }
    }

    fn step(&mut self, byte: u8) {
        if self.in_string {
            match (self.escaped, byte) {
                (true, _) => self.escaped = false,
                (false, b'\\') => self.escaped = true,
                (false, b'"') => {
                    self.in_string = false;
                    self.closed |= self.depth == 0 && !self.bare;
                }
                _ => {}
            }
            return;
        }
        if self.closed {
            self.trailing |= !byte.is_ascii_whitespace();
            return;
        }
        match byte {
            b'"' => self.in_string = true,
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' if self.depth > 0 => {
                self.depth -= 1;
                self.closed = self.depth == 0 && !self.bare;
            }
            b if self.depth == 0 && !b.is_ascii_whitespace() => self.bare = true,
            _ => {}
        }
    }

    /// True when `text` (everything fed so far) is one complete JSON value.
    fn is_complete(&mut self, text: &str) -> bool {
        if let Some(verdict) = self.verdict {
            return verdict;
        }
        let worth_parsing = if self.bare {
            text.len() <= MAX_BARE_LEN
        } else {
            self.closed && !self.trailing
        };
        let verdict = worth_parsing && is_complete_json(text);
        self.verdict = Some(verdict);
        verdict
    }
}

fn is_complete_json(text: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

static CALL_COUNTER: AtomicU64 = AtomicU64::new(1);

/// A tool-call id unique within this process: a process-wide counter (uniqueness) plus a random
/// suffix (ids from different processes, e.g. a resumed turn, do not collide either).
pub fn synthesize_call_id() -> String {
    let n = CALL_COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("call_ds_{n}_{:08x}", rand::random::<u32>())
}

/// The default cap on one reply: content, reasoning and tool-call arguments together.
pub const DEFAULT_MAX_REPLY_BYTES: usize = 4 * 1024 * 1024;

/// A reply grew past its cap (content, reasoning and tool-call arguments together). Nothing
/// past the cap is kept: the caller stops reading and drops the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the model's reply exceeded {limit} bytes (content, reasoning and tool-call arguments \
     together)"
)]
pub struct ReplyTooLarge {
    pub limit: usize,
}

impl From<ReplyTooLarge> for ModelError {
    fn from(e: ReplyTooLarge) -> Self {
        ModelError::ReplyTooLarge {
            limit_bytes: u64::try_from(e.limit).unwrap_or(u64::MAX),
        }
    }
}

/// Accumulates a whole streamed reply: visible text and reasoning, tool calls, the finish
/// reason and the provider's usage.
#[derive(Debug)]
pub struct StreamAccumulator {
    text: String,
    reasoning: String,
    calls: ToolCallAccumulator,
    finish_reason: Option<FinishReason>,
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    /// Prompt tokens the server took from its cache, when it says.
    cached_tokens: Option<u64>,
    /// Bytes of text, reasoning and arguments taken in so far.
    reply_bytes: usize,
    max_reply_bytes: usize,
}

impl Default for StreamAccumulator {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamAccumulator {
    /// An accumulator with the default cap ([`DEFAULT_MAX_REPLY_BYTES`]).
    pub fn new() -> Self {
        Self::with_max_reply_bytes(DEFAULT_MAX_REPLY_BYTES)
    }

    /// An accumulator that refuses a reply past `max_reply_bytes` of text, reasoning and
    /// tool-call arguments together.
    pub fn with_max_reply_bytes(max_reply_bytes: usize) -> Self {
        StreamAccumulator {
            text: String::new(),
            reasoning: String::new(),
            calls: ToolCallAccumulator::new(),
            finish_reason: None,
            prompt_tokens: None,
            completion_tokens: None,
            cached_tokens: None,
            reply_bytes: 0,
            max_reply_bytes,
        }
    }

    /// Applies one chunk and returns the visible deltas it produced, to be streamed live, and
    /// a [`StreamDelta::ToolCallStarted`] for each tool call it began.
    ///
    /// Only the first choice (`index` 0 or absent) is read. When a delta carries both
    /// `reasoning_content` and `reasoning` (some servers send both with the same text),
    /// `reasoning_content` wins so the reasoning is not doubled. A chunk that would take the
    /// reply past its cap is refused whole ([`ReplyTooLarge`]).
    pub fn apply(&mut self, chunk: &ChatChunk) -> Result<Vec<StreamDelta>, ReplyTooLarge> {
        if let Some(usage) = chunk.usage {
            self.record_usage(usage);
        }
        if let Some(cached) = chunk.timings.and_then(|t| t.cache_n) {
            self.cached_tokens = Some(cached);
        }
        let mut out = Vec::new();
        let first = chunk.choices.iter().find(|c| c.index.unwrap_or(0) == 0);
        let Some(choice) = first else { return Ok(out) };
        if let Some(delta) = &choice.delta {
            self.apply_delta(delta, &mut out)?;
        }
        if let Some(reason) = choice.finish_reason.as_deref().filter(|r| !r.is_empty()) {
            self.finish_reason = Some(FinishReason::parse(reason));
        }
        Ok(out)
    }

    fn apply_delta(
        &mut self,
        delta: &ChunkDelta,
        out: &mut Vec<StreamDelta>,
    ) -> Result<(), ReplyTooLarge> {
        let parts = delta
            .content
            .as_ref()
            .map(content_parts)
            .unwrap_or_default();
        let reasoning = [&delta.reasoning_content, &delta.reasoning]
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .find(|s| !s.is_empty());
        let calls: Vec<ToolCallDelta> = delta.tool_calls.iter().map(Into::into).collect();
        let incoming = parts.iter().map(|(_, text)| text.len()).sum::<usize>()
            + reasoning.map_or(0, str::len)
            + calls
                .iter()
                .map(|c| c.arguments.as_ref().map_or(0, String::len))
                .sum::<usize>();
        self.take_in(incoming)?;
        for (is_reasoning, text) in parts {
            self.push_visible(is_reasoning, text, out);
        }
        if let Some(reasoning) = reasoning {
            self.push_visible(true, reasoning.to_string(), out);
        }
        for call in calls {
            if let Some(name) = self.calls.push(call) {
                out.push(StreamDelta::ToolCallStarted { name });
            }
        }
        Ok(())
    }

    /// Counts `bytes` more against the cap, or refuses them.
    fn take_in(&mut self, bytes: usize) -> Result<(), ReplyTooLarge> {
        let total = self.reply_bytes.saturating_add(bytes);
        if total > self.max_reply_bytes {
            return Err(ReplyTooLarge {
                limit: self.max_reply_bytes,
            });
        }
        self.reply_bytes = total;
        Ok(())
    }

    /// Bytes of text, reasoning and tool-call arguments taken in so far.
    pub fn reply_bytes(&self) -> usize {
        self.reply_bytes
    }

    fn push_visible(&mut self, is_reasoning: bool, text: String, out: &mut Vec<StreamDelta>) {
        if text.is_empty() {
            return;
        }
        if is_reasoning {
            self.reasoning.push_str(&text);
            out.push(StreamDelta::Reasoning(text));
        } else {
            self.text.push_str(&text);
            out.push(StreamDelta::Text(text));
        }
    }

    /// The last usage report wins (some servers send a running total in every chunk); a
    /// missing `completion_tokens` is derived from `total_tokens` when possible.
    fn record_usage(&mut self, usage: WireUsage) {
        let completion = usage.completion_tokens.or_else(|| {
            let (total, prompt) = (usage.total_tokens?, usage.prompt_tokens?);
            total.checked_sub(prompt)
        });
        if usage.prompt_tokens.is_some() {
            self.prompt_tokens = usage.prompt_tokens;
        }
        if completion.is_some() {
            self.completion_tokens = completion;
        }
        if let Some(cached) = usage.prompt_tokens_details.and_then(|d| d.cached_tokens) {
            self.cached_tokens = Some(cached);
        }
    }

    /// A `finish_reason` arrived: the reply is complete even if `[DONE]` never comes.
    pub fn saw_finish(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// Whether a named call has begun in the reply so far.
    pub fn has_calls(&self) -> bool {
        self.calls.has_calls()
    }

    /// The reply ends here, cut by the output limit (the server said so other than with a
    /// `finish_reason`).
    pub fn cut_by_output_limit(&mut self) {
        self.finish_reason = Some(FinishReason::Length);
    }

    /// The finish reason seen so far, if any.
    pub fn finish_reason(&self) -> Option<&FinishReason> {
        self.finish_reason.as_ref()
    }

    /// True when the reply has anything usable: non-blank text, reasoning, or a named call.
    pub fn has_output(&self) -> bool {
        !self.text.trim().is_empty() || !self.reasoning.trim().is_empty() || self.calls.has_calls()
    }

    /// The finished completion. Without a reported `finish_reason` (a server that only sent
    /// `[DONE]`) it is `tool_calls` when calls came back, else `stop`. Usage the provider did
    /// not report is estimated locally from `request` and the reply, and marked so.
    pub fn finish(mut self, request: &ChatRequest) -> Completion {
        // The buffers grew by doubling; the completion lives on in the turn's context, so it
        // should hold what the model wrote, not up to twice that.
        self.text.shrink_to_fit();
        self.reasoning.shrink_to_fit();
        let tool_calls = self.calls.finish();
        let finish_reason = self.finish_reason.unwrap_or(if tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        });
        let prompt = self.prompt_tokens;
        let completion = self.completion_tokens;
        let usage = Usage {
            prompt_tokens: prompt.unwrap_or_else(|| estimate::prompt_tokens(request)),
            completion_tokens: completion.unwrap_or_else(|| {
                estimate::completion_tokens(&self.text, &self.reasoning, &tool_calls)
            }),
            estimated: prompt.is_none() || completion.is_none(),
            cached_tokens: self.cached_tokens,
        };
        Completion {
            text: self.text,
            reasoning: self.reasoning,
            tool_calls,
            finish_reason,
            usage,
        }
    }
}

/// `content` as (is_reasoning, text) parts: a plain string, or an array of parts where
/// `{"type":"text","text":…}` is text and `thinking`/`reasoning` parts are reasoning.
fn content_parts(content: &Value) -> Vec<(bool, String)> {
    match content {
        Value::String(s) => vec![(false, s.clone())],
        Value::Array(parts) => parts.iter().filter_map(content_part).collect(),
        _ => Vec::new(),
    }
}

fn content_part(part: &Value) -> Option<(bool, String)> {
    if let Some(s) = part.as_str() {
        return Some((false, s.to_string()));
    }
    let kind = part.get("type").and_then(Value::as_str).unwrap_or("text");
    let is_reasoning = matches!(kind, "thinking" | "reasoning");
    let text = ["text", "thinking", "reasoning"]
        .iter()
        .find_map(|key| part.get(*key).and_then(Value::as_str))?;
    Some((is_reasoning, text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Text to cut into fragments: near-JSON noise, or real JSON with a little noise after it.
    fn json_ish() -> impl Strategy<Value = String> {
        let noise = "[{}\\[\\]\"\\\\:,a1 \n]{0,24}";
        let value = prop::collection::btree_map("[a-z\"\\\\{]{0,3}", "[a-z0-9\\[\"]{0,4}", 0..4)
            .prop_map(|m| serde_json::to_string(&m).unwrap_or_default());
        prop_oneof![
            noise.prop_map(String::from),
            (value, "[ \n}x]{0,2}").prop_map(|(v, tail)| v + &tail),
        ]
    }

    proptest! {
        #[test]
        fn the_shape_answers_like_a_full_parse_after_every_fragment(
            text in json_ish(),
            cuts in prop::collection::vec(0usize..40, 0..8),
        ) {
            let mut points: Vec<usize> = cuts
                .into_iter()
                .map(|c| c % (text.len() + 1))
                .filter(|c| text.is_char_boundary(*c))
                .collect();
            points.sort_unstable();
            points.push(text.len());
            let mut shape = JsonShape::default();
            let mut start = 0;
            for point in points {
                shape.feed(&text[start..point]);
                let so_far = &text[..point];
                prop_assert_eq!(shape.is_complete(so_far), is_complete_json(so_far), "{:?}", so_far);
                start = point;
            }
        }
    }

    #[test]
    fn a_repeated_name_after_complete_arguments_starts_a_new_call_however_they_streamed() {
        let mut acc = ToolCallAccumulator::new();
        for fragment in ["{\"a\"", ": [1, ", "\"]}\"", "]", "}"] {
            acc.push(delta(None, None, Some("f"), Some(fragment)));
        }
        acc.push(delta(None, None, Some("f"), Some("{}")));
        let calls = acc.finish();
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert_eq!(calls[0].arguments, "{\"a\": [1, \"]}\"]}");
        assert_eq!(calls[1].arguments, "{}");
    }

    fn delta(
        index: Option<u64>,
        id: Option<&str>,
        name: Option<&str>,
        args: Option<&str>,
    ) -> ToolCallDelta {
        ToolCallDelta {
            index,
            id: id.map(str::to_string),
            name: name.map(str::to_string),
            arguments: args.map(str::to_string),
        }
    }

    #[test]
    fn repeated_ids_and_names_are_replaced_not_concatenated() {
        let mut acc = ToolCallAccumulator::new();
        let named = acc.push(delta(Some(0), Some("c1"), Some("search"), Some("{\"q\":")));
        assert_eq!(named.as_deref(), Some("search"), "the call began");
        let again = acc.push(delta(Some(0), Some("c1"), Some("search"), Some("\"x\"}")));
        assert_eq!(again, None, "a repeated name is no new call");
        let calls = acc.finish();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].id, "c1");
        assert_eq!(calls[0].name, "search");
        assert_eq!(calls[0].arguments, "{\"q\":\"x\"}");
    }

    #[test]
    fn ollama_whole_calls_without_index_or_id_are_separate_calls() {
        let mut acc = ToolCallAccumulator::new();
        acc.push(delta(None, None, Some("f"), Some("{\"a\":1}")));
        acc.push(delta(None, None, Some("f"), Some("{\"a\":2}")));
        let calls = acc.finish();
        assert_eq!(calls.len(), 2);
        assert_ne!(calls[0].id, calls[1].id);
        assert!(calls[0].id.starts_with("call_ds_"));
        assert_eq!(calls[1].arguments, "{\"a\":2}");
    }

    #[test]
    fn a_new_id_on_a_reused_index_starts_a_new_call() {
        let mut acc = ToolCallAccumulator::new();
        acc.push(delta(Some(0), Some("a"), Some("f"), Some("{}")));
        acc.push(delta(Some(0), Some("b"), Some("g"), Some("{}")));
        let names: Vec<_> = acc.finish().into_iter().map(|c| (c.id, c.name)).collect();
        assert_eq!(names, [("a".into(), "f".into()), ("b".into(), "g".into())]);
    }

    #[test]
    fn nameless_calls_are_dropped_and_duplicate_ids_replaced() {
        let mut acc = ToolCallAccumulator::new();
        acc.push(delta(Some(0), Some("x"), None, Some("{}")));
        acc.push(delta(Some(1), Some("dup"), Some("f"), Some("{}")));
        acc.push(delta(Some(2), Some("dup"), Some("g"), Some("{}")));
        acc.push(delta(Some(3), None, Some("h"), Some("{}")));
        let calls = acc.finish();
        assert_eq!(calls.len(), 3);
        assert_eq!(calls[0].id, "dup");
        assert!(calls[1].id.starts_with("call_ds_"));
        assert!(calls[2].id.starts_with("call_ds_"));
        assert_ne!(calls[1].id, calls[2].id);
    }

    #[test]
    fn content_arrays_split_text_and_thinking() {
        let parts = content_parts(&serde_json::json!([
            {"type": "thinking", "thinking": "hmm"},
            {"type": "text", "text": "answer"}
        ]));
        assert_eq!(
            parts,
            [(true, "hmm".to_string()), (false, "answer".to_string())]
        );
    }
}
