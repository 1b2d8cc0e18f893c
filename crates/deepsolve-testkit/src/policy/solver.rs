//! [`WellBehaved`]: the scripted solver every other behaviour falls back to.

use crate::policy::Policy;
use crate::policy::moves::{common, final_answer, finish_call, plan_call, work_call};
use crate::reply::Reply;
use crate::request::PolicyRequest;

/// A solver that follows the spine exactly.
///
/// Moves, read from the conversation each time:
/// 1. no plan → `solve_plan` with `steps` goals (`work out part k of the problem`);
/// 2. current step without work results → one call to `work_tool` (if it is offered this
///    turn), its arguments tagged with the step's key `[Sk] <goal>`;
/// 3. current step with its work results (or no work tool) → `solve_finish_step`, alone, with
///    the summary `<goal> → <result excerpt>`;
/// 4. every step done → a final answer listing every step's summary.
///
/// **Expected ending:** `answered` after `2 * steps + 2` rounds with a work tool (`steps + 2`
/// without), every step done, the answer containing every summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WellBehaved {
    pub steps: usize,
    /// The tool each step's work uses; `None` → steps are finished without work calls.
    pub work_tool: Option<String>,
}

impl Default for WellBehaved {
    /// Three steps, worked with `reason`.
    fn default() -> Self {
        WellBehaved::new(3)
    }
}

impl WellBehaved {
    /// `steps` steps, worked with `reason` when the turn offers it.
    pub fn new(steps: usize) -> Self {
        WellBehaved {
            steps: steps.max(1),
            work_tool: Some("reason".into()),
        }
    }

    pub fn with_work_tool(mut self, tool: Option<&str>) -> Self {
        self.work_tool = tool.map(str::to_string);
        self
    }

    /// The configured work tool, when this turn offers it.
    pub fn offered_work_tool<'a>(&'a self, req: &PolicyRequest) -> Option<&'a str> {
        self.work_tool.as_deref().filter(|t| req.offers(t))
    }

    /// A tool for misbehaviours that need *some* work call: the configured one if offered,
    /// else the first offered work tool, else the configured name (or `reason`) anyway.
    pub fn any_work_tool(&self, req: &PolicyRequest) -> String {
        self.offered_work_tool(req)
            .or_else(|| req.work_tools().next())
            .or(self.work_tool.as_deref())
            .unwrap_or("reason")
            .to_string()
    }

    /// The well-behaved move for a regular round (tools offered, tool choice auto).
    pub fn next_move(&self, req: &PolicyRequest) -> Reply {
        let Some(plan) = req.plan() else {
            return plan_call(req, self.steps);
        };
        let Some(step) = plan.current() else {
            return final_answer(Some(&plan), false);
        };
        let results = req.work_results_for(step);
        match self.offered_work_tool(req) {
            Some(tool) if results.is_empty() => work_call(req, tool, step),
            _ => finish_call(step, &results),
        }
    }
}

impl Policy for WellBehaved {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        common(req).unwrap_or_else(|| self.next_move(req))
    }
}
