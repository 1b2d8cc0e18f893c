//! Runs problems × modes with bounded concurrency. Each finished (problem, mode) is graded and
//! appended to `results.jsonl` at once (synced), so a killed or cancelled run resumes without
//! redoing what finished; an endpoint failure is that problem's record, and only
//! [`ENDPOINT_DOWN_AFTER`] of them in a row stop the run.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::grade::{Grader, Judged};
use crate::mode::{Mode, SolveError};
use crate::problem::Problem;
use crate::record::{
    LogError, Prices, RESULTS_FILE, RecordError, ResultRecord, ResultsLog, latest, read_results,
};

/// The run's description beside its results.
pub const MANIFEST_FILE: &str = "run.json";

/// This many pairs in a row failing at the endpoint stop the run: the endpoint is down, and
/// going on would only record every remaining pair as an error (a llama.cpp server that
/// crashed six minutes into a three-hour run had its 58 remaining pairs recorded so, a few
/// seconds each). A resume with `--retry-errors` runs them once it answers again.
pub const ENDPOINT_DOWN_AFTER: usize = 5;

#[derive(Debug, Clone)]
pub struct RunConfig {
    pub out_dir: PathBuf,
    /// Problems in flight at once (at least 1).
    pub concurrency: usize,
    /// Continue a run in `out_dir`: (problem, mode) pairs with a result are not run again.
    pub resume: bool,
    /// With `resume`: run again the pairs whose result is an endpoint error.
    pub retry_errors: bool,
    pub prices: Option<Prices>,
    /// What the run is of (the set's file name), for the manifest and reports.
    pub label: String,
    /// The model the modes ran on, as its client names it (empty: not known).
    pub model: String,
}

impl RunConfig {
    pub fn new(out_dir: impl Into<PathBuf>) -> Self {
        RunConfig {
            out_dir: out_dir.into(),
            concurrency: 4,
            resume: false,
            retry_errors: false,
            prices: None,
            label: String::new(),
            model: String::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(
        "{} already holds results of a run: pass --resume to continue it, or choose another directory",
        .0.display()
    )]
    Exists(PathBuf),
    #[error("no modes to run")]
    NoModes,
    #[error("mode {0:?} is given twice")]
    DuplicateMode(String),
    #[error("cannot prepare {}: {source}", path.display())]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Log(#[from] LogError),
}

/// A mode's running score, for a progress bar.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModeTally {
    pub mode: String,
    pub done: usize,
    pub correct: usize,
    pub errors: usize,
}

impl ModeTally {
    pub fn accuracy(&self) -> f64 {
        if self.done == 0 {
            0.0
        } else {
            self.correct as f64 / self.done as f64
        }
    }
}

/// What a progress callback sees after each finished (problem, mode).
#[derive(Debug)]
pub struct Progress<'a> {
    /// Pairs finished, including those a resumed run found done.
    pub done: usize,
    pub total: usize,
    /// Per mode, over everything finished so far (resumed results included).
    pub tallies: &'a [ModeTally],
    pub last: &'a ResultRecord,
}

pub type ProgressFn = Arc<dyn Fn(&Progress<'_>) + Send + Sync>;

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub total: usize,
    /// Pairs run and recorded now.
    pub ran: usize,
    /// Pairs a resumed run found done.
    pub skipped: usize,
    /// Pairs not recorded because the run was cancelled or stopped (a resume runs them).
    pub unfinished: usize,
    pub cancelled: bool,
    /// The run stopped after [`ENDPOINT_DOWN_AFTER`] pairs in a row failed at the endpoint:
    /// the last one's error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_down: Option<RecordError>,
    pub tallies: Vec<ModeTally>,
    pub results: PathBuf,
}

/// The manifest written beside the results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub label: String,
    /// The model the run was of, so two runs' reports say what they compare.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
    pub modes: Vec<String>,
    pub problems: usize,
    pub concurrency: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prices: Option<Prices>,
    pub symbolic_grading: bool,
}

pub struct Runner {
    config: RunConfig,
    grader: Grader,
    progress: Option<ProgressFn>,
}

