//! deepsolve-eval: how well a model solves problems, plainly and through deepsolve.
//!
//! - [`data`]: problem sets from JSONL in the common layouts (GSM8K, MATH, the Qwen2.5-Math
//!   evaluation sets, plain `{id, question, answer}`), detected per record; deterministic
//!   selection.
//! - [`grade`]: the final answer taken from an output and compared with the reference by the
//!   cheapest judge that can decide (numbers, LaTeX, constants evaluated in Rust, tuples,
//!   intervals, sets), sympy in the sandbox for the rest; every verdict says how.
//! - [`mode`]: `plain` (one completion over a `ChatModel`) and the [`Solver`] trait the
//!   caller implements for `deepsolve` (a recorded turn per problem).
//! - [`runner`]: problems × modes with bounded concurrency, each result appended and synced
//!   as it finishes, resumable, cancellable, with progress callbacks.
//! - [`regrade`]: a finished run's stored outputs graded again by this build's grader.
//! - [`engine_text`]: engine text in a graded output (a marker, a sentence of the engine's
//!   texts, a solve tool's name, a call written out), counted by the report.
//! - [`report`]: accuracy with Wilson intervals, paired McNemar tests, per-level and
//!   per-subject rows, the answers carrying engine text, plots; Markdown, JSON, CSV, SVG, PNG.

pub mod data;
pub mod engine_text;
pub mod grade;
pub mod mode;
pub mod problem;
pub mod record;
pub mod regrade;
pub mod report;
pub mod runner;
pub mod stats;

pub use data::{DataError, Selection, load, select};
pub use grade::{AnswerStyle, Extraction, Graded, Grader, Judged, Verdict};
pub use mode::{Attempt, Mode, PlainOptions, PlainSolver, SolveError, Solver};
pub use problem::{Layout, Problem, detect_language};
pub use record::{Prices, RESULTS_FILE, RecordError, ResultRecord, SpineRecord};
pub use regrade::{Change, RegradeError, Regraded, regrade};
pub use report::{Report, ReportFiles, compare, compare_into, report};
pub use runner::{
    ENDPOINT_DOWN_AFTER, ModeTally, Progress, ProgressFn, RunConfig, RunError, RunSummary, Runner,
};

/// The sets written for this project, shipped with the crate (`sets/`).
pub mod sets {
    /// 30+ GSM8K-style English word problems with integer answers.
    pub const GSM_STYLE_EN: &str = include_str!("../sets/gsm-style-en.jsonl");
    /// 30+ Chinese arithmetic word problems.
    pub const ZH_ARITH: &str = include_str!("../sets/zh-arith.jsonl");
    /// Every shipped set: (name, JSONL text).
    pub const SHIPPED: [(&str, &str); 2] = [("gsm-style-en", GSM_STYLE_EN), ("zh-arith", ZH_ARITH)];

    /// The shipped set of this name (with or without `.jsonl`).
    pub fn shipped(name: &str) -> Option<(&'static str, &'static str)> {
        let bare = name.strip_suffix(".jsonl").unwrap_or(name);
        SHIPPED.iter().copied().find(|(n, _)| *n == bare)
    }
}
