//! [`WebCite`]: a solve that checks a fact on the web — searches, reads a page, cites both —
//! for the web tools' end-to-end tests through the real binary.

use std::ops::ControlFlow;

use serde_json::json;

use crate::policy::Policy;
use crate::policy::moves::{
    call_once, call_with, finish_call_for, leading_number, plan_of, results_of, short, step_summary,
};
use crate::progress::PlanStep;
use crate::reply::Reply;
use crate::request::PolicyRequest;

const WEB_SEARCH: &str = "web_search";
const WEB_FETCH: &str = "web_fetch";

/// The goals of its two steps.
pub const WEB_CITE_GOALS: [&str; 2] = [
    "Search the web for the fact",
    "Read a result's page and state the fact",
];

/// The most pages it tries before giving up.
const MAX_FETCHES: usize = 3;

/// Plans two steps and works them on the web:
/// 1. `S1` calls `web_search {query: <the problem>}` (when offered), then finishes with every
///    result's number and URL, read from the result's head lines (`[n] title — url`).
/// 2. `S2` calls `web_fetch {url}` on those URLs in order until one is read (its result starts
///    with `[n]`; a refusal does not), at most three, then finishes with that number and the
///    page's first quoted line.
///
/// Then it answers citing both: "The search found it [1]; the page says: … [m]." Without the
/// tools it finishes the steps without work and answers without citations.
///
/// **Expected ending:** `answered`, every step done; the answer event's sources are the first
/// search result and the page it read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WebCite;

/// `(n, url)` of every `[n] title — url` head line of a search result.
pub fn result_urls(content: &str) -> Vec<(u32, String)> {
    content
        .lines()
        .filter_map(|line| {
            let n = leading_number(line.trim())?;
            let url = line.rsplit(" — ").next()?.trim();
            is_url(url).then(|| (n, url.to_string()))
        })
        .collect()
}

fn is_url(word: &str) -> bool {
    word.starts_with("http://") || word.starts_with("https://")
}

/// The first quoted line of a result (`> …`), unquoted.
fn first_quoted(content: &str) -> String {
    content
        .lines()
        .filter_map(|l| l.trim().strip_prefix('>'))
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default()
        .to_string()
}

impl WebCite {
    fn plan(&self, req: &PolicyRequest) -> Reply {
        plan_of(
            format!(
                "Check it on the web and cite it: {}",
                short(&req.problem(), 60)
            ),
            &WEB_CITE_GOALS,
        )
    }

    /// `S1`: search, then record every result's number and URL.
    fn search_move(&self, req: &PolicyRequest, step: &PlanStep) -> Reply {
        let query = || json!({"query": req.problem()});
        let results = match call_once(req, WEB_SEARCH, query, "Searching the web.") {
            ControlFlow::Continue(results) => results,
            ControlFlow::Break(call) => return call,
        };
        let found: Vec<String> = results
            .iter()
            .flat_map(|r| result_urls(&r.content))
            .map(|(n, url)| format!("[{n}] {url}"))
            .collect();
        let summary = if found.is_empty() {
            "no results".to_string()
        } else {
            format!("results: {}", found.join(" ; "))
        };
        finish_call_for(&step.id, &summary)
    }

    /// `S2`: read the results' pages in order until one is read.
    fn read_move(&self, req: &PolicyRequest, step: &PlanStep, urls: &[String]) -> Reply {
        let attempts = results_of(req, WEB_FETCH);
        if let Some(read) = attempts.iter().find(|r| r.content.starts_with('[')) {
            let n = leading_number(&read.content).unwrap_or_default();
            let line = first_quoted(&read.content);
            return finish_call_for(&step.id, &format!("read [{n}]: {}", short(&line, 120)));
        }
        let next = urls
            .get(attempts.len())
            .filter(|_| attempts.len() < MAX_FETCHES);
        match next {
            Some(url) if req.offers(WEB_FETCH) => {
                call_with(WEB_FETCH, json!({"url": url}), "Reading the page.")
            }
            _ => finish_call_for(&step.id, "could not read any page"),
        }
    }

    /// The answer from the summaries: it cites what they numbered.
    fn answer(&self, req: &PolicyRequest) -> Reply {
        let plan = req.plan();
        let (found, read) = (
            step_summary(plan.as_ref(), 0),
            step_summary(plan.as_ref(), 1),
        );
        let mut text = match result_urls_in_summary(&found).first() {
            Some((n, _)) => format!("The search found it [{n}]."),
            None => "The web had nothing on it; from first principles, 42.".to_string(),
        };
        if let Some((n, line)) = read
            .strip_prefix("read [")
            .and_then(|rest| rest.split_once("]: "))
        {
            text.push_str(&format!(" The page says: {line} [{n}]."));
        }
        Reply::text(format!("**Answer:** {text}"))
    }
}

/// The `[n] url` pairs an `S1` summary carries.
fn result_urls_in_summary(summary: &str) -> Vec<(u32, String)> {
    summary
        .trim_start_matches("results: ")
        .split(" ; ")
        .filter_map(|pair| {
            let (n, url) = pair.trim().split_once(' ')?;
            let n = leading_number(n)?;
            is_url(url).then(|| (n, url.to_string()))
        })
        .collect()
}

impl Policy for WebCite {
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
        match plan.steps.iter().position(|s| s.id == step.id) {
            Some(0) => self.search_move(req, &step),
            _ => {
                let urls: Vec<String> = plan
                    .steps
                    .first()
                    .and_then(|s| s.summary.as_deref())
                    .map(result_urls_in_summary)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(_, url)| url)
                    .collect();
                self.read_move(req, &step, &urls)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_results_give_numbers_and_urls() {
        let content = "[1] Squeeze theorem — http://93.184.216.34/squeeze\n> A sequence…\n\n\
                       [2] Limits — a history — https://example.org/a\n> text\n[3] no url here\n";
        assert_eq!(
            result_urls(content),
            vec![
                (1, "http://93.184.216.34/squeeze".to_string()),
                (2, "https://example.org/a".to_string())
            ]
        );
        let summary = "results: [1] http://a.example/x ; [2] https://b.example/y";
        assert_eq!(
            result_urls_in_summary(summary),
            vec![
                (1, "http://a.example/x".to_string()),
                (2, "https://b.example/y".to_string())
            ]
        );
        assert!(result_urls_in_summary("no results").is_empty());
        assert_eq!(
            first_quoted("[3] t — u\n>\n> The limit is 1.\n"),
            "The limit is 1."
        );
    }
}
