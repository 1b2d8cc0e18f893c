//! Command-line turns are recorded in the store `serve` uses: `-c` follows up with the
//! earlier turns in the request, `history` lists them, `show` replays one, a killed turn is
//! interrupted and `resume` finishes it, and the server's history has them.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use deepsolve_testkit::*;
use serde_json::Value;

use crate::support::Isolated as Env;

fn history(env: &Env) -> Vec<Value> {
    let out = env.command().args(["history", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_follow_up_sees_the_previous_answer_and_history_and_show_list_them() {
    let env = Env::new();
    let first = MockServer::policy(WellBehaved::new(1));
    let out = env.solve(&first).arg("Solve x + 1 = 2.").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let answer = String::from_utf8(out.stdout).unwrap();

    let second = MockServer::policy(WellBehaved::new(1));
    env.solve(&second)
        .args(["-c", "Now solve x + 2 = 3."])
        .assert()
        .code(0);
    let request = second.requests()[0].body.to_string();
    let first_line = answer.lines().next().unwrap();
    assert!(request.contains("Solve x + 1 = 2."), "{request}");
    assert!(
        request.contains(&serde_json::to_string(first_line).unwrap()[1..first_line.len()]),
        "the previous answer is in the follow-up's request: {request}"
    );

    let turns = history(&env);
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[0]["problem"], "Now solve x + 2 = 3.");
    assert_eq!(turns[0]["session_id"], turns[1]["session_id"]);
    assert_eq!(turns[1]["status"], "finished");
    assert_eq!(turns[1]["stop_reason"], "answered");
    let text = env.command().args(["history", "-n", "1"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&text.stdout).lines().count(), 1);

    // `show` replays the first turn: its progress on stderr, its answer on stdout.
    let id = turns[1]["id"].as_str().unwrap();
    let shown = env.command().args(["show", id]).output().unwrap();
    assert_eq!(shown.status.code(), Some(0));
    assert_eq!(String::from_utf8(shown.stdout).unwrap(), answer);
    let stderr = String::from_utf8_lossy(&shown.stderr);
    assert!(
        stderr.contains("Plan:") && stderr.contains("✓ S1"),
        "{stderr}"
    );
    // `--json`: the stored events, in order.
    let json = env.command().args(["show", "--json", id]).output().unwrap();
    let events: Vec<Value> = String::from_utf8_lossy(&json.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events[0]["type"], "turn_started");
    assert_eq!(events.last().unwrap()["type"], "turn_finished");
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], i as u64);
    }
    // An unknown session or turn is a usage error naming it.
    let out = env
        .solve(&first)
        .args(["--session", "ses_nope", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ses_nope"));
    let out = env.command().args(["show", "turn_nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Plays `inner`, but once a step is done its next reply waits a minute: a turn that is
/// stuck after its first checkpoint, to be killed there.
fn stalls_after_a_step(inner: WellBehaved) -> impl Policy {
    FnPolicy(move |req: &PolicyRequest| {
        let reply = inner.reply(req);
        match req.plan() {
            Some(plan) if plan.done_steps().count() > 0 => {
                Reply::delayed(Duration::from_secs(60), reply)
            }
            _ => reply,
        }
    })
}

/// Poll the stored log of the running turn `id` (`show --json`) until it holds a checkpoint.
fn wait_for_stored_checkpoint(env: &Env, id: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let out = env.command().args(["show", id, "--json"]).output().unwrap();
        let stored = String::from_utf8_lossy(&out.stdout);
        if stored.lines().any(|l| l.contains(r#""type":"checkpoint""#)) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the checkpoint was never stored: {stored}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_killed_turn_is_interrupted_and_resume_finishes_it_from_its_checkpoint() {
    let env = Env::new();
    let stalling = MockServer::policy(stalls_after_a_step(WellBehaved::new(3)));
    let mut child = env
        .std_solve(&stalling)
        .args(["--json", "Solve it in three steps."])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut before = Vec::new();
    for line in lines.by_ref() {
        let event: Value = serde_json::from_str(&line.unwrap()).unwrap();
        let checkpoint = event["type"] == "checkpoint";
        before.push(event);
        if checkpoint {
            break;
        }
    }
    // The log is written in batches beside the display: wait for the checkpoint to be stored
    // (the turn stalls after it), so the kill leaves it in the log to resume from.
    let id = before[0]["turn_id"].as_str().unwrap().to_string();
    wait_for_stored_checkpoint(&env, &id);
    // SIGKILL: no handler runs, the turn stays `running` in the store.
    child.kill().unwrap();
    child.wait().unwrap();

    let turns = history(&env);
    assert_eq!(turns[0]["status"], "interrupted", "{turns:?}");
    assert_eq!(turns[0]["id"], id.as_str());
    let shown = env.command().args(["show", &id]).output().unwrap();
    assert!(String::from_utf8_lossy(&shown.stderr).contains("deepsolve resume"));

    let model = MockServer::policy(WellBehaved::new(3));
    let out = env
        .command()
        .args([
            "resume",
            &id,
            "--json",
            "--base-url",
            &model.url(),
            "--model",
            "mock-model",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The log goes on where it stopped, from the checkpoint: S1 is not worked again.
    assert_eq!(after[0]["type"], "turn_started");
    assert_eq!(after[0]["resumed"], true);
    let last_before = before.last().unwrap()["seq"].as_u64().unwrap();
    assert!(after[0]["seq"].as_u64().unwrap() > last_before);
    let plan = model.policy_requests()[0]
        .plan()
        .expect("the resumed request has the plan");
    assert_eq!(plan.done_steps().count(), 1);
    assert_eq!(after.last().unwrap()["stop_reason"], "answered");
    assert_eq!(history(&env)[0]["status"], "finished");
    // Only an interrupted turn resumes.
    let again = env
        .command()
        .args([
            "resume",
            &id,
            "--base-url",
            &model.url(),
            "--model",
            "mock-model",
        ])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    model.assert_clean();
}

#[tokio::test]
async fn the_servers_history_shows_the_turns_solved_here() {
    let home = tempfile::tempdir().unwrap();
    let model = MockServer::policy(WellBehaved::new(1));
    let out = crate::support::deepsolve(home.path())
        .args(["solve", "--base-url", &model.url(), "--model", "mock-model"])
        .arg("Solved on the command line.")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let db = format!(
        "sqlite://{}",
        home.path().join("data/deepsolve/deepsolve.db").display()
    );
    let server = crate::support::Server::start(home.path(), &db, &model.url(), "node-a");
    let sessions: Value = reqwest::get(server.url("/api/v1/sessions"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        sessions["sessions"][0]["title"],
        "Solved on the command line."
    );
}
