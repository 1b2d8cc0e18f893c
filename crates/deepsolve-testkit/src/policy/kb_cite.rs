//! [`KbCite`]: a solve from a knowledge base that cites what it read, for the server's, the
//! CLI's and the web UI's tests of knowledge bases.

use std::ops::ControlFlow;

use serde_json::json;

use crate::policy::Policy;
use crate::policy::moves::{
    call_once, call_with, finish_call_for, leading_number, plan_of, results_of, short, step_summary,
};
use crate::progress::PlanStep;
use crate::reply::Reply;
use crate::request::PolicyRequest;

/// The search tool and the reader it uses.
const RAG: &str = "rag";
const READ_SOURCE: &str = "read_source";

/// The goals of its two steps.
pub const KB_CITE_GOALS: [&str; 2] = [
    "Find the relevant passage in the notes",
    "Read the source and state the result",
];

/// Plans two steps and works them from the turn's material:
/// 1. `S1` calls `rag {query: <the problem>}` (when offered), then finishes with the first
///    hit's line: its number and its source id, read from the first block of the result
///    (`[1] lecture.pdf · p. 12 · 3.2 Limits (source doc_…)`, the passage quoted below it
///    with `> `; a Chinese turn's `rag` writes `(来源 doc_…)`), and the passage's first line.
/// 2. `S2` calls `read_source {source_id}` on that id (when offered and found), then finishes
///    with the number the reader's result shows (the first `[n]` in it).
///
/// Then it answers citing both: "By the notes' definition [1], … [n]." Step summaries carry
/// the numbers and the id, so folding loses nothing. Without `rag` (or without a hit) it
/// finishes the steps without work and answers without citations. A forced answer gets the
/// same answer.
///
/// **Expected ending:** `answered` after 6 rounds with both tools offered and a hit, every
/// step done; the answer event's sources are `[1]` and the `read_source` number.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KbCite;

/// The first block of a `rag` result: its number, its source id and its passage's first line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstHit {
    pub n: u32,
    pub source_id: String,
    pub passage: String,
}

/// The first block of a `rag` result, as [`KbCite`] reads it.
pub fn first_hit(content: &str) -> Option<FirstHit> {
    let mut lines = content.lines().map(str::trim);
    let head = lines.by_ref().find(|l| leading_number(l).is_some())?;
    let n = leading_number(head)?;
    let source_id = labelled_id(head)?;
    let passage = lines
        .take_while(|l| l.starts_with('>'))
        .map(|l| l.trim_start_matches('>').trim())
        .find(|l| !l.is_empty())
        .unwrap_or_default()
        .to_string();
    Some(FirstHit {
        n,
        source_id,
        passage,
    })
}

/// The labels before a source id in a block's head line (`rag` writes the turn's language).
const SOURCE_LABELS: [&str; 3] = ["(source ", "(来源 ", "（来源 "];

/// The id after the last source label of `line`, up to its closing parenthesis.
fn labelled_id(line: &str) -> Option<String> {
    let (at, label) = SOURCE_LABELS
        .iter()
        .filter_map(|label| line.rfind(label).map(|at| (at, label)))
        .max_by_key(|(at, _)| *at)?;
    let id = line[at + label.len()..].split([')', '）']).next()?.trim();
    (!id.is_empty()).then(|| id.to_string())
}

/// The first `[n]` anywhere in `text`.
fn first_number(text: &str) -> Option<u32> {
    text.match_indices('[')
        .find_map(|(i, _)| leading_number(&text[i..]))
}

/// The source id a summary of `S1` carries.
fn summary_source_id(summary: &str) -> Option<String> {
    labelled_id(summary)
}

impl KbCite {
    fn plan(&self, req: &PolicyRequest) -> Reply {
        plan_of(
            format!(
                "Look it up in the notes and cite them: {}",
                short(&req.problem(), 60)
            ),
            &KB_CITE_GOALS,
        )
    }

