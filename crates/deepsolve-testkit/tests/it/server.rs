//! The mock server over real HTTP: sequence counting, every reply kind, invariants on captured
//! requests, policy mode, and the `deepsolve-mock` binary.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use deepsolve_testkit::sse::parse_stream;
use deepsolve_testkit::{
    FnPolicy, InvariantConfig, MockServer, NoIndexDeltas, RepeatedIdName, Reply, Turn, WellBehaved,
};
use serde_json::{Value, json};

fn good_body(stream: bool) -> Value {
    json!({
        "model": "mock-model",
        "messages": [
            {"role": "system", "content": "You solve problems."},
            {"role": "user", "content": "What is 2+2?"}
        ],
        "tools": [
            {"type": "function", "function": {"name": "solve_plan", "description": "", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "solve_finish_step", "description": "", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "reason", "description": "", "parameters": {"type": "object"}}}
        ],
        "tool_choice": "auto",
        "max_tokens": 100,
        "stream": stream,
        "stream_options": {"include_usage": true}
    })
}

async fn post(server: &MockServer, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/chat/completions", server.url()))
        .header("authorization", "Bearer sk-test")
        .json(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn sequence_mode_streams_turns_and_counts_calls_exactly() {
    let turn = Turn::calls(vec![(
        "solve_plan",
        json!({"analysis": "a", "steps": [{"goal": "g"}]}),
    )])
    .with_text("Planning.")
    .with_reasoning("Let me think.");
    let server = MockServer::sequence(vec![Reply::Turn(turn.clone()), Reply::text("4")]);
    assert!(server.url().starts_with("http://127.0.0.1:") && server.url().ends_with("/v1"));

    let response = post(&server, &good_body(true)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let parsed = parse_stream(&response.text().await.unwrap()).unwrap();
    assert!(parsed.is_complete());
    let mut back = parsed.to_turn();
    back.style = turn.style;
    assert_eq!(back, turn);
    assert_eq!(parsed.tool_calls[0].id.as_deref(), Some("call_1_0"));

    // One call short of the script: verify fails.
    let problems = server.verify().unwrap_err();
    assert!(
        problems[0].contains("expected exactly 2 calls, got 1"),
        "{problems:?}"
    );

    let response = post(&server, &good_body(false)).await;
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "4");
    server.assert_clean();

    // One call too many: a 500 and a violation.
    let response = post(&server, &good_body(true)).await;
    assert_eq!(response.status(), 500);
    let violations = server.violations();
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].request, Some(2));
    assert!(violations[0].message.contains("unexpected call #3"));
    assert_eq!(server.call_count(), 3);
    let captured = &server.requests()[0];
    assert_eq!(captured.header("Authorization"), Some("Bearer sk-test"));
    assert_eq!(captured.body["max_tokens"], 100);
}

#[tokio::test]
#[should_panic(expected = "unexpected call #1")]
async fn assert_clean_panics_with_the_violations() {
    let server = MockServer::sequence(vec![]);
    post(&server, &good_body(true)).await;
    server.assert_clean();
}

#[tokio::test]
async fn invariant_violations_are_recorded_not_fatal() {
    let server = MockServer::builder()
        .invariants(InvariantConfig::default().with_max_prompt_tokens(5))
        .sequence(vec![Reply::text("ok")])
        .unwrap();
    let body = json!({
        "model": "m",
        "messages": [
            {"role": "user", "content": "no system message here, and long enough to bust five tokens"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "reason", "arguments": "{}"}}
            ]}
        ],
        "tool_choice": "auto",
        "stream": true
    });
    let response = post(&server, &body).await;
    assert_eq!(response.status(), 200, "the reply is still served");
    let messages: Vec<String> = server.violations().into_iter().map(|v| v.message).collect();
    for needle in [
        "no system message",
        "tool call 'a' has no tool result",
        "tool_choice is set but no tools are declared",
        "over the budget of 5",
    ] {
        assert!(
            messages.iter().any(|m| m.contains(needle)),
            "{needle}: {messages:#?}"
        );
    }
}

