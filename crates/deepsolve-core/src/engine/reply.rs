//! Taking in one completion: its content read by the protocol, the round recorded, then
//! tool calls, a reply cut off by the output limit, silence, or an answer for the gates.

use super::budget::{MAX_EMPTY_ROUNDS, MAX_FORMAT_ERRORS};
use super::turn::{Ending, TurnRun};
use super::{CONTINUE_MARKER, NUDGE_MARKER};
use crate::event::{EventKind, RoundRole, WarningKind};
use crate::message::{Message, ToolCall};
use crate::model::{Completion, FinishReason};
use crate::outcome::StopReason;
use crate::texts::Text;
use crate::wire::{MarkupError, ParsedCall};

/// `text` without its leading and trailing whitespace, in the same buffer (an answer may be
/// megabytes).
fn into_trimmed(mut text: String) -> String {
    text.truncate(text.trim_end().len());
    let leading = text.len() - text.trim_start().len();
    text.drain(..leading);
    text
}

/// What the replies of a turn have left behind for the next one.
#[derive(Default)]
pub(super) struct ReplyState {
    /// Rounds in a row without visible output.
    empty_rounds: u32,
    /// Rounds in a row with unreadable calls.
    format_errors: u32,
    /// The one larger-output retry was used.
    retried_output: bool,
    /// The output budget of the next round, when it is not the configured one.
    next_max_tokens: Option<u32>,
    /// Text of replies cut off by the output limit, joined with their continuation.
    answer_parts: Vec<String>,
    /// Calls read from text so far (for their ids).
    calls_read: u64,
    /// The model wrote a tool result of its own in this turn.
    invented_result: bool,
}

impl ReplyState {
    /// The next round's output budget (`configured` unless a retry asked for more).
    pub(super) fn take_max_tokens(&mut self, configured: u32) -> u32 {
        self.next_max_tokens.take().unwrap_or(configured)
    }

    /// The model has written a tool result of its own in this turn.
    pub(super) fn invented_result(&self) -> bool {
        self.invented_result
    }

    /// Text held back from replies cut off by the output limit, emptied.
    pub(super) fn take_answer_parts(&mut self) -> String {
        std::mem::take(&mut self.answer_parts).concat()
    }
}

/// A call-shaped block the model wrote that could not be read.
pub(super) struct Unreadable {
    pub(super) raw: String,
    pub(super) error: MarkupError,
}

/// A completion as the protocol read it.
pub(super) struct Interpreted {
    /// Visible text only; calls written as markup moved to `tool_calls`.
    pub(super) completion: Completion,
    pub(super) unreadable: Vec<Unreadable>,
}

impl Interpreted {
    pub(super) fn has_calls(&self) -> bool {
        !self.completion.tool_calls.is_empty() || !self.unreadable.is_empty()
    }
}

