//! Unknown solve keys over the API — a turn's `config` and `PUT /api/v1/capabilities/settings`
//! — are named with the nearest known key when one is close, and the settings description is
//! core's declaration of the knobs.

use deepsolve_core::config::{FLAGS, KNOBS};
use deepsolve_store::Role;
use deepsolve_testkit::WellBehaved;
use serde_json::{Value, json};

use crate::support::{Options, start};

fn message(err: &Value) -> &str {
    err["error"]["message"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_config_keys_suggest_the_nearest_knob() {
    let started = start(
        WellBehaved::new(1).with_work_tool(None),
        Options {
            users: vec![("root", Role::Admin)],
            ..Options::default()
        },
    )
    .await;
    let s = started.server;
    let admin = Some(started.tokens[0].as_str());

    let (status, err) = s
        .post(
            "/api/v1/turns",
            json!({"problem": "p", "config": {"max_round": 3}}),
            admin,
        )
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (422, Some("unknown_config_key"))
    );
    let text = message(&err);
    assert!(
        text.starts_with("unknown setting 'max_round' in the turn's config (known in solve: "),
        "{text}"
    );
    assert!(text.ends_with(" — did you mean 'max_rounds'?"), "{text}");

    let (status, err) = s
        .post(
            "/api/v1/turns",
            json!({"problem": "p", "config": {"warp_speed": 9, "fodl": false}}),
            admin,
        )
        .await;
    assert_eq!(status, 422);
    let text = message(&err);
    assert!(
        text.contains("'warp_speed'") && text.contains("'fodl'"),
        "{text}"
    );
    assert!(
        text.ends_with(" — did you mean 'fold' for 'fodl'?"),
        "{text}"
    );

    let path = "/api/v1/capabilities/settings";
    let (status, err) = s
        .put(path, json!({"solve": {"max_replan": 3}}), admin)
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (422, Some("unknown_config_key"))
    );
    let text = message(&err);
    assert!(
        text.starts_with("unknown setting 'solve.max_replan' in the request (known in solve: "),
        "{text}"
    );
    assert!(
        text.ends_with(" — did you mean 'solve.max_replans'?"),
        "{text}"
    );
    let (status, err) = s
        .put(path, json!({"solve": {"warp_speed": 9}}), admin)
        .await;
    assert_eq!(status, 422);
    assert!(!message(&err).contains("did you mean"), "{err}");
    assert!(
        !s.dir.path().join("settings.yaml").exists(),
        "a refused change writes nothing"
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_settings_description_is_cores_declaration_of_the_knobs() {
    let s = start(WellBehaved::new(1).with_work_tool(None), Options::default())
        .await
        .server;
    let (status, got) = s.get("/api/v1/capabilities/settings", None).await;
    assert_eq!(status, 200);
    let knobs = got["knobs"].as_array().cloned().unwrap_or_default();
    assert_eq!(knobs.len(), KNOBS.len());
    for (shown, knob) in knobs.iter().zip(KNOBS) {
        assert_eq!(
            shown,
            &json!({"key": knob.key, "default": knob.default, "min": knob.min,
                    "max": knob.max, "integer": knob.integer, "help": knob.help,
                    "help_zh": knob.help_zh})
        );
    }
    let flags = got["flags"].as_array().cloned().unwrap_or_default();
    assert_eq!(flags.len(), FLAGS.len());
    for (shown, flag) in flags.iter().zip(FLAGS) {
        assert_eq!(
            shown,
            &json!({"key": flag.key, "default": flag.default, "help": flag.help,
                    "help_zh": flag.help_zh})
        );
    }
    let rounds = knobs.iter().find(|k| k["key"] == "max_rounds");
    assert_eq!(rounds.map(|k| k["max"].clone()), Some(json!(50.0)));
    s.shutdown().await;
}