#[tokio::test]
async fn status_replies_carry_body_and_headers() {
    let server = MockServer::sequence(vec![Reply::rate_limited(Some(7)), Reply::server_error()]);
    let response = post(&server, &good_body(true)).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "7");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    assert_eq!(post(&server, &good_body(true)).await.status(), 500);
    server.assert_clean();
}

#[tokio::test]
async fn cut_after_text_ends_without_finish_or_done() {
    let server = MockServer::sequence(vec![Reply::CutAfterText("partial answer".into())]);
    let response = post(&server, &good_body(true)).await;
    assert_eq!(response.status(), 200);
    let mut received = Vec::new();
    let mut response = response;
    let mut broke = false;
    loop {
        match response.chunk().await {
            Ok(Some(bytes)) => received.extend_from_slice(&bytes),
            Ok(None) => break,
            Err(_) => {
                broke = true;
                break;
            }
        }
    }
    assert!(broke, "the connection must break, not end cleanly");
    let parsed = parse_stream(&String::from_utf8_lossy(&received)).unwrap();
    assert_eq!(parsed.text, "partial answer");
    assert!(!parsed.done && parsed.finish_reason.is_none());
}

#[tokio::test]
async fn delayed_and_raw_replies() {
    let server = MockServer::sequence(vec![
        Reply::delayed(Duration::from_millis(150), Reply::text("late")),
        Reply::Raw(vec![
            r#"{"choices":[{"delta":{"content":"raw"}}]}"#.into(),
            "[DONE]".into(),
        ]),
    ]);
    let started = Instant::now();
    let text = post(&server, &good_body(true)).await.text().await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert_eq!(parse_stream(&text).unwrap().text, "late");
    let text = post(&server, &good_body(true)).await.text().await.unwrap();
    assert_eq!(
        text,
        "data: {\"choices\":[{\"delta\":{\"content\":\"raw\"}}]}\n\ndata: [DONE]\n\n"
    );
    server.assert_clean();
}

#[tokio::test]
async fn models_route_and_unexpected_routes() {
    let server = MockServer::builder()
        .models(vec!["a", "b"])
        .sequence(vec![])
        .unwrap();
    let client = reqwest::Client::new();
    let body: Value = client
        .get(format!("{}/models", server.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["data"][1]["id"], "b");
    server.assert_clean();
    let status = client
        .post(format!("{}/completions", server.url()))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 404);
    assert!(
        server.violations()[0]
            .message
            .contains("unexpected request: POST /v1/completions")
    );
}

#[tokio::test]
async fn policy_mode_reads_the_wire_and_survives_panics() {
    let server = MockServer::policy(FnPolicy(|req: &deepsolve_testkit::PolicyRequest| {
        if req.last_user_text() == "boom" {
            panic!("scripted panic");
        }
        Reply::text(format!(
            "{} tools, choice {:?}",
            req.tools.len(),
            req.tool_choice
        ))
    }));
    let text = post(&server, &good_body(true)).await.text().await.unwrap();
    assert_eq!(
        parse_stream(&text).unwrap().text,
        "3 tools, choice Some(\"auto\")"
    );
    let mut boom = good_body(true);
    boom["messages"][1]["content"] = json!("boom");
    assert_eq!(post(&server, &boom).await.status(), 500);
    assert!(
        server.violations()[0]
            .message
            .contains("the policy panicked: scripted panic")
    );
    // Unreadable bodies are violations too.
    let status = reqwest::Client::new()
        .post(format!("{}/chat/completions", server.url()))
        .body("not json")
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 500);
    let v = server.violations();
    assert!(v.iter().any(|v| v.message.contains("the body is not JSON")));
    assert_eq!(server.policy_requests().len(), 2);
}

