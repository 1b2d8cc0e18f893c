//! Strict checking of the merged tree against [`crate::schema`], clamping numeric knobs in place
//! (so `settings set` can write the clamped value), then building the typed [`Settings`].

use deepsolve_core::SolveConfig;
use deepsolve_core::config::{ConfigError, Knob, clamp_knob, number_value};
use secrecy::SecretString;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::{Origin, SettingsError, preview, type_name};
use crate::model::{ApiKeySource, SandboxSettings, ServerSettings, Settings, has_password};
use crate::schema::{self, Builtin, Clamp, Field, Kind, Own, Schema};
use crate::tree::Origins;

/// The result of checking a tree: the solve knobs (built by core) and the warnings.
pub(crate) struct Checked {
    pub solve: SolveConfig,
    pub warnings: Vec<String>,
}

/// Check every key and value of `tree`, clamping in place; unknown keys, wrong types and missing
/// required keys are errors naming the key and its origin. `null` anywhere means "default".
pub(crate) fn check(
    schema: Schema<'_>,
    tree: &mut Map<String, Value>,
    origins: &Origins,
) -> Result<Checked, SettingsError> {
    let mut checker = Checker {
        schema,
        origins,
        warnings: Vec::new(),
        solve: None,
    };
    checker.fields(&mut Vec::new(), schema::ROOT, schema::SECTIONS, tree)?;
    Ok(Checked {
        solve: checker.solve.unwrap_or_default(),
        warnings: checker.warnings,
    })
}

/// Check `tree` and build the typed settings from it.
pub(crate) fn build(
    schema: Schema<'_>,
    mut tree: Map<String, Value>,
    origins: &Origins,
) -> Result<(Settings, Vec<String>), SettingsError> {
    let checked = check(schema, &mut tree, origins)?;
    let mut llm_value = tree.remove("llm").unwrap_or(Value::Null);
    let api_key = llm_value
        .as_object_mut()
        .and_then(|llm| llm.remove("api_key"));
    let mut llm: crate::model::LlmSettings = section(llm_value, "llm", origins)?;
    if let Some(Value::String(key)) = api_key {
        llm.api_key = Some(SecretString::from(key));
        llm.api_key_source = key_source(origins.of(&["llm".into(), "api_key".into()]));
    }
    let mut tools_value = tree.remove("tools").unwrap_or(Value::Null);
    let tool_sections = take_tool_sections(schema, &mut tools_value);
    let old_backend = take_key(&mut tools_value, "sandbox");
    let mut tools: crate::model::ToolsSettings = section(tools_value, "tools", origins)?;
    tools.sections = tool_sections;
    let mut warnings = checked.warnings;
    let sandbox_value = tree.remove("sandbox").unwrap_or(Value::Null);
    let backend_set = sandbox_value.get("backend").is_some();
    let mut sandbox: SandboxSettings = section(sandbox_value, "sandbox", origins)?;
    if let Some(Value::String(backend)) = old_backend {
        let old = origins.of(&["tools".into(), "sandbox".into()]);
        warnings.push(if backend_set {
            let new = origins.of(&["sandbox".into(), "backend".into()]);
            format!("tools.sandbox is deprecated and ignored: sandbox.backend ({new}) wins ({old})")
        } else {
            sandbox.backend = backend;
            format!("tools.sandbox is deprecated; write sandbox.backend instead ({old})")
        });
    }
    let mut server_value = tree.remove("server").unwrap_or(Value::Null);
    let database = take_key(&mut server_value, "database");
    let mut server: ServerSettings = section(server_value, "server", origins)?;
    if let Some(Value::String(url)) = database {
        server.database = Some(SecretString::from(url));
    }
    let settings = Settings {
        llm,
        models: section(
            tree.remove("models").unwrap_or(Value::Null),
            "models",
            origins,
        )?,
        solve: checked.solve,
        tools,
        sandbox,
        server,
        kb: section(tree.remove("kb").unwrap_or(Value::Null), "kb", origins)?,
        prompts: section(
            tree.remove("prompts").unwrap_or(Value::Null),
            "prompts",
            origins,
        )?,
    };
    Ok((settings, warnings))
}

