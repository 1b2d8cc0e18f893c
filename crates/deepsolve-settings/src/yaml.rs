//! Reading and writing YAML with limits: a settings file is small, so anything large or deeply
//! nested is refused before it can cost memory or time.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::Path;

use serde_json::{Map, Value};
use serde_saphyr::options::{DuplicateKeyPolicy, NonFiniteFloatPolicy};

use crate::error::{SettingsError, type_name};

/// Largest settings file we read (1 MiB). Real files are a few KiB; more is a mistake.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Parser options: strict about duplicates (a repeated key is almost always a mistake), bounded
/// in depth, nodes and aliases, and non-finite floats (`.nan`, `.inf`) kept as the strings core
/// understands, so they are replaced by the default *with a warning* instead of silently
/// becoming `null`.
fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: 32,
            max_nodes: 50_000,
            max_documents: 1,
            max_aliases: 100,
            max_anchors: 100,
        },
        duplicate_keys: DuplicateKeyPolicy::Error,
        non_finite_float_policy: NonFiniteFloatPolicy::AsString,
    }
}

/// A YAML error as (line, column, message without the trailing position).
fn describe(err: &serde_saphyr::Error) -> (u64, u64, String) {
    let message = err.without_snippet().to_string();
    let message = message.lines().next().unwrap_or_default().to_string();
    let Some(loc) = err.location() else {
        return (0, 0, message);
    };
    let suffix = format!(" at line {}, column {}", loc.line(), loc.column());
    let message = message
        .strip_suffix(&suffix)
        .map(str::to_string)
        .unwrap_or(message);
    (loc.line(), loc.column(), message)
}

/// Parse YAML text into a JSON tree (`null` for an empty or comment-only document).
pub(crate) fn parse(text: &str) -> Result<Value, serde_saphyr::Error> {
    serde_saphyr::from_str_with_options(text, options())
}

/// Parse one raw value (from `--set`, a variable, or `settings set`); the error is one line.
pub(crate) fn parse_value(raw: &str) -> Result<Value, String> {
    parse(raw).map_err(|e| {
        let (line, column, message) = describe(&e);
        if line > 1 {
            format!("{message} (line {line}, column {column})")
        } else {
            format!("{message} (column {column})")
        }
    })
}

/// Read and parse a settings file. `Ok(None)` when it does not exist; the caller decides whether
/// that is fine (the default path) or an error (an explicit `--config`).
pub(crate) fn read_file(path: &Path) -> Result<Option<Map<String, Value>>, SettingsError> {
    let Some(text) = read_text(path)? else {
        return Ok(None);
    };
    parse_file(path, &text).map(Some)
}

/// Parse the text of the settings file at `path`: a mapping (empty for an empty file).
pub(crate) fn parse_file(path: &Path, text: &str) -> Result<Map<String, Value>, SettingsError> {
    let tree = parse(text).map_err(|e| {
        let (line, column, message) = describe(&e);
        SettingsError::Yaml {
            path: path.to_path_buf(),
            line,
            column,
            message,
        }
    })?;
    match tree {
        Value::Null => Ok(Map::new()),
        Value::Object(map) => Ok(map),
        other => Err(SettingsError::NotAMapping {
            path: path.to_path_buf(),
            got: type_name(&other).to_string(),
        }),
    }
}

/// The file's text, read through a size cap (checked on the bytes actually read, so a growing
/// file or a device like `/dev/zero` cannot get past it).
pub(crate) fn read_text(path: &Path) -> Result<Option<String>, SettingsError> {
    let io = |source| SettingsError::Io {
        path: path.to_path_buf(),
        action: "read",
        source,
    };
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(SettingsError::TooLarge {
            path: path.to_path_buf(),
            limit: MAX_FILE_BYTES,
        });
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| SettingsError::NotUtf8 {
            path: path.to_path_buf(),
        })
}

/// Render a tree as YAML, and check that it reads back to the same tree: we would rather refuse
/// a write than store something that loads differently.
pub(crate) fn render(path: &Path, tree: &Map<String, Value>) -> Result<String, SettingsError> {
    let fail = |reason: String| SettingsError::Serialize {
        path: path.to_path_buf(),
        reason,
    };
    let text = if tree.is_empty() {
        String::new()
    } else {
        serde_saphyr::to_string(tree).map_err(|e| fail(e.to_string()))?
    };
    let back = parse(&text).map_err(|e| fail(describe(&e).2))?;
    let same = match &back {
        Value::Null => tree.is_empty(),
        Value::Object(map) => map == tree,
        _ => false,
    };
    if same {
        Ok(text)
    } else {
        Err(fail("the YAML written would not read back the same".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn non_finite_floats_become_core_strings() {
        assert_eq!(
            parse("a: .nan\nb: -.inf").ok(),
            Some(json!({"a": ".nan", "b": "-.inf"}))
        );
    }

    #[test]
    fn empty_and_comment_only_documents_are_null() {
        assert_eq!(parse("").ok(), Some(Value::Null));
        assert_eq!(parse("# nothing\n").ok(), Some(Value::Null));
    }

    #[test]
    fn deep_nesting_is_refused() {
        let deep = format!("{}1{}", "[".repeat(100), "]".repeat(100));
        assert!(parse(&deep).is_err());
    }

    #[test]
    fn duplicate_keys_are_refused() {
        assert!(parse("a: 1\na: 2\n").is_err());
    }

    #[test]
    fn value_errors_are_one_line() {
        let err = parse_value("[1,").unwrap_err();
        assert!(!err.contains('\n'), "{err}");
        assert!(err.contains("column"), "{err}");
    }

    #[test]
    fn render_round_trips_tricky_strings() {
        let tree = json!({"llm": {"model": "1.10", "base_url": "no", "extra_body": {"k": "a: b"}}});
        let Value::Object(map) = tree else {
            unreachable!()
        };
        let text = render(Path::new("x.yaml"), &map).unwrap();
        assert_eq!(parse(&text).ok(), Some(Value::Object(map)));
    }
}
