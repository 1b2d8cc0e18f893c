//! Operators' prompt overrides through the real `deepsolve` binary: a playbook per language
//! reaches the system message of that language's turns only, the mounted tools' lines go where
//! `{tools}` says, a text from `prompts/<lang>/` replaces the built-in one, `settings get
//! prompts` says what is overridden and from where, and mistakes are clear errors.

use deepsolve_testkit::{MockServer, WellBehaved};
use serde_json::Value;

use crate::support::Isolated;

/// The system message of every request the mock received.
fn system_messages(mock: &MockServer) -> Vec<String> {
    mock.requests()
        .iter()
        .filter_map(|r| r.body["messages"][0]["content"].as_str().map(String::from))
        .collect()
}

/// `deepsolve solve` in `lang` against `mock`, with the `reason` tool mounted; its stderr when
/// it fails.
fn solve(env: &Isolated, mock: &MockServer, lang: &str) -> Result<(), String> {
    let out = env
        .command()
        .args(["solve", "What is 6*7?", "--lang", lang, "--tool", "reason"])
        .args(["--base-url", &mock.url(), "--model", "mock-model"])
        .output()
        .expect("run solve");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

const ZH_PLAYBOOK: &str = "ZH-PLAYBOOK 先调用 solve_plan。\n可用工具：\n{tools}\n最后作答。";

#[test]
fn an_override_reaches_the_system_message_of_its_language_only() {
    let env = Isolated::new();
    std::fs::write(
        &env.config,
        format!(
            "prompts:\n  solve:\n    zh:\n      system: |\n{}\n",
            ZH_PLAYBOOK
                .lines()
                .map(|l| format!("        {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        ),
    )
    .expect("settings");
    let mock = MockServer::policy(WellBehaved::new(1).with_work_tool(None));

    solve(&env, &mock, "zh").expect("zh turn");
    let zh = system_messages(&mock);
    assert!(!zh.is_empty());
    // Byte-stable for the turn: every request of it carries the same system message.
    assert!(zh.iter().all(|s| s == &zh[0]));
    let system = &zh[0];
    assert!(
        system.starts_with("ZH-PLAYBOOK 先调用 solve_plan。\n可用工具：\n   - "),
        "{system}"
    );
    // The mounted tool's own line is where `{tools}` was, then the override goes on.
    let tools_at = system.find("`reason`").expect("the reason tool is listed");
    assert!(tools_at < system.find("最后作答。").expect("the override's end"));
    assert!(!system.contains("{tools}"));

    let before = mock.requests().len();
    solve(&env, &mock, "en").expect("en turn");
    let en: Vec<String> = system_messages(&mock).split_off(before);
    assert!(!en.is_empty());
    assert!(en.iter().all(|s| !s.contains("ZH-PLAYBOOK")), "{}", en[0]);
    assert!(en[0].starts_with("You are deepsolve"), "{}", en[0]);
}

#[test]
fn a_text_from_the_prompts_directory_replaces_its_built_in_one_and_is_listed() {
    let env = Isolated::new();
    let dir = env.path().join("prompts/en");
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("playbook.md"), "EN-FILE-PLAYBOOK: be brief.\n").expect("file");
    let mock = MockServer::policy(WellBehaved::new(1).with_work_tool(None));
    let out = env
        .command()
        .args(["solve", "What is 6*7?", "--lang", "en", "--tool", "reason"])
        .args(["--base-url", &mock.url(), "--model", "mock-model"])
        .output()
        .expect("solve");
    assert!(out.status.success());
    // No `solve_plan` in it: a warning on load, and the turn still runs.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("never mentions solve_plan"), "{stderr}");
    let system = &system_messages(&mock)[0];
    // No marker: the tool lines are appended after the override.
    assert!(
        system.starts_with(
            "EN-FILE-PLAYBOOK: be brief.\n\nThe tools you can use in this turn:\n   - `"
        ),
        "{system}"
    );
    assert!(system.contains("\n   - `reason`"), "{system}");

    let out = env
        .command()
        .args(["settings", "get", "prompts"])
        .output()
        .expect("get");
    assert!(out.status.success());
    let shown: Value = serde_json::from_slice(&out.stdout).expect("json");
    let listed = &shown["overridden"][0];
    assert_eq!(listed["language"], "en");
    assert_eq!(listed["name"], "playbook");
    assert!(
        listed["from"]
            .as_str()
            .is_some_and(|f| f.ends_with("prompts/en/playbook.md")),
        "{shown}"
    );
    assert_eq!(listed["chars"], 27);
}

#[test]
fn an_unknown_prompt_name_and_an_oversized_override_are_clear_errors() {
    let env = Isolated::new();
    let dir = env.path().join("prompts/zh");
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("nudge_act_fast.md"), "快").expect("file");
    let mock = MockServer::policy(WellBehaved::new(1).with_work_tool(None));
    let err = solve(&env, &mock, "zh").expect_err("unknown name");
    assert!(
        err.contains("nudge_act_fast.md") && err.contains("unknown prompt name 'nudge_act_fast'"),
        "{err}"
    );
    assert!(
        err.contains("nudge_act_now"),
        "the valid names are listed: {err}"
    );
    std::fs::remove_file(dir.join("nudge_act_fast.md")).expect("rm");

    let big = "x".repeat(64 * 1024 + 1);
    std::fs::write(
        &env.config,
        format!("prompts:\n  solve:\n    system: {big}\n"),
    )
    .expect("cfg");
    let err = solve(&env, &mock, "en").expect_err("too large");
    assert!(
        err.contains("prompts.solve.system") && err.contains("65537 bytes, over the cap of 65536"),
        "{err}"
    );
    assert!(mock.requests().is_empty(), "nothing was sent");
}
