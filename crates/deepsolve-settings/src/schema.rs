//! The shape of the settings tree, written down once.
//!
//! The typed structs in [`crate::model`] could reject unknown keys on their own, but serde's
//! messages name neither the full dotted key nor where the value came from. This table lets the
//! loader check keys and types itself and say `unknown setting 'llm.modle' in <file> (known in
//! llm: …) — did you mean 'llm.model'?` (the message is core's [`UnknownKeys`]). It also tells
//! `--set`/env parsing whether a raw value is text (kept verbatim, so `--set llm.model=1.5`
//! stays a string) or YAML. A test keeps it in step with the structs. The `solve` section's
//! keys are core's knobs ([`SolveConfig::knob_docs`]).

use deepsolve_core::SolveConfig;
use deepsolve_core::config::{Knob, KnobDoc, KnownKeys, UnknownKeys};

/// What kind of value lives at a key.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    /// A mapping with a fixed set of keys.
    Section(&'static [Field]),
    /// Free text (`Option<String>`).
    Text,
    /// The name of an environment variable.
    EnvName,
    /// A secret (`llm.api_key`): type errors never echo the value.
    Secret,
    /// `llm.context_window`: a whole number, clamped.
    ContextWindow,
    /// One of a few fixed words.
    Choice(&'static [&'static str]),
    /// A free-form mapping passed through (`llm.extra_body`).
    FreeMap,
    /// Anything inside a [`Kind::FreeMap`].
    Free,
    /// A list of names (`tools.enabled`).
    TextList,
    /// The core solve knobs, checked by `SolveConfig::from_map`.
    Solve,
    /// One numeric solve knob.
    SolveKnob,
    /// One boolean solve knob.
    SolveFlag,
}

impl Kind {
    /// Whether a raw value from `--set` or the environment is taken verbatim rather than parsed
    /// as YAML: text settings must not turn `1.10` into the number 1.1 or `no` into `false`.
    pub(crate) fn is_verbatim_text(self) -> bool {
        matches!(
            self,
            Kind::Text | Kind::EnvName | Kind::Secret | Kind::Choice(_)
        )
    }
}

/// One key of a [`Kind::Section`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Field {
    pub name: &'static str,
    pub kind: Kind,
    /// Must be present whenever its section is.
    pub required: bool,
}

const fn field(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        kind,
        required: false,
    }
}

/// The protocols `llm.protocol` accepts, in the order they are documented.
pub(crate) const PROTOCOLS: &[&str] = &["native", "tags", "auto"];
/// The sandbox modes `tools.sandbox` accepts.
pub(crate) const SANDBOXES: &[&str] = &["auto", "bwrap", "none"];

/// The clamp of `llm.context_window`, in core's [`Knob`] form so warnings read like the solve
/// knobs'. The default is unused: non-finite values leave the window unset instead.
pub(crate) const CONTEXT_WINDOW: Knob = Knob {
    key: "llm.context_window",
    default: 0.0,
    min: 1024.0,
    max: 10_000_000.0,
    integer: true,
    help: "tokens the model accepts; unset = the model catalog's value",
};

const LLM: &[Field] = &[
    field("base_url", Kind::Text),
    field("model", Kind::Text),
    field("api_key", Kind::Secret),
    field("api_key_env", Kind::EnvName),
    field("context_window", Kind::ContextWindow),
    field("protocol", Kind::Choice(PROTOCOLS)),
    field("extra_body", Kind::FreeMap),
];

const MODEL_REF: &[Field] = &[
    Field {
        required: true,
        ..field("model", Kind::Text)
    },
    field("base_url", Kind::Text),
    field("api_key_env", Kind::EnvName),
];

const MODELS: &[Field] = &[
    field("reason", Kind::Section(MODEL_REF)),
    field("vision", Kind::Section(MODEL_REF)),
];

const TOOLS: &[Field] = &[
    field("enabled", Kind::TextList),
    field("sandbox", Kind::Choice(SANDBOXES)),
];

pub(crate) const SECTIONS: &[Field] = &[
    field("llm", Kind::Section(LLM)),
    field("models", Kind::Section(MODELS)),
    field("solve", Kind::Solve),
    field("tools", Kind::Section(TOOLS)),
];

/// The whole tree.
pub(crate) const ROOT: Kind = Kind::Section(SECTIONS);

/// What is known at `prefix`, a value of kind `kind`: the hint of an unknown-key message there.
pub(crate) fn known_at(prefix: &[String], kind: Kind) -> KnownKeys {
    let name = prefix.join(".");
    match children(kind) {
        Some(children) if prefix.is_empty() => {
            KnownKeys::Sections(children.map(|(key, _)| key.to_string()).collect())
        }
        Some(children) => KnownKeys::Section {
            name,
            keys: children.map(|(key, _)| key.to_string()).collect(),
        },
        None => KnownKeys::Value { name },
    }
}

