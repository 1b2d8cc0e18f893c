//! Each scripted policy driven to its intended ending by the simulated engine in `common`,
//! through `ScriptedModel` (so the invariant checks run on every request too).

use crate::common::{FOLD_STYLES, Outcome, SimConfig, SimProtocol, Stop, run};
use deepsolve_core::{ChatModel, ChatRequest, Message, ModelError, ToolChoice};
use deepsolve_testkit::policy::by_name;
use deepsolve_testkit::{
    AnswerWithOpenSteps, CutBeforeOutput, FlakyStatus, IdenticalLoop, MalformedArgs, NeverEnding,
    OutOfOrderFinisher, PROGRESS_MARKER, ParallelFlood, PlanSkipper, Policy, PolicyRequest,
    ReasoningOnly, ReplanPastBudget, Reply, ScriptedModel, SecondPlan, UnknownTool, WellBehaved,
};
use serde_json::Value;

async fn play(policy: impl Policy + 'static, cfg: SimConfig) -> (Outcome, ScriptedModel) {
    let model = ScriptedModel::new(policy);
    let outcome = run(&model, cfg).await;
    (outcome, model)
}

fn saw_progress_block(model: &ScriptedModel) -> bool {
    model.requests().iter().any(|r| {
        r.messages
            .iter()
            .any(|m| m.content.contains(PROGRESS_MARKER))
    })
}

#[tokio::test]
async fn well_behaved_solves_every_step_in_both_fold_styles() {
    for fold in FOLD_STYLES {
        let cfg = SimConfig {
            fold,
            ..SimConfig::default()
        };
        let (out, model) = play(WellBehaved::new(3), cfg).await;
        model.assert_clean();
        assert_eq!(out.stop, Stop::Answered, "{out:#?}");
        assert_eq!(out.done_steps(), 3);
        assert_eq!(out.rounds, 8, "plan + 3 × (work, finish) + answer");
        assert!(saw_progress_block(&model));
        for step in &out.record.steps {
            let summary = step.summary.as_deref().unwrap();
            assert!(
                summary.contains("Answer: 42"),
                "the work result reached the summary"
            );
            assert!(out.answer.contains(summary), "answer lacks {summary:?}");
        }
        // Each step's work was a `reason` call, answered by a tool-less sub-call.
        assert_eq!(out.results_of("reason").len(), 3);
    }
}

#[tokio::test]
async fn well_behaved_without_a_work_tool_finishes_steps_directly() {
    let cfg = SimConfig {
        work_tools: vec![],
        ..SimConfig::default()
    };
    let (out, model) = play(WellBehaved::new(2), cfg).await;
    model.assert_clean();
    assert_eq!(out.stop, Stop::Answered);
    assert_eq!(out.rounds, 4);
    assert!(out.answer.contains("done by inspection"));
}

#[tokio::test]
async fn plan_skipper_is_gated_then_solves() {
    let (out, model) = play(PlanSkipper::default(), SimConfig::default()).await;
    model.assert_clean();
    assert_eq!(
        out.results[0],
        ("reason".to_string(), "Call solve_plan first.".to_string())
    );
    assert_eq!(out.stop, Stop::Answered);
    assert_eq!(out.done_steps(), 3);
}

#[tokio::test]
async fn out_of_order_finisher_is_refused_then_finishes_in_order() {
    let (out, model) = play(OutOfOrderFinisher::default(), SimConfig::default()).await;
    model.assert_clean();
    assert!(out.any_result_contains("Do not skip steps: the current step is S1"));
    assert_eq!(out.stop, Stop::Answered);
    assert_eq!(out.done_steps(), 3);
}

#[tokio::test]
async fn parallel_flood_gets_one_result_per_call() {
    let (out, model) = play(ParallelFlood::new(10), SimConfig::default()).await;
    model.assert_clean();
    assert!(out.batch_sizes.contains(&10));
    let skipped = out
        .results
        .iter()
        .filter(|(_, c)| c.starts_with("skipped"))
        .count();
    assert_eq!(skipped, 2);
    assert_eq!(out.stop, Stop::Answered);
    assert_eq!(out.done_steps(), 3);
}

