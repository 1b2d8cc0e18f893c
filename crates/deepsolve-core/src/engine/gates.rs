//! The gates before an answer is accepted: without a plan, or with steps still open, the
//! model is nudged once (while rounds are left) before its answer stands.

use super::NUDGE_MARKER;
use super::turn::{Ending, TurnRun};
use crate::message::Message;
use crate::outcome::StopReason;
use crate::solve::SolveRecord;
use crate::texts::Text;

/// The nudges already given (each is given once per turn).
#[derive(Default)]
pub(super) struct Nudged {
    plan: bool,
    finish: bool,
}

impl Nudged {
    /// A plan was asked for some other way (a required call the model could not make): an
    /// answer without one stands without the plan nudge.
    pub(super) fn plan_asked(&mut self) {
        self.plan = true;
    }
}

impl TurnRun<'_> {
    /// The answer stands, or the model is nudged and the loop goes on (`None`).
    pub(super) fn finish_gate(&mut self, text: String) -> Option<Ending> {
        let record = self.record();
        let rounds_left = self.budget.rounds_left();
        if !record.has_plan() {
            if !self.nudged.plan && rounds_left {
                self.nudged.plan = true;
                self.nudge(text, self.texts.get(Text::NudgePlanFirst).to_string());
                return None;
            }
            return answered(text, StopReason::AnsweredWithoutPlan);
        }
        if record.open_steps().next().is_none() {
            return answered(text, StopReason::Answered);
        }
        if !self.nudged.finish && rounds_left {
            self.nudged.finish = true;
            let nudge = self.open_steps_nudge(&record);
            self.nudge(text, nudge);
            return None;
        }
        answered(text, StopReason::AnsweredWithOpenSteps)
    }

    /// "Steps are still open: …": the open steps and the one to continue with.
    fn open_steps_nudge(&self, record: &SolveRecord) -> String {
        let open: Vec<String> = record
            .open_steps()
            .map(|s| {
                self.texts
                    .render(Text::NudgeOpenStep, &[("id", &s.id), ("goal", &s.goal)])
            })
            .collect();
        let current = record.current().map(|s| s.id.clone()).unwrap_or_default();
        self.texts.render(
            Text::NudgeOpenSteps,
            &[("open_steps", &open.join(", ")), ("current", &current)],
        )
    }

    /// The refused answer stays in the context, followed by the nudge.
    fn nudge(&mut self, answer: String, nudge: String) {
        self.ctx.push(Message::assistant(answer));
        self.ctx
            .push(Message::user(format!("{NUDGE_MARKER} {nudge}")));
    }
}

fn answered(text: String, stop: StopReason) -> Option<Ending> {
    Some(Ending::Answered { text, stop })
}
