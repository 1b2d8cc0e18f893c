//! The moves scripted solvers are made of: plan, work, finish, answer, derive.
//!
//! Text is deterministic and built from the step goals and tool results, so tests can assert
//! that what the engine fed back (results, summaries, the progress block) reached the answer.

use std::ops::ControlFlow;

use deepsolve_core::solve::spine::{SOLVE_FINISH_STEP, SOLVE_PLAN, SOLVE_REPLAN};
use serde_json::{Map, Value, json};

use crate::progress::PlanStep;
use crate::reply::{Reply, Turn};
use crate::request::{PlanView, PolicyRequest, ToolResultView};

/// `solve_plan` arguments no JSON repair can turn into a valid plan: the call must be refused
/// (a parse error, or the empty-steps error if a repair drops the bad token).
pub const MALFORMED_PLAN_ARGS: &str = r#"{"analysis": "first attempt", "steps": [{"goal": ###}]"#;

/// The goal text of step `k` (1-based) of a plan made at `attempt` (0 = the first plan).
pub(crate) fn goal(attempt: usize, k: usize) -> String {
    if attempt == 0 {
        format!("work out part {k} of the problem")
    } else {
        format!("approach {} part {k}", attempt + 1)
    }
}

fn steps_json(attempt: usize, steps: usize) -> Vec<Value> {
    (1..=steps.max(1))
        .map(|k| json!({"goal": goal(attempt, k)}))
        .collect()
}

/// The `solve_plan` call for `steps` steps.
pub(crate) fn plan_call(req: &PolicyRequest, steps: usize) -> Reply {
    let analysis = format!(
        "Split the problem into {} part(s) and solve them in order: {}",
        steps.max(1),
        short(&req.problem(), 60)
    );
    Reply::calls(vec![(
        SOLVE_PLAN,
        json!({"analysis": analysis, "steps": steps_json(0, steps)}),
    )])
}

/// A `solve_replan` call: attempt `attempt` (1-based) with fresh goals.
pub(crate) fn replan_call(attempt: usize, steps: usize) -> Reply {
    Reply::calls(vec![(
        SOLVE_REPLAN,
        json!({"reason": format!("approach {attempt} did not work out"), "steps": steps_json(attempt, steps)}),
    )])
}

/// `solve_finish_step` for `step`, alone in its round.
pub(crate) fn finish_call(step: &PlanStep, results: &[ToolResultView]) -> Reply {
    finish_call_for(&step.id, &summary_for(step, results))
}

pub(crate) fn finish_call_for(step_id: &str, summary: &str) -> Reply {
    Reply::calls(vec![(
        SOLVE_FINISH_STEP,
        json!({"step_id": step_id, "summary": summary}),
    )])
}

/// A work call for `step`, with a line of narration.
pub(crate) fn work_call(req: &PolicyRequest, tool: &str, step: &PlanStep) -> Reply {
    let args = work_args(req, tool, &step.key());
    Reply::Turn(
        Turn::calls(vec![(tool, args)])
            .with_text(format!("Working on {}: {}.", step.id, step.goal)),
    )
}

/// Arguments for `tool` that carry `key` (so the result can be matched to its step later):
/// known tools get their real argument names, others a schema-guided or `query` object.
pub fn work_args(req: &PolicyRequest, tool: &str, key: &str) -> Value {
    match tool {
        "reason" => json!({"query": format!("{key}: derive the result of this step")}),
        "code_execution" => {
            json!({"code": format!("# {key}\nprint(\"result: 42\")")})
        }
        "exec" => json!({"command": format!("echo '{}'", key.replace('\'', ""))}),
        "rag" | "web_search" => json!({"query": key}),
        "geogebra_analysis" => json!({"question": key}),
        "read_source" => json!({"source_id": key}),
        "web_fetch" => json!({"url": format!("https://example.com/?q={}", key.replace(' ', "+"))}),
        other => schema_args(req, other, key),
    }
}

/// Fill the required string properties of a declared tool's schema (the first one with
/// `key`), falling back to `{"query": key}`.
fn schema_args(req: &PolicyRequest, tool: &str, key: &str) -> Value {
    let required: Vec<&str> = req
        .tool_parameters(tool)
        .and_then(|p| p.get("required"))
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if required.is_empty() {
        return json!({"query": key});
    }
    let mut args = Map::new();
    for (i, name) in required.iter().enumerate() {
        let value = if i == 0 {
            key.to_string()
        } else {
            "x".to_string()
        };
        args.insert((*name).to_string(), json!(value));
    }
    Value::Object(args)
}

/// `<goal> → <what the work returned>`: the step's record, as a solver would write it.
pub fn summary_for(step: &PlanStep, results: &[ToolResultView]) -> String {
    let outcome = results
        .first()
        .map(|r| excerpt(&r.content))
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| "done by inspection".to_string());
    format!("{} → {}", step.goal, outcome)
}

/// The line that says most about a result: an `Answer:` line if any, else the first line.
fn excerpt(content: &str) -> String {
    let lines: Vec<&str> = content
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let line = lines
        .iter()
        .rev()
        .find(|l| l.starts_with("Answer:"))
        .or(lines.first())
        .copied()
        .unwrap_or_default();
    short(line, 80)
}

/// At most `max` characters of `text` on one line, with `…` when cut.
/// A plan of `goals` with `analysis`: the first move of the citing policies.
pub(crate) fn plan_of(analysis: String, goals: &[&str]) -> Reply {
    let steps: Vec<_> = goals.iter().map(|g| json!({"goal": g})).collect();
    Reply::calls(vec![(
        SOLVE_PLAN,
        json!({"analysis": analysis, "steps": steps}),
    )])
}