#[tokio::test]
async fn malformed_args_are_refused_once() {
    let (out, model) = play(MalformedArgs::default(), SimConfig::default()).await;
    model.assert_clean();
    assert!(out.results[0].1.contains("not valid JSON"));
    assert_eq!(out.stop, Stop::Answered);
}

#[tokio::test]
async fn unknown_tool_is_refused_then_solves() {
    let (out, model) = play(UnknownTool::default(), SimConfig::default()).await;
    model.assert_clean();
    assert!(out.any_result_contains("tool web_search is not available"));
    assert_eq!(out.stop, Stop::Answered);
    assert_eq!(out.results_of("web_search").len(), 1);
}

#[tokio::test]
async fn identical_loop_ends_by_repetition() {
    let (out, model) = play(IdenticalLoop::default(), SimConfig::default()).await;
    model.assert_clean();
    assert_eq!(out.stop, Stop::Repetition);
    assert!(out.any_result_contains("you already ran this"));
    assert!(out.answer.starts_with("**Answer (forced"));
}

#[tokio::test]
async fn never_ending_ends_by_max_rounds() {
    let (out, model) = play(NeverEnding::default(), SimConfig::default()).await;
    model.assert_clean();
    assert_eq!(out.stop, Stop::MaxRounds);
    assert_eq!(out.rounds, 14, "12 rounds + 2 settlement rounds");
    assert!(out.answer.starts_with("**Answer (forced"));
    assert!(out.answer.contains("Still open: S1, S2, S3."));
}

#[tokio::test]
async fn reasoning_only_recovers_or_runs_dry() {
    let (once, model) = play(
        ReasoningOnly::new(1, WellBehaved::new(2)),
        SimConfig::default(),
    )
    .await;
    model.assert_clean();
    assert_eq!(once.stop, Stop::Answered);
    assert_eq!(once.nudges, 0, "the 2× retry succeeded");

    let (twice, _) = play(
        ReasoningOnly::new(2, WellBehaved::new(2)),
        SimConfig::default(),
    )
    .await;
    assert_eq!(twice.stop, Stop::Answered);
    assert_eq!(
        twice.nudges, 1,
        "retry failed too: one 'stop deliberating' nudge"
    );

    let (never, model) = play(ReasoningOnly::never_answers(), SimConfig::default()).await;
    model.assert_clean();
    assert_eq!(never.stop, Stop::EmptyRounds);
    assert!(never.answer.starts_with("(assembled from step summaries)"));
}

#[tokio::test]
async fn answer_with_open_steps_is_nudged_once() {
    let (out, model) = play(AnswerWithOpenSteps::default(), SimConfig::default()).await;
    model.assert_clean();
    assert_eq!(out.stop, Stop::AnsweredWithOpenSteps);
    assert_eq!(out.nudges, 1);
    assert_eq!(out.done_steps(), 1);
    assert!(out.answer.starts_with("I am confident"));
    assert!(out.answer.contains("Still open: S2, S3."));
}

#[tokio::test]
async fn replan_past_budget_stops_at_the_budget() {
    let (out, model) = play(ReplanPastBudget::default(), SimConfig::default()).await;
    model.assert_clean();
    assert!(out.any_result_contains("budget_exhausted"));
    assert_eq!(out.record.replans_used, 2);
    assert_eq!(out.stop, Stop::Answered);
    assert!(
        out.record
            .steps
            .iter()
            .all(|s| s.goal.starts_with("approach 3"))
    );
    assert_eq!(out.done_steps(), 3);
}

#[tokio::test]
async fn second_plan_is_refused_and_the_first_plan_stays() {
    let (out, model) = play(SecondPlan::default(), SimConfig::default()).await;
    model.assert_clean();
    assert!(out.any_result_contains("solve_replan"));
    assert_eq!(out.stop, Stop::Answered);
    assert_eq!(out.record.replans_used, 0);
    assert!(
        out.record
            .steps
            .iter()
            .all(|s| s.goal.starts_with("work out part"))
    );
}

