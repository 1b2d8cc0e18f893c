//! The one forced-answer path: when a budget or a guard ends the turn, the model is asked
//! once more, without tools, under the ultimatum; failing that, the finished steps'
//! summaries are the answer.
//!
//! The tool list stays in that request (`tool_choice: "none"`), so the prompt's prefix is the
//! one the endpoint has cached, unless the model's own answer was refused: a model that wrote
//! a call where its answer was due is asked without the list. Llama.cpp's server holds no
//! grammar beside tools, and while the tools were shown, the 1.5B model answered `"none"`
//! with a `solve_finish_step` call written as JSON (3 of 20 turns). Under decoding the answer
//! round has then already been asked again offering no tools (`decoding.rs`), so this
//! request reuses that prefix.

use super::ULTIMATUM_MARKER;
use super::call::CallFailure;
use super::turn::{Final, TurnRun};
use crate::event::{EventKind, RoundRole, WarningKind};
use crate::model::{Completion, ToolChoice};
use crate::outcome::{AnswerSource, StopReason};
use crate::solve::SolveRecord;
use crate::texts::{Text, Texts};

impl TurnRun<'_> {
    pub(super) async fn force_answer(&mut self, stop: StopReason) -> Final {
        self.force_answer_offering(stop, Offer::ToolList).await
    }

    /// The forced answer after the model's own was refused: the tools are not offered.
    pub(super) async fn force_answer_again(&mut self, stop: StopReason) -> Final {
        self.force_answer_offering(stop, Offer::Nothing).await
    }

    async fn force_answer_offering(&mut self, stop: StopReason, offer: Offer) -> Final {
        if stop == StopReason::Cancelled || self.cancel.is_cancelled() {
            return Final::without_answer(StopReason::Cancelled);
        }
        self.emit.emit(EventKind::Warning {
            kind: WarningKind::ForcedAnswer,
            message: format!("{stop}: asking the model for a final answer without tools"),
        });
        let tail = self.ultimatum_tail();
        let tail_tokens = crate::tokens::count(&tail);
        self.make_room_for_the_answer(tail_tokens);
        self.budget.rounds += 1;
        self.emit.emit(EventKind::RoundStarted {
            round: self.budget.rounds,
            max_rounds: self.budget.max_rounds(),
            context_tokens: self.ctx.estimate(tail_tokens),
            context_window: self.budget.window(),
            tool_choice: self.decoding.is_on().then(|| "none".to_string()),
            draft: false,
        });
        let max_tokens = self.budget.forced_answer_tokens();
        let mut request = self.request(Some(tail), tail_tokens, ToolChoice::None, max_tokens);
        if offer == Offer::Nothing {
            request.tools.clear();
        }
        let deadline = self.budget.forced_answer_deadline();
        match self.call_model(&request, deadline).await {
            Ok(c) => {
                if let Some(text) = self.forced_text(c) {
                    return Final::answered(text, AnswerSource::Forced, stop);
                }
            }
            Err(CallFailure::Cancelled) => return Final::without_answer(StopReason::Cancelled),
            Err(CallFailure::Deadline) => self.emit.emit(EventKind::Warning {
                kind: WarningKind::ForcedAnswer,
                message: "the forced answer did not arrive in time".into(),
            }),
            Err(CallFailure::Model(e)) => self.emit.emit(EventKind::Warning {
                kind: WarningKind::ForcedAnswer,
                message: format!("the forced answer failed: {e}"),
            }),
        }
        self.summaries_answer(stop)
    }

    /// The next round's tail with the ultimatum at its end.
    fn ultimatum_tail(&self) -> String {
        let mut tail = self.tail(self.budget.rounds + 1).unwrap_or_default();
        if !tail.is_empty() {
            tail.push_str("\n\n");
        }
        tail.push_str(ULTIMATUM_MARKER);
        tail.push(' ');
        tail.push_str(self.texts.get(Text::Ultimatum));
        tail
    }

    /// Drop the largest tool outputs until the prompt fits under the ultimatum threshold.
    fn make_room_for_the_answer(&mut self, tail_tokens: u64) {
        let limit = self.budget.forced_answer_limit();
        while self.ctx.estimate(tail_tokens) > limit && self.ctx.drop_largest_tool_output() {}
    }

    /// The forced reply's text, joined with any text cut off before; `None` when empty.
    fn forced_text(&mut self, c: Completion) -> Option<String> {
        let c = self.interpret(c).completion;
        self.record_round(&c, RoundRole::Answer);
        let mut text = self.reply.take_answer_parts();
        text.push_str(&c.text);
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_string())
    }

    /// The answer of last resort: the step summaries, if any step was finished.
    pub(super) fn summaries_answer(&self, stop: StopReason) -> Final {
        let answer = summary_answer(&self.record(), &self.texts);
        Final {
            source: answer.as_ref().map(|_| AnswerSource::StepSummaries),
            answer,
            stop,
            error: None,
        }
    }
}

/// What the forced answer's request offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Offer {
    /// The turn's tool list, with `tool_choice: "none"`: the prefix stays as cached.
    ToolList,
    /// No tools at all.
    Nothing,
}

/// The finished steps' summaries, labelled as such.
fn summary_answer(record: &SolveRecord, texts: &Texts) -> Option<String> {
    let summaries = record.summaries();
    if summaries.is_empty() {
        return None;
    }
    let mut out = format!("{}\n", texts.get(Text::SummaryAnswerHeader));
    for step in summaries {
        out.push('\n');
        out.push_str(&texts.render(
            Text::SummaryAnswerStep,
            &[
                ("id", &step.id),
                ("goal", &step.goal),
                ("summary", &step.summary),
            ],
        ));
    }
    let open: Vec<String> = record.open_steps().map(|s| s.id.clone()).collect();
    if !open.is_empty() {
        out.push_str("\n\n");
        out.push_str(&texts.render(
            Text::SummaryAnswerNotDone,
            &[("open_steps", &open.join(", "))],
        ));
    }
    Some(out)
}
