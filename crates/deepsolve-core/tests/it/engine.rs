//! The loop end to end with a scripted in-process model: one test per stop reason, gate,
//! fold path and dispatch rule.

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use deepsolve_core::*;
use serde_json::json;

/// Plans one step, then plays `then(n)` for call n; answers a forced-answer request with
/// `forced`.
fn plans_then(then: impl Fn(usize) -> Step + Send + 'static, forced: &'static str) -> Fake {
    Fake::new(move |req, n| {
        if req.tool_choice == ToolChoice::None {
            text(forced)
        } else if n == 0 {
            plan(&["a"])
        } else {
            then(n)
        }
    })
}

fn echo_tool() -> Arc<Echo> {
    Arc::new(Echo::named("echo"))
}

// ---------------------------------------------------------------------------------------------
// Stop reasons

#[tokio::test]
async fn answered_after_a_well_behaved_solve() {
    let model = Fake::seq(vec![
        plan(&["factor", "solve"]),
        echo("factor x^2-5x+6"),
        finish("S1", "(x-2)(x-3)"),
        echo("roots"),
        finish("S2", "x = 2 or x = 3"),
        text("**x = 2 or x = 3**"),
    ]);
    let run = run_with(model, vec![echo_tool()], |_| {}).await;
    assert_eq!(run.outcome.stop_reason, StopReason::Answered);
    assert_eq!(run.outcome.answer.as_deref(), Some("**x = 2 or x = 3**"));
    assert_eq!(run.outcome.answer_source, Some(AnswerSource::Model));
    assert_eq!(run.outcome.rounds, 6);
    assert!(run.outcome.solve.all_done());
    assert_eq!(
        run.outcome.solve.steps[1].summary.as_deref(),
        Some("x = 2 or x = 3")
    );
    let types = run.types();
    assert_eq!(types.iter().filter(|t| **t == "step_finished").count(), 2);
    assert_eq!(types.iter().filter(|t| **t == "context_folded").count(), 2);
    let answer_at = types.iter().position(|t| *t == "answer").unwrap();
    assert_eq!(answer_at, types.len() - 2);
}

/// The 0.5B model wrote its plans with bare goals for steps; refused by the schema, it wrote
/// the same call again until the context was full.
#[tokio::test]
async fn a_plan_whose_steps_are_bare_goals_is_accepted() {
    let model = Fake::seq(vec![
        calls(vec![(
            "solve_plan",
            json!({"analysis": "Two sums.", "steps": ["Add 2 and 3", "Double it"]}),
        )]),
        finish("S1", "5"),
        finish("S2", "10"),
        text("**10**"),
    ]);
    let run = run_with(model, vec![echo_tool()], |_| {}).await;
    assert_eq!(run.outcome.stop_reason, StopReason::Answered);
    let goals: Vec<&str> = run
        .outcome
        .solve
        .steps
        .iter()
        .map(|s| s.goal.as_str())
        .collect();
    assert_eq!(goals, ["Add 2 and 3", "Double it"]);
    assert!(
        run.results().iter().all(|(_, ok, _)| *ok),
        "{:?}",
        run.results()
    );
}

#[tokio::test]
async fn answered_with_open_steps_after_one_nudge() {
    let model = Fake::seq(vec![
        plan(&["a", "b", "c"]),
        finish("S1", "a done"),
        text("early answer"),
        text("I am certain: final"),
    ]);
    let run = run_with(model, vec![], |_| {}).await;
    assert_eq!(run.outcome.stop_reason, StopReason::AnsweredWithOpenSteps);
    assert_eq!(run.outcome.answer.as_deref(), Some("I am certain: final"));
    let nudge = run.last_prompt();
    assert!(
        nudge.contains("[deepsolve:nudge] Steps are still open: S2 (b), S3 (c)"),
        "{nudge}"
    );
}

#[tokio::test]
async fn answered_without_plan_after_one_nudge() {
    let model = Fake::seq(vec![text("x=2, x=3"), text("Truly immediate: x=2, x=3")]);
    let run = run_with(model, vec![], |_| {}).await;
    assert_eq!(run.outcome.stop_reason, StopReason::AnsweredWithoutPlan);
    assert!(run.last_prompt().contains("Call solve_plan first"));
}

#[tokio::test]
async fn max_rounds_forces_an_answer_after_settlement() {
    let model = plans_then(|n| echo(&format!("q{n}")), "forced: x=2 or 3");
    let run = run_with(model, vec![echo_tool()], |s| {
        s.config.max_rounds = 3;
        s.config.settlement_rounds = 1;
    })
    .await;
    assert_eq!(run.outcome.stop_reason, StopReason::MaxRounds);
    assert_eq!(run.outcome.answer.as_deref(), Some("forced: x=2 or 3"));
    assert_eq!(run.outcome.answer_source, Some(AnswerSource::Forced));
    assert_eq!(
        run.outcome.rounds, 5,
        "3 rounds + 1 settlement + the forced answer"
    );
    let settlement = prompt_text(&run.requests[3]);
    assert!(
        settlement.contains("settlement round 1 of 1"),
        "{settlement}"
    );
    let forced = run.requests.last().unwrap();
    assert_eq!(forced.tool_choice, ToolChoice::None);
    assert!(!forced.tools.is_empty());
    assert!(prompt_text(forced).contains("[deepsolve:ultimatum] Stop calling tools."));
}