#[tokio::test]
async fn flaky_status_is_retried_inside_the_model() {
    let (out, model) = play(
        FlakyStatus::new(429, 2, WellBehaved::new(1)),
        SimConfig::default(),
    )
    .await;
    model.assert_clean();
    assert_eq!(out.stop, Stop::Answered);
    assert_eq!(out.retries, 2);

    let (out, _) = play(
        FlakyStatus::new(500, 10, WellBehaved::new(1)),
        SimConfig::default(),
    )
    .await;
    assert_eq!(out.stop, Stop::ModelError);
    assert!(matches!(
        out.error,
        Some(ModelError::Server {
            status: 500,
            attempts: 4,
            ..
        })
    ));
}

#[tokio::test]
async fn cuts_before_output_are_retried() {
    let (out, model) = play(
        CutBeforeOutput::new(3, WellBehaved::new(1)),
        SimConfig::default(),
    )
    .await;
    model.assert_clean();
    assert_eq!(out.stop, Stop::Answered);
    assert_eq!(out.retries, 3);
}

/// The protocol a named policy is written for: text-tag models get a tags-mode engine, the
/// provider without native tools an `auto` one; vendor markup arrives over native requests.
fn protocol_for(name: &str) -> SimProtocol {
    match name {
        "no-native-tools" => SimProtocol::Auto,
        n if n.starts_with("tags") => SimProtocol::Tags,
        _ => SimProtocol::Native,
    }
}

#[tokio::test]
async fn every_named_policy_ends_as_documented_in_every_fold_style() {
    for fold in FOLD_STYLES {
        for name in deepsolve_testkit::policy::POLICY_NAMES {
            let policy = by_name(name, 2, Some("reason".into())).unwrap();
            let model = ScriptedModel::new(policy);
            let cfg = SimConfig {
                fold,
                protocol: protocol_for(name),
                ..SimConfig::default()
            };
            let out = run(&model, cfg).await;
            model.assert_clean();
            assert!(!out.answer.is_empty(), "{name} {fold:?}: {out:#?}");
            let expected = match *name {
                "identical-loop" => Stop::Repetition,
                "never-ending" => Stop::MaxRounds,
                "never-answers" => Stop::EmptyRounds,
                "answer-with-open-steps" => Stop::AnsweredWithOpenSteps,
                _ => Stop::Answered,
            };
            assert_eq!(out.stop, expected, "{name} {fold:?}");
        }
    }
}

// --- first moves, without the simulated engine ---

fn wire(messages: Vec<Value>) -> PolicyRequest {
    PolicyRequest::from_wire(&serde_json::json!({
        "model": "m",
        "messages": messages,
        "tools": [
            {"type": "function", "function": {"name": "solve_plan", "parameters": {}}},
            {"type": "function", "function": {"name": "solve_finish_step", "parameters": {}}},
            {"type": "function", "function": {"name": "solve_replan", "parameters": {}}},
            {"type": "function", "function": {"name": "reason", "parameters": {}}}
        ],
        "tool_choice": "auto",
        "stream": true
    }))
    .unwrap()
}

fn only_call(reply: &Reply) -> (String, Value) {
    let turn = reply.turn().expect("a turn");
    assert_eq!(turn.tool_calls.len(), 1, "{turn:?}");
    let (name, args) = &turn.tool_calls[0];
    (name.clone(), serde_json::from_str(args).unwrap())
}

#[test]
fn well_behaved_continues_after_a_folded_progress_block() {
    let block = "[deepsolve:progress] round 4 of 12 · replans 0 of 2\nProblem: p\nPlan: a\n  [x] S1 work out part 1 of the problem — work out part 1 of the problem → Answer: 1\n  [ ] S2 work out part 2 of the problem   <- current\n  [ ] S3 work out part 3 of the problem";
    let folded = serde_json::json!([
        {"role": "system", "content": "s"},
        {"role": "user", "content": format!("p\n\n{block}")},
    ]);
    let req = wire(folded.as_array().unwrap().clone());
    let (name, args) = only_call(&WellBehaved::new(3).reply(&req));
    assert_eq!(name, "reason");
    assert!(
        args["query"]
            .as_str()
            .unwrap()
            .starts_with("[S2] work out part 2")
    );

    // With S2's work result in view, it finishes S2, alone.
    let mut messages = folded.as_array().unwrap().clone();
    messages.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "reason", "arguments": args.to_string()}}
    ]}));
    messages.push(serde_json::json!({"role": "tool", "tool_call_id": "c1", "content": "Derivation…\nAnswer: 2"}));
    let (name, args) = only_call(&WellBehaved::new(3).reply(&wire(messages)));
    assert_eq!(name, "solve_finish_step");
    assert_eq!(args["step_id"], "S2");
    assert_eq!(
        args["summary"],
        "work out part 2 of the problem → Answer: 2"
    );
}

