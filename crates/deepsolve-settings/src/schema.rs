//! The shape of the settings tree, written down once — and the vocabulary a tool uses to
//! declare its own section `tools.<tool name>` ([`ToolSection`]).
//!
//! The typed structs in [`crate::model`] could reject unknown keys on their own, but serde's
//! messages name neither the full dotted key nor where the value came from. This table lets the
//! loader check keys and types itself and say `unknown setting 'llm.modle' in <file> (known in
//! llm: …) — did you mean 'llm.model'?` (the message is core's [`UnknownKeys`]). It also tells
//! `--set`/env parsing whether a raw value is text (kept verbatim, so `--set llm.model=1.5`
//! stays a string) or YAML. A test keeps it in step with the structs. The `solve` section's
//! keys are core's knobs ([`SolveConfig::knob_docs`]); the sections of tools are the
//! [`ToolSection`]s the loader is given (this crate knows no tool).

use deepsolve_core::SolveConfig;
use deepsolve_core::config::{KnobDoc, KnownKeys, UnknownKeys};

/// What kind of value lives at a key.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// A mapping with a fixed set of keys.
    Section(&'static [Field]),
    /// Free text; blank means unset.
    Text,
    /// The name of an environment variable (e.g. the one holding a service's API key; the key
    /// itself never belongs in the file).
    EnvName,
    /// One of a few fixed words.
    Choice(&'static [&'static str]),
    /// A list of names (`a,b,c` from `--set` and the environment).
    TextList,
    /// A number, clamped into its range with a warning; a non-finite one leaves it unset.
    Number(Clamp),
    /// `true` or `false` (also `yes`/`no`/`on`/`off`).
    Flag,
    /// A free-form mapping, passed through unchecked (`llm.extra_body`).
    FreeMap,
    /// A key only this crate declares (the API key, the solve knobs…).
    Builtin(Builtin),
}

/// The range of a [`Kind::Number`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clamp {
    pub min: f64,
    pub max: f64,
    /// Rounded to a whole number.
    pub integer: bool,
}

impl Clamp {
    /// A whole number in `min..=max`.
    pub const fn whole(min: f64, max: f64) -> Clamp {
        Clamp {
            min,
            max,
            integer: true,
        }
    }

    /// Any number in `min..=max`.
    pub const fn real(min: f64, max: f64) -> Clamp {
        Clamp {
            min,
            max,
            integer: false,
        }
    }
}

/// The kinds of value only this crate's own tables use. Opaque: outside this crate it cannot be
/// built, so a declaration cannot, say, ask for a secret that `settings get` would not redact.
#[derive(Debug, Clone, Copy)]
pub struct Builtin(pub(crate) Own);

#[derive(Debug, Clone, Copy)]
pub(crate) enum Own {
    /// A secret (`llm.api_key`): type errors never echo the value.
    Secret,
    /// Anything inside a [`Kind::FreeMap`].
    Free,
    /// The core solve knobs, checked by `SolveConfig::from_map`.
    Solve,
    /// One numeric solve knob.
    SolveKnob,
    /// One boolean solve knob.
    SolveFlag,
    /// The `tools` section: `enabled`, `disabled`, `sandbox` and the declared tool sections.
    Tools,
    /// A database URL (`server.database`): its password is a secret — type errors never echo
    /// the value, `settings get` masks the password, `settings set` refuses one.
    DatabaseUrl,
}

pub(crate) const SECRET: Kind = Kind::Builtin(Builtin(Own::Secret));
pub(crate) const FREE: Kind = Kind::Builtin(Builtin(Own::Free));
pub(crate) const SOLVE: Kind = Kind::Builtin(Builtin(Own::Solve));
pub(crate) const SOLVE_KNOB: Kind = Kind::Builtin(Builtin(Own::SolveKnob));
pub(crate) const SOLVE_FLAG: Kind = Kind::Builtin(Builtin(Own::SolveFlag));
pub(crate) const TOOLS: Kind = Kind::Builtin(Builtin(Own::Tools));
pub(crate) const DATABASE_URL: Kind = Kind::Builtin(Builtin(Own::DatabaseUrl));

