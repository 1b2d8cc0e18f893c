//! `tools.disabled` through the real `deepsolve` binary against the mock model: the automatic
//! code tools switched off from the environment (never offered to the model, and `doctor`
//! says why), a `--tool` asking for a disabled tool refused with the reason, and the names
//! checked (an unknown tool, a solve tool).

use crate::support::Isolated;
use deepsolve_testkit::*;
use serde_json::Value;

fn solve(env: &Isolated, server: &MockServer, extra: &[&str]) -> std::process::Output {
    env.solve(server)
        .arg("--json")
        .args(extra)
        .arg("Solve x + 1 = 3.")
        .output()
        .expect("run deepsolve")
}

/// The tools the model was offered, per request (native protocol: the request's `tools`).
fn offered(server: &MockServer) -> Vec<Vec<String>> {
    server
        .requests()
        .iter()
        .map(|r| {
            r.body["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .collect()
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn disabled_code_tools_are_never_offered_and_doctor_says_why() {
    let server = MockServer::policy(WellBehaved::new(1).with_work_tool(None));
    let env = Isolated::new();
    // The control: without the setting, this machine (bubblewrap) offers the code tools.
    let out = solve(&env, &server, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(offered(&server)[0].contains(&"code_execution".to_string()));

    let server = MockServer::policy(WellBehaved::new(1).with_work_tool(None));
    let out = {
        let mut cmd = env.command();
        cmd.env("DEEPSOLVE_TOOLS__DISABLED", "code_execution, exec")
            .args(["solve", "--json", "--base-url", &server.url()])
            .args(["--model", "mock-model", "Solve x + 1 = 3."]);
        cmd.output().expect("run deepsolve")
    };
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let started = events.iter().find(|e| e["type"] == "turn_started").unwrap();
    let tools = started["tools"].as_array().unwrap();
    assert!(
        !tools.iter().any(|t| t == "code_execution" || t == "exec"),
        "{tools:?}"
    );
    for request in offered(&server) {
        assert!(
            !request.iter().any(|t| t == "code_execution" || t == "exec"),
            "{request:?}"
        );
    }
    server.assert_clean();

    let out = env
        .command()
        .env("DEEPSOLVE_TOOLS__DISABLED", "code_execution")
        .args([
            "doctor",
            "--base-url",
            &server.url(),
            "--model",
            "mock-model",
        ])
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        stderr_of(&out)
    );
    assert!(
        all.contains("code_execution (automatic) is not mounted: disabled by tools.disabled"),
        "{all}"
    );
}

#[test]
fn asking_for_a_disabled_tool_is_refused_with_the_reason() {
    let server = MockServer::policy(WellBehaved::new(1).with_work_tool(None));
    let env = Isolated::new();
    std::fs::write(
        &env.config,
        "tools:\n  enabled: [reason]\n  disabled: [reason]\n",
    )
    .unwrap();
    // Disabled wins over `tools.enabled`: the turn runs, without it.
    let out = solve(&env, &server, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(!offered(&server)[0].contains(&"reason".to_string()));
    // And over a turn's own request: refused, with the reason.
    let out = solve(&env, &server, &["--tool", "reason"]);
    assert_ne!(out.status.code(), Some(0));
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("the tool 'reason' is not available: disabled by tools.disabled"),
        "{stderr}"
    );
}

#[test]
fn unknown_and_solve_tools_cannot_be_disabled() {
    let server = MockServer::policy(WellBehaved::new(1).with_work_tool(None));
    let env = Isolated::new();
    let out = solve(&env, &server, &["--set", "tools.disabled=code_exec"]);
    assert_ne!(out.status.code(), Some(0));
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("tools.disabled: unknown tool 'code_exec' (known: code_execution, exec"),
        "{stderr}"
    );
    let out = solve(&env, &server, &["--set", "tools.disabled=solve_plan"]);
    assert_ne!(out.status.code(), Some(0));
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("tools.disabled: 'solve_plan' cannot be disabled: the solve tools"),
        "{stderr}"
    );
    assert_eq!(server.call_count(), 0, "no turn started");
}
