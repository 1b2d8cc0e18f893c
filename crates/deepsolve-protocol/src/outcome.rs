//! How a turn ended.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::solve::SolveRecord;
use crate::tool::{Artifact, Source};
use crate::usage::Usage;

/// Every way a turn can end. Recorded on every turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model answered with every plan step finished.
    Answered,
    /// The model answered while plan steps were still open.
    AnsweredWithOpenSteps,
    /// The model answered without ever making a plan.
    AnsweredWithoutPlan,
    MaxRounds,
    ContextLimit,
    TurnTimeout,
    /// The turn's token budget ran out.
    Budget,
    /// The model kept repeating the same calls.
    Repetition,
    /// Rounds in a row with neither a tool call nor an answer.
    EmptyRounds,
    /// Three rounds in a row with unreadable text-protocol tool calls (forced answer).
    FormatErrors,
    /// The endpoint failed, or its stream broke after output had started (a forced answer
    /// salvages what it can); an `error` event says which.
    ModelError,
    Cancelled,
}

impl StopReason {
    pub const ALL: [StopReason; 12] = [
        StopReason::Answered,
        StopReason::AnsweredWithOpenSteps,
        StopReason::AnsweredWithoutPlan,
        StopReason::MaxRounds,
        StopReason::ContextLimit,
        StopReason::TurnTimeout,
        StopReason::Budget,
        StopReason::Repetition,
        StopReason::EmptyRounds,
        StopReason::FormatErrors,
        StopReason::ModelError,
        StopReason::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Answered => "answered",
            StopReason::AnsweredWithOpenSteps => "answered_with_open_steps",
            StopReason::AnsweredWithoutPlan => "answered_without_plan",
            StopReason::MaxRounds => "max_rounds",
            StopReason::ContextLimit => "context_limit",
            StopReason::TurnTimeout => "turn_timeout",
            StopReason::Budget => "budget",
            StopReason::Repetition => "repetition",
            StopReason::EmptyRounds => "empty_rounds",
            StopReason::FormatErrors => "format_errors",
            StopReason::ModelError => "model_error",
            StopReason::Cancelled => "cancelled",
        }
    }

    /// The reason named by [`StopReason::as_str`].
    pub fn parse(s: &str) -> Option<StopReason> {
        StopReason::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// The turn ended with an answer the model wrote of its own accord.
    pub fn is_natural_answer(self) -> bool {
        matches!(
            self,
            StopReason::Answered
                | StopReason::AnsweredWithOpenSteps
                | StopReason::AnsweredWithoutPlan
        )
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A step boundary, enough to resume an interrupted turn without re-running a finished step:
/// the context is rebuilt as right after the fold (prefix + progress block), and the budgets
/// continue from what was spent. Emitted after every successful `solve_finish_step`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Checkpoint {
    /// Plan, finished steps with their summaries, replans used, plan history.
    pub record: SolveRecord,
    /// Rounds spent: the budget and "round r of N" continue from here.
    pub rounds: u32,
    /// Tokens spent (tool sub-calls included): they count against `token_budget`.
    pub usage: Usage,
    /// Wall-clock time spent: it counts against `turn_timeout_s`.
    pub elapsed_ms: u64,
    /// Every citation source numbered so far: a resumed turn keeps their numbers. Absent in
    /// checkpoints written before sources were kept.
    #[serde(default)]
    pub sources: Vec<Source>,
}

/// Where the final text came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AnswerSource {
    /// The model answered of its own accord.
    Model,
    /// The forced-answer call (tools declared, `tool_choice: none`).
    Forced,
    /// Assembled from the step summaries because the forced call failed.
    StepSummaries,
}

/// What a turn produced, once it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TurnOutcome {
    pub turn_id: String,
    pub answer: Option<String>,
    pub answer_source: Option<AnswerSource>,
    pub stop_reason: StopReason,
    /// The solve record: plan, steps with summaries, replans, plan history.
    pub solve: SolveRecord,
    pub usage: Usage,
    pub rounds: u32,
    pub elapsed_ms: u64,
    pub artifacts: Vec<Artifact>,
    /// The sources the answer cites, ordered by `n`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<Source>,
    /// Set for `model_error`: what went wrong, for the one-line exit message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stop_reason_parses_back_from_its_name() {
        for reason in StopReason::ALL {
            assert_eq!(StopReason::parse(reason.as_str()), Some(reason));
            assert_eq!(serde_json::to_value(reason).expect("json"), reason.as_str());
        }
        assert_eq!(StopReason::parse("bored"), None);
    }
}
