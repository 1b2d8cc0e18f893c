//! The three solve tools (DESIGN §4.1–4.3): their schemas and their effect on the session.
//! Pure functions over `SolveSession`; the loop decides when they may run.

use serde_json::{Value, json};

use super::session::{PlanVersion, SolveSession, SolveStep};
use crate::model::ToolSpec;
use crate::tool::ToolOutput;

pub const SOLVE_PLAN: &str = "solve_plan";
pub const SOLVE_FINISH_STEP: &str = "solve_finish_step";
pub const SOLVE_REPLAN: &str = "solve_replan";
pub const SOLVE_TOOL_NAMES: [&str; 3] = [SOLVE_PLAN, SOLVE_FINISH_STEP, SOLVE_REPLAN];

pub fn is_solve_tool(name: &str) -> bool {
    SOLVE_TOOL_NAMES.contains(&name)
}

fn steps_schema() -> Value {
    json!({
        "type": "array",
        "description": "Ordered steps; each goal is a short imperative sentence.",
        "items": {
            "type": "object",
            "properties": {"goal": {"type": "string"}},
            "required": ["goal"]
        }
    })
}

pub fn solve_tool_specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: SOLVE_PLAN.into(),
            description: "Commit to a plan before solving: a one- or two-sentence analysis of the problem and the approach, and an ordered list of steps (usually 2-6; one is fine for a simple problem; at most 12). Call exactly once, first.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "analysis": {"type": "string", "description": "What the problem asks and how you will solve it."},
                    "steps": steps_schema()
                },
                "required": ["analysis"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: SOLVE_FINISH_STEP.into(),
            description: "Close the current step once its work is really done and you have read the results. The summary (key result, values) becomes the step's record; the step's intermediate tool output is then folded out of the context. Call it alone, in a round of its own.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "step_id": {"type": "string", "description": "The current step's id, e.g. S1."},
                    "summary": {"type": "string", "description": "The step's conclusion: key results and values."}
                },
                "required": ["step_id", "summary"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: SOLVE_REPLAN.into(),
            description: "Replace the plan when the approach failed or proved wrong. Limited budget: use it only for a real change of direction.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "reason": {"type": "string", "description": "Why the old plan failed and what changes."},
                    "steps": steps_schema()
                },
                "required": ["reason"],
                "additionalProperties": false
            }),
        },
    ]
}

