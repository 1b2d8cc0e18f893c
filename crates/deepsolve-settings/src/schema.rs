//! The shape of the settings tree, written down once.
//!
//! The typed structs in [`crate::model`] could reject unknown keys on their own, but serde's
//! messages name neither the full dotted key nor where the value came from. This table lets the
//! loader check keys and types itself and say `unknown setting 'llm.modle' in <file> (known in
//! llm: …)`. It also tells `--set`/env parsing whether a raw value is text (kept verbatim, so
//! `--set llm.model=1.5` stays a string) or YAML. A test keeps it in step with the structs.

use deepsolve_core::config::{FLAGS, KNOBS, Knob, known_keys};

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

/// Why a key is not known: the hint that follows the key in the error message.
pub(crate) fn hint(prefix: &[String], kind: Kind) -> String {
    let at = prefix.join(".");
    match kind {
        Kind::Section(fields) if prefix.is_empty() => {
            format!("known sections: {}", names(fields))
        }
        Kind::Section(fields) => format!("known in {at}: {}", names(fields)),
        Kind::Solve => format!("known in {at}: {}", known_keys()),
        _ => format!("'{at}' is a single value, it has no sub-keys"),
    }
}

fn names(fields: &[Field]) -> String {
    fields.iter().map(|f| f.name).collect::<Vec<_>>().join(", ")
}

/// The kind of value at `path`, or the hint explaining why the key is unknown.
pub(crate) fn lookup(path: &[String]) -> Result<Kind, String> {
    let mut kind = ROOT;
    for (depth, segment) in path.iter().enumerate() {
        kind = child(kind, segment).ok_or_else(|| hint(&path[..depth], kind))?;
    }
    Ok(kind)
}

/// The kind of the key `name` under a value of kind `parent`, if there is such a key.
pub(crate) fn child(parent: Kind, name: &str) -> Option<Kind> {
    match parent {
        Kind::Section(fields) => fields.iter().find(|f| f.name == name).map(|f| f.kind),
        Kind::FreeMap | Kind::Free => Some(Kind::Free),
        Kind::Solve => KNOBS
            .iter()
            .find(|k| k.key == name)
            .map(|_| Kind::SolveKnob)
            .or_else(|| {
                FLAGS
                    .iter()
                    .any(|f| f.key == name)
                    .then_some(Kind::SolveFlag)
            }),
        _ => None,
    }
}

/// Every leaf key, dotted, in documentation order (for `settings` help and completion).
pub fn all_keys() -> Vec<String> {
    let mut out = Vec::new();
    collect_keys(ROOT, &mut String::new(), &mut out);
    out
}

fn collect_keys(kind: Kind, prefix: &mut String, out: &mut Vec<String>) {
    let children: Vec<(&str, Kind)> = match kind {
        Kind::Section(fields) => fields.iter().map(|f| (f.name, f.kind)).collect(),
        Kind::Solve => KNOBS
            .iter()
            .map(|k| (k.key, Kind::SolveKnob))
            .chain(FLAGS.iter().map(|f| (f.key, Kind::SolveFlag)))
            .collect(),
        _ => {
            out.push(prefix.clone());
            return;
        }
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

    fn path(s: &str) -> Vec<String> {
        s.split('.').map(str::to_string).collect()
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
        let miss = lookup(&path("llm.modle")).unwrap_err();
        assert!(miss.starts_with("known in llm: base_url, model"), "{miss}");
        let miss = lookup(&path("lm")).unwrap_err();
        assert_eq!(miss, "known sections: llm, models, solve, tools");
        let miss = lookup(&path("llm.model.x")).unwrap_err();
        assert!(miss.contains("'llm.model' is a single value"), "{miss}");
        let miss = lookup(&path("solve.max_round")).unwrap_err();
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
