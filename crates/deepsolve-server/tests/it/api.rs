//! The HTTP API end to end: a real server on loopback, a real SQLite file, the mock model
//! over HTTP through the real client.

use std::time::Duration;

use crate::support::{HOSTILE_HTML, MakeFile, Options, assert_gapless, start};
use deepsolve_server::ServerConfig;
use deepsolve_store::Role;
use deepsolve_testkit::{FnPolicy, Policy, Reply, WellBehaved};
use serde_json::{Value, json};

fn solver(steps: usize) -> WellBehaved {
    WellBehaved::new(steps).with_work_tool(None)
}

/// A solver whose every reply takes `delay`: turns that are still running when we look.
fn slow_solver(steps: usize, delay: Duration) -> impl Policy {
    let inner = solver(steps);
    FnPolicy(move |req: &deepsolve_testkit::PolicyRequest| Reply::delayed(delay, inner.reply(req)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_streams_a_whole_solve_over_sse_and_is_recorded() {
    let s = start(solver(3), Options::default()).await.server;
    let (turn, session) = s
        .start_turn(json!({"problem": "Solve x^2 - 5x + 6 = 0"}), None)
        .await;
    assert!(turn.starts_with("turn_") && session.starts_with("ses_"));
    let events = s.events(&turn, None, None).await;
    assert_gapless(&events, 0);
    assert_eq!(events.first().map(|e| e.kind()), Some("turn_started"));
    assert_eq!(events.last().map(|e| e.kind()), Some("turn_finished"));
    assert!(events.iter().all(|e| e.data["turn_id"] == json!(turn)));
    assert!(
        events.iter().all(|e| e.event.as_deref() == Some(e.kind())),
        "every frame has `event: <type>`"
    );
    let plans = events.iter().filter(|e| e.kind() == "plan").count();
    assert!(
        plans >= 4,
        "a plan event after the plan and each finished step"
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e.kind() == "step_finished")
            .count(),
        3
    );
    assert!(events.iter().any(|e| e.kind() == "answer"));

    let view = s.wait_done(&turn, None).await;
    assert_eq!(view["status"], "finished");
    assert_eq!(view["stop_reason"], "answered");
    assert_eq!(view["session_id"], json!(session));
    assert!(view["answer"].as_str().is_some_and(|a| !a.is_empty()));
    let steps = view["solve"]["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 3);
    assert!(
        steps
            .iter()
            .all(|s| s["done"] == true && s["summary"].is_string())
    );
    assert!(
        view["usage"]["prompt_tokens"]
            .as_u64()
            .is_some_and(|t| t > 0)
    );
    assert!(view["rounds"].as_u64().is_some_and(|r| r >= 5));
    s.mock.assert_clean();
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_event_id_resumes_and_a_finished_turn_replays_in_full() {
    let s = start(solver(2), Options::default()).await.server;
    let (turn, _) = s.start_turn(json!({"problem": "2+2?"}), None).await;
    let all = s.events(&turn, None, None).await;
    assert!(all.len() > 8);
    let again = s.events(&turn, None, None).await;
    assert_eq!(
        again.iter().map(|e| &e.data).collect::<Vec<_>>(),
        all.iter().map(|e| &e.data).collect::<Vec<_>>(),
        "a finished turn replays identically"
    );
    let tail = s.events(&turn, Some(5), None).await;
    assert_gapless(&tail, 6);
    assert_eq!(tail.len(), all.len() - 6);
    let (status, body) = {
        let resp = s
            .http
            .get(s.url(&format!("/api/v1/turns/{turn}/events?after=5")))
            .send()
            .await
            .expect("sse");
        (resp.status().as_u16(), resp.text().await.expect("body"))
    };
    assert_eq!(status, 200);
    assert_eq!(
        crate::support::parse_sse(&body).len(),
        tail.len(),
        "?after= works too"
    );
    let last = all.last().and_then(|e| e.id).expect("last id");
    assert!(s.events(&turn, Some(last), None).await.is_empty());
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_live_readers_each_get_every_event_as_it_happens() {
    let s = start(
        slow_solver(2, Duration::from_millis(120)),
        Options::default(),
    )
    .await
    .server;
    let (turn, _) = s.start_turn(json!({"problem": "slowly"}), None).await;
    let s = std::sync::Arc::new(s);
    // A first live event arrives while the turn is still running.
    let resp = s
        .http
        .get(s.url(&format!("/api/v1/turns/{turn}/events")))
        .send()
        .await
        .expect("sse");
    assert_eq!(
        resp.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("text/event-stream")
    );
    let mut stream = resp.bytes_stream();
    let first = tokio::time::timeout(
        Duration::from_secs(10),
        futures::StreamExt::next(&mut stream),
    )
    .await
    .expect("an event before the end")
    .expect("chunk")
    .expect("bytes");
    assert!(String::from_utf8_lossy(&first).contains("turn_started"));
    let (_, view) = s.get(&format!("/api/v1/turns/{turn}"), None).await;
    assert_eq!(
        view["status"], "running",
        "events are live, not replayed at the end"
    );
    let readers: Vec<_> = (0..5)
        .map(|_| {
            let s = s.clone();
            let turn = turn.clone();
            tokio::spawn(async move { s.events(&turn, None, None).await })
        })
        .collect();
    let mut seen = Vec::new();
    for r in readers {
        let events = r.await.expect("reader");
        assert_gapless(&events, 0);
        assert_eq!(events.last().map(|e| e.kind()), Some("turn_finished"));
        seen.push(events.len());
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
    drop(stream);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_turn_sees_the_previous_answer_and_solve_record() {
    let s = start(solver(2), Options::default()).await.server;
    let (first, session) = s
        .start_turn(json!({"problem": "FIRST-PROBLEM: factor x^2-1"}), None)
        .await;
    s.events(&first, None, None).await;
    let first_view = s.wait_done(&first, None).await;
    let (second, same) = s
        .start_turn(
            json!({"problem": "Now evaluate it at x=3", "session_id": session}),
            None,
        )
        .await;
    assert_eq!(same, session);
    s.events(&second, None, None).await;
    let second_view = s.wait_done(&second, None).await;
    assert_eq!(second_view["status"], "finished");
    let first_answer = first_view["answer"].as_str().expect("answer");
    let saw_history = s.mock.requests().iter().any(|r| {
        let body = r.body.to_string();
        body.contains("Now evaluate it at x=3")
            && body.contains("FIRST-PROBLEM")
            && body.contains("[deepsolve:record]")
            && body.contains(
                &first_answer
                    .chars()
                    .take(40)
                    .collect::<String>()
                    .replace('\n', "\\n"),
            )
    });
    assert!(
        saw_history,
        "the follow-up's prompt carries turn 1's question, record and answer"
    );
    // Kept with the turn, so a resume continues with the history the turn started with.
    let stored = s.state.store.turn_unscoped(&second).await.expect("read");
    let history = stored
        .map(|t| serde_json::to_value(&t.spec.history).expect("history as JSON"))
        .unwrap_or_default();
    assert_eq!(history.as_array().map(Vec::len), Some(1), "{history}");
    assert_eq!(history[0]["answer"], first_view["answer"]);
    let (status, view) = s.get(&format!("/api/v1/sessions/{session}"), None).await;
    assert_eq!(status, 200);
    assert_eq!(view["turns"].as_array().map(Vec::len), Some(2));
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_clear_json_errors() {
    let config = ServerConfig {
        max_body_bytes: 16 * 1024,
        ..ServerConfig::default()
    };
    let s = start(
        solver(1),
        Options {
            config: Some(config),
            ..Options::default()
        },
    )
    .await
    .server;
    let cases: Vec<(Value, u16, &str, Vec<&str>)> = vec![
        (
            json!({"problem": "p", "config": {"max_rounds": 3, "bogus": 1, "nope": 2}}),
            422,
            "unknown_config_key",
            vec!["bogus", "nope"],
        ),
        (
            json!({"problem": "p", "colour": "red"}),
            422,
            "invalid_request",
            vec!["colour"],
        ),
        (
            json!({"problem": "   "}),
            422,
            "invalid_request",
            vec!["problem"],
        ),
        (json!({}), 422, "invalid_request", vec!["problem"]),
        (
            json!({"problem": "p", "tools": ["rm_rf"]}),
            422,
            "unknown_tool",
            vec!["rm_rf"],
        ),
        (
            json!({"problem": "p", "language": "fr"}),
            422,
            "invalid_request",
            vec!["fr"],
        ),
        (
            json!({"problem": "p", "config": {"max_rounds": "many"}}),
            422,
            "invalid_config",
            vec!["max_rounds"],
        ),
        (
            json!({"problem": "p", "session_id": "ses_nope"}),
            404,
            "not_found",
            vec!["session"],
        ),
        (
            json!({"problem": "x".repeat(20_000)}),
            413,
            "payload_too_large",
            vec![],
        ),
    ];
    for (body, status, code, mentions) in cases {
        let (got, err) = s.post("/api/v1/turns", body.clone(), None).await;
        assert_eq!(got, status, "{body} -> {err}");
        assert_eq!(err["error"]["code"], code, "{body} -> {err}");
        let message = err["error"]["message"].as_str().unwrap_or("");
        for m in mentions {
            assert!(message.contains(m), "{message:?} should mention {m}");
        }
    }
    let raw = |body: &'static str, ctype: Option<&'static str>| {
        let mut req = s.http.post(s.url("/api/v1/turns")).body(body);
        if let Some(c) = ctype {
            req = req.header("content-type", c);
        }
        req.send()
    };
    let resp = raw("{not json", Some("application/json"))
        .await
        .expect("send");
    assert_eq!(resp.status().as_u16(), 400);
    let err: Value = resp.json().await.expect("json error");
    assert_eq!(err["error"]["code"], "bad_json");
    let resp = raw("{\"problem\":\"p\"}", None).await.expect("send");
    assert_eq!(resp.status().as_u16(), 415);
    let (status, err) = s.get("/api/v1/nowhere", None).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    let (status, _) = s.get("/api/v1/turns/turn_missing", None).await;
    assert_eq!(status, 404);
    let (turn, _) = s.start_turn(json!({"problem": "p"}), None).await;
    let resp = s
        .http
        .get(s.url(&format!("/api/v1/turns/{turn}/events")))
        .header("Last-Event-ID", "abc")
        .send()
        .await
        .expect("send");
    assert_eq!(resp.status().as_u16(), 400);
    // Still healthy after all that.
    let (status, health) = s.get("/healthz", None).await;
    assert_eq!((status, health["status"].as_str()), (200, Some("ok")));
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_a_running_turn_and_one_turn_runs_per_session() {
    let s = start(
        slow_solver(4, Duration::from_millis(300)),
        Options::default(),
    )
    .await
    .server;
    let (turn, session) = s.start_turn(json!({"problem": "long"}), None).await;
    let (status, err) = s
        .post(
            "/api/v1/turns",
            json!({"problem": "meanwhile", "session_id": session}),
            None,
        )
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("conflict"))
    );
    assert_eq!(
        s.delete(&format!("/api/v1/sessions/{session}"), None).await,
        409,
        "a session with a running turn is not deleted"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (status, body) = s
        .post(&format!("/api/v1/turns/{turn}/cancel"), json!({}), None)
        .await;
    assert_eq!(status, 202, "{body}");
    let events = s.events(&turn, None, None).await;
    assert_eq!(events.last().map(|e| e.kind()), Some("turn_finished"));
    assert_eq!(
        events.last().map(|e| e.data["stop_reason"].clone()),
        Some(json!("cancelled"))
    );
    let view = s.wait_done(&turn, None).await;
    assert_eq!(
        (view["status"].as_str(), view["stop_reason"].as_str()),
        (Some("cancelled"), Some("cancelled"))
    );
    let (status, _) = s
        .post(&format!("/api/v1/turns/{turn}/cancel"), json!({}), None)
        .await;
    assert_eq!(status, 409);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_listed_fetched_and_deleted_with_their_turns() {
    let s = start(solver(1), Options::default()).await.server;
    let (t1, s1) = s
        .start_turn(json!({"problem": "first session"}), None)
        .await;
    s.events(&t1, None, None).await;
    let (t2, s2) = s
        .start_turn(json!({"problem": "second session"}), None)
        .await;
    s.events(&t2, None, None).await;
    s.wait_done(&t2, None).await;
    let (status, list) = s.get("/api/v1/sessions", None).await;
    assert_eq!(status, 200);
    let ids: Vec<&str> = list["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .filter_map(|x| x["id"].as_str())
        .collect();
    assert_eq!(ids, vec![s2.as_str(), s1.as_str()], "most recent first");
    assert_eq!(list["sessions"][1]["title"], "first session");
    assert_eq!(s.delete(&format!("/api/v1/sessions/{s1}"), None).await, 204);
    assert_eq!(s.get(&format!("/api/v1/sessions/{s1}"), None).await.0, 404);
    assert_eq!(s.get(&format!("/api/v1/turns/{t1}"), None).await.0, 404);
    assert_eq!(
        s.get(&format!("/api/v1/turns/{t1}/events"), None).await.0,
        404
    );
    assert_eq!(s.delete(&format!("/api/v1/sessions/{s1}"), None).await, 404);
    assert_eq!(s.get(&format!("/api/v1/turns/{t2}"), None).await.0, 200);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_only_ever_see_their_own_turns_events_sessions_and_artifacts() {
    let started = start(
        WellBehaved::new(1).with_work_tool(Some("make_file")),
        Options {
            users: vec![("alice", Role::User), ("bob", Role::User)],
            tools: vec![MakeFile::tool()],
            ..Options::default()
        },
    )
    .await;
    let s = started.server;
    let (alice, bob) = (
        Some(started.tokens[0].as_str()),
        Some(started.tokens[1].as_str()),
    );

    let (status, err) = s.post("/api/v1/turns", json!({"problem": "p"}), None).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (401, Some("unauthorized"))
    );
    let (status, _) = s
        .post("/api/v1/turns", json!({"problem": "p"}), Some("dst_forged"))
        .await;
    assert_eq!(status, 401);

    let (turn, session) = s
        .start_turn(
            json!({"problem": "make a page", "tools": ["make_file"]}),
            alice,
        )
        .await;
    let events = s.events(&turn, None, alice).await;
    assert_eq!(events.last().map(|e| e.kind()), Some("turn_finished"));
    let view = s.wait_done(&turn, alice).await;
    let artifact = view["artifacts"][0].clone();
    let url = artifact["url"].as_str().expect("artifact url").to_string();
    assert_eq!(artifact["name"], "page.html");

    // Alice downloads her artifact — as an attachment that browsers will not render.
    let resp = s
        .http
        .get(s.url(&url))
        .bearer_auth(started.tokens[0].clone())
        .send()
        .await
        .expect("get");
    assert_eq!(resp.status().as_u16(), 200);
    let h = resp.headers().clone();
    assert_eq!(
        h["content-disposition"],
        "attachment; filename=\"page.html\""
    );
    assert_eq!(h["x-content-type-options"], "nosniff");
    let csp = h["content-security-policy"].to_str().expect("csp");
    assert!(
        csp.contains("default-src 'none'") && csp.contains("sandbox"),
        "{csp}"
    );
    assert_eq!(resp.text().await.expect("body"), HOSTILE_HTML);

    // Bob gets 404 for everything of Alice's — the same as for things that do not exist.
    for path in [
        format!("/api/v1/turns/{turn}"),
        format!("/api/v1/turns/{turn}/events"),
        format!("/api/v1/sessions/{session}"),
        url.clone(),
    ] {
        let (status, err) = s.get(&path, bob).await;
        assert_eq!(status, 404, "bob reading {path}: {err}");
    }
    let (status, _) = s
        .post(&format!("/api/v1/turns/{turn}/cancel"), json!({}), bob)
        .await;
    assert_eq!(status, 404);
    let (status, _) = s
        .post(
            "/api/v1/turns",
            json!({"problem": "hijack", "session_id": session}),
            bob,
        )
        .await;
    assert_eq!(status, 404, "bob cannot continue alice's session");
    assert_eq!(
        s.delete(&format!("/api/v1/sessions/{session}"), bob).await,
        404
    );
    let (_, list) = s.get("/api/v1/sessions", bob).await;
    assert_eq!(list["sessions"], json!([]));
    let (_, list) = s.get("/api/v1/sessions", alice).await;
    assert_eq!(list["sessions"].as_array().map(Vec::len), Some(1));
    s.shutdown().await;
}

#[tokio::test]
async fn without_users_the_server_refuses_to_listen_beyond_loopback() {
    let s = start(solver(1), Options::default()).await.server;
    assert_eq!(s.state.auth, deepsolve_server::AuthMode::SingleUser);
    let err = deepsolve_server::bind("0.0.0.0:0".parse().expect("addr"), s.state.auth)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("refusing to listen") && err.contains("users add"),
        "{err}"
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_are_readable_clamped_on_write_admin_only_and_written_atomically() {
    let started = start(
        solver(1),
        Options {
            users: vec![("root", Role::Admin), ("eve", Role::User)],
            ..Options::default()
        },
    )
    .await;
    let s = started.server;
    let (admin, user) = (
        Some(started.tokens[0].as_str()),
        Some(started.tokens[1].as_str()),
    );
    let path = "/api/v1/capabilities/settings";
    let (status, got) = s.get(path, user).await;
    assert_eq!(status, 200);
    assert_eq!(got["solve"]["max_rounds"], 12);
    assert_eq!(got["writable"], false);
    assert!(
        got["knobs"]
            .as_array()
            .is_some_and(|k| k.iter().any(|k| k["key"] == "max_rounds"))
    );

    let change = json!({"solve": {"max_rounds": 99, "max_replans": 3}});
    let (status, err) = s.put(path, change.clone(), user).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (403, Some("forbidden"))
    );
    let (status, body) = s.put(path, change, admin).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["solve"]["max_rounds"], 50, "clamped");
    assert_eq!(body["solve"]["max_replans"], 3);
    assert!(body["warnings"].to_string().contains("max_rounds"));
    // Which value was clamped, asked and applied, and the range: only the clamped one.
    assert_eq!(
        body["clamped"],
        json!([{"key": "solve.max_rounds", "asked": "99", "applied": 50.0, "min": 1.0, "max": 50.0}])
    );
    let file = s.dir.path().join("settings.yaml");
    let text = std::fs::read_to_string(&file).expect("settings file");
    assert!(
        text.contains("max_rounds: 50") && text.contains("max_replans: 3"),
        "{text}"
    );
    let (_, got) = s.get(path, user).await;
    assert_eq!(got["solve"]["max_rounds"], 50, "in force without a restart");

    let (status, err) = s
        .put(
            path,
            json!({"solve": {"max_rounds": 5, "warp_speed": 9}}),
            admin,
        )
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (422, Some("unknown_config_key"))
    );
    assert!(
        err["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("warp_speed"))
    );
    assert_eq!(
        std::fs::read_to_string(&file).expect("file"),
        text,
        "nothing written"
    );
    let (status, _) = s.put(path, json!({"llm": {"api_key": "sk"}}), admin).await;
    assert_eq!(status, 422, "only the solve section is writable here");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_turns_rounds_tokens_tools_and_model_latency() {
    let started = start(
        WellBehaved::new(2).with_work_tool(Some("make_file")),
        Options {
            tools: vec![MakeFile::tool()],
            ..Options::default()
        },
    )
    .await;
    let s = started.server;
    let (turn, _) = s
        .start_turn(json!({"problem": "count me", "tools": ["make_file"]}), None)
        .await;
    s.events(&turn, None, None).await;
    s.wait_done(&turn, None).await;
    let text = s
        .http
        .get(s.url("/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("body");
    // Every metric dashboards know, with its type (a counter's family is named without
    // `_total` by OpenMetrics, but the series and the TYPE line keep it, as before).
    for (name, kind) in [
        ("deepsolve_turns_total", "counter"),
        ("deepsolve_turn_rounds", "histogram"),
        ("deepsolve_tokens_total", "counter"),
        ("deepsolve_tool_calls_total", "counter"),
        ("deepsolve_tool_call_duration_seconds", "histogram"),
        ("deepsolve_model_round_duration_seconds", "histogram"),
        ("deepsolve_model_first_delta_seconds", "histogram"),
        ("deepsolve_events_total", "counter"),
        ("deepsolve_running_turns", "gauge"),
        ("deepsolve_followed_turns", "gauge"),
    ] {
        let line = format!("# TYPE {name} {kind}\n");
        assert!(text.contains(&line), "missing {line:?} in\n{text}");
        assert!(
            text.contains(&format!("# HELP {name} ")),
            "no help for {name}"
        );
    }
    assert!(!text.contains(".."), "a help text ends twice:\n{text}");
    for needle in [
        "deepsolve_turns_total{stop_reason=\"answered\"} 1",
        "deepsolve_tokens_total{kind=\"completion\"}",
        "deepsolve_events_total{type=\"tool_result\"} 5",
        "deepsolve_events_total{type=\"checkpoint\"} 2",
        "deepsolve_events_total{type=\"other\"} 0",
        "deepsolve_events_total{type=\"turn_finished\"} 1",
        "deepsolve_turn_rounds_bucket{le=\"+Inf\"} 1",
        "deepsolve_followed_turns 0",
        "deepsolve_turn_rounds_count 1",
        "deepsolve_tool_calls_total{tool=\"make_file\",ok=\"true\"} 2",
        "deepsolve_tool_call_duration_seconds_count{tool=\"make_file\"} 2",
        "deepsolve_model_round_duration_seconds_count",
        "deepsolve_model_first_delta_seconds_count",
        "deepsolve_tokens_total{kind=\"prompt\"}",
        "deepsolve_running_turns 0",
    ] {
        assert!(text.contains(needle), "missing {needle} in\n{text}");
    }
    // The labels are the protocol's list of event types: each has its series from the start.
    for kind in deepsolve_protocol::EVENT_TYPES {
        let series = format!("deepsolve_events_total{{type=\"{kind}\"}} ");
        assert!(text.contains(&series), "missing {series} in\n{text}");
    }
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_in_openapi_json_is_served() {
    let s = start(solver(1), Options::default()).await.server;
    let (status, doc) = s.get("/openapi.json", None).await;
    assert_eq!(status, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().expect("paths");
    assert!(paths.len() >= 13);
    for (path, ops) in paths {
        let concrete = path.replace("{id}", "nonexistent");
        for method in ops.as_object().expect("ops").keys() {
            let req = match method.as_str() {
                "get" => s.http.get(s.url(&concrete)),
                "post" => s.http.post(s.url(&concrete)).json(&json!({})),
                "put" => s.http.put(s.url(&concrete)).json(&json!({})),
                "delete" => s.http.delete(s.url(&concrete)),
                other => panic!("unexpected method {other}"),
            };
            let resp = req.send().await.expect("request");
            let status = resp.status().as_u16();
            let body = resp.text().await.unwrap_or_default();
            assert_ne!(status, 405, "{method} {path} is not routed");
            assert!(
                !body.contains("route not found"),
                "{method} {path} is not routed"
            );
        }
    }
    s.shutdown().await;
}

fn message(err: &Value) -> &str {
    err["error"]["message"].as_str().unwrap_or("")
}

/// A turn as a crash leaves it: recorded with its spec, a few events logged (no checkpoint:
/// it died before finishing a step), then marked interrupted by the next start.
async fn crashed_turn(s: &crate::support::TestServer, user_id: &str) -> String {
    use deepsolve_protocol::{EventKind, TurnEvent};
    use deepsolve_store::{NewTurn, StoredEvent};
    let store = &s.state.store;
    let session = store
        .create_session(user_id, "crashed")
        .await
        .expect("session");
    let turn = format!("turn_crashed_{}", user_id.len());
    // A spec as older builds stored it (no history): it must still resume.
    let spec: deepsolve_protocol::StoredTurnSpec = serde_json::from_value(json!({
        "language": "en",
        "tools": [],
        "config": deepsolve_core::SolveConfig::default(),
        "context_window": 32_000,
    }))
    .expect("a spec without history still reads");
    let new = NewTurn {
        id: turn.clone(),
        session_id: session.id,
        user_id: user_id.to_string(),
        problem: "Solve x^2 - 5x + 6 = 0".into(),
        spec,
        owner: "gone".into(),
    };
    store.create_turn(&new).await.expect("turn");
    let kinds = [
        EventKind::TurnStarted {
            model: "mock-model".into(),
            problem: new.problem.clone(),
            tools: Vec::new(),
            language: "en".into(),
            resumed: false,
            protocol: None,
        },
        EventKind::TextDelta {
            text: "Let me plan".into(),
        },
    ];
    let events: Vec<StoredEvent> = kinds
        .into_iter()
        .enumerate()
        .map(|(seq, kind)| {
            let event = TurnEvent {
                turn_id: turn.clone(),
                seq: seq as u64,
                ts: 1,
                kind,
            };
            StoredEvent::from_event(&event).expect("encode")
        })
        .collect();
    store.append_events(&events).await.expect("events");
    assert_eq!(
        store.mark_interrupted("gone").await.expect("mark"),
        vec![turn.clone()]
    );
    turn
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_turn_without_a_checkpoint_starts_over_with_its_seqs_continuing() {
    let s = start(solver(2), Options::default()).await.server;
    let turn = crashed_turn(&s, deepsolve_server::LOCAL_USER).await;
    let (status, body) = s
        .post(&format!("/api/v1/turns/{turn}/resume"), json!({}), None)
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["turn_id"], json!(turn));
    let events = s.events(&turn, None, None).await;
    assert_gapless(&events, 0);
    // The new run starts right after what the dead one logged: a fresh start, not a resume.
    assert_eq!(events[2].kind(), "turn_started");
    assert!(events[2].data.get("resumed").is_none(), "{:?}", events[2]);
    assert_eq!(events.last().map(|e| e.kind()), Some("turn_finished"));
    assert_eq!(
        events.last().map(|e| e.data["stop_reason"].clone()),
        Some(json!("answered"))
    );
    let view = s.wait_done(&turn, None).await;
    assert_eq!(view["status"], "finished");
    let steps = view["solve"]["steps"].as_array().expect("steps");
    assert!(steps.len() == 2 && steps.iter().all(|s| s["done"] == true));
    let (status, err) = s
        .post(&format!("/api/v1/turns/{turn}/resume"), json!({}), None)
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("conflict"))
    );
    assert!(
        err["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("interrupted") && m.contains("finished")),
        "{err}"
    );
    s.mock.assert_clean();
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_owner_resumes_and_only_an_interrupted_turn() {
    let started = start(
        slow_solver(2, Duration::from_millis(150)),
        Options {
            users: vec![("alice", Role::User), ("bob", Role::User)],
            ..Options::default()
        },
    )
    .await;
    let s = started.server;
    let (alice, bob) = (
        Some(started.tokens[0].as_str()),
        Some(started.tokens[1].as_str()),
    );
    let alice_id = s
        .state
        .store
        .user_by_name("alice")
        .await
        .expect("lookup")
        .expect("alice")
        .id;
    let crashed = crashed_turn(&s, &alice_id).await;
    let resume = |turn: &str| format!("/api/v1/turns/{turn}/resume");
    let (status, err) = s.post(&resume(&crashed), json!({}), bob).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    let (status, _) = s.post(&resume("turn_missing"), json!({}), alice).await;
    assert_eq!(status, 404);
    let (_, view) = s.get(&format!("/api/v1/turns/{crashed}"), alice).await;
    assert_eq!(
        view["status"], "interrupted",
        "bob's attempt changed nothing"
    );

    // A follow-up started in its session after the crash runs: neither turn is resumed.
    let (running, _) = s
        .start_turn(
            json!({"problem": "slowly", "session_id": view["session_id"]}),
            alice,
        )
        .await;
    let (status, err) = s.post(&resume(&running), json!({}), alice).await;
    assert_eq!(status, 409, "{err}");
    assert!(message(&err).contains("this one is running"), "{err}");
    let (status, err) = s.post(&resume(&crashed), json!({}), alice).await;
    assert_eq!(status, 409, "{err}");
    assert!(message(&err).contains("session is running"), "{err}");

    // Once it has finished, it is not resumable either, and the crashed one is.
    s.events(&running, None, alice).await;
    s.wait_done(&running, alice).await;
    let (status, err) = s.post(&resume(&running), json!({}), alice).await;
    assert_eq!(status, 409);
    assert!(message(&err).contains("this one is finished"), "{err}");
    let (status, body) = s.post(&resume(&crashed), json!({}), alice).await;
    assert_eq!(status, 202, "{body}");
    let (status, _) = s.post(&resume(&crashed), json!({}), alice).await;
    assert_eq!(status, 409, "a resumed turn runs: not resumed twice");
    s.events(&crashed, None, alice).await;
    let view = s.wait_done(&crashed, alice).await;
    assert_eq!(view["stop_reason"], "answered", "{view}");
    s.shutdown().await;
}