impl Runner {
    pub fn new(config: RunConfig, grader: Grader) -> Self {
        Runner {
            config,
            grader,
            progress: None,
        }
    }

    pub fn on_progress(mut self, progress: ProgressFn) -> Self {
        self.progress = Some(progress);
        self
    }

    /// Run every problem under every mode (problem by problem, so pairs finish together).
    /// Cancelling `cancel` stops new work; what is in flight is dropped unrecorded.
    pub async fn run(
        &self,
        problems: &[Problem],
        modes: &[Mode],
        cancel: &CancellationToken,
    ) -> Result<RunSummary, RunError> {
        check_modes(modes)?;
        let results = self.prepare_dir()?;
        let previous = if results.exists() {
            latest(read_results(&results)?)
        } else {
            Vec::new()
        };
        let mut log = ResultsLog::open(&results)?;
        self.write_manifest(problems.len(), modes)?;

        let wanted: HashSet<(&str, &str)> = problems
            .iter()
            .flat_map(|p| modes.iter().map(move |m| (p.id.as_str(), m.name())))
            .collect();
        let finished: HashSet<(String, String)> = previous
            .iter()
            .filter(|r| !(self.config.retry_errors && r.error.is_some()))
            .filter(|r| wanted.contains(&r.key()))
            .map(|r| (r.id.clone(), r.mode.clone()))
            .collect();
        let mut tallies: BTreeMap<String, ModeTally> = modes
            .iter()
            .map(|m| {
                let tally = ModeTally {
                    mode: m.name().to_string(),
                    ..ModeTally::default()
                };
                (m.name().to_string(), tally)
            })
            .collect();
        for r in previous
            .iter()
            .filter(|r| finished.contains(&(r.id.clone(), r.mode.clone())))
        {
            count(&mut tallies, r);
        }

        // Indices, not references: a closure over borrowed items makes the run's future
        // one the compiler cannot prove `Send` (higher-ranked lifetimes), and a server must
        // spawn it.
        let jobs: Vec<(usize, usize)> = (0..problems.len())
            .flat_map(|p| (0..modes.len()).map(move |m| (p, m)))
            .filter(|&(p, m)| {
                !finished.contains(&(problems[p].id.clone(), modes[m].name().to_string()))
            })
            .collect();
        let total = problems.len() * modes.len();
        let skipped = total - jobs.len();
        let mut done = skipped;
        let mut ran = 0;
        let mut unfinished = 0;
        let mut failing_in_a_row = 0;
        let mut endpoint_down = None;
        let prices = self.config.prices;
        let grader = &self.grader;
        let mut stream = futures::stream::iter(jobs)
            .map(|(p, m)| -> BoxFuture<'_, Option<ResultRecord>> {
                Box::pin(attempt(&problems[p], &modes[m], grader, prices, cancel))
            })
            .buffer_unordered(self.config.concurrency.max(1));
        while let Some(outcome) = stream.next().await {
            let Some(record) = outcome else {
                unfinished += 1;
                continue;
            };
            log.append(&record)?;
            count(&mut tallies, &record);
            ran += 1;
            done += 1;
            failing_in_a_row = match &record.error {
                Some(_) => failing_in_a_row + 1,
                None => 0,
            };
            if let Some(progress) = &self.progress {
                let list: Vec<ModeTally> = tallies.values().cloned().collect();
                progress(&Progress {
                    done,
                    total,
                    tallies: &list,
                    last: &record,
                });
            }
            if failing_in_a_row >= ENDPOINT_DOWN_AFTER {
                // What is in flight is dropped unrecorded, with the pairs not started.
                endpoint_down = record.error;
                unfinished = total - done;
                break;
            }
        }
        Ok(RunSummary {
            total,
            ran,
            skipped,
            unfinished,
            cancelled: cancel.is_cancelled(),
            endpoint_down,
            tallies: tallies.into_values().collect(),
            results,
        })
    }

    fn prepare_dir(&self) -> Result<PathBuf, RunError> {
        let dir = &self.config.out_dir;
        std::fs::create_dir_all(dir).map_err(|source| RunError::Dir {
            path: dir.clone(),
            source,
        })?;
        let results = dir.join(RESULTS_FILE);
        let has_results = std::fs::metadata(&results).is_ok_and(|m| m.len() > 0);
        if has_results && !self.config.resume {
            return Err(RunError::Exists(dir.clone()));
        }
        Ok(results)
    }

    /// The manifest names every mode the directory has seen (a resume may add one).
    fn write_manifest(&self, problems: usize, modes: &[Mode]) -> Result<(), RunError> {
        let path = self.config.out_dir.join(MANIFEST_FILE);
        let mut names: Vec<String> = read_manifest(&self.config.out_dir)
            .map(|m| m.modes)
            .unwrap_or_default();
        for m in modes {
            if !names.iter().any(|n| n == m.name()) {
                names.push(m.name().to_string());
            }
        }
        let manifest = Manifest {
            label: self.config.label.clone(),
            model: self.config.model.clone(),
            modes: names,
            problems,
            concurrency: self.config.concurrency,
            prices: self.config.prices,
            symbolic_grading: self.grader.has_symbolic(),
        };
        let text =
            serde_json::to_string_pretty(&manifest).map_err(|e| LogError::Encode(e.to_string()))?;
        std::fs::write(&path, text).map_err(|source| RunError::Dir { path, source })
    }
}

