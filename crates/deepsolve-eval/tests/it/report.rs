//! Reports: the numbers, the paired test, groups, and the files (Markdown, JSON, CSV, SVG,
//! PNG) for one run and for two runs side by side.

use std::path::Path;
use std::sync::Arc;

use deepsolve_core::{AnswerSource, Language, Text, Texts};
use deepsolve_eval::record::{RESULTS_FILE, RecordError, ResultRecord, ResultsLog};
use deepsolve_eval::report::{build, compare, report};
use deepsolve_eval::{Grader, Judged, Mode, RunConfig, Runner, SpineRecord};
use tokio_util::sync::CancellationToken;

use crate::common::{FakeSolver, numbered};

fn record(id: &str, mode: &str, correct: bool, level: &str) -> ResultRecord {
    ResultRecord {
        id: id.into(),
        mode: mode.into(),
        expected: "1".into(),
        answer: Some(if correct { "1" } else { "2" }.into()),
        extraction: None,
        correct,
        judged: Judged::Numeric,
        note: None,
        rounds: if mode == "plain" { 1 } else { 4 },
        prompt_tokens: 100,
        completion_tokens: 50,
        cost: None,
        wall_ms: 1000,
        stop: Some("stop".into()),
        error: None,
        level: Some(level.into()),
        subject: None,
        language: Language::En,
        turn_id: None,
        spine: None,
        output: None,
    }
}

/// 20 problems: plain right on the first 10, deepsolve on the first 16 (so 6 only deepsolve).
fn records() -> Vec<ResultRecord> {
    let mut out = Vec::new();
    for i in 0..20 {
        let level = if i % 2 == 0 { "1" } else { "2" };
        out.push(record(&format!("p{i}"), "plain", i < 10, level));
        out.push(record(&format!("p{i}"), "deepsolve", i < 16, level));
    }
    out
}

#[test]
fn the_report_has_accuracy_intervals_and_the_paired_test() {
    let mut rs = records();
    rs[1].error = Some(RecordError {
        kind: "server".into(),
        message: "502".into(),
    });
    rs[1].correct = false;
    rs[1].judged = Judged::Error;
    let r = build("t", &rs);
    assert_eq!(r.problems, 20);
    let plain = &r.modes[0];
    assert_eq!(
        (plain.mode.as_str(), plain.correct, plain.problems),
        ("plain", 10, 20)
    );
    assert!((plain.accuracy - 0.5).abs() < 1e-12);
    assert!((plain.ci_low - 0.2993).abs() < 1e-3 && (plain.ci_high - 0.7007).abs() < 1e-3);
    let deep = &r.modes[1];
    assert_eq!((deep.correct, deep.errors), (15, 1));
    assert_eq!(deep.stops.get("error: server"), Some(&1));
    assert_eq!(deep.mean_rounds, 0.95 * 4.0 + 0.05 * 4.0);
    let p = &r.paired[0];
    assert_eq!((p.a.as_str(), p.b.as_str()), ("plain", "deepsolve"));
    assert_eq!(
        (p.both_right, p.only_a.len(), p.only_b.len(), p.both_wrong),
        (9, 1, 6, 4)
    );
    assert_eq!(p.only_a, vec!["p0"]);
    // exact McNemar for 1 vs 6: 2 * (1 + 7) / 128
    assert!((p.p_value - 16.0 / 128.0).abs() < 1e-12);
    assert_eq!(r.by_level.len(), 4);
    let l1 = r
        .by_level
        .iter()
        .find(|g| g.group == "1" && g.mode == "plain")
        .unwrap();
    assert_eq!((l1.correct, l1.problems), (5, 10));
    assert!(r.by_subject.is_empty());
}

async fn run_into(dir: &Path, wrong: &[&str]) {
    let solver = Arc::new(FakeSolver {
        wrong: wrong.iter().map(|s| s.to_string()).collect(),
        ..FakeSolver::default()
    });
    Runner::new(RunConfig::new(dir), Grader::new())
        .run(
            &numbered(6),
            &[Mode::deepsolve(solver)],
            &CancellationToken::new(),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn a_runs_report_is_written_as_markdown_json_csv_svg_and_png() {
    let dir = tempfile::tempdir().unwrap();
    run_into(dir.path(), &["p2"]).await;
    let (r, files) = report(dir.path()).unwrap();
    assert_eq!(r.modes[0].correct, 5);
    let md = std::fs::read_to_string(&files.markdown).unwrap();
    assert!(md.contains("| deepsolve | 5/6 | 83.3 %"), "{md}");
    assert!(
        md.contains("- deepsolve: 5/6 (83.3 %), 0 of them answered when asked once more"),
        "{md}"
    );
    assert!(md.contains("accuracy.png") || md.contains("accuracy.svg"));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&files.json).unwrap()).unwrap();
    assert_eq!(json["modes"][0]["correct"], 5);
    let csv = std::fs::read_to_string(&files.csv).unwrap();
    let header = csv.lines().next().unwrap();
    for col in [
        "id",
        "mode",
        "expected",
        "answer",
        "correct",
        "rounds",
        "prompt_tokens",
        "completion_tokens",
        "wall_ms",
        "stop",
    ] {
        assert!(
            header.split(',').any(|h| h == col),
            "{col} missing from {header}"
        );
    }
    assert_eq!(csv.lines().count(), 7);
    assert!(
        csv.lines()
            .any(|l| l.starts_with("p2,deepsolve,20,1,false,")),
        "{csv}"
    );
    for svg in &files.svgs {
        let text = std::fs::read_to_string(svg).unwrap();
        assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"));
    }
    assert_eq!(files.svgs.len(), 2);
    if cfg!(feature = "png") {
        assert_eq!(files.pngs.len(), 2, "{:?}", files.warnings);
        for png in &files.pngs {
            let bytes = std::fs::read(png).unwrap();
            assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
            assert!(bytes.len() > 2000);
        }
    }
}

