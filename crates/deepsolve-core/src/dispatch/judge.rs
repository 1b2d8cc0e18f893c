//! The gates one call passes, in order: the per-round limit, the allowlist, readable and
//! valid arguments, duplicates, the repetition guard, then the spine (solve tools run here,
//! inline and in call order, because they change the state later calls are judged by) or
//! the plan-first gate for work tools.

use std::collections::HashMap;

use serde_json::Value;

use super::repetition::{REFUSE_AT, Signature};
use super::toolbox::Toolbox;
use crate::config::SolveConfig;
use crate::json_repair::JsonError;
use crate::message::ToolCall;
use crate::solve::spine::{self, SOLVE_FINISH_STEP, SpineEffect};
use crate::solve::{SessionHandle, SolveSession, is_solve_tool};
use crate::texts::{Text, Texts};
use crate::tool::{ToolOutput, ToolRef};

/// What happens to one call.
pub(super) enum Verdict {
    /// Answered already: refused, or a solve tool that ran.
    Done {
        /// Boxed: a `ToolOutput` is far larger than the other variant.
        output: Box<ToolOutput>,
        effect: SpineEffect,
    },
    /// A work tool to run.
    Work(ToolRef),
}

fn refuse(message: impl Into<String>) -> Verdict {
    Verdict::Done {
        output: Box::new(ToolOutput::error(message)),
        effect: SpineEffect::None,
    }
}

/// The round's shared context for judging its calls.
pub(super) struct Round<'a> {
    pub(super) toolbox: &'a Toolbox,
    pub(super) session: &'a SessionHandle,
    pub(super) config: &'a SolveConfig,
    pub(super) texts: &'a Texts,
    /// Calls past this index are skipped.
    pub(super) limit: usize,
    /// The round calls a work tool (a `solve_finish_step` beside it is refused).
    pub(super) has_work: bool,
    /// The first call of each signature this round, for duplicates.
    pub(super) first_of: HashMap<Signature, String>,
}

/// One call as it comes to be judged.
pub(super) struct Candidate<'a> {
    pub(super) index: usize,
    pub(super) call: &'a ToolCall,
    pub(super) parsed: &'a Result<Value, JsonError>,
    pub(super) signature: Signature,
    /// Rounds in a row this exact call was made.
    pub(super) streak: u32,
}

impl Round<'_> {
    pub(super) fn judge(&mut self, c: Candidate<'_>) -> Verdict {
        let texts = self.texts;
        if c.index >= self.limit {
            return refuse(texts.render(Text::RefuseOverLimit, &[("limit", &self.limit)]));
        }
        let Some(mounted) = self.toolbox.resolve(&c.call.name) else {
            let available = self.toolbox.names().join(", ");
            return refuse(texts.render(
                Text::RefuseUnknownTool,
                &[("tool", &c.call.name), ("available", &available)],
            ));
        };
        let name = mounted.spec.name.as_str();
        let args = match c.parsed {
            Ok(args) => args,
            Err(e) => {
                let error = e.describe(texts);
                return refuse(texts.render(
                    Text::RefuseUnreadableArguments,
                    &[("tool", &name), ("error", &error)],
                ));
            }
        };
        if let Err(errors) = mounted.validate(args) {
            return refuse(texts.render(
                Text::RefuseInvalidArguments,
                &[("tool", &name), ("errors", &errors)],
            ));
        }
        if let Some(refusal) = self.repeated(c.call, c.signature, c.streak) {
            return refusal;
        }
        if is_solve_tool(name) {
            return self.run_spine(name, args);
        }
        if self.config.plan_first && !lock(self.session).record.has_plan() {
            return refuse(texts.render(Text::RefusePlanFirst, &[("tool", &name)]));
        }
        match &mounted.tool {
            Some(tool) => Verdict::Work(tool.clone()),
            None => refuse(texts.render(Text::RefuseNoImplementation, &[("tool", &name)])),
        }
    }

    /// A duplicate within the round, or a call repeated round after round.
    fn repeated(&mut self, call: &ToolCall, signature: Signature, streak: u32) -> Option<Verdict> {
        if let Some(first) = self.first_of.get(&signature) {
            return Some(refuse(
                self.texts
                    .render(Text::RefuseDuplicate, &[("first", first)]),
            ));
        }
        self.first_of.insert(signature, call.id.clone());
        (streak >= REFUSE_AT).then(|| {
            refuse(
                self.texts
                    .render(Text::RefuseRepetition, &[("times", &(streak - 1))]),
            )
        })
    }

    fn run_spine(&self, name: &str, args: &Value) -> Verdict {
        if name == SOLVE_FINISH_STEP && self.has_work {
            return refuse(self.texts.get(Text::RefuseFinishBatched));
        }
        let result = spine::handle(&mut lock(self.session), name, args, self.texts);
        Verdict::Done {
            output: Box::new(result.output),
            effect: result.effect,
        }
    }
}

fn lock(session: &SessionHandle) -> std::sync::MutexGuard<'_, SolveSession> {
    session.lock().unwrap_or_else(|e| e.into_inner())
}