#[test]
fn first_moves_of_each_policy() {
    let start = wire(vec![
        serde_json::json!({"role": "system", "content": "s"}),
        serde_json::json!({"role": "user", "content": "Solve x+1=2."}),
    ]);
    assert_eq!(
        only_call(&WellBehaved::default().reply(&start)).0,
        "solve_plan"
    );
    assert_eq!(only_call(&PlanSkipper::default().reply(&start)).0, "reason");
    let malformed = MalformedArgs::default().reply(&start);
    assert!(serde_json::from_str::<Value>(&malformed.turn().unwrap().tool_calls[0].1).is_err());
    assert_eq!(
        only_call(&SecondPlan::default().reply(&start)).0,
        "solve_plan"
    );

    let forced = PolicyRequest {
        tool_choice: Some("none".into()),
        ..start.clone()
    };
    for policy in [
        Box::new(WellBehaved::default()) as Box<dyn Policy>,
        Box::new(IdenticalLoop::default()),
        Box::new(NeverEnding::default()),
    ] {
        let reply = policy.reply(&forced);
        let turn = reply.turn().unwrap();
        assert!(turn.tool_calls.is_empty() && turn.text.as_deref().unwrap().contains("Answer"));
    }

    let sub = PolicyRequest {
        tools: vec![],
        tool_choice: None,
        ..start
    };
    let text = WellBehaved::default()
        .reply(&sub)
        .turn()
        .unwrap()
        .text
        .clone()
        .unwrap();
    assert!(text.contains("\nAnswer: 42"), "{text}");
}

#[tokio::test]
async fn scripted_model_sequence_counts_calls_both_ways() {
    let req = ChatRequest {
        messages: vec![Message::system("s"), Message::user("u")],
        tools: vec![],
        tool_choice: ToolChoice::Auto,
        max_tokens: 10,
        temperature: 0.0,
        stop: vec![],
        response_format: None,
    };
    let model = ScriptedModel::sequence(vec![Reply::text("one"), Reply::text("two")]);
    let c = model.complete(&req, &mut |_| {}).await.unwrap();
    assert_eq!(c.text, "one");
    assert!(model.verify().unwrap_err()[0].contains("expected exactly 2 calls, got 1"));
    model.complete(&req, &mut |_| {}).await.unwrap();
    model.assert_clean();
    let err = model.complete(&req, &mut |_| {}).await.unwrap_err();
    assert!(matches!(err, ModelError::Server { status: 500, .. }));
    assert!(model.violations()[0].message.contains("unexpected call #3"));
}

#[tokio::test]
async fn scripted_model_maps_replies_to_completions_and_errors() {
    let req = ChatRequest {
        messages: vec![Message::system("s"), Message::user("u")],
        tools: vec![],
        tool_choice: ToolChoice::Auto,
        max_tokens: 10,
        temperature: 0.0,
        stop: vec![],
        response_format: None,
    };
    let model = ScriptedModel::sequence(vec![
        Reply::Turn(
            deepsolve_testkit::Turn::text("visible text here")
                .with_reasoning("thinking")
                .with_usage(None),
        ),
        Reply::status(401, "bad key"),
        Reply::context_length_exceeded(),
        Reply::tools_unsupported(),
        Reply::CutAfterText("partial".into()),
        Reply::Raw(vec![
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"x1","type":"function","function":{"name":"reason","arguments":"{}"}}]}}]}"#.into(),
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#.into(),
            "[DONE]".into(),
        ]),
    ])
    .with_options(deepsolve_testkit::ScriptedOptions {
        max_attempts: 1,
        ..Default::default()
    });
    let mut deltas = Vec::new();
    let c = model.complete(&req, &mut |d| deltas.push(d)).await.unwrap();
    assert_eq!(c.text, "visible text here");
    assert_eq!(c.reasoning, "thinking");
    assert!(c.usage.estimated);
    assert!(deltas.len() >= 2);
    let e = |r: Result<_, ModelError>| r.unwrap_err().kind();
    assert_eq!(e(model.complete(&req, &mut |_| {}).await), "auth");
    assert_eq!(e(model.complete(&req, &mut |_| {}).await), "context_length");
    assert_eq!(
        e(model.complete(&req, &mut |_| {}).await),
        "tools_unsupported"
    );
    assert_eq!(e(model.complete(&req, &mut |_| {}).await), "stream_cut");
    let raw = model.complete(&req, &mut |_| {}).await.unwrap();
    assert_eq!(raw.tool_calls[0].id, "x1");
    assert_eq!(raw.finish_reason, deepsolve_core::FinishReason::ToolCalls);
    model.assert_clean();
}

