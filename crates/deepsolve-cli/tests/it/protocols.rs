//! Issue 3 through the real binary: the text-tag protocol against a model that ignores stop
//! sequences and invents results, `auto` fallback, reasoning in content, vendor markup.

use crate::support::Isolated;
use deepsolve_testkit::tags::MarkupStyle;
use deepsolve_testkit::*;
use serde_json::Value;

/// `deepsolve solve --json` against `server`, in `env`.
fn solve_json(env: &Isolated, server: &MockServer) -> assert_cmd::Command {
    let mut cmd = env.solve(server);
    cmd.arg("--json");
    cmd
}

fn run(server: &MockServer, extra: &[&str]) -> (i32, Vec<Value>) {
    let env = Isolated::new();
    let out = solve_json(&env, server)
        .args(extra)
        .arg("Solve x^2 - 5x + 6 = 0.")
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let events = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    server.assert_clean();
    (out.status.code().unwrap_or(-1), events)
}

fn of<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == t).collect()
}

fn stop_reason(events: &[Value]) -> &str {
    events.last().unwrap()["stop_reason"].as_str().unwrap()
}

/// All message contents of every request the binary sent.
fn request_texts(server: &MockServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .map(|r| {
            r.body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["content"].as_str().unwrap_or_default().to_string())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

fn visible_text(events: &[Value]) -> String {
    let deltas: String = of(events, "text_delta")
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    let answer: String = of(events, "answer")
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    deltas + &answer
}

#[test]
fn tags_mode_with_a_model_that_invents_results() {
    let server = MockServer::policy(TagsMode {
        inner: WellBehaved::new(3),
        invent_responses: true,
    });
    let (code, events) = run(&server, &["--protocol", "tags", "--tool", "reason"]);
    assert_eq!(stop_reason(&events), "answered");
    assert_eq!(code, 0);
    let texts = request_texts(&server);
    assert!(
        texts.iter().all(|t| !t.contains("INVENTED")),
        "an invented result reached a request"
    );
    for request in server.requests() {
        if request.body["stop"].is_array() {
            assert!(
                request.body.get("tools").is_none(),
                "tags mode declares no native tools"
            );
        }
    }
    // Every real result was shown to the model in a later request.
    for result in of(&events, "tool_result") {
        let content = result["content"].as_str().unwrap();
        assert!(
            texts.iter().any(|t| t.contains(content)),
            "result never shown: {content}"
        );
    }
    assert!(!of(&events, "warning").is_empty(), "the cut is reported");
    assert!(!visible_text(&events).contains("<tool_call>"));
    assert_eq!(of(&events, "step_finished").len(), 3);
}

#[test]
fn auto_falls_back_to_tags_when_the_provider_refuses_tools() {
    let server = MockServer::policy(NoNativeTools {
        inner: TagsMode {
            inner: WellBehaved::new(2),
            invent_responses: false,
        },
    });
    let (code, events) = run(&server, &["--protocol", "auto"]);
    assert_eq!(stop_reason(&events), "answered");
    assert_eq!(code, 0);
    let requests = server.requests();
    assert!(requests[0].body.get("tools").is_some());
    assert!(requests[1..].iter().all(|r| r.body.get("tools").is_none()));
    assert!(
        of(&events, "warning")
            .iter()
            .any(|w| w["kind"] == "protocol")
    );
}

#[test]
fn inline_think_is_reasoning_and_never_answer_text() {
    let server = MockServer::policy(ReasoningModel {
        inner: WellBehaved::new(2),
    });
    let (code, events) = run(&server, &[]);
    assert_eq!(stop_reason(&events), "answered");
    assert_eq!(code, 0);
    assert!(!visible_text(&events).contains(THINK_MARKER));
    let reasoning: String = of(&events, "reasoning_delta")
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert!(reasoning.contains(THINK_MARKER));
    for step in of(&events, "step_finished") {
        assert!(!step["summary"].as_str().unwrap().contains(THINK_MARKER));
    }
}

#[test]
fn vendor_markup_in_content_becomes_calls() {
    for style in [
        MarkupStyle::Hermes,
        MarkupStyle::DeepSeekDsml,
        MarkupStyle::KimiK2,
    ] {
        let server = MockServer::policy(VendorMarkup {
            inner: WellBehaved::new(2),
            style,
        });
        let (code, events) = run(&server, &[]);
        assert_eq!(stop_reason(&events), "answered", "{style:?}");
        assert_eq!(code, 0);
        assert_eq!(of(&events, "step_finished").len(), 2, "{style:?}");
        let shown = visible_text(&events);
        for markup in ["<tool_call>", "DSML", "<|tool_call"] {
            assert!(
                !shown.contains(markup),
                "{style:?} leaked {markup}: {shown}"
            );
        }
    }
}

#[test]
fn doctor_recommends_the_code_fence_for_a_model_without_tool_calling() {
    let server = MockServer::policy(NoNativeTools {
        inner: TagsMode {
            inner: WellBehaved::new(1),
            invent_responses: false,
        },
    });
    let out = Isolated::new().doctor(&server.url());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("✗ native tool calls: refused"), "{stdout}");
    assert!(stdout.contains("stop sequences"), "{stdout}");
    // Probed and nothing honoured: `auto`'s rule picks the code fence (it also reads
    // `<tool_call>` blocks), not the untested native-then-tags guess.
    assert!(stdout.contains("recommended protocol: fence"), "{stdout}");
}

/// The probe's requests among a mock's: they pose the probe's problem.
fn probe_requests(server: &MockServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.body.to_string().contains("Mia buys 12 pencils"))
        .count()
}

