//! The merged settings tree: dotted-path writes, and the record of which layer wrote what.

use serde_json::{Map, Value};

use crate::error::{Origin, SettingsError};
use crate::schema::{Kind, Schema};
use crate::yaml;

/// Split a dotted key (`solve.max_rounds`) into its segments.
pub(crate) fn parse_key(key: &str) -> Result<Vec<String>, SettingsError> {
    let bad = |reason| SettingsError::BadKey {
        key: key.to_string(),
        reason,
    };
    let key = key.trim();
    if key.is_empty() {
        return Err(bad("the key is empty"));
    }
    let segments: Vec<String> = key.split('.').map(|s| s.trim().to_string()).collect();
    if segments.iter().any(String::is_empty) {
        return Err(bad("a part between dots is empty"));
    }
    Ok(segments)
}

/// The kind of value at `path`, or an error naming the key, its origin, what is known there and
/// the nearest known key.
pub(crate) fn known_kind(
    schema: Schema<'_>,
    path: &[String],
    origin: &Origin,
) -> Result<Kind, SettingsError> {
    schema
        .lookup(path)
        .map_err(|unknown| SettingsError::unknown_key(unknown, origin))
}

/// Turn a raw string from `--set`, a variable or `settings set` into a value for `kind`.
///
/// Text settings keep the string verbatim; a list of names also accepts `a,b,c`; everything
/// else is parsed as YAML, so numbers, booleans and `{…}`/`[…]` work. Blank means "unset".
pub(crate) fn raw_value(
    kind: Kind,
    raw: &str,
    path: &[String],
    origin: &Origin,
) -> Result<Value, SettingsError> {
    if raw.trim().is_empty() {
        return Ok(Value::Null);
    }
    if kind.is_verbatim_text() {
        return Ok(Value::String(raw.to_string()));
    }
    if matches!(kind, Kind::TextList) && !raw.trim_start().starts_with('[') {
        let names = raw
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| Value::String(s.to_string()))
            .collect();
        return Ok(Value::Array(names));
    }
    yaml::parse_value(raw).map_err(|reason| SettingsError::BadValue {
        key: path.join("."),
        origin: origin.clone(),
        reason,
    })
}

/// Write `value` at `path`. Mappings are merged key by key (a higher layer setting
/// `llm={model: x}` keeps the file's `llm.base_url`); anything else replaces what was there.
pub(crate) fn write(tree: &mut Map<String, Value>, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut node = tree;
    for segment in parents {
        let slot = node
            .entry(segment.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if !slot.is_object() {
            *slot = Value::Object(Map::new());
        }
        let Value::Object(inner) = slot else {
            return;
        };
        node = inner;
    }
    match (node.get_mut(last), value) {
        (Some(Value::Object(old)), Value::Object(new)) => merge(old, new),
        (_, value) => {
            node.insert(last.clone(), value);
        }
    }
}

fn merge(old: &mut Map<String, Value>, new: Map<String, Value>) {
    for (key, value) in new {
        write(old, std::slice::from_ref(&key), value);
    }
}

/// The value at `path`, if any.
pub(crate) fn get<'a>(tree: &'a Map<String, Value>, path: &[String]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    rest.iter()
        .try_fold(tree.get(first)?, |node, segment| node.get(segment))
}

/// Replace (not merge) the value at `path`, or remove it when `value` is `None`.
pub(crate) fn replace(tree: &mut Map<String, Value>, path: &[String], value: Option<Value>) {
    remove(tree, path);
    if let Some(value) = value {
        write(tree, path, value);
    }
}

/// Remove the value at `path`, if there is one.
fn remove(tree: &mut Map<String, Value>, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut node = tree;
    for segment in parents {
        let Some(Value::Object(inner)) = node.get_mut(segment) else {
            return;
        };
        node = inner;
    }
    node.remove(last);
}

/// Which layer wrote which key, so errors can name the file, variable or argument to fix.
#[derive(Debug, Clone)]
pub(crate) struct Origins {
    base: Origin,
    writes: Vec<(Vec<String>, Origin)>,
}