/// The key `rest` (its first segment unknown) written under `prefix`, a value of kind `kind`.
pub(crate) fn unknown(prefix: &[String], kind: Kind, rest: &[String]) -> UnknownKeys {
    UnknownKeys::new(vec![rest.join(".")], known_at(prefix, kind)).under(&prefix.join("."))
}

/// The kind of value at `path`, or the unknown key that `path` is.
pub(crate) fn lookup(path: &[String]) -> Result<Kind, UnknownKeys> {
    let mut kind = ROOT;
    for (depth, segment) in path.iter().enumerate() {
        kind = child(kind, segment).ok_or_else(|| unknown(&path[..depth], kind, &path[depth..]))?;
    }
    Ok(kind)
}

/// The kind of the key `name` under a value of kind `parent`, if there is such a key.
pub(crate) fn child(parent: Kind, name: &str) -> Option<Kind> {
    match parent {
        Kind::FreeMap | Kind::Free => Some(Kind::Free),
        Kind::Solve => SolveConfig::knob(name).map(knob_kind),
        _ => children(parent)?
            .find(|(key, _)| *key == name)
            .map(|(_, kind)| kind),
    }
}

/// The fixed keys below a value of kind `kind`, in documentation order; `None` for values that
/// have no fixed keys (leaves and free maps).
fn children(kind: Kind) -> Option<Box<dyn Iterator<Item = (&'static str, Kind)>>> {
    match kind {
        Kind::Section(fields) => Some(Box::new(fields.iter().map(|f| (f.name, f.kind)))),
        Kind::Solve => Some(Box::new(
            SolveConfig::knob_docs()
                .iter()
                .map(|doc| (doc.key(), knob_kind(doc))),
        )),
        _ => None,
    }
}

fn knob_kind(doc: &KnobDoc) -> Kind {
    match doc {
        KnobDoc::Number(_) => Kind::SolveKnob,
        KnobDoc::Flag(_) => Kind::SolveFlag,
    }
}

/// Every leaf key, dotted, in documentation order (for `settings` help and completion).
pub fn all_keys() -> Vec<String> {
    let mut out = Vec::new();
    collect_keys(ROOT, &mut String::new(), &mut out);
    out
}

fn collect_keys(kind: Kind, prefix: &mut String, out: &mut Vec<String>) {
    let Some(children) = children(kind) else {
        out.push(prefix.clone());
        return;
    };
    for (name, child_kind) in children {
        let len = prefix.len();
        if !prefix.is_empty() {
            prefix.push('.');
        }
        prefix.push_str(name);
        collect_keys(child_kind, prefix, out);
        prefix.truncate(len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deepsolve_core::config::{FLAGS, KNOBS};

    fn path(s: &str) -> Vec<String> {
        s.split('.').map(str::to_string).collect()
    }

    /// What the unknown-key message says is known where `key` left the schema.
    fn hint_of(key: &str) -> String {
        lookup(&path(key)).unwrap_err().known().to_string()
    }

    #[test]
    fn lookup_finds_leaves_and_explains_misses() {
        assert!(matches!(lookup(&path("llm.model")), Ok(Kind::Text)));
        assert!(matches!(
            lookup(&path("solve.max_rounds")),
            Ok(Kind::SolveKnob)
        ));
        assert!(matches!(
            lookup(&path("solve.plan_first")),
            Ok(Kind::SolveFlag)
        ));
        assert!(matches!(
            lookup(&path("llm.extra_body.a.b")),
            Ok(Kind::Free)
        ));
        let miss = hint_of("llm.modle");
        assert!(miss.starts_with("known in llm: base_url, model"), "{miss}");
        let miss = hint_of("lm");
        assert_eq!(miss, "known sections: llm, models, solve, tools");
        let miss = hint_of("llm.model.x");
        assert!(miss.contains("'llm.model' is a single value"), "{miss}");
        let miss = hint_of("solve.max_round");
        assert!(miss.contains("max_rounds"), "{miss}");
    }

    #[test]
    fn all_keys_lists_every_leaf() {
        let keys = all_keys();
        assert!(keys.contains(&"llm.api_key".to_string()));
        assert!(keys.contains(&"models.reason.api_key_env".to_string()));
        assert!(keys.contains(&"solve.plan_first".to_string()));
        assert!(keys.contains(&"tools.sandbox".to_string()));
        assert_eq!(keys.len(), 7 + 6 + KNOBS.len() + FLAGS.len() + 2);
    }
}