impl Kind {
    /// Whether a raw value from `--set` or the environment is taken verbatim rather than parsed
    /// as YAML: text settings must not turn `1.10` into the number 1.1 or `no` into `false`.
    pub(crate) fn is_verbatim_text(self) -> bool {
        matches!(
            self,
            Kind::Text
                | Kind::EnvName
                | Kind::Choice(_)
                | Kind::Builtin(Builtin(Own::Secret | Own::DatabaseUrl))
        )
    }
}

/// One key of a section.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub name: &'static str,
    pub kind: Kind,
    /// Must be present whenever its section is.
    pub required: bool,
}

impl Field {
    /// An optional key.
    pub const fn new(name: &'static str, kind: Kind) -> Field {
        Field {
            name,
            kind,
            required: false,
        }
    }

    /// This key, required whenever its section is present.
    pub const fn required(self) -> Field {
        Field {
            required: true,
            ..self
        }
    }
}

/// The keys of one tool's own section, `tools.<tool>`, as the tool declares them (in its
/// catalog entry). The loader is given every tool's section and checks `tools.<tool>` as
/// strictly as any other key; the tool reads the checked values with
/// [`Settings::tool_settings`](crate::Settings::tool_settings).
///
/// ```
/// use deepsolve_settings::{Clamp, Field, Kind, ToolSection};
/// const PROVIDERS: &[&str] = &["searxng", "brave"];
/// const ENDPOINT: &[Field] = &[
///     Field::new("base_url", Kind::Text),
///     Field::new("api_key_env", Kind::EnvName),
/// ];
/// const WEB_SEARCH: ToolSection = ToolSection {
///     tool: "web_search",
///     fields: &[
///         Field::new("provider", Kind::Choice(PROVIDERS)),
///         Field::new("max_results", Kind::Number(Clamp::whole(1.0, 50.0))),
///         Field::new("brave", Kind::Section(ENDPOINT)),
///     ],
/// };
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ToolSection {
    /// The tool's name, the section's key under `tools`.
    pub tool: &'static str,
    pub fields: &'static [Field],
}

const fn field(name: &'static str, kind: Kind) -> Field {
    Field::new(name, kind)
}

/// The protocols `llm.protocol` accepts, in the order they are documented.
pub(crate) const PROTOCOLS: &[&str] = &[
    "native",
    "tags",
    "auto",
    "fence",
    "code",
    "structured",
    "tongyi",
    "deepanalyze",
];
/// The values `llm.vision` accepts (`true` and `false` also as YAML booleans).
pub(crate) const VISION: &[&str] = &["auto", "true", "false"];
/// The isolation backends `sandbox.backend` (and the deprecated `tools.sandbox`) accept.
pub(crate) const BACKENDS: &[&str] = &["auto", "bwrap", "none"];

/// `llm.context_window`: tokens the model accepts; unset = the model catalog's value.
const CONTEXT_WINDOW: Clamp = Clamp::whole(1024.0, 10_000_000.0);
/// `llm.max_reply_mb`: the most one reply (content, reasoning and tool-call arguments) may hold.
const MAX_REPLY_MB: Clamp = Clamp::whole(1.0, 64.0);

const LLM: &[Field] = &[
    field("base_url", Kind::Text),
    field("model", Kind::Text),
    field("api_key", SECRET),
    field("api_key_env", Kind::EnvName),
    field("context_window", Kind::Number(CONTEXT_WINDOW)),
    field("protocol", Kind::Choice(PROTOCOLS)),
    field("extra_body", Kind::FreeMap),
    field("max_reply_mb", Kind::Number(MAX_REPLY_MB)),
    field("price", Kind::Section(PRICE)),
    field("vision", Kind::Choice(VISION)),
    field("provider", Kind::Choice(PROVIDERS)),
    field("local", Kind::Section(LOCAL)),
    field("probe", Kind::Choice(PROBE_WHEN)),
];

/// The values `llm.probe` accepts.
pub(crate) const PROBE_WHEN: &[&str] = &["first_use", "never"];

/// The values `llm.provider` accepts: an OpenAI-compatible endpoint, or a GGUF model run
/// in-process (deepsolve-local).
pub(crate) const PROVIDERS: &[&str] = &["openai", "local"];

