//! `deepsolve eval` through the real binary against the mock model: both modes, every set
//! layout, a bad set, Ctrl-C then `--resume`, `eval report`, a failing endpoint, and a
//! deepsolve-mode turn opened with `deepsolve show`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use deepsolve_testkit::{FnPolicy, MockServer, PolicyRequest, Reply, WellBehaved};
use serde_json::Value;

use crate::support::Isolated;

/// The mock as both modes see it: a plain request (no tools) gets a boxed 42, a deepsolve
/// turn a well-behaved one-step solve.
fn mock() -> MockServer {
    let solver = WellBehaved::new(1);
    MockServer::policy(FnPolicy(move |req: &PolicyRequest| {
        if req.has_native_tools() {
            deepsolve_testkit::Policy::reply(&solver, req)
        } else {
            Reply::text("6 times 7 is 42, so the answer is \\boxed{42}.")
        }
    }))
}

/// A plain-layout set of `n` problems whose answer is 42.
fn write_set(dir: &Path, name: &str, n: usize) -> PathBuf {
    let lines: Vec<String> = (1..=n)
        .map(|i| {
            serde_json::json!({"id": format!("p{i}"), "question": format!("Problem {i}: what is 6 times 7?"), "answer": "42"})
                .to_string()
        })
        .collect();
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn eval(home: &Isolated, server: &MockServer) -> assert_cmd::Command {
    let mut cmd = home.command();
    cmd.args(["eval", "--base-url", &server.url(), "--model", "mock-model"]);
    cmd
}

fn results(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn of_mode<'a>(records: &'a [Value], mode: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["mode"] == mode).collect()
}