/// Remove `key` from a section's mapping (absent, or the section is unset: `None`).
fn take_key(section: &mut Value, key: &str) -> Option<Value> {
    section.as_object_mut().and_then(|map| map.remove(key))
}

/// The checked sections of the tools (`tools.<tool>`), taken out of the `tools` mapping so the
/// rest deserialises into the strict [`ToolsSettings`](crate::ToolsSettings).
fn take_tool_sections(schema: Schema<'_>, tools: &mut Value) -> Map<String, Value> {
    let Value::Object(map) = tools else {
        return Map::new();
    };
    let names: Vec<String> = map
        .keys()
        .filter(|k| schema.is_tool_section(k))
        .cloned()
        .collect();
    names
        .into_iter()
        .filter_map(|name| map.remove(&name).map(|value| (name, value)))
        .collect()
}

fn key_source(origin: Origin) -> Option<ApiKeySource> {
    match origin {
        Origin::Env(var) => Some(ApiKeySource::Env(var)),
        Origin::File(path) => Some(ApiKeySource::File(path)),
        Origin::Set(_) => Some(ApiKeySource::Set),
        Origin::Default | Origin::CommandLine => None,
    }
}

/// Deserialise a checked section. After [`check`] this cannot fail short of a schema/struct
/// mismatch (a test guards against that); if it ever does, the message still names the section.
fn section<T: DeserializeOwned + Default>(
    value: Value,
    name: &str,
    origins: &Origins,
) -> Result<T, SettingsError> {
    if value.is_null() {
        return Ok(T::default());
    }
    serde_json::from_value(value).map_err(|e| SettingsError::WrongType {
        key: name.to_string(),
        origin: origins.of(&[name.to_string()]),
        expected: "valid settings".into(),
        got: e.to_string(),
    })
}

/// What to say when a secret is found written in the settings file.
struct InClear {
    holds_secret: fn(&str) -> bool,
    says: &'static str,
    prefer: &'static str,
}

struct Checker<'a> {
    schema: Schema<'a>,
    origins: &'a Origins,
    warnings: Vec<String>,
    solve: Option<SolveConfig>,
}

