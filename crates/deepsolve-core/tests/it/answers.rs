//! The one rule every answer passes: no engine text in it, and a reply that only apologises
//! or promises to call a tool is not an answer (the forced-answer path gives one instead).

use crate::common::*;
use deepsolve_core::*;

const APOLOGY: &str = "I apologize for the confusion. I will call `solve_plan` first…";

fn answer_event(run: &Run) -> Option<(String, bool)> {
    run.events.iter().find_map(|e| match &e.kind {
        EventKind::Answer { text, forced, .. } => Some((text.clone(), *forced)),
        _ => None,
    })
}

#[tokio::test]
async fn an_apology_after_the_plan_nudge_is_replaced_by_a_forced_answer() {
    let model = Fake::new(|req, n| {
        if req.tool_choice == ToolChoice::None {
            text("x = 2 or x = 3")
        } else if n == 0 {
            text("x = 2 or x = 3, by factoring")
        } else {
            text(APOLOGY)
        }
    });
    let run = run_with(model, vec![], |_| {}).await;
    assert_eq!(run.outcome.stop_reason, StopReason::EmptyRounds);
    assert_eq!(run.outcome.answer.as_deref(), Some("x = 2 or x = 3"));
    assert_eq!(run.outcome.answer_source, Some(AnswerSource::Forced));
    assert_eq!(
        answer_event(&run),
        Some(("x = 2 or x = 3".to_string(), true)),
        "the answer event carries the forced answer, marked forced"
    );
    assert_eq!(run.requests.last().unwrap().tool_choice, ToolChoice::None);
}

#[tokio::test]
async fn an_echoed_nudge_is_asked_once_more_then_replaced_by_the_step_summaries() {
    let model = Fake::seq(vec![
        plan(&["factor", "solve"]),
        finish("S1", "(x-2)(x-3)"),
        text("early answer"),
        text(
            "[deepsolve:nudge] Steps are still open: S2 (solve). Continue with S2, or finish/replan the plan; if you are certain the answer is complete, say so and give the final answer again.\n\nOkay.",
        ),
        text("I will call `solve_finish_step` for S2 now."),
    ]);
    let run = run_with(model, vec![], |_| {}).await;
    assert_eq!(run.outcome.stop_reason, StopReason::EmptyRounds);
    assert_eq!(run.outcome.answer_source, Some(AnswerSource::StepSummaries));
    let answer = run.outcome.answer.unwrap();
    assert!(answer.contains("(x-2)(x-3)"), "{answer}");
    assert!(!answer.contains("[deepsolve:"), "{answer}");
    assert_eq!(
        run.requests.len(),
        5,
        "one forced answer, then the summaries"
    );
    let forced = run.requests.last().expect("the forced request");
    assert_eq!(forced.tool_choice, ToolChoice::None);
}

#[tokio::test]
async fn a_forced_answer_that_only_echoes_the_ultimatum_falls_back_to_the_summaries() {
    let model = Fake::new(|req, n| {
        if req.tool_choice == ToolChoice::None {
            text(
                "[deepsolve:ultimatum] Stop calling tools. Answer now with what you have, noting briefly what remains uncertain.",
            )
        } else if n == 0 {
            plan(&["a", "b"])
        } else if n == 1 {
            finish("S1", "a is 6")
        } else {
            echo(&format!("q{n}"))
        }
    });
    let run = run_with(model, vec![std::sync::Arc::new(Echo::named("echo"))], |s| {
        s.config.max_rounds = 4;
        s.config.settlement_rounds = 0;
    })
    .await;
    assert_eq!(run.outcome.stop_reason, StopReason::MaxRounds);
    assert_eq!(run.outcome.answer_source, Some(AnswerSource::StepSummaries));
    assert!(run.outcome.answer.unwrap().contains("a is 6"));
}

#[tokio::test]
async fn engine_text_is_cut_from_a_real_answer_which_stands() {
    let model = Fake::seq(vec![
        text("first try"),
        text(
            "[deepsolve:nudge] If the answer is truly immediate, say so and answer again.\n\nIt is immediate: x = 2 or x = 3.",
        ),
    ]);
    let run = run_with(model, vec![], |_| {}).await;
    assert_eq!(run.outcome.stop_reason, StopReason::AnsweredWithoutPlan);
    assert_eq!(
        run.outcome.answer.as_deref(),
        Some("It is immediate: x = 2 or x = 3.")
    );
    assert_eq!(run.outcome.answer_source, Some(AnswerSource::Model));
}

#[tokio::test]
async fn a_chinese_apology_is_not_an_answer_either() {
    let model = Fake::new(|req, n| {
        if req.tool_choice == ToolChoice::None {
            text("x = 2 或 x = 3")
        } else if n == 0 {
            text("因式分解得 x = 2 或 x = 3")
        } else {
            text("抱歉造成了困惑。我会先调用 `solve_plan`。")
        }
    });
    let run = run_with(model, vec![], |s| s.language = Language::Zh).await;
    assert_eq!(run.outcome.stop_reason, StopReason::EmptyRounds);
    assert_eq!(run.outcome.answer.as_deref(), Some("x = 2 或 x = 3"));
}
