//! A new problem's first workings (`solve.draft`, `solve.drafts`): asked plainly, again until
//! one boxed result has been reached twice or `solve.drafts` workings are in. The first working
//! that reached the agreed result is kept as the reasoning the plan starts from, the plan's
//! round is told the result was reached twice (its steps are to check it) and the answer's
//! round is reminded of it (keep it unless a step's computation showed it wrong); workings
//! that never agree are named to the plan's round, whose steps are to find out which is right.
//!
//! Why: a turn's answer follows its first working (the 1.5B model's answers agreed with its
//! one draft in 28 of 30 problems), and two samples of one request differ a lot with a small
//! model. Plain chat's majority of three samples was right on 22 of 30 problems where one
//! sample was right on 18–19; the result a model reaches twice is a better start than its first.
//! And its steps threw that start away more often than they mended it (the working kept was
//! right in 11 of 17 problems, the answers in 8): the steps and the answer hear the result.

use super::NOTICE_MARKER;
use super::turn::TurnRun;
use crate::boxed::{last_boxed, result_key};
use crate::config::SolveConfig;
use crate::event::RoundRole;
use crate::model::{Completion, FinishReason};
use crate::texts::Text;

/// The longest a differing result is quoted to the plan's round, in characters.
const QUOTED_RESULT_CHARS: usize = 60;

/// The drafts of a turn that drafts.
pub(super) struct Drafts {
    /// `solve.drafts`: the most workings asked for.
    most: u32,
    workings: Vec<Working>,
    /// The workings are in (the next round asks for the plan).
    decided: bool,
    /// The workings' results when no result was reached twice (each once, in order): the
    /// plan's round is told them.
    differing: Vec<String>,
    /// The result reached twice, quoted: the plan's and the answer's rounds are told it.
    agreed: Option<String>,
}

struct Working {
    text: String,
    /// The last `\boxed{}`'s content, and what it is compared by ([`result_key`]).
    result: Option<(String, String)>,
}

impl Drafts {
    /// At most `solve.drafts` workings; one where sampling is greedy (temperature 0), which
    /// would only write the same working again.
    pub(super) fn new(cfg: &SolveConfig) -> Self {
        let most = if cfg.temperature > 0.0 { cfg.drafts } else { 1 };
        Drafts::at_most(most)
    }

    fn at_most(most: u32) -> Self {
        Drafts {
            most: most.max(1),
            workings: Vec::new(),
            decided: false,
            differing: Vec::new(),
            agreed: None,
        }
    }

    /// The next round asks for a working.
    pub(super) fn drawing(&self) -> bool {
        !self.decided
    }

    /// The next round asks for a working after the first: a round that does not take from
    /// the round budget (the first stands for the round the plan would have had).
    pub(super) fn drawing_again(&self) -> bool {
        self.drawing() && !self.workings.is_empty()
    }

    /// The results the plan's round is told disagree (empty where they agreed).
    pub(super) fn differing(&self) -> &[String] {
        &self.differing
    }

    /// The result two workings reached, if any did, quoted.
    pub(super) fn agreed(&self) -> Option<&str> {
        self.agreed.as_deref()
    }

    /// One more working; the working to keep once the drafts are decided.
    fn take(&mut self, text: String) -> Option<String> {
        let result = boxed_result(&text);
        self.workings.push(Working { text, result });
        let kept = self.decide()?;
        self.decided = true;
        Some(self.workings[kept].text.clone())
    }

    /// Which working to keep, once that is known: the first to reach a result reached twice;
    /// the first, where it gave no result to compare (more would not be compared either) or
    /// where `most` are in without agreement.
    fn decide(&mut self) -> Option<usize> {
        let keys: Vec<Option<&str>> = (self.workings.iter())
            .map(|w| w.result.as_ref().map(|(_, key)| key.as_str()))
            .collect();
        if keys[0].is_none() {
            return Some(0);
        }
        let reached_twice = keys
            .iter()
            .enumerate()
            .find(|(i, key)| key.is_some() && keys[i + 1..].contains(key));
        if let Some((first, _)) = reached_twice {
            self.agreed = (self.workings[first].result.as_ref()).map(|(boxed, _)| quoted(boxed));
            return Some(first);
        }
        if self.workings.len() < self.most as usize {
            return None;
        }
        self.differing = (self.workings.iter())
            .filter_map(|w| w.result.as_ref())
            .map(|(boxed, _)| quoted(boxed))
            .collect();
        if self.differing.len() < 2 {
            self.differing.clear();
        }
        Some(0)
    }
}

/// A text's result: its last `\boxed{}`'s content, trimmed, and what it is compared by
/// ([`result_key`]); none where it boxes nothing or an empty box.
fn boxed_result(text: &str) -> Option<(String, String)> {
    let boxed = last_boxed(text)?.trim().to_string();
    (!boxed.is_empty()).then(|| {
        let key = result_key(&boxed);
        (boxed, key)
    })
}

/// A result as a round is told it: in a box, as the workings wrote it.
fn boxed(result: &str) -> String {
    format!("\\boxed{{{result}}}")
}

