//! Token usage and how tools are offered to the model.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Tokens spent, by a model call or summed over a turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// True when any part of this was estimated locally instead of reported by the provider.
    #[serde(default)]
    pub estimated: bool,
    /// Prompt tokens the model served from its prompt (KV) cache instead of reading them
    /// again, when it says (the in-process model always does; an endpoint when it reports
    /// them). Absent from the JSON when unknown, so older records read the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }

    pub fn add(&mut self, other: &Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.estimated |= other.estimated;
        self.cached_tokens = match (self.cached_tokens, other.cached_tokens) {
            (None, None) => None,
            (mine, theirs) => Some(mine.unwrap_or(0) + theirs.unwrap_or(0)),
        };
    }
}

/// How tools are offered to the model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// The provider's native tool calling.
    #[default]
    Native,
    /// Tools described in the system prompt, called with `<tool_call>` blocks.
    Tags,
    /// Chosen from what the endpoint honours (its probe's verdict): native tools, else
    /// structured output, else the code fence; with nothing known, native switching to tags
    /// for the rest of the turn (and for this model, for the rest of the process) when the
    /// provider says tools are unsupported.
    Auto,
    /// Tools described in the system prompt, called with a fenced JSON object
    /// `{"name", "arguments"}` (or a Hermes `<tool_call>` block).
    Fence,
    /// Code as action: a fenced `python` block runs in `code_execution`; the reply stops at
    /// the output fence; other tools are called with `<tool_call>` blocks.
    Code,
    /// Every reply constrained by `response_format: json_schema` to a call or an answer.
    Structured,
    /// Tongyi DeepResearch's trained ReAct format: `<tool_call>` (Python in `<code>`),
    /// results as `<tool_response>`, `<answer>` ends.
    Tongyi,
    /// DeepAnalyze's trained format: `<Analyze>`/`<Understand>`/`<Code>`/`<Execute>`/`<Answer>`.
    #[serde(rename = "deepanalyze")]
    DeepAnalyze,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Native => "native",
            Protocol::Tags => "tags",
            Protocol::Auto => "auto",
            Protocol::Fence => "fence",
            Protocol::Code => "code",
            Protocol::Structured => "structured",
            Protocol::Tongyi => "tongyi",
            Protocol::DeepAnalyze => "deepanalyze",
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