#[test]
fn doctor_keeps_the_probe_s_verdict_and_a_solve_takes_the_server_s_window() {
    let server = MockServer::builder()
        .props(serde_json::json!({"default_generation_settings": {"n_ctx": 16384}}))
        .policy(WellBehaved::new(1))
        .unwrap();
    let env = Isolated::new();
    let out = env.doctor(&server.url());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("probe      probed now"), "{stdout}");
    assert!(stdout.contains("✓ native tool calls"), "{stdout}");
    for label in [
        "tool_choice \"required\"",
        "tool_choice naming a tool",
        "response_format json_schema",
    ] {
        assert!(stdout.contains(label), "{label} in {stdout}");
    }
    assert!(
        stdout.contains("context    16384 tokens (from n_ctx in /props (llama.cpp))"),
        "{stdout}"
    );
    assert!(stdout.contains("recommended protocol: native"), "{stdout}");
    let probed = probe_requests(&server);
    assert_eq!(probed, 3, "plan, required, named");

    // Again: the kept verdict, no probe.
    let out = env.doctor(&server.url());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("probe      kept from "), "{stdout}");
    assert_eq!(probe_requests(&server), probed);

    // A configured window wins, and doctor says the server's differs.
    let out = env
        .command()
        .args([
            "doctor",
            "--base-url",
            &server.url(),
            "--model",
            "mock-model",
        ])
        .args(["--set", "llm.context_window=8192"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("context    8192 tokens (from llm.context_window)"),
        "{stdout}"
    );
    assert!(stdout.contains("but the server says 16384"), "{stdout}");

    // A solve's turn runs in the server's window.
    let (_, events) = solve_on(&env, &server, "never");
    let round = events
        .iter()
        .find(|e| e["type"] == "round_started")
        .expect("a round");
    assert_eq!(round["context_window"], 16384, "{round}");

    // --recheck probes again.
    let out = env
        .command()
        .args([
            "doctor",
            "--recheck",
            "--base-url",
            &server.url(),
            "--model",
            "mock-model",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("probe      probed now"), "{stdout}");
    assert_eq!(probe_requests(&server), 2 * probed);
}

/// A solve of `What is 2 + 2?` on `server` with `llm.probe` at `probe`: its stderr and events.
fn solve_on(env: &Isolated, server: &MockServer, probe: &str) -> (String, Vec<Value>) {
    let out = solve_json(env, server)
        .env("DEEPSOLVE_LLM__PROBE", probe)
        .arg("What is 2 + 2?")
        .output()
        .unwrap();
    let events = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (String::from_utf8_lossy(&out.stderr).into_owned(), events)
}

#[test]
fn a_solve_probes_a_new_endpoint_once_and_holds_the_spine_as_it_honours() {
    let server = MockServer::builder()
        .props(serde_json::json!({"default_generation_settings": {"n_ctx": 16384}}))
        .policy(WellBehaved::new(1))
        .unwrap();
    let env = Isolated::new();

    let (stderr, events) = solve_on(&env, &server, "first_use");
    assert!(stderr.contains("first use of mock-model"), "{stderr}");
    let probed = probe_requests(&server);
    assert!(probed > 0, "no probe before the first turn");
    assert_eq!(stop_reason(&events), "answered");
    // Without `doctor`, the first turn already knows what the endpoint honours: the spine is
    // held at decoding time from its first round, in the server's window.
    let round = &of(&events, "round_started")[0];
    assert_eq!(round["tool_choice"], "auto", "{round}");
    assert_eq!(round["context_window"], 16384, "{round}");

    // The verdict was kept: the next process neither probes nor says it does.
    let (stderr, events) = solve_on(&env, &server, "first_use");
    assert!(!stderr.contains("first use"), "{stderr}");
    assert_eq!(probe_requests(&server), probed);
    assert_eq!(of(&events, "round_started")[0]["tool_choice"], "auto");
}
