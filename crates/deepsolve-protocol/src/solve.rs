//! The solve record: the plan, its steps and their summaries, replans and replaced plans.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::event::{PlanStepView, StepStatus};

/// One step of a plan (`S1`, `S2`, …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SolveStep {
    pub id: String,
    pub goal: String,
    pub done: bool,
    /// What the step established, given by `solve_finish_step`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// A plan that was replaced by `solve_replan`, kept for the record and the UI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PlanVersion {
    pub analysis: String,
    /// Why it was replaced.
    pub replaced_because: String,
    pub steps: Vec<SolveStep>,
}

/// The solve state kept with the turn record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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
    pub fn summaries(&self) -> Vec<StepSummary<'_>> {
        self.plan_history
            .iter()
            .flat_map(|p| p.steps.iter())
            .chain(self.steps.iter())
            .filter_map(|s| {
                s.summary.as_deref().map(|summary| StepSummary {
                    id: &s.id,
                    goal: &s.goal,
                    summary,
                })
            })
            .collect()
    }
}

/// A finished step's record: what the answer of last resort is assembled from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepSummary<'a> {
    pub id: &'a str,
    pub goal: &'a str,
    pub summary: &'a str,
}

/// The language of a turn: its prompts, notices and the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    #[default]
    En,
    Zh,
}

impl Language {
    /// A language as people name it: `en`/`english`, `zh`/`zh-cn`/`chinese`/`中文`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "en" | "english" => Some(Language::En),
            "zh" | "zh-cn" | "chinese" | "中文" => Some(Language::Zh),
            _ => None,
        }
    }

    pub fn code(self) -> &'static str {
        match self {
            Language::En => "en",
            Language::Zh => "zh",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_parse_by_their_common_names_and_serialise_as_codes() {
        assert_eq!(Language::parse(" English "), Some(Language::En));
        assert_eq!(Language::parse("中文"), Some(Language::Zh));
        assert_eq!(Language::parse("fr"), None);
        for l in [Language::En, Language::Zh] {
            let json = serde_json::to_value(l).expect("json");
            assert_eq!(json, l.code());
            assert_eq!(Language::parse(l.code()), Some(l));
        }
    }

    #[test]
    fn the_current_step_is_the_first_open_one() {
        let step = |id: &str, done: bool| SolveStep {
            id: id.into(),
            goal: format!("goal {id}"),
            done,
            summary: done.then(|| format!("did {id}")),
        };
        let record = SolveRecord {
            analysis: "a".into(),
            steps: vec![step("S1", true), step("S2", false), step("S3", false)],
            replans_used: 0,
            replans_max: 2,
            plan_history: Vec::new(),
        };
        let views = record.step_views();
        let statuses: Vec<StepStatus> = views.iter().map(|v| v.status).collect();
        assert_eq!(
            statuses,
            [StepStatus::Done, StepStatus::Current, StepStatus::Pending]
        );
        assert_eq!(record.summaries().len(), 1);
        assert!(!record.all_done());
    }
}
