//! The environment and `--set` layers, applied as dotted-path writes into the file's tree.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::error::{Origin, SettingsError};
use crate::schema::Schema;
use crate::tree::{self, Origins};

/// The prefix of every variable we read (matched case-insensitively).
const PREFIX: &str = "DEEPSOLVE_";

/// Short names for the common keys.
const SHORTHANDS: &[(&str, &str)] = &[
    ("DEEPSOLVE_BASE_URL", "llm.base_url"),
    ("DEEPSOLVE_MODEL", "llm.model"),
    ("DEEPSOLVE_CONTEXT_WINDOW", "llm.context_window"),
    ("DEEPSOLVE_PROTOCOL", "llm.protocol"),
];

/// Variables holding the API key, highest precedence first. `OPENAI_API_KEY` is matched
/// exactly: it is not ours, and other tools set it.
const API_KEY_VARS: &[&str] = &["DEEPSOLVE_API_KEY", "OPENAI_API_KEY"];

/// Apply the environment: the key variables, the shorthands, then every
/// `DEEPSOLVE_<SECTION>__<KEY>[__<SUBKEY>…]` in name order (so the generic form wins over a
/// shorthand for the same key, deterministically). Empty variables count as unset, as shells
/// commonly export them empty to "turn off" a value. Other `DEEPSOLVE_*` names without `__`
/// (e.g. `DEEPSOLVE_CONFIG`, or another component's `DEEPSOLVE_LOG`) are not settings.
pub(crate) fn apply_env(
    schema: Schema<'_>,
    tree: &mut Map<String, Value>,
    origins: &mut Origins,
    env: &HashMap<String, String>,
) -> Result<(), SettingsError> {
    let mut vars: Vec<(&String, &String)> = env.iter().filter(|(_, v)| !v.is_empty()).collect();
    vars.sort();
    let key_var = API_KEY_VARS.iter().find_map(|want| {
        vars.iter().find(|(name, _)| {
            name.as_str() == *want || (want.starts_with(PREFIX) && name.eq_ignore_ascii_case(want))
        })
    });
    if let Some((name, value)) = key_var {
        let path = vec!["llm".to_string(), "api_key".to_string()];
        tree::write(tree, &path, Value::String((*value).clone()));
        origins.record(&path, Origin::Env((*name).clone()));
    }
    for (name, value) in &vars {
        if let Some((_, key)) = SHORTHANDS
            .iter()
            .find(|(var, _)| name.eq_ignore_ascii_case(var))
        {
            write_raw(
                schema,
                tree,
                origins,
                key,
                value,
                Origin::Env((*name).clone()),
            )?;
        }
    }
    for (name, value) in &vars {
        if let Some(path) = generic_path(name)? {
            write_raw(
                schema,
                tree,
                origins,
                &path,
                value,
                Origin::Env((*name).clone()),
            )?;
        }
    }
    Ok(())
}

/// The dotted key of a `DEEPSOLVE_<SECTION>__<KEY>` variable, `None` for other variables.
fn generic_path(name: &str) -> Result<Option<String>, SettingsError> {
    let upper = name.to_ascii_uppercase();
    let Some(rest) = upper.strip_prefix(PREFIX) else {
        return Ok(None);
    };
    if !rest.contains("__") {
        return Ok(None);
    }
    let segments: Vec<String> = rest.split("__").map(str::to_ascii_lowercase).collect();
    if segments.iter().any(String::is_empty) {
        return Err(SettingsError::BadEnvVar {
            var: name.to_string(),
            reason: "expected DEEPSOLVE_<SECTION>__<KEY> with no empty part between '__'",
        });
    }
    Ok(Some(segments.join(".")))
}

/// Apply `--set KEY=VALUE` arguments in order (a later one wins).
pub(crate) fn apply_sets(
    schema: Schema<'_>,
    tree: &mut Map<String, Value>,
    origins: &mut Origins,
    sets: &[String],
) -> Result<(), SettingsError> {
    for arg in sets {
        let Some((key, raw)) = arg.split_once('=') else {
            return Err(SettingsError::BadSet {
                arg: arg.clone(),
                reason: "expected KEY=VALUE, e.g. solve.max_rounds=5",
            });
        };
        if key.trim().is_empty() {
            return Err(SettingsError::BadSet {
                arg: "=…".into(),
                reason: "the key before '=' is empty",
            });
        }
        write_raw(
            schema,
            tree,
            origins,
            key,
            raw,
            Origin::Set(key.trim().to_string()),
        )?;
    }
    Ok(())
}

/// Check `key` against the schema, turn `raw` into a value of the right kind, write it.
fn write_raw(
    schema: Schema<'_>,
    tree: &mut Map<String, Value>,
    origins: &mut Origins,
    key: &str,
    raw: &str,
    origin: Origin,
) -> Result<(), SettingsError> {
    let path = tree::parse_key(key)?;
    let kind = tree::known_kind(schema, &path, &origin)?;
    let value = tree::raw_value(kind, raw, &path, &origin)?;
    tree::write(tree, &path, value);
    origins.record(&path, origin);
    Ok(())
}

