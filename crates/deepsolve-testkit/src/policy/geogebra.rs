//! [`Geogebra`]: a solve that draws its figure with `geogebra_analysis` and answers from the
//! figure's table, and plays the figure model that tool asks — for the tool's end-to-end tests
//! through the real binary, the server and the browser.

use std::ops::ControlFlow;

use deepsolve_core::Role;
use serde_json::json;

use crate::policy::Policy;
use crate::policy::moves::{call_once, finish_call_for, plan_of, step_summary};
use crate::policy::vision::FIGURE_TOOL;
use crate::reply::Reply;
use crate::request::PolicyRequest;

/// A problem whose figure the policy's commands draw.
pub const GEOGEBRA_PROBLEM: &str =
    "In triangle ABC, AB = 4, AC = 3 and the angle at A is 90°. Find angle B.";

/// The goal of its one step.
pub const GEOGEBRA_GOALS: [&str; 1] = ["Draw the triangle and read angle B from the figure"];

/// The figure's commands, as the figure model finally gives them.
pub const FIGURE_COMMANDS: [&str; 8] = [
    "A = (0, 0)",
    "B = (4, 0)",
    "C = (0, 3)",
    "t = Polygon(A, B, C)",
    "a = Segment(B, C)",
    "β = Angle(C, B, A)",
    "α = Angle(B, A, C)",
    "SetCaption(β, \"∠B\")",
];

/// The command the figure model's first reply misspells (`Segmnt` for `Segment`), so every
/// solve goes through the repair round.
pub const MISSPELT: &str = "Segmnt(B, C)";

/// Plans one step, calls `geogebra_analysis {question: <the problem>}` (when offered), and
/// finishes with the table's row for β; answers with the angle the table gives. As the figure
/// model (a tool-less request whose system prompt asks for GeoGebra commands) it replies with
/// [`FIGURE_COMMANDS`], the first time with [`MISSPELT`] in place of `a = Segment(B, C)`, and
/// the corrected list once the repair request names the error.
///
/// **Expected ending:** `answered`, the step done; the answer states `∠B = 36.8699°`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Geogebra;

/// A request from `geogebra_analysis` to its figure model.
pub(crate) fn is_figure_request(req: &PolicyRequest) -> bool {
    req.messages
        .first()
        .is_some_and(|m| m.role == Role::System && m.content.contains("GeoGebra"))
}

fn figure_reply(req: &PolicyRequest) -> Reply {
    let repairing = req.messages.iter().filter(|m| m.role == Role::User).count() > 1;
    let commands: Vec<&str> = FIGURE_COMMANDS
        .iter()
        .map(|c| match (repairing, c.starts_with("a = Segment")) {
            (false, true) => MISSPELT,
            _ => c,
        })
        .collect();
    Reply::text(format!(
        "```json\n{}\n```",
        json!({
            "constraints": ["AB = 4", "AC = 3", "∠A = 90°"],
            "relations": ["find ∠B"],
            "commands": commands,
        })
    ))
}

/// The value column of the table row of `name` (`| β (…) | angle | … | 36.8699° at (4, 0) |`).
pub fn table_value(content: &str, name: &str) -> Option<String> {
    content.lines().find_map(|line| {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let first = cells.get(1)?;
        (*first == name || first.starts_with(&format!("{name} (")))
            .then(|| cells.get(4).map(|v| v.to_string()))?
    })
}

impl Geogebra {
    fn work(&self, req: &PolicyRequest, step_id: &str) -> Reply {
        let question = || json!({"question": req.problem()});
        let results = match call_once(req, FIGURE_TOOL, question, "Drawing the figure.") {
            ControlFlow::Continue(results) => results,
            ControlFlow::Break(call) => return call,
        };
        let summary = results
            .iter()
            .find_map(|r| table_value(&r.content, "β"))
            .map(|value| format!("β = {value}"))
            .unwrap_or_else(|| "the figure could not be drawn".to_string());
        finish_call_for(step_id, &summary)
    }

    fn answer(&self, req: &PolicyRequest) -> Reply {
        let summary = step_summary(req.plan().as_ref(), 0);
        let text = match summary.strip_prefix("β = ") {
            Some(value) => {
                let angle = value.split(" at ").next().unwrap_or(value);
                format!(
                    "**Answer:** ∠B = {angle}. The figure's table gives β = Angle(C, B, A) = {value}."
                )
            }
            None => "**Answer:** ∠B = arctan(3/4) ≈ 36.87°.".to_string(),
        };
        Reply::text(text)
    }
}

impl Policy for Geogebra {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if req.is_subcall() {
            if is_figure_request(req) {
                return figure_reply(req);
            }
            return Reply::text("Answer: 42");
        }
        if req.is_forced_answer() {
            return self.answer(req);
        }
        let Some(plan) = req.plan() else {
            return plan_of(
                "Draw the figure with geogebra_analysis, then read angle B from its table."
                    .to_string(),
                &GEOGEBRA_GOALS,
            );
        };
        match plan.current() {
            Some(step) => self.work(req, &step.id),
            None => self.answer(req),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_value_from_the_table() {
        let content = "| name | type | definition | value |\n|---|---|---|---|\n| β (\"B\") | angle | Angle(C, B, A) | 36.8699° at (4, 0) |\n| A | point | (0, 0) | (0, 0) |\n";
        assert_eq!(
            table_value(content, "β").as_deref(),
            Some("36.8699° at (4, 0)")
        );
        assert_eq!(table_value(content, "A").as_deref(), Some("(0, 0)"));
        assert_eq!(table_value(content, "Z"), None);
    }
}
