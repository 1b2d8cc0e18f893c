//! Problem sets from JSONL: each record's layout detected on its own (GSM8K, MATH, the
//! Qwen2.5-Math evaluation sets, plain `{id, question, answer}`), a record that fits none named
//! with its file, line and keys; deterministic selection (`limit`, `sample` with a seed).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::grade::extract::last_boxed;
use crate::problem::{Layout, Problem, detect_language};
use deepsolve_core::Language;

/// The layouts a record may have, as an error lists them.
pub const LAYOUTS_EXPECTED: &str = "GSM8K {question, answer: \"… #### N\"}; MATH {problem, solution with \\boxed{}, answer?, level?, type?}; Qwen2.5-Math {question|problem|input, gt|golden|final_answer|choice_answer|label|answer|target, idx?}; plain {id, question, answer}";

/// The largest problem file read (a set is a few MiB at most).
const MAX_FILE_BYTES: u64 = 256 << 20;

#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is {size} bytes; the limit for a problem set is {MAX_FILE_BYTES} bytes", path.display())]
    TooLarge { path: PathBuf, size: u64 },
    #[error("{}:{line}: not a JSON object: {message}", path.display())]
    Json {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{}:{line}: the record fits no known layout ({why}); keys seen: [{}]; layouts expected: {LAYOUTS_EXPECTED}", path.display(), keys.join(", "))]
    Unrecognised {
        path: PathBuf,
        line: usize,
        keys: Vec<String>,
        why: String,
    },
    #[error("{}:{line}: id {id:?} was already used on line {first_line}; ids must be unique (results are kept per id)", path.display())]
    DuplicateId {
        path: PathBuf,
        line: usize,
        id: String,
        first_line: usize,
    },
    #[error("{} holds no problems", path.display())]
    Empty { path: PathBuf },
}

/// Read a JSONL problem set. Blank lines are skipped; every other line must be one record of
/// a known layout.
pub fn load(path: &Path) -> Result<Vec<Problem>, DataError> {
    let size = std::fs::metadata(path)
        .map_err(|source| DataError::Read {
            path: path.to_path_buf(),
            source,
        })?
        .len();
    if size > MAX_FILE_BYTES {
        return Err(DataError::TooLarge {
            path: path.to_path_buf(),
            size,
        });
    }
    let text = std::fs::read_to_string(path).map_err(|source| DataError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, &text)
}

