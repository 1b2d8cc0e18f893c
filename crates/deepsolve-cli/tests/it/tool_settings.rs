//! A tool's own settings section through the real `deepsolve` binary: `tools.reason` (declared
//! by the `reason` tool in the catalog) is written by `settings set`, read by `settings get`,
//! overridden by `DEEPSOLVE_TOOLS__REASON__MAX_TOKENS` and `--set`, and checked strictly with
//! the full key, its source and the nearest known key.

use crate::support::Isolated;

fn stdout_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).trim().to_string()
}

#[test]
fn settings_set_and_get_a_tool_key_clamped() {
    let env = Isolated::new();
    let out = env
        .command()
        .args(["settings", "set", "tools.reason.max_tokens=900000"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("tools.reason.max_tokens = 900000 is outside 1..=200000; using 200000"),
        "{stderr}"
    );
    let out = env
        .command()
        .args(["settings", "get", "tools.reason"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let shown: serde_json::Value = serde_json::from_str(&stdout_of(&out)).unwrap();
    assert_eq!(shown, serde_json::json!({"max_tokens": 200000}));

    let out = env
        .command()
        .env("DEEPSOLVE_TOOLS__REASON__MAX_TOKENS", "5000")
        .args(["settings", "get", "tools.reason.max_tokens"])
        .output()
        .unwrap();
    assert_eq!(stdout_of(&out), "5000");
    let out = env
        .command()
        .env("DEEPSOLVE_TOOLS__REASON__MAX_TOKENS", "5000")
        .args(["settings", "get", "tools.reason.max_tokens"])
        .args(["--set", "tools.reason.max_tokens=7000"])
        .output()
        .unwrap();
    assert_eq!(stdout_of(&out), "7000");
}

#[test]
fn mistakes_in_a_tool_section_are_named_with_their_source() {
    let env = Isolated::new();
    std::fs::write(&env.config, "tools:\n  reason:\n    max_token: 3\n").unwrap();
    let out = env.command().args(["settings", "get"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = stderr_of(&out);
    let expected = format!(
        "unknown setting 'tools.reason.max_token' in {} (known in tools.reason: max_tokens) — \
         did you mean 'tools.reason.max_tokens'?",
        env.config.display()
    );
    assert!(stderr.ends_with(&expected), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    std::fs::write(&env.config, "").unwrap();
    let out = env
        .command()
        .env("DEEPSOLVE_TOOLS__REASON__MAX_TOKENS", "lots")
        .args(["settings", "get"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains(
            "setting 'tools.reason.max_tokens' from environment variable \
             DEEPSOLVE_TOOLS__REASON__MAX_TOKENS must be a whole number, got \"lots\""
        ),
        "{stderr}"
    );

    let out = env
        .command()
        .args(["settings", "set", "tools.reasn.max_tokens=3"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("unknown setting 'tools.reasn.max_tokens' on the command line (known in tools: enabled, disabled, sandbox, reason, web_search)")
            && stderr.ends_with(" — did you mean 'tools.reason.max_tokens'?"),
        "{stderr}"
    );
}
