//! `deepsolve settings import-deeptutor DIR` through the real binary, on settings files in the
//! reference's layout (`data/user/settings/agents.yaml` and `main.yaml`, written here from its
//! documented shape): what it takes and skips, the clamp, idempotence, the imported playbook
//! in the next turn's request; and the legacy `max_iterations_per_step` accepted with a warning.

use deepsolve_testkit::{MockServer, WellBehaved};
use serde_json::{Value, json};

use crate::support::Isolated;

const AGENTS_YAML: &str = "\
# data/user/settings/agents.yaml
capabilities:
  solve:
    temperature: 0.2
    max_tokens: 4096
  chat:
    temperature: 0.7
";

const MAIN_YAML: &str = "\
# data/user/settings/main.yaml
system:
  language: zh
capabilities:
  solve:
    max_rounds: 99
    max_replans: 3
    max_iterations_per_step: 5
prompts:
  solve:
    system: |
      IMPORTED PLAYBOOK. Call solve_plan first.
      {tools}
";

fn output(out: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_deeptutor_directory_imports_in_one_command_and_twice_is_the_same() {
    let env = Isolated::new();
    let root = env.path().join("DeepTutor");
    let dir = root.join("data/user/settings");
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("agents.yaml"), AGENTS_YAML).expect("agents");
    std::fs::write(dir.join("main.yaml"), MAIN_YAML).expect("main");

    let import = || {
        env.command()
            .args(["settings", "import-deeptutor"])
            .arg(&root)
            .output()
            .expect("import")
    };
    let out = import();
    let (stdout, stderr) = output(&out);
    assert!(out.status.success(), "{stderr}");
    for line in [
        "took solve.temperature = 0.2 (from agents.yaml capabilities.solve.temperature)",
        "took solve.max_tokens = 4096 (from agents.yaml capabilities.solve.max_tokens)",
        "took solve.max_rounds = 99 (from main.yaml capabilities.solve.max_rounds)",
        "took solve.max_replans = 3 (from main.yaml capabilities.solve.max_replans)",
        "took prompts.solve.system = 50 characters (from main.yaml prompts.solve.system)",
        "skipped agents.yaml capabilities.chat: only the solve capability carries over",
        "skipped main.yaml system: not a solve setting",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in\n{stdout}");
    }
    assert!(
        stderr.contains("max_iterations_per_step is no longer used and is ignored"),
        "{stderr}"
    );
    assert!(
        stderr.contains("solve.max_rounds = 99 is outside 1..=50; using 50"),
        "{stderr}"
    );
    let written = std::fs::read_to_string(&env.config).expect("settings");

    let out = env
        .command()
        .args(["settings", "get", "solve"])
        .output()
        .expect("get");
    let solve: Value = serde_json::from_slice(&out.stdout).expect("json");
    for (key, value) in [
        ("temperature", json!(0.2)),
        ("max_tokens", json!(4096)),
        ("max_rounds", json!(50)),
        ("max_replans", json!(3)),
    ] {
        assert_eq!(solve[key], value, "{key}");
    }

    // Twice: the same file.
    let again = import();
    assert!(again.status.success());
    assert_eq!(
        std::fs::read_to_string(&env.config).expect("settings"),
        written
    );

    // The imported playbook is the next turn's system prompt, in every language.
    let mock = MockServer::policy(WellBehaved::new(1).with_work_tool(None));
    for lang in ["en", "zh"] {
        let before = mock.requests().len();
        let out = env
            .command()
            .args(["solve", "What is 6*7?", "--lang", lang])
            .args(["--base-url", &mock.url(), "--model", "mock-model"])
            .output()
            .expect("solve");
        assert!(out.status.success(), "{}", output(&out).1);
        let system = mock.requests()[before].body["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            system.starts_with("IMPORTED PLAYBOOK. Call solve_plan first.\n"),
            "{lang}: {system}"
        );
    }
}

#[test]
fn a_directory_without_deeptutor_settings_is_a_clear_error() {
    let env = Isolated::new();
    let out = env
        .command()
        .args(["settings", "import-deeptutor"])
        .arg(env.path())
        .output()
        .expect("import");
    assert!(!out.status.success());
    let (_, stderr) = output(&out);
    assert!(
        stderr.contains("holds no DeepTutor settings") && stderr.contains("data/user/settings"),
        "{stderr}"
    );
}

#[test]
fn the_legacy_max_iterations_per_step_is_accepted_and_ignored_with_a_warning() {
    let env = Isolated::new();
    std::fs::write(
        &env.config,
        "solve:\n  max_rounds: 9\n  max_iterations_per_step: 5\n",
    )
    .expect("settings");
    let out = env
        .command()
        .args(["settings", "get", "solve.max_rounds"])
        .output()
        .expect("get");
    let (stdout, stderr) = output(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout.trim(), "9");
    assert!(
        stderr.contains("solve.max_iterations_per_step is no longer used and is ignored"),
        "{stderr}"
    );
}
