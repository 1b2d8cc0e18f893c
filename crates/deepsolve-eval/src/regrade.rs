//! `deepsolve eval regrade DIR OUT`: a finished run's stored outputs graded again by this
//! build's grader, into a new run directory. The models are not asked again: what changes is
//! only how answers are read, and `eval report DIR OUT` shows what that changed.

use std::path::{Path, PathBuf};

use crate::grade::{AnswerStyle, Grader};
use crate::mode::answer_style;
use crate::record::{LogError, RESULTS_FILE, ResultRecord, ResultsLog, read_results};
use crate::runner::{MANIFEST_FILE, read_manifest};

#[derive(Debug, thiserror::Error)]
pub enum RegradeError {
    #[error("{} holds no {RESULTS_FILE}: not a run directory", .0.display())]
    NoResults(PathBuf),
    #[error("{} already holds results: choose a new directory for the regraded run", .0.display())]
    Exists(PathBuf),
    #[error("cannot write {}: {source}", path.display())]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Log(#[from] LogError),
}

/// One record whose verdict the grader changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub id: String,
    pub mode: String,
    pub was_correct: bool,
    pub is_correct: bool,
    pub was_answer: Option<String>,
    pub is_answer: Option<String>,
}

/// What a regrade did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Regraded {
    /// Records with an output, graded again.
    pub graded: usize,
    /// Records copied as they were (the mode failed: nothing to grade).
    pub copied: usize,
    pub changes: Vec<Change>,
}

/// Grade every record of the run in `dir` again from its stored output, writing the run,
/// record for record and in the same order, to `out` (which must not hold results).
pub async fn regrade(dir: &Path, out: &Path, grader: &Grader) -> Result<Regraded, RegradeError> {
    let source = dir.join(RESULTS_FILE);
    if !source.is_file() {
        return Err(RegradeError::NoResults(dir.to_path_buf()));
    }
    let records = read_results(&source)?;
    let target = out.join(RESULTS_FILE);
    if std::fs::metadata(&target).is_ok_and(|m| m.len() > 0) {
        return Err(RegradeError::Exists(out.to_path_buf()));
    }
    let dir_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| RegradeError::Dir { path, source }
    };
    std::fs::create_dir_all(out).map_err(dir_error(out))?;
    if read_manifest(dir).is_some() {
        let manifest = out.join(MANIFEST_FILE);
        std::fs::copy(dir.join(MANIFEST_FILE), &manifest).map_err(dir_error(&manifest))?;
    }
    let mut log = ResultsLog::open(&target)?;
    let mut done = Regraded {
        graded: 0,
        copied: 0,
        changes: Vec::new(),
    };
    for record in records {
        let record = match record.output.as_deref() {
            Some(output) => {
                done.graded += 1;
                let again = graded_again(&record, output, grader).await;
                if again.correct != record.correct || again.answer != record.answer {
                    done.changes.push(Change {
                        id: record.id.clone(),
                        mode: record.mode.clone(),
                        was_correct: record.correct,
                        is_correct: again.correct,
                        was_answer: record.answer.clone(),
                        is_answer: again.answer.clone(),
                    });
                }
                again
            }
            None => {
                done.copied += 1;
                record
            }
        };
        log.append(&record)?;
    }
    Ok(done)
}

async fn graded_again(record: &ResultRecord, output: &str, grader: &Grader) -> ResultRecord {
    let graded = grader
        .grade(&record.expected, output, style_of(record))
        .await;
    ResultRecord {
        answer: graded.answer,
        extraction: graded.extraction,
        correct: graded.verdict.correct,
        judged: graded.verdict.judged,
        note: graded.verdict.note,
        ..record.clone()
    }
}

/// How the record's output was laid out when it was graded: a deepsolve turn's by where its
/// answer came from, anything else (plain) reasoned first.
fn style_of(record: &ResultRecord) -> AnswerStyle {
    match (&record.spine, record.turn_id.is_some()) {
        (Some(spine), _) => answer_style(spine.answer_source),
        (None, true) => answer_style(None),
        (None, false) => AnswerStyle::Reasoned,
    }
}