impl Origins {
    /// `base` is where every key nobody overrode came from (the file, or the defaults).
    pub(crate) fn new(base: Origin) -> Self {
        Origins {
            base,
            writes: Vec::new(),
        }
    }

    pub(crate) fn record(&mut self, path: &[String], origin: Origin) {
        self.writes.push((path.to_vec(), origin));
    }

    /// The origin of the value at `path`: the last layer that wrote it or a section holding it;
    /// else a layer that wrote inside it (for "section is incomplete" errors); else the base.
    pub(crate) fn of(&self, path: &[String]) -> Origin {
        let latest = |pred: &dyn Fn(&[String]) -> bool| {
            self.writes
                .iter()
                .rev()
                .find(|(written, _)| pred(written))
                .map(|(_, origin)| origin.clone())
        };
        latest(&|w| path.starts_with(w))
            .or_else(|| latest(&|w| w.starts_with(path)))
            .unwrap_or_else(|| self.base.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(s: &str) -> Vec<String> {
        s.split('.').map(str::to_string).collect()
    }

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn keys_are_validated() {
        assert!(parse_key("").is_err());
        assert!(parse_key("a..b").is_err());
        assert!(parse_key(".a").is_err());
        assert_eq!(
            parse_key(" solve.max_rounds ").ok(),
            Some(p("solve.max_rounds"))
        );
    }

    #[test]
    fn writes_create_merge_and_replace() {
        let mut tree = obj(json!({"llm": {"base_url": "u", "model": "m"}, "x": 1}));
        write(&mut tree, &p("llm"), json!({"model": "n"}));
        write(&mut tree, &p("x.y"), json!(2));
        write(&mut tree, &p("solve.max_rounds"), json!(5));
        assert_eq!(
            Value::Object(tree),
            json!({"llm": {"base_url": "u", "model": "n"}, "x": {"y": 2}, "solve": {"max_rounds": 5}})
        );
    }

    #[test]
    fn replace_and_remove() {
        let mut tree = obj(json!({"llm": {"extra_body": {"a": 1}}}));
        replace(&mut tree, &p("llm.extra_body"), Some(json!({"b": 2})));
        assert_eq!(get(&tree, &p("llm.extra_body")), Some(&json!({"b": 2})));
        replace(&mut tree, &p("llm.extra_body"), None);
        replace(&mut tree, &p("nope.deeper"), None);
        assert_eq!(Value::Object(tree), json!({"llm": {}}));
    }

    #[test]
    fn raw_values_follow_the_kind() {
        let o = Origin::CommandLine;
        let text = raw_value(Kind::Text, "1.10", &p("llm.model"), &o).ok();
        assert_eq!(text, Some(json!("1.10")));
        let list = raw_value(Kind::TextList, "reason, web", &p("tools.enabled"), &o).ok();
        assert_eq!(list, Some(json!(["reason", "web"])));
        let list = raw_value(Kind::TextList, "[a]", &p("tools.enabled"), &o).ok();
        assert_eq!(list, Some(json!(["a"])));
        assert_eq!(
            raw_value(crate::schema::FREE, "false", &p("x"), &o).ok(),
            Some(json!(false))
        );
        assert_eq!(
            raw_value(crate::schema::FREE, " ", &p("x"), &o).ok(),
            Some(Value::Null)
        );
        assert!(raw_value(crate::schema::FREE, "{a: ", &p("x"), &o).is_err());
    }

    #[test]
    fn origins_prefer_the_latest_enclosing_write() {
        let file = Origin::File("f.yaml".into());
        let mut o = Origins::new(file.clone());
        o.record(&p("llm"), Origin::Set("llm".into()));
        o.record(&p("llm.model"), Origin::Env("DEEPSOLVE_MODEL".into()));
        o.record(&p("models.reason.base_url"), Origin::Env("V".into()));
        assert_eq!(o.of(&p("llm.model")), Origin::Env("DEEPSOLVE_MODEL".into()));
        assert_eq!(o.of(&p("llm.base_url")), Origin::Set("llm".into()));
        assert_eq!(o.of(&p("models.reason")), Origin::Env("V".into()));
        assert_eq!(o.of(&p("tools.sandbox")), file);
    }
}