impl TurnRun<'_> {
    /// Take in one completion. `Some` ends the loop.
    pub(super) async fn absorb(&mut self, c: Completion) -> Option<Ending> {
        let mut reply = self.interpret(c);
        if self.set_aside_strays(&mut reply) || self.set_aside_call_for_answer(&reply) {
            self.record_round(&reply.completion, RoundRole::Narration);
            return None;
        }
        // The spine as this reply found it: nothing below changes it before the calls run.
        let record = self.record();
        if self.decoding.asked_for_call(&record)
            && reply.completion.finish_reason == FinishReason::Length
        {
            let cut = take_cut_call(&mut reply.completion);
            if reply.completion.tool_calls.is_empty() {
                self.record_round(&reply.completion, RoundRole::Narration);
                let written = match cut {
                    Some(call) => format!("{}{}", reply.completion.text, call.arguments),
                    None => std::mem::take(&mut reply.completion.text),
                };
                return self.after_cut_call(&written);
            }
        }
        self.run_written_program(&mut reply);
        let cut = reply.completion.finish_reason == FinishReason::Length;
        let text_only = !reply.has_calls() && !cut;
        // Text cut off by the output limit is reasoning too where a call is due (its visible
        // part: a reply spent on hidden reasoning gets the larger-output retry instead).
        // Asked to go on, a small model went on copying its tail, round after round.
        let visible = !reply.completion.text.trim().is_empty();
        let reasoning =
            !reply.has_calls() && (!cut || visible) && self.decoding.takes_reasoning(&record);
        let role = if reply.completion.tool_calls.is_empty() && !reasoning {
            RoundRole::Answer
        } else {
            RoundRole::Narration
        };
        self.record_round(&reply.completion, role);
        self.count_format_errors(&reply);
        if reasoning {
            self.reply.empty_rounds = 0;
            let text = &reply.completion.text;
            self.keep_reasoning(if cut { before_loop(text) } else { text });
            return None;
        }
        if text_only
            && self.decoding.asked_for_call(&record)
            && let Some(reasoning) = self.decoding_not_honoured()
        {
            let text = std::mem::take(&mut reply.completion.text);
            reply.completion.text = if text.trim().is_empty() {
                reasoning
            } else {
                format!("{reasoning}\n\n{text}")
            };
        }
        if reply.has_calls() {
            self.reply.empty_rounds = 0;
            let ending = self.work_round(reply).await;
            if ending.is_none() && self.reply.format_errors >= MAX_FORMAT_ERRORS {
                return Some(Ending::Force(StopReason::FormatErrors));
            }
            return ending;
        }
        self.absorb_text(reply.completion)
    }

    /// Read the reply's content: reasoning out, invented results cut, markup calls taken
    /// (when the provider gave no native calls).
    pub(super) fn interpret(&mut self, mut c: Completion) -> Interpreted {
        let parsed = self.wire.protocol().read_reply(std::mem::take(&mut c.text));
        if parsed.cut_invented {
            self.reply.invented_result = true;
            self.emit.emit(EventKind::Warning {
                kind: WarningKind::InventedToolResponse,
                message: "the model wrote its own tool result; it was cut before anything saw it"
                    .into(),
            });
        }
        if !parsed.reasoning.is_empty() {
            if !c.reasoning.is_empty() {
                c.reasoning.push('\n');
            }
            c.reasoning.push_str(&parsed.reasoning);
        }
        c.text = parsed.visible;
        let unreadable = if c.tool_calls.is_empty() {
            self.take_text_calls(parsed.calls, &mut c.tool_calls)
        } else {
            Vec::new()
        };
        Interpreted {
            completion: c,
            unreadable,
        }
    }

    /// Calls read from the reply's text join `calls` (with ids); the unreadable ones return.
    fn take_text_calls(
        &mut self,
        parsed: Vec<ParsedCall>,
        calls: &mut Vec<ToolCall>,
    ) -> Vec<Unreadable> {
        let mut unreadable = Vec::new();
        for call in parsed {
            match call {
                ParsedCall::Call { name, arguments } => calls.push(ToolCall {
                    id: self.next_call_id(),
                    name,
                    arguments,
                }),
                ParsedCall::Malformed { raw, error } => unreadable.push(Unreadable { raw, error }),
            }
        }
        unreadable
    }

    /// Ids for calls read from text: unique within the turn (and across turns, by turn id).
    pub(super) fn next_call_id(&mut self) -> String {
        self.reply.calls_read += 1;
        format!("call_{}_{}", self.tool_ctx.turn_id, self.reply.calls_read)
    }

    /// The round's usage and its `round_finished` event.
    pub(super) fn record_round(&mut self, c: &Completion, role: RoundRole) {
        self.budget.usage.add(&c.usage);
        self.emit.emit(EventKind::RoundFinished {
            round: self.budget.rounds,
            role,
            finish_reason: c.finish_reason.as_str().to_string(),
            usage: c.usage,
        });
    }

    fn count_format_errors(&mut self, reply: &Interpreted) {
        if reply.unreadable.is_empty() {
            self.reply.format_errors = 0;
        } else {
            self.reply.format_errors += 1;
        }
    }

    /// A reply without calls: cut off, silent, or an answer. Text cut off by the output limit
    /// is continued, unless it was going round in a loop: then it ends where the loop began
    /// (asked to go on, the 1.5B model's answer round wrote the same paragraphs again, round
    /// after round, its context growing by a thousand tokens each time).
    fn absorb_text(&mut self, mut c: Completion) -> Option<Ending> {
        let visible = !c.text.trim().is_empty();
        if c.finish_reason == FinishReason::Length {
            if !visible {
                if !self.reply.retried_output {
                    self.retry_with_more_output();
                    return None;
                }
            } else if repeats_itself(&c.text) {
                self.emit.emit(EventKind::Warning {
                    kind: WarningKind::Length,
                    message: "the reply was cut off by the output limit going round in a loop: it ends where the loop began".into(),
                });
                c.text = before_loop(&c.text).to_string();
            } else {
                self.ask_to_continue(c.text);
                return None;
            }
        }
        if !visible && self.reply.answer_parts.is_empty() {
            return self.silent_round();
        }
        self.reply.empty_rounds = 0;
        let before = self.reply.take_answer_parts();
        let text = if before.is_empty() {
            c.text
        } else {
            before + &c.text
        };
        self.finish_gate(into_trimmed(text))
    }

    /// Visible text cut off by the output limit: kept, and the model asked to go on.
    fn ask_to_continue(&mut self, text: String) {
        self.reply.answer_parts.push(text.clone());
        self.ctx.push(Message::assistant(text));
        let nudge = self.texts.get(Text::NudgeContinue);
        self.ctx
            .push(Message::user(format!("{CONTINUE_MARKER} {nudge}")));
    }

    /// The whole output budget spent without visible output (a reasoning model): once, the
    /// round again with a larger budget.
    fn retry_with_more_output(&mut self) {
        self.retry_larger("the model spent its whole output budget without visible output");
    }

    /// The one larger-output retry of the turn, `why` said in its warning.
    fn retry_larger(&mut self, why: &str) {
        self.reply.retried_output = true;
        let larger = self.budget.retry_max_tokens(self.ctx.estimate(0));
        self.reply.next_max_tokens = Some(larger);
        self.emit.emit(EventKind::Warning {
            kind: WarningKind::Length,
            message: format!("{why}; retrying once with max_tokens = {larger}"),
        });
    }

    /// A call that was asked for, cut off by the output limit: dropped, since the next round
    /// asks for the call anew (continuing a cut call means nothing). Unless the cut text was
    /// going round in a loop, the call is asked once more with a larger output budget. A
    /// loop, or a second cut, means this model cannot make the call (the 0.5B model wrote one
    /// plan step over and over inside its JSON until the limit, six rounds in a row):
    /// decoding lets go, and the model's own reasoning meets the gates as its reply, a plan
    /// having been asked for already.
    fn after_cut_call(&mut self, text: &str) -> Option<Ending> {
        if !repeats_itself(text) && !self.reply.retried_output {
            self.retry_larger("the call asked for was cut off by the output limit");
            return None;
        }
        let reasoning = self.let_go_of_decoding(
            "the call asked for was cut off by the output limit again, or looped: decoding lets go, and the prompt holds the spine for the rest of the turn",
        );
        let reasoning = reasoning.filter(|r| !r.trim().is_empty())?;
        if !self.record().has_plan() {
            self.nudged.plan_asked();
        }
        self.finish_gate(reasoning)
    }

    /// Nothing visible and no calls: nudged to act, until silence ends the turn.
    fn silent_round(&mut self) -> Option<Ending> {
        self.reply.empty_rounds += 1;
        if self.reply.empty_rounds >= MAX_EMPTY_ROUNDS {
            return Some(Ending::Force(StopReason::EmptyRounds));
        }
        let nudge = self.texts.get(Text::NudgeActNow);
        self.ctx
            .push(Message::user(format!("{NUDGE_MARKER} {nudge}")));
        None
    }
}

