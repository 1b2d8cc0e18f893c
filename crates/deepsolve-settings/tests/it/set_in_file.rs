//! `set_in_file`: round trip, clamping on write, atomicity, refusals that leave the file alone.

use std::fs;
use std::path::Path;

use deepsolve_settings::{LoadOptions, Loaded, load, set_in_file};

fn load_file(path: &Path) -> Loaded {
    load(&LoadOptions {
        config_path: Some(path.to_path_buf()),
        ..LoadOptions::default()
    })
    .unwrap()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn round_trip_creates_dirs_and_keeps_other_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a").join("b").join("settings.yaml");
    assert!(
        set_in_file(&path, "solve.max_rounds", "7", &[])
            .unwrap()
            .is_empty()
    );
    set_in_file(&path, "llm.model", "deepseek-chat", &[]).unwrap();
    set_in_file(&path, "llm.extra_body", "{thinking: {type: enabled}}", &[]).unwrap();
    set_in_file(&path, "models.reason", "{model: deepseek-reasoner}", &[]).unwrap();
    set_in_file(&path, "tools.enabled", "reason,web_search", &[]).unwrap();
    let s = load_file(&path).settings;
    assert_eq!(s.solve.max_rounds, 7);
    assert_eq!(s.llm.model.as_deref(), Some("deepseek-chat"));
    assert_eq!(s.llm.extra_body["thinking"]["type"], "enabled");
    assert_eq!(
        s.models.reason.map(|r| r.model).as_deref(),
        Some("deepseek-reasoner")
    );
    assert_eq!(s.tools.enabled, ["reason", "web_search"]);
    assert_eq!(
        entries(path.parent().unwrap()),
        ["settings.yaml"],
        "no temp files left"
    );
}

#[test]
fn text_values_stay_text() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.yaml");
    set_in_file(&path, "llm.model", "1.10", &[]).unwrap();
    set_in_file(&path, "llm.base_url", "no", &[]).unwrap();
    let s = load_file(&path).settings;
    assert_eq!(s.llm.model.as_deref(), Some("1.10"));
    assert_eq!(s.llm.base_url.as_deref(), Some("no"));
}

#[test]
fn the_clamped_value_is_written_and_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.yaml");
    let warnings = set_in_file(&path, "solve.max_rounds", "1000", &[]).unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("solve.max_rounds = 1000 is outside 1..=50; using 50"),
        "{warnings:?}"
    );
    assert!(
        fs::read_to_string(&path)
            .unwrap()
            .contains("max_rounds: 50")
    );
    let loaded = load_file(&path);
    assert_eq!(loaded.settings.solve.max_rounds, 50);
    assert!(
        loaded.warnings.is_empty(),
        "the file now holds an in-range value"
    );

    let warnings = set_in_file(&path, "solve.temperature", ".nan", &[]).unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(load_file(&path).settings.solve.temperature, 0.3);
    set_in_file(&path, "llm.context_window", "99999999999", &[]).unwrap();
    assert!(
        fs::read_to_string(&path)
            .unwrap()
            .contains("context_window: 10000000")
    );
}

#[test]
fn an_empty_value_removes_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.yaml");
    set_in_file(&path, "solve.max_rounds", "7", &[]).unwrap();
    set_in_file(&path, "solve.max_rounds", "", &[]).unwrap();
    assert!(!fs::read_to_string(&path).unwrap().contains("max_rounds"));
    assert_eq!(load_file(&path).settings.solve.max_rounds, 12);
}

#[test]
fn refusals_leave_the_file_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.yaml");
    let original = "# my settings\nsolve:\n  max_rounds: 3\n";
    fs::write(&path, original).unwrap();

    let e = set_in_file(&path, "solve.max_roundz", "5", &[])
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("unknown setting 'solve.max_roundz'"), "{e}");
    let e = set_in_file(&path, "solve.max_rounds", "many", &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("'solve.max_rounds'") && e.contains("must be a number"),
        "{e}"
    );
    let e = set_in_file(&path, "models.reason", "{base_url: http://x}", &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("'models.reason.model'"), "{e}");
    let e = set_in_file(&path, "tools.sandbox", "docker", &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("one of auto, bwrap, none"), "{e}");

    assert_eq!(fs::read_to_string(&path).unwrap(), original);
    assert_eq!(entries(dir.path()), ["settings.yaml"]);
}

