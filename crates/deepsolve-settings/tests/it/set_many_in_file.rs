//! `set_many_in_file`: several keys in one atomic write — all of them or none.

use std::fs;

use deepsolve_settings::{LoadOptions, load, set_many_in_file};

#[test]
fn several_keys_land_together_clamped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.yaml");
    fs::write(&path, "llm:\n  model: m\n").unwrap();
    let warnings = set_many_in_file(
        &path,
        &[("solve.max_rounds", "7"), ("solve.max_replans", "99")],
        &[],
    )
    .unwrap();
    assert!(
        warnings.iter().any(|w| w.contains("max_replans")),
        "{warnings:?}"
    );
    let s = load(&LoadOptions {
        config_path: Some(path.clone()),
        ..LoadOptions::default()
    })
    .unwrap()
    .settings;
    assert_eq!((s.solve.max_rounds, s.solve.max_replans), (7, 10));
    assert_eq!(s.llm.model.as_deref(), Some("m"), "other keys kept");
}

#[test]
fn one_bad_key_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.yaml");
    fs::write(&path, "solve:\n  max_rounds: 3\n").unwrap();
    let before = fs::read_to_string(&path).unwrap();
    assert!(
        set_many_in_file(
            &path,
            &[("solve.max_rounds", "9"), ("solve.bogus", "1")],
            &[]
        )
        .is_err()
    );
    assert!(
        set_many_in_file(
            &path,
            &[("solve.max_rounds", "9"), ("llm.api_key", "sk")],
            &[]
        )
        .is_err()
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), before);
}
