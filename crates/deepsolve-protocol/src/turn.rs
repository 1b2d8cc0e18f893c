//! What the store keeps of a turn besides its events: the spec it was started with, and
//! where it stands.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::image::StoredImage;
use crate::material::Material;
use crate::solve::{Language, SolveRecord};

/// A previous turn of the same conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PriorTurn {
    pub problem: String,
    pub answer: String,
    #[serde(default)]
    pub solve: Option<SolveRecord>,
}

/// What a turn was started with, as kept in its row: with the turn's id, session, user and
/// problem, enough to run it again after a crash. The history is stored too, not re-read
/// from the session on resume: the turn must continue with what it saw, and the OpenAI
/// facade's history lives nowhere else.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StoredTurnSpec {
    pub language: Language,
    /// The work tools offered (the solve tools always are).
    pub tools: Vec<String>,
    /// The effective solve knobs, by key. Kept as a map, not the engine's config type, so a
    /// renamed or removed knob never makes a stored turn unreadable.
    pub config: Map<String, Value>,
    pub context_window: u64,
    /// Absent in turns recorded before it was kept: those resume without history.
    #[serde(default)]
    pub history: Vec<PriorTurn>,
    /// The knowledge bases and documents the turn may read (a resume sees the same);
    /// absent for a turn without any, and in turns recorded before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub material: Option<Material>,
    /// The images the turn was given, as the model was sent them (their bytes are stored
    /// with the turn); absent for a turn without any, and in turns recorded before they were
    /// kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<StoredImage>,
}

/// Where a turn stands. `Running` is the only non-terminal state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    Running,
    /// Ended with a stop reason other than `cancelled`.
    Finished,
    Cancelled,
    /// Could not start, or the engine task failed.
    Failed,
    /// Left `running` by a process that died; its events are intact and it can be resumed.
    Interrupted,
}

impl TurnStatus {
    pub const ALL: [TurnStatus; 5] = [
        TurnStatus::Running,
        TurnStatus::Finished,
        TurnStatus::Cancelled,
        TurnStatus::Failed,
        TurnStatus::Interrupted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TurnStatus::Running => "running",
            TurnStatus::Finished => "finished",
            TurnStatus::Cancelled => "cancelled",
            TurnStatus::Failed => "failed",
            TurnStatus::Interrupted => "interrupted",
        }
    }

    pub fn parse(s: &str) -> Option<TurnStatus> {
        TurnStatus::ALL.into_iter().find(|t| t.as_str() == s)
    }

    pub fn is_terminal(self) -> bool {
        self != TurnStatus::Running
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_spec_without_history_reads_with_none() {
        let spec: StoredTurnSpec = serde_json::from_value(json!({
            "language": "zh", "tools": ["reason"], "config": {"max_rounds": 5},
            "context_window": 32000
        }))
        .expect("decoded");
        assert_eq!(spec.language, Language::Zh);
        assert!(spec.history.is_empty());
        assert_eq!(spec.material, None);
        assert!(spec.images.is_empty());
        assert_eq!(spec.config["max_rounds"], 5);
    }

    #[test]
    fn statuses_parse_back_from_their_names() {
        for status in TurnStatus::ALL {
            assert_eq!(TurnStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(TurnStatus::parse("sleeping"), None);
    }
}
