//! Shared by the tests: problems, a fake deepsolve solver, a scripted plain model.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use deepsolve_core::{AnswerSource, Language, Usage};
use deepsolve_eval::{AnswerStyle, Attempt, Layout, Problem, SolveError, Solver, SpineRecord};
use deepsolve_testkit::policy::FnPolicy;
use deepsolve_testkit::{Reply, ScriptedModel};
use tokio_util::sync::CancellationToken;

pub(crate) fn problem(id: &str, question: &str, expected: &str) -> Problem {
    Problem {
        id: id.into(),
        question: question.into(),
        expected: expected.into(),
        language: deepsolve_eval::detect_language(question),
        level: None,
        subject: None,
        layout: Layout::Plain,
    }
}

/// `n` problems `p1…pn` whose answer is their number times 10.
pub(crate) fn numbered(n: usize) -> Vec<Problem> {
    (1..=n)
        .map(|i| {
            problem(
                &format!("p{i}"),
                &format!("What is {i} times 10?"),
                &format!("{}", i * 10),
            )
        })
        .collect()
}

/// The deepsolve mode as the integrator will supply it, faked: a result-first answer per
/// problem, wrong for the ids in `wrong`, failing for those in `fail`; it counts its calls
/// and the most calls in flight at once.
#[derive(Default)]
pub(crate) struct FakeSolver {
    pub wrong: Vec<String>,
    pub fail: Vec<String>,
    pub delay: Option<Duration>,
    pub calls: AtomicUsize,
    pub in_flight: AtomicUsize,
    pub max_in_flight: AtomicUsize,
}

impl FakeSolver {
    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Solver for FakeSolver {
    async fn solve(
        &self,
        problem: &Problem,
        cancel: &CancellationToken,
    ) -> Result<Attempt, SolveError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let outcome = async {
            if let Some(delay) = self.delay {
                tokio::select! {
                    () = cancel.cancelled() => return Err(SolveError::Cancelled),
                    () = tokio::time::sleep(delay) => {}
                }
            }
            if self.fail.contains(&problem.id) {
                return Err(SolveError::Failed {
                    kind: "server".into(),
                    message: "server error 502 after 4 attempts".into(),
                });
            }
            let answer = if self.wrong.contains(&problem.id) {
                "1".to_string()
            } else {
                problem.expected.clone()
            };
            Ok(Attempt {
                output: format!("**{answer}**\n\nWe worked it out in three steps."),
                style: AnswerStyle::ResultFirst,
                rounds: 5,
                usage: Usage {
                    prompt_tokens: 3000,
                    completion_tokens: 400,
                    estimated: false,
                    cached_tokens: None,
                },
                stop: "answered".into(),
                turn_id: Some(format!("turn-{}", problem.id)),
                // p3's turn left a step open; the rest held the spine to the end.
                spine: Some(SpineRecord {
                    steps: 2,
                    finished: if problem.id == "p3" { 1 } else { 2 },
                    answer_source: Some(AnswerSource::Model),
                }),
            })
        }
        .await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        outcome
    }
}

/// A plain model answering each question (by its text) with a boxed answer, or with an
/// unboxed ramble when the question is not in `answers`.
pub(crate) fn plain_model(answers: HashMap<String, String>) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new(FnPolicy(
        move |req: &deepsolve_testkit::PolicyRequest| {
            let question = req.last_user_text().to_string();
            match answers.get(&question) {
                Some(a) => Reply::text(format!(
                    "Step 1: think.\nStep 2: compute.\nSo the answer is \\boxed{{{a}}}."
                ))
                .map_turn(|t| t.with_usage(Some((120, 80)))),
                None => Reply::text("I am not sure."),
            }
        },
    )))
}

pub(crate) fn answers_for(problems: &[Problem], wrong: &[&str]) -> HashMap<String, String> {
    problems
        .iter()
        .map(|p| {
            let a = if wrong.contains(&p.id.as_str()) {
                "0".to_string()
            } else {
                p.expected.clone()
            };
            (p.question.clone(), a)
        })
        .collect()
}

pub(crate) fn language_of(problem: &Problem) -> Language {
    problem.language
}

/// Every result line of a run directory.
pub(crate) fn lines(dir: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
