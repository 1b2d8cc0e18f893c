//! `SolveSession`: the plan and its bookkeeping for one turn.

use std::collections::BTreeSet;

/// The solve record is a wire type (events, checkpoints, the turn record).
pub use deepsolve_protocol::{PlanVersion, SolveRecord, SolveStep};

/// The live session of one running turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SolveSession {
    pub session_id: String,
    pub max_steps: usize,
    pub record: SolveRecord,
    /// The summaries refused once per step (the rule, the step's id and goal): sent again,
    /// they stand.
    pub refused_once: BTreeSet<(OnceRule, String, String)>,
    /// Each summary a rule refused (the step's id and goal, the summary): sent again, it
    /// stands, whichever rule would refuse it next.
    pub refused_summaries: BTreeSet<(String, String, String)>,
    /// What the open step's programs printed (`code_execution` runs that succeeded), which
    /// its summary is checked against.
    pub printed: Vec<String>,
}

/// A rule that refuses a step's summary once: the model may know better, and a rule that
/// refuses every time makes it send the same call until the repetition guard ends the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum OnceRule {
    /// Copied word for word from an earlier step's summary.
    RepeatedSummary,
    /// None of the numbers the step's programs printed.
    UnprintedResult,
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
            refused_once: BTreeSet::new(),
            refused_summaries: BTreeSet::new(),
            printed: Vec::new(),
        }
    }

    /// A program run while a step is open printed `output` (kept for that step's summary).
    pub fn note_printed(&mut self, output: &str) {
        if self.record.current().is_some() && !output.trim().is_empty() {
            self.printed.push(output.to_string());
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