/// `llm.local`: the in-process model (`llm.provider: local`).
const LOCAL: &[Field] = &[
    // The GGUF file; unset: the default model in the model cache.
    field("model", Kind::Text),
    field("context", Kind::Number(Clamp::whole(256.0, 1_048_576.0))),
    field("threads", Kind::Number(Clamp::whole(1.0, 1024.0))),
    field("parallel", Kind::Number(Clamp::whole(1.0, 64.0))),
];

/// `llm.price`: what the main model costs per million tokens (the web UI shows a turn's cost).
const PRICE: &[Field] = &[
    field(
        "input_per_mtok",
        Kind::Number(Clamp::real(0.0, 1_000_000.0)),
    )
    .required(),
    field(
        "output_per_mtok",
        Kind::Number(Clamp::real(0.0, 1_000_000.0)),
    )
    .required(),
    field("currency", Kind::Text),
];

const MODEL_REF: &[Field] = &[
    field("model", Kind::Text).required(),
    field("base_url", Kind::Text),
    field("api_key_env", Kind::EnvName),
];

const MODELS: &[Field] = &[
    field("reason", Kind::Section(MODEL_REF)),
    field("vision", Kind::Section(MODEL_REF)),
    field("embedding", Kind::Section(MODEL_REF)),
];

/// The keys of `tools` besides the tool sections. `sandbox` is the deprecated spelling of
/// `sandbox.backend`, still read (with a warning).
pub(crate) const TOOLS_OWN: &[Field] = &[
    field("enabled", Kind::TextList),
    field("disabled", Kind::TextList),
    field("sandbox", Kind::Choice(BACKENDS)),
];

/// `sandbox`: how model code is isolated, and the budget of one turn's processes together.
const SANDBOX: &[Field] = &[
    field("backend", Kind::Choice(BACKENDS)),
    field("memory_mb", Kind::Number(Clamp::whole(64.0, 1_048_576.0))),
    field("max_processes", Kind::Number(Clamp::whole(4.0, 4096.0))),
    field("workspace_mb", Kind::Number(Clamp::whole(1.0, 1_048_576.0))),
    field(
        "workspace_files",
        Kind::Number(Clamp::whole(10.0, 10_000_000.0)),
    ),
    field("retention_days", Kind::Number(Clamp::whole(0.0, 3650.0))),
    field("seccomp", Kind::Flag),
];

/// `server`: where `deepsolve serve` listens and stores, and what a connection may cost it.
const SERVER: &[Field] = &[
    field("addr", Kind::Text),
    field("database", DATABASE_URL),
    field("instance_id", Kind::Text),
    field("cors_origins", Kind::TextList),
    field("header_timeout_s", Kind::Number(Clamp::whole(1.0, 600.0))),
    field("body_timeout_s", Kind::Number(Clamp::whole(1.0, 3600.0))),
    field("idle_timeout_s", Kind::Number(Clamp::whole(1.0, 3600.0))),
    field(
        "max_connections",
        Kind::Number(Clamp::whole(1.0, 1_000_000.0)),
    ),
    field("session_hours", Kind::Number(Clamp::whole(1.0, 720.0))),
    field("secure_cookies", Kind::Flag),
    field("trust_forwarded_proto", Kind::Flag),
    field("public_url", Kind::Text),
    field("metrics_token_env", Kind::EnvName),
    field(
        "artifact_link_hours",
        Kind::Number(Clamp::whole(1.0, 8760.0)),
    ),
    field("link_secret_env", Kind::EnvName),
    field("shutdown_grace_s", Kind::Number(Clamp::whole(1.0, 600.0))),
];

/// `kb`: what one document and one knowledge base may hold.
const KB: &[Field] = &[
    field("max_file_mb", Kind::Number(Clamp::whole(1.0, 1024.0))),
    field("max_pages", Kind::Number(Clamp::whole(1.0, 100_000.0))),
    field(
        "max_chunks",
        Kind::Number(Clamp::whole(100.0, 10_000_000.0)),
    ),
    field(
        "ingest_timeout_s",
        Kind::Number(Clamp::whole(10.0, 86_400.0)),
    ),
];

/// One language's playbook override: inline, or a file (relative to the settings file).
const SYSTEM_PROMPT: &[Field] = &[
    field("system", Kind::Text),
    field("system_file", Kind::Text),
];

