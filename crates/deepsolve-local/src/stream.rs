//! The live side of a reply: generated text in, [`StreamDelta`]s out, as an OpenAI-compatible
//! server with a tool-call parser would stream them. Core's live filter (the same markup
//! table the reply reader uses) turns `<think>` into reasoning and hides `<tool_call>`
//! sections, whose tool is announced as soon as its name is complete; on top of it a fenced
//! JSON block is held back while tools are offered, and at its close is either a call
//! (announced, not shown) or text (shown then); so is a reply that opens with JSON (a bare
//! call), until its end.

use deepsolve_core::stream_filter::{Piece, VisibleFilter};
use deepsolve_core::{StreamDelta, ToolSpec};

use crate::reply::{bare_call_name, looks_like_json, streamed_call_name};

/// What opens a code block that may be a call.
const FENCE: &str = "```";

pub struct ReplyStream {
    filter: VisibleFilter,
    /// Offered tools' names; empty when calls are not allowed (nothing is held back then).
    tools: Vec<String>,
    /// Visible text not yet shown: a fence that may hold a call, or a tail that may start one.
    held: String,
    /// The call section whose name was announced (its head), so each is announced once.
    announced_head: Option<String>,
    /// Whether the visible reply opens with JSON (unknown until its first visible character).
    bare_json: Option<bool>,
}

impl ReplyStream {
    /// A stream for a request whose callable tools are `tools` (none: nothing is a call).
    pub fn new(tools: &[ToolSpec]) -> Self {
        ReplyStream {
            filter: VisibleFilter::default(),
            tools: tools.iter().map(|t| t.name.clone()).collect(),
            held: String::new(),
            announced_head: None,
            bare_json: None,
        }
    }

    /// The deltas `text` (the next generated piece) makes.
    pub fn push(&mut self, text: &str) -> Vec<StreamDelta> {
        let mut out = Vec::new();
        for piece in self.filter.push(text) {
            self.take(piece, &mut out);
        }
        if let Some(head) = self.filter.new_call_head() {
            let new_section = self
                .announced_head
                .as_ref()
                .is_none_or(|seen| !head.starts_with(seen.as_str()));
            if new_section && let Some(name) = streamed_call_name(head) {
                out.push(StreamDelta::ToolCallStarted {
                    name: name.to_string(),
                });
                self.announced_head = Some(head.to_string());
            }
        }
        out
    }

    /// The end of the reply: whatever was held back.
    pub fn finish(&mut self) -> Vec<StreamDelta> {
        let mut out = Vec::new();
        for piece in self.filter.finish() {
            self.take(piece, &mut out);
        }
        let held = std::mem::take(&mut self.held);
        if self.bare_json == Some(true) {
            match bare_call_name(&held, &self.tools) {
                Some(name) => out.push(StreamDelta::ToolCallStarted { name }),
                None => {
                    self.held = held;
                    self.bare_json = Some(false);
                    self.release(&mut out);
                    let rest = std::mem::take(&mut self.held);
                    self.resolve_block(rest, &mut out);
                }
            }
            return out;
        }
        self.resolve_block(held, &mut out);
        out
    }

    fn take(&mut self, piece: Piece, out: &mut Vec<StreamDelta>) {
        match piece {
            Piece::Reasoning(text) if !text.is_empty() => out.push(StreamDelta::Reasoning(text)),
            Piece::Reasoning(_) => {}
            Piece::Text(text) if self.tools.is_empty() => push_text(out, text),
            Piece::Text(text) => {
                self.held.push_str(&text);
                if self.bare_json.is_none() && !self.held.trim_start().is_empty() {
                    self.bare_json = Some(looks_like_json(&self.held));
                }
                // A reply that opens as JSON may be a bare call: it is held to the end.
                if self.bare_json != Some(true) {
                    self.release(out);
                }
            }
        }
    }

    /// Show held text up to the next fence; a complete fenced block is resolved.
    fn release(&mut self, out: &mut Vec<StreamDelta>) {
        loop {
            let Some(open) = self.held.find(FENCE) else {
                // A trailing "`" or "``" may become a fence.
                let keep = self.held.len() - self.held.trim_end_matches('`').len();
                let ready = self.held.len() - keep;
                push_text(out, self.held[..ready].to_string());
                self.held.drain(..ready);
                return;
            };
            push_text(out, self.held[..open].to_string());
            self.held.drain(..open);
            let Some(close) = self.held[FENCE.len()..].find(FENCE) else {
                return;
            };
            let end = FENCE.len() + close + FENCE.len();
            let block: String = self.held.drain(..end).collect();
            self.resolve_block(block, out);
        }
    }

    /// A fenced block (or any held text): announced when it is a call of an offered tool,
    /// else shown.
    fn resolve_block(&mut self, block: String, out: &mut Vec<StreamDelta>) {
        if block.is_empty() {
            return;
        }
        let body = block
            .strip_prefix(FENCE)
            .map(|b| b.strip_suffix(FENCE).unwrap_or(b));
        let name = body.and_then(|b| {
            let (info, json) = b.split_once('\n')?;
            let info = info.trim();
            if !(info.is_empty() || info.eq_ignore_ascii_case("json")) {
                return None;
            }
            let name = streamed_call_name(json)?;
            self.tools
                .iter()
                .any(|t| t == name)
                .then(|| name.to_string())
        });
        match name {
            Some(name) => out.push(StreamDelta::ToolCallStarted { name }),
            None => push_text(out, block),
        }
    }
}

fn push_text(out: &mut Vec<StreamDelta>, text: String) {
    if !text.is_empty() {
        out.push(StreamDelta::Text(text));
    }
}
