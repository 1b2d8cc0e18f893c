//! The model's view of a turn: system prompt, history and problem (the byte-stable prefix),
//! and the working messages of the current step, with cached token counts.

use std::sync::Arc;

use crate::message::{Message, Role};
use crate::normalize::normalize;
use crate::texts::{Text, Texts};
use crate::tokens;

/// A working message with its cached token count.
struct Entry {
    message: Message,
    tokens: u64,
    /// A tool output already replaced by the snipped stub.
    snipped: bool,
}

impl Entry {
    /// A work tool's output that has not been snipped yet. Solve-tool results are tiny and
    /// carry the plan, so they are never snipped.
    fn is_work_output(&self) -> bool {
        let m = &self.message;
        m.role == Role::Tool
            && !self.snipped
            && !m.name.as_deref().is_some_and(crate::solve::is_solve_tool)
    }

    fn snip(&mut self, stub: &str) {
        self.message.content = stub.to_string();
        self.tokens = tokens::message_tokens(&self.message);
        self.snipped = true;
    }
}

pub(crate) struct Context {
    prefix: Vec<Message>,
    prefix_tokens: u64,
    working: Vec<Entry>,
    /// Provider-reported prompt tokens / our estimate, from the last call with real usage.
    calibration: f64,
    texts: Arc<Texts>,
}

impl Context {
    pub(crate) fn new(prefix: Vec<Message>, texts: Arc<Texts>) -> Self {
        let prefix_tokens = prefix.iter().map(tokens::message_tokens).sum();
        Context {
            prefix,
            prefix_tokens,
            working: Vec::new(),
            calibration: 1.0,
            texts,
        }
    }

    /// Replace the system prompt (only when the protocol switches mid-turn).
    pub(crate) fn set_system(&mut self, content: String) {
        if let Some(first) = self.prefix.first_mut() {
            self.prefix_tokens -= tokens::message_tokens(first);
            first.content = content;
            self.prefix_tokens += tokens::message_tokens(first);
        }
    }

    pub(crate) fn push(&mut self, message: Message) {
        let tokens = tokens::message_tokens(&message);
        self.working.push(Entry {
            message,
            tokens,
            snipped: false,
        });
    }

    /// The request's messages: prefix, working messages, then the ephemeral tail (progress
    /// block, notices), normalised.
    pub(crate) fn request_messages(&self, tail: Option<String>) -> Vec<Message> {
        let mut messages = Vec::with_capacity(self.prefix.len() + self.working.len() + 1);
        messages.extend(self.prefix.iter().cloned());
        messages.extend(self.working.iter().map(|e| e.message.clone()));
        if let Some(tail) = tail {
            messages.push(Message::user(tail));
        }
        normalize(messages, self.texts.get(Text::NoResult))
    }

    /// Estimated prompt tokens of a request with this tail.
    pub(crate) fn estimate(&self, tail_tokens: u64) -> u64 {
        let raw =
            self.prefix_tokens + self.working.iter().map(|e| e.tokens).sum::<u64>() + tail_tokens;
        (raw as f64 * self.calibration).round() as u64
    }

    /// Learn from the provider's count for a request we estimated at `estimated`.
    pub(crate) fn calibrate(&mut self, estimated_raw: u64, reported: u64) {
        if estimated_raw > 0 && reported > 0 {
            self.calibration = (reported as f64 / estimated_raw as f64).clamp(0.5, 2.0);
        }
    }

    pub(crate) fn raw_estimate(&self, tail_tokens: u64) -> u64 {
        self.prefix_tokens + self.working.iter().map(|e| e.tokens).sum::<u64>() + tail_tokens
    }

    /// The fold: drop the finished step's chatter, keeping only the last exchange (the
    /// `solve_finish_step` call and its result), so the model still sees its step accepted and
    /// what comes next; the progress block carries the rest.
    pub(crate) fn fold(&mut self) {
        let keep_from = self
            .working
            .iter()
            .rposition(|e| e.message.role == Role::Assistant)
            .unwrap_or(self.working.len());
        self.working.drain(..keep_from);
    }

    /// Snip the oldest unsnipped tool output to a stub. Returns false when nothing is left.
    pub(crate) fn snip_oldest_tool_output(&mut self) -> bool {
        let stub = self.texts.get(Text::OutputSnipped);
        let target = self
            .working
            .iter_mut()
            .find(|e| e.is_work_output() && e.message.content.len() > stub.len());
        match target {
            Some(entry) => {
                entry.snip(stub);
                true
            }
            None => false,
        }
    }

    /// Replace the largest tool output of the current step with a stub (ultimatum path).
    pub(crate) fn drop_largest_tool_output(&mut self) -> bool {
        let stub = self.texts.get(Text::OutputSnipped);
        let largest = self
            .working
            .iter_mut()
            .filter(|e| e.is_work_output())
            .max_by_key(|e| e.tokens);
        match largest {
            Some(entry) => {
                entry.snip(stub);
                true
            }
            None => false,
        }
    }
}