/// `prompts.solve`: the playbook for every language, and per language (which wins).
const SOLVE_PROMPTS: &[Field] = &[
    field("system", Kind::Text),
    field("system_file", Kind::Text),
    field("en", Kind::Section(SYSTEM_PROMPT)),
    field("zh", Kind::Section(SYSTEM_PROMPT)),
];

/// `prompts`: operator overrides of the model-facing texts (the other texts come from the
/// `prompts/` directory beside the settings file).
const PROMPTS: &[Field] = &[field("solve", Kind::Section(SOLVE_PROMPTS))];

pub(crate) const SECTIONS: &[Field] = &[
    field("llm", Kind::Section(LLM)),
    field("models", Kind::Section(MODELS)),
    field("solve", SOLVE),
    field("tools", TOOLS),
    field("sandbox", Kind::Section(SANDBOX)),
    field("server", Kind::Section(SERVER)),
    field("kb", Kind::Section(KB)),
    field("prompts", Kind::Section(PROMPTS)),
];

/// The whole tree.
pub(crate) const ROOT: Kind = Kind::Section(SECTIONS);

/// The tree's shape with the tool sections it was given.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schema<'a> {
    tools: &'a [ToolSection],
}

impl<'a> Schema<'a> {
    pub(crate) fn new(tools: &'a [ToolSection]) -> Self {
        Schema { tools }
    }

    /// Whether `name` under `tools` is a tool's section (not `enabled`, `disabled` or `sandbox`).
    pub(crate) fn is_tool_section(&self, name: &str) -> bool {
        !TOOLS_OWN.iter().any(|f| f.name == name) && self.tools.iter().any(|t| t.tool == name)
    }

    /// What is known at `prefix`, a value of kind `kind`: the hint of an unknown-key message.
    pub(crate) fn known_at(&self, prefix: &[String], kind: Kind) -> KnownKeys {
        let name = prefix.join(".");
        let names = |fields: Vec<Field>| fields.iter().map(|f| f.name.to_string()).collect();
        match self.fields(kind) {
            Some(fields) if prefix.is_empty() => KnownKeys::Sections(names(fields)),
            Some(fields) => KnownKeys::Section {
                name,
                keys: names(fields),
            },
            None => KnownKeys::Value { name },
        }
    }

    /// The key `rest` (its first segment unknown) written under `prefix`, a value of `kind`.
    pub(crate) fn unknown(&self, prefix: &[String], kind: Kind, rest: &[String]) -> UnknownKeys {
        UnknownKeys::new(vec![rest.join(".")], self.known_at(prefix, kind)).under(&prefix.join("."))
    }

    /// The kind of value at `path`, or the unknown key that `path` is.
    pub(crate) fn lookup(&self, path: &[String]) -> Result<Kind, UnknownKeys> {
        let mut kind = ROOT;
        for (depth, segment) in path.iter().enumerate() {
            kind = self
                .child(kind, segment)
                .ok_or_else(|| self.unknown(&path[..depth], kind, &path[depth..]))?;
        }
        Ok(kind)
    }

    /// The kind of the key `name` under a value of kind `parent`, if there is such a key.
    pub(crate) fn child(&self, parent: Kind, name: &str) -> Option<Kind> {
        match parent {
            Kind::FreeMap | Kind::Builtin(Builtin(Own::Free)) => Some(FREE),
            Kind::Builtin(Builtin(Own::Solve)) => SolveConfig::knob(name).map(knob_kind),
            _ => self
                .fields(parent)?
                .into_iter()
                .find(|f| f.name == name)
                .map(|f| f.kind),
        }
    }

    /// The fixed keys below a value of kind `kind`, in documentation order; `None` for values
    /// that have no fixed keys (leaves and free maps).
    pub(crate) fn fields(&self, kind: Kind) -> Option<Vec<Field>> {
        match kind {
            Kind::Section(fields) => Some(fields.to_vec()),
            Kind::Builtin(Builtin(Own::Tools)) => {
                let sections = self
                    .tools
                    .iter()
                    .filter(|t| self.is_tool_section(t.tool))
                    .map(|t| field(t.tool, Kind::Section(t.fields)));
                Some(TOOLS_OWN.iter().copied().chain(sections).collect())
            }
            Kind::Builtin(Builtin(Own::Solve)) => Some(
                SolveConfig::knob_docs()
                    .iter()
                    .map(|doc| field(doc.key(), knob_kind(doc)))
                    .collect(),
            ),
            _ => None,
        }
    }

