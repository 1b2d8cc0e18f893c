//! One problem's result under one mode (a line of `results.jsonl`), and the append-only log
//! those lines go to: each line written whole and synced before the next, a torn last line
//! (a kill mid-write) cut off on the next open, the latest line per (problem, mode) winning.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use deepsolve_core::{AnswerSource, Language, TurnOutcome};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::grade::{Extraction, Judged};

/// The results file in a run's directory.
pub const RESULTS_FILE: &str = "results.jsonl";

/// Why a mode produced nothing to grade.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RecordError {
    pub kind: String,
    pub message: String,
}

/// A problem's result under one mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResultRecord {
    pub id: String,
    pub mode: String,
    pub expected: String,
    /// The final answer taken from the output (`None`: none found, or the mode failed).
    pub answer: Option<String>,
    /// Where in the output the answer was found.
    pub extraction: Option<Extraction>,
    pub correct: bool,
    /// How the verdict was reached.
    pub judged: Judged,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub rounds: u32,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// In the prices' currency, when prices are set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    pub wall_ms: u64,
    /// Why the mode stopped (a finish reason or a turn's stop reason).
    pub stop: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RecordError>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    pub language: Language,
    /// The stored turn (deepsolve mode), whose trace opens in the UI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// How the turn went along the spine (deepsolve mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spine: Option<SpineRecord>,
    /// The text that was graded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// How a deepsolve turn went along the spine: its plan's steps (the last plan, after any
/// replan), how many of them were finished, and where its answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SpineRecord {
    pub steps: u32,
    pub finished: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_source: Option<AnswerSource>,
}

impl SpineRecord {
    pub fn of(outcome: &TurnOutcome) -> SpineRecord {
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let steps = &outcome.solve.steps;
        SpineRecord {
            steps: count(steps.len()),
            finished: count(steps.iter().filter(|s| s.done).count()),
            answer_source: outcome.answer_source,
        }
    }

    /// The spine held to the end: a plan, every step of it finished, and an answer the model
    /// wrote (on its own, or asked once more under the ultimatum), not one assembled from the
    /// step summaries.
    pub fn engaged(&self) -> bool {
        self.steps > 0
            && self.finished == self.steps
            && matches!(
                self.answer_source,
                Some(AnswerSource::Model | AnswerSource::Forced)
            )
    }
}

impl ResultRecord {
    pub fn total_tokens(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }

    pub fn key(&self) -> (&str, &str) {
        (&self.id, &self.mode)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{line}: not a result record: {message}", path.display())]
    Corrupt {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("cannot encode a result: {0}")]
    Encode(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LogError + '_ {
    move |source| LogError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The append side of `results.jsonl`.
#[derive(Debug)]
pub struct ResultsLog {
    path: PathBuf,
    file: File,
}

impl ResultsLog {
    /// Open (or create) the log, cutting off a torn last line.
    pub fn open(path: &Path) -> Result<Self, LogError> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(io(path))?;
        let mut text = Vec::new();
        file.read_to_end(&mut text).map_err(io(path))?;
        if !text.is_empty() && !text.ends_with(b"\n") {
            let keep = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
            file.set_len(keep as u64).map_err(io(path))?;
            file.seek(SeekFrom::End(0)).map_err(io(path))?;
            file.sync_all().map_err(io(path))?;
        }
        Ok(ResultsLog {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Append one record as one line and sync it to disk before returning.
    pub fn append(&mut self, record: &ResultRecord) -> Result<(), LogError> {
        let mut line = serde_json::to_vec(record).map_err(|e| LogError::Encode(e.to_string()))?;
        line.push(b'\n');
        self.file.write_all(&line).map_err(io(&self.path))?;
        self.file.sync_data().map_err(io(&self.path))
    }
}

/// Every record of a results file, in file order (a torn last line is ignored).
pub fn read_results(path: &Path) -> Result<Vec<ResultRecord>, LogError> {
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    let complete = match text.rfind('\n') {
        Some(i) => &text[..i],
        None => "",
    };
    let mut out = Vec::new();
    for (index, line) in complete.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let record = serde_json::from_str(line).map_err(|e| LogError::Corrupt {
            path: path.to_path_buf(),
            line: index + 1,
            message: e.to_string(),
        })?;
        out.push(record);
    }
    Ok(out)
}

/// The latest record of each (problem, mode), in the order pairs first appeared.
pub fn latest(records: Vec<ResultRecord>) -> Vec<ResultRecord> {
    let mut at: HashMap<(String, String), usize> = HashMap::new();
    let mut out: Vec<ResultRecord> = Vec::new();
    for record in records {
        let key = (record.id.clone(), record.mode.clone());
        match at.get(&key) {
            Some(&i) => out[i] = record,
            None => {
                at.insert(key, out.len());
                out.push(record);
            }
        }
    }
    out
}

/// Prices per million tokens, for a run's cost column.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Prices {
    pub prompt_per_million: f64,
    pub completion_per_million: f64,
}

impl Prices {
    pub fn cost(&self, prompt_tokens: u64, completion_tokens: u64) -> f64 {
        (prompt_tokens as f64 * self.prompt_per_million
            + completion_tokens as f64 * self.completion_per_million)
            / 1e6
    }
}
