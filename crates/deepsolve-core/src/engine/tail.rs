//! The ephemeral last user message, rendered from state before every request: the progress
//! block once a plan exists (it carries the plan through every fold), and notices.

use super::turn::TurnRun;
use super::{NOTICE_MARKER, NUDGE_MARKER};
use crate::progress;
use crate::texts::Text;

impl TurnRun<'_> {
    /// The tail of the request of round `round`, if it has one.
    pub(super) fn tail(&self, round: u32) -> Option<String> {
        let parts: Vec<String> = [
            self.progress_or_round_notice(round),
            self.drafts_notice(),
            self.step_directive(),
            self.call_notice(),
            self.token_notice(),
        ]
        .into_iter()
        .flatten()
        .collect();
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }

    /// The progress block; without a plan, a notice once the round budget is spent.
    fn progress_or_round_notice(&self, round: u32) -> Option<String> {
        let record = self.record();
        if record.has_plan() {
            let at = self.budget.position(round);
            return Some(progress::render(&self.problem, &record, &at, &self.texts));
        }
        self.budget.in_settlement(round).then(|| {
            let notice = self.texts.render(
                Text::NoticeRoundBudgetSpent,
                &[("max_rounds", &self.budget.max_rounds())],
            );
            format!("{NUDGE_MARKER} {notice}")
        })
    }

    /// Once decoding has had to step in, the step to work on now, said outright: a small
    /// model shown only the checklist copied it back instead of working the step.
    fn step_directive(&self) -> Option<String> {
        if !self.decoding.directs_steps() {
            return None;
        }
        let record = self.record();
        let step = record.current()?;
        let line = self.texts.render(
            Text::ProgressWorkStep,
            &[("id", &step.id), ("goal", &step.goal)],
        );
        Some(format!("{NOTICE_MARKER} {line}"))
    }

    /// The round asks for the call the model's reasoning leads to (`solve.enforce`): which.
    fn call_notice(&self) -> Option<String> {
        let record = self.record();
        if !self.decoding.asked_for_call(&record) {
            return None;
        }
        let text = if record.has_plan() {
            Text::NoticeCallStep
        } else {
            Text::NoticeCallPlan
        };
        Some(format!("{NOTICE_MARKER} {}", self.texts.get(text)))
    }

    /// Two thirds of the token budget spent: wrap up.
    fn token_notice(&self) -> Option<String> {
        self.budget.token_notice_due().then(|| {
            let notice = self.texts.render(
                Text::NoticeTokenBudget,
                &[
                    ("used", &self.budget.usage.total()),
                    ("budget", &self.budget.token_budget()),
                ],
            );
            format!("{NOTICE_MARKER} {notice}")
        })
    }
}
