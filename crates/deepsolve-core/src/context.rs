//! The model's view of a turn: system prompt, history and problem (the byte-stable prefix),
//! and the working messages of the current step, with cached token counts.

use std::sync::Arc;

use crate::message::{Message, Role};
use crate::model::Usage;
use crate::normalize::normalize;
use crate::texts::{Text, Texts};
use crate::tokens;

/// A working message with its cached token count.
struct Entry {
    message: Message,
    tokens: u64,
    /// A tool output already replaced by the snipped stub.
    snipped: bool,
    /// Kept through every fold of the turn (see [`Context::push_kept`]).
    kept: bool,
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

    /// Replace the content with `stub`, keeping `total` (the context's sum) in step.
    fn snip(&mut self, stub: &str, total: &mut u64) {
        self.message.content = stub.to_string();
        *total -= self.tokens;
        self.tokens = tokens::message_tokens(&self.message);
        *total += self.tokens;
        self.snipped = true;
    }
}

/// The provider's count of the last request, where the local estimate stood when its reply
/// came back: the next request is projected from it by estimating only what changed since.
struct Anchor {
    /// Prompt + completion tokens the provider reported for the last call.
    reported: u64,
    /// The estimate of the context's messages when that reply came back, plus the reply's own
    /// message once it joins (the completion count already covers it).
    messages: u64,
    /// The estimate of the tail that request carried (ephemeral: not in the context now).
    tail: u64,
    /// The reply's message has not joined the context yet.
    reply_pending: bool,
}

pub(crate) struct Context {
    prefix: Vec<Message>,
    working: Vec<Entry>,
    /// Estimated tokens of all messages, prefix and working, kept as they change.
    messages_tokens: u64,
    /// Estimated tokens of the tail of the last request built.
    sent_tail_tokens: u64,
    anchor: Option<Anchor>,
    texts: Arc<Texts>,
}

impl Context {
    pub(crate) fn new(prefix: Vec<Message>, texts: Arc<Texts>) -> Self {
        let messages_tokens = prefix.iter().map(tokens::message_tokens).sum();
        Context {
            prefix,
            working: Vec::new(),
            messages_tokens,
            sent_tail_tokens: 0,
            anchor: None,
            texts,
        }
    }

    /// Replace the system prompt (only when the protocol switches mid-turn).
    pub(crate) fn set_system(&mut self, content: String) {
        if let Some(first) = self.prefix.first_mut() {
            self.messages_tokens -= tokens::message_tokens(first);
            first.content = content;
            self.messages_tokens += tokens::message_tokens(first);
        }
    }

    pub(crate) fn push(&mut self, message: Message) {
        self.push_entry(message, false);
    }

    /// Push `message` to stay for the rest of the turn: no fold drops it, nor the results of
    /// its calls.
    pub(crate) fn push_kept(&mut self, message: Message) {
        self.push_entry(message, true);
    }

    fn push_entry(&mut self, message: Message, kept: bool) {
        let tokens = tokens::message_tokens(&message);
        self.messages_tokens += tokens;
        if let Some(anchor) = self.anchor.as_mut().filter(|a| a.reply_pending) {
            anchor.reply_pending = false;
            if message.role == Role::Assistant {
                anchor.messages += tokens;
            }
        }
        self.working.push(Entry {
            message,
            tokens,
            snipped: false,
            kept,
        });
    }

    /// The last working message, taken out when it is an assistant's text without calls (the
    /// reasoning a call is then joined to); its text.
    pub(crate) fn take_trailing_assistant_text(&mut self) -> Option<String> {
        let last = self.working.last()?;
        if last.message.role != Role::Assistant || !last.message.tool_calls.is_empty() {
            return None;
        }
        let entry = self.working.pop()?;
        self.messages_tokens -= entry.tokens;
        Some(entry.message.content)
    }

    /// The request's messages: prefix, working messages, then the ephemeral tail (progress
    /// block, notices) of `tail_tokens` estimated tokens, normalised.
    pub(crate) fn request_messages(
        &mut self,
        tail: Option<String>,
        tail_tokens: u64,
    ) -> Vec<Message> {
        self.sent_tail_tokens = tail_tokens;
        let mut messages = Vec::with_capacity(self.prefix.len() + self.working.len() + 1);
        messages.extend(self.prefix.iter().cloned());
        messages.extend(self.working.iter().map(|e| e.message.clone()));
        if let Some(tail) = tail {
            messages.push(Message::user(tail));
        }
        normalize(messages, self.texts.get(Text::NoResult))
    }

    /// Projected prompt tokens of the next request with a tail of `tail_tokens`: the last
    /// reported usage plus the estimate of what changed since, or, without a report, the
    /// estimate of the whole.
    pub(crate) fn estimate(&self, tail_tokens: u64) -> u64 {
        let now = self.messages_tokens + tail_tokens;
        match &self.anchor {
            Some(a) => (a.reported + now).saturating_sub(a.messages + a.tail),
            None => now,
        }
    }

    /// The projection with the tail of the last request (between rounds, before the next
    /// tail is rendered).
    pub(crate) fn estimate_with_sent_tail(&self) -> u64 {
        self.estimate(self.sent_tail_tokens)
    }

