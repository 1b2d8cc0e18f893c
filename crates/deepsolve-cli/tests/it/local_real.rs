//! The in-process model through the real binary, with the real 0.5B test model
//! (`DEEPSOLVE_TEST_MODEL`; skipped with a line outside CI, a failure under it): `solve`
//! streams well-formed events, calls tools and stops by name, its later rounds served from the
//! KV cache; `serve` runs turns on the one loaded model — a follow-up found warm, two turns at
//! once both finishing, a cancelled turn stopping by name and freeing its context for the
//! next. What a real model guarantees is asserted, never its words. Replies are short and
//! rounds few: CI has two cores.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::serve::read_events;
use crate::support::{Isolated as Env, Server, deepsolve, listening_url};

/// Settings that keep a real turn short: one context of 4 096 tokens on one thread (the
/// other tests share the cores), short greedy replies, two rounds and no settlement.
fn local_sets(model: &Path) -> Vec<String> {
    [
        "llm.provider=local".to_string(),
        format!("llm.local.model={}", model.display()),
        "llm.local.context=4096".into(),
        "llm.local.threads=1".into(),
        "solve.max_tokens=96".into(),
        "solve.max_rounds=2".into(),
        "solve.settlement_rounds=0".into(),
        "solve.temperature=0".into(),
    ]
    .into_iter()
    .flat_map(|set| ["--set".to_string(), set])
    .collect()
}

/// A turn's events are well formed: numbered in order, opened by `turn_started`, closed by
/// one `turn_finished` with a named stop, every tool call answered by its result, and every
/// round of the in-process model reporting exact usage with its cached prompt tokens.
fn assert_well_formed(events: &[Value]) {
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event["seq"].as_u64(), Some(i as u64), "{event}");
    }
    assert_eq!(
        events.first().map(|e| &e["type"]),
        Some(&json!("turn_started"))
    );
    let last = events.last().expect("events");
    assert_eq!(last["type"], "turn_finished", "{last}");
    let stop = last["stop_reason"].as_str().expect("a named stop");
    let named = serde_json::from_value::<deepsolve_protocol::StopReason>(json!(stop));
    assert!(named.is_ok(), "unexpected stop {stop}");
    let finished = events.iter().filter(|e| e["type"] == "turn_finished");
    assert_eq!(finished.count(), 1);
    for call in events.iter().filter(|e| e["type"] == "tool_call") {
        assert!(
            call["name"].as_str().is_some_and(|n| !n.is_empty()),
            "{call}"
        );
        let answered = events
            .iter()
            .any(|e| e["type"] == "tool_result" && e["call_id"] == call["call_id"]);
        assert!(answered || stop == "cancelled", "unanswered {call}");
    }
    for round in events.iter().filter(|e| e["type"] == "round_finished") {
        let usage = &round["usage"];
        assert_eq!(usage["estimated"], false, "{round}");
        assert!(usage["cached_tokens"].as_u64().is_some(), "{round}");
    }
}

/// Cached prompt tokens of each finished round.
fn cached_by_round(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e["type"] == "round_finished")
        .filter_map(|e| e["usage"]["cached_tokens"].as_u64())
        .collect()
}

#[test]
fn solve_on_the_local_model_streams_calls_tools_and_serves_later_rounds_warm() {
    let Some(model) = deepsolve_testkit::real::test_model() else {
        return;
    };
    let env = Env::new();
    let started = Instant::now();
    let out = env
        .command()
        .timeout(Duration::from_secs(900))
        .arg("solve")
        .arg("--json")
        .args(local_sets(&model))
        .arg("What is 17 * 23?")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    println!(
        "local solve: {} events in {:.1} s",
        events.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(matches!(out.status.code(), Some(0 | 1)), "{stderr}");
    assert_well_formed(&events);
    let window = events.iter().find(|e| e["type"] == "round_started");
    assert_eq!(
        window.map(|e| &e["context_window"]),
        Some(&json!(4096)),
        "the turn's window is the local context"
    );
    // The in-process model honours every `tool_choice`: the spine is held at decoding time
    // from the first round (a wrapper that forgot to forward `honours` once turned it off),
    // so the first rounds are the drafts (`solve.draft: auto`, the model not known to plan on
    // its own; at most `solve.drafts`, 3), text only, and the next asks for the plan by name.
    let rounds: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "round_started")
        .collect();
    let choices: Vec<&Value> = rounds.iter().map(|e| &e["tool_choice"]).collect();
    let drafts = rounds.iter().take_while(|e| e["draft"] == true).count();
    assert!((1..=3).contains(&drafts), "{drafts} drafts");
    assert!(
        rounds[drafts..].iter().all(|e| e.get("draft").is_none()),
        "the drafts come first"
    );
    assert!(
        choices[..drafts].iter().all(|c| **c == json!("none")),
        "{choices:?}"
    );
    assert_eq!(
        choices.get(drafts),
        Some(&&json!("solve_plan")),
        "{choices:?}"
    );
    assert!(choices.iter().all(|c| c.is_string()), "{choices:?}");
    assert!(
        events.iter().any(|e| e["type"] == "tool_call"),
        "the model called no tool: {events:?}"
    );
    // A draft after the first finds the draft's prompt cached; the plan's round starts the
    // playbook's conversation (the drafts' prompt shares only its first tokens); from the
    // round after it on, each round finds the turn's prefix cached.
    let cached = cached_by_round(&events);
    assert!(cached.len() >= drafts + 2, "{cached:?}");
    assert!(
        cached[1..drafts].iter().all(|c| *c > 0),
        "a later draft found nothing cached: {cached:?}"
    );
    assert!(
        cached[drafts + 1..].iter().all(|c| *c > 0),
        "a round after the plan's found nothing cached: {cached:?}"
    );
}

