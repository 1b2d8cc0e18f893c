//! The app put together from model clients it is given: the catalog mounted by its rule, the
//! playbook lines of the mounted tools in the turn's language, `tools.enabled` checked up
//! front, and the loaded-settings path refusing to start without a model.

use std::sync::Arc;

use deepsolve_app::{AppBuilder, AppError};
use deepsolve_core::{ChatModel, Language, NullSink, Role, TurnSpec};
use deepsolve_settings::{LoadOptions, Settings};
use deepsolve_testkit::{ScriptedModel, WellBehaved};
use deepsolve_tools::code::{CODE_EXECUTION, EXEC};
use deepsolve_tools::geogebra::GEOGEBRA_ANALYSIS;
use deepsolve_tools::{CATALOG, Policy, Unavailable};
use tokio_util::sync::CancellationToken;

fn scripted(policy: WellBehaved) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new(policy))
}

fn opt_in() -> Vec<&'static str> {
    CATALOG
        .iter()
        .filter(|e| e.policy == Policy::OptIn)
        .map(|e| e.name)
        .collect()
}

#[test]
fn without_a_sandbox_only_the_tools_that_need_none_are_mounted() {
    let model: Arc<dyn ChatModel> = scripted(WellBehaved::new(1));
    let app = AppBuilder::new(Settings::default(), model)
        .build()
        .expect("app");
    let mounted = app.engine().work_tool_names();
    for entry in CATALOG {
        let why = app.tools().why_unavailable(entry.name);
        assert_eq!(mounted.contains(&entry.name.to_string()), why.is_none());
        if [CODE_EXECUTION, EXEC].contains(&entry.name) {
            assert!(
                why.is_some_and(|w| w.0.starts_with("no sandbox: ")),
                "{why:?}"
            );
        }
    }
    assert_eq!(app.tools().status().len(), CATALOG.len());
    assert!(app.sandbox().is_err());
    let none: &[&str] = &[];
    let offered = app.tools_for_turn(none).expect("nothing asked");
    assert!(!app.needs_workspace(&offered));
}

#[test]
fn a_broken_reasoning_model_makes_only_its_tools_unavailable() {
    let model: Arc<dyn ChatModel> = scripted(WellBehaved::new(1));
    let app = AppBuilder::new(Settings::default(), model)
        .reasoning_model(Err(Unavailable("cannot use models.reason: bad url".into())))
        .build()
        .expect("app");
    let on_the_reasoning_model = CATALOG
        .iter()
        .filter(|e| e.settings.contains(&"models.reason"))
        .map(|e| e.name);
    for name in on_the_reasoning_model {
        let err = app.tools_for_turn(&[name]).expect_err("unavailable");
        assert!(
            err.to_string()
                .contains("is not available: cannot use models.reason: bad url"),
            "{err}"
        );
    }
}

#[test]
fn the_vision_model_is_geogebras_and_a_broken_one_makes_only_it_unavailable() {
    let model: Arc<dyn ChatModel> = scripted(WellBehaved::new(1));
    let without = AppBuilder::new(Settings::default(), model.clone())
        .build()
        .expect("app");
    let offered = without
        .tools_for_turn(&[GEOGEBRA_ANALYSIS])
        .expect("mounted");
    assert!(
        without.needs_workspace(&offered),
        "its figure goes in the workspace"
    );
    let broken = AppBuilder::new(Settings::default(), model)
        .vision_model(Err(Unavailable("cannot use models.vision: bad url".into())))
        .build()
        .expect("app");
    let err = broken
        .tools_for_turn(&[GEOGEBRA_ANALYSIS])
        .expect_err("unavailable");
    assert!(
        err.to_string()
            .contains("is not available: cannot use models.vision: bad url"),
        "{err}"
    );
    assert!(broken.tools_for_turn(&["reason"]).is_ok());
}

