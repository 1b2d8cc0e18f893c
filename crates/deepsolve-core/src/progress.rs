//! The pinned progress block (DESIGN §5.6, R1): rendered from engine state before every
//! request, so the plan, the finished steps' summaries and the current step survive folding.

use crate::solve::SolveRecord;

pub const PROGRESS_MARKER: &str = "[deepsolve:progress]";
const PROBLEM_CHARS: usize = 2000;

pub struct Position {
    pub round: u32,
    pub max_rounds: u32,
    pub settlement_rounds: u32,
}

pub fn render(problem: &str, record: &SolveRecord, at: &Position) -> String {
    let mut out = format!(
        "{PROGRESS_MARKER} round {} of {} · replans {} of {}",
        at.round.min(at.max_rounds),
        at.max_rounds,
        record.replans_used,
        record.replans_max
    );
    out.push_str(&rounds_left_note(at));
    let problem: String = problem.chars().take(PROBLEM_CHARS).collect();
    out.push_str("\nProblem: ");
    out.push_str(&problem);
    out.push_str("\nPlan: ");
    out.push_str(&record.analysis);
    let current = record.current().map(|s| s.id.as_str());
    for step in &record.steps {
        let mark = if step.done { "[x]" } else { "[ ]" };
        out.push_str(&format!("\n  {mark} {} {}", step.id, step.goal));
        if let Some(summary) = &step.summary {
            out.push_str(" — ");
            out.push_str(summary);
        }
        if Some(step.id.as_str()) == current {
            out.push_str("   <- current");
        }
    }
    if record.all_done() {
        out.push_str("\nAll steps are done: write the final answer now.");
    }
    out
}

fn rounds_left_note(at: &Position) -> String {
    if at.round > at.max_rounds {
        format!(
            " · settlement round {} of {}: the round budget is spent — finish now",
            at.round - at.max_rounds,
            at.settlement_rounds
        )
    } else {
        let left = at.max_rounds - at.round;
        if left <= 2 {
            format!(" · {left} rounds left after this one")
        } else {
            String::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solve::SolveStep;

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
        let text = render("Solve x^2-5x+6=0", &record, &at);
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
        );
        assert!(over.contains("settlement round 1 of 2"));
    }
}
