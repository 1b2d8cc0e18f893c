//! The real `deepsolve` binary against the testkit's mock OpenAI-compatible server: every
//! scripted policy ends with the stop reason it is written for, `--json` events arrive in order, and no request the
//! binary sent breaks an invariant.

use std::collections::HashSet;

use deepsolve_testkit::*;
use serde_json::Value;

use crate::support::Isolated as Env;

struct Solved {
    code: i32,
    events: Vec<Value>,
    stderr: String,
}

impl Solved {
    fn of_type(&self, t: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["type"] == t).collect()
    }

    fn finished(&self) -> &Value {
        self.events.last().expect("events")
    }

    fn stop_reason(&self) -> &str {
        self.finished()["stop_reason"].as_str().unwrap_or_default()
    }

    fn results_containing(&self, text: &str) -> usize {
        self.of_type("tool_result")
            .iter()
            .filter(|r| r["content"].as_str().unwrap_or_default().contains(text))
            .count()
    }

    fn answer(&self) -> String {
        self.of_type("answer")
            .first()
            .and_then(|a| a["text"].as_str())
            .unwrap_or_default()
            .to_string()
    }
}

fn solve_json(server: &MockServer, extra: &[&str]) -> Solved {
    let env = Env::new();
    let mut cmd = env.solve(server);
    cmd.arg("--json");
    cmd.args(extra);
    cmd.arg("Solve x^2 - 5x + 6 = 0.");
    let out = cmd.output().expect("run deepsolve");
    let stdout = String::from_utf8(out.stdout).expect("utf-8 stdout");
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {l}"))
        })
        .collect();
    let solved = Solved {
        code: out.status.code().unwrap_or(-1),
        events,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert_event_stream(&solved);
    server.assert_clean();
    solved
}