    fn collect_keys(&self, kind: Kind, prefix: &mut String, out: &mut Vec<String>) {
        let Some(fields) = self.fields(kind) else {
            out.push(prefix.clone());
            return;
        };
        for f in fields {
            let len = prefix.len();
            if !prefix.is_empty() {
                prefix.push('.');
            }
            prefix.push_str(f.name);
            self.collect_keys(f.kind, prefix, out);
            prefix.truncate(len);
        }
    }
}

fn knob_kind(doc: &KnobDoc) -> Kind {
    match doc {
        KnobDoc::Number(_) => SOLVE_KNOB,
        KnobDoc::Flag(_) => SOLVE_FLAG,
        // Checked by core when the solve section is read, like the numbers.
        KnobDoc::Choice(_) => SOLVE_KNOB,
    }
}

/// Every leaf key, dotted, in documentation order (for `settings` help and completion), with
/// the sections of `tools`.
pub fn all_keys(tools: &[ToolSection]) -> Vec<String> {
    let mut out = Vec::new();
    Schema::new(tools).collect_keys(ROOT, &mut String::new(), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use deepsolve_core::config::{CHOICES, FLAGS, KNOBS};

    fn path(s: &str) -> Vec<String> {
        s.split('.').map(str::to_string).collect()
    }

    /// What the unknown-key message says is known where `key` left the schema.
    fn hint_of(key: &str) -> String {
        Schema::new(&[])
            .lookup(&path(key))
            .unwrap_err()
            .known()
            .to_string()
    }

    #[test]
    fn lookup_finds_leaves_and_explains_misses() {
        assert!(matches!(
            Schema::new(&[]).lookup(&path("llm.model")),
            Ok(Kind::Text)
        ));
        assert!(matches!(
            Schema::new(&[]).lookup(&path("solve.max_rounds")),
            Ok(Kind::Builtin(Builtin(Own::SolveKnob)))
        ));
        assert!(matches!(
            Schema::new(&[]).lookup(&path("solve.plan_first")),
            Ok(Kind::Builtin(Builtin(Own::SolveFlag)))
        ));
        assert!(matches!(
            Schema::new(&[]).lookup(&path("llm.extra_body.a.b")),
            Ok(Kind::Builtin(Builtin(Own::Free)))
        ));
        let miss = hint_of("llm.modle");
        assert!(miss.starts_with("known in llm: base_url, model"), "{miss}");
        let miss = hint_of("lm");
        assert_eq!(
            miss,
            "known sections: llm, models, solve, tools, sandbox, server, kb, prompts"
        );
        let miss = hint_of("llm.model.x");
        assert!(miss.contains("'llm.model' is a single value"), "{miss}");
        let miss = hint_of("solve.max_round");
        assert!(miss.contains("max_rounds"), "{miss}");
    }

    #[test]
    fn all_keys_lists_every_leaf() {
        let keys = all_keys(&[]);
        assert!(keys.contains(&"llm.api_key".to_string()));
        assert!(keys.contains(&"models.reason.api_key_env".to_string()));
        assert!(keys.contains(&"solve.plan_first".to_string()));
        assert!(keys.contains(&"tools.sandbox".to_string()));
        assert!(keys.contains(&"tools.disabled".to_string()));
        assert!(keys.contains(&"sandbox.memory_mb".to_string()));
        assert!(keys.contains(&"server.database".to_string()));
        assert!(keys.contains(&"models.embedding.api_key_env".to_string()));
        assert!(keys.contains(&"kb.max_chunks".to_string()));
        assert!(keys.contains(&"llm.probe".to_string()));
        assert_eq!(
            keys.len(),
            11 + PRICE.len()
                + LOCAL.len()
                + 9
                + KNOBS.len()
                + FLAGS.len()
                + CHOICES.len()
                + TOOLS_OWN.len()
                + SANDBOX.len()
                + SERVER.len()
                + KB.len()
                + 6
        );
    }
}