/// The reply's last call, taken out when the output limit cut its arguments short (they do
/// not read as JSON): a native call cut off, as a call written in text is.
fn take_cut_call(completion: &mut Completion) -> Option<ToolCall> {
    let last = completion.tool_calls.last()?;
    if serde_json::from_str::<serde_json::Value>(&last.arguments).is_ok() {
        return None;
    }
    completion.tool_calls.pop()
}

/// Characters at the end of a cut reply that, found three times in it, show a loop.
const LOOP_PROBE_CHARS: usize = 48;

/// The last [`LOOP_PROBE_CHARS`] characters of `text`, if it has that many.
fn loop_probe(text: &str) -> Option<&str> {
    let (start, _) = text.char_indices().rev().nth(LOOP_PROBE_CHARS - 1)?;
    Some(&text[start..])
}

/// `text` ends in a loop: its last [`LOOP_PROBE_CHARS`] characters occur three times in it.
fn repeats_itself(text: &str) -> bool {
    loop_probe(text).is_some_and(|probe| text.matches(probe).count() >= 3)
}

/// `text` up to the end of the first turn of the loop it ends in (all of it without one).
pub(super) fn before_loop(text: &str) -> &str {
    match loop_probe(text) {
        Some(probe) if repeats_itself(text) => {
            let first = text.find(probe).unwrap_or(0);
            &text[..first + probe.len()]
        }
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::repeats_itself;

    #[test]
    fn a_loop_is_told_from_a_long_reply() {
        let step = r#"{"goal": "Fold a piece of paper vertically and unfold"}, "#;
        let looping = format!(
            r#"{{"name": "solve_plan", "arguments": {{"steps": [{}"#,
            step.repeat(12)
        );
        assert!(repeats_itself(&looping));
        let long: String = (0..200)
            .map(|i| format!("step {i} adds {} ", i * 7))
            .collect();
        assert!(!repeats_itself(&long));
        assert!(!repeats_itself("short"));
    }

    #[test]
    fn a_looping_reply_keeps_what_came_before_the_loop_and_one_turn_of_it() {
        let unit = "  [ ] S2 Janet bakes muffins for her friends <- current\n";
        let text = format!("Eggs left: 16 - 3 - 4 = 9.\n{}", unit.repeat(9));
        let kept = super::before_loop(&text);
        assert!(kept.starts_with("Eggs left: 16 - 3 - 4 = 9.\n"), "{kept:?}");
        assert!(
            kept.len() < "Eggs left: 16 - 3 - 4 = 9.\n".len() + 2 * unit.len(),
            "{kept:?}"
        );
        let plain = "no loop in this reply at all, just a long enough line of reasoning";
        assert_eq!(super::before_loop(plain), plain);
    }
}
