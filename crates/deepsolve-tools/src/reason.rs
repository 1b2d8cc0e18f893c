//! `reason {query, context?}`: one tool-less call to the reasoning model for a hard
//! sub-derivation; its tokens count in the turn's usage.

use std::sync::Arc;

use async_trait::async_trait;
use deepsolve_core::{
    ChatModel, Message, Tool, ToolContext, ToolError, ToolOutput, ToolRef, ToolSpec,
};
use deepsolve_settings::{Clamp, Field, Kind};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::toolset::{Deps, PlaybookLine, Unavailable};

pub const REASON: &str = "reason";
/// Its line in the playbook.
pub(crate) const PLAYBOOK: PlaybookLine = PlaybookLine {
    en: "`reason`: a hard sub-derivation, worked carefully",
    zh: "`reason`：完成一段困难的子推导",
};

/// Its own settings, `tools.reason`.
pub(crate) const SETTINGS: &[Field] = &[Field::new(
    "max_tokens",
    Kind::Number(Clamp::whole(1.0, 200_000.0)),
)];

/// `tools.reason`, as declared in [`SETTINGS`].
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ReasonSettings {
    /// The sub-call's output budget; unset = `solve.max_tokens`. A derivation often needs
    /// more room than one step of the main loop.
    max_tokens: Option<u32>,
}

const INSTRUCTIONS: &str = "You are a careful mathematician. Derive the result step by step, checking each step. End with a line that starts with 'Answer:' and states the result exactly.";

pub struct ReasonTool {
    spec: ToolSpec,
    model: Arc<dyn ChatModel>,
    max_tokens: u32,
    temperature: f32,
}

impl ReasonTool {
    pub fn new(model: Arc<dyn ChatModel>, max_tokens: u32, temperature: f32) -> Self {
        ReasonTool {
            spec: ToolSpec {
                name: REASON.into(),
                description: "Work a hard sub-derivation carefully with a dedicated reasoning model; returns the derivation and a labelled answer.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "minLength": 1, "description": "The precise question or derivation to work out."},
                        "context": {"type": "string", "description": "Facts and results it should build on."}
                    },
                    "required": ["query"],
                    "additionalProperties": false
                }),
            },
            model,
            max_tokens,
            temperature,
        }
    }
}

/// The catalog's factory: the reasoning model, with `tools.reason.max_tokens` (else the turn
/// defaults' `solve.max_tokens`) and `solve.temperature`.
pub(crate) fn build(deps: &Deps) -> Result<ToolRef, Unavailable> {
    let model = deps.reasoning_model.clone()?;
    let own: ReasonSettings = deps
        .settings
        .tool_settings(REASON)
        .map_err(|e| Unavailable(e.to_string()))?;
    let solve = &deps.settings.solve;
    Ok(Arc::new(ReasonTool::new(
        model,
        own.max_tokens.unwrap_or(solve.max_tokens),
        solve.temperature as f32,
    )))
}

#[async_trait]
impl Tool for ReasonTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, args: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let query = args["query"].as_str().unwrap_or_default();
        let mut prompt = String::new();
        if let Some(context) = args["context"].as_str().filter(|c| !c.trim().is_empty()) {
            prompt.push_str("Context:\n");
            prompt.push_str(context);
            prompt.push_str("\n\n");
        }
        prompt.push_str("Question:\n");
        prompt.push_str(query);
        let messages = vec![Message::system(INSTRUCTIONS), Message::user(prompt)];
        let completion = crate::subcall::complete(
            self.model.as_ref(),
            messages,
            self.max_tokens,
            self.temperature,
            "reasoning",
        )
        .await?;
        let text = completion.text.trim();
        if text.is_empty() {
            return Err(ToolError::actionable(
                "the reasoning model returned no text; derive it yourself or rephrase the query",
            ));
        }
        Ok(ToolOutput {
            usage: Some(completion.usage),
            ..ToolOutput::ok(text)
        })
    }
}