/// `deepsolve serve` on the local model.
fn serve_local(home: &Path, model: &Path) -> Server {
    let mut cmd = deepsolve(home);
    let log_path = home.join("serve.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let db = format!("sqlite://{}", home.join("ds.db").display());
    cmd.args(["serve", "--addr", "127.0.0.1:0", "--database", &db])
        .args(local_sets(model))
        .stdout(Stdio::piped())
        .stderr(log);
    let mut child = cmd.spawn().expect("spawn deepsolve serve");
    let base = listening_url(&mut child, &log_path);
    Server { child, base }
}

async fn start_turn(http: &reqwest::Client, server: &Server, body: Value) -> (String, String) {
    let resp = http
        .post(server.url("/api/v1/turns"))
        .json(&body)
        .send()
        .await
        .expect("post");
    assert_eq!(resp.status().as_u16(), 201);
    let created: Value = resp.json().await.expect("json");
    (
        created["turn_id"].as_str().expect("turn").to_string(),
        created["session_id"].as_str().expect("session").to_string(),
    )
}

/// The turn's events once it has ended (a real model is slow on a loaded machine: the
/// turn's view is polled, then its whole log read).
async fn finished_events(http: &reqwest::Client, server: &Server, turn: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let view: Value = http
            .get(server.url(&format!("/api/v1/turns/{turn}")))
            .send()
            .await
            .expect("get")
            .json()
            .await
            .expect("json");
        if view["status"] != "running" {
            break;
        }
        assert!(Instant::now() < deadline, "{turn} is still running");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let url = server.url(&format!("/api/v1/turns/{turn}/events"));
    read_events(http, &url, None, |e| e["type"] == "turn_finished")
        .await
        .into_iter()
        .map(|(_, event)| event)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_shares_the_one_local_model_warm_across_turns_at_once_and_after_a_cancel() {
    let Some(model) = deepsolve_testkit::real::test_model() else {
        return;
    };
    let home = tempfile::tempdir().expect("home");
    let server = serve_local(home.path(), &model);
    let http = reqwest::Client::new();
    let started = Instant::now();

    let (first, session) = start_turn(&http, &server, json!({"problem": "What is 6 * 7?"})).await;
    let events = finished_events(&http, &server, &first).await;
    assert_well_formed(&events);

    // A follow-up in the session and a new turn, at once, on the one context: both finish,
    // and the follow-up finds its prompt's start in the KV cache.
    let (follow, _) = start_turn(
        &http,
        &server,
        json!({"problem": "Now double it.", "session_id": session}),
    )
    .await;
    let (other, _) = start_turn(&http, &server, json!({"problem": "What is 9 + 10?"})).await;
    let (follow_events, other_events) = tokio::join!(
        finished_events(&http, &server, &follow),
        finished_events(&http, &server, &other)
    );
    assert_well_formed(&follow_events);
    assert_well_formed(&other_events);
    let cached = cached_by_round(&follow_events);
    assert!(
        cached.first().is_some_and(|c| *c > 0),
        "the follow-up was served cold: {cached:?}"
    );

    // Cancelled mid-turn: the stop is named, and the context is free for the next turn.
    let (cancelled, _) = start_turn(&http, &server, json!({"problem": "What is 3 ^ 4?"})).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let resp = http
        .post(server.url(&format!("/api/v1/turns/{cancelled}/cancel")))
        .send()
        .await
        .expect("cancel");
    assert!(resp.status().is_success(), "{}", resp.status());
    let events = finished_events(&http, &server, &cancelled).await;
    assert_well_formed(&events);
    assert_eq!(
        events.last().map(|e| &e["stop_reason"]),
        Some(&json!("cancelled"))
    );
    let (after, _) = start_turn(
        &http,
        &server,
        json!({"problem": "What is 1 + 1?", "config": {"max_rounds": 1}}),
    )
    .await;
    let events = finished_events(&http, &server, &after).await;
    assert_well_formed(&events);
    assert_ne!(
        events.last().map(|e| &e["stop_reason"]),
        Some(&json!("cancelled"))
    );
    println!(
        "local serve: five turns in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