/// [`load`] over text already read (`path` names it in errors).
pub fn parse(path: &Path, text: &str) -> Result<Vec<Problem>, DataError> {
    let mut problems = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let raw = raw.trim().trim_start_matches('\u{feff}');
        if raw.is_empty() {
            continue;
        }
        let record: Map<String, Value> = match serde_json::from_str::<Value>(raw) {
            Ok(Value::Object(map)) => map,
            Ok(other) => {
                return Err(DataError::Json {
                    path: path.to_path_buf(),
                    line,
                    message: format!("found a JSON {}", json_kind(&other)),
                });
            }
            Err(e) => {
                return Err(DataError::Json {
                    path: path.to_path_buf(),
                    line,
                    message: e.to_string(),
                });
            }
        };
        let problem = read_record(&record, line).map_err(|why| DataError::Unrecognised {
            path: path.to_path_buf(),
            line,
            keys: record.keys().cloned().collect(),
            why,
        })?;
        if let Some(&first_line) = seen.get(&problem.id) {
            return Err(DataError::DuplicateId {
                path: path.to_path_buf(),
                line,
                id: problem.id,
                first_line,
            });
        }
        seen.insert(problem.id.clone(), line);
        problems.push(problem);
    }
    if problems.is_empty() {
        return Err(DataError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(problems)
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// One record as a problem, or why it fits no layout.
fn read_record(r: &Map<String, Value>, line: usize) -> Result<Problem, String> {
    let (layout, question, expected) = if let Some(found) = gsm8k(r) {
        found
    } else if let Some(found) = math(r)? {
        found
    } else if let Some(found) = plain(r) {
        found
    } else if let Some(found) = qwen(r)? {
        found
    } else {
        return Err(missing_parts(r));
    };
    if question.trim().is_empty() {
        return Err("its question is empty".into());
    }
    if expected.trim().is_empty() {
        return Err("its reference answer is empty".into());
    }
    let language = declared_language(r).unwrap_or_else(|| detect_language(&question));
    Ok(Problem {
        id: record_id(r).unwrap_or_else(|| format!("line-{line}")),
        question,
        expected: expected.trim().to_string(),
        language,
        level: level(r),
        subject: first_text(r, &["subject", "type", "subfield", "data_topic"]),
        layout,
    })
}

type Found = (Layout, String, String);

fn gsm8k(r: &Map<String, Value>) -> Option<Found> {
    let question = text(r, "question")?;
    let answer = text(r, "answer")?;
    let (_, last) = answer.rsplit_once("####")?;
    Some((Layout::Gsm8k, question, last.trim().to_string()))
}

fn math(r: &Map<String, Value>) -> Result<Option<Found>, String> {
    let (Some(problem), Some(solution)) = (text(r, "problem"), text(r, "solution")) else {
        return Ok(None);
    };
    if let Some(answer) = scalar(r, "answer") {
        return Ok(Some((Layout::Math, problem, answer)));
    }
    match last_boxed(&solution) {
        Some(boxed) => Ok(Some((Layout::Math, problem, boxed))),
        None => Err("a MATH record without `answer` whose solution has no \\boxed{}".into()),
    }
}

const PLAIN_KEYS: [&str; 6] = ["id", "question", "answer", "level", "subject", "language"];

fn plain(r: &Map<String, Value>) -> Option<Found> {
    if !r.keys().all(|k| PLAIN_KEYS.contains(&k.as_str())) {
        return None;
    }
    Some((Layout::Plain, text(r, "question")?, scalar(r, "answer")?))
}

fn qwen(r: &Map<String, Value>) -> Result<Option<Found>, String> {
    let Some(mut question) = first_text(r, &["question", "problem", "input", "content"]) else {
        return Ok(None);
    };
    if let Some(body) = text(r, "body").or_else(|| text(r, "Body")) {
        question = format!("{} {question}", body.trim());
    }
    if let Some(options) = options_text(r.get("options")) {
        question = format!("{question}\n{options}");
    }
    let reference = if let Some(list) = r.get("final_answer").and_then(Value::as_array) {
        // OlympiadBench: a list of answers (several when `is_multiple_answer`).
        let parts: Vec<String> = list.iter().filter_map(value_text).collect();
        Some(
            parts
                .iter()
                .map(|p| p.trim().trim_matches('$').to_string())
                .collect::<Vec<_>>()
                .join(", "),
        )
    } else {
        first_scalar(
            r,
            &[
                "gt",
                "golden",
                "final_answer",
                "choice_answer",
                "label",
                "answer",
                "target",
                "Answer",
            ],
        )
    };
    match reference {
        Some(reference) => Ok(Some((Layout::Qwen, question, reference))),
        None => Err("a question without a reference answer".into()),
    }
}

/// Which parts a record lacks, for the error.
fn missing_parts(r: &Map<String, Value>) -> String {
    let has_question = ["question", "problem", "input", "content"]
        .iter()
        .any(|k| r.contains_key(*k));
    if has_question {
        "no reference answer".into()
    } else {
        "no question".into()
    }
}

/// The record's id: `id`, `idx`, `unique_id`, `ID` (strings or integers).
fn record_id(r: &Map<String, Value>) -> Option<String> {
    first_scalar(r, &["id", "idx", "unique_id", "ID"]).filter(|s| !s.trim().is_empty())
}

fn level(r: &Map<String, Value>) -> Option<String> {
    if let Some(level) = scalar(r, "level") {
        let level = level.trim();
        // MATH writes "Level 3"; keep the number alone so rows sort.
        let level = level.strip_prefix("Level ").unwrap_or(level);
        return Some(level.to_string());
    }
    scalar(r, "grade").map(|g| format!("grade {g}"))
}

fn declared_language(r: &Map<String, Value>) -> Option<Language> {
    first_text(r, &["language", "lang"]).and_then(|l| Language::parse(&l))
}

/// Multiple-choice options as lines `A. …` (a map or a list).
fn options_text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::Object(map) if !map.is_empty() => Some(
            map.iter()
                .filter_map(|(k, v)| value_text(v).map(|v| format!("{k}. {v}")))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        Value::Array(list) if !list.is_empty() => Some(
            list.iter()
                .filter_map(value_text)
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        _ => None,
    }
}

fn text(r: &Map<String, Value>, key: &str) -> Option<String> {
    r.get(key).and_then(Value::as_str).map(str::to_string)
}

fn first_text(r: &Map<String, Value>, keys: &[&str]) -> Option<String> {
    keys.iter()
        .filter_map(|k| text(r, k))
        .find(|s| !s.trim().is_empty())
}

/// A string, or a number or boolean as written.
fn value_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(number_text(n)),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// `27.0` reads as `27`: float answers in the sets are integers written by Python.
fn number_text(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
        _ => n.to_string(),
    }
}

fn scalar(r: &Map<String, Value>, key: &str) -> Option<String> {
    r.get(key)
        .and_then(value_text)
        .filter(|s| !s.trim().is_empty())
}

fn first_scalar(r: &Map<String, Value>, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| scalar(r, k))
}

/// Which problems a run takes: a deterministic sample (by seed), then the first `limit`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Selection {
    pub limit: Option<usize>,
    /// `(n, seed)`: `n` problems chosen by a hash of (seed, id), kept in file order. The same
    /// seed picks the same problems on every machine and build.
    pub sample: Option<(usize, u64)>,
}

pub fn select(problems: Vec<Problem>, selection: Selection) -> Vec<Problem> {
    let mut chosen = match selection.sample {
        Some((n, seed)) if n < problems.len() => {
            let mut ranked: Vec<(u64, usize)> = problems
                .iter()
                .enumerate()
                .map(|(i, p)| (mix(seed, &p.id), i))
                .collect();
            ranked.sort_unstable();
            let mut keep: Vec<usize> = ranked.into_iter().take(n).map(|(_, i)| i).collect();
            keep.sort_unstable();
            let mut slots: Vec<Option<Problem>> = problems.into_iter().map(Some).collect();
            keep.into_iter()
                .filter_map(|i| slots.get_mut(i).and_then(Option::take))
                .collect()
        }
        _ => problems,
    };
    if let Some(limit) = selection.limit {
        chosen.truncate(limit);
    }
    chosen
}

/// FNV-1a over the id, then a splitmix64 finaliser with the seed: stable, well spread.
fn mix(seed: u64, id: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = h ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
