//! The three solve tools: their schemas and their effect on the session.
//! Pure functions over `SolveSession`; the loop decides when they may run.

use std::sync::LazyLock;

use serde_json::{Value, json};

use super::session::{NewSteps, OnceRule, PlanVersion, SolveRecord, SolveSession, SolveStep};
use crate::model::ToolSpec;
use crate::texts::{Text, Texts};
use crate::tool::ToolOutput;

pub const SOLVE_PLAN: &str = "solve_plan";
pub const SOLVE_FINISH_STEP: &str = "solve_finish_step";
pub const SOLVE_REPLAN: &str = "solve_replan";
pub const SOLVE_TOOL_NAMES: [&str; 3] = [SOLVE_PLAN, SOLVE_FINISH_STEP, SOLVE_REPLAN];

pub fn is_solve_tool(name: &str) -> bool {
    SOLVE_TOOL_NAMES.contains(&name)
}

fn steps_schema(texts: &Texts) -> Value {
    json!({
        "type": "array",
        "description": texts.get(Text::ParamSteps),
        "items": {
            "type": "object",
            "properties": {"goal": {"type": "string"}},
            "required": ["goal"]
        }
    })
}

/// The three solve tools as offered to the model, described in the texts' language.
pub fn solve_tool_specs(texts: &Texts) -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: SOLVE_PLAN.into(),
            description: texts.get(Text::SolvePlanDescription).into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "analysis": {"type": "string", "description": texts.get(Text::ParamAnalysis)},
                    "steps": steps_schema(texts)
                },
                "required": ["analysis"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: SOLVE_FINISH_STEP.into(),
            description: texts.get(Text::SolveFinishStepDescription).into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "step_id": {"type": "string", "description": texts.get(Text::ParamStepId)},
                    "summary": {"type": "string", "description": texts.get(Text::ParamSummary)}
                },
                "required": ["step_id", "summary"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: SOLVE_REPLAN.into(),
            description: texts.get(Text::SolveReplanDescription).into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "reason": {"type": "string", "description": texts.get(Text::ParamReason)},
                    "steps": steps_schema(texts)
                },
                "required": ["reason"],
                "additionalProperties": false
            }),
        },
    ]
}

/// `keys` are a solve call's arguments: every parameter its tool requires and none it does
/// not take (the 1.5B model's answer round wrote `{"step_id": "S4", "summary": …}`, its last
/// call's arguments without the call around them). Keys are the same in every language.
pub fn are_solve_arguments(keys: &[&str]) -> bool {
    SOLVE_PARAMETERS.iter().any(|(taken, required)| {
        required.iter().all(|r| keys.contains(&r.as_str()))
            && keys.iter().all(|k| taken.iter().any(|t| t == k))
    })
}

/// Each solve tool's parameter names and required ones, read once from its schema.
static SOLVE_PARAMETERS: LazyLock<Vec<(Vec<String>, Vec<String>)>> = LazyLock::new(|| {
    let names = |v: Option<&Value>| -> Vec<String> {
        match v {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect(),
            Some(Value::Object(o)) => o.keys().cloned().collect(),
            _ => Vec::new(),
        }
    };
    let texts = Texts::builtin(super::Language::En);
    (solve_tool_specs(&texts).iter())
        .map(|spec| {
            let p = &spec.parameters;
            (names(p.get("properties")), names(p.get("required")))
        })
        .collect()
});

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
                    Value::String(goal) => goal.as_str(),
                    other => other
                        .get("goal")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                })
                .map(goal_phrase)
                .collect()
        })
        .unwrap_or_default()
}

/// A goal as the engine's sentences quote it ("Continue with step S2 now: {goal}."): without
/// the full stop a model may end it with, which would double the sentence's own.
fn goal_phrase(goal: &str) -> String {
    goal.trim()
        .trim_end_matches(['.', '。'])
        .trim_end()
        .to_string()
}

fn str_arg<'a>(args: &'a Value, key: &str) -> &'a str {
    args.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim()
}

fn truncation_note(cut: usize, max: usize, texts: &Texts) -> Option<String> {
    (cut > 0).then(|| {
        texts.render(
            Text::PlanTruncated,
            &[("total", &(cut + max)), ("max", &max)],
        )
    })
}