#[tokio::test]
async fn scripted_model_checks_invariants_unless_lean() {
    let bad = ChatRequest {
        messages: vec![Message::user("u"), Message::user("again")],
        tools: vec![],
        tool_choice: ToolChoice::None,
        max_tokens: 10,
        temperature: 0.0,
        stop: vec![],
        response_format: None,
    };
    let model = ScriptedModel::new(WellBehaved::default());
    model.complete(&bad, &mut |_| {}).await.unwrap();
    let v = model.violations();
    assert!(
        v.iter().any(|v| v.message.contains("no system message")),
        "{v:?}"
    );
    assert!(v.iter().any(|v| v.message.contains("both 'user'")));
    assert_eq!(model.requests().len(), 1);

    let lean = ScriptedModel::lean(WellBehaved::default());
    lean.complete(&bad, &mut |_| {}).await.unwrap();
    assert!(lean.violations().is_empty() && lean.requests().is_empty());
    assert_eq!(lean.call_count(), 1);
}

#[tokio::test]
async fn the_showcase_plans_three_steps_works_them_and_answers_in_markdown() {
    use deepsolve_testkit::policy::{Showcase, ShowcaseVariant};
    for (work_tools, rounds) in [
        (vec!["reason", "code_execution"], 7),
        (vec!["code_execution"], 6),
        (vec![], 5),
    ] {
        for fold in FOLD_STYLES {
            let cfg = SimConfig {
                fold,
                work_tools: work_tools.clone(),
                ..SimConfig::default()
            };
            let (out, model) = play(Showcase::new(ShowcaseVariant::Plain), cfg).await;
            model.assert_clean();
            assert_eq!(out.stop, Stop::Answered, "{work_tools:?} {out:#?}");
            assert_eq!(out.rounds, rounds, "{work_tools:?}");
            assert_eq!(out.done_steps(), 3);
            let goals: Vec<&str> = out.record.steps.iter().map(|s| s.goal.as_str()).collect();
            assert_eq!(goals, Showcase::new(ShowcaseVariant::Plain).goals());
            for step in &out.record.steps {
                assert!(
                    step.summary.as_deref().unwrap().contains('$'),
                    "LaTeX in {step:?}"
                );
            }
            assert!(out.answer.contains("$$x^2-5x+6=(x-2)(x-3)$$"));
            assert_eq!(
                out.results_of("code_execution").len(),
                usize::from(work_tools.contains(&"code_execution"))
            );
            if work_tools.contains(&"reason") {
                assert!(out.results_of("reason")[0].contains("Answer: $(x-2)(x-3)$"));
            }
        }
    }
}

#[tokio::test]
async fn the_hostile_and_long_showcases_end_like_the_plain_one() {
    use deepsolve_testkit::policy::{HOSTILE_MARKUP, Showcase, ShowcaseVariant};
    for variant in [ShowcaseVariant::Hostile, ShowcaseVariant::Long] {
        let (out, model) = play(Showcase::new(variant), SimConfig::default()).await;
        model.assert_clean();
        assert_eq!(out.stop, Stop::Answered, "{variant:?}");
        assert_eq!(out.done_steps(), 3);
        assert_eq!(
            out.answer.contains(HOSTILE_MARKUP),
            variant == ShowcaseVariant::Hostile
        );
    }
}
