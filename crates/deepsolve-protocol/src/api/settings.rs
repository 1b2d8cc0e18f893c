//! The settings endpoint's parts: what a change clamped, and the prompts an operator shaped.

use crate::solve::Language;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A value a settings change asked for that was out of range (or not a finite number), and
/// what was written instead.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClampedValue {
    /// The full key, e.g. `solve.max_rounds`.
    pub key: String,
    /// The value as the request wrote it (`99`, `1e9`, `.inf`).
    pub asked: String,
    /// The value in force now (and in the settings file).
    pub applied: f64,
    /// The key's range.
    pub min: f64,
    pub max: f64,
}

/// The texts the model reads as an operator shaped them: the playbook in force per language,
/// and every text that is not the built-in one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PromptsView {
    /// One per language (`en`, `zh`).
    pub playbooks: Vec<PlaybookView>,
    /// Every text in force that is not the built-in one.
    pub overridden: Vec<PromptOverrideView>,
    /// The largest override accepted, in bytes.
    pub max_bytes: u64,
}

/// The playbook (the solve system prompt) in force for one language.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlaybookView {
    pub language: Language,
    /// Its text. The mounted tools' lines go where it writes `{tools}` (the built-in one:
    /// `{tool_lines}`), else after it.
    pub text: String,
    /// Where it comes from (a settings key or a file); `null`: built in.
    pub from: Option<String>,
    /// The settings key a reset removes (with its `_file`): the language's own
    /// (`prompts.solve.zh.system`) or the one for every language (`prompts.solve.system`);
    /// `null` when built in or from a file of the `prompts/` directory.
    pub setting: Option<String>,
}

/// A text that is not the built-in one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PromptOverrideView {
    pub language: Language,
    /// The text's name (`playbook`, `nudge_act_now`, …).
    pub name: String,
    /// A settings key or a file.
    pub from: String,
    /// Its length, in characters.
    pub chars: u64,
}

/// A change of the playbook in `PUT /api/v1/capabilities/settings`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlaybookChange {
    /// The language whose playbook changes; `null`: the one for every language.
    pub language: Option<Language>,
    /// The new playbook; `null`: back to the default (the setting and its `_file` removed).
    pub system: Option<String>,
}
