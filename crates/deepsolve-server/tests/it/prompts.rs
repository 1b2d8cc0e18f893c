//! The playbook per language over the settings endpoint: shown to anyone signed in, changed
//! and reset by an admin only (in one atomic write, capped), in force from the next turn of
//! that language and not the other's.

use deepsolve_store::Role;
use deepsolve_testkit::WellBehaved;
use serde_json::{Value, json};

use crate::support::{Options, TestServer, start};

const PATH: &str = "/api/v1/capabilities/settings";

fn playbook<'a>(view: &'a Value, language: &str) -> &'a Value {
    view["prompts"]["playbooks"]
        .as_array()
        .and_then(|all| all.iter().find(|p| p["language"] == language))
        .unwrap_or(&Value::Null)
}

/// The system message of the first request of a new turn in `language`.
async fn system_of_a_turn(s: &TestServer, language: &str, token: Option<&str>) -> String {
    let before = s.mock.requests().len();
    let (turn, _) = s
        .start_turn(
            json!({"problem": "What is 6*7?", "language": language}),
            token,
        )
        .await;
    s.wait_done(&turn, token).await;
    let requests = s.mock.requests();
    requests[before].body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_changes_a_language_s_playbook_for_its_next_turns_and_resets_it() {
    let started = start(
        WellBehaved::new(1).with_work_tool(None),
        Options {
            users: vec![("root", Role::Admin), ("eve", Role::User)],
            ..Options::default()
        },
    )
    .await;
    let s = &started.server;
    let (admin, user) = (
        Some(started.tokens[0].as_str()),
        Some(started.tokens[1].as_str()),
    );
    let (status, view) = s.get(PATH, user).await;
    assert_eq!(status, 200);
    for language in ["en", "zh"] {
        let shown = playbook(&view, language);
        assert_eq!(shown["from"], Value::Null, "built in");
        assert!(
            shown["text"]
                .as_str()
                .is_some_and(|t| t.contains("solve_plan"))
        );
    }
    assert_eq!(view["prompts"]["max_bytes"], 65536);

    let zh = "ZH-OPS 先调用 solve_plan。\n{tools}\n讲清楚。";
    let change = json!({"playbooks": [{"language": "zh", "system": zh}]});
    let (status, err) = s.put(PATH, change.clone(), user).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (403, Some("forbidden"))
    );
    let file = s.dir.path().join("settings.yaml");
    assert!(!file.exists(), "a refused change writes nothing");

    let (status, body) = s.put(PATH, change, admin).await;
    assert_eq!(status, 200, "{body}");
    let shown = playbook(&body, "zh");
    assert_eq!(shown["text"], zh);
    assert_eq!(shown["from"], "prompts.solve.zh.system");
    assert_eq!(shown["setting"], "prompts.solve.zh.system");
    assert_eq!(playbook(&body, "en")["from"], Value::Null);
    let written = std::fs::read_to_string(&file).expect("settings file");
    assert!(written.contains("ZH-OPS"), "{written}");

    // In force for the next zh turn, with the tools' lines at the marker; en is untouched.
    let system = system_of_a_turn(s, "zh", admin).await;
    assert!(
        system.starts_with("ZH-OPS 先调用 solve_plan。\n"),
        "{system}"
    );
    assert!(
        system.contains("\n讲清楚。") && !system.contains("{tools}"),
        "{system}"
    );
    let system = system_of_a_turn(s, "en", admin).await;
    assert!(system.starts_with("You are deepsolve"), "{system}");

    // Over the cap: refused, nothing written.
    let big = json!({"playbooks": [{"language": "en", "system": "x".repeat(65537)}]});
    let (status, err) = s.put(PATH, big, admin).await;
    assert_eq!(status, 422, "{err}");
    assert_eq!(err["error"]["code"], "invalid_config");
    assert!(
        err["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("over the cap of 65536")),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&file).expect("file"), written);

    // A playbook without solve_plan is taken, with a warning.
    let terse = json!({"playbooks": [{"language": null, "system": "Be terse."}]});
    let (status, body) = s.put(PATH, terse, admin).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["warnings"]
            .to_string()
            .contains("never mentions solve_plan"),
        "{body}"
    );
    assert_eq!(playbook(&body, "en")["from"], "prompts.solve.system");
    assert_eq!(
        playbook(&body, "zh")["from"],
        "prompts.solve.zh.system",
        "the language's own wins"
    );

    // Back to the defaults.
    let reset = json!({"playbooks": [{"language": "zh", "system": null}, {"language": null, "system": null}]});
    let (status, body) = s.put(PATH, reset, admin).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(playbook(&body, "zh")["from"], Value::Null);
    assert_eq!(playbook(&body, "en")["from"], Value::Null);
    assert!(
        body["prompts"]["overridden"]
            .as_array()
            .is_some_and(Vec::is_empty)
    );
    let written = std::fs::read_to_string(&file).expect("file");
    assert!(
        !written.contains("ZH-OPS") && !written.contains("terse"),
        "{written}"
    );
    let system = system_of_a_turn(s, "zh", admin).await;
    assert!(!system.contains("ZH-OPS"), "{system}");

    // The reference's legacy key: accepted and ignored, with a warning, in a change and a turn.
    let legacy = json!({"solve": {"max_iterations_per_step": 5, "max_replans": 4}});
    let (status, body) = s.put(PATH, legacy, admin).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["warnings"]
            .to_string()
            .contains("max_iterations_per_step is no longer used")
    );
    assert_eq!(body["solve"]["max_replans"], 4);
    assert!(
        !std::fs::read_to_string(&file)
            .expect("file")
            .contains("max_iterations")
    );
    let (status, created) = s
        .post(
            "/api/v1/turns",
            json!({"problem": "p", "config": {"max_iterations_per_step": 3}}),
            admin,
        )
        .await;
    assert_eq!(status, 201, "{created}");
    started.server.shutdown().await;
}
