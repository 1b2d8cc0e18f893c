//! `SolveSession`: the plan and its bookkeeping for one turn.

use serde::{Deserialize, Serialize};

use crate::event::{PlanStepView, StepStatus};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SolveStep {
    pub id: String,
    pub goal: String,
    pub done: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// A plan that was replaced by `solve_replan`, kept for the record and the UI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanVersion {
    pub analysis: String,
    /// Why it was replaced.
    pub replaced_because: String,
    pub steps: Vec<SolveStep>,
}

/// The solve state kept with the turn record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SolveRecord {
    pub analysis: String,
    pub steps: Vec<SolveStep>,
    pub replans_used: u32,
    pub replans_max: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan_history: Vec<PlanVersion>,
}

impl SolveRecord {
    pub fn has_plan(&self) -> bool {
        !self.steps.is_empty()
    }

    pub fn open_steps(&self) -> impl Iterator<Item = &SolveStep> {
        self.steps.iter().filter(|s| !s.done)
    }

    pub fn current(&self) -> Option<&SolveStep> {
        self.steps.iter().find(|s| !s.done)
    }

    pub fn all_done(&self) -> bool {
        self.has_plan() && self.steps.iter().all(|s| s.done)
    }

    /// The checklist view sent in `plan` events.
    pub fn step_views(&self) -> Vec<PlanStepView> {
        let current = self.current().map(|s| s.id.clone());
        self.steps
            .iter()
            .map(|s| PlanStepView {
                id: s.id.clone(),
                goal: s.goal.clone(),
                status: if s.done {
                    StepStatus::Done
                } else if Some(&s.id) == current.as_ref() {
                    StepStatus::Current
                } else {
                    StepStatus::Pending
                },
                summary: s.summary.clone(),
            })
            .collect()
    }

    /// Every finished step's summary, across replaced plans too: the fallback answer when the
    /// forced-answer call fails.
    pub fn summaries(&self) -> Vec<(String, String, String)> {
        self.plan_history
            .iter()
            .flat_map(|p| p.steps.iter())
            .chain(self.steps.iter())
            .filter_map(|s| {
                s.summary
                    .as_ref()
                    .map(|sum| (s.id.clone(), s.goal.clone(), sum.clone()))
            })
            .collect()
    }
}

/// The live session of one running turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SolveSession {
    pub session_id: String,
    pub max_steps: usize,
    pub record: SolveRecord,
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
