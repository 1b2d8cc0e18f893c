//! The one error type of this crate, and [`Origin`], which every message uses to say where the
//! offending value came from. Each message is a single line, so the CLI can print it as is.

use std::fmt;
use std::path::PathBuf;

use deepsolve_core::config::UnknownKeys;

/// Where a value of the merged settings tree came from.
///
/// Kept next to every value written by a layer so that an error about a key can say *which*
/// file, variable or argument to fix, not only which key is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The built-in defaults (no file, no variable, no argument set it).
    Default,
    /// The YAML settings file.
    File(PathBuf),
    /// An environment variable, by name.
    Env(String),
    /// A `--set KEY=VALUE` argument, by key (the value is never echoed: it may be a secret).
    Set(String),
    /// A key or value given on the command line to `settings get|set`.
    CommandLine,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => f.write_str("in the built-in defaults"),
            Origin::File(path) => write!(f, "in {}", path.display()),
            Origin::Env(var) => write!(f, "from environment variable {var}"),
            Origin::Set(key) => write!(f, "in --set {key}=…"),
            Origin::CommandLine => f.write_str("on the command line"),
        }
    }
}

/// Everything that can go wrong while loading, reading or writing settings.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// An explicitly named settings file (`--config`, `DEEPSOLVE_CONFIG`) does not exist.
    #[error("settings file {} does not exist (named by {via})", path.display())]
    FileNotFound { path: PathBuf, via: &'static str },

    /// Reading or writing the file failed at the OS level.
    #[error("cannot {action} settings file {}: {source}", path.display())]
    Io {
        path: PathBuf,
        action: &'static str,
        #[source]
        source: std::io::Error,
    },

    /// The file is over the size cap (a settings file is a few KiB; more is a mistake or an
    /// attack, and we refuse before parsing).
    #[error("settings file {} is too large (over {limit} bytes)", path.display())]
    TooLarge { path: PathBuf, limit: u64 },

    /// The file is not UTF-8 text.
    #[error("settings file {} is not valid UTF-8 text", path.display())]
    NotUtf8 { path: PathBuf },

    /// YAML syntax error, or a nesting/size budget breach, with its position.
    #[error("invalid YAML in {}:{line}:{column}: {message}", path.display())]
    Yaml {
        path: PathBuf,
        line: u64,
        column: u64,
        message: String,
    },

    /// The file parsed, but its top level is not a mapping of sections.
    #[error(
        "settings file {} must hold a mapping of sections (llm, models, solve, tools), got {got}",
        path.display()
    )]
    NotAMapping { path: PathBuf, got: String },

    /// Keys that no section knows: core's one unknown-key message, which names the keys, where
    /// they came from, what is known there and the nearest known key (boxed: it is large).
    #[error("{0}")]
    UnknownKey(Box<UnknownKeys>),

    /// A known key whose value has the wrong type or an invalid value.
    #[error("setting '{key}' {origin} must be {expected}, got {got}")]
    WrongType {
        key: String,
        origin: Origin,
        expected: String,
        got: String,
    },

    /// A required key is missing (e.g. `models.reason` without `model`).
    #[error("setting '{key}' {origin} is required: {why}")]
    Missing {
        key: String,
        origin: Origin,
        why: String,
    },

    /// A `--set` argument that is not `KEY=VALUE`.
    #[error("invalid --set '{arg}': {reason}")]
    BadSet { arg: String, reason: &'static str },

    /// A value that could not be parsed as YAML (from `--set`, a variable or `settings set`).
    #[error("invalid value for setting '{key}' {origin}: {reason}")]
    BadValue {
        key: String,
        origin: Origin,
        reason: String,
    },

    /// A `DEEPSOLVE_<SECTION>__<KEY>` variable whose name is malformed.
    #[error("invalid environment variable {var}: {reason}")]
    BadEnvVar { var: String, reason: &'static str },

    /// A dotted key that is syntactically malformed (empty, `a..b`).
    #[error("invalid setting key '{key}': {reason}")]
    BadKey { key: String, reason: &'static str },

    /// `settings set llm.api_key …`: secrets are never written to disk in clear.
    #[error(
        "refusing to write '{key}' to {}: secrets are never stored in clear; export \
         DEEPSOLVE_API_KEY, or set llm.api_key_env to the name of a variable holding the key",
        path.display()
    )]
    SecretNotWritable { key: String, path: PathBuf },

    /// `settings set server.database postgres://user:PASSWORD@…`: same rule as the API key.
    #[error(
        "refusing to write '{key}' with a password to {}: secrets are never stored in clear; \
         export DEEPSOLVE_DATABASE_URL, or write the URL without its password and give that \
         to PostgreSQL by PGPASSWORD or ~/.pgpass",
        path.display()
    )]
    PasswordNotWritable { key: String, path: PathBuf },

    /// A tool's settings struct does not fit its own declared section (a bug in the tool).
    #[error("the settings of the tool '{tool}' do not fit its struct: {reason}")]
    ToolSection { tool: String, reason: String },

    /// A prompt override cannot be used (unknown name, too large, unreadable…).
    #[error(transparent)]
    Prompt(#[from] crate::prompts::PromptError),

    /// The updated settings could not be turned back into YAML faithfully.
    #[error("cannot write settings file {}: {reason}", path.display())]
    Serialize { path: PathBuf, reason: String },
}

impl SettingsError {
    /// `unknown`, written at `origin`.
    pub(crate) fn unknown_key(unknown: UnknownKeys, origin: &Origin) -> Self {
        SettingsError::UnknownKey(Box::new(unknown.found(origin)))
    }
}

/// A short, single-line rendering of a value for error messages, cut at 80 characters.
pub(crate) fn preview(value: &serde_json::Value) -> String {
    const MAX: usize = 80;
    let text = value.to_string();
    if text.chars().count() <= MAX {
        return text;
    }
    let cut: String = text.chars().take(MAX).collect();
    format!("{cut}…")
}

/// The name of a value's type, used instead of the value itself where it may be a secret.
pub(crate) fn type_name(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn preview_is_cut_on_a_char_boundary() {
        let long = json!("é".repeat(200));
        let p = preview(&long);
        assert!(p.ends_with('…'));
        assert_eq!(p.chars().count(), 81);
    }

    #[test]
    fn set_origin_never_shows_the_value() {
        assert_eq!(
            Origin::Set("llm.api_key".into()).to_string(),
            "in --set llm.api_key=…"
        );
    }
}
