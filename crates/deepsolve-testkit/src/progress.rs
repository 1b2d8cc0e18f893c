//! Reading the engine's pinned progress block:
//!
//! ```text
//! [deepsolve:progress] round 5 of 12 · replans 0 of 2
//! Problem: <text>
//! Plan: <analysis>
//!   [x] S1 <goal> — <summary>
//!   [ ] S2 <goal>   <- current
//! ```
//!
//! Policies read the plan from here after a fold, because the step's tool results (and often
//! the `solve_plan` result) are gone from the context: this is what proves the plan survives
//! folding (R1).

/// The marker that opens a progress block.
pub const PROGRESS_MARKER: &str = "[deepsolve:progress]";

/// One step as a policy sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanStep {
    pub id: String,
    pub goal: String,
    pub done: bool,
    pub summary: Option<String>,
}

impl PlanStep {
    /// `[S2] <goal>`: the tag policies put in a step's work-call arguments so they can tell
    /// which step a result belongs to, wherever the engine places its blocks.
    pub fn key(&self) -> String {
        format!("[{}] {}", self.id, self.goal)
    }
}

/// A parsed progress block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProgressBlock {
    /// The block's text, from the marker to the end of the block.
    pub text: String,
    /// `round r of N`.
    pub round: Option<(u32, u32)>,
    /// `replans u of m`.
    pub replans: Option<(u32, u32)>,
    pub problem: Option<String>,
    pub analysis: Option<String>,
    pub steps: Vec<PlanStep>,
    /// The id on the line marked `<- current`, if any.
    pub marked_current: Option<String>,
}

impl ProgressBlock {
    /// Parse the last progress block in `text` (a message that may hold other text too).
    /// The block ends at the next `[deepsolve:` marker or at the end of the text.
    pub fn parse(text: &str) -> Option<ProgressBlock> {
        let start = text.rfind(PROGRESS_MARKER)?;
        let rest = &text[start..];
        let end = rest[PROGRESS_MARKER.len()..]
            .find("\n[deepsolve:")
            .map_or(rest.len(), |i| i + PROGRESS_MARKER.len());
        let block = &rest[..end];
        let mut lines = block.lines();
        let header = lines.next().unwrap_or_default();
        let mut out = ProgressBlock {
            text: block.to_string(),
            round: pair_after(header, "round "),
            replans: pair_after(header, "replans "),
            ..ProgressBlock::default()
        };
        out.read_body(lines);
        Some(out)
    }

    fn read_body<'a>(&mut self, lines: impl Iterator<Item = &'a str>) {
        // Problem and analysis may span lines: continuation lines belong to the last section
        // opened, until the first step line.
        #[derive(PartialEq)]
        enum Section {
            Other,
            Problem,
            Plan,
        }
        let mut section = Section::Other;
        for line in lines {
            if let Some((step, current)) = parse_step_line(line) {
                if current {
                    self.marked_current = Some(step.id.clone());
                }
                self.steps.push(step);
                section = Section::Other;
            } else if let Some(p) = line.strip_prefix("Problem:") {
                self.problem = Some(p.trim().to_string());
                section = Section::Problem;
            } else if let Some(a) = line.strip_prefix("Plan:") {
                self.analysis = Some(a.trim().to_string());
                section = Section::Plan;
            } else if self.steps.is_empty() && section != Section::Other {
                let target = match section {
                    Section::Problem => self.problem.as_mut(),
                    _ => self.analysis.as_mut(),
                };
                if let Some(text) = target {
                    text.push('\n');
                    text.push_str(line);
                }
            }
        }
    }

    /// The current step: the first one not done.
    pub fn current(&self) -> Option<&PlanStep> {
        self.steps.iter().find(|s| !s.done)
    }
}

/// `keyword N of M` anywhere in `text`.
fn pair_after(text: &str, keyword: &str) -> Option<(u32, u32)> {
    let at = text.find(keyword)? + keyword.len();
    let mut words = text[at..].split_whitespace();
    let first = words.next()?.parse().ok()?;
    (words.next()? == "of").then_some(())?;
    let second: String = words
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some((first, second.parse().ok()?))
}

/// `  [x] S1 <goal> — <summary>` or `  [ ] S2 <goal>   <- current` (`<- 当前` in Chinese).
fn parse_step_line(line: &str) -> Option<(PlanStep, bool)> {
    let rest = line.trim_start().strip_prefix('[')?;
    let mut chars = rest.chars();
    let mark = chars.next()?;
    let rest = chars.as_str().strip_prefix(']')?;
    let rest = rest.trim_start();
    let id_len = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let id = &rest[..id_len];
    let digits = id.strip_prefix('S')?;
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let mut body = rest[id_len..].trim();
    let mut current = false;
    for marker in ["<- current", "← current", "<- 当前"] {
        if let Some(stripped) = body.strip_suffix(marker) {
            body = stripped.trim_end();
            current = true;
        }
    }
    let done = matches!(mark, 'x' | 'X' | '✓' | '✔');
    let (goal, summary) = match body.split_once(" — ") {
        Some((goal, summary)) if done => (goal.trim(), Some(summary.trim().to_string())),
        _ => (body, None),
    };
    Some((
        PlanStep {
            id: id.to_string(),
            goal: goal.to_string(),
            done,
            summary,
        },
        current,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCK: &str = "Earlier text.\n[deepsolve:progress] round 5 of 12 · replans 1 of 2\nProblem: Solve x^2 = 4\nfor real x.\nPlan: factor then check\n  [x] S1 factor the equation — (x-2)(x+2)=0\n  [ ] S2 solve each factor   <- current\n  [ ] S3 check — both roots\n\n[deepsolve:nudge] keep going";

    #[test]
    fn parses_the_documented_format() {
        let b = ProgressBlock::parse(BLOCK).unwrap();
        assert_eq!(b.round, Some((5, 12)));
        assert_eq!(b.replans, Some((1, 2)));
        assert_eq!(b.problem.as_deref(), Some("Solve x^2 = 4\nfor real x."));
        assert_eq!(b.analysis.as_deref(), Some("factor then check"));
        assert_eq!(b.steps.len(), 3);
        assert_eq!(b.steps[0].summary.as_deref(), Some("(x-2)(x+2)=0"));
        assert_eq!(b.steps[1].goal, "solve each factor");
        // An open step keeps a dash in its goal: only done steps carry summaries.
        assert_eq!(b.steps[2].goal, "check — both roots");
        assert_eq!(b.marked_current.as_deref(), Some("S2"));
        assert_eq!(b.current().unwrap().id, "S2");
        assert!(!b.text.contains("nudge"));
    }

    #[test]
    fn takes_the_last_block_and_tolerates_missing_parts() {
        let text = "[deepsolve:progress] round 1 of 3\n  [ ] S1 a\n[deepsolve:progress]\n  [x] S1 a — ok\n  [ ] S2 b";
        let b = ProgressBlock::parse(text).unwrap();
        assert_eq!(b.round, None);
        assert_eq!(b.current().unwrap().id, "S2");
        assert!(ProgressBlock::parse("no block here").is_none());
    }

    #[test]
    fn step_lines_need_an_s_id() {
        assert!(parse_step_line("[x] done deal").is_none());
        assert!(parse_step_line("[ ] S").is_none());
        assert!(parse_step_line("  [X] S12 g — s").unwrap().0.done);
    }
}