/// The stream's own invariants: gapless seq, one turn id, started first, finished last, and
/// every tool call answered by exactly one result.
fn assert_event_stream(s: &Solved) {
    assert!(!s.events.is_empty(), "no events; stderr: {}", s.stderr);
    for (i, e) in s.events.iter().enumerate() {
        assert_eq!(e["seq"], i as u64, "seq gap at {i}");
        assert_eq!(e["turn_id"], s.events[0]["turn_id"]);
    }
    assert_eq!(s.events[0]["type"], "turn_started");
    assert_eq!(
        s.finished()["type"],
        "turn_finished",
        "stderr: {}",
        s.stderr
    );
    let calls: Vec<&str> = s
        .of_type("tool_call")
        .iter()
        .map(|c| c["call_id"].as_str().unwrap())
        .collect();
    let results: Vec<&str> = s
        .of_type("tool_result")
        .iter()
        .map(|c| c["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(calls.len(), results.len(), "one result per call");
    assert_eq!(
        calls.iter().collect::<HashSet<_>>(),
        results.iter().collect::<HashSet<_>>()
    );
}

fn answered(s: &Solved) {
    assert_eq!(s.stop_reason(), "answered", "stderr: {}", s.stderr);
    assert_eq!(s.code, 0);
    assert!(!s.answer().is_empty());
}

#[test]
fn well_behaved_solver_is_answered_with_every_step_done() {
    let server = MockServer::policy(WellBehaved::new(3));
    let s = solve_json(&server, &["--tool", "reason"]);
    answered(&s);
    assert_eq!(s.of_type("step_finished").len(), 3);
    assert_eq!(s.of_type("context_folded").len(), 3);
    let last_plan = s.of_type("plan").last().cloned().unwrap().clone();
    assert!(
        last_plan["steps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|st| st["status"] == "done")
    );
    // Each step's work: a reason call whose sub-call reached the model without tools.
    assert_eq!(
        s.of_type("tool_call")
            .iter()
            .filter(|c| c["name"] == "reason")
            .count(),
        3
    );
    assert!(server.policy_requests().iter().any(|r| r.is_subcall()));
    // The answer came after the last step and names every step's summary.
    for step in s.of_type("step_finished") {
        let summary = step["summary"].as_str().unwrap();
        assert!(
            s.answer().contains(summary.split(" → ").next().unwrap()),
            "{summary}"
        );
    }
}

#[test]
fn plan_skipper_is_refused_then_answers() {
    let server = MockServer::policy(PlanSkipper {
        then: WellBehaved::new(2),
    });
    let s = solve_json(&server, &["--tool", "reason"]);
    answered(&s);
    assert_eq!(s.results_containing("Call solve_plan first"), 1);
}

#[test]
fn out_of_order_finisher_is_told_not_to_skip() {
    let server = MockServer::policy(OutOfOrderFinisher::default());
    let s = solve_json(&server, &["--tool", "reason"]);
    answered(&s);
    assert!(s.results_containing("Do not skip steps") >= 1);
}

#[test]
fn ten_parallel_calls_each_get_one_result() {
    let server = MockServer::policy(ParallelFlood::new(10));
    let s = solve_json(&server, &["--tool", "reason"]);
    answered(&s);
    assert_eq!(
        s.results_containing("skipped: over the per-round limit of 8"),
        2
    );
}

#[test]
fn malformed_arguments_get_a_corrective_result() {
    let server = MockServer::policy(MalformedArgs {
        then: WellBehaved::new(2),
    });
    let s = solve_json(&server, &["--tool", "reason"]);
    answered(&s);
    let refused = s
        .of_type("tool_result")
        .into_iter()
        .filter(|r| r["ok"] == false)
        .count();
    assert!(refused >= 1, "the malformed call was refused");
}

#[test]
fn unknown_tool_is_not_run() {
    let server = MockServer::policy(UnknownTool::new(WellBehaved::new(2)));
    let s = solve_json(&server, &["--tool", "reason"]);
    answered(&s);
    assert_eq!(
        s.results_containing("tool web_search is not available; available:"),
        1
    );
}

#[test]
fn identical_call_loop_ends_in_repetition() {
    let server = MockServer::policy(IdenticalLoop {
        then: WellBehaved::new(2),
    });
    let s = solve_json(&server, &["--tool", "reason"]);
    assert_eq!(s.stop_reason(), "repetition");
    assert_eq!(s.code, 0, "a forced answer is still an answer");
    assert!(s.results_containing("change strategy") >= 1);
}

#[test]
fn never_ending_tool_calls_end_at_max_rounds() {
    let server = MockServer::policy(NeverEnding::new(WellBehaved::new(2)));
    let s = solve_json(
        &server,
        &[
            "--tool",
            "reason",
            "--set",
            "solve.max_rounds=4",
            "--set",
            "solve.settlement_rounds=1",
        ],
    );
    assert_eq!(s.stop_reason(), "max_rounds");
    assert_eq!(
        s.finished()["rounds"],
        6,
        "4 rounds + 1 settlement + the forced answer"
    );
    let last = server
        .policy_requests()
        .into_iter()
        .rfind(|r| !r.is_subcall())
        .unwrap();
    assert!(last.is_forced_answer());
    assert!(!s.answer().is_empty());
}

#[test]
fn a_reasoning_only_first_round_still_ends_answered() {
    let server = MockServer::policy(ReasoningOnly::new(1, WellBehaved::new(2)));
    let s = solve_json(&server, &["--tool", "reason"]);
    answered(&s);
    assert!(!s.of_type("reasoning_delta").is_empty());
    let first_two: Vec<u64> = server
        .policy_requests()
        .iter()
        .take(2)
        .map(|r| r.max_tokens.unwrap_or(0))
        .collect();
    assert_eq!(first_two, [8192, 16384], "one retry with twice the budget");
}

#[test]
fn a_model_that_never_answers_ends_in_empty_rounds() {
    let server = MockServer::policy(ReasoningOnly::new(usize::MAX, WellBehaved::new(2)));
    let s = solve_json(&server, &[]);
    assert_eq!(s.stop_reason(), "empty_rounds");
}

#[test]
fn rate_limit_is_retried_after_retry_after() {
    let server =
        MockServer::policy(FlakyStatus::new(429, 1, WellBehaved::new(1)).retry_after(Some(1)));
    let s = solve_json(&server, &[]);
    answered(&s);
    let retry = s.of_type("retrying");
    assert_eq!(retry.len(), 1);
    assert_eq!(retry[0]["delay_ms"], 1000);
}

#[test]
fn server_error_is_retried() {
    let server = MockServer::policy(FlakyStatus::new(500, 1, WellBehaved::new(1)));
    let s = solve_json(&server, &[]);
    answered(&s);
    assert_eq!(s.of_type("retrying").len(), 1);
}

#[test]
fn connection_cut_before_output_is_retried() {
    let server = MockServer::policy(CutBeforeOutput::new(1, WellBehaved::new(1)));
    let s = solve_json(&server, &[]);
    answered(&s);
    assert_eq!(s.of_type("retrying").len(), 1);
}

#[test]
fn ids_and_names_repeated_in_every_chunk_are_not_concatenated() {
    let server = MockServer::policy(RepeatedIdName {
        inner: WellBehaved::new(2),
    });
    let s = solve_json(&server, &["--tool", "reason"]);
    answered(&s);
    for call in s.of_type("tool_call") {
        let name = call["name"].as_str().unwrap();
        assert!(
            ["solve_plan", "solve_finish_step", "reason"].contains(&name),
            "{name}"
        );
    }
}

#[test]
fn deltas_without_index_still_make_whole_calls() {
    let server = MockServer::policy(NoIndexDeltas {
        inner: WellBehaved::new(2),
    });
    let s = solve_json(&server, &["--tool", "reason"]);
    answered(&s);
    assert_eq!(s.of_type("step_finished").len(), 2);
}

#[test]
fn answer_with_open_steps_is_nudged_once_then_accepted() {
    let server = MockServer::policy(AnswerWithOpenSteps::default());
    let s = solve_json(&server, &[]);
    assert_eq!(s.stop_reason(), "answered_with_open_steps");
    assert_eq!(s.code, 0);
    let nudged = server.policy_requests().iter().any(|r| {
        r.messages
            .iter()
            .any(|m| m.content.contains("Steps are still open"))
    });
    assert!(nudged);
}

#[test]
fn replans_past_the_budget_are_refused() {
    let server = MockServer::policy(ReplanPastBudget {
        then: WellBehaved::new(2),
    });
    let s = solve_json(&server, &[]);
    assert!(
        s.stop_reason().starts_with("answered"),
        "{}",
        s.stop_reason()
    );
    assert_eq!(s.of_type("replanned").len(), 2);
    assert_eq!(s.results_containing("budget_exhausted"), 1);
}

#[test]
fn a_second_solve_plan_is_refused() {
    let server = MockServer::policy(SecondPlan {
        then: WellBehaved::new(2),
    });
    let s = solve_json(&server, &[]);
    answered(&s);
    assert_eq!(
        s.results_containing("solve_plan can be called only once"),
        1
    );
}

#[test]
fn auth_failure_exits_3_with_one_line_and_a_hint() {
    let server = MockServer::sequence(vec![Reply::status(401, "invalid api key")]);
    let s = solve_json(&server, &[]);
    assert_eq!(s.stop_reason(), "model_error");
    assert_eq!(s.code, 3, "auth failures exit 3");
    let line = s.stderr.trim();
    assert!(
        line.starts_with("deepsolve: model error: authentication failed"),
        "{line}"
    );
    // The error once, then what to check.
    assert_eq!(line.lines().count(), 2, "{line}");
    assert!(
        line.lines()
            .nth(1)
            .unwrap()
            .contains("hint: check the API key"),
        "{line}"
    );
}

// ---------------------------------------------------------------------------------------------
// The human view and the other commands

#[test]
fn progress_shows_the_checklist_tool_lines_and_footer_on_stderr() {
    let server = MockServer::policy(WellBehaved::new(2));
    let env = Env::new();
    let out = env
        .command()
        .args([
            "solve",
            "--base-url",
            &server.url(),
            "--model",
            "mock-model",
            "--tool",
            "reason",
        ])
        .arg("Solve x^2 - 5x + 6 = 0.")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("Plan:"), "{stderr}");
    assert!(stderr.contains("○ S1"));
    assert!(stderr.contains("✓ S1"));
    assert!(stderr.contains("✓ S2"));
    assert!(stderr.contains("↳ reason"));
    assert!(stderr.contains("— answered · "), "{stderr}");
    assert!(stderr.contains(" tokens · "));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("**Answer:**"));
    server.assert_clean();
}

#[test]
fn no_model_configured_names_the_three_ways() {
    let env = Env::new();
    let out = env.command().args(["solve", "x"]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    for way in [
        "--model",
        "DEEPSOLVE_MODEL",
        "deepsolve settings set llm.model",
    ] {
        assert!(stderr.contains(way), "{stderr}");
    }
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_settings_are_named() {
    let env = Env::new();
    std::fs::write(&env.config, "solve:\n  max_round: 3\n").unwrap();
    let out = env
        .command()
        .args(["solve", "--model", "m", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("solve.max_round"), "{stderr}");

    std::fs::write(&env.config, "").unwrap();
    let out = env
        .command()
        .args([
            "solve",
            "--model",
            "m",
            "--set",
            "solve.max_rounds=500",
            "--base-url",
            "ftp://x",
            "x",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("max_rounds = 500 is outside 1..=50; using 50"),
        "{stderr}"
    );
    assert!(stderr.contains("ftp://x"), "{stderr}");
}

#[test]
fn settings_set_get_and_path() {
    let env = Env::new();
    let out = env.command().args(["settings", "path"]).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        env.config.display().to_string()
    );

    let out = env
        .command()
        .args(["settings", "set", "solve.max_rounds=99"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("using 50"));
    let out = env
        .command()
        .args(["settings", "get", "solve.max_rounds"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "50");

    let out = env
        .command()
        .args(["settings", "set", "llm.api_key=sk-secret"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let out = env
        .command()
        .env("DEEPSOLVE_API_KEY", "sk-very-secret")
        .args(["settings", "get"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        !shown.contains("sk-very-secret") && shown.contains("***"),
        "{shown}"
    );
}

#[test]
fn doctor_checks_the_endpoint_model_and_tool_calling() {
    let server = MockServer::policy(FnPolicy(|req: &PolicyRequest| {
        let tool = req.tools.first().cloned().unwrap_or_default();
        Reply::calls(vec![(tool, serde_json::json!({}))])
    }));
    let env = Env::new();
    let out = env.doctor(&server.url());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("✓ endpoint reachable"));
    assert!(stdout.contains("✓ model 'mock-model' is listed"));
    assert!(stdout.contains("✓ native tool calls"), "{stdout}");
    assert!(stdout.contains("recommended protocol: native"));
    assert!(stdout.contains("reasoning  the main model (models.reason is not set)"));
    assert!(stdout.contains(
        "vision     none (models.vision is not set): geogebra_analysis draws from text only"
    ));
    assert!(stdout.contains("geogebra_analysis (opt-in)"), "{stdout}");
    // The knowledge tools are a turn's own on the command line: no warning, the way to get them.
    for tool in ["rag", "read_source"] {
        assert!(
            stdout.contains(&format!(
                "{tool} (with-material): offered on a turn given --kb or --attach"
            )),
            "{stdout}"
        );
    }
    assert!(!stdout.contains("no store for them"), "{stdout}");

    std::fs::write(
        &env.config,
        "models:\n  vision:\n    model: qwen-vl\n    base_url: http://vision.example/v1\n    api_key_env: VISION_KEY\n",
    )
    .unwrap();
    let out = env.doctor(&server.url());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("vision     qwen-vl at http://vision.example/v1, key from VISION_KEY"),
        "{stdout}"
    );

    let dead = env
        .command()
        .args([
            "doctor",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
        ])
        .output()
        .unwrap();
    assert!(!dead.status.success());
    assert!(String::from_utf8_lossy(&dead.stdout).contains("✗ endpoint not usable"));
}

#[test]
fn doctor_lists_each_web_search_provider_configured_or_not_and_why() {
    let server = MockServer::policy(FnPolicy(|req: &PolicyRequest| {
        let tool = req.tools.first().cloned().unwrap_or_default();
        Reply::calls(vec![(tool, serde_json::json!({}))])
    }));
    let env = Env::new();
    std::fs::write(
        &env.config,
        "tools:\n  web_search:\n    provider: tavily\n    searxng:\n      base_url: https://searx.example\n    serper:\n      api_key_env: MY_SERPER\n",
    )
    .unwrap();
    let mut cmd = env.command();
    for (name, _) in std::env::vars() {
        if name.ends_with("_API_KEY") || name == "MY_SERPER" {
            cmd.env_remove(name);
        }
    }
    let out = cmd
        .env("MY_SERPER", "serper-secret-1")
        .env("BRAVE_API_KEY", "")
        .args([
            "doctor",
            "--base-url",
            &server.url(),
            "--model",
            "mock-model",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    for line in [
        "web search searxng → serper → duckduckgo (opt-in: --tool web_search)",
        "searxng     configured: instance at https://searx.example",
        "brave       not configured: BRAVE_API_KEY is not set",
        "tavily      not configured: TAVILY_API_KEY is not set",
        "serper      configured: key from MY_SERPER",
        "zhipu       not configured: ZHIPU_API_KEY is not set",
        "duckduckgo  configured: keyless HTML search, always the last resort",
        "tools.web_search.provider is tavily, which is not configured (TAVILY_API_KEY is not set)",
    ] {
        assert!(stdout.contains(line), "{line:?} in:\n{stdout}");
    }
    assert!(!stdout.contains("serper-secret-1"), "{stdout}");
}

#[test]
fn ctrl_c_cancels_the_turn_cleanly() {
    use std::io::{BufRead, BufReader};
    use std::time::Duration;

    let server = MockServer::sequence(vec![
        Reply::calls(vec![(
            "solve_plan",
            serde_json::json!({"analysis": "a", "steps": [{"goal": "g"}]}),
        )]),
        Reply::delayed(Duration::from_secs(30), Reply::text("too late")),
    ]);
    let env = Env::new();
    let mut cmd = env.std_command();
    cmd.args([
        "solve",
        "--json",
        "--base-url",
        &server.url(),
        "--model",
        "mock-model",
        "x",
    ])
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let mut events: Vec<Value> = Vec::new();
    // Wait until the second round has started (the model is "thinking" for 30 s).
    for line in lines.by_ref() {
        let event: Value = serde_json::from_str(&line.unwrap()).unwrap();
        let second_round = event["type"] == "round_started" && event["round"] == 2;
        events.push(event);
        if second_round {
            break;
        }
    }
    let started = std::time::Instant::now();
    let killed = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    events.extend(lines.map(|l| serde_json::from_str::<Value>(&l.unwrap()).unwrap()));
    let status = child.wait().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "cancellation is prompt"
    );
    assert_eq!(status.code(), Some(130));
    let last = events.last().unwrap();
    assert_eq!(last["type"], "turn_finished");
    assert_eq!(last["stop_reason"], "cancelled");
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], i as u64);
    }
}