/// Below every explicit key (`--set`, `DEEPSOLVE_API_KEY`, `OPENAI_API_KEY`) but above the
/// file's: the variable named by `llm.api_key_env`, whichever layer named it. Returns a warning
/// when that variable is needed but unset, since the model call would otherwise fail obscurely.
pub(crate) fn apply_api_key_env(
    tree: &mut Map<String, Value>,
    origins: &mut Origins,
    env: &HashMap<String, String>,
) -> Option<String> {
    let key_path = vec!["llm".to_string(), "api_key".to_string()];
    if matches!(origins.of(&key_path), Origin::Env(_) | Origin::Set(_)) {
        return None;
    }
    let name_path = vec!["llm".to_string(), "api_key_env".to_string()];
    let Some(Value::String(name)) = tree::get(tree, &name_path) else {
        return None;
    };
    let name = name.trim().to_string();
    match env.get(&name).filter(|v| !v.is_empty()) {
        Some(key) => {
            tree::write(tree, &key_path, Value::String(key.clone()));
            origins.record(&key_path, Origin::Env(name));
            None
        }
        None if name.is_empty() => None,
        None => {
            let has_file_key =
                matches!(tree::get(tree, &key_path), Some(Value::String(s)) if !s.is_empty());
            (!has_file_key).then(|| {
                format!(
                    "llm.api_key_env names {name}, which is not set: no API key ({})",
                    origins.of(&name_path)
                )
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn fresh() -> (Map<String, Value>, Origins) {
        (Map::new(), Origins::new(Origin::Default))
    }

    #[test]
    fn generic_names_map_to_dotted_keys() {
        assert_eq!(
            generic_path("DEEPSOLVE_SOLVE__MAX_ROUNDS").unwrap(),
            Some("solve.max_rounds".into())
        );
        assert_eq!(
            generic_path("deepsolve_llm__extra_body__x").unwrap(),
            Some("llm.extra_body.x".into())
        );
        assert_eq!(generic_path("DEEPSOLVE_CONFIG").unwrap(), None);
        assert_eq!(generic_path("HOME").unwrap(), None);
        assert!(generic_path("DEEPSOLVE_SOLVE__").is_err());
    }

    #[test]
    fn env_values_are_typed_by_the_schema() {
        let (mut tree, mut o) = fresh();
        let vars = env(&[
            ("DEEPSOLVE_SOLVE__MAX_ROUNDS", "5"),
            ("DEEPSOLVE_MODEL", "1.10"),
            ("DEEPSOLVE_TOOLS__ENABLED", "reason,web_search"),
            ("DEEPSOLVE_PROTOCOL", ""),
        ]);
        apply_env(Schema::new(&[]), &mut tree, &mut o, &vars).unwrap();
        assert_eq!(
            Value::Object(tree),
            json!({"solve": {"max_rounds": 5}, "llm": {"model": "1.10"}, "tools": {"enabled": ["reason", "web_search"]}})
        );
    }

    #[test]
    fn unknown_env_keys_name_the_variable() {
        let (mut tree, mut o) = fresh();
        let err = apply_env(
            Schema::new(&[]),
            &mut tree,
            &mut o,
            &env(&[("DEEPSOLVE_SOLVE__MAX_ROUNDZ", "5")]),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("'solve.max_roundz'") && text.contains("DEEPSOLVE_SOLVE__MAX_ROUNDZ"),
            "{text}"
        );
    }

    #[test]
    fn set_needs_key_and_equals() {
        let (mut tree, mut o) = fresh();
        let e = apply_sets(
            Schema::new(&[]),
            &mut tree,
            &mut o,
            &["solve.max_rounds".into()],
        )
        .unwrap_err();
        assert!(e.to_string().contains("'solve.max_rounds'"), "{e}");
        let e = apply_sets(Schema::new(&[]), &mut tree, &mut o, &["=5".into()]).unwrap_err();
        assert!(e.to_string().contains("key before '=' is empty"), "{e}");
        let e =
            apply_sets(Schema::new(&[]), &mut tree, &mut o, &["llm.modle=x".into()]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("unknown setting 'llm.modle' in --set llm.modle=…"),
            "{e}"
        );
    }

    #[test]
    fn set_values_parse_as_yaml_scalars() {
        let (mut tree, mut o) = fresh();
        let sets = [
            "solve.max_rounds=5",
            "llm.model=gpt-4o",
            "solve.plan_first=false",
            "llm.extra_body={a: 1}",
        ];
        apply_sets(Schema::new(&[]), &mut tree, &mut o, &sets.map(String::from)).unwrap();
        assert_eq!(
            Value::Object(tree),
            json!({"solve": {"max_rounds": 5, "plan_first": false}, "llm": {"model": "gpt-4o", "extra_body": {"a": 1}}})
        );
    }

    #[test]
    fn api_key_env_is_below_explicit_keys() {
        let (mut tree, mut o) = fresh();
        tree::write(
            &mut tree,
            &["llm".into(), "api_key_env".into()],
            json!("MY_KEY"),
        );
        let vars = env(&[("MY_KEY", "k-named")]);
        assert_eq!(apply_api_key_env(&mut tree, &mut o, &vars), None);
        assert_eq!(tree["llm"]["api_key"], json!("k-named"));

        let warning = apply_api_key_env(
            &mut tree.clone(),
            &mut Origins::new(Origin::Default),
            &env(&[]),
        );
        assert_eq!(warning, None, "a key is already there");
        let mut bare = Map::new();
        tree::write(
            &mut bare,
            &["llm".into(), "api_key_env".into()],
            json!("MISSING"),
        );
        let warning = apply_api_key_env(&mut bare, &mut Origins::new(Origin::Default), &env(&[]));
        assert!(warning.unwrap_or_default().contains("MISSING"));
    }
}
