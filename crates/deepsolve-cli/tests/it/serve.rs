//! `deepsolve serve` and `deepsolve users` through the real binary: a whole solve over HTTP
//! and SSE, SIGKILL in the middle of a turn and its resume, tokens, and the loopback-only rule.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use deepsolve_testkit::{FnPolicy, MockServer, Policy, PolicyRequest, Reply, WellBehaved};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::support::{Server, deepsolve};

fn parse_block(block: &str) -> Option<(u64, Value)> {
    let mut id = None;
    let mut event = None;
    let mut data = None;
    for line in block.lines() {
        if let Some(v) = line.strip_prefix("id:") {
            id = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("data:") {
            data = serde_json::from_str(v.trim()).ok();
        } else if let Some(v) = line.strip_prefix("event:") {
            event = Some(v.trim().to_string());
        }
    }
    let data: Value = data?;
    // Each frame is named by its event's type (browsers' `addEventListener(type, …)`).
    assert_eq!(event.as_deref(), data["type"].as_str(), "{block}");
    Some((id?, data))
}

/// Read SSE events until `stop` says so or the stream ends.
pub(crate) async fn read_events(
    http: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    stop: impl FnMut(&Value) -> bool,
) -> Vec<(u64, Value)> {
    read_events_after(http, url, token, None, stop).await
}

/// Like [`read_events`], reconnecting after `last_event_id` the way browsers do.
async fn read_events_after(
    http: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    last_event_id: Option<u64>,
    mut stop: impl FnMut(&Value) -> bool,
) -> Vec<(u64, Value)> {
    let mut req = http.get(url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(id) = last_event_id {
        req = req.header("Last-Event-ID", id.to_string());
    }
    let resp = req.send().await.expect("sse");
    assert_eq!(resp.status().as_u16(), 200);
    let mut stream = resp.bytes_stream();
    let mut buf = String::new();
    let mut out = Vec::new();
    loop {
        let chunk = tokio::time::timeout(Duration::from_secs(60), stream.next())
            .await
            .expect("events keep coming");
        let Some(chunk) = chunk else { return out };
        buf.push_str(&String::from_utf8_lossy(&chunk.expect("chunk")));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            if let Some(event) = parse_block(&block) {
                let done = stop(&event.1);
                out.push(event);
                if done {
                    return out;
                }
            }
        }
    }
}

/// A turn's view once it is no longer running: `turn_finished` reaches readers before the
/// server has stored the turn's files and recorded its end.
pub(crate) async fn view_when_done(http: &reqwest::Client, url: &str) -> Value {
    for _ in 0..600 {
        let view: Value = http
            .get(url)
            .send()
            .await
            .expect("get")
            .json()
            .await
            .expect("json");
        if view["status"] != "running" {
            return view;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{url} is still running");
}

fn slow(delay: Duration, inner: WellBehaved) -> impl Policy {
    FnPolicy(move |req: &PolicyRequest| Reply::delayed(delay, inner.reply(req)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_runs_a_whole_solve_over_http_and_sse() {
    let home = tempfile::tempdir().expect("home");
    let mock = MockServer::policy(WellBehaved::new(3).with_work_tool(Some("reason")));
    // The default database: an SQLite file in the data directory, created on first start.
    let mut cmd_db = String::from("sqlite://");
    cmd_db.push_str(&home.path().join("ds.db").display().to_string());
    let server = Server::start(home.path(), &cmd_db, &mock.url(), "node-1");
    let http = reqwest::Client::new();
    let health: Value = http
        .get(server.url("/healthz"))
        .send()
        .await
        .expect("healthz")
        .json()
        .await
        .expect("json");
    assert_eq!(health["status"], "ok");
    let resp = http
        .post(server.url("/api/v1/turns"))
        .json(&json!({"problem": "Solve x^2 - 5x + 6 = 0", "tools": ["reason"]}))
        .send()
        .await
        .expect("post");
    assert_eq!(resp.status().as_u16(), 201);
    let created: Value = resp.json().await.expect("json");
    let turn = created["turn_id"].as_str().expect("turn id");
    let events = read_events(
        &http,
        &server.url(&format!("/api/v1/turns/{turn}/events")),
        None,
        |_| false,
    )
    .await;
    for (i, (id, data)) in events.iter().enumerate() {
        assert_eq!((*id, data["seq"].as_u64()), (i as u64, Some(i as u64)));
    }
    let last = &events.last().expect("events").1;
    assert_eq!(last["type"], "turn_finished");
    assert_eq!(last["stop_reason"], "answered");
    let reasons = events
        .iter()
        .filter(|(_, e)| e["type"] == "tool_result" && e["name"] == "reason");
    assert_eq!(reasons.count(), 3, "each step worked with the reason tool");
    mock.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_turn_leaves_an_interrupted_turn_that_resumes_from_its_last_finished_step() {
    let home = tempfile::tempdir().expect("home");
    let mock = MockServer::policy(slow(
        Duration::from_millis(250),
        WellBehaved::new(4).with_work_tool(Some("reason")),
    ));
    let db = format!("sqlite://{}", home.path().join("crash.db").display());
    let mut server = Server::start(home.path(), &db, &mock.url(), "node-1");
    let http = reqwest::Client::new();
    let created: Value = http
        .post(server.url("/api/v1/turns"))
        .json(&json!({"problem": "a long one", "tools": ["reason"]}))
        .send()
        .await
        .expect("post")
        .json()
        .await
        .expect("json");
    let turn = created["turn_id"].as_str().expect("turn id").to_string();
    let events_path = format!("/api/v1/turns/{turn}/events");
    // Kill after the second step's checkpoint: a client saw it, so it is in the log.
    let mut checkpoints = 0;
    let seen = read_events(&http, &server.url(&events_path), None, |e| {
        checkpoints += usize::from(e["type"] == "checkpoint");
        checkpoints == 2
    })
    .await;
    server.kill9();

    let server = Server::start(home.path(), &db, &mock.url(), "node-1");
    let view: Value = http
        .get(server.url(&format!("/api/v1/turns/{turn}")))
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    assert_eq!(view["status"], "interrupted", "{view}");
    // The whole log replays and then ends (the turn is not running any more); everything a
    // client saw before the kill is in it — events reach clients only after they are stored.
    let replay = read_events(&http, &server.url(&events_path), None, |_| false).await;
    assert!(
        replay.len() >= seen.len(),
        "{} < {}",
        replay.len(),
        seen.len()
    );
    assert_eq!(&replay[..seen.len()], &seen[..]);
    assert!(replay.iter().all(|(_, e)| e["type"] != "turn_finished"));
    let done_before: Vec<String> = seen
        .iter()
        .filter(|(_, e)| e["type"] == "step_finished")
        .filter_map(|(_, e)| e["step_id"].as_str().map(str::to_string))
        .collect();
    assert_eq!(done_before.len(), 2, "{seen:?}");
    let requests_before = mock.requests().len();

    let resp = http
        .post(server.url(&format!("/api/v1/turns/{turn}/resume")))
        .send()
        .await
        .expect("resume");
    assert_eq!(resp.status().as_u16(), 202);
    let resumed: Value = resp.json().await.expect("json");
    assert_eq!(resumed["turn_id"], json!(turn));
    assert_eq!(resumed["session_id"], created["session_id"]);
    let again = http
        .post(server.url(&format!("/api/v1/turns/{turn}/resume")))
        .send()
        .await
        .expect("resume twice");
    assert_eq!(
        again.status().as_u16(),
        409,
        "a running turn is not resumed"
    );

    // A reader that reconnects where it stopped sees the continuation, gapless, to the end.
    let last_seen = replay.last().map(|(id, _)| *id).expect("events");
    let rest = read_events_after(
        &http,
        &server.url(&events_path),
        None,
        Some(last_seen),
        |_| false,
    )
    .await;
    let (first_id, first) = rest.first().expect("continuation");
    assert_eq!(*first_id, last_seen + 1);
    assert_eq!(
        (&first["type"], &first["resumed"]),
        (&json!("turn_started"), &json!(true))
    );
    let restored = &rest.get(1).expect("plan").1;
    assert_eq!(
        restored["type"], "plan",
        "the restored checklist comes first"
    );
    for step in restored["steps"].as_array().expect("steps") {
        let id = step["id"].as_str().unwrap_or_default().to_string();
        let done = step["status"] == "done";
        assert_eq!(done, done_before.contains(&id), "{restored}");
    }
    let last = &rest.last().expect("events").1;
    assert_eq!(
        (last["type"].as_str(), last["stop_reason"].as_str()),
        (Some("turn_finished"), Some("answered"))
    );

    // The whole log: gapless from 0, and every step finished exactly once.
    let all = read_events(&http, &server.url(&events_path), None, |_| false).await;
    for (i, (id, data)) in all.iter().enumerate() {
        assert_eq!((*id, data["seq"].as_u64()), (i as u64, Some(i as u64)));
    }
    assert_eq!(all.len(), replay.len() + rest.len());
    let finished: Vec<&str> = all
        .iter()
        .filter(|(_, e)| e["type"] == "step_finished")
        .filter_map(|(_, e)| e["step_id"].as_str())
        .collect();
    assert_eq!(finished.len(), 4, "{finished:?}");
    let mut unique = finished.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), 4, "no step finished twice: {finished:?}");

    // The model was not asked to work on a step that was finished before the kill.
    let after_restart: Vec<PolicyRequest> = mock.requests()[requests_before..]
        .iter()
        .map(|r| r.policy_request().expect("a chat request"))
        .collect();
    assert!(!after_restart.is_empty());
    for req in &after_restart {
        if req.is_subcall() {
            let text = req.last_user_text();
            assert!(
                done_before
                    .iter()
                    .all(|id| !text.contains(&format!("[{id}]"))),
                "a work call for a finished step after the resume: {text}"
            );
        } else if let Some(plan) = req.plan() {
            let done: Vec<&str> = plan.done_steps().map(|s| s.id.as_str()).collect();
            assert!(
                done_before.iter().all(|id| done.contains(&id.as_str())),
                "{plan:?}"
            );
        }
    }
    let view = view_when_done(&http, &server.url(&format!("/api/v1/turns/{turn}"))).await;
    assert_eq!(
        (view["status"].as_str(), view["stop_reason"].as_str()),
        (Some("finished"), Some("answered")),
        "{view}"
    );
    assert!(view["answer"].as_str().is_some_and(|a| !a.is_empty()));
    let steps = view["solve"]["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 4);
    assert!(steps.iter().all(|s| s["done"] == true), "{view}");
    mock.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_get_tokens_and_the_server_then_requires_them() {
    let home = tempfile::tempdir().expect("home");
    let db = format!("sqlite://{}", home.path().join("users.db").display());
    let mock = MockServer::policy(WellBehaved::new(1).with_work_tool(None));

    // No users: listening beyond loopback is refused with a clear reason.
    let out = deepsolve(home.path())
        .args(["serve", "--addr", "0.0.0.0:0", "--database", &db])
        .args(["--base-url", &mock.url(), "--model", "mock-model"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refusing to listen") && stderr.contains("users add"),
        "{stderr}"
    );

    let out = deepsolve(home.path())
        .args(["users", "add", "alice", "--database", &db])
        .output()
        .expect("users add");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(token.starts_with("dst_"));
    let again = deepsolve(home.path())
        .args(["users", "token", "alice", "--database", &db])
        .output()
        .expect("users token");
    let second = String::from_utf8_lossy(&again.stdout).trim().to_string();
    assert!(second.starts_with("dst_") && second != token);
    let dup = deepsolve(home.path())
        .args(["users", "add", "alice", "--database", &db])
        .output()
        .expect("dup");
    assert!(!dup.status.success());

    let server = Server::start(home.path(), &db, &mock.url(), "node-1");
    let http = reqwest::Client::new();
    let body = json!({"problem": "1+1"});
    let anon = http
        .post(server.url("/api/v1/turns"))
        .json(&body)
        .send()
        .await
        .expect("post");
    assert_eq!(anon.status().as_u16(), 401);
    for t in [&token, &second] {
        let ok = http
            .post(server.url("/api/v1/turns"))
            .bearer_auth(t)
            .json(&body)
            .send()
            .await
            .expect("post");
        assert_eq!(ok.status().as_u16(), 201);
    }
    signed_in_then_revoked(home.path(), &db, &server, &token).await;
}

/// A browser signs in with `token` and uses its cookie; `deepsolve users revoke alice` then
/// ends both the tokens and the browser session.
async fn signed_in_then_revoked(home: &Path, db: &str, server: &Server, token: &str) {
    let http = reqwest::Client::new();
    let login = http
        .post(server.url("/api/v1/auth/login"))
        .header("origin", &server.base)
        .json(&json!({"token": token}))
        .send()
        .await
        .expect("login");
    assert_eq!(login.status().as_u16(), 200);
    let set_cookie = login.headers()["set-cookie"].to_str().expect("cookie");
    let cookie = set_cookie
        .split(';')
        .next()
        .expect("cookie pair")
        .to_string();
    assert!(cookie.starts_with("deepsolve_session=dss_"), "{set_cookie}");
    let with_cookie = || {
        http.get(server.url("/api/v1/sessions"))
            .header("cookie", &cookie)
    };
    assert_eq!(
        with_cookie().send().await.expect("get").status().as_u16(),
        200
    );

    let out = deepsolve(home)
        .args(["users", "revoke", "alice", "--database", db])
        .output()
        .expect("users revoke");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("revoked") && stderr.contains("1 browser session"),
        "{stderr}"
    );
    assert_eq!(
        with_cookie().send().await.expect("get").status().as_u16(),
        401
    );
    let bearer = http
        .get(server.url("/api/v1/sessions"))
        .bearer_auth(token)
        .send()
        .await
        .expect("get");
    assert_eq!(bearer.status().as_u16(), 401);
    let unknown = deepsolve(home)
        .args(["users", "revoke", "nobody", "--database", db])
        .output()
        .expect("users revoke");
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no user named 'nobody'"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_sessions_live_in_postgres_too_and_revoke_ends_them() {
    let Some(db) = deepsolve_store::testing::scratch_postgres_from_env()
        .await
        .expect("DEEPSOLVE_TEST_POSTGRES_URL is set but unusable")
    else {
        eprintln!("skipped: DEEPSOLVE_TEST_POSTGRES_URL is not set (scripts/start-postgres)");
        return;
    };
    let home = tempfile::tempdir().expect("home");
    let mock = MockServer::policy(WellBehaved::new(1).with_work_tool(None));
    let out = deepsolve(home.path())
        .args(["users", "add", "alice", "--database", &db])
        .output()
        .expect("users add");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let server = Server::start(home.path(), &db, &mock.url(), "node-pg");
    signed_in_then_revoked(home.path(), &db, &server, &token).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_postgres_follow_each_others_turns() {
    let Some(db) = deepsolve_store::testing::scratch_postgres_from_env()
        .await
        .expect("DEEPSOLVE_TEST_POSTGRES_URL is set but unusable")
    else {
        eprintln!("skipped: DEEPSOLVE_TEST_POSTGRES_URL is not set (scripts/start-postgres)");
        return;
    };
    let home_a = tempfile::tempdir().expect("home");
    let home_b = tempfile::tempdir().expect("home");
    let mock = MockServer::policy(slow(
        Duration::from_millis(100),
        WellBehaved::new(3).with_work_tool(None),
    ));
    let a = Server::start(home_a.path(), &db, &mock.url(), "node-a");
    let b = Server::start(home_b.path(), &db, &mock.url(), "node-b");
    let http = reqwest::Client::new();
    let created: Value = http
        .post(a.url("/api/v1/turns"))
        .json(&json!({"problem": "scale out"}))
        .send()
        .await
        .expect("post to a")
        .json()
        .await
        .expect("json");
    let turn = created["turn_id"].as_str().expect("turn id").to_string();
    let path = format!("/api/v1/turns/{turn}/events");
    // Follow live through B while A runs the turn.
    let through_b = read_events(&http, &b.url(&path), None, |_| false).await;
    for (i, (id, _)) in through_b.iter().enumerate() {
        assert_eq!(*id, i as u64, "gapless through the other replica");
    }
    let last = &through_b.last().expect("events").1;
    assert_eq!(last["type"], "turn_finished");
    assert_eq!(last["stop_reason"], "answered");
    let through_a = read_events(&http, &a.url(&path), None, |_| false).await;
    assert_eq!(through_a, through_b);
    let view: Value = http
        .get(b.url(&format!("/api/v1/turns/{turn}")))
        .send()
        .await
        .expect("get on b")
        .json()
        .await
        .expect("json");
    assert_eq!(view["status"], "finished");

    // A cancel sent to B stops a turn that runs on A.
    let created: Value = http
        .post(a.url("/api/v1/turns"))
        .json(&json!({"problem": "cancel me from the other side"}))
        .send()
        .await
        .expect("post to a")
        .json()
        .await
        .expect("json");
    let turn = created["turn_id"].as_str().expect("turn id").to_string();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let resp = http
        .post(b.url(&format!("/api/v1/turns/{turn}/cancel")))
        .send()
        .await
        .expect("cancel on b");
    assert_eq!(resp.status().as_u16(), 202);
    let events = read_events(
        &http,
        &b.url(&format!("/api/v1/turns/{turn}/events")),
        None,
        |_| false,
    )
    .await;
    let last = &events.last().expect("events").1;
    assert_eq!(last["stop_reason"], "cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_cancels_running_turns_cleanly_and_records_them() {
    let home = tempfile::tempdir().expect("home");
    let mock = MockServer::policy(slow(
        Duration::from_millis(300),
        WellBehaved::new(6).with_work_tool(None),
    ));
    let db = format!("sqlite://{}", home.path().join("term.db").display());
    let mut server = Server::start(home.path(), &db, &mock.url(), "node-1");
    let http = reqwest::Client::new();
    let created: Value = http
        .post(server.url("/api/v1/turns"))
        .json(&json!({"problem": "long"}))
        .send()
        .await
        .expect("post")
        .json()
        .await
        .expect("json");
    let turn = created["turn_id"].as_str().expect("turn id").to_string();
    let events_url = server.url(&format!("/api/v1/turns/{turn}/events"));
    // A live reader is connected when the signal comes: the stop must not wait for it forever.
    let reader = {
        let http = http.clone();
        tokio::spawn(async move { read_events(&http, &events_url, None, |_| false).await })
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    let stopped = std::time::Instant::now();
    let term = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(term.success());
    let status = server.child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
    assert!(
        stopped.elapsed() < Duration::from_secs(10),
        "a prompt, clean stop"
    );
    let events = reader.await.expect("reader");
    let last = &events.last().expect("events").1;
    assert_eq!(
        (last["type"].as_str(), last["stop_reason"].as_str()),
        (Some("turn_finished"), Some("cancelled"))
    );

    let server = Server::start(home.path(), &db, &mock.url(), "node-1");
    let view: Value = http
        .get(server.url(&format!("/api/v1/turns/{turn}")))
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    assert_eq!(
        view["status"], "cancelled",
        "recorded before exit, not interrupted: {view}"
    );
}

/// The scripted solver, working each step with `code_execution` code that also writes a file.
fn writes_a_file() -> impl Policy {
    let inner = WellBehaved::new(1).with_work_tool(Some("code_execution"));
    FnPolicy(move |req: &PolicyRequest| {
        inner.reply(req).map_turn(|mut turn| {
            for (name, args) in &mut turn.tool_calls {
                if name == "code_execution" {
                    let mut parsed: Value = serde_json::from_str(args).expect("args json");
                    let code = parsed["code"].as_str().unwrap_or_default().to_string();
                    parsed["code"] =
                        json!(format!("{code}\nopen('answer.txt', 'w').write('x = 42')"));
                    *args = parsed.to_string();
                }
            }
            turn
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_mounts_the_sandboxed_code_tools_and_serves_their_files_as_downloads() {
    let home = tempfile::tempdir().expect("home");
    let mock = MockServer::policy(writes_a_file());
    let db = format!("sqlite://{}", home.path().join("code.db").display());
    let server = Server::start(home.path(), &db, &mock.url(), "node-1");
    let http = reqwest::Client::new();
    // No `tools` asked for: the code tools are mounted on every turn when the sandbox works.
    let created: Value = http
        .post(server.url("/api/v1/turns"))
        .json(&json!({"problem": "compute x"}))
        .send()
        .await
        .expect("post")
        .json()
        .await
        .expect("json");
    let turn = created["turn_id"].as_str().expect("turn id").to_string();
    let events = read_events(
        &http,
        &server.url(&format!("/api/v1/turns/{turn}/events")),
        None,
        |_| false,
    )
    .await;
    let ran = events.iter().any(|(_, e)| {
        e["type"] == "tool_result" && e["name"] == "code_execution" && e["ok"] == true
    });
    assert!(ran, "code_execution ran in the sandbox: {events:?}");
    let view = view_when_done(&http, &server.url(&format!("/api/v1/turns/{turn}"))).await;
    let artifact = view["artifacts"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["name"] == "answer.txt"))
        .cloned()
        .unwrap_or_else(|| panic!("answer.txt among the artifacts: {view}"));
    let resp = http
        .get(server.url(artifact["url"].as_str().expect("url")))
        .send()
        .await
        .expect("download");
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(
        resp.headers()["content-disposition"],
        "attachment; filename=\"answer.txt\""
    );
    assert_eq!(resp.text().await.expect("body"), "x = 42");
    mock.assert_clean();
}
