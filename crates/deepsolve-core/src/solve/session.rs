//! `SolveSession`: the plan and its bookkeeping for one turn.

/// The solve record is a wire type (events, checkpoints, the turn record).
pub use deepsolve_protocol::{PlanVersion, SolveRecord, SolveStep};

/// The live session of one running turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SolveSession {
    pub session_id: String,
    pub max_steps: usize,
    pub record: SolveRecord,
    /// The step (id and goal) whose summary, copied from an earlier step's, was refused once.
    pub repeat_refused: Option<(String, String)>,
}

impl SolveSession {
    pub fn new(session_id: impl Into<String>, max_replans: u32, max_steps: u32) -> Self {
        SolveSession {
            session_id: session_id.into(),
            max_steps: max_steps.clamp(1, 12) as usize,
            record: SolveRecord {
                replans_max: max_replans,
                ..Default::default()
            },
            repeat_refused: None,
        }
    }

    /// Number the goals S1, S2, …, dropping empty goals and truncating to `max_steps`.
    pub fn make_steps(&self, goals: &[String]) -> NewSteps {
        let kept: Vec<&String> = goals.iter().filter(|g| !g.trim().is_empty()).collect();
        let cut = kept.len().saturating_sub(self.max_steps);
        let steps = kept
            .into_iter()
            .take(self.max_steps)
            .enumerate()
            .map(|(i, goal)| SolveStep {
                id: format!("S{}", i + 1),
                goal: goal.trim().to_string(),
                done: false,
                summary: None,
            })
            .collect();
        NewSteps { steps, cut }
    }
}

/// The steps of a new plan, and how many goals past `max_steps` were cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSteps {
    pub steps: Vec<SolveStep>,
    pub cut: usize,
}
