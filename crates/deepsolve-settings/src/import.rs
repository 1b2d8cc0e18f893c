//! `settings import-deeptutor DIR`: the reference's solve settings, carried over.
//!
//! The reference keeps them in two YAML files under `data/user/settings/` of its directory:
//! `agents.yaml` (`capabilities.solve.temperature`, `…max_tokens`) and `main.yaml`
//! (`capabilities.solve.max_rounds`, `…max_replans`), with a playbook override at
//! `prompts.solve.system`. Each is read from either file (`main.yaml` winning), mapped to our
//! key, and written like any other setting (clamped with a warning, one atomic write);
//! everything else is reported as skipped, with why. The legacy `max_iterations_per_step`
//! is skipped with a warning, as the reference ignores it.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::SettingsError;
use crate::prompts::MAX_PROMPT_BYTES;
use crate::yaml;

/// The reference's settings directory inside its own.
const SETTINGS_DIR: &str = "data/user/settings";
/// Its files, in the order read (a later one wins).
const FILES: [&str; 2] = ["agents.yaml", "main.yaml"];

/// The reference's solve knobs and ours.
const KNOBS: &[(&str, &str)] = &[
    ("temperature", "solve.temperature"),
    ("max_tokens", "solve.max_tokens"),
    ("max_rounds", "solve.max_rounds"),
    ("max_replans", "solve.max_replans"),
];

/// What an import found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeepTutorImport {
    /// The settings directory read.
    pub dir: PathBuf,
    /// `(our key, raw value, where it came from)`, in the order to write them.
    pub took: Vec<(String, String, String)>,
    /// What was left out, one line each, with why.
    pub skipped: Vec<String>,
    /// Warnings (the legacy key).
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(
        "{} holds no DeepTutor settings: expected {SETTINGS_DIR}/agents.yaml or main.yaml in it (or the settings directory itself)",
        .0.display()
    )]
    NotFound(PathBuf),
    #[error(transparent)]
    Settings(#[from] SettingsError),
}

/// Read the reference's settings under `dir` (its root, or its `data/user/settings`).
pub fn import_deeptutor(dir: &Path) -> Result<DeepTutorImport, ImportError> {
    let settings_dir = [dir.join(SETTINGS_DIR), dir.to_path_buf()]
        .into_iter()
        .find(|d| FILES.iter().any(|f| d.join(f).is_file()))
        .ok_or_else(|| ImportError::NotFound(dir.to_path_buf()))?;
    let mut found = DeepTutorImport {
        dir: settings_dir.clone(),
        ..DeepTutorImport::default()
    };
    let mut values: Vec<(&'static str, Value, String)> = Vec::new();
    for file in FILES {
        let Some(tree) = yaml::read_file(&settings_dir.join(file))? else {
            continue;
        };
        read_file_tree(file, &tree, &mut values, &mut found);
    }
    for (key, value, from) in values {
        match raw(key, &value) {
            Ok(raw) => found.took.push((key.to_string(), raw, from)),
            Err(why) => found.skipped.push(format!("{from}: {why}")),
        }
    }
    Ok(found)
}

/// Collect what one file says (a later file's value replaces an earlier one's).
fn read_file_tree(
    file: &str,
    tree: &Map<String, Value>,
    values: &mut Vec<(&'static str, Value, String)>,
    found: &mut DeepTutorImport,
) {
    let mut put = |key: &'static str, value: Value, from: String| {
        values.retain(|(k, _, _)| *k != key);
        values.push((key, value, from));
    };
    for (section, value) in tree {
        match section.as_str() {
            "capabilities" => {
                for (capability, settings) in object(value) {
                    if capability != "solve" {
                        found.skipped.push(format!(
                            "{file} capabilities.{capability}: only the solve capability carries over"
                        ));
                        continue;
                    }
                    for (knob, value) in object(settings) {
                        let from = format!("{file} capabilities.solve.{knob}");
                        match KNOBS.iter().find(|(theirs, _)| theirs == knob) {
                            Some((_, ours)) => put(ours, value.clone(), from),
                            None if deepsolve_core::is_legacy(knob) => found.warnings.push(
                                format!("{from} is no longer used and is ignored, as the reference ignores it"),
                            ),
                            None => found.skipped.push(format!("{from}: no counterpart here")),
                        }
                    }
                }
            }
            "prompts" => {
                let system = value.get("solve").and_then(|solve| solve.get("system"));
                match system {
                    Some(text) if text.as_str().is_some_and(|t| !t.trim().is_empty()) => {
                        put(
                            "prompts.solve.system",
                            text.clone(),
                            format!("{file} prompts.solve.system"),
                        );
                    }
                    _ => found.skipped.push(format!(
                        "{file} prompts: only a non-empty prompts.solve.system carries over"
                    )),
                }
            }
            other => found
                .skipped
                .push(format!("{file} {other}: not a solve setting")),
        }
    }
}

/// A mapping's entries (none for anything else).
fn object(value: &Value) -> impl Iterator<Item = (&String, &Value)> {
    value.as_object().into_iter().flatten()
}

/// A value as the settings writer's raw text, or why it cannot be taken.
fn raw(key: &str, value: &Value) -> Result<String, String> {
    match value {
        Value::Number(n) => Ok(n.to_string()),
        Value::String(text) if key.starts_with("prompts.") => {
            if text.len() > MAX_PROMPT_BYTES {
                Err(format!(
                    "{} bytes, over the cap of {MAX_PROMPT_BYTES} bytes",
                    text.len()
                ))
            } else {
                Ok(text.clone())
            }
        }
        other => Err(format!("not a number: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_files_maps_the_knobs_and_says_what_it_skipped() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(SETTINGS_DIR);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("agents.yaml"),
            "capabilities:\n  solve:\n    temperature: 0.2\n    max_tokens: 4096\n  chat:\n    temperature: 1\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("main.yaml"),
            "system:\n  language: zh\ncapabilities:\n  solve:\n    max_rounds: 20\n    max_replans: 'two'\n    max_iterations_per_step: 5\n    temperature: 0.4\nprompts:\n  solve:\n    system: Plan with solve_plan.\n",
        )
        .unwrap();
        let found = import_deeptutor(root.path()).unwrap();
        assert_eq!(found.dir, dir);
        let took: Vec<(&str, &str)> = found
            .took
            .iter()
            .map(|(k, v, _)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            took,
            [
                ("solve.max_tokens", "4096"),
                ("solve.max_rounds", "20"),
                ("solve.temperature", "0.4"),
                ("prompts.solve.system", "Plan with solve_plan."),
            ]
        );
        let skipped = found.skipped.join("\n");
        assert!(
            skipped.contains("agents.yaml capabilities.chat"),
            "{skipped}"
        );
        assert!(
            skipped.contains("main.yaml system: not a solve setting"),
            "{skipped}"
        );
        assert!(skipped.contains("max_replans: not a number"), "{skipped}");
        assert_eq!(found.warnings.len(), 1);
        assert!(found.warnings[0].contains("max_iterations_per_step"));
        let err = import_deeptutor(&root.path().join("nope")).unwrap_err();
        assert!(
            err.to_string().contains("holds no DeepTutor settings"),
            "{err}"
        );
    }
}
