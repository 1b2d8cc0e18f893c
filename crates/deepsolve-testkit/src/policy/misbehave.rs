//! Solvers that break one rule of the spine, then (mostly) behave. Each documents the engine
//! reaction it provokes and how the turn is expected to end with the engine's defaults
//! (`max_rounds` 12, `max_replans` 2, strict plan-first, `max_parallel_tool_calls` 8).

use std::sync::atomic::{AtomicUsize, Ordering};

use deepsolve_core::solve::spine::{SOLVE_FINISH_STEP, SOLVE_PLAN, SOLVE_REPLAN};
use serde_json::json;

use crate::policy::moves::{
    MALFORMED_PLAN_ARGS, answer_text, common, derivation, finish_call_for, goal, replan_call,
    short, work_args,
};
use crate::policy::{Policy, WellBehaved};
use crate::reply::{Reply, Turn};
use crate::request::{PlanView, PolicyRequest};

/// A plan exists and no step is finished yet: the window where most misbehaviours happen
/// (after a fold the evidence of the misbehaviour is gone, so this keeps them one-shot).
fn fresh_plan(req: &PolicyRequest) -> Option<PlanView> {
    req.plan().filter(|p| p.done_steps().next().is_none())
}

/// Calls a work tool before planning (once: while no tool call is in view), then behaves.
///
/// **Engine:** the plan-first gate refuses the call without running it ("Call solve_plan
/// first"). **Ending:** `answered`, one round later than [`WellBehaved`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanSkipper {
    pub then: WellBehaved,
}

impl Policy for PlanSkipper {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        if req.has_plan() || req.has_any_call() {
            return self.then.next_move(req);
        }
        let tool = self.then.any_work_tool(req);
        let key = format!("before planning: {}", short(&req.problem(), 40));
        Reply::calls(vec![(tool.as_str(), work_args(req, &tool, &key))])
    }
}

/// Plans, then tries to finish `S2` while `S1` is current (once: while no
/// `solve_finish_step` call is in view), then behaves.
///
/// **Engine:** refuses with "Do not skip steps: the current step is S1 …".
/// **Ending:** `answered`, all steps done in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfOrderFinisher {
    pub then: WellBehaved,
}

impl Default for OutOfOrderFinisher {
    fn default() -> Self {
        OutOfOrderFinisher {
            then: WellBehaved::new(3),
        }
    }
}

impl Policy for OutOfOrderFinisher {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        match fresh_plan(req) {
            Some(_) if req.calls_to(SOLVE_FINISH_STEP) == 0 => {
                finish_call_for("S2", "skipping ahead: S2 looks easy")
            }
            _ => self.then.next_move(req),
        }
    }
}

/// Plans, then works `S1` with `n` parallel calls in one round (distinct arguments), then
/// behaves.
///
/// **Engine:** runs at most `max_parallel_tool_calls` (8) and answers the rest "skipped: over
/// the per-round limit"; every call gets exactly one result (R3). **Ending:** `answered`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParallelFlood {
    pub n: usize,
    pub then: WellBehaved,
}

impl ParallelFlood {
    pub fn new(n: usize) -> Self {
        ParallelFlood {
            n,
            then: WellBehaved::default(),
        }
    }
}

impl Default for ParallelFlood {
    fn default() -> Self {
        ParallelFlood::new(10)
    }
}

impl Policy for ParallelFlood {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        let step = fresh_plan(req).and_then(|p| p.current().cloned());
        match step {
            Some(step) if req.work_results_for(&step).is_empty() => {
                let tool = self.then.any_work_tool(req);
                let calls = (1..=self.n)
                    .map(|i| {
                        let key = format!("{} #{i}", step.key());
                        (tool.clone(), work_args(req, &tool, &key))
                    })
                    .collect();
                Reply::Turn(Turn::calls(calls))
            }
            _ => self.then.next_move(req),
        }
    }
}

/// Sends `solve_plan` with arguments that are not JSON ([`MALFORMED_PLAN_ARGS`]) as its first
/// call, then behaves.
///
/// **Engine:** the plan is refused with a parse (or schema) error the model can read; no plan
/// exists. **Ending:** `answered`, one round later than [`WellBehaved`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MalformedArgs {
    pub then: WellBehaved,
}

impl Policy for MalformedArgs {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        if req.has_plan() || req.has_any_call() {
            return self.then.next_move(req);
        }
        Reply::raw_calls(vec![(SOLVE_PLAN, MALFORMED_PLAN_ARGS)])
    }
}

/// Plans, then calls `tool` (default `web_search`) while it is **not** offered (once: while no
/// call to it is in view and no step is finished), then behaves. If the turn offers the tool,
/// it just behaves.
///
/// **Engine:** the allowlist refuses the call: "tool web_search is not available; available:
/// …", and nothing runs (R4). **Ending:** `answered`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownTool {
    pub tool: String,
    pub then: WellBehaved,
}

impl UnknownTool {
    pub fn new(then: WellBehaved) -> Self {
        UnknownTool {
            tool: "web_search".into(),
            then,
        }
    }
}

impl Default for UnknownTool {
    fn default() -> Self {
        UnknownTool::new(WellBehaved::default())
    }
}

impl Policy for UnknownTool {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        let misbehave =
            fresh_plan(req).is_some() && !req.offers(&self.tool) && req.calls_to(&self.tool) == 0;
        if !misbehave {
            return self.then.next_move(req);
        }
        Reply::calls(vec![(
            self.tool.as_str(),
            json!({"query": "latest results on this problem"}),
        )])
    }
}

/// Plans, then makes the very same work call every round, forever.
///
/// **Engine:** the repetition guard refuses the third identical call ("you already ran this;
/// change strategy") and forces an answer at the fifth. **Ending:** `repetition` (forced
/// answer), no step done.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdenticalLoop {
    pub then: WellBehaved,
}