pub fn plan(session: &mut SolveSession, args: &Value, texts: &Texts) -> SpineResult {
    if session.record.has_plan() {
        return SpineResult::refused(texts.get(Text::PlanExists));
    }
    let NewSteps { steps, cut } = session.make_steps(&goals_of(args));
    if steps.is_empty() {
        return SpineResult::refused(texts.get(Text::PlanEmptySteps));
    }
    session.record.analysis = str_arg(args, "analysis").to_string();
    session.record.steps = steps;
    session.printed.clear();
    let next = step_json(&session.record.steps[0]);
    let mut body = json!({
        "status": "planned",
        "analysis": session.record.analysis,
        "steps": session.record.steps.iter().map(step_json).collect::<Vec<_>>(),
        "next": next,
        "instruction": texts.render(
            Text::PlanInstruction,
            &[("step", &session.record.steps[0].id)],
        ),
    });
    if let Some(note) = truncation_note(cut, session.max_steps, texts) {
        body["truncated"] = json!(note);
    }
    SpineResult::done(body, SpineEffect::Planned)
}

pub fn finish_step(session: &mut SolveSession, args: &Value, texts: &Texts) -> SpineResult {
    let step_id = str_arg(args, "step_id");
    // Reasoning never reaches a folded summary.
    let summary = crate::wire::markup::split_think(str_arg(args, "summary")).visible;
    let summary = summary.trim();
    let index = match finishable(&session.record, step_id, summary, texts) {
        Ok(index) => index,
        Err(refusal) => return SpineResult::refused(refusal),
    };
    // A summary refused once and sent again stands, whichever rule would refuse it next:
    // refused by one rule and then by the other, the 1.5B model sent it a third time, as told,
    // and the repetition guard refused that and every send after it until the turn ran out of
    // rounds (`line-23`, build `57a4bf3`).
    let step = &session.record.steps[index];
    let key = (step.id.clone(), step.goal.clone(), summary.to_string());
    if !session.refused_summaries.contains(&key) {
        let refusal = repeats_once(session, index, summary, texts)
            .or_else(|| leaves_out_printed_once(session, index, summary, texts));
        if let Some(refusal) = refusal {
            session.refused_summaries.insert(key);
            return SpineResult::refused(refusal);
        }
    }
    session.printed.clear();
    close_step(&mut session.record, index, summary, texts)
}

/// The index of the step `step_id` when it may be finished with `summary`, or the refusal.
fn finishable(
    record: &SolveRecord,
    step_id: &str,
    summary: &str,
    texts: &Texts,
) -> Result<usize, String> {
    if !record.has_plan() {
        return Err(texts.get(Text::FinishNoPlan).to_string());
    }
    let Some(index) = record.steps.iter().position(|s| s.id == step_id) else {
        let ids: Vec<&str> = record.steps.iter().map(|s| s.id.as_str()).collect();
        return Err(texts.render(
            Text::FinishUnknownStep,
            &[("step_id", &step_id), ("ids", &ids.join(", "))],
        ));
    };
    if record.steps[index].done {
        return Err(texts.render(Text::FinishAlreadyDone, &[("step_id", &step_id)]));
    }
    if let Some(current) = record.current().filter(|s| s.id != step_id) {
        return Err(texts.render(
            Text::FinishSkipped,
            &[("current_id", &current.id), ("current_goal", &current.goal)],
        ));
    }
    if summary.is_empty() {
        return Err(texts.get(Text::FinishEmptySummary).to_string());
    }
    Ok(index)
}

/// A summary copied word for word from an earlier step's is refused once per step: the 1.5B
/// model closed step after step with an earlier step's summary, copied from the progress
/// block, and the answer was built on it. Sent again, it stands: where a step truly ends
/// with the same result (a model that solved the whole problem in S1), refusing it every
/// time made the model send the same call until the repetition guard ended the turn.
fn repeats_once(
    session: &mut SolveSession,
    index: usize,
    summary: &str,
    texts: &Texts,
) -> Option<String> {
    let earlier = (session.record.steps.iter())
        .find(|s| s.done && s.summary.as_deref() == Some(summary))?
        .id
        .clone();
    first_refusal(session, OnceRule::RepeatedSummary, index)?;
    Some(texts.render(
        Text::FinishRepeatedSummary,
        &[
            ("step_id", &session.record.steps[index].id),
            ("earlier", &earlier),
        ],
    ))
}