/// The visible results of calls to `tool`, in order.
pub(crate) fn results_of(req: &PolicyRequest, tool: &str) -> Vec<ToolResultView> {
    req.tool_results()
        .into_iter()
        .filter(|r| r.name.as_deref() == Some(tool))
        .collect()
}

/// One call of `tool` with `args`, narrated.
pub(crate) fn call_with(tool: &str, args: Value, narration: &str) -> Reply {
    Reply::Turn(Turn::calls(vec![(tool, args)]).with_text(narration))
}

/// A step that works with `tool` once: break with the call (while it has no result and `tool`
/// is offered), else go on with the results to summarise.
pub(crate) fn call_once(
    req: &PolicyRequest,
    tool: &str,
    args: impl FnOnce() -> Value,
    narration: &str,
) -> ControlFlow<Reply, Vec<ToolResultView>> {
    let results = results_of(req, tool);
    if results.is_empty() && req.offers(tool) {
        return ControlFlow::Break(call_with(tool, args(), narration));
    }
    ControlFlow::Continue(results)
}

/// The summary of the plan's step `i` (empty while it has none).
pub(crate) fn step_summary(plan: Option<&PlanView>, i: usize) -> String {
    plan.and_then(|p| p.steps.get(i))
        .and_then(|s| s.summary.clone())
        .unwrap_or_default()
}

/// `n` of a line that starts with `[n]`.
pub(crate) fn leading_number(line: &str) -> Option<u32> {
    let rest = line.strip_prefix('[')?;
    let end = rest.find(']')?;
    rest[..end].parse().ok()
}

pub(crate) fn short(text: &str, max: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(max).collect();
    cut.push('…');
    cut
}

/// The final answer: a result line, then every finished step's summary (so tests can check
/// each summary reached the answer), then what is still open.
pub(crate) fn final_answer(plan: Option<&PlanView>, forced: bool) -> Reply {
    Reply::text(answer_text(plan, forced))
}

pub(crate) fn answer_text(plan: Option<&PlanView>, forced: bool) -> String {
    let done: Vec<&PlanStep> = plan.map(|p| p.done_steps().collect()).unwrap_or_default();
    let open: Vec<&PlanStep> = plan
        .map(|p| p.steps.iter().filter(|s| !s.done).collect())
        .unwrap_or_default();
    let head = if forced {
        "**Answer (forced, best effort):**"
    } else {
        "**Answer:**"
    };
    let result = done
        .last()
        .and_then(|s| s.summary.as_deref())
        .map_or("42".to_string(), |s| short(s, 120));
    let mut text = format!("{head} {result}\n\nHow it was solved:");
    if done.is_empty() {
        text.push_str("\n- directly, without finished steps");
    }
    for step in &done {
        let summary = step.summary.as_deref().unwrap_or("done");
        text.push_str(&format!("\n- {} {}: {summary}", step.id, step.goal));
    }
    if !open.is_empty() {
        let ids: Vec<&str> = open.iter().map(|s| s.id.as_str()).collect();
        text.push_str(&format!("\n\nStill open: {}.", ids.join(", ")));
    }
    text
}

/// The answer to a tool-less sub-call: a short derivation ending in `Answer: …`.
pub(crate) fn derivation(req: &PolicyRequest) -> Reply {
    let query = short(req.last_user_text(), 60);
    Reply::text(format!(
        "Derivation: the question is \"{query}\". Restate it, apply the definitions, simplify step by step.\nAnswer: 42 (for {query})"
    ))
}

/// The replies every policy shares: sub-calls get a derivation, forced answers an answer.
pub(crate) fn common(req: &PolicyRequest) -> Option<Reply> {
    if req.is_subcall() {
        return Some(derivation(req));
    }
    if req.is_forced_answer() {
        return Some(final_answer(req.plan().as_ref(), true));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(id: &str, goal: &str) -> PlanStep {
        PlanStep {
            id: id.into(),
            goal: goal.into(),
            done: false,
            summary: None,
        }
    }

    #[test]
    fn summaries_prefer_answer_lines() {
        let r = ToolResultView {
            index: 0,
            call_id: "c".into(),
            name: Some("reason".into()),
            arguments: None,
            content: "Derivation: blah\nAnswer: 7".into(),
        };
        assert_eq!(summary_for(&step("S1", "g"), &[r]), "g → Answer: 7");
        assert_eq!(summary_for(&step("S1", "g"), &[]), "g → done by inspection");
    }

    #[test]
    fn answer_lists_summaries_and_open_steps() {
        let plan = PlanView {
            analysis: String::new(),
            steps: vec![
                PlanStep {
                    summary: Some("x = 2".into()),
                    done: true,
                    ..step("S1", "a")
                },
                step("S2", "b"),
            ],
            replans: None,
        };
        let text = answer_text(Some(&plan), true);
        assert!(text.starts_with("**Answer (forced, best effort):** x = 2"));
        assert!(text.contains("- S1 a: x = 2"));
        assert!(text.contains("Still open: S2."));
    }

    #[test]
    fn short_cuts_on_chars() {
        assert_eq!(short("a  b\nc", 10), "a b c");
        assert_eq!(short("ééééé", 2), "éé…");
    }

    #[test]
    fn malformed_plan_args_are_not_json() {
        assert!(serde_json::from_str::<Value>(MALFORMED_PLAN_ARGS).is_err());
    }
}