impl Checker<'_> {
    fn wrong(&self, path: &[String], expected: &str, got: String) -> SettingsError {
        SettingsError::WrongType {
            key: path.join("."),
            origin: self.origins.of(path),
            expected: expected.to_string(),
            got,
        }
    }

    fn warn(&mut self, path: &[String], text: impl std::fmt::Display) {
        let origin = self.origins.of(path);
        self.warnings.push(format!("{text} ({origin})"));
    }

    fn value(
        &mut self,
        path: &mut Vec<String>,
        kind: Kind,
        value: &mut Value,
    ) -> Result<(), SettingsError> {
        if value.is_null() {
            return Ok(());
        }
        match kind {
            Kind::Section(_) | Kind::Builtin(Builtin(Own::Tools)) => match value {
                Value::Object(map) => {
                    let fields = self.schema.fields(kind).unwrap_or_default();
                    self.fields(path, kind, &fields, map)
                }
                other => Err(self.wrong(path, "a mapping", preview(other))),
            },
            Kind::Text => self.text(path, value, "a string"),
            Kind::EnvName => self.env_name(path, value),
            Kind::Number(clamp) => self.number(path, value, clamp),
            Kind::Flag => self.flag(path, value),
            Kind::Choice(words) => self.choice(path, value, words),
            Kind::FreeMap if value.is_object() => Ok(()),
            Kind::FreeMap => Err(self.wrong(path, "a mapping", preview(value))),
            Kind::TextList => self.text_list(path, value),
            Kind::Builtin(Builtin(own)) => match own {
                Own::Secret => self.secret(path, value),
                Own::DatabaseUrl => self.database_url(path, value),
                Own::Solve => self.solve(path, value),
                // `Own::Tools` is checked as a section above.
                Own::Free | Own::SolveKnob | Own::SolveFlag | Own::Tools => Ok(()),
            },
        }
    }

    /// A mapping with fixed keys: unknown keys first (the likeliest mistake), then each value,
    /// then required keys. Nulls are dropped so the typed structs see "absent = default".
    fn fields(
        &mut self,
        path: &mut Vec<String>,
        kind: Kind,
        fields: &[Field],
        map: &mut Map<String, Value>,
    ) -> Result<(), SettingsError> {
        if let Some(unknown) = map.keys().find(|k| self.schema.child(kind, k).is_none()) {
            let mut key = path.clone();
            key.push(unknown.clone());
            let unknown = self
                .schema
                .unknown(path, kind, std::slice::from_ref(unknown));
            return Err(SettingsError::unknown_key(unknown, &self.origins.of(&key)));
        }
        for field in fields {
            if let Some(value) = map.get_mut(field.name) {
                path.push(field.name.to_string());
                let checked = self.value(path, field.kind, value);
                path.pop();
                checked?;
            }
        }
        map.retain(|_, v| !v.is_null());
        match fields
            .iter()
            .find(|f| f.required && !map.contains_key(f.name))
        {
            Some(missing) => Err(SettingsError::Missing {
                key: format!("{}.{}", path.join("."), missing.name),
                origin: self.origins.of(path),
                why: format!("'{}' needs a '{}'", path.join("."), missing.name),
            }),
            None => Ok(()),
        }
    }

    /// A string; an empty one means unset (an empty model name or URL is never meant).
    fn text(
        &self,
        path: &[String],
        value: &mut Value,
        expected: &str,
    ) -> Result<(), SettingsError> {
        match value {
            Value::String(s) if s.trim().is_empty() => *value = Value::Null,
            Value::String(_) => {}
            other => return Err(self.wrong(path, expected, preview(other))),
        }
        Ok(())
    }

    /// A variable name: checked so a key pasted here by mistake is refused (and not echoed).
    fn env_name(&self, path: &[String], value: &mut Value) -> Result<(), SettingsError> {
        const EXPECTED: &str = "an environment variable name (letters, digits, _)";
        self.text(path, value, EXPECTED)?;
        let Value::String(name) = value else {
            return Ok(());
        };
        let valid = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        if valid {
            Ok(())
        } else {
            Err(self.wrong(
                path,
                EXPECTED,
                format!("a string of {} characters", name.chars().count()),
            ))
        }
    }

    /// The API key: a string, never echoed in errors; a key stored in the file gets a warning.
    fn secret(&mut self, path: &[String], value: &mut Value) -> Result<(), SettingsError> {
        let in_clear = InClear {
            holds_secret: |_| true,
            says: "is stored in clear",
            prefer: "DEEPSOLVE_API_KEY or llm.api_key_env",
        };
        self.secret_text(path, value, in_clear)
    }

    /// A database URL: a string, never echoed in errors; a password stored in the file gets a
    /// warning.
    fn database_url(&mut self, path: &[String], value: &mut Value) -> Result<(), SettingsError> {
        let in_clear = InClear {
            holds_secret: has_password,
            says: "holds a password in clear",
            prefer: "DEEPSOLVE_DATABASE_URL",
        };
        self.secret_text(path, value, in_clear)
    }

    /// A string that is or may hold a secret: blank means unset, a wrong type is named without
    /// the value, and a secret written in the file gets `in_clear`'s warning.
    fn secret_text(
        &mut self,
        path: &[String],
        value: &mut Value,
        in_clear: InClear,
    ) -> Result<(), SettingsError> {
        match value {
            Value::String(s) if s.trim().is_empty() => *value = Value::Null,
            Value::String(text) => {
                if let (true, Origin::File(file)) =
                    ((in_clear.holds_secret)(text), self.origins.of(path))
                {
                    self.warnings.push(format!(
                        "{} {} in {}; prefer {}",
                        path.join("."),
                        in_clear.says,
                        file.display(),
                        in_clear.prefer
                    ));
                }
            }
            other => return Err(self.wrong(path, "a string", type_name(other).to_string())),
        }
        Ok(())
    }

    /// A number, clamped into `clamp` with a warning (the clamped value is what is kept); a
    /// non-finite one leaves the key unset.
    fn number(
        &mut self,
        path: &[String],
        value: &mut Value,
        clamp: Clamp,
    ) -> Result<(), SettingsError> {
        let expected = if clamp.integer {
            "a whole number"
        } else {
            "a number"
        };
        let n = number_value(value).ok_or_else(|| self.wrong(path, expected, preview(value)))?;
        if !n.is_finite() {
            self.warn(
                path,
                format_args!(
                    "{} = {n} is not a finite number; leaving it unset",
                    path.join(".")
                ),
            );
            *value = Value::Null;
            return Ok(());
        }
        // Core's clamp, so these warnings read like the solve knobs'; the default is unused
        // (finite values only get here).
        let knob = Knob {
            key: "",
            default: clamp.min,
            min: clamp.min,
            max: clamp.max,
            integer: clamp.integer,
            help: "",
            help_zh: "",
        };
        let (used, warning) = clamp_knob(&knob, n);
        if let Some(mut warning) = warning {
            warning.key = path.join(".");
            self.warn(path, warning);
        }
        *value = if clamp.integer {
            Value::from(used as i64)
        } else {
            Value::from(used)
        };
        Ok(())
    }

    /// `true` or `false`; YAML and environment spellings are normalised to a boolean.
    fn flag(&self, path: &[String], value: &mut Value) -> Result<(), SettingsError> {
        if value.as_str().is_some_and(|s| s.trim().is_empty()) {
            *value = Value::Null;
            return Ok(());
        }
        let flag = deepsolve_core::config::parse_flag(value)
            .ok_or_else(|| self.wrong(path, "true or false", preview(value)))?;
        *value = Value::Bool(flag);
        Ok(())
    }

    fn choice(
        &self,
        path: &[String],
        value: &mut Value,
        words: &[&str],
    ) -> Result<(), SettingsError> {
        match value {
            Value::String(s) if words.contains(&s.as_str()) => Ok(()),
            // A choice between words that include `true`/`false` (`llm.vision`) takes the YAML
            // boolean for them as well.
            Value::Bool(b) if words.contains(&if *b { "true" } else { "false" }) => Ok(()),
            Value::String(s) if s.trim().is_empty() => {
                *value = Value::Null;
                Ok(())
            }
            other => Err(self.wrong(
                path,
                &format!("one of {}", words.join(", ")),
                preview(other),
            )),
        }
    }

    fn text_list(&self, path: &[String], value: &mut Value) -> Result<(), SettingsError> {
        const EXPECTED: &str = "a list of names";
        let Value::Array(items) = value else {
            return Err(self.wrong(path, EXPECTED, preview(value)));
        };
        match items
            .iter()
            .find(|item| !matches!(item, Value::String(s) if !s.trim().is_empty()))
        {
            Some(bad) => Err(self.wrong(path, EXPECTED, format!("an item {}", preview(bad)))),
            None => Ok(()),
        }
    }

    /// The solve section goes through core's `SolveConfig::from_map` (strict keys, clamps);
    /// clamped values are written back into the tree and the warnings get the `solve.` prefix.
    fn solve(&mut self, path: &[String], value: &mut Value) -> Result<(), SettingsError> {
        let Value::Object(map) = value else {
            return Err(self.wrong(path, "a mapping of solve knobs", preview(value)));
        };
        let (config, warnings) =
            SolveConfig::from_map(map).map_err(|e| self.config_error(path, e))?;
        for legacy in SolveConfig::legacy_warnings(map) {
            self.warn(path, legacy);
        }
        let effective = config.to_map();
        for mut warning in warnings {
            if let Some(used) = effective.get(&warning.key) {
                map.insert(warning.key.clone(), used.clone());
            }
            let key = vec![path.join("."), warning.key.clone()];
            warning.key = key.join(".");
            self.warn(&key, &warning);
        }
        self.solve = Some(config);
        Ok(())
    }

    fn config_error(&self, path: &[String], err: ConfigError) -> SettingsError {
        let key_path = |key: &str| {
            let mut full = path.to_vec();
            full.push(key.to_string());
            full
        };
        match err {
            ConfigError::UnknownKey(unknown) => {
                let first = unknown
                    .keys()
                    .first()
                    .map_or(path.to_vec(), |k| key_path(k));
                let origin = self.origins.of(&first);
                SettingsError::unknown_key(unknown.under(&path.join(".")), &origin)
            }
            ConfigError::WrongType { key, expected, got } => {
                self.wrong(&key_path(&key), expected, got)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;
    use serde_json::json;
    use std::path::PathBuf;

    fn file_origins() -> Origins {
        Origins::new(Origin::File(PathBuf::from("/s.yaml")))
    }

    fn run(tree: Value) -> Result<(Settings, Vec<String>), SettingsError> {
        let Value::Object(map) = tree else {
            unreachable!("tests pass objects")
        };
        build(Schema::new(&[]), map, &file_origins())
    }

    fn err(tree: Value) -> String {
        run(tree).unwrap_err().to_string()
    }

    #[test]
    fn vision_is_auto_or_a_boolean_written_either_way() {
        use crate::Vision;
        let vision = |v: Value| run(json!({"llm": {"vision": v}})).unwrap().0.llm.vision;
        assert_eq!(run(json!({})).unwrap().0.llm.vision, Vision::Auto);
        assert_eq!(vision(json!("auto")), Vision::Auto);
        assert_eq!(vision(json!(true)), Vision::Sees);
        assert_eq!(vision(json!("true")), Vision::Sees);
        assert_eq!(vision(json!(false)), Vision::Blind);
        assert_eq!(vision(json!("false")), Vision::Blind);
        // `settings get` shows the boolean as a boolean.
        let (s, _) = run(json!({"llm": {"vision": "false"}})).unwrap();
        assert_eq!(
            serde_json::to_value(&s.llm).unwrap()["vision"],
            json!(false)
        );
    }

    #[test]
    fn a_full_tree_builds() {
        let (s, w) = run(json!({
            "llm": {"base_url": "http://x", "model": "m", "api_key_env": "K",
                    "context_window": 64000, "protocol": "tags", "extra_body": {"a": {"b": 1}}},
            "models": {"reason": {"model": "r"}, "vision": null},
            "solve": {"max_rounds": 5, "plan_first": false},
            "tools": {"enabled": ["reason"]},
            "sandbox": {"backend": "none", "memory_mb": 512, "seccomp": false},
            "server": {"addr": "0.0.0.0:80", "database": "sqlite:///x.db",
                       "cors_origins": ["https://a.example"], "header_timeout_s": 5},
        }))
        .unwrap();
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(s.llm.context_window, Some(64000));
        assert_eq!(s.llm.protocol, crate::Protocol::Tags);
        assert_eq!(s.models.reason.map(|r| r.model), Some("r".into()));
        assert!(s.models.vision.is_none());
        assert_eq!(s.solve.max_rounds, 5);
        assert!(!s.solve.plan_first);
        assert_eq!(s.sandbox.backend, "none");
        assert_eq!((s.sandbox.memory_mb, s.sandbox.max_processes), (512, 64));
        assert!(!s.sandbox.seccomp);
        assert_eq!(s.server.addr.as_deref(), Some("0.0.0.0:80"));
        assert_eq!(
            s.server
                .database
                .as_ref()
                .map(|d| d.expose_secret().to_string()),
            Some("sqlite:///x.db".into())
        );
        assert_eq!(s.server.cors_origins, ["https://a.example"]);
        assert_eq!(
            (s.server.header_timeout_s, s.server.body_timeout_s),
            (5, 30)
        );
    }

    #[test]
    fn tools_sandbox_is_the_deprecated_name_of_sandbox_backend() {
        let (s, w) = run(json!({"tools": {"sandbox": "none"}})).unwrap();
        assert_eq!(s.sandbox.backend, "none");
        assert_eq!(
            w,
            ["tools.sandbox is deprecated; write sandbox.backend instead (in /s.yaml)"]
        );
        let (s, w) =
            run(json!({"tools": {"sandbox": "none"}, "sandbox": {"backend": "bwrap"}})).unwrap();
        assert_eq!(s.sandbox.backend, "bwrap");
        assert!(w[0].contains("deprecated and ignored"), "{w:?}");
        let e = err(json!({"llm": {"vision": "maybe"}}));
        assert!(
            e.contains("'llm.vision'") && e.contains("auto, true, false"),
            "{e}"
        );
        let e = err(json!({"tools": {"sandbox": "docker"}}));
        assert!(
            e.contains("'tools.sandbox'") && e.contains("auto, bwrap, none"),
            "{e}"
        );
    }

    #[test]
    fn knowledge_base_limits_are_clamped_and_the_embedding_model_is_a_model_ref() {
        let (s, _) = run(json!({})).unwrap();
        assert_eq!(
            (s.kb.max_file_mb, s.kb.max_pages, s.kb.max_chunks),
            (50, 2_000, 200_000)
        );
        assert_eq!(s.kb.ingest_timeout_s, 600);
        assert!(s.models.embedding.is_none());
        let (s, w) = run(json!({
            "kb": {"max_file_mb": 0, "max_pages": 10, "max_chunks": 1, "ingest_timeout_s": 1},
            "models": {"embedding": {"model": "bge-m3", "base_url": "http://127.0.0.1:9/v1",
                                     "api_key_env": "EMBED_KEY"}},
        }))
        .unwrap();
        assert_eq!(
            (s.kb.max_file_mb, s.kb.max_pages, s.kb.max_chunks),
            (1, 10, 100)
        );
        assert_eq!(s.kb.ingest_timeout_s, 10);
        for key in ["kb.max_file_mb", "kb.max_chunks", "kb.ingest_timeout_s"] {
            assert!(w.iter().any(|w| w.contains(key)), "{key}: {w:?}");
        }
        let embedding = s.models.embedding.clone().unwrap();
        assert_eq!(embedding.model, "bge-m3");
        assert_eq!(embedding.api_key_env.as_deref(), Some("EMBED_KEY"));
        assert_eq!(s.redacted_value()["kb"]["max_pages"], json!(10));
        let e = err(json!({"kb": {"max_file": 3}}));
        assert!(
            e.contains("'kb.max_file'") && e.contains("max_file_mb"),
            "{e}"
        );
        let e = err(json!({"models": {"embedding": {"base_url": "http://x"}}}));
        assert!(e.contains("models.embedding.model"), "{e}");
    }

    #[test]
    fn sandbox_and_server_numbers_are_clamped() {
        let (s, w) = run(json!({
            "sandbox": {"memory_mb": 1, "max_processes": 100000, "retention_days": 0},
            "server": {"header_timeout_s": 0, "max_connections": 0, "shutdown_grace_s": 9999},
        }))
        .unwrap();
        assert_eq!(s.sandbox.memory_mb, 64);
        assert_eq!(s.sandbox.max_processes, 4096);
        assert_eq!(s.sandbox.retention_days, 0);
        assert_eq!(s.server.header_timeout_s, 1);
        assert_eq!(s.server.max_connections, 1);
        assert_eq!(s.server.shutdown_grace_s, 600);
        for key in [
            "server.shutdown_grace_s",
            "sandbox.memory_mb",
            "sandbox.max_processes",
            "server.header_timeout_s",
        ] {
            assert!(w.iter().any(|w| w.contains(key)), "{key}: {w:?}");
        }
    }

    #[test]
    fn the_price_and_the_browser_session_settings_are_read_and_clamped() {
        let (s, w) = run(json!({
            "llm": {"price": {"input_per_mtok": 0.27, "output_per_mtok": -1}},
            "server": {"session_hours": 100000, "secure_cookies": true},
        }))
        .unwrap();
        let price = s.llm.price.expect("price");
        assert_eq!(
            (
                price.input_per_mtok,
                price.output_per_mtok,
                price.currency.as_str()
            ),
            (0.27, 0.0, "USD")
        );
        assert_eq!(s.server.session_hours, 720);
        assert!(s.server.secure_cookies && !s.server.trust_forwarded_proto);
        for key in ["llm.price.output_per_mtok", "server.session_hours"] {
            assert!(w.iter().any(|w| w.contains(key)), "{key}: {w:?}");
        }
        let e = err(json!({"llm": {"price": {"input_per_mtok": 1}}}));
        assert!(e.contains("'llm.price.output_per_mtok'"), "{e}");
        let e = err(json!({"llm": {"price": {"input": 1, "output_per_mtok": 1}}}));
        assert!(e.contains("'llm.price.input'"), "{e}");
        assert_eq!(run(json!({})).unwrap().0.server.session_hours, 12);
    }

    #[test]
    fn a_database_password_is_a_secret() {
        let url = "postgres://u:hunter2@db.example/deepsolve";
        let (s, w) = run(json!({"server": {"database": url}})).unwrap();
        assert!(w[0].contains("server.database holds a password"), "{w:?}");
        assert!(!w[0].contains("hunter2"));
        assert!(!format!("{s:?}").contains("hunter2"));
        let shown = s.redacted_value();
        assert_eq!(
            shown["server"]["database"],
            json!("postgres://u:***@db.example/deepsolve")
        );
        let e = err(json!({"server": {"database": 5}}));
        assert!(
            e.contains("server.database") && e.contains("a number"),
            "{e}"
        );
        let (_, w) = run(json!({"server": {"database": "postgres://u@db/x"}})).unwrap();
        assert!(w.is_empty(), "{w:?}");
    }

    #[test]
    fn unknown_keys_name_the_full_key_and_the_file() {
        let e = err(json!({"llm": {"modle": "x"}}));
        assert!(
            e.starts_with("unknown setting 'llm.modle' in /s.yaml (known in llm: base_url, model,"),
            "{e}"
        );
        let e = err(json!({"solve": {"max_round": 3}}));
        assert!(
            e.starts_with("unknown setting 'solve.max_round' in /s.yaml (known in solve:"),
            "{e}"
        );
        let e = err(json!({"models": {"reason": {"model": "m", "url": 1}}}));
        assert!(e.contains("'models.reason.url'"), "{e}");
        let e = err(json!({"serve": {}}));
        assert!(e.contains("'serve'") && e.contains("known sections"), "{e}");
    }

    #[test]
    fn wrong_types_are_named() {
        let e = err(json!({"llm": {"context_window": "big"}}));
        assert_eq!(
            e,
            "setting 'llm.context_window' in /s.yaml must be a whole number, got \"big\""
        );
        let e = err(json!({"solve": {"max_rounds": "many"}}));
        assert!(
            e.starts_with("setting 'solve.max_rounds' in /s.yaml must be a number"),
            "{e}"
        );
        let e = err(json!({"llm": {"protocol": "xml"}}));
        assert!(e.contains("must be one of native, tags, auto"), "{e}");
        let e = err(json!({"tools": {"sandbox": "docker"}}));
        assert!(e.contains("must be one of auto, bwrap, none"), "{e}");
        let e = err(json!({"tools": {"enabled": "reason"}}));
        assert!(e.contains("'tools.enabled'"), "{e}");
        let e = err(json!({"llm": 3}));
        assert!(e.contains("'llm'") && e.contains("a mapping"), "{e}");
        let e = err(json!({"llm": {"api_key_env": "sk-abc def"}}));
        assert!(
            e.contains("'llm.api_key_env'") && !e.contains("sk-abc"),
            "{e}"
        );
    }

    #[test]
    fn secret_type_errors_do_not_echo_the_value() {
        let e = err(json!({"llm": {"api_key": 123456789}}));
        assert!(
            e.contains("'llm.api_key'") && !e.contains("123456789"),
            "{e}"
        );
    }

    #[test]
    fn a_model_ref_needs_a_model() {
        let e = err(json!({"models": {"reason": {"base_url": "http://x"}}}));
        assert!(
            e.contains("'models.reason.model'") && e.contains("required"),
            "{e}"
        );
    }

    #[test]
    fn knobs_are_clamped_in_place_with_warnings() {
        let mut tree = match json!({"llm": {"context_window": 5}, "solve": {"max_rounds": 1000, "temperature": ".nan"}})
        {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let warnings = check(Schema::new(&[]), &mut tree, &file_origins())
            .unwrap()
            .warnings;
        assert_eq!(tree["llm"]["context_window"], json!(1024));
        assert_eq!(tree["solve"]["max_rounds"], json!(50));
        assert_eq!(tree["solve"]["temperature"], json!(0.3));
        assert!(
            warnings.contains(
                &"solve.max_rounds = 1000 is outside 1..=50; using 50 (in /s.yaml)".to_string()
            ),
            "{warnings:?}"
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with("llm.context_window = 5 is outside 1024..=10000000"))
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with("solve.temperature = NaN"))
        );
    }

    #[test]
    fn non_finite_context_window_is_unset_with_a_warning() {
        let (s, w) = run(json!({"llm": {"context_window": ".inf"}})).unwrap();
        assert_eq!(s.llm.context_window, None);
        assert!(w.iter().any(|w| w.contains("not a finite number")), "{w:?}");
    }

    #[test]
    fn empty_text_is_unset_and_null_is_default() {
        let (s, _) =
            run(json!({"llm": {"model": "", "protocol": null}, "tools": {"sandbox": null}}))
                .unwrap();
        assert_eq!(s.llm.model, None);
        assert_eq!(s.llm.protocol, crate::Protocol::Native);
        assert_eq!(s.sandbox.backend, "auto");
    }

    #[test]
    fn an_api_key_in_the_file_is_used_and_warned_about() {
        let (s, w) = run(json!({"llm": {"api_key": "sk-file"}})).unwrap();
        assert!(s.llm.api_key.is_some());
        assert_eq!(
            s.llm.api_key_source,
            Some(ApiKeySource::File("/s.yaml".into()))
        );
        assert!(w.iter().any(|w| w.contains("stored in clear")), "{w:?}");
        assert!(!w.iter().any(|w| w.contains("sk-file")));
    }

    /// The schema and the typed structs must describe the same keys.
    #[test]
    fn schema_matches_the_structs() {
        let mut s = Settings::default();
        s.models.reason = Some(crate::ModelRef {
            model: "m".into(),
            base_url: None,
            api_key_env: None,
        });
        s.models.vision = s.models.reason.clone();
        s.models.embedding = s.models.reason.clone();
        s.llm.price = Some(crate::PriceSettings {
            input_per_mtok: 0.5,
            output_per_mtok: 2.0,
            currency: "USD".into(),
        });
        let mut from_structs = Vec::new();
        leaves(&s.redacted_value(), String::new(), &mut from_structs);
        // Resolved at load, shown by `settings get prompts`, never written.
        from_structs.retain(|key| key != "prompts.overridden");
        from_structs.sort();
        let mut from_schema = schema::all_keys(&[]);
        // Read only to be moved to its new name, `sandbox.backend`.
        from_schema.retain(|key| key != "tools.sandbox");
        from_schema.sort();
        assert_eq!(from_structs, from_schema);
    }

    fn leaves(value: &Value, prefix: String, out: &mut Vec<String>) {
        match value {
            // extra_body is a free map: a leaf for the schema.
            Value::Object(map) if !prefix.ends_with("extra_body") => {
                for (k, v) in map {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    leaves(v, key, out);
                }
            }
            _ => out.push(prefix),
        }
    }
}