/// What a successful solve call did, for the loop (events, folding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpineEffect {
    None,
    Planned,
    StepDone {
        step_id: String,
        goal: String,
        summary: String,
    },
    Replanned {
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct SpineResult {
    pub output: ToolOutput,
    pub effect: SpineEffect,
}

impl SpineResult {
    fn refused(message: impl Into<String>) -> Self {
        SpineResult {
            output: ToolOutput::error(message),
            effect: SpineEffect::None,
        }
    }

    fn done(body: Value, effect: SpineEffect) -> Self {
        SpineResult {
            output: ToolOutput::ok(body.to_string()),
            effect,
        }
    }
}

fn step_json(step: &SolveStep) -> Value {
    let mut v = json!({"id": step.id, "goal": step.goal, "done": step.done});
    if let Some(summary) = &step.summary {
        v["summary"] = json!(summary);
    }
    v
}

fn goals_of(args: &Value) -> Vec<String> {
    args.get("steps")
        .and_then(Value::as_array)
        .map(|steps| {
            steps
                .iter()
                .map(|s| match s {
                    Value::String(goal) => goal.clone(),
                    other => other
                        .get("goal")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn str_arg<'a>(args: &'a Value, key: &str) -> &'a str {
    args.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim()
}

const EMPTY_STEPS: &str = "solve_plan needs a non-empty 'steps' array, each with a 'goal'.";

fn truncation_note(cut: usize, max: usize) -> Option<String> {
    (cut > 0).then(|| {
        format!(
            "The plan had {} steps; only the first {max} were kept. Fold the rest into them.",
            cut + max
        )
    })
}

pub fn plan(session: &mut SolveSession, args: &Value) -> SpineResult {
    if session.record.has_plan() {
        return SpineResult::refused(
            "A plan already exists; solve_plan can be called only once per turn. To change the plan, call solve_replan with a reason (it has a limited budget); otherwise continue with the current step.",
        );
    }
    let (steps, cut) = session.make_steps(&goals_of(args));
    if steps.is_empty() {
        return SpineResult::refused(EMPTY_STEPS);
    }
    session.record.analysis = str_arg(args, "analysis").to_string();
    session.record.steps = steps;
    let next = step_json(&session.record.steps[0]);
    let mut body = json!({
        "status": "planned",
        "analysis": session.record.analysis,
        "steps": session.record.steps.iter().map(step_json).collect::<Vec<_>>(),
        "next": next,
        "instruction": format!(
            "Work the first step now ({}) with the tools available; when its work is done and you have read the results, call solve_finish_step.",
            session.record.steps[0].id
        ),
    });
    if let Some(note) = truncation_note(cut, session.max_steps) {
        body["truncated"] = json!(note);
    }
    SpineResult::done(body, SpineEffect::Planned)
}

pub fn finish_step(session: &mut SolveSession, args: &Value) -> SpineResult {
    let record = &mut session.record;
    if !record.has_plan() {
        return SpineResult::refused("No plan yet. Call solve_plan before solve_finish_step.");
    }
    let step_id = str_arg(args, "step_id");
    // Reasoning never reaches a folded summary.
    let (summary, _) = crate::tags::split_think(str_arg(args, "summary"));
    let summary = summary.trim();
    let Some(index) = record.steps.iter().position(|s| s.id == step_id) else {
        let ids: Vec<&str> = record.steps.iter().map(|s| s.id.as_str()).collect();
        return SpineResult::refused(format!(
            "Unknown step_id '{step_id}'. Valid ids: {}.",
            ids.join(", ")
        ));
    };
    if record.steps[index].done {
        return SpineResult::refused(format!("Step {step_id} is already done."));
    }
    let current = record.current().map(|s| (s.id.clone(), s.goal.clone()));
    if let Some((current_id, current_goal)) = current
        && current_id != step_id
    {
        return SpineResult::refused(format!(
            "Do not skip steps: the current step is {current_id} ({current_goal}). Finish it first."
        ));
    }
    if summary.is_empty() {
        return SpineResult::refused(
            "solve_finish_step needs a non-empty 'summary' with the step's key result.",
        );
    }
    let step = &mut record.steps[index];
    step.done = true;
    step.summary = Some(summary.to_string());
    let completed = step_json(step);
    let effect = SpineEffect::StepDone {
        step_id: step.id.clone(),
        goal: step.goal.clone(),
        summary: summary.to_string(),
    };
    let next = record.current().map(step_json);
    let all_done = next.is_none();
    let instruction = match record.current() {
        None => "Write the final answer now.".to_string(),
        Some(next) => format!("Continue with step {} now: {}.", next.id, next.goal),
    };
    SpineResult::done(
        json!({
            "status": "step_done",
            "completed": completed,
            "next": next,
            "all_done": all_done,
            "instruction": instruction,
        }),
        effect,
    )
}

pub fn replan(session: &mut SolveSession, args: &Value) -> SpineResult {
    let record = &mut session.record;
    if record.replans_used >= record.replans_max {
        return SpineResult {
            output: ToolOutput::error(
                json!({
                    "status": "budget_exhausted",
                    "instruction": "Replan budget is spent. Do not replan again — finish the problem with the best of what you have."
                })
                .to_string(),
            ),
            effect: SpineEffect::None,
        };
    }
    let reason = str_arg(args, "reason").to_string();
    if reason.is_empty() {
        return SpineResult::refused("solve_replan needs a 'reason': why the old plan failed.");
    }
    let (steps, cut) = session.make_steps(&goals_of(args));
    if steps.is_empty() {
        return SpineResult::refused(
            "solve_replan needs a non-empty 'steps' array, each with a 'goal'.",
        );
    }
    let record = &mut session.record;
    let old_steps = std::mem::replace(&mut record.steps, steps);
    if !old_steps.is_empty() {
        record.plan_history.push(PlanVersion {
            analysis: record.analysis.clone(),
            replaced_because: reason.clone(),
            steps: old_steps,
        });
    }
    record.replans_used += 1;
    let mut body = json!({
        "status": "replanned",
        "reason": reason,
        "replans_used": record.replans_used,
        "replans_max": record.replans_max,
        "steps": record.steps.iter().map(step_json).collect::<Vec<_>>(),
        "next": step_json(&record.steps[0]),
        "instruction": format!("Work step {} of the new plan now.", record.steps[0].id),
    });
    if let Some(note) = truncation_note(cut, session.max_steps) {
        body["truncated"] = json!(note);
    }
    SpineResult::done(body, SpineEffect::Replanned { reason })
}

/// Dispatch a solve tool by name.
pub fn handle(session: &mut SolveSession, name: &str, args: &Value) -> SpineResult {
    match name {
        SOLVE_PLAN => plan(session, args),
        SOLVE_FINISH_STEP => finish_step(session, args),
        SOLVE_REPLAN => replan(session, args),
        other => SpineResult::refused(format!("{other} is not a solve tool")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(r: &SpineResult) -> Value {
        serde_json::from_str(&r.output.content).unwrap_or(Value::Null)
    }

    fn planned(goals: &[&str]) -> SolveSession {
        let mut s = SolveSession::new("t", 2, 12);
        let steps: Vec<Value> = goals.iter().map(|g| json!({"goal": g})).collect();
        let r = plan(&mut s, &json!({"analysis": "a", "steps": steps}));
        assert!(r.output.ok, "{}", r.output.content);
        s
    }

    #[test]
    fn plan_numbers_steps_and_drops_empty_goals() {
        let s = planned(&["factor", " ", "solve"]);
        let ids: Vec<_> = s.record.steps.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["S1", "S2"]);
    }

    #[test]
    fn plan_result_has_the_contract_fields() {
        let mut s = SolveSession::new("t", 2, 12);
        let r = plan(&mut s, &json!({"analysis": "x", "steps": [{"goal": "g"}]}));
        let b = body(&r);
        assert_eq!(b["status"], "planned");
        assert_eq!(b["next"]["id"], "S1");
        assert_eq!(b["steps"][0]["done"], false);
        assert!(
            b["instruction"]
                .as_str()
                .unwrap()
                .starts_with("Work the first step now")
        );
        assert_eq!(r.effect, SpineEffect::Planned);
    }

    #[test]
    fn empty_steps_are_refused_with_the_contract_message() {
        let mut s = SolveSession::new("t", 2, 12);
        for args in [
            json!({"analysis": "x", "steps": []}),
            json!({"analysis": "x"}),
        ] {
            let r = plan(&mut s, &args);
            assert!(!r.output.ok);
            assert_eq!(r.output.content, EMPTY_STEPS);
        }
    }

    #[test]
    fn long_plans_are_truncated_and_say_so() {
        let goals: Vec<String> = (1..=15).map(|i| format!("g{i}")).collect();
        let refs: Vec<&str> = goals.iter().map(String::as_str).collect();
        let mut s = SolveSession::new("t", 2, 12);
        let steps: Vec<Value> = refs.iter().map(|g| json!({"goal": g})).collect();
        let r = plan(&mut s, &json!({"analysis": "a", "steps": steps}));
        assert_eq!(s.record.steps.len(), 12);
        assert!(body(&r)["truncated"].as_str().unwrap().contains("15 steps"));
    }

    #[test]
    fn second_plan_is_refused_and_points_to_replan() {
        let mut s = planned(&["a"]);
        let r = plan(&mut s, &json!({"analysis": "b", "steps": [{"goal": "b"}]}));
        assert!(!r.output.ok);
        assert!(r.output.content.contains("solve_replan"));
        assert_eq!(s.record.steps[0].goal, "a");
    }

    #[test]
    fn finish_without_plan_is_refused() {
        let mut s = SolveSession::new("t", 2, 12);
        let r = finish_step(&mut s, &json!({"step_id": "S1", "summary": "x"}));
        assert_eq!(
            r.output.content,
            "No plan yet. Call solve_plan before solve_finish_step."
        );
    }

    #[test]
    fn finish_checks_id_order_and_repeats() {
        let mut s = planned(&["a", "b"]);
        let unknown = finish_step(&mut s, &json!({"step_id": "S99", "summary": "x"}));
        assert!(unknown.output.content.contains("Valid ids: S1, S2"));
        let skip = finish_step(&mut s, &json!({"step_id": "S2", "summary": "x"}));
        assert!(skip.output.content.contains("Do not skip steps"));
        assert!(skip.output.content.contains("S1"));
        let ok = finish_step(&mut s, &json!({"step_id": "S1", "summary": "x=1"}));
        assert_eq!(body(&ok)["next"]["id"], "S2");
        assert_eq!(body(&ok)["all_done"], false);
        let again = finish_step(&mut s, &json!({"step_id": "S1", "summary": "x"}));
        assert!(again.output.content.contains("already done"));
        let last = finish_step(&mut s, &json!({"step_id": "S2", "summary": "y"}));
        let b = body(&last);
        assert_eq!(b["all_done"], true);
        assert_eq!(b["next"], Value::Null);
        assert_eq!(b["instruction"], "Write the final answer now.");
    }

    #[test]
    fn replan_respects_the_budget_and_keeps_history() {
        let mut s = planned(&["a", "b"]);
        finish_step(&mut s, &json!({"step_id": "S1", "summary": "done a"}));
        for used in 1..=2 {
            let r = replan(&mut s, &json!({"reason": "r", "steps": [{"goal": "c"}]}));
            assert_eq!(body(&r)["replans_used"], used);
            assert_eq!(s.record.steps[0].id, "S1");
        }
        let r = replan(&mut s, &json!({"reason": "r", "steps": [{"goal": "d"}]}));
        assert_eq!(body(&r)["status"], "budget_exhausted");
        assert_eq!(s.record.steps[0].goal, "c");
        assert_eq!(s.record.plan_history.len(), 2);
        assert_eq!(s.record.summaries()[0].2, "done a");
    }
}