/// A result as the plan's round is told it: at most [`QUOTED_RESULT_CHARS`], on one line.
fn quoted(boxed: &str) -> String {
    let line = boxed.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(QUOTED_RESULT_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

impl TurnRun<'_> {
    /// A draft round's reply: one more working. Once the drafts are decided, the working kept
    /// is the reasoning before the plan, and the next round asks for the plan.
    pub(super) fn take_draft(&mut self, c: Completion) {
        self.record_round(&c, RoundRole::Narration);
        let text = match c.finish_reason {
            FinishReason::Length => super::reply::before_loop(&c.text).to_string(),
            _ => c.text,
        };
        let kept = self.drafts.as_mut().and_then(|drafts| drafts.take(text));
        if let Some(kept) = kept {
            self.keep_reasoning(&kept);
        }
    }

    /// What the drafts tell a round. Before the plan: the result they agreed on, and that the
    /// steps are to check it; else their differing results, and that the steps are to find
    /// out which is right. Once every step is done: the agreed result, to keep unless a step's
    /// computation showed it wrong.
    pub(super) fn drafts_notice(&self) -> Option<String> {
        let drafts = self.drafts.as_ref()?;
        let record = self.record();
        let render = |text, name, value: &str| self.texts.render(text, &[(name, &value)]);
        let notice = match (record.has_plan(), drafts.agreed()) {
            (false, Some(agreed)) => render(Text::NoticeDraftsAgree, "result", &boxed(agreed)),
            (false, None) if !drafts.differing().is_empty() => {
                let results: Vec<String> = drafts.differing().iter().map(|r| boxed(r)).collect();
                render(Text::NoticeDraftsDiffer, "results", &results.join(", "))
            }
            (true, Some(agreed)) if record.all_done() => {
                render(Text::NoticeDraftsAnswer, "result", &boxed(agreed))
            }
            _ => return None,
        };
        Some(format!("{NOTICE_MARKER} {notice}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drafted(most: u32, texts: &[&str]) -> (Option<String>, usize, Vec<String>) {
        let (kept, asked, drafts) = drafts_of(most, texts);
        (kept, asked, drafts.differing().to_vec())
    }

    /// The drafts after `texts` (until decided): the working kept, how many were asked.
    fn drafts_of(most: u32, texts: &[&str]) -> (Option<String>, usize, Drafts) {
        let mut drafts = Drafts::at_most(most);
        for (i, text) in texts.iter().enumerate() {
            if let Some(kept) = drafts.take(text.to_string()) {
                return (Some(kept), i + 1, drafts);
            }
        }
        (None, texts.len(), drafts)
    }

    #[test]
    fn one_draft_is_the_first_working() {
        let (kept, asked, differing) = drafted(1, &[r"so \boxed{41}"]);
        assert_eq!(kept.as_deref(), Some(r"so \boxed{41}"));
        assert_eq!(asked, 1);
        assert!(differing.is_empty());
    }

    #[test]
    fn the_first_result_reached_twice_is_kept_as_its_first_working() {
        let (kept, asked, _) = drafted(3, &[r"\boxed{41}", r"a \boxed{42}", r"b \boxed{\$42.00}"]);
        assert_eq!(kept.as_deref(), Some(r"a \boxed{42}"));
        assert_eq!(asked, 3);
        // Two that agree at once: no third.
        let (kept, asked, drafts) = drafts_of(3, &[r"a \boxed{7}", r"b \boxed{7 apples}", "c"]);
        assert_eq!((kept.as_deref(), asked), (Some(r"a \boxed{7}"), 2));
        // The result agreed on is quoted as the first working that reached it wrote it.
        assert_eq!(drafts.agreed(), Some("7"));
    }

    #[test]
    fn no_result_is_agreed_without_two_workings_that_reach_it() {
        for texts in [
            &[r"\boxed{41}", r"\boxed{42}", r"\boxed{43}"][..],
            &["no box", r"\boxed{1}", r"\boxed{1}"][..],
            &[r"\boxed{5}"][..],
        ] {
            let (_, _, drafts) = drafts_of(texts.len() as u32, texts);
            assert_eq!(drafts.agreed(), None, "{texts:?}");
        }
    }

    #[test]
    fn a_first_working_without_a_result_ends_the_drafts() {
        let (kept, asked, differing) = drafted(3, &["no box here", r"\boxed{1}"]);
        assert_eq!((kept.as_deref(), asked), (Some("no box here"), 1));
        assert!(differing.is_empty());
    }

    #[test]
    fn workings_that_never_agree_keep_the_first_and_name_their_results() {
        let (kept, asked, differing) =
            drafted(3, &[r"\boxed{41}", r"\boxed{42}", "no box", r"\boxed{43}"]);
        assert_eq!((kept.as_deref(), asked), (Some(r"\boxed{41}"), 3));
        assert_eq!(differing, ["41", "42"]);
        // One result among the rest is nothing to decide between.
        let (_, asked, differing) = drafted(2, &[r"\boxed{41}", "no box"]);
        assert_eq!(asked, 2);
        assert!(differing.is_empty());
    }

    #[test]
    fn greedy_sampling_drafts_once() {
        let mut cfg = SolveConfig::default();
        assert_eq!(Drafts::new(&cfg).most, 3);
        cfg.temperature = 0.0;
        assert_eq!(Drafts::new(&cfg).most, 1);
    }

    #[test]
    fn a_long_result_is_quoted_short_on_one_line() {
        let long = format!("{}\n{}", "x".repeat(40), "y".repeat(40));
        let quoted = quoted(&long);
        assert_eq!(quoted.chars().count(), QUOTED_RESULT_CHARS + 1);
        assert!(quoted.ends_with('…') && !quoted.contains('\n'));
    }
}