#[tokio::test]
async fn two_runs_compare_with_their_modes_told_apart_and_names_escaped() {
    let root = tempfile::tempdir().unwrap();
    let a = root.path().join("base&1");
    let b = root.path().join("new<2>");
    run_into(&a, &["p1", "p2", "p3"]).await;
    run_into(&b, &["p1"]).await;
    let (r, files) = compare(&a, &b).unwrap();
    let names: Vec<&str> = r.modes.iter().map(|m| m.mode.as_str()).collect();
    assert_eq!(names, vec!["base&1/deepsolve", "new<2>/deepsolve"]);
    let p = &r.paired[0];
    assert_eq!((p.only_a.len(), p.only_b.len(), p.both_right), (0, 2, 3));
    assert!(files.dir.starts_with(&a));
    let svg = std::fs::read_to_string(&files.svgs[0]).unwrap();
    assert!(svg.contains("base&amp;1/deepsolve") && svg.contains("new&lt;2&gt;/deepsolve"));
    assert!(!svg.contains("new<2>"));
}

#[test]
fn a_directory_without_results_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = report(dir.path()).unwrap_err();
    assert!(err.to_string().contains(RESULTS_FILE), "{err}");
    let mut log = ResultsLog::open(&dir.path().join(RESULTS_FILE)).unwrap();
    let err = report(dir.path()).unwrap_err();
    assert!(err.to_string().contains("no results"), "{err}");
    log.append(&record("p1", "plain", true, "1")).unwrap();
    assert!(report(dir.path()).is_ok());
}

#[test]
fn a_turn_engaged_the_spine_with_a_plan_every_step_finished_and_its_own_answer() {
    let spine = |steps, finished, source| SpineRecord {
        steps,
        finished,
        answer_source: source,
    };
    assert!(spine(3, 3, Some(AnswerSource::Model)).engaged());
    assert!(spine(3, 3, Some(AnswerSource::Forced)).engaged());
    assert!(!spine(3, 3, Some(AnswerSource::StepSummaries)).engaged());
    assert!(!spine(3, 2, Some(AnswerSource::Model)).engaged());
    assert!(!spine(0, 0, Some(AnswerSource::Model)).engaged());
    assert!(!spine(3, 3, None).engaged());
    // Plain chat runs no spine: nothing is said about it.
    let r = build("t", &records());
    assert_eq!(r.modes[0].engaged, None);
}

#[test]
fn answers_carrying_engine_text_are_counted_per_mode_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = ResultsLog::open(&dir.path().join(RESULTS_FILE)).unwrap();
    // A copied progress line; a nudge copied whole, in Chinese.
    let nudge = Texts::builtin(Language::Zh)
        .get(Text::NudgeContinue)
        .to_string();
    let outputs = [
        (
            "p1",
            "plain",
            "48 + 24 = 72, so the answer is \\boxed{72}.".to_string(),
        ),
        (
            "p1",
            "deepsolve",
            "The result is 72.\n\n48 clips in April, 24 in May.".into(),
        ),
        ("p2", "plain", "So she pays \\boxed{6}.".into()),
        (
            "p2",
            "deepsolve",
            "[deepsolve:progress] round 5 of 13\nThe result is 6.".into(),
        ),
        ("p3", "plain", "The answer is 9.".into()),
        ("p3", "deepsolve", format!("结果是 9。\n\n{nudge}")),
        ("p4", "plain", "答案是 5。".into()),
        (
            "p4",
            "deepsolve",
            "结果是 5。\n\n先算出每天的数量，再乘以天数。".into(),
        ),
    ];
    for (id, mode, output) in outputs {
        let mut r = record(id, mode, true, "1");
        r.output = Some(output);
        log.append(&r).unwrap();
    }
    let (r, files) = report(dir.path()).unwrap();
    assert!(r.modes[0].engine_text.is_empty(), "{:?}", r.modes[0]);
    assert_eq!(r.modes[1].engine_text, ["p2", "p3"], "{:?}", r.modes[1]);
    let md = std::fs::read_to_string(&files.markdown).unwrap();
    assert!(md.contains("- plain: 0 of 4\n"), "{md}");
    assert!(md.contains("- deepsolve: 2 of 4 (p2, p3)\n"), "{md}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&files.json).unwrap()).unwrap();
    assert_eq!(
        json["modes"][1]["engine_text"],
        serde_json::json!(["p2", "p3"])
    );
}