/// A summary that keeps none of the numbers the step's programs printed is refused once per
/// step, the last output quoted: the 1.5B model's program printed the right result (109,
/// 30) and its summary said another number or only what the step set out to do, and the
/// answer was built on the summary. The model may know better (a program it found wrong):
/// sent again, the summary stands.
fn leaves_out_printed_once(
    session: &mut SolveSession,
    index: usize,
    summary: &str,
    texts: &Texts,
) -> Option<String> {
    let printed: Vec<f64> = session.printed.iter().flat_map(|p| numbers(p)).collect();
    if printed.is_empty()
        || numbers(summary)
            .iter()
            .any(|n| printed.iter().any(|p| same(*n, *p)))
    {
        return None;
    }
    first_refusal(session, OnceRule::UnprintedResult, index)?;
    let last = session.printed.last()?;
    let output = crate::truncate::clip(last.trim().to_string(), PRINTED_QUOTED_BYTES);
    Some(texts.render(
        Text::FinishUnprintedResult,
        &[
            ("step_id", &session.record.steps[index].id),
            ("printed", &output),
        ],
    ))
}

/// How much of a program's output a refusal quotes.
const PRINTED_QUOTED_BYTES: usize = 400;

/// `Some` when `rule` has not yet refused step `index` (and now has).
fn first_refusal(session: &mut SolveSession, rule: OnceRule, index: usize) -> Option<()> {
    let step = &session.record.steps[index];
    let key = (rule, step.id.clone(), step.goal.clone());
    session.refused_once.insert(key).then_some(())
}

/// The numbers written in `text` (`1,200` is 1200; a sign, a decimal point).
fn numbers(text: &str) -> Vec<f64> {
    let mut found = Vec::new();
    let mut current = String::new();
    let mut flush = |current: &mut String| {
        let digits = current.trim_end_matches(['.', ',']).replace(',', "");
        if let Ok(n) = digits.parse::<f64>() {
            found.push(n);
        }
        current.clear();
    };
    for c in text.chars() {
        match c {
            '0'..='9' => current.push(c),
            '.' | ',' if !current.is_empty() => current.push(c),
            '-' if current.is_empty() => current.push(c),
            _ => flush(&mut current),
        }
    }
    flush(&mut current);
    found
}

/// Two numbers are the same result when they agree to two decimals (a program prints
/// `109.00000000000001`, a summary says 109; it prints 0.3333333, the summary 0.33).
fn same(a: f64, b: f64) -> bool {
    (a - b).abs() < 0.005 + 1e-9 * b.abs()
}

/// Mark step `index` done with `summary`; the result names the next step.
fn close_step(record: &mut SolveRecord, index: usize, summary: &str, texts: &Texts) -> SpineResult {
    let step = &mut record.steps[index];
    step.done = true;
    step.summary = Some(summary.to_string());
    let completed = step_json(step);
    let effect = SpineEffect::StepDone {
        step_id: step.id.clone(),
        goal: step.goal.clone(),
        summary: summary.to_string(),
    };
    let next = record.current();
    let instruction = match next {
        None => texts.get(Text::FinishInstructionDone).to_string(),
        Some(next) => texts.render(
            Text::FinishInstructionNext,
            &[("step", &next.id), ("goal", &next.goal)],
        ),
    };
    SpineResult::done(
        json!({
            "status": "step_done",
            "completed": completed,
            "next": next.map(step_json),
            "all_done": next.is_none(),
            "instruction": instruction,
        }),
        effect,
    )
}

pub fn replan(session: &mut SolveSession, args: &Value, texts: &Texts) -> SpineResult {
    let record = &mut session.record;
    if record.replans_used >= record.replans_max {
        return SpineResult::refused(
            json!({
                "status": "budget_exhausted",
                "instruction": texts.get(Text::ReplanBudgetSpent),
            })
            .to_string(),
        );
    }
    let reason = str_arg(args, "reason").to_string();
    if reason.is_empty() {
        return SpineResult::refused(texts.get(Text::ReplanNoReason));
    }
    let NewSteps { steps, cut } = session.make_steps(&goals_of(args));
    if steps.is_empty() {
        return SpineResult::refused(texts.get(Text::ReplanEmptySteps));
    }
    session.printed.clear();
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
        "instruction": texts.render(Text::ReplanInstruction, &[("step", &record.steps[0].id)]),
    });
    if let Some(note) = truncation_note(cut, session.max_steps, texts) {
        body["truncated"] = json!(note);
    }
    SpineResult::done(body, SpineEffect::Replanned { reason })
}