#[test]
fn models_vision_makes_a_client_only_when_set() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("settings.yaml"), "").expect("an empty settings file");
    let options = |sets: &[&str]| LoadOptions {
        config_path: Some(dir.path().join("settings.yaml")),
        sets: sets.iter().map(ToString::to_string).collect(),
        ..LoadOptions::default()
    };
    let unset = deepsolve_settings::load(&options(&[])).expect("defaults");
    assert!(deepsolve_app::vision_model(&unset).expect("fine").is_none());
    let set =
        deepsolve_settings::load(&options(&["models.vision.model=qwen-vl"])).expect("settings");
    let vision = deepsolve_app::vision_model(&set)
        .expect("a client")
        .expect("set");
    assert_eq!(vision.name(), "qwen-vl");
}

#[test]
fn tools_enabled_is_checked_when_the_app_is_built() {
    let model: Arc<dyn ChatModel> = scripted(WellBehaved::new(1));
    let mut settings = Settings::default();
    settings.tools.enabled = vec!["browser".into()];
    let err = AppBuilder::new(settings, model)
        .build()
        .err()
        .expect("refused");
    assert!(matches!(err, AppError::Enabled(_)), "{err}");
    assert!(
        err.to_string()
            .starts_with("tools.enabled: unknown tool 'browser' (known: "),
        "{err}"
    );
}

#[tokio::test]
async fn a_turn_s_playbook_lists_each_offered_tool_by_its_own_line() {
    for language in [Language::En, Language::Zh] {
        let model = scripted(WellBehaved::new(1));
        let app = AppBuilder::new(Settings::default(), model.clone())
            .build()
            .expect("app");
        let offered = app.tools_for_turn(&opt_in()).expect("offered");
        // The opt-in tools, then the ones that come with them (`web_fetch` with `web_search`).
        let companions = CATALOG
            .iter()
            .filter(|e| matches!(e.policy, Policy::WithTool(leader) if opt_in().contains(&leader)))
            .map(|e| e.name);
        let expected: Vec<&str> = opt_in().into_iter().chain(companions).collect();
        assert_eq!(offered, expected);
        let mut spec = TurnSpec::new(deepsolve_app::new_turn_id(), "Solve x + 1 = 3.");
        spec.language = language;
        spec.tools = offered;
        app.engine()
            .run_turn(model.as_ref(), spec, &NullSink, CancellationToken::new())
            .await
            .expect("turn");
        let requests = model.requests();
        let system = requests
            .first()
            .and_then(|r| r.messages.first())
            .filter(|m| m.role == Role::System)
            .map(|m| m.content.clone())
            .expect("a system message");
        for entry in CATALOG {
            let line = entry.playbook.get(language);
            assert_eq!(
                system.contains(line),
                expected.contains(&entry.name),
                "{}: {system}",
                entry.name
            );
        }
    }
}

#[tokio::test]
async fn from_settings_without_a_model_names_the_ways_to_configure_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("settings.yaml");
    std::fs::write(&file, "tools:\n  sandbox: none\n").expect("write");
    let loaded = deepsolve_settings::load(&LoadOptions {
        config_path: Some(file),
        ..LoadOptions::default()
    })
    .expect("settings");
    let err = AppBuilder::from_settings(&loaded)
        .await
        .err()
        .expect("no model");
    assert!(matches!(err, AppError::NoModel { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("no model configured: pass --model"),
        "{err}"
    );
}

#[tokio::test]
async fn a_local_provider_is_refused_by_name_until_a_front_end_runs_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("settings.yaml");
    std::fs::write(
        &file,
        "llm:\n  provider: local\n  model: m\n  base_url: http://127.0.0.1:9/v1\ntools:\n  sandbox: none\n",
    )
    .expect("write");
    let loaded = deepsolve_settings::load(&LoadOptions {
        config_path: Some(file),
        ..LoadOptions::default()
    })
    .expect("settings");
    let err = AppBuilder::from_settings(&loaded)
        .await
        .err()
        .expect("refused");
    assert!(matches!(err, AppError::LocalProviderNotWired), "{err}");
    assert!(err.to_string().contains("llm.provider is `local`"), "{err}");
}
