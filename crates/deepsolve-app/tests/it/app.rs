//! The app put together from model clients it is given: the catalog mounted by its rule, the
//! playbook lines of the mounted tools in the turn's language, `tools.enabled` checked up
//! front, and the loaded-settings path refusing to start without a model.

use std::sync::Arc;

use deepsolve_app::{AppBuilder, AppError, DEFAULT_LOCAL_MODEL, MainChoice, main_choice};
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

/// Settings from `yaml`, nothing else (no environment).
fn settings_of(dir: &std::path::Path, yaml: &str) -> deepsolve_settings::Loaded {
    let file = dir.join("settings.yaml");
    std::fs::write(&file, yaml).expect("write");
    deepsolve_settings::load(&LoadOptions {
        config_path: Some(file),
        ..LoadOptions::default()
    })
    .expect("settings")
}

#[test]
fn without_an_endpoint_or_a_local_model_the_error_names_both_ways() {
    let dir = tempfile::tempdir().expect("tempdir");
    let models = dir.path().join("models");
    let loaded = settings_of(dir.path(), "tools:\n  sandbox: none\n");
    let err = main_choice(&loaded, Some(&models)).expect_err("no model");
    assert!(matches!(err, AppError::NoModel { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with("no model configured: pass --model"),
        "{text}"
    );
    assert!(text.contains("scripts/fetch-model"), "{text}");
    assert!(
        text.contains(&models.join(DEFAULT_LOCAL_MODEL).display().to_string()),
        "{text}"
    );
}

#[test]
fn with_no_endpoint_the_default_local_model_is_the_embedded_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let models = dir.path().join("models");
    std::fs::create_dir_all(&models).expect("mkdir");
    std::fs::write(models.join(DEFAULT_LOCAL_MODEL), b"GGUF").expect("model");
    let loaded = settings_of(
        dir.path(),
        "llm:\n  local:\n    context: 4096\n    parallel: 2\n",
    );
    match main_choice(&loaded, Some(&models)).expect("a choice") {
        MainChoice::Local(config) => {
            assert_eq!(config.model, models.join(DEFAULT_LOCAL_MODEL));
            assert_eq!((config.context, config.parallel), (4096, 2));
        }
        other => panic!("expected the local model, got {other:?}"),
    }
    // An endpoint still wins, the model file present or not.
    for yaml in [
        "llm:\n  model: m\n",
        "llm:\n  base_url: http://127.0.0.1:9/v1\n  model: m\n",
    ] {
        let loaded = settings_of(dir.path(), yaml);
        assert!(
            matches!(
                main_choice(&loaded, Some(&models)),
                Ok(MainChoice::Endpoint { ref model, .. }) if model == "m"
            ),
            "{yaml}"
        );
    }
    // A base URL without a model is an endpoint half-configured: named, not run locally.
    let loaded = settings_of(dir.path(), "llm:\n  base_url: http://127.0.0.1:9/v1\n");
    assert!(matches!(
        main_choice(&loaded, Some(&models)),
        Err(AppError::NoModel { .. })
    ));
}

#[test]
fn a_local_provider_runs_the_named_file_even_beside_an_endpoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let loaded = settings_of(
        dir.path(),
        "llm:\n  provider: local\n  model: m\n  base_url: http://127.0.0.1:9/v1\n  local:\n    model: /nowhere/x.gguf\n",
    );
    assert!(matches!(
        main_choice(&loaded, None),
        Ok(MainChoice::Local(ref config)) if config.model == std::path::Path::new("/nowhere/x.gguf")
    ));
}

#[tokio::test]
async fn a_missing_local_model_is_named_with_the_way_to_fetch_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("absent.gguf");
    let loaded = settings_of(
        dir.path(),
        &format!(
            "llm:\n  provider: local\n  local:\n    model: {}\ntools:\n  sandbox: none\n",
            missing.display()
        ),
    );
    let err = AppBuilder::from_settings(&loaded)
        .await
        .err()
        .expect("refused");
    assert!(matches!(err, AppError::Local(_)), "{err}");
    let text = err.to_string();
    assert!(text.contains(&missing.display().to_string()), "{text}");
    assert!(text.contains("scripts/fetch-model"), "{text}");
}