/// A solve tool's arguments as a model may write them, in the form its schema asks for: a
/// plan's steps given as bare goals (`["Add the costs", …]`; the 0.5B model wrote its Chinese
/// plans so, round after round, each refused by the schema) become `{"goal": …}` objects.
/// Anything else is left to the schema's validation.
pub fn lenient_arguments(name: &str, mut args: Value) -> Value {
    if !matches!(name, SOLVE_PLAN | SOLVE_REPLAN) {
        return args;
    }
    if let Some(steps) = args.get_mut("steps").and_then(Value::as_array_mut) {
        for step in steps.iter_mut() {
            if let Value::String(goal) = step {
                *step = json!({ "goal": std::mem::take(goal) });
            }
        }
    }
    args
}

/// Dispatch a solve tool by name. Its arguments are prose (goals, summaries, reasons), so
/// LaTeX commands JSON read as escapes are restored first.
pub fn handle(session: &mut SolveSession, name: &str, args: &Value, texts: &Texts) -> SpineResult {
    let args = &crate::json_repair::restore_latex_escapes(args);
    match name {
        SOLVE_PLAN => plan(session, args, texts),
        SOLVE_FINISH_STEP => finish_step(session, args, texts),
        SOLVE_REPLAN => replan(session, args, texts),
        other => SpineResult::refused(texts.render(Text::NotASolveTool, &[("tool", &other)])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solve::Language;

    const EMPTY_STEPS: &str = "solve_plan needs a non-empty 'steps' array, each with a 'goal'.";

    fn en() -> std::sync::Arc<Texts> {
        Texts::builtin(Language::En)
    }

    fn plan(session: &mut SolveSession, args: &Value) -> SpineResult {
        super::plan(session, args, &en())
    }

    fn finish_step(session: &mut SolveSession, args: &Value) -> SpineResult {
        super::finish_step(session, args, &en())
    }

    fn replan(session: &mut SolveSession, args: &Value) -> SpineResult {
        super::replan(session, args, &en())
    }

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
    fn a_goals_full_stop_is_left_to_the_sentences_that_quote_it() {
        let s = planned(&["Subtract the eggs eaten.", "求剩下的鸡蛋。", "Sell them"]);
        let goals: Vec<_> = s.record.steps.iter().map(|s| s.goal.as_str()).collect();
        assert_eq!(
            goals,
            ["Subtract the eggs eaten", "求剩下的鸡蛋", "Sell them"]
        );
        let mut s = s;
        let r = finish_step(&mut s, &json!({"step_id": "S1", "summary": "13 left"}));
        let instruction = body(&r)["instruction"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert_eq!(instruction, "Continue with step S2 now: 求剩下的鸡蛋.");
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
    fn a_summary_copied_from_an_earlier_step_is_refused() {
        let mut s = planned(&["count the hours", "count the pieces", "halve the rest"]);
        let hours = "He is at school for 8 hours.";
        let r = finish_step(&mut s, &json!({"step_id": "S1", "summary": hours}));
        assert!(r.output.ok, "{}", r.output.content);
        let r = finish_step(
            &mut s,
            &json!({"step_id": "S2", "summary": format!(" {hours}\n")}),
        );
        assert!(!r.output.ok);
        assert_eq!(
            r.output.content,
            "This is the summary of step S1, word for word. Summarise what step S2 itself established: its key results and values. If S2 truly ends with the same result, send this summary again."
        );
        assert!(!s.record.steps[1].done);
        let r = finish_step(
            &mut s,
            &json!({"step_id": "S2", "summary": "He chews 4 pieces."}),
        );
        assert!(r.output.ok, "{}", r.output.content);
        // Refused once, the same summary sent again stands: the step may truly end there.
        let r = finish_step(&mut s, &json!({"step_id": "S3", "summary": hours}));
        assert!(!r.output.ok);
        let r = finish_step(&mut s, &json!({"step_id": "S3", "summary": hours}));
        assert!(r.output.ok, "{}", r.output.content);
        assert_eq!(s.record.steps[2].summary.as_deref(), Some(hours));
    }

    /// The 1.5B model's `line-31` (sixth measurement): the program printed the answer, the
    /// summary said what the step set out to do.
    #[test]
    fn a_summary_without_the_printed_result_is_refused_once_then_stands() {
        let mut s = planned(&["find Allen's age", "add ten years"]);
        s.note_printed("[stdout]\n99.00000000000001");
        let vague = "We need to find Allen's age from the ratio.";
        let r = finish_step(&mut s, &json!({"step_id": "S1", "summary": vague}));
        assert!(!r.output.ok);
        assert_eq!(
            r.output.content,
            "Step S1's program printed:\n```\n[stdout]\n99.00000000000001\n```\nand this summary gives none of those numbers. A summary states what the step established, with its values. If the printed result is right, put it in the summary; if it is not, say why and what the result is, or send this summary again."
        );
        assert!(!s.record.steps[0].done);
        // Sent again, it stands; the next step starts with nothing printed.
        let r = finish_step(&mut s, &json!({"step_id": "S1", "summary": vague}));
        assert!(r.output.ok, "{}", r.output.content);
        assert!(s.printed.is_empty());
        // A summary with a printed number (to two decimals, thousands separated) passes.
        s.note_printed("[stdout]\n1200.0\n0.3333333");
        let r = finish_step(
            &mut s,
            &json!({"step_id": "S2", "summary": "He has $1,200."}),
        );
        assert!(r.output.ok, "{}", r.output.content);
    }

    /// `line-23` (build `57a4bf3`): S3's summary copied S2's and gave none of what S3's
    /// program printed. Refused by each rule in turn, it needed a third send, which the
    /// repetition guard refused: the turn ran out of rounds.
    #[test]
    fn a_summary_refused_once_stands_when_sent_again_whichever_rule_would_refuse_it_next() {
        let mut s = planned(&["count the first", "count the next", "count the last"]);
        let copied = "Total DVDs sold = 5";
        for (step, summary) in [("S1", "Total DVDs sold = 3"), ("S2", copied)] {
            let r = finish_step(&mut s, &json!({"step_id": step, "summary": summary}));
            assert!(r.output.ok, "{}", r.output.content);
        }
        s.note_printed("[value]\n8");
        let r = finish_step(&mut s, &json!({"step_id": "S3", "summary": copied}));
        assert!(!r.output.ok, "copied from S2: refused");
        let r = finish_step(&mut s, &json!({"step_id": "S3", "summary": copied}));
        assert!(r.output.ok, "sent again, it stands: {}", r.output.content);
        assert_eq!(s.record.steps[2].summary.as_deref(), Some(copied));
    }

    #[test]
    fn a_summary_is_checked_only_against_its_own_steps_programs() {
        // Printed before the plan: no step was open.
        let mut s = SolveSession::new("t", 2, 12);
        s.note_printed("[stdout]\n5");
        assert!(s.printed.is_empty());
        let mut s = planned(&["a", "b"]);
        let r = finish_step(&mut s, &json!({"step_id": "S1", "summary": "x is 0.33"}));
        assert!(r.output.ok, "{}", r.output.content);
        s.note_printed("[stdout]\n0.3333333");
        let r = finish_step(&mut s, &json!({"step_id": "S2", "summary": "y is 0.33"}));
        assert!(r.output.ok, "{}", r.output.content);
        // A replan starts afresh.
        let mut s = planned(&["a", "b"]);
        s.note_printed("[stdout]\n7");
        let r = replan(&mut s, &json!({"reason": "r", "steps": [{"goal": "c"}]}));
        assert!(r.output.ok, "{}", r.output.content);
        let r = finish_step(&mut s, &json!({"step_id": "S1", "summary": "done"}));
        assert!(r.output.ok, "{}", r.output.content);
    }

    #[test]
    fn numbers_are_read_as_written() {
        assert_eq!(numbers("He has $1,200.50, then -3."), vec![1200.5, -3.0]);
        assert_eq!(numbers("S1: 7:11 and 162."), vec![1.0, 7.0, 11.0, 162.0]);
        assert!(same(109.00000000000001, 109.0));
        assert!(!same(109.0, 110.0));
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
        assert_eq!(s.record.summaries()[0].summary, "done a");
    }

    #[test]
    fn bare_goals_become_steps_and_other_tools_arguments_are_untouched() {
        let bare = json!({"analysis": "a", "steps": ["Add the costs", {"goal": "Divide"}]});
        let lenient = lenient_arguments(SOLVE_PLAN, bare.clone());
        assert_eq!(
            lenient["steps"],
            json!([{"goal": "Add the costs"}, {"goal": "Divide"}])
        );
        let specs = solve_tool_specs(&en());
        let plan = specs.iter().find(|s| s.name == SOLVE_PLAN).unwrap();
        assert!(jsonschema::is_valid(&plan.parameters, &lenient));
        assert_eq!(lenient_arguments("code_execution", bare.clone()), bare);
    }
}
