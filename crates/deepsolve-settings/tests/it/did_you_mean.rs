//! Every way a settings key is written — the file, `DEEPSOLVE_<SECTION>__<KEY>`, `--set`,
//! `settings get|set` — names an unknown key with the nearest known one when it is close, and
//! suggests nothing when nothing is.

use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;

use deepsolve_core::config::known_keys;
use deepsolve_settings::{LoadOptions, Loaded, SettingsError, get, load, set_in_file};
use tempfile::TempDir;

struct Fixture {
    _dir: TempDir,
    path: PathBuf,
}

fn file(yaml: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.yaml");
    fs::write(&path, yaml).unwrap();
    Fixture { _dir: dir, path }
}

fn load_err(f: &Fixture, env: &[(&str, &str)], sets: &[&str]) -> String {
    let opts = LoadOptions {
        config_path: Some(f.path.clone()),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<HashMap<_, _>>(),
        sets: sets.iter().map(|s| s.to_string()).collect(),
        ..LoadOptions::default()
    };
    match load(&opts) {
        Err(e @ SettingsError::UnknownKey(_)) => e.to_string(),
        other => panic!("expected an unknown key, got {other:?}"),
    }
}

#[test]
fn a_typo_in_the_file_gets_the_nearest_key() {
    let f = file("solve:\n  max_round: 3\n");
    let e = load_err(&f, &[], &[]);
    assert_eq!(
        e,
        format!(
            "unknown setting 'solve.max_round' in {} (known in solve: {}) — did you mean \
             'solve.max_rounds'?",
            f.path.display(),
            known_keys()
        )
    );
    let f = file("llm:\n  modle: x\n");
    assert!(load_err(&f, &[], &[]).ends_with(" — did you mean 'llm.model'?"));
    let f = file("tool:\n  sandbox: none\n");
    let e = load_err(&f, &[], &[]);
    assert!(
        e.contains(
            "(known sections: llm, models, solve, tools, sandbox, server, kb, prompts) — did you mean 'tools'?"
        ),
        "{e}"
    );
}

#[test]
fn a_typo_in_an_environment_variable_gets_the_nearest_key() {
    let f = file("");
    let e = load_err(&f, &[("DEEPSOLVE_SOLVE__MAX_REPLAN", "3")], &[]);
    assert!(
        e.starts_with(
            "unknown setting 'solve.max_replan' from environment variable \
             DEEPSOLVE_SOLVE__MAX_REPLAN (known in solve: "
        ),
        "{e}"
    );
    assert!(e.ends_with(" — did you mean 'solve.max_replans'?"), "{e}");
    let e = load_err(&f, &[("DEEPSOLVE_MODELS__REASON__MODLE", "r")], &[]);
    assert!(e.ends_with(" — did you mean 'models.reason.model'?"), "{e}");
}

#[test]
fn a_typo_in_set_gets_the_nearest_key() {
    let f = file("");
    let e = load_err(&f, &[], &["solve.plan_frist=false"]);
    assert!(
        e.starts_with("unknown setting 'solve.plan_frist' in --set solve.plan_frist=… ("),
        "{e}"
    );
    assert!(e.ends_with(" — did you mean 'solve.plan_first'?"), "{e}");
    let e = load_err(&f, &[], &["lm.model=x"]);
    assert!(e.ends_with(" — did you mean 'llm.model'?"), "{e}");
}

#[test]
fn settings_get_and_set_suggest_too() {
    let loaded = Loaded {
        settings: Default::default(),
        warnings: Vec::new(),
        path: PathBuf::new(),
        file_exists: false,
        tool_sections: Vec::new(),
    };
    let e = get(&loaded, Some("solve.tempreature"))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("unknown setting 'solve.tempreature' on the command line"),
        "{e}"
    );
    assert!(e.ends_with(" — did you mean 'solve.temperature'?"), "{e}");
    let f = file("");
    let e = set_in_file(&f.path, "sandbox.backnd", "none", &[])
        .unwrap_err()
        .to_string();
    assert!(e.ends_with(" — did you mean 'sandbox.backend'?"), "{e}");
}

#[test]
fn nothing_is_suggested_when_nothing_is_close() {
    let f = file("solve:\n  warp_speed: 9\n");
    let e = load_err(&f, &[], &[]);
    assert!(
        e.ends_with(&format!("(known in solve: {})", known_keys())),
        "{e}"
    );
    let f = file("");
    for e in [
        load_err(&f, &[("DEEPSOLVE_SERVER__PORT", "1")], &[]),
        load_err(&f, &[], &["solve.bogus=1"]),
        load_err(&f, &[], &["llm.model.x=1"]),
    ] {
        assert!(!e.contains("did you mean"), "{e}");
        assert!(e.ends_with(')'), "{e}");
    }
}
