//! `/api/v1/evals`: runs over HTTP against the scripted model — start, progress over SSE,
//! results with the report, plots and per-problem turns that open, upload validation,
//! cancel, owners, a failing endpoint, and runs surviving a restart.

use std::time::Duration;

use deepsolve_store::Role;
use deepsolve_testkit::{FnPolicy, PolicyRequest, Reply, WellBehaved};
use serde_json::{Value, json};

use crate::support::{Options, TestServer, parse_sse, start};

/// Plain requests (no tools) get a boxed 42 after `delay`; deepsolve turns a well-behaved
/// one-step solve.
fn policy(delay: Duration) -> FnPolicy<impl Fn(&PolicyRequest) -> Reply + Send + Sync> {
    let solver = WellBehaved::new(1);
    FnPolicy(move |req: &PolicyRequest| {
        if req.has_native_tools() {
            deepsolve_testkit::Policy::reply(&solver, req)
        } else {
            Reply::delayed(
                delay,
                Reply::text("6 times 7 is 42, so the answer is \\boxed{42}."),
            )
        }
    })
}

/// `n` plain-layout problems whose answer is 42, as JSONL.
fn set_of(n: usize) -> String {
    (1..=n)
        .map(|i| {
            json!({"id": format!("p{i}"), "question": format!("Problem {i}: what is 6 times 7?"), "answer": "42"})
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

async fn wait_over(server: &TestServer, id: &str, token: Option<&str>) -> Value {
    for _ in 0..600 {
        let (status, run) = server.get(&format!("/api/v1/evals/{id}"), token).await;
        assert_eq!(status, 200, "{run}");
        if run["status"] != "running" {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("evaluation {id} did not end");
}

async fn sse(
    server: &TestServer,
    path: &str,
    token: Option<&str>,
) -> Vec<crate::support::SseEvent> {
    let mut req = server.http.get(server.url(path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.expect("sse");
    assert_eq!(resp.status().as_u16(), 200);
    let body = tokio::time::timeout(Duration::from_secs(60), resp.text())
        .await
        .expect("the stream ends when the run does")
        .expect("body");
    parse_sse(&body)
}

#[tokio::test]
async fn a_run_streams_progress_reports_and_its_turns_open() {
    let server = start(policy(Duration::from_millis(150)), Options::default())
        .await
        .server;
    let (status, created) = server
        .post(
            "/api/v1/evals",
            json!({"data": set_of(3), "set": "mine.jsonl", "modes": ["deepsolve", "plain"], "concurrency": 1}),
            None,
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().expect("id").to_string();
    assert_eq!(created["status"], "running");
    assert_eq!(created["total"], 6);
    assert_eq!(created["set"], "mine.jsonl");
    assert_eq!(created["model"], "mock-model");

    let events = sse(&server, &format!("/api/v1/evals/{id}/events"), None).await;
    let last = events.last().expect("frames");
    assert_eq!(last.event.as_deref(), Some("finished"), "{events:?}");
    assert_eq!(last.data["status"], "finished");
    assert_eq!(last.data["done"], 6);
    let progress: Vec<u64> = events
        .iter()
        .filter(|e| e.event.as_deref() == Some("progress"))
        .filter_map(|e| e.data["done"].as_u64())
        .collect();
    assert!(
        !progress.is_empty(),
        "progress frames before the end: {events:?}"
    );
    assert!(progress.windows(2).all(|w| w[0] <= w[1]), "{progress:?}");

    let (status, run) = server.get(&format!("/api/v1/evals/{id}"), None).await;
    assert_eq!(status, 200);
    assert_eq!(run["status"], "finished");
    let modes = run["report"]["modes"].as_array().expect("report tables");
    assert_eq!(modes.len(), 2);
    for m in modes {
        assert_eq!(m["problems"], 3, "{m}");
        assert_eq!(m["errors"], 0, "{m}");
        assert!(m["ci_high"].as_f64().expect("interval") > 0.0);
        // The scripted solve's answer is not 42; the plain reply's is.
        let want = if m["mode"] == "plain" { 3 } else { 0 };
        assert_eq!(m["correct"], want, "{m}");
    }
    assert!(
        run["report"]["paired"]
            .as_array()
            .is_some_and(|p| p.len() == 1)
    );
    for plot in ["accuracy", "tokens"] {
        let svg = run["plots"][plot].as_str().expect("plot");
        assert!(svg.starts_with("<svg "), "{plot}");
    }
    let results = run["results"].as_array().expect("results");
    assert_eq!(results.len(), 6);
    for row in results {
        assert!(row.get("output").is_none(), "the graded text is not sent");
        assert!(
            row["question"]
                .as_str()
                .is_some_and(|q| q.contains("6 times 7"))
        );
    }
    let deep: Vec<&Value> = results
        .iter()
        .filter(|r| r["mode"] == "deepsolve")
        .collect();
    assert_eq!(deep.len(), 3);
    for row in deep {
        let turn_url = row["turn_url"].as_str().expect("turn_url");
        let (status, turn) = server.get(turn_url, None).await;
        assert_eq!(status, 200, "{turn}");
        assert_eq!(turn["id"], row["turn_id"]);
        assert_eq!(turn["status"], "finished", "{turn}");
        assert!(
            turn["problem"]
                .as_str()
                .is_some_and(|p| p.contains("6 times 7"))
        );
    }

    // The plot as an image, and a finished run's stream: one `finished` frame.
    let plot = server
        .http
        .get(server.url(&format!("/api/v1/evals/{id}/plots/accuracy.svg")))
        .send()
        .await
        .expect("plot");
    assert_eq!(plot.status().as_u16(), 200);
    assert_eq!(plot.headers()["content-type"], "image/svg+xml");
    let again = sse(&server, &format!("/api/v1/evals/{id}/events"), None).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].event.as_deref(), Some("finished"));

    // Stored like the CLI's --out: results, manifest, report files.
    let dir = server.dir.path().join("evals").join(&id);
    for file in [
        "results.jsonl",
        "run.json",
        "eval.json",
        "report/report.md",
        "report/results.csv",
    ] {
        assert!(dir.join(file).exists(), "{file}");
    }
    let (_, list) = server.get("/api/v1/evals", None).await;
    assert_eq!(list["evals"][0]["id"], id.as_str());
    server.shutdown().await;
}

#[tokio::test]
async fn bad_requests_are_refused_naming_the_problem() {
    let started = start(
        policy(Duration::ZERO),
        Options {
            config: Some(deepsolve_server::ServerConfig {
                evals: deepsolve_server::evals::EvalConfig {
                    max_upload_bytes: 2000,
                    max_problems: 5,
                    ..Default::default()
                },
                ..Default::default()
            }),
            ..Options::default()
        },
    )
    .await;
    let server = started.server;
    let cases = [
        (json!({}), 422, "name a shipped set"),
        (
            json!({"set": "nope"}),
            422,
            "no shipped set is named \"nope\"",
        ),
        (
            json!({"set": "gsm-style-en", "modes": ["magic"]}),
            422,
            "unknown mode \"magic\"",
        ),
        (
            json!({"data": "{\"prompt\": \"hi\", \"label_text\": \"x\"}", "set": "bad.jsonl"}),
            422,
            "bad.jsonl:1: the record fits no known layout",
        ),
        (
            json!({"data": "{broken", "set": "broken.jsonl"}),
            422,
            "broken.jsonl:1",
        ),
        (json!({"set": "gsm-style-en"}), 422, "at most 5 per run"),
        (json!({"data": "x".repeat(3000)}), 413, "at most 2000"),
        (
            json!({"set": "gsm-style-en", "limit": 0}),
            422,
            "at least 1",
        ),
        (
            json!({"set": "gsm-style-en", "limit": 2, "concurrency": 99}),
            422,
            "'concurrency' is 99",
        ),
        (json!({"set": "gsm-style-en", "bogus": 1}), 422, "bogus"),
    ];
    for (body, want_status, want_message) in cases {
        let (status, error) = server.post("/api/v1/evals", body.clone(), None).await;
        assert_eq!(status, want_status, "{body}: {error}");
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(want_message), "{body}: {message}");
    }
    // A CMATH-style row (grade, question, answer) is read: the shipped limit still applies.
    let cmath = r#"{"grade": 1, "question": "芳芳买了一本书有99页，看了90页，她还剩多少页没有看？", "answer": "9", "reasoning_step": 1, "num_digits": 2}"#;
    let (status, run) = server
        .post(
            "/api/v1/evals",
            json!({"data": cmath, "modes": ["plain"]}),
            None,
        )
        .await;
    assert_eq!(status, 201, "{run}");
    assert_eq!(run["problems"], 1);
    assert_eq!(server.get("/api/v1/evals/ev_0000", None).await.0, 404);
    assert_eq!(server.get("/api/v1/evals/..%2F..%2Fetc", None).await.0, 404);
    server.shutdown().await;
}

#[tokio::test]
async fn a_run_is_cancelled_by_delete_and_another_user_sees_nothing() {
    let started = start(
        policy(Duration::from_millis(300)),
        Options {
            users: vec![("alice", Role::User), ("bob", Role::User)],
            ..Options::default()
        },
    )
    .await;
    let (server, alice, bob) = (
        started.server,
        started.tokens[0].as_str(),
        started.tokens[1].as_str(),
    );
    let (status, created) = server
        .post(
            "/api/v1/evals",
            json!({"data": set_of(20), "modes": ["plain"], "concurrency": 1}),
            Some(alice),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().expect("id").to_string();
    let path = format!("/api/v1/evals/{id}");

    // Bob: not in his list, a 404 on every route.
    let (_, list) = server.get("/api/v1/evals", Some(bob)).await;
    assert_eq!(list["evals"].as_array().map(Vec::len), Some(0), "{list}");
    assert_eq!(server.get(&path, Some(bob)).await.0, 404);
    assert_eq!(
        server.get(&format!("{path}/events"), Some(bob)).await.0,
        404
    );
    assert_eq!(server.delete(&path, Some(bob)).await, 404);

    // Alice cancels it once a problem is done.
    for _ in 0..200 {
        let (_, run) = server.get(&path, Some(alice)).await;
        if run["done"].as_u64().unwrap_or(0) >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cancelled = server.delete_response(&path, Some(alice)).await;
    assert_eq!(cancelled.status().as_u16(), 202);
    let accepted: Value = cancelled.json().await.expect("a JSON body");
    assert_eq!(accepted["status"], "cancelling", "{accepted}");
    crate::openapi::Schemas::new().check("EvalCancelAccepted", &accepted);
    let run = wait_over(&server, &id, Some(alice)).await;
    assert_eq!(run["status"], "cancelled", "{run}");
    let done = run["done"].as_u64().expect("done");
    assert!(
        (1..20).contains(&done),
        "finished results kept, the rest not run: {done}"
    );
    assert_eq!(run["results"].as_array().map(Vec::len), Some(done as usize));

    // A run that is over is deleted with its files.
    assert_eq!(server.delete(&path, Some(alice)).await, 204);
    assert_eq!(server.get(&path, Some(alice)).await.0, 404);
    assert!(!server.dir.path().join("evals").join(&id).exists());
    server.shutdown().await;
}

#[tokio::test]
async fn a_failing_endpoint_is_recorded_per_problem() {
    let solver = WellBehaved::new(1);
    let failing = FnPolicy(move |req: &PolicyRequest| {
        if req.has_native_tools() {
            deepsolve_testkit::Policy::reply(&solver, req)
        } else {
            Reply::status(500, "the plain endpoint is down")
        }
    });
    let server = start(failing, Options::default()).await.server;
    let (status, created) = server
        .post("/api/v1/evals", json!({"data": set_of(2)}), None)
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().expect("id").to_string();
    let run = wait_over(&server, &id, None).await;
    assert_eq!(run["status"], "finished", "{run}");
    let results = run["results"].as_array().expect("results");
    assert_eq!(results.len(), 4);
    for row in results {
        if row["mode"] == "plain" {
            assert_eq!(row["error"]["kind"], "server", "{row}");
        } else {
            assert!(row["error"].is_null(), "{row}");
            assert!(row["turn_id"].is_string(), "{row}");
        }
    }
    let plain = run["tallies"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["mode"] == "plain"))
        .cloned()
        .expect("plain tally");
    assert_eq!(plain["errors"], 2);
    server.shutdown().await;
}

#[tokio::test]
async fn runs_left_running_are_interrupted_at_the_next_start_with_their_results() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("ev_0123abcd");
    std::fs::create_dir_all(&dir).expect("dir");
    let meta = json!({
        "id": "ev_0123abcd", "owner": "local", "set": "s.jsonl", "source": "upload",
        "modes": ["plain"], "problems": 2, "limit": null, "sample": null, "seed": null,
        "concurrency": 1, "model": "m", "status": "running", "created_at": 1
    });
    std::fs::write(dir.join("eval.json"), meta.to_string()).expect("meta");
    let record = json!({"id": "p1", "mode": "plain", "expected": "42", "answer": "42",
        "extraction": "boxed", "correct": true, "judged": "exact", "rounds": 1,
        "prompt_tokens": 5, "completion_tokens": 5, "wall_ms": 3, "stop": "stop", "language": "en"});
    std::fs::write(dir.join("results.jsonl"), format!("{record}\n")).expect("results");

    let server = start(
        policy(Duration::ZERO),
        Options {
            config: Some(deepsolve_server::ServerConfig {
                evals: deepsolve_server::evals::EvalConfig {
                    root: Some(root.path().to_path_buf()),
                    ..Default::default()
                },
                ..Default::default()
            }),
            ..Options::default()
        },
    )
    .await
    .server;
    let (status, run) = server.get("/api/v1/evals/ev_0123abcd", None).await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "interrupted");
    assert_eq!(run["done"], 1);
    assert_eq!(run["report"]["modes"][0]["correct"], 1);
    server.shutdown().await;
}