/// A run directory's manifest, when it has a readable one.
pub fn read_manifest(dir: &Path) -> Option<Manifest> {
    let text = std::fs::read_to_string(dir.join(MANIFEST_FILE)).ok()?;
    serde_json::from_str(&text).ok()
}

fn check_modes(modes: &[Mode]) -> Result<(), RunError> {
    if modes.is_empty() {
        return Err(RunError::NoModes);
    }
    let mut seen = HashSet::new();
    for m in modes {
        if !seen.insert(m.name()) {
            return Err(RunError::DuplicateMode(m.name().to_string()));
        }
    }
    Ok(())
}

fn count(tallies: &mut BTreeMap<String, ModeTally>, record: &ResultRecord) {
    let tally = tallies
        .entry(record.mode.clone())
        .or_insert_with(|| ModeTally {
            mode: record.mode.clone(),
            ..ModeTally::default()
        });
    tally.done += 1;
    tally.correct += usize::from(record.correct);
    tally.errors += usize::from(record.error.is_some());
}

/// One problem under one mode, graded; `None` when cancelled before it finished.
async fn attempt(
    problem: &Problem,
    mode: &Mode,
    grader: &Grader,
    prices: Option<Prices>,
    cancel: &CancellationToken,
) -> Option<ResultRecord> {
    if cancel.is_cancelled() {
        return None;
    }
    let started = Instant::now();
    let outcome = mode.solver().solve(problem, cancel).await;
    let wall_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let mut record = ResultRecord {
        id: problem.id.clone(),
        mode: mode.name().to_string(),
        expected: problem.expected.clone(),
        answer: None,
        extraction: None,
        correct: false,
        judged: Judged::Error,
        note: None,
        rounds: 0,
        prompt_tokens: 0,
        completion_tokens: 0,
        cost: None,
        wall_ms,
        stop: None,
        error: None,
        level: problem.level.clone(),
        subject: problem.subject.clone(),
        language: problem.language,
        turn_id: None,
        spine: None,
        output: None,
    };
    match outcome {
        Err(SolveError::Cancelled) => return None,
        Err(SolveError::Failed { kind, message }) => {
            record.error = Some(RecordError { kind, message });
        }
        Ok(attempt) => {
            let graded = grader
                .grade(&problem.expected, &attempt.output, attempt.style)
                .await;
            record.answer = graded.answer;
            record.extraction = graded.extraction;
            record.correct = graded.verdict.correct;
            record.judged = graded.verdict.judged;
            record.note = graded.verdict.note;
            record.rounds = attempt.rounds;
            record.prompt_tokens = attempt.usage.prompt_tokens;
            record.completion_tokens = attempt.usage.completion_tokens;
            record.cost = prices.map(|p| p.cost(record.prompt_tokens, record.completion_tokens));
            record.stop = Some(attempt.stop);
            record.turn_id = attempt.turn_id;
            record.spine = attempt.spine;
            record.output = Some(attempt.output);
        }
    }
    Some(record)
}