    /// The provider's usage of the call just made (for the request last built): the anchor of
    /// the projections until the next call. Usage estimated locally anchors nothing.
    pub(crate) fn anchor(&mut self, usage: &Usage) {
        self.anchor = (!usage.estimated).then(|| Anchor {
            reported: usage.total(),
            messages: self.messages_tokens,
            tail: self.sent_tail_tokens,
            reply_pending: true,
        });
    }

    /// The fold: drop the finished step's chatter, keeping only the last exchange (the
    /// `solve_finish_step` call and its result), so the model still sees its step accepted and
    /// what comes next; the progress block carries the rest. A message pushed to be kept
    /// stays, with the results of its calls.
    pub(crate) fn fold(&mut self) {
        let keep_from = self
            .working
            .iter()
            .rposition(|e| e.message.role == Role::Assistant)
            .unwrap_or(self.working.len());
        let mut dropped = 0;
        let mut index = 0;
        let mut answers_kept = false;
        self.working.retain(|e| {
            answers_kept = e.kept || (answers_kept && e.message.role == Role::Tool);
            let keep = answers_kept || index >= keep_from;
            index += 1;
            if !keep {
                dropped += e.tokens;
            }
            keep
        });
        self.messages_tokens -= dropped;
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
                entry.snip(stub, &mut self.messages_tokens);
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
                entry.snip(stub, &mut self.messages_tokens);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;
    use deepsolve_protocol::Language;

    fn context() -> Context {
        let prefix = vec![
            Message::system("You solve problems."),
            Message::user("2+2?"),
        ];
        Context::new(prefix, Texts::builtin(Language::En))
    }

    fn reported(prompt_tokens: u64, completion_tokens: u64) -> Usage {
        Usage {
            prompt_tokens,
            completion_tokens,
            estimated: false,
            cached_tokens: None,
        }
    }

    fn call() -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: "compute".into(),
            arguments: "{\"q\":\"2+2\"}".into(),
        }
    }

    #[test]
    fn without_usage_the_projection_is_the_estimate_of_the_whole() {
        let mut ctx = context();
        let whole = |ctx: &Context| {
            ctx.prefix.iter().map(tokens::message_tokens).sum::<u64>()
                + ctx.working.iter().map(|e| e.tokens).sum::<u64>()
        };
        ctx.request_messages(Some("tail".into()), 7);
        ctx.anchor(&Usage {
            estimated: true,
            ..reported(5000, 10)
        });
        ctx.push(Message::assistant("4"));
        assert_eq!(ctx.estimate(7), whole(&ctx) + 7);
    }

    #[test]
    fn the_projection_is_the_report_plus_what_changed_since() {
        let mut ctx = context();
        ctx.request_messages(Some("round 1".into()), 5);
        ctx.anchor(&reported(1000, 30));
        // The reply is in the completion count; its result and the new tail are not.
        ctx.push(Message::assistant_with_calls("", vec![call()], None));
        let result = Message::tool_result(&call(), "4 ".repeat(100));
        let result_tokens = tokens::message_tokens(&result);
        ctx.push(result);
        assert_eq!(ctx.estimate(9), 1000 + 30 + result_tokens - 5 + 9);
        // Snipping the result takes its estimate out again, less the stub's.
        assert!(ctx.snip_oldest_tool_output());
        let stub = ctx.working.last().map(|e| e.tokens).unwrap_or_default();
        assert_eq!(ctx.estimate(9), 1000 + 30 + stub - 5 + 9);
    }

    #[test]
    fn a_fold_takes_the_dropped_messages_out_of_the_projection() {
        let mut ctx = context();
        ctx.push(Message::assistant_with_calls("", vec![call()], None));
        ctx.push(Message::tool_result(&call(), "chatter ".repeat(50)));
        ctx.push(Message::assistant_with_calls("done", vec![call()], None));
        ctx.request_messages(None, 0);
        ctx.anchor(&reported(2000, 0));
        let dropped: u64 = ctx.working[..2].iter().map(|e| e.tokens).sum();
        ctx.fold();
        assert_eq!(ctx.estimate_with_sent_tail(), 2000 - dropped);
    }

    #[test]
    fn a_message_pushed_to_be_kept_stays_through_every_fold() {
        let mut ctx = context();
        ctx.push_kept(Message::assistant_with_calls(
            "my working: 2+2 is 4",
            vec![call()],
            None,
        ));
        ctx.push(Message::tool_result(&call(), "planned"));
        for step in ["S1", "S2"] {
            ctx.push(Message::assistant_with_calls("", vec![call()], None));
            ctx.push(Message::tool_result(&call(), "chatter"));
            ctx.push(Message::assistant_with_calls(step, vec![call()], None));
            ctx.push(Message::tool_result(&call(), format!("{step} accepted")));
            ctx.fold();
        }
        let contents: Vec<String> = ctx
            .working
            .iter()
            .map(|e| e.message.content.clone())
            .collect();
        assert_eq!(
            contents,
            ["my working: 2+2 is 4", "planned", "S2", "S2 accepted"]
        );
        let whole: u64 = ctx.prefix.iter().map(tokens::message_tokens).sum::<u64>()
            + ctx.working.iter().map(|e| e.tokens).sum::<u64>();
        assert_eq!(ctx.messages_tokens, whole);
    }
}
