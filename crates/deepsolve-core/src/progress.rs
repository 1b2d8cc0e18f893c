//! The pinned progress block: rendered from engine state before every
//! request, so the plan, the finished steps' summaries and the current step survive folding.

use crate::solve::SolveRecord;
use crate::texts::{Text, Texts};

pub(crate) const PROGRESS_MARKER: &str = "[deepsolve:progress]";
/// A step line's checkbox, open and done.
pub(crate) const STEP_OPEN: &str = "[ ]";
pub(crate) const STEP_DONE: &str = "[x]";
const PROBLEM_CHARS: usize = 2000;
/// From this many rounds left, the block says how many remain.
const ROUNDS_LEFT_NOTE_AT: u32 = 2;

pub(crate) struct Position {
    pub(crate) round: u32,
    pub(crate) max_rounds: u32,
    pub(crate) settlement_rounds: u32,
}

pub(crate) fn render(problem: &str, record: &SolveRecord, at: &Position, texts: &Texts) -> String {
    let mut out = format!("{PROGRESS_MARKER} {}", header(record, at, texts));
    if let Some(note) = rounds_left_note(at, texts) {
        out.push_str(" · ");
        out.push_str(&note);
    }
    let problem: String = problem.chars().take(PROBLEM_CHARS).collect();
    out.push('\n');
    out.push_str(&texts.render(Text::ProgressProblem, &[("problem", &problem)]));
    out.push('\n');
    out.push_str(&texts.render(Text::PlanAnalysis, &[("analysis", &record.analysis)]));
    let current = record.current().map(|s| s.id.as_str());
    for step in &record.steps {
        out.push_str(&step_line(step));
        if Some(step.id.as_str()) == current {
            out.push_str("   ");
            out.push_str(texts.get(Text::ProgressCurrent));
        }
    }
    if record.all_done() {
        out.push('\n');
        out.push_str(texts.get(Text::ProgressAllDone));
    }
    out
}

/// `\n  [x] S1 goal — summary`: the language-neutral checklist line (the record in a later
/// turn's history uses it too).
pub(crate) fn step_line(step: &crate::solve::SolveStep) -> String {
    let mark = if step.done { STEP_DONE } else { STEP_OPEN };
    let mut line = format!("\n  {mark} {} {}", step.id, step.goal);
    if let Some(summary) = &step.summary {
        line.push_str(" — ");
        line.push_str(summary);
    }
    line
}

fn header(record: &SolveRecord, at: &Position, texts: &Texts) -> String {
    texts.render(
        Text::ProgressHeader,
        &[
            ("round", &at.round.min(at.max_rounds)),
            ("max_rounds", &at.max_rounds),
            ("replans_used", &record.replans_used),
            ("replans_max", &record.replans_max),
        ],
    )
}

fn rounds_left_note(at: &Position, texts: &Texts) -> Option<String> {
    if at.round > at.max_rounds {
        return Some(texts.render(
            Text::ProgressSettlement,
            &[
                ("round", &(at.round - at.max_rounds)),
                ("settlement_rounds", &at.settlement_rounds),
            ],
        ));
    }
    let left = at.max_rounds - at.round;
    (left <= ROUNDS_LEFT_NOTE_AT)
        .then(|| texts.render(Text::ProgressRoundsLeft, &[("left", &left)]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solve::{Language, SolveStep};

    fn en() -> std::sync::Arc<Texts> {
        Texts::builtin(Language::En)
    }

    fn step(id: &str, done: bool, summary: Option<&str>) -> SolveStep {
        SolveStep {
            id: id.into(),
            goal: format!("goal {id}"),
            done,
            summary: summary.map(Into::into),
        }
    }

    #[test]
    fn carries_the_whole_plan_and_current_step() {
        let record = SolveRecord {
            analysis: "factor it".into(),
            steps: vec![
                step("S1", true, Some("x=2")),
                step("S2", false, None),
                step("S3", false, None),
            ],
            replans_used: 0,
            replans_max: 2,
            plan_history: vec![],
        };
        let at = Position {
            round: 5,
            max_rounds: 12,
            settlement_rounds: 2,
        };
        let text = render("Solve x^2-5x+6=0", &record, &at, &en());
        assert!(text.starts_with("[deepsolve:progress] round 5 of 12 · replans 0 of 2"));
        assert!(text.contains("Problem: Solve x^2-5x+6=0"));
        assert!(text.contains("  [x] S1 goal S1 — x=2"));
        assert!(text.contains("  [ ] S2 goal S2   <- current"));
        assert!(text.contains("  [ ] S3 goal S3"));
    }

    #[test]
    fn says_how_many_rounds_are_left_near_the_end() {
        let record = SolveRecord::default();
        let near = render(
            "p",
            &record,
            &Position {
                round: 11,
                max_rounds: 12,
                settlement_rounds: 2,
            },
            &en(),
        );
        assert!(near.contains("1 rounds left"));
        let over = render(
            "p",
            &record,
            &Position {
                round: 13,
                max_rounds: 12,
                settlement_rounds: 2,
            },
            &en(),
        );
        assert!(over.contains("settlement round 1 of 2"));
    }
}