    /// `S1`: search, then record the first hit.
    fn search_move(&self, req: &PolicyRequest, step: &PlanStep) -> Reply {
        let query = || json!({"query": req.problem()});
        let results = match call_once(req, RAG, query, "Searching the notes.") {
            ControlFlow::Continue(results) => results,
            ControlFlow::Break(call) => return call,
        };
        let summary = match results.iter().find_map(|r| first_hit(&r.content)) {
            Some(hit) => format!(
                "passage [{}] (source {}): {}",
                hit.n,
                hit.source_id,
                short(&hit.passage, 80)
            ),
            None => "no passage found in the notes".to_string(),
        };
        finish_call_for(&step.id, &summary)
    }

    /// `S2`: read the first hit's source, then record the number the reader gave it.
    fn read_move(&self, req: &PolicyRequest, step: &PlanStep, found: Option<&str>) -> Reply {
        let results = results_of(req, READ_SOURCE);
        if let (true, true, Some(id)) = (results.is_empty(), req.offers(READ_SOURCE), found) {
            return call_with(READ_SOURCE, json!({"source_id": id}), "Reading the source.");
        }
        let summary = match results.iter().find_map(|r| first_number(&r.content)) {
            Some(n) => format!("read the source, cited as [{n}]"),
            None => "nothing more to read".to_string(),
        };
        finish_call_for(&step.id, &summary)
    }

    /// The answer from the summaries: it cites what they numbered.
    fn answer(&self, req: &PolicyRequest) -> Reply {
        let plan = req.plan();
        let (found, read) = (
            step_summary(plan.as_ref(), 0),
            step_summary(plan.as_ref(), 1),
        );
        let mut text = match first_number(&found) {
            Some(n) => {
                let passage = found.split_once("): ").map_or("", |(_, p)| p);
                format!("By the notes' definition [{n}], {passage}")
            }
            None => "The notes say nothing about it; from first principles, 42".to_string(),
        };
        if let Some(n) = first_number(&read) {
            text.push_str(&format!(" The source confirms it [{n}]."));
        }
        Reply::text(format!("**Answer:** {}", text.trim()))
    }
}

impl Policy for KbCite {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if req.is_subcall() {
            return Reply::text("Answer: 42");
        }
        if req.is_forced_answer() {
            return self.answer(req);
        }
        let Some(plan) = req.plan() else {
            return self.plan(req);
        };
        let Some(step) = plan.current().cloned() else {
            return self.answer(req);
        };
        let position = plan.steps.iter().position(|s| s.id == step.id);
        let found = plan
            .steps
            .first()
            .and_then(|s| s.summary.as_deref())
            .and_then(summary_source_id);
        match position {
            Some(0) => self.search_move(req, &step),
            _ => self.read_move(req, &step, found.as_deref()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_block_gives_number_source_and_passage() {
        let rag = "[1] lecture.pdf · p. 12 · 3.2 Limits (source doc_abc)\n\
                   > A sequence converges when\n> its terms get close.\n\n\
                   [2] other.md (source doc_def)\n> else";
        let hit = first_hit(rag).expect("a hit");
        assert_eq!(
            hit,
            FirstHit {
                n: 1,
                source_id: "doc_abc".into(),
                passage: "A sequence converges when".into(),
            }
        );
        let titled = "Results:\n[4] notes (draft) (source doc_x)\n";
        assert_eq!(first_hit(titled).expect("hit").source_id, "doc_x");
        assert_eq!(first_hit("no results for \"limits\""), None);
        let zh = "[2] 讲义.pdf · 第 3 页 · 极限 (来源 kbd_9)\n> 数列收敛";
        let hit = first_hit(zh).expect("a zh hit");
        assert_eq!(
            (hit.n, hit.source_id.as_str(), hit.passage.as_str()),
            (2, "kbd_9", "数列收敛")
        );
    }

    #[test]
    fn numbers_are_read_where_they_appear() {
        assert_eq!(
            first_number("lecture.pdf [3] chars 0–8000 of 9000"),
            Some(3)
        );
        assert_eq!(first_number("[a] then [12]"), Some(12));
        assert_eq!(first_number("none"), None);
        assert_eq!(
            summary_source_id("passage [1] (source doc_abc): text").as_deref(),
            Some("doc_abc")
        );
    }
}