#[test]
fn both_modes_run_every_problem_report_and_open_in_show() {
    let home = Isolated::new();
    let server = mock();
    let set = write_set(home.path(), "small.jsonl", 3);
    let out = home.path().join("run");
    let done = eval(&home, &server)
        .arg(&set)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    let stdout = String::from_utf8_lossy(&done.stdout);
    assert!(done.status.success(), "stderr: {stderr}");

    let records = results(&out);
    assert_eq!(records.len(), 6, "{records:#?}");
    let plain = of_mode(&records, "plain");
    assert_eq!(plain.len(), 3);
    assert!(plain.iter().all(|r| r["correct"] == true), "{plain:#?}");
    let deep = of_mode(&records, "deepsolve");
    assert_eq!(deep.len(), 3);
    assert!(deep.iter().all(|r| r["error"].is_null()), "{deep:#?}");
    // The Markdown table on stdout, the report's files named on stderr.
    assert!(stdout.contains("| plain"), "stdout: {stdout}");
    assert!(stdout.contains("| deepsolve"), "stdout: {stdout}");
    assert!(stderr.contains("report.md"), "stderr: {stderr}");
    assert!(out.join("report/report.json").exists());

    // `eval report DIR` prints the same table again.
    let again = home
        .command()
        .args(["eval", "report"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(again.status.success());
    let table = String::from_utf8_lossy(&again.stdout);
    assert!(
        table.contains("| plain") && table.contains("| deepsolve"),
        "{table}"
    );

    // Every deepsolve problem is a stored turn: `deepsolve show` opens it.
    let turn = deep[0]["turn_id"].as_str().expect("a turn id");
    let shown = home.command().args(["show", turn]).output().unwrap();
    assert!(
        shown.status.success(),
        "show: {}",
        String::from_utf8_lossy(&shown.stderr)
    );
    assert!(!shown.stdout.is_empty());
}

#[test]
fn a_set_of_each_layout_is_read_and_shipped_sets_go_by_name() {
    let home = Isolated::new();
    let server = mock();
    let layouts = [
        (
            "gsm8k.jsonl",
            r#"{"question": "What is 6 times 7?", "answer": "6*7=42\n#### 42"}"#,
        ),
        (
            "math.jsonl",
            r#"{"problem": "Compute $6 \\cdot 7$.", "solution": "It is $\\boxed{42}$.", "level": "Level 1", "type": "Prealgebra"}"#,
        ),
        (
            "qwen.jsonl",
            r#"{"idx": 0, "question": "What is 6 times 7?", "gt": "42"}"#,
        ),
        (
            "plain.jsonl",
            r#"{"id": "a", "question": "What is 6 times 7?", "answer": "42"}"#,
        ),
    ];
    let mut cmd = eval(&home, &server);
    for (name, line) in layouts {
        std::fs::write(home.path().join(name), format!("{line}\n")).unwrap();
        cmd.arg(home.path().join(name));
    }
    // A shipped set by name, beside the files.
    cmd.arg("zh-arith");
    let out = home.path().join("layouts");
    let done = cmd
        .args(["--mode", "plain", "--limit", "2", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        done.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&done.stderr)
    );
    for (name, _) in layouts {
        let stem = name.trim_end_matches(".jsonl");
        let records = results(&out.join(stem));
        assert_eq!(records.len(), 1, "{stem}");
        assert_eq!(records[0]["correct"], true, "{stem}: {records:#?}");
    }
    assert_eq!(results(&out.join("zh-arith")).len(), 2);
}

#[test]
fn a_set_that_fits_no_layout_is_named_and_exits_2() {
    let home = Isolated::new();
    let server = mock();
    let bad = home.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"prompt\": \"hi\", \"label_text\": \"x\"}\n").unwrap();
    let done = eval(&home, &server).arg(&bad).output().unwrap();
    assert_eq!(done.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(
        stderr.contains("bad.jsonl:1: the record fits no known layout"),
        "{stderr}"
    );
    assert!(
        stderr.contains("keys seen: [label_text, prompt]"),
        "{stderr}"
    );

    let missing = eval(&home, &server).arg("no-such-set").output().unwrap();
    assert_eq!(missing.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("no shipped set of that name"), "{stderr}");
    assert_eq!(server.call_count(), 0, "nothing is asked of the model");
}

#[test]
fn a_failing_endpoint_is_recorded_per_problem_and_the_run_completes() {
    let home = Isolated::new();
    // Plain requests fail (500, retried then given up); deepsolve turns answer.
    let solver = WellBehaved::new(1);
    let server = MockServer::policy(FnPolicy(move |req: &PolicyRequest| {
        if req.has_native_tools() {
            deepsolve_testkit::Policy::reply(&solver, req)
        } else {
            Reply::status(500, "the plain endpoint is down")
        }
    }));
    let set = write_set(home.path(), "two.jsonl", 2);
    let out = home.path().join("run");
    let done = eval(&home, &server)
        .arg(&set)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "stderr: {stderr}");
    let records = results(&out);
    assert_eq!(records.len(), 4);
    for r in of_mode(&records, "plain") {
        assert_eq!(r["error"]["kind"], "server", "{r:#}");
        assert_eq!(r["correct"], false);
    }
    assert!(
        of_mode(&records, "deepsolve")
            .iter()
            .all(|r| r["error"].is_null())
    );
    assert!(stderr.contains("failed at the endpoint"), "{stderr}");
}

#[test]
fn an_endpoint_down_problem_after_problem_stops_the_run_with_the_command_that_continues_it() {
    let home = Isolated::new();
    let server = MockServer::policy(FnPolicy(|_: &PolicyRequest| {
        Reply::status(500, "the endpoint is down")
    }));
    let set = write_set(home.path(), "eight.jsonl", 8);
    let out = home.path().join("run");
    let stopped = eval(&home, &server)
        .arg(&set)
        .args(["--mode", "plain", "--concurrency", "1", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&stopped.stderr);
    assert_eq!(stopped.status.code(), Some(4), "stderr: {stderr}");
    assert_eq!(results(&out).len(), 5, "no problem after the fifth");
    assert!(
        stderr.contains("the last 5 problems all failed at the endpoint"),
        "{stderr}"
    );
    assert!(stderr.contains("the endpoint is down"), "{stderr}");
    let command = stderr
        .lines()
        .find(|l| l.trim_start().starts_with("deepsolve "))
        .expect("the command that continues the run");
    assert!(command.contains("--resume"), "{command}");
    assert!(command.contains("--retry-errors"), "{command}");
}

#[test]
fn ctrl_c_leaves_a_resumable_run_and_resume_redoes_nothing_finished() {
    let home = Isolated::new();
    // Slow plain answers, so the run is still going when it is interrupted.
    let server = MockServer::policy(FnPolicy(|_: &PolicyRequest| {
        Reply::delayed(
            Duration::from_millis(400),
            Reply::text("so the answer is \\boxed{42}"),
        )
    }));
    let set = write_set(home.path(), "six.jsonl", 6);
    let out = home.path().join("run");
    let child = home
        .std_command()
        .args(["eval", "--base-url", &server.url(), "--model", "mock-model"])
        .arg(&set)
        .args(["--mode", "plain", "--concurrency", "1", "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while results(&out).len() < 2 {
        assert!(Instant::now() < deadline, "no results after a minute");
        std::thread::sleep(Duration::from_millis(50));
    }
    let interrupted = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let ended = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&ended.stderr);
    assert_eq!(ended.status.code(), Some(130), "stderr: {stderr}");
    assert!(stderr.contains("--resume"), "stderr: {stderr}");
    let before = results(&out);
    assert!(before.len() < 6, "the run was cut short: {}", before.len());

    let resumed = eval(&home, &server)
        .arg(&set)
        .args(["--mode", "plain", "--resume", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        resumed.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let after = results(&out);
    let mut ids: Vec<&str> = after.iter().map(|r| r["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    // Each problem once: the finished ones were not run again.
    assert_eq!(ids, ["p1", "p2", "p3", "p4", "p5", "p6"]);
    assert_eq!(&after[..before.len()], &before[..]);
    assert!(after.iter().all(|r| r["correct"] == true));
}

#[test]
fn a_killed_run_resumes_without_running_a_finished_problem_again() {
    let home = Isolated::new();
    let server = MockServer::policy(FnPolicy(|_: &PolicyRequest| {
        Reply::delayed(
            Duration::from_millis(400),
            Reply::text("so the answer is \\boxed{42}"),
        )
    }));
    let set = write_set(home.path(), "six.jsonl", 6);
    let out = home.path().join("run");
    let mut child = home
        .std_command()
        .args(["eval", "--base-url", &server.url(), "--model", "mock-model"])
        .arg(&set)
        .args(["--mode", "plain", "--concurrency", "1", "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while results(&out).len() < 2 {
        assert!(Instant::now() < deadline, "no results after a minute");
        std::thread::sleep(Duration::from_millis(50));
    }
    // SIGKILL: no handler runs, nothing is tidied up.
    child.kill().unwrap();
    child.wait().unwrap();
    // A line torn by the kill is not a result (the next open cuts it off).
    let before: Vec<Value> = std::fs::read_to_string(out.join("results.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        (2..6).contains(&before.len()),
        "killed halfway: {}",
        before.len()
    );
    let calls_before = server.call_count();

    let resumed = eval(&home, &server)
        .arg(&set)
        .args(["--mode", "plain", "--resume", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        resumed.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let after = results(&out);
    let mut ids: Vec<&str> = after.iter().map(|r| r["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["p1", "p2", "p3", "p4", "p5", "p6"]);
    assert_eq!(&after[..before.len()], &before[..]);
    // The resume asked the model only for the problems that had no result.
    assert_eq!(server.call_count() - calls_before, 6 - before.len());
}

/// `eval regrade DIR OUT` grades the stored outputs again into a new run: a verdict an
/// older grader got wrong (here written into the record) comes out right, and is listed.
#[test]
fn regrade_grades_stored_outputs_again_into_a_new_run() {
    let home = Isolated::new();
    let server = mock();
    let set = write_set(home.path(), "small.jsonl", 2);
    let run = home.path().join("run");
    let done = eval(&home, &server)
        .arg(&set)
        .args(["--mode", "plain", "--out"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let mut records = results(&run);
    records[0]["correct"] = Value::Bool(false);
    records[0]["answer"] = Value::String("an older reading".into());
    let lines: Vec<String> = records.iter().map(Value::to_string).collect();
    std::fs::write(run.join("results.jsonl"), lines.join("\n") + "\n").unwrap();

    let out = home.path().join("regraded");
    let regraded = home
        .command()
        .args(["eval", "regrade"])
        .arg(&run)
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&regraded.stdout);
    let stderr = String::from_utf8_lossy(&regraded.stderr);
    assert!(regraded.status.success(), "{stderr}");
    // Problems run two at a time: the first record is whichever finished first.
    let first = records[0]["id"].as_str().unwrap_or_default();
    assert_eq!(
        stdout.trim(),
        format!(r#"{first} plain: wrong → right ("an older reading" → "42")"#),
        "{stderr}"
    );
    assert!(stderr.contains("graded 2 outputs again"), "{stderr}");
    let again = results(&out);
    assert_eq!(again.len(), 2);
    assert!(again.iter().all(|r| r["correct"] == true), "{again:#?}");
    assert!(out.join("run.json").exists());
    // The source run is left as it was.
    assert_eq!(results(&run)[0]["correct"], false);

    // The two gradings compare like two runs.
    let compared = home
        .command()
        .args(["eval", "report"])
        .arg(&run)
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        compared.status.success(),
        "{}",
        String::from_utf8_lossy(&compared.stderr)
    );

    // Never over a run's results, never from a directory without any: exit 2, named.
    for (from, to, says) in [
        (&run, &out, "already holds results"),
        (
            &home.path().join("nothing"),
            &home.path().join("x"),
            "holds no results.jsonl",
        ),
    ] {
        let refused = home
            .command()
            .args(["eval", "regrade"])
            .arg(from)
            .arg(to)
            .output()
            .unwrap();
        assert_eq!(refused.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains(says), "{stderr}");
    }
}