#[test]
fn an_existing_bad_key_blocks_the_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.yaml");
    fs::write(&path, "llm:\n  modle: x\n").unwrap();
    let e = set_in_file(&path, "llm.model", "y", &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("'llm.modle'") && e.contains(&path.display().to_string()),
        "{e}"
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), "llm:\n  modle: x\n");
}

#[test]
fn the_api_key_is_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.yaml");
    let e = set_in_file(&path, "llm.api_key", "sk-secret", &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("DEEPSOLVE_API_KEY") && e.contains("llm.api_key_env"),
        "{e}"
    );
    assert!(!e.contains("sk-secret"));
    assert!(!path.exists());
    set_in_file(&path, "llm.api_key_env", "DEEPSEEK_API_KEY", &[]).unwrap();
    let e = set_in_file(&path, "llm.api_key_env", "sk-abc 123", &[])
        .unwrap_err()
        .to_string();
    assert!(!e.contains("sk-abc"), "{e}");
}

#[cfg(unix)]
#[test]
fn the_file_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.yaml");
    fs::write(&path, "").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    set_in_file(&path, "solve.max_rounds", "5", &[]).unwrap();
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn bad_keys_and_yaml_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.yaml");
    let e = set_in_file(&path, "solve..max_rounds", "5", &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("'solve..max_rounds'"), "{e}");
    let e = set_in_file(&path, "llm.extra_body", "{a: ", &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("invalid value for setting 'llm.extra_body' on the command line"),
        "{e}"
    );
    assert!(!path.exists());
}

/// A hand-written file: comments, blank lines, quoting, nested sections.
const COMMENTED: &str = "\
# deepsolve — my laptop
llm:
  # vLLM on the GPU box
  base_url: \"http://gpu:8000/v1\"   # via the tunnel
  model: 'Qwen/Qwen3-32B'

  context_window: 32768

# how hard to try
solve:
  max_rounds: 20 # plenty
  fold: true

models:
  reason:
    model: deepseek-reasoner   # thinks longer
";

#[test]
fn a_set_keeps_the_files_comments_blank_lines_quoting_and_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.yaml");
    fs::write(&path, COMMENTED).unwrap();
    set_in_file(&path, "solve.max_rounds", "30", &[]).unwrap();
    set_in_file(&path, "llm.model", "Qwen/Qwen3-8B", &[]).unwrap();
    set_in_file(&path, "solve.temperature", "0.2", &[]).unwrap();
    set_in_file(&path, "sandbox.memory_mb", "1024", &[]).unwrap();
    set_in_file(&path, "models.reason.base_url", "http://r:8001/v1", &[]).unwrap();
    let expected = COMMENTED
        .replace("max_rounds: 20 # plenty", "max_rounds: 30 # plenty")
        .replace("model: 'Qwen/Qwen3-32B'", "model: Qwen/Qwen3-8B")
        .replace("  fold: true\n", "  fold: true\n  temperature: 0.2\n")
        .replace(
            "# thinks longer\n",
            "# thinks longer\n    base_url: http://r:8001/v1\n",
        )
        + "sandbox:\n  memory_mb: 1024\n";
    assert_eq!(fs::read_to_string(&path).unwrap(), expected);
    // Removing a key takes only its line.
    set_in_file(&path, "llm.context_window", "", &[]).unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        expected.replace("  context_window: 32768\n", "")
    );
    let s = load_file(&path).settings;
    assert_eq!(s.solve.max_rounds, 30);
    assert_eq!(s.llm.model.as_deref(), Some("Qwen/Qwen3-8B"));
    assert_eq!(s.llm.base_url.as_deref(), Some("http://gpu:8000/v1"));
}

#[test]
fn a_clamped_value_is_edited_in_place_as_clamped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.yaml");
    fs::write(&path, COMMENTED).unwrap();
    let warnings = set_in_file(&path, "solve.max_rounds", "1000", &[]).unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        COMMENTED.replace("max_rounds: 20 # plenty", "max_rounds: 50 # plenty")
    );
}

#[test]
fn a_layout_beyond_the_editor_is_rewritten_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.yaml");
    fs::write(&path, "# mine\nllm: {model: a}\n").unwrap();
    let warnings = set_in_file(&path, "llm.base_url", "http://h/v1", &[]).unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("comments were not kept")),
        "{warnings:?}"
    );
    let s = load_file(&path).settings;
    assert_eq!(s.llm.model.as_deref(), Some("a"));
    assert_eq!(s.llm.base_url.as_deref(), Some("http://h/v1"));
}