#[tokio::test]
async fn delta_style_wrappers_change_the_frames_not_the_calls() {
    for repeated in [true, false] {
        let server = if repeated {
            MockServer::policy(RepeatedIdName {
                inner: WellBehaved::default(),
            })
        } else {
            MockServer::policy(NoIndexDeltas {
                inner: WellBehaved::default(),
            })
        };
        let text = post(&server, &good_body(true)).await.text().await.unwrap();
        let parsed = parse_stream(&text).unwrap();
        assert_eq!(parsed.tool_calls.len(), 1);
        assert_eq!(parsed.tool_calls[0].name, "solve_plan");
        let args: Value = serde_json::from_str(&parsed.tool_calls[0].arguments).unwrap();
        assert_eq!(args["steps"].as_array().unwrap().len(), 3);
        let deltas: Vec<Value> = deepsolve_testkit::sse::data_payloads(&text)
            .iter()
            .filter_map(|p| serde_json::from_str::<Value>(p).ok())
            .filter_map(|c| c.pointer("/choices/0/delta/tool_calls/0").cloned())
            .collect();
        assert!(deltas.len() > 3);
        if repeated {
            assert!(
                deltas
                    .iter()
                    .all(|d| d["id"].is_string() && d["function"]["name"] == "solve_plan")
            );
        } else {
            assert!(deltas.iter().all(|d| d.get("index").is_none()));
        }
        server.assert_clean();
    }
}

/// A blocking HTTP exchange with `Connection: close`, returning whatever arrived before the
/// server closed or reset the connection.
fn raw_post(server: &MockServer, body: &str) -> String {
    let mut stream = TcpStream::connect(server.addr()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(
        stream,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        server.addr(),
        body.len()
    )
    .unwrap();
    let mut received = Vec::new();
    let _ = stream.read_to_end(&mut received);
    String::from_utf8_lossy(&received).into_owned()
}

#[test]
fn works_from_a_plain_test_and_cuts_before_output() {
    let server = MockServer::sequence(vec![Reply::CutBeforeOutput, Reply::text("after the cut")]);
    let body = good_body(true).to_string();
    let first = raw_post(&server, &body);
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(first.contains("text/event-stream"));
    assert!(!first.contains("data:"), "no data before the cut: {first}");
    let second = raw_post(&server, &body);
    assert!(second.contains("after the cut"), "{second}");
    assert!(second.contains("data: [DONE]"));
    server.assert_clean();
}

#[test]
fn the_binary_serves_a_named_policy() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_deepsolve-mock"))
        .args(["--policy", "well-behaved", "--steps", "2", "--quiet"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().to_string();
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .to_string();
    let body = good_body(false).to_string();
    let mut stream = TcpStream::connect(&addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(
        stream,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut received = String::new();
    let _ = stream.read_to_string(&mut received);
    let _ = child.kill();
    let _ = child.wait();
    assert!(received.starts_with("HTTP/1.1 200"), "{received}");
    assert!(received.contains("solve_plan"), "{received}");

    let bad = Command::new(env!("CARGO_BIN_EXE_deepsolve-mock"))
        .args(["--policy", "nope"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("well-behaved"));
}

#[tokio::test]
async fn policies_play_whole_turns_over_http() {
    use crate::common::{SimConfig, Stop, WireModel, run};
    for fold in crate::common::FOLD_STYLES {
        let server = MockServer::policy(WellBehaved::new(3));
        let model = WireModel::new(server.url());
        let cfg = SimConfig {
            fold,
            ..SimConfig::default()
        };
        let out = run(&model, cfg).await;
        assert_eq!(out.stop, Stop::Answered, "{out:#?}");
        assert_eq!(out.done_steps(), 3);
        // plan + 3 × (work + its sub-call + finish) + answer
        assert_eq!(server.call_count(), 11);
        let subcalls = server
            .policy_requests()
            .iter()
            .filter(|r| r.is_subcall())
            .count();
        assert_eq!(subcalls, 3);
        server.assert_clean();
    }
    let server = MockServer::policy(deepsolve_testkit::ParallelFlood::new(10));
    let out = run(&WireModel::new(server.url()), SimConfig::default()).await;
    assert_eq!(out.stop, Stop::Answered);
    server.assert_clean();
}
