//! Runs of problems × modes: plain over a scripted model, deepsolve through a fake solver;
//! results appended as they finish, resume after a kill, concurrency, failing endpoints.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deepsolve_core::Language;
use deepsolve_eval::data::parse;
use deepsolve_eval::mode::{DEEPSOLVE, PLAIN, plain_system_prompt};
use deepsolve_eval::{Grader, Mode, PlainOptions, RunConfig, RunError, Runner, sets};
use deepsolve_testkit::policy::FnPolicy;
use deepsolve_testkit::{Reply, ScriptedModel};
use tokio_util::sync::CancellationToken;

use crate::common::{FakeSolver, answers_for, lines, numbered, plain_model};

fn config(dir: &Path) -> RunConfig {
    RunConfig {
        label: "test".into(),
        ..RunConfig::new(dir)
    }
}

#[tokio::test]
async fn plain_and_deepsolve_run_every_problem_and_record_each_pair_once() {
    let dir = tempfile::tempdir().unwrap();
    let problems = parse(Path::new("gsm-style-en.jsonl"), sets::GSM_STYLE_EN).unwrap();
    let plain = plain_model(answers_for(&problems, &["en-03", "en-05"]));
    let solver = Arc::new(FakeSolver {
        wrong: vec!["en-07".into()],
        ..FakeSolver::default()
    });
    let modes = [
        Mode::plain(plain.clone(), PlainOptions::default()),
        Mode::deepsolve(solver.clone()),
    ];
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let runner = Runner::new(config(dir.path()), Grader::new()).on_progress(Arc::new(move |p| {
        sink.lock()
            .unwrap()
            .push((p.done, p.total, p.tallies.to_vec()));
    }));
    let summary = runner
        .run(&problems, &modes, &CancellationToken::new())
        .await
        .unwrap();
    let n = problems.len();
    assert_eq!(
        (
            summary.total,
            summary.ran,
            summary.skipped,
            summary.cancelled
        ),
        (2 * n, 2 * n, 0, false)
    );
    let plain_tally = summary.tallies.iter().find(|t| t.mode == PLAIN).unwrap();
    let deep_tally = summary
        .tallies
        .iter()
        .find(|t| t.mode == DEEPSOLVE)
        .unwrap();
    assert_eq!((plain_tally.done, plain_tally.correct), (n, n - 2));
    assert_eq!((deep_tally.done, deep_tally.correct), (n, n - 1));

    let rows = lines(dir.path());
    assert_eq!(rows.len(), 2 * n);
    let row = rows
        .iter()
        .find(|r| r["id"] == "en-01" && r["mode"] == PLAIN)
        .unwrap();
    assert_eq!(row["correct"], true);
    assert_eq!(row["judged"], "exact");
    assert_eq!(row["extraction"], "boxed");
    assert_eq!(
        (row["rounds"].as_u64(), row["prompt_tokens"].as_u64()),
        (Some(1), Some(120))
    );
    assert_eq!(row["stop"], "stop");
    let row = rows
        .iter()
        .find(|r| r["id"] == "en-07" && r["mode"] == DEEPSOLVE)
        .unwrap();
    assert_eq!(
        (row["correct"].as_bool(), row["extraction"].as_str()),
        (Some(false), Some("first_line"))
    );
    assert_eq!(
        (row["rounds"].as_u64(), row["turn_id"].as_str()),
        (Some(5), Some("turn-en-07"))
    );

    // Progress: one call per pair, counting up to the total, with running accuracy.
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2 * n);
    assert_eq!(seen.last().unwrap().0, 2 * n);
    assert!(seen.windows(2).all(|w| w[1].0 == w[0].0 + 1));
    let last = &seen.last().unwrap().2;
    assert!(
        (last.iter().find(|t| t.mode == PLAIN).unwrap().accuracy() - (n - 2) as f64 / n as f64)
            .abs()
            < 1e-9
    );
    assert_eq!(solver.calls(), n);
    assert_eq!(plain.request_count(), n);
}