impl Policy for IdenticalLoop {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        if !req.has_plan() {
            return self.then.next_move(req);
        }
        let tool = self.then.any_work_tool(req);
        let args = work_args(req, &tool, "the same question again");
        Reply::calls(vec![(tool.as_str(), args)])
    }
}

/// Plans, then makes a different work call every round (`probe N`), forever; never finishes
/// a step.
///
/// **Engine:** nothing to refuse; the round budget runs out, then the settlement rounds.
/// **Ending:** `max_rounds` (forced answer, listing every step as open) after
/// `max_rounds + settlement + 1` calls.
#[derive(Debug, Default)]
pub struct NeverEnding {
    pub then: WellBehaved,
    probes: AtomicUsize,
}

impl NeverEnding {
    pub fn new(then: WellBehaved) -> Self {
        NeverEnding {
            then,
            probes: AtomicUsize::new(0),
        }
    }
}

impl Policy for NeverEnding {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        if !req.has_plan() {
            return self.then.next_move(req);
        }
        let n = self.probes.fetch_add(1, Ordering::SeqCst) + 1;
        let tool = self.then.any_work_tool(req);
        let args = work_args(req, &tool, &format!("probe {n}"));
        Reply::calls(vec![(tool.as_str(), args)])
    }
}

/// The first `rounds` regular calls (tools offered, not forced) return only reasoning with
/// `finish_reason: length`; then behaves. With `rounds == usize::MAX` it never answers at all,
/// not even a forced answer (sub-calls still get a derivation).
///
/// **Engine (R11):** retries an all-reasoning round once with 2× `max_tokens`, then nudges
/// "stop deliberating and act"; two empty rounds in a row → forced answer.
/// **Ending:** `rounds` 1 → `answered` (the retry succeeds); `rounds` 2 → `answered` after
/// the nudge; `usize::MAX` → `empty_rounds` after two empty rounds and a failed forced
/// answer (no plan was ever made, so the engine has no step summaries to fall back on).
#[derive(Debug, Default)]
pub struct ReasoningOnly {
    pub rounds: usize,
    pub then: WellBehaved,
    calls: AtomicUsize,
}

impl ReasoningOnly {
    pub fn new(rounds: usize, then: WellBehaved) -> Self {
        ReasoningOnly {
            rounds,
            then,
            calls: AtomicUsize::new(0),
        }
    }

    /// Reasoning only, forever.
    pub fn never_answers() -> Self {
        ReasoningOnly::new(usize::MAX, WellBehaved::default())
    }
}

/// Reasoning the length of a long deliberation.
const REASONING_CHARS: usize = 400;

impl Policy for ReasoningOnly {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if req.is_subcall() {
            return derivation(req);
        }
        if self.rounds == usize::MAX {
            return Reply::reasoning_only(REASONING_CHARS);
        }
        if let Some(reply) = common(req) {
            return reply;
        }
        if self.calls.fetch_add(1, Ordering::SeqCst) < self.rounds {
            return Reply::reasoning_only(REASONING_CHARS);
        }
        self.then.next_move(req)
    }
}

/// Plans (3 steps by default), works and finishes `S1`, then answers with `S2`.. open; when
/// nudged, answers again ("I am confident …").
///
/// **Engine:** the finish gate nudges once naming the open steps, then accepts the second
/// answer. **Ending:** `answered_with_open_steps`, exactly one step done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerWithOpenSteps {
    pub then: WellBehaved,
}

impl Default for AnswerWithOpenSteps {
    fn default() -> Self {
        AnswerWithOpenSteps {
            then: WellBehaved::new(3),
        }
    }
}

impl Policy for AnswerWithOpenSteps {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        let plan = req.plan();
        match plan.as_ref().filter(|p| p.done_steps().next().is_some()) {
            Some(plan) => {
                let mut text = answer_text(Some(plan), false);
                if req.was_nudged() {
                    text = format!("I am confident the remaining steps are not needed.\n\n{text}");
                }
                Reply::text(text)
            }
            None => self.then.next_move(req),
        }
    }
}

/// Plans, then replans before doing any work until the engine answers `budget_exhausted`,
/// then works the latest plan to the end.
///
/// **Engine:** accepts `max_replans` replans, refuses the next one with `budget_exhausted`
/// and leaves the plan unchanged. **Ending:** `answered`, `replans_used == max_replans`,
/// the steps of the last accepted plan (`approach N part k`) all done.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplanPastBudget {
    pub then: WellBehaved,
}

impl Policy for ReplanPastBudget {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        // Once a step is finished the refusal may be folded away, but then the plan is no
        // longer fresh and the policy has moved on.
        if fresh_plan(req).is_some() && !req.saw_status("budget_exhausted") {
            return replan_call(req.calls_to(SOLVE_REPLAN) + 1, self.then.steps);
        }
        self.then.next_move(req)
    }
}

/// Plans, then calls `solve_plan` again with other goals (once: while a single
/// `solve_plan` call is in view and no step is done), then behaves.
///
/// **Engine:** refuses the second plan and points to `solve_replan`; the first plan stays.
/// **Ending:** `answered` with the first plan's goals, `replans_used == 0`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecondPlan {
    pub then: WellBehaved,
}

impl Policy for SecondPlan {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        if fresh_plan(req).is_some() && req.calls_to(SOLVE_PLAN) == 1 {
            let steps: Vec<_> = (1..=self.then.steps)
                .map(|k| json!({"goal": goal(1, k)}))
                .collect();
            return Reply::calls(vec![(
                SOLVE_PLAN,
                json!({"analysis": "A fresh start with a different plan.", "steps": steps}),
            )]);
        }
        self.then.next_move(req)
    }
}
