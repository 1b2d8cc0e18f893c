//! Loading: resolve the file, read it, apply env and `--set`, check strictly, clamp.

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::{Map, Value};

use crate::error::{Origin, SettingsError};
use crate::layers;
use crate::model::Settings;
use crate::schema::{Schema, ToolSection};
use crate::tree::{self, Origins};
use crate::validate;
use crate::yaml;

/// The variable naming the settings file. It chooses the file; it is not itself a setting.
pub const CONFIG_ENV: &str = "DEEPSOLVE_CONFIG";

/// What to load. `env` is a snapshot (usually `std::env::vars().collect()`) so that tests never
/// touch the process environment and a load is reproducible from its inputs.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// `--config PATH`: wins over `DEEPSOLVE_CONFIG` and the default location.
    pub config_path: Option<PathBuf>,
    pub env: HashMap<String, String>,
    /// `--set KEY=VALUE` arguments, applied in order after the environment.
    pub sets: Vec<String>,
    /// The sections the tools declare (`tools.<tool>`); any other key under `tools` besides
    /// `enabled` and `sandbox` is unknown. The app passes its tool catalog's.
    pub tool_sections: Vec<ToolSection>,
}

/// Loaded settings and what the user should be told about them.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub settings: Settings,
    /// Clamped values, a key stored in clear, a key variable that is not set… One line each.
    pub warnings: Vec<String>,
    /// The settings file consulted (whether or not it exists).
    pub path: PathBuf,
    pub file_exists: bool,
    /// The tool sections it was checked against (so `settings get` knows them too).
    pub tool_sections: Vec<ToolSection>,
}

/// Which layer chose the file: an explicitly named file must exist, the default need not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PathChoice {
    Flag,
    Env,
    Default,
}

fn choose_path(opts: &LoadOptions) -> (PathBuf, PathChoice) {
    if let Some(path) = &opts.config_path {
        return (path.clone(), PathChoice::Flag);
    }
    if let Some(path) = opts.env.get(CONFIG_ENV).filter(|p| !p.trim().is_empty()) {
        return (PathBuf::from(path), PathChoice::Env);
    }
    (default_path(), PathChoice::Default)
}

/// `<config dir>/deepsolve/settings.yaml`; without a home directory (some containers), a path
/// relative to the working directory, which at worst does not exist.
fn default_path() -> PathBuf {
    dirs::config_dir()
        .unwrap_or_else(|| PathBuf::from(".config"))
        .join("deepsolve")
        .join("settings.yaml")
}

/// The settings file path: `--config` > `DEEPSOLVE_CONFIG` > `<config dir>/deepsolve/settings.yaml`.
pub fn resolve_path(opts: &LoadOptions) -> PathBuf {
    choose_path(opts).0
}

/// Load settings: built-in defaults < YAML file < environment < `--set`, then strict checks and
/// clamping. A missing default file means defaults; a missing `--config`/`DEEPSOLVE_CONFIG`
/// file is an error, since the user clearly meant a particular file.
pub fn load(opts: &LoadOptions) -> Result<Loaded, SettingsError> {
    let (path, choice) = choose_path(opts);
    let file = yaml::read_file(&path)?;
    let file_exists = file.is_some();
    let via = match choice {
        PathChoice::Flag => Some("--config"),
        PathChoice::Env => Some(CONFIG_ENV),
        PathChoice::Default => None,
    };
    if let (None, Some(via)) = (&file, via) {
        return Err(SettingsError::FileNotFound { path, via });
    }
    let base = if file_exists {
        Origin::File(path.clone())
    } else {
        Origin::Default
    };
    let schema = Schema::new(&opts.tool_sections);
    let mut tree = file.unwrap_or_default();
    let mut origins = Origins::new(base);
    layers::apply_env(schema, &mut tree, &mut origins, &opts.env)?;
    layers::apply_sets(schema, &mut tree, &mut origins, &opts.sets)?;
    let key_warning = layers::apply_api_key_env(&mut tree, &mut origins, &opts.env);
    let (mut settings, mut warnings) = validate::build(schema, tree, &origins)?;
    warnings.extend(key_warning);
    warnings.extend(crate::prompts::resolve(&mut settings.prompts, &path)?);
    Ok(Loaded {
        settings,
        warnings,
        path,
        file_exists,
        tool_sections: opts.tool_sections.clone(),
    })
}

/// `settings get [KEY]`: the whole redacted tree, or the value at a dotted key (`null` when a
/// known key is unset). Unknown keys are errors naming the key and what is known there.
pub fn get(loaded: &Loaded, dotted_key: Option<&str>) -> Result<Value, SettingsError> {
    let value = loaded.settings.redacted_value();
    let Some(key) = dotted_key else {
        return Ok(value);
    };
    let path = tree::parse_key(key)?;
    tree::known_kind(
        Schema::new(&loaded.tool_sections),
        &path,
        &Origin::CommandLine,
    )?;
    let Value::Object(map) = value else {
        return Ok(Value::Null);
    };
    Ok(lookup(&map, &path))
}

fn lookup(map: &Map<String, Value>, path: &[String]) -> Value {
    tree::get(map, path).cloned().unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_resolution_order() {
        let mut opts = LoadOptions::default();
        assert!(resolve_path(&opts).ends_with("deepsolve/settings.yaml"));
        opts.env.insert(CONFIG_ENV.into(), "/e/s.yaml".into());
        assert_eq!(resolve_path(&opts), PathBuf::from("/e/s.yaml"));
        opts.config_path = Some("/f/s.yaml".into());
        assert_eq!(resolve_path(&opts), PathBuf::from("/f/s.yaml"));
    }

    #[test]
    fn get_navigates_and_rejects_unknown_keys() {
        let loaded = Loaded {
            settings: Settings::default(),
            warnings: Vec::new(),
            path: PathBuf::new(),
            file_exists: false,
            tool_sections: Vec::new(),
        };
        assert_eq!(
            get(&loaded, Some("solve.max_rounds")).unwrap(),
            Value::from(12)
        );
        assert_eq!(
            get(&loaded, Some("models.reason.model")).unwrap(),
            Value::Null
        );
        assert_eq!(
            get(&loaded, Some("llm.extra_body.anything")).unwrap(),
            Value::Null
        );
        let e = get(&loaded, Some("solve.max_round"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("unknown setting 'solve.max_round' on the command line"),
            "{e}"
        );
        assert!(get(&loaded, Some("a..b")).is_err());
        assert!(get(&loaded, None).unwrap().is_object());
    }
}