#[tokio::test]
async fn plain_asks_in_the_problems_language() {
    let dir = tempfile::tempdir().unwrap();
    let problems = parse(Path::new("zh-arith.jsonl"), sets::ZH_ARITH).unwrap();
    let problems = &problems[..3];
    let model = plain_model(answers_for(problems, &[]));
    let modes = [Mode::plain(model.clone(), PlainOptions::default())];
    let summary = Runner::new(config(dir.path()), Grader::new())
        .run(problems, &modes, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(summary.tallies[0].correct, 3);
    for request in model.requests() {
        assert_eq!(request.messages.len(), 2);
        assert_eq!(
            request.messages[0].content,
            plain_system_prompt(Language::Zh)
        );
        assert!(request.tools.is_empty());
    }
    assert!(plain_system_prompt(Language::Zh).contains("\\boxed{}"));
}

#[tokio::test]
async fn a_killed_run_resumes_without_redoing_finished_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let problems = numbered(12);
    let cancel = CancellationToken::new();
    let stop_at = cancel.clone();
    let first = Arc::new(FakeSolver {
        delay: Some(Duration::from_millis(20)),
        ..FakeSolver::default()
    });
    let runner = Runner::new(
        RunConfig {
            concurrency: 2,
            ..config(dir.path())
        },
        Grader::new(),
    )
    .on_progress(Arc::new(move |p| {
        if p.done == 5 {
            stop_at.cancel();
        }
    }));
    let summary = runner
        .run(&problems, &[Mode::deepsolve(first.clone())], &cancel)
        .await
        .unwrap();
    assert!(summary.cancelled);
    // Pairs already finished when the cancel landed are kept; the rest are not run.
    let first_ran = summary.ran;
    assert!((5..12).contains(&first_ran), "{first_ran}");
    assert_eq!(summary.ran + summary.unfinished, 12);
    assert_eq!(lines(dir.path()).len(), first_ran);

    // The kill came mid-write: a torn last line.
    let results = dir.path().join("results.jsonl");
    let mut text = std::fs::read_to_string(&results).unwrap();
    text.push_str("{\"id\":\"p9\",\"mode\":\"deeps");
    std::fs::write(&results, text).unwrap();

    // Without --resume the directory is refused.
    let refused = Runner::new(config(dir.path()), Grader::new())
        .run(
            &problems,
            &[Mode::deepsolve(first.clone())],
            &CancellationToken::new(),
        )
        .await;
    assert!(matches!(refused, Err(RunError::Exists(_))), "{refused:?}");

    let second = Arc::new(FakeSolver::default());
    let summary = Runner::new(
        RunConfig {
            resume: true,
            ..config(dir.path())
        },
        Grader::new(),
    )
    .run(
        &problems,
        &[Mode::deepsolve(second.clone())],
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(
        (summary.skipped, summary.ran, summary.total),
        (first_ran, 12 - first_ran, 12)
    );
    assert_eq!(second.calls(), 12 - first_ran);
    assert_eq!(summary.tallies[0].done, 12);
    let rows = lines(dir.path());
    assert_eq!(rows.len(), 12, "every pair once, the torn line gone");
    let mut ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 12);

    // A resume of a finished run runs nothing.
    let third = Arc::new(FakeSolver::default());
    let summary = Runner::new(
        RunConfig {
            resume: true,
            ..config(dir.path())
        },
        Grader::new(),
    )
    .run(
        &problems,
        &[Mode::deepsolve(third.clone())],
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!((summary.ran, summary.skipped, third.calls()), (0, 12, 0));
}

#[tokio::test]
async fn concurrency_is_bounded_and_used() {
    let dir = tempfile::tempdir().unwrap();
    let solver = Arc::new(FakeSolver {
        delay: Some(Duration::from_millis(30)),
        ..FakeSolver::default()
    });
    let summary = Runner::new(
        RunConfig {
            concurrency: 3,
            ..config(dir.path())
        },
        Grader::new(),
    )
    .run(
        &numbered(10),
        &[Mode::deepsolve(solver.clone())],
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(summary.ran, 10);
    assert_eq!(solver.max_in_flight.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn an_endpoint_that_fails_is_recorded_per_problem_and_retried_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let problems = numbered(4);
    let broken = Arc::new(ScriptedModel::new(FnPolicy(
        |_: &deepsolve_testkit::PolicyRequest| Reply::server_error(),
    )));
    let fine = Arc::new(FakeSolver::default());
    let modes = [
        Mode::plain(broken.clone(), PlainOptions::default()),
        Mode::deepsolve(fine.clone()),
    ];
    let summary = Runner::new(config(dir.path()), Grader::new())
        .run(&problems, &modes, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(summary.ran, 8);
    let plain = summary.tallies.iter().find(|t| t.mode == PLAIN).unwrap();
    assert_eq!((plain.done, plain.correct, plain.errors), (4, 0, 4));
    let rows = lines(dir.path());
    let failed = rows.iter().find(|r| r["mode"] == PLAIN).unwrap();
    assert_eq!(failed["judged"], "error");
    assert_eq!(failed["error"]["kind"], "server");
    assert!(failed["error"]["message"].as_str().unwrap().contains("500"));

    // --resume --retry-errors runs only the failed pairs again, now against a working model.
    let problems_ref = &problems;
    let working = plain_model(answers_for(problems_ref, &[]));
    let summary = Runner::new(
        RunConfig {
            resume: true,
            retry_errors: true,
            ..config(dir.path())
        },
        Grader::new(),
    )
    .run(
        &problems,
        &[
            Mode::plain(working.clone(), PlainOptions::default()),
            Mode::deepsolve(fine.clone()),
        ],
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!((summary.ran, summary.skipped), (4, 4));
    assert_eq!(fine.calls(), 4);
    let plain = summary.tallies.iter().find(|t| t.mode == PLAIN).unwrap();
    assert_eq!((plain.correct, plain.errors), (4, 0));
}

#[tokio::test]
async fn an_endpoint_that_fails_problem_after_problem_stops_the_run_and_a_resume_finishes_it() {
    // A llama.cpp server that crashed six minutes into a three-hour run had every one of the
    // 58 remaining pairs recorded as an error, a few seconds each.
    let dir = tempfile::tempdir().unwrap();
    let problems = numbered(12);
    let down = Arc::new(FakeSolver {
        fail: problems.iter().skip(2).map(|p| p.id.clone()).collect(),
        ..FakeSolver::default()
    });
    let one_at_a_time = RunConfig {
        concurrency: 1,
        ..config(dir.path())
    };
    let summary = Runner::new(one_at_a_time.clone(), Grader::new())
        .run(
            &problems,
            &[Mode::deepsolve(down.clone())],
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let stopped_after = 2 + deepsolve_eval::ENDPOINT_DOWN_AFTER;
    assert_eq!(summary.ran, stopped_after);
    assert_eq!(
        down.calls(),
        stopped_after,
        "no problem was started after it"
    );
    assert_eq!(summary.unfinished, 12 - stopped_after);
    assert!(!summary.cancelled);
    let error = summary.endpoint_down.expect("stopped for the endpoint");
    assert_eq!(error.kind, "server");
    assert_eq!(lines(dir.path()).len(), stopped_after);

    // Once it answers again, --resume --retry-errors runs the failed and the unstarted pairs.
    let fine = Arc::new(FakeSolver::default());
    let summary = Runner::new(
        RunConfig {
            resume: true,
            retry_errors: true,
            ..one_at_a_time
        },
        Grader::new(),
    )
    .run(
        &problems,
        &[Mode::deepsolve(fine.clone())],
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!((summary.ran, summary.skipped), (10, 2));
    assert_eq!(summary.endpoint_down, None);
    assert_eq!(summary.tallies[0].correct, 12);
}

#[tokio::test]
async fn failures_between_answers_do_not_stop_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let problems = numbered(12);
    let flaky = Arc::new(FakeSolver {
        fail: (problems.iter().enumerate())
            .filter(|(i, _)| i % 4 != 3)
            .map(|(_, p)| p.id.clone())
            .collect(),
        ..FakeSolver::default()
    });
    let summary = Runner::new(
        RunConfig {
            concurrency: 1,
            ..config(dir.path())
        },
        Grader::new(),
    )
    .run(
        &problems,
        &[Mode::deepsolve(flaky.clone())],
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(summary.ran, 12);
    assert_eq!(summary.endpoint_down, None);
    assert_eq!(summary.tallies[0].errors, 9);
}

#[tokio::test]
async fn modes_must_be_named_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(FakeSolver::default());
    let modes = [Mode::deepsolve(s.clone()), Mode::deepsolve(s.clone())];
    let err = Runner::new(config(dir.path()), Grader::new())
        .run(&numbered(1), &modes, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(err, RunError::DuplicateMode(ref m) if m == DEEPSOLVE),
        "{err}"
    );
    assert!(Mode::new("Plain Mode", s.clone()).is_err());
    assert_eq!(Mode::new("plain-t0", s).unwrap().name(), "plain-t0");
}

fn outcome(stop: deepsolve_core::StopReason) -> deepsolve_core::TurnOutcome {
    deepsolve_core::TurnOutcome {
        turn_id: "t-1".into(),
        answer: Some("**42**\n\nBecause 6 × 7 = 42.".into()),
        answer_source: None,
        stop_reason: stop,
        solve: Default::default(),
        usage: deepsolve_core::Usage {
            prompt_tokens: 900,
            completion_tokens: 100,
            estimated: false,
            cached_tokens: None,
        },
        rounds: 4,
        elapsed_ms: 1200,
        artifacts: Vec::new(),
        sources: Vec::new(),
        error: Some("server error 502".into()),
    }
}

#[test]
fn a_turns_outcome_becomes_an_attempt_an_error_or_a_cancellation() {
    use deepsolve_core::StopReason;
    use deepsolve_eval::{AnswerStyle, Attempt, SolveError};
    let a = Attempt::from_turn(&outcome(StopReason::AnsweredWithOpenSteps)).unwrap();
    assert_eq!(
        (a.rounds, a.usage.prompt_tokens, a.style),
        (4, 900, AnswerStyle::ResultFirst)
    );
    assert_eq!(
        (a.stop.as_str(), a.turn_id.as_deref()),
        ("answered_with_open_steps", Some("t-1"))
    );
    assert!(a.output.starts_with("**42**"));
    let spine = a.spine.expect("a turn's spine");
    assert_eq!(
        (spine.steps, spine.finished, spine.answer_source),
        (0, 0, None)
    );
    let mut planned = outcome(StopReason::Answered);
    planned.answer_source = Some(deepsolve_core::AnswerSource::Model);
    planned.solve.steps = ["S1", "S2"]
        .map(|id| deepsolve_core::solve::SolveStep {
            id: id.into(),
            goal: format!("goal of {id}"),
            done: id == "S1",
            summary: (id == "S1").then(|| "done".to_string()),
        })
        .to_vec();
    let spine = Attempt::from_turn(&planned)
        .unwrap()
        .spine
        .expect("a spine");
    assert_eq!((spine.steps, spine.finished), (2, 1));
    assert!(!spine.engaged(), "a step was left open");
    let e = Attempt::from_turn(&outcome(StopReason::ModelError)).unwrap_err();
    assert!(
        matches!(e, SolveError::Failed { ref kind, ref message } if kind == "model_error" && message.contains("502")),
        "{e:?}"
    );
    assert_eq!(
        Attempt::from_turn(&outcome(StopReason::Cancelled)).unwrap_err(),
        SolveError::Cancelled
    );
}

#[tokio::test]
async fn an_answer_assembled_from_step_summaries_is_graded_by_its_last_result_not_its_header() {
    use deepsolve_core::{AnswerSource, StopReason};
    use deepsolve_eval::{AnswerStyle, Attempt, Grader};
    let mut assembled = outcome(StopReason::EmptyRounds);
    assembled.answer = Some(
        "**Answer assembled from the step summaries** (the model gave no final answer):\n\
         - **S1** Count the eggs left: 16 - 3 - 4 = 9 eggs.\n\
         - **S2** Price them: 9 × $2 = $18."
            .into(),
    );
    assembled.answer_source = Some(AnswerSource::StepSummaries);
    let a = Attempt::from_turn(&assembled).unwrap();
    assert_eq!(a.style, AnswerStyle::Reasoned);
    let graded = Grader::new().grade("18", &a.output, a.style).await;
    assert!(graded.verdict.correct, "{graded:?}");
}