#[tokio::test]
async fn a_streamed_call_announces_its_tool_once_per_model_call_and_not_when_calls_are_forbidden() {
    let model = Fake::new(|req, n| {
        if req.tool_choice == ToolChoice::None {
            // A forced answer whose stream still names a tool: nothing may be called now.
            let mut c = completion_calls(vec![("echo", json!({"q": "late"}))]);
            c.text = "forced: x = 2".into();
            c.finish_reason = FinishReason::Stop;
            Step::Reply(c)
        } else if n == 0 {
            plan(&["a"])
        } else {
            calls(vec![
                ("echo", json!({"q": "one"})),
                ("ECHO", json!({"q": "two"})),
                ("no_such_tool", json!({})),
            ])
        }
    });
    let echo = echo_tool();
    let run = run_with(model, vec![echo.clone()], |s| {
        s.config.max_rounds = 2;
        s.config.settlement_rounds = 0;
    })
    .await;
    assert_eq!(run.outcome.stop_reason, StopReason::MaxRounds);
    let ran = echo.runs.load(std::sync::atomic::Ordering::SeqCst);
    let told = echo.announced.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        (ran, told),
        (2, 1),
        "two calls, one model call, one announcement"
    );
}

#[tokio::test]
async fn tags_mode_announces_a_tool_named_in_a_streamed_call_block() {
    let model = Fake::new(|req, n| match n {
        0 => Step::Reply(Completion {
            text: tag_call(
                "solve_plan",
                json!({"analysis": "one step", "steps": [{"goal": "a"}]}),
            ),
            ..completion_calls(vec![])
        }),
        1 => Step::Reply(Completion {
            text: format!("Working.\n{}", tag_call("echo", json!({"q": "x"}))),
            ..completion_calls(vec![])
        }),
        _ if req.tool_choice == ToolChoice::None => text("forced"),
        _ => text("x = 2"),
    });
    let echo = echo_tool();
    let run = run_with(model, vec![echo.clone()], |s| {
        s.protocol = Protocol::Tags;
        s.config.max_rounds = 3;
    })
    .await;
    assert!(
        run.outcome.answer.is_some(),
        "{:?}",
        run.outcome.stop_reason
    );
    assert_eq!(echo.runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(echo.announced.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn context_limit_forces_an_answer_when_nothing_can_be_snipped() {
    let model = Fake::new(|req, _| {
        if req.tool_choice == ToolChoice::None {
            text("forced within context")
        } else {
            plan(&["a"])
        }
    });
    let run = run_with(model, vec![], |s| {
        s.problem = format!("Sum these: {}", "17 ".repeat(5000));
        s.context_window = 4096;
        s.config.max_tokens = 512;
    })
    .await;
    assert_eq!(run.outcome.stop_reason, StopReason::ContextLimit);
    assert_eq!(run.outcome.answer.as_deref(), Some("forced within context"));
    assert_eq!(
        run.requests.len(),
        1,
        "only the forced answer was asked for"
    );
}

#[tokio::test]
async fn a_provider_context_length_error_snips_then_forces() {
    let big = Arc::new(Echo {
        output: Some("word ".repeat(500)),
        ..Echo::named("echo")
    });
    let model = Fake::new(|req, n| {
        if req.tool_choice == ToolChoice::None {
            text("forced after context errors")
        } else if n == 0 {
            plan(&["a"])
        } else if n == 1 {
            echo("big")
        } else {
            Step::Fail(ModelError::ContextLength {
                message: "maximum context length exceeded".into(),
            })
        }
    });
    let run = run_with(model, vec![big], |_| {}).await;
    assert_eq!(run.outcome.stop_reason, StopReason::ContextLimit);
    // The third request had the big output; the fourth had it snipped.
    assert!(prompt_text(&run.requests[2]).contains("word word"));
    assert!(prompt_text(&run.requests[3]).contains("output snipped"));
    assert_eq!(
        run.outcome.answer.as_deref(),
        Some("forced after context errors")
    );
}

#[tokio::test(start_paused = true)]
async fn turn_timeout_forces_an_answer() {
    let model = plans_then(
        |_| Step::Sleep(Duration::from_secs(3600)),
        "forced after timeout",
    );
    let run = run_with(model, vec![], |s| s.config.turn_timeout_s = 10).await;
    assert_eq!(run.outcome.stop_reason, StopReason::TurnTimeout);
    assert_eq!(run.outcome.answer.as_deref(), Some("forced after timeout"));
}

#[tokio::test]
async fn token_budget_forces_an_answer() {
    let model = plans_then(|n| echo(&format!("q{n}")), "forced by budget");
    let run = run_with(model, vec![echo_tool()], |s| s.config.token_budget = 300).await;
    assert_eq!(run.outcome.stop_reason, StopReason::Budget);
    assert_eq!(
        run.outcome.rounds, 4,
        "110 tokens a round: 3 rounds reach 300, then the forced answer"
    );
    assert!(
        prompt_text(&run.requests[2]).contains("wrap up soon"),
        "notice at 2/3"
    );
}

#[tokio::test]
async fn repetition_is_refused_at_three_and_forced_at_five() {
    let tool = echo_tool();
    let model = plans_then(|_| echo("same"), "forced by repetition");
    let run = run_with(model, vec![tool.clone()], |_| {}).await;
    assert_eq!(run.outcome.stop_reason, StopReason::Repetition);
    assert_eq!(
        tool.runs.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "runs 1 and 2 only"
    );
    let results = run.results();
    let refused: Vec<_> = results.iter().filter(|r| r.0 == "echo" && !r.1).collect();
    assert_eq!(refused.len(), 3);
    assert!(refused[0].2.contains("change strategy"));
}

#[tokio::test]
async fn empty_rounds_force_an_answer_from_summaries_when_the_model_stays_silent() {
    let model = Fake::new(|_, n| match n {
        0 => plan(&["a", "b"]),
        1 => finish("S1", "a is 42"),
        _ => text(""),
    });
    let run = run_with(model, vec![], |_| {}).await;
    assert_eq!(run.outcome.stop_reason, StopReason::EmptyRounds);
    assert_eq!(run.outcome.answer_source, Some(AnswerSource::StepSummaries));
    let answer = run.outcome.answer.unwrap();
    assert!(
        answer.contains("a is 42") && answer.contains("Not done: S2"),
        "{answer}"
    );
    assert!(
        run.requests[3]
            .messages
            .iter()
            .any(|m| m.content.contains("Stop deliberating and act"))
    );
}

#[tokio::test]
async fn auth_error_is_model_error() {
    let model = Fake::seq(vec![Step::Fail(ModelError::Auth {
        status: 401,
        message: "bad key".into(),
    })]);
    let run = run_with(model, vec![], |_| {}).await;
    assert_eq!(run.outcome.stop_reason, StopReason::ModelError);
    assert!(
        run.outcome
            .error
            .clone()
            .unwrap()
            .contains("authentication failed")
    );
    assert!(run.types().contains(&"error"));
    assert_eq!(run.outcome.answer, None);
}

#[tokio::test]
async fn stream_cut_after_output_is_salvaged_with_a_forced_answer() {
    let model = plans_then(
        |_| {
            Step::Fail(ModelError::StreamCut {
                message: "reset".into(),
            })
        },
        "salvaged",
    );
    let run = run_with(model, vec![], |_| {}).await;
    assert_eq!(run.outcome.stop_reason, StopReason::ModelError);
    assert_eq!(run.outcome.answer.as_deref(), Some("salvaged"));
    assert_the_break_is_the_turns_error(&run);
}

#[tokio::test]
async fn a_broken_stream_whose_salvage_fails_too_still_says_why() {
    let model = Fake::new(|req, n| {
        if req.tool_choice == ToolChoice::None {
            Step::Fail(ModelError::Transport {
                message: "connection refused".into(),
                attempts: 4,
            })
        } else if n == 0 {
            plan(&["a"])
        } else {
            Step::Fail(ModelError::StreamCut {
                message: "reset".into(),
            })
        }
    });
    let run = run_with(model, vec![], |_| {}).await;
    assert_eq!(run.outcome.stop_reason, StopReason::ModelError);
    assert_eq!(run.outcome.answer, None);
    assert_the_break_is_the_turns_error(&run);
}

/// The stream's break, not the salvage's fate, is what the turn reports: one `error` event
/// naming it, after the salvage was tried, and the outcome's error.
fn assert_the_break_is_the_turns_error(run: &Run) {
    let error = run.outcome.error.as_deref().unwrap_or_default();
    assert!(error.contains("reset"), "{error:?}");
    let types = run.types();
    assert_eq!(
        types.iter().filter(|t| **t == "error").count(),
        1,
        "{types:?}"
    );
    let salvage_round = types.iter().rposition(|t| *t == "round_started");
    let reported = types.iter().position(|t| *t == "error");
    assert!(salvage_round < reported, "{types:?}");
}

#[tokio::test]
async fn cancel_stops_the_turn_cleanly() {
    let engine = Engine::new(vec![]).unwrap();
    let model = Fake::new(|_, n| {
        if n == 0 {
            plan(&["a"])
        } else {
            Step::Sleep(Duration::from_secs(3600))
        }
    });
    let cancel = tokio_util::sync::CancellationToken::new();
    let sink = VecSink::default();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        trigger.cancel();
    });
    let outcome = engine
        .run_turn(&model, TurnSpec::new("t-cancel", "p"), &sink, cancel)
        .await
        .unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Cancelled);
    let events = sink.take();
    assert_eq!(events.last().unwrap().kind.type_name(), "turn_finished");
    assert!(engine.sessions().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Gates

#[tokio::test]
async fn plan_first_refuses_work_before_a_plan() {
    let tool = echo_tool();
    let model = Fake::seq(vec![
        echo("too early"),
        plan(&["a"]),
        finish("S1", "ok"),
        text("done"),
    ]);
    let run = run_with(model, vec![tool.clone()], |_| {}).await;
    assert_eq!(run.outcome.stop_reason, StopReason::Answered);
    assert_eq!(tool.runs.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert!(run.results()[0].2.starts_with("Call solve_plan first"));
}

#[tokio::test]
async fn finish_step_batched_with_work_is_refused_but_the_work_runs() {
    let tool = echo_tool();
    let model = Fake::seq(vec![
        plan(&["a"]),
        calls(vec![
            ("echo", json!({"q": "w"})),
            (
                "solve_finish_step",
                json!({"step_id": "S1", "summary": "s"}),
            ),
        ]),
        finish("S1", "s"),
        text("answer"),
    ]);
    let run = run_with(model, vec![tool.clone()], |_| {}).await;
    assert_eq!(tool.runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    let r = run.results();
    assert!(r.iter().any(|x| x.1 && x.2 == "echo: w"));
    assert!(r.iter().any(|x| x.0 == "solve_finish_step" && x.2.contains("finish the step in a later round")));
    assert_eq!(run.outcome.stop_reason, StopReason::Answered);
}

#[tokio::test]
async fn out_of_order_finish_is_refused() {
    let model = Fake::seq(vec![
        plan(&["a", "b"]),
        finish("S2", "skip"),
        finish("S1", "a"),
        finish("S2", "b"),
        text("answer"),
    ]);
    let run = run_with(model, vec![], |_| {}).await;
    assert!(
        run.results()[1]
            .2
            .contains("Do not skip steps: the current step is S1")
    );
    assert_eq!(run.outcome.stop_reason, StopReason::Answered);
}

#[tokio::test]
async fn a_second_plan_is_refused_and_replan_is_budgeted() {
    let model = Fake::seq(vec![
        plan(&["a"]),
        plan(&["b"]),
        calls(vec![(
            "solve_replan",
            json!({"reason": "r1", "steps": [{"goal": "c"}]}),
        )]),
        calls(vec![(
            "solve_replan",
            json!({"reason": "r2", "steps": [{"goal": "d"}]}),
        )]),
        calls(vec![(
            "solve_replan",
            json!({"reason": "r3", "steps": [{"goal": "e"}]}),
        )]),
        finish("S1", "d done"),
        text("answer"),
    ]);
    let run = run_with(model, vec![], |_| {}).await;
    let r = run.results();
    assert!(r[1].2.contains("solve_replan"));
    assert!(r[4].2.contains("budget_exhausted"));
    assert_eq!(run.outcome.solve.steps[0].goal, "d");
    assert_eq!(run.outcome.solve.replans_used, 2);
    assert_eq!(run.outcome.solve.plan_history.len(), 2);
    assert_eq!(run.types().iter().filter(|t| **t == "replanned").count(), 2);
}

// ---------------------------------------------------------------------------------------------
// Folding

#[tokio::test]
async fn folding_keeps_the_plan_pinned_and_drops_the_step_chatter() {
    let model = Fake::seq(vec![
        plan(&["factor", "solve", "check"]),
        echo("FACTOR-CHATTER"),
        finish("S1", "(x-2)(x-3)"),
        echo("SOLVE-CHATTER"),
        finish("S2", "x=2,3"),
        finish("S3", "checked"),
        text("x = 2 or x = 3"),
    ]);
    let run = run_with(model, vec![echo_tool()], |_| {}).await;
    // Round 4 (after the first fold): the plan is pinned, S1's chatter is gone.
    let r4 = prompt_text(&run.requests[3]);
    assert!(!r4.contains("FACTOR-CHATTER"), "{r4}");
    assert!(
        r4.contains("\"status\":\"step_done\""),
        "the finish exchange itself stays: {r4}"
    );
    assert!(r4.contains("[deepsolve:progress] round 4 of 12"));
    assert!(r4.contains("[x] S1 factor — (x-2)(x-3)"));
    assert!(r4.contains("[ ] S2 solve   <- current"));
    assert!(r4.contains("[ ] S3 check"));
    // The last round sees the whole record and no chatter at all.
    let last = run.last_prompt();
    assert!(!last.contains("CHATTER"));
    assert!(last.contains("All steps are done"));
    // Folding shrinks the context.
    for e in &run.events {
        if let EventKind::ContextFolded {
            tokens_before,
            tokens_after,
        } = e.kind
        {
            assert!(tokens_after < tokens_before);
        }
    }
}

/// Without reported usage (the fake's default of 100 prompt tokens would say the context
/// stays small), the estimate of the whole context decides.
#[tokio::test]
async fn compaction_snips_old_tool_outputs_before_the_ultimatum() {
    let big = Arc::new(Echo {
        output: Some("data ".repeat(2000)),
        ..Echo::named("echo")
    });
    let model = Fake::seq(
        vec![
            plan(&["a"]),
            echo("1"),
            echo("2"),
            echo("3"),
            text("answer"),
            finish("S1", "done"),
            text("answer"),
        ]
        .into_iter()
        .map(unreported)
        .collect(),
    );
    let run = run_with(model, vec![big], |s| {
        s.context_window = 4096;
        s.config.max_tokens = 512;
    })
    .await;
    assert_eq!(run.outcome.stop_reason, StopReason::Answered);
    assert!(
        run.requests
            .iter()
            .any(|r| prompt_text(r).contains("output snipped"))
    );
}

/// The context decisions follow the provider's count of the last request, not the local
/// estimate: a reported prompt past the ultimatum threshold forces the answer at once.
#[tokio::test]
async fn a_reported_prompt_past_the_limit_forces_the_answer() {
    for (reported, stop) in [
        (100, StopReason::Answered),
        (5000, StopReason::ContextLimit),
    ] {
        let model = Fake::new(move |req, n| {
            if req.tool_choice == ToolChoice::None {
                text("forced")
            } else {
                match n {
                    0 => with_usage(plan(&["a"]), usage(reported, 10)),
                    1 => finish("S1", "ok"),
                    _ => text("answer"),
                }
            }
        });
        let run = run_with(model, vec![], |s| {
            s.context_window = 4096;
            s.config.max_tokens = 512;
        })
        .await;
        assert_eq!(run.outcome.stop_reason, stop, "reported {reported}");
        let second_round_tokens = run
            .events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::RoundStarted { context_tokens, .. } => Some(context_tokens),
                _ => None,
            })
            .nth(1)
            .expect("a second round");
        // The projection: the reported 10 + `reported` tokens plus the plan's result, minus
        // nothing (no message left the context).
        assert!(
            second_round_tokens > reported + 10 && second_round_tokens < reported + 200,
            "reported {reported}, projected {second_round_tokens}"
        );
    }
}

/// Old tool outputs are snipped when the reported prompt nears the window, though the local
/// estimate of the same messages is far below it.
#[tokio::test]
async fn a_reported_prompt_near_the_window_snips_old_outputs() {
    for report in [true, false] {
        let big = Arc::new(Echo {
            output: Some("data ".repeat(400)),
            ..Echo::named("echo")
        });
        let reported = |step: Step| {
            if report {
                with_usage(step, usage(2900, 10))
            } else {
                unreported(step)
            }
        };
        let model = Fake::seq(vec![
            plan(&["a"]),
            echo("1"),
            reported(echo("2")),
            finish("S1", "done"),
            text("answer"),
        ]);
        let run = run_with(model, vec![big], |s| {
            s.context_window = 4096;
            s.config.max_tokens = 512;
        })
        .await;
        assert_eq!(run.outcome.stop_reason, StopReason::Answered);
        let snipped = prompt_text(&run.requests[3]).contains("output snipped");
        assert_eq!(snipped, report, "usage reported: {report}");
    }
}

// ---------------------------------------------------------------------------------------------
// Model output quirks

#[tokio::test]
async fn length_with_text_asks_to_continue_and_joins_the_parts() {
    let cut = Step::Reply(Completion {
        finish_reason: FinishReason::Length,
        ..match text("The roots are x") {
            Step::Reply(c) => c,
            _ => unreachable!(),
        }
    });
    let model = Fake::seq(vec![
        plan(&["a"]),
        finish("S1", "ok"),
        cut,
        text(" = 2 and x = 3."),
    ]);
    let run = run_with(model, vec![], |_| {}).await;
    assert_eq!(
        run.outcome.answer.as_deref(),
        Some("The roots are x = 2 and x = 3.")
    );
    assert!(run.last_prompt().contains("[deepsolve:continue]"));
}

/// The 1.5B model's answer round (`line-535`, build 9d74d0d) wrote the same paragraphs over
/// and over until the output limit; asked to go on, it did so again, round after round.
#[tokio::test]
async fn an_answer_cut_off_in_a_loop_ends_where_the_loop_began() {
    let lap = "To verify this, the total is 180 shells. The correct explanation should be: ";
    let looping = format!("The total number of shells is 180.\n\n{}", lap.repeat(8));
    let cut = Step::Reply(Completion {
        finish_reason: FinishReason::Length,
        ..match text(&looping) {
            Step::Reply(c) => c,
            _ => unreachable!(),
        }
    });
    let model = Fake::seq(vec![plan(&["a"]), finish("S1", "180 shells"), cut]);
    let run = run_with(model, vec![], |_| {}).await;
    assert_eq!(run.outcome.stop_reason, StopReason::Answered);
    assert_eq!(run.requests.len(), 3, "not asked to go on");
    let answer = run.outcome.answer.as_deref().unwrap_or_default();
    assert!(
        answer.starts_with("The total number of shells is 180."),
        "{answer}"
    );
    assert_eq!(
        answer.matches("The correct explanation").count(),
        1,
        "{answer}"
    );
    assert!(!run.last_prompt().contains("[deepsolve:continue]"));
}

#[tokio::test]
async fn reasoning_only_length_retries_once_with_double_budget() {
    let thinking = Step::Reply(Completion {
        text: String::new(),
        reasoning: "hmm ".repeat(50),
        tool_calls: vec![],
        finish_reason: FinishReason::Length,
        usage: usage(100, 8192),
    });
    let model = Fake::seq(vec![
        thinking,
        plan(&["a"]),
        finish("S1", "ok"),
        text("answer"),
    ]);
    let run = run_with(model, vec![], |_| {}).await;
    assert_eq!(run.outcome.stop_reason, StopReason::Answered);
    assert_eq!(run.requests[0].max_tokens, 8192);
    assert_eq!(run.requests[1].max_tokens, 16384);
    assert_eq!(run.requests[2].max_tokens, 8192);
    assert!(run.types().contains(&"reasoning_delta"));
}

#[tokio::test]
async fn reasoning_content_is_sent_back_on_tool_call_turns() {
    let mut planned = completion_calls(vec![(
        "solve_plan",
        json!({"analysis": "a", "steps": [{"goal": "g"}]}),
    )]);
    planned.reasoning = "I should plan".into();
    let model = Fake::seq(vec![
        Step::Reply(planned),
        finish("S1", "ok"),
        text("answer"),
    ]);
    let run = run_with(model, vec![], |_| {}).await;
    let second = &run.requests[1];
    let assistant = second
        .messages
        .iter()
        .find(|m| !m.tool_calls.is_empty())
        .unwrap();
    assert_eq!(
        assistant.reasoning_content.as_deref(),
        Some("I should plan")
    );
}

// ---------------------------------------------------------------------------------------------
// Dispatch

#[tokio::test]
async fn unknown_tools_and_bad_arguments_get_corrective_results() {
    let tool = echo_tool();
    let bad_json = Completion {
        tool_calls: vec![ToolCall {
            id: "bad".into(),
            name: "echo".into(),
            arguments: "{\"q\": ".into(),
        }],
        ..completion_calls(vec![])
    };
    let model = Fake::seq(vec![
        plan(&["a"]),
        calls(vec![("web_search", json!({"query": "x"}))]),
        calls(vec![("echo", json!({"q": "x", "n": 0}))]),
        calls(vec![("echo", json!({"q": "x", "extra": 1}))]),
        calls(vec![("echo", json!({}))]),
        Step::Reply(bad_json),
        calls(vec![("ECHO", json!({"q": "case"}))]),
        finish("S1", "ok"),
        text("answer"),
    ]);
    let run = run_with(model, vec![tool.clone()], |_| {}).await;
    let r = run.results();
    assert_eq!(
        r[1].2,
        "tool web_search is not available; available: solve_plan, solve_finish_step, solve_replan, echo"
    );
    assert!(r[2].2.contains("less than the minimum of 1"), "{}", r[2].2);
    assert!(r[3].2.contains("extra"), "{}", r[3].2);
    assert!(
        r[4].2.contains("\"q\" is a required property"),
        "{}",
        r[4].2
    );
    // "{\"q\": " is repaired to {"q": null}, which the schema then rejects.
    assert!(!r[5].1, "{}", r[5].2);
    assert_eq!(
        r[6].2, "echo: case",
        "a unique case-insensitive name resolves"
    );
    assert_eq!(tool.runs.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn ten_parallel_calls_all_get_a_result_and_duplicates_get_stubs() {
    let tool = echo_tool();
    let mut flood: Vec<(&str, serde_json::Value)> = (0..9)
        .map(|i| ("echo", json!({"q": format!("q{i}")})))
        .collect();
    flood.insert(1, ("echo", json!({"q": "q0"})));
    let model = Fake::seq(vec![
        plan(&["a"]),
        calls(flood),
        finish("S1", "ok"),
        text("answer"),
    ]);
    let run = run_with(model, vec![tool.clone()], |_| {}).await;
    let r = run.results();
    let round: Vec<_> = r[1..11].to_vec();
    let count = |prefix: &str| round.iter().filter(|x| x.2.starts_with(prefix)).count();
    assert_eq!(count("duplicate of call"), 1);
    assert_eq!(count("skipped: over the per-round limit of 8"), 2);
    assert_eq!(count("echo: q"), 7);
    assert_eq!(tool.runs.load(std::sync::atomic::Ordering::SeqCst), 7);
    // Results reach the model in call order, one per call.
    let third = &run.requests[2];
    let ids: Vec<_> = third
        .messages
        .iter()
        .filter_map(|m| m.tool_call_id.clone())
        .collect();
    let calls: Vec<_> = third
        .messages
        .iter()
        .flat_map(|m| m.tool_calls.iter().map(|c| c.id.clone()))
        .collect();
    assert_eq!(ids, calls);
}

#[tokio::test]
async fn a_slow_tool_times_out_and_a_panicking_tool_becomes_an_error() {
    let slow = Arc::new(Echo {
        delay: Duration::from_secs(30),
        ..Echo::named("slow")
    });
    let bad = Arc::new(Echo {
        panic: true,
        ..Echo::named("bad")
    });
    let model = Fake::seq(vec![
        plan(&["a"]),
        calls(vec![
            ("slow", json!({"q": "x"})),
            ("bad", json!({"q": "y"})),
        ]),
        finish("S1", "ok"),
        text("answer"),
    ]);
    let started = std::time::Instant::now();
    let run = run_with(model, vec![slow, bad], |s| s.config.tool_timeout_s = 1).await;
    assert!(started.elapsed() < Duration::from_secs(10));
    let r = run.results();
    let of = |name: &str| r.iter().find(|x| x.0 == name).unwrap().2.clone();
    assert_eq!(of("slow"), "timed out after 1s");
    assert!(of("bad").contains("the tool panicked"));
    assert_eq!(run.outcome.stop_reason, StopReason::Answered);
}

#[tokio::test]
async fn an_internal_tool_error_shows_the_model_a_neutral_message_and_keeps_the_detail() {
    let broken = Arc::new(Echo {
        error: Some(ToolError::internal(
            "the sandbox did not start: /dev/fuse missing",
        )),
        ..Echo::named("broken")
    });
    let picky = Arc::new(Echo {
        error: Some(ToolError::actionable("q must name a variable")),
        ..Echo::named("picky")
    });
    let model = Fake::seq(vec![
        plan(&["a"]),
        calls(vec![
            ("broken", json!({"q": "x"})),
            ("picky", json!({"q": "y"})),
        ]),
        finish("S1", "ok"),
        text("answer"),
    ]);
    let run = run_with(model, vec![broken, picky], |_| {}).await;
    let r = run.results();
    let of = |name: &str| r.iter().find(|x| x.0 == name).unwrap().2.clone();
    assert_eq!(
        of("broken"),
        "broken failed: the sandbox did not start: /dev/fuse missing",
        "the event keeps the detail"
    );
    assert_eq!(of("picky"), "picky failed: q must name a variable");
    let seen: Vec<&str> = run.requests[2]
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    assert!(
        seen.contains(&"picky failed: q must name a variable"),
        "{seen:?}"
    );
    let neutral = seen
        .iter()
        .find(|c| c.starts_with("broken failed"))
        .unwrap();
    assert!(
        neutral.contains("internal error") && !neutral.contains("fuse"),
        "{neutral}"
    );
}

#[tokio::test]
async fn long_results_are_truncated_for_the_model_but_kept_in_events() {
    let long: String = (0..2000).map(|i| format!("line {i}\n")).collect();
    let tool = Arc::new(Echo {
        output: Some(long.clone()),
        ..Echo::named("echo")
    });
    let model = Fake::seq(vec![
        plan(&["a"]),
        echo("x"),
        finish("S1", "ok"),
        text("answer"),
    ]);
    let run = run_with(model, vec![tool], |_| {}).await;
    assert_eq!(run.results()[1].2, long, "events keep the full output");
    let seen = &run.requests[2]
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Tool)
        .unwrap()
        .content;
    assert!(seen.len() <= 10 * 1024 + 100 && seen.contains("omitted"));
}

#[tokio::test]
async fn history_carries_previous_answers_and_solve_records() {
    let first = Fake::seq(vec![
        plan(&["factor"]),
        finish("S1", "(x-2)(x-3)"),
        text("x=2 or x=3"),
    ]);
    let run1 = run_with(first, vec![], |_| {}).await;
    let second = Fake::seq(vec![text("their sum is 5"), text("their sum is 5")]);
    let run2 = run_with(second, vec![], |s| {
        s.problem = "What is their sum?".into();
        s.history = vec![PriorTurn {
            problem: "Solve x^2 - 5x + 6 = 0.".into(),
            answer: run1.outcome.answer.clone().unwrap(),
            solve: Some(run1.outcome.solve.clone()),
        }];
    })
    .await;
    let prompt = prompt_text(&run2.requests[0]);
    assert!(prompt.contains("[x] S1 factor — (x-2)(x-3)"));
    assert!(prompt.contains("x=2 or x=3"));
}

#[tokio::test]
async fn the_system_prompt_names_only_mounted_tools_and_follows_the_language() {
    let model = Fake::seq(vec![text("a"), text("a")]);
    let run = run_with(model, vec![echo_tool()], |s| s.language = Language::Zh).await;
    let system = &run.requests[0].messages[0].content;
    assert!(system.contains("`echo`") && system.contains("请用中文回答"));
    assert!(!system.contains("web_search") && !system.contains("code_execution"));
    assert_eq!(
        run.requests[0].messages[0].content, run.requests[1].messages[0].content,
        "the system prompt is byte-stable for the turn"
    );
}

// ---------------------------------------------------------------------------------------------
// The text-tag protocol, vendor markup and reasoning in content

fn tag_call(name: &str, args: serde_json::Value) -> String {
    format!(
        "<tool_call>\n{}\n</tool_call>",
        json!({"name": name, "arguments": args})
    )
}

/// A tags-mode model that ignores the stop sequence and invents a result after every call.
fn inventing(text: String) -> Step {
    let n = text.matches("<tool_call>").count();
    let mut reply = text;
    for i in 0..n {
        reply.push_str(&format!("\n<tool_response>INVENTED-{i}</tool_response>"));
    }
    crate::common::text(&reply)
}

#[tokio::test]
async fn tags_mode_solves_and_never_shows_the_model_its_invented_results() {
    let tool = echo_tool();
    let model = Fake::seq(vec![
        inventing(tag_call(
            "solve_plan",
            json!({"analysis": "a", "steps": [{"goal": "factor"}]}),
        )),
        inventing(format!(
            "Working.\n{}",
            tag_call("echo", json!({"q": "REAL-INPUT"}))
        )),
        inventing(tag_call(
            "solve_finish_step",
            json!({"step_id": "S1", "summary": "(x-2)(x-3)"}),
        )),
        text("<answer>x = 2 or x = 3</answer>"),
    ]);
    let run = run_with(model, vec![tool.clone()], |s| s.protocol = Protocol::Tags).await;
    assert_eq!(run.outcome.stop_reason, StopReason::Answered);
    assert_eq!(run.outcome.answer.as_deref(), Some("x = 2 or x = 3"));
    for req in &run.requests {
        assert!(req.tools.is_empty(), "tags mode declares no native tools");
        assert_eq!(req.stop, ["<tool_response>", "\n<tool_response>"]);
        assert!(
            req.messages
                .iter()
                .all(|m| m.role != Role::Tool && m.tool_calls.is_empty())
        );
        assert!(
            !prompt_text(req).contains("INVENTED"),
            "{}",
            prompt_text(req)
        );
    }
    let system = &run.requests[0].messages[0].content;
    assert!(system.contains("### echo") && system.contains("<tool_call>"));
    let third = prompt_text(&run.requests[2]);
    assert!(third.contains("<tool_response name=\"echo\""), "{third}");
    assert!(third.contains("echo: REAL-INPUT"));
    assert_eq!(tool.runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(run.types().contains(&"warning"));
    // No text delta ever showed markup or invented results.
    for e in &run.events {
        if let EventKind::TextDelta { text } = &e.kind {
            assert!(
                !text.contains("<tool_call>") && !text.contains("INVENTED"),
                "{text}"
            );
        }
    }
}

#[tokio::test]
async fn tags_mode_three_unreadable_calls_in_a_row_force_an_answer() {
    let model = Fake::new(|req, _| {
        if req
            .messages
            .last()
            .unwrap()
            .content
            .contains("[deepsolve:ultimatum]")
        {
            text("forced")
        } else {
            text("<tool_call>{\"arguments\": {}}</tool_call>")
        }
    });
    let run = run_with(model, vec![], |s| s.protocol = Protocol::Tags).await;
    assert_eq!(run.outcome.stop_reason, StopReason::FormatErrors);
    assert_eq!(run.outcome.answer.as_deref(), Some("forced"));
    assert_eq!(
        run.results()
            .iter()
            .filter(|r| r.2.contains("could not be read"))
            .count(),
        3
    );
}

#[tokio::test]
async fn auto_switches_to_tags_when_tools_are_unsupported_and_remembers() {
    let engine = Engine::new(vec![]).unwrap();
    let make = || {
        Fake::new(|req, _| {
            if !req.tools.is_empty() {
                return Step::Fail(ModelError::ToolsUnsupported {
                    message: "no tools".into(),
                });
            }
            let prompt = prompt_text(req);
            if !prompt.contains("solve_plan(") && !prompt.contains("\"name\":\"solve_plan\"") {
                text(&tag_call(
                    "solve_plan",
                    json!({"analysis": "a", "steps": [{"goal": "g"}]}),
                ))
            } else if !prompt.contains("step_done") && !prompt.contains("[x] S1") {
                text(&tag_call(
                    "solve_finish_step",
                    json!({"step_id": "S1", "summary": "done"}),
                ))
            } else {
                text("the answer")
            }
        })
    };
    let first = make();
    let sink = VecSink::default();
    let mut spec = TurnSpec::new("auto-1", "p");
    spec.protocol = Protocol::Auto;
    let outcome = engine
        .run_turn(&first, spec, &sink, Default::default())
        .await
        .unwrap();
    assert_eq!(
        outcome.stop_reason,
        StopReason::Answered,
        "{:?}",
        sink.take()
    );
    let reqs = first.requests();
    assert!(!reqs[0].tools.is_empty() && reqs[1].tools.is_empty());
    assert_eq!(
        outcome.rounds as usize,
        reqs.len() - 1,
        "the refused native call is not a round"
    );
    // The next turn with the same model starts in tags mode at once.
    let second = make();
    let mut spec = TurnSpec::new("auto-2", "p");
    spec.protocol = Protocol::Auto;
    engine
        .run_turn(&second, spec, &VecSink::default(), Default::default())
        .await
        .unwrap();
    assert!(second.requests()[0].tools.is_empty());
}

#[tokio::test]
async fn vendor_markup_in_native_content_becomes_calls_and_never_answer_text() {
    let dsml = "Let me plan.\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"solve_plan\">\n<｜DSML｜parameter name=\"analysis\" string=\"true\">a</｜DSML｜parameter>\n<｜DSML｜parameter name=\"steps\" string=\"false\">[{\"goal\": \"g\"}]</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>";
    let kimi = "<|tool_calls_section_begin|><|tool_call_begin|>functions.solve_finish_step:0<|tool_call_argument_begin|>{\"step_id\": \"S1\", \"summary\": \"ok\"}<|tool_call_end|><|tool_calls_section_end|>";
    let model = Fake::seq(vec![
        text(dsml),
        text(kimi),
        text("<think>check</think>Final: 5"),
    ]);
    let run = run_with(model, vec![], |_| {}).await;
    assert_eq!(run.outcome.stop_reason, StopReason::Answered);
    assert_eq!(run.outcome.answer.as_deref(), Some("Final: 5"));
    // The parsed calls went back to the provider as native calls, with results.
    let second = &run.requests[1];
    let assistant = second
        .messages
        .iter()
        .find(|m| !m.tool_calls.is_empty())
        .unwrap();
    assert_eq!(assistant.tool_calls[0].name, "solve_plan");
    assert_eq!(assistant.content, "Let me plan.");
    let texts: String = run
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TextDelta { text } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert!(
        !texts.contains("DSML") && !texts.contains("tool_call") && !texts.contains("check"),
        "{texts}"
    );
}

#[tokio::test]
async fn inline_think_is_reasoning_not_answer_and_not_a_summary() {
    let model = Fake::seq(vec![
        text("<think>I should plan first.</think>"),
        plan(&["a"]),
        calls(vec![(
            "solve_finish_step",
            json!({"step_id": "S1", "summary": "<think>secret musing</think>x = 4"}),
        )]),
        text("<think>double-check: 4</think>**x = 4**"),
    ]);
    let run = run_with(model, vec![], |_| {}).await;
    assert_eq!(run.outcome.answer.as_deref(), Some("**x = 4**"));
    assert_eq!(run.outcome.solve.steps[0].summary.as_deref(), Some("x = 4"));
    // The thinking-only first round counted as empty and was nudged, not answered.
    assert!(prompt_text(&run.requests[1]).contains("Stop deliberating"));
    let reasoning: String = run
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ReasoningDelta { text } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert!(reasoning.contains("I should plan first.") && reasoning.contains("double-check"));
}

#[tokio::test]
async fn a_resumed_turn_continues_from_its_last_checkpoint() {
    // The first run is "interrupted" after S1: its last checkpoint event is what a server keeps.
    let first = Fake::seq(vec![
        plan(&["factor", "solve"]),
        finish("S1", "(x-2)(x-3)"),
        Step::Fail(ModelError::Auth {
            status: 401,
            message: "boom".into(),
        }),
    ]);
    let run1 = run_with(first, vec![], |_| {}).await;
    let checkpoint = run1
        .events
        .iter()
        .rev()
        .find_map(|e| match &e.kind {
            EventKind::Checkpoint { checkpoint } => Some(checkpoint.clone()),
            _ => None,
        })
        .expect("a checkpoint after S1");
    assert_eq!(checkpoint.rounds, 2);
    assert!(checkpoint.record.steps[0].done && !checkpoint.record.steps[1].done);
    let second = Fake::seq(vec![finish("S2", "x = 2 or 3"), text("x = 2 or x = 3")]);
    let run2 = run_with(second, vec![], |s| {
        s.resume = Some(checkpoint.clone());
        s.first_seq = 40;
    })
    .await;
    assert_eq!(run2.outcome.stop_reason, StopReason::Answered);
    assert_eq!(run2.outcome.rounds, checkpoint.rounds + 2);
    assert!(run2.outcome.elapsed_ms >= checkpoint.elapsed_ms);
    let first_prompt = prompt_text(&run2.requests[0]);
    assert!(first_prompt.contains("[deepsolve:progress] round 3 of 12"));
    assert!(first_prompt.contains("[x] S1 factor — (x-2)(x-3)"));
    assert!(first_prompt.contains("[ ] S2 solve   <- current"));
    assert_eq!(run2.events[0].seq, 40);
    assert!(matches!(
        run2.events[0].kind,
        EventKind::TurnStarted { resumed: true, .. }
    ));
    assert_eq!(
        run2.events[1].kind.type_name(),
        "plan",
        "the restored checklist comes first"
    );
    assert!(run2.outcome.solve.all_done());
}

/// What a call reports while it runs goes out as `tool_progress` events of that call, between
/// its `tool_call` and its `tool_result`, at most `MAX_PROGRESS_PER_CALL` of them.
#[tokio::test]
async fn a_calls_progress_goes_out_between_its_start_and_its_result() {
    let model = Fake::seq(vec![
        plan(&["run it"]),
        echo("q"),
        finish("S1", "done"),
        text("answer"),
    ]);
    let mut tool = Echo::named("echo");
    let over = deepsolve_core::MAX_PROGRESS_PER_CALL as usize + 5;
    tool.progress = (0..over).map(|i| format!("line {i}")).collect();
    let run = run_with(model, vec![Arc::new(tool)], |_| {}).await;
    assert_eq!(run.outcome.stop_reason, StopReason::Answered);
    let started = (run.events.iter())
        .position(|e| matches!(&e.kind, EventKind::ToolCall { name, .. } if name == "echo"))
        .expect("the echo's tool_call");
    let ended = (run.events.iter())
        .position(|e| matches!(&e.kind, EventKind::ToolResult { name, .. } if name == "echo"))
        .expect("the echo's tool_result");
    let progress: Vec<(usize, &str, &str)> = (run.events.iter().enumerate())
        .filter_map(|(i, e)| match &e.kind {
            EventKind::ToolProgress { call_id, message } => {
                Some((i, call_id.as_str(), message.as_str()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        progress.len(),
        deepsolve_core::MAX_PROGRESS_PER_CALL as usize
    );
    assert_eq!(progress[0].2, "line 0");
    assert!(progress.iter().all(|(i, _, _)| started < *i && *i < ended));
    let EventKind::ToolCall { call_id, .. } = &run.events[started].kind else {
        unreachable!()
    };
    assert!(progress.iter().all(|(_, id, _)| id == call_id));
    assert_seq_is_gapless(&run.events);
}
