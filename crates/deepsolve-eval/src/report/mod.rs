//! Reports of a run (or two runs side by side): per mode accuracy with its 95 % Wilson
//! interval, rounds, tokens, time, cost, stop reasons, how often the spine held and which
//! answers carry engine text; paired comparisons between modes
//! (who got which problems only, an exact McNemar p-value); rows per level and subject; plots.
//! Written as Markdown, JSON, CSV (one row per problem and mode), SVG and PNG.

mod csv;
mod markdown;
mod plot;
#[cfg(feature = "png")]
mod png;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use deepsolve_core::AnswerSource;

use crate::engine_text;
use crate::record::{LogError, RESULTS_FILE, ResultRecord, SpineRecord, latest, read_results};
use crate::stats::{mcnemar_exact, wilson};

/// The report's directory inside a run's.
pub const REPORT_DIR: &str = "report";

/// One mode's numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModeSummary {
    pub mode: String,
    pub problems: usize,
    pub correct: usize,
    pub accuracy: f64,
    /// The 95 % Wilson interval of the accuracy.
    pub ci_low: f64,
    pub ci_high: f64,
    /// Problems whose mode failed (endpoint errors), counted as wrong.
    pub errors: usize,
    pub unparsed: usize,
    pub unverified: usize,
    pub mean_rounds: f64,
    pub mean_prompt_tokens: f64,
    pub mean_completion_tokens: f64,
    pub total_tokens: u64,
    pub mean_wall_ms: f64,
    pub median_wall_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    pub stops: BTreeMap<String, usize>,
    pub judged: BTreeMap<String, usize>,
    /// How often the spine held to the end; `None` for a mode that runs none (plain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engaged: Option<Engagement>,
    /// The problems whose graded output carries engine text ([`crate::engine_text`]), in
    /// the set's order.
    #[serde(default)]
    pub engine_text: Vec<String>,
}

/// The turns of a mode whose spine held to the end ([`SpineRecord::engaged`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Engagement {
    /// Turns with a spine recorded.
    pub turns: usize,
    pub engaged: usize,
    /// Of the engaged, those whose answer came when asked once more (the first reply was
    /// not an answer).
    pub asked_again: usize,
}

impl Engagement {
    fn of(list: &[&ResultRecord]) -> Option<Engagement> {
        let spines: Vec<&SpineRecord> = list.iter().filter_map(|r| r.spine.as_ref()).collect();
        if spines.is_empty() {
            return None;
        }
        let engaged: Vec<&&SpineRecord> = spines.iter().filter(|s| s.engaged()).collect();
        Some(Engagement {
            turns: spines.len(),
            engaged: engaged.len(),
            asked_again: (engaged.iter())
                .filter(|s| s.answer_source == Some(AnswerSource::Forced))
                .count(),
        })
    }
}

impl ModeSummary {
    pub fn mean_total_tokens(&self) -> f64 {
        self.mean_prompt_tokens + self.mean_completion_tokens
    }
}

/// Two modes on the problems both have results for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Paired {
    pub a: String,
    pub b: String,
    pub problems: usize,
    pub both_right: usize,
    pub both_wrong: usize,
    pub only_a: Vec<String>,
    pub only_b: Vec<String>,
    /// Exact McNemar (two-sided binomial on the discordant pairs).
    pub p_value: f64,
}

/// Accuracy of one mode within one level or subject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GroupRow {
    pub group: String,
    pub mode: String,
    pub problems: usize,
    pub correct: usize,
    pub accuracy: f64,
    pub ci_low: f64,
    pub ci_high: f64,
}

/// A run's numbers (or two runs' side by side): per mode, paired, per level and subject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Report {
    /// What the report is of (the run's label, or both runs').
    pub title: String,
    pub problems: usize,
    pub modes: Vec<ModeSummary>,
    pub paired: Vec<Paired>,
    pub by_level: Vec<GroupRow>,
    pub by_subject: Vec<GroupRow>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("{} has no {RESULTS_FILE}: is it a run's directory?", .0.display())]
    NoResults(PathBuf),
    #[error("{} holds no results yet", .0.display())]
    Empty(PathBuf),
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot encode the report: {0}")]
    Encode(String),
}

/// The files a report wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportFiles {
    pub dir: PathBuf,
    pub markdown: PathBuf,
    pub json: PathBuf,
    pub csv: PathBuf,
    pub svgs: Vec<PathBuf>,
    /// Empty when built without the `png` feature; a plot that could not be rasterised is
    /// named in `warnings`.
    pub pngs: Vec<PathBuf>,
    pub warnings: Vec<String>,
}

/// Summarise records (the latest per problem and mode).
pub fn build(title: &str, records: &[ResultRecord]) -> Report {
    let modes = mode_order(records);
    let summaries = modes
        .iter()
        .map(|m| summarise(m, records.iter().filter(|r| &r.mode == m)))
        .collect();
    let mut paired = Vec::new();
    for (i, a) in modes.iter().enumerate() {
        for b in modes.iter().skip(i + 1) {
            paired.push(pair(a, b, records));
        }
    }
    let problems: BTreeSet<&str> = records.iter().map(|r| r.id.as_str()).collect();
    Report {
        title: title.to_string(),
        problems: problems.len(),
        modes: summaries,
        paired,
        by_level: groups(&modes, records, |r| r.level.clone()),
        by_subject: groups(&modes, records, |r| r.subject.clone()),
    }
}

fn mode_order(records: &[ResultRecord]) -> Vec<String> {
    let mut modes: Vec<String> = Vec::new();
    for r in records {
        if !modes.contains(&r.mode) {
            modes.push(r.mode.clone());
        }
    }
    modes
}

fn summarise<'a>(mode: &str, records: impl Iterator<Item = &'a ResultRecord>) -> ModeSummary {
    let list: Vec<&ResultRecord> = records.collect();
    let n = list.len();
    let correct = list.iter().filter(|r| r.correct).count();
    let (ci_low, ci_high) = wilson(correct, n);
    let mean = |f: &dyn Fn(&ResultRecord) -> f64| {
        if n == 0 {
            0.0
        } else {
            list.iter().map(|r| f(r)).sum::<f64>() / n as f64
        }
    };
    let mut walls: Vec<u64> = list.iter().map(|r| r.wall_ms).collect();
    walls.sort_unstable();
    let mut stops = BTreeMap::new();
    let mut judged = BTreeMap::new();
    for r in &list {
        let stop = match (&r.error, &r.stop) {
            (Some(e), _) => format!("error: {}", e.kind),
            (None, Some(s)) => s.clone(),
            (None, None) => "unknown".into(),
        };
        *stops.entry(stop).or_insert(0) += 1;
        *judged.entry(r.judged.as_str().to_string()).or_insert(0) += 1;
    }
    let costs: Vec<f64> = list.iter().filter_map(|r| r.cost).collect();
    ModeSummary {
        mode: mode.to_string(),
        problems: n,
        correct,
        accuracy: if n == 0 {
            0.0
        } else {
            correct as f64 / n as f64
        },
        ci_low,
        ci_high,
        errors: list.iter().filter(|r| r.error.is_some()).count(),
        unparsed: count_judged(&list, crate::grade::Judged::Unparsed),
        unverified: count_judged(&list, crate::grade::Judged::Unverified),
        mean_rounds: mean(&|r| f64::from(r.rounds)),
        mean_prompt_tokens: mean(&|r| r.prompt_tokens as f64),
        mean_completion_tokens: mean(&|r| r.completion_tokens as f64),
        total_tokens: list.iter().map(|r| r.total_tokens()).sum(),
        mean_wall_ms: mean(&|r| r.wall_ms as f64),
        median_wall_ms: walls.get(walls.len() / 2).copied().unwrap_or(0),
        cost: (!costs.is_empty()).then(|| costs.iter().sum()),
        stops,
        judged,
        engaged: Engagement::of(&list),
        engine_text: (list.iter())
            .filter(|r| r.output.as_deref().and_then(engine_text::find).is_some())
            .map(|r| r.id.clone())
            .collect(),
    }
}

fn count_judged(list: &[&ResultRecord], judged: crate::grade::Judged) -> usize {
    list.iter().filter(|r| r.judged == judged).count()
}

fn pair(a: &str, b: &str, records: &[ResultRecord]) -> Paired {
    let rb: HashMap<&str, bool> = records
        .iter()
        .filter(|r| r.mode == b)
        .map(|r| (r.id.as_str(), r.correct))
        .collect();
    // In the records' order (the set's), not sorted by id.
    let ra = records
        .iter()
        .filter(|r| r.mode == a)
        .map(|r| (r.id.as_str(), r.correct));
    let mut p = Paired {
        a: a.to_string(),
        b: b.to_string(),
        problems: 0,
        both_right: 0,
        both_wrong: 0,
        only_a: Vec::new(),
        only_b: Vec::new(),
        p_value: 1.0,
    };
    for (id, right_a) in ra {
        let Some(&right_b) = rb.get(id) else {
            continue;
        };
        p.problems += 1;
        match (right_a, right_b) {
            (true, true) => p.both_right += 1,
            (false, false) => p.both_wrong += 1,
            (true, false) => p.only_a.push(id.to_string()),
            (false, true) => p.only_b.push(id.to_string()),
        }
    }
    p.p_value = mcnemar_exact(p.only_a.len(), p.only_b.len());
    p
}

fn groups(
    modes: &[String],
    records: &[ResultRecord],
    key: impl Fn(&ResultRecord) -> Option<String>,
) -> Vec<GroupRow> {
    let names: BTreeSet<String> = records.iter().filter_map(&key).collect();
    let mut rows = Vec::new();
    for group in names {
        for mode in modes {
            let list: Vec<&ResultRecord> = records
                .iter()
                .filter(|r| &r.mode == mode && key(r).as_deref() == Some(group.as_str()))
                .collect();
            if list.is_empty() {
                continue;
            }
            let correct = list.iter().filter(|r| r.correct).count();
            let (ci_low, ci_high) = wilson(correct, list.len());
            rows.push(GroupRow {
                group: group.clone(),
                mode: mode.clone(),
                problems: list.len(),
                correct,
                accuracy: correct as f64 / list.len() as f64,
                ci_low,
                ci_high,
            });
        }
    }
    rows
}

/// A run directory's records (the latest per problem and mode).
pub fn load_run(dir: &Path) -> Result<Vec<ResultRecord>, ReportError> {
    let path = dir.join(RESULTS_FILE);
    if !path.exists() {
        return Err(ReportError::NoResults(dir.to_path_buf()));
    }
    let records = latest(read_results(&path)?);
    if records.is_empty() {
        return Err(ReportError::Empty(dir.to_path_buf()));
    }
    Ok(records)
}

/// `deepsolve eval report DIR`: the report of one run, written to `DIR/report/`.
pub fn report(dir: &Path) -> Result<(Report, ReportFiles), ReportError> {
    let records = load_run(dir)?;
    let report = build(&run_title(dir), &records);
    let files = write(&report, &records, &dir.join(REPORT_DIR))?;
    Ok((report, files))
}

/// `deepsolve eval report DIR DIR2`: two runs side by side, written to
/// `DIR/compare-<name of DIR2>/`.
pub fn compare(dir1: &Path, dir2: &Path) -> Result<(Report, ReportFiles), ReportError> {
    let out = dir1.join(format!("compare-{}", sanitize(&run_label(dir2))));
    compare_into(dir1, dir2, &out)
}

/// [`compare`] into a chosen directory. Modes that both runs have are told apart by the
/// run's name (`run-a/plain`, `run-b/plain`).
pub fn compare_into(
    dir1: &Path,
    dir2: &Path,
    out: &Path,
) -> Result<(Report, ReportFiles), ReportError> {
    let (label1, label2) = distinct_labels(dir1, dir2);
    let mut first = load_run(dir1)?;
    let mut second = load_run(dir2)?;
    let modes1: BTreeSet<String> = first.iter().map(|r| r.mode.clone()).collect();
    let modes2: BTreeSet<String> = second.iter().map(|r| r.mode.clone()).collect();
    if !modes1.is_disjoint(&modes2) {
        for r in &mut first {
            r.mode = format!("{label1}/{}", r.mode);
        }
        for r in &mut second {
            r.mode = format!("{label2}/{}", r.mode);
        }
    }
    first.extend(second);
    let report = build(
        &format!("{} vs {}", titled(label1, dir1), titled(label2, dir2)),
        &first,
    );
    let files = write(&report, &first, out)?;
    Ok((report, files))
}

fn distinct_labels(dir1: &Path, dir2: &Path) -> (String, String) {
    let (a, b) = (run_label(dir1), run_label(dir2));
    if a == b {
        (format!("{a}-1"), format!("{b}-2"))
    } else {
        (a, b)
    }
}

/// A run's name and, when its manifest names it, the model it ran on.
fn run_title(dir: &Path) -> String {
    titled(run_label(dir), dir)
}

fn titled(label: String, dir: &Path) -> String {
    match crate::runner::read_manifest(dir) {
        Some(manifest) if !manifest.model.is_empty() => format!("{label} ({})", manifest.model),
        _ => label,
    }
}

/// A run's name: its directory's.
fn run_label(dir: &Path) -> String {
    let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    canonical
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "run".into())
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A report's plots as SVG: `("accuracy", …)` (accuracy per mode with its interval) and
/// `("tokens", …)` (mean tokens against accuracy). Every text in them is escaped.
pub fn plots(report: &Report) -> [(&'static str, String); 2] {
    [
        ("accuracy", plot::accuracy_svg(report)),
        ("tokens", plot::tokens_svg(report)),
    ]
}

/// Write a report's files into `out`.
pub fn write(
    report: &Report,
    records: &[ResultRecord],
    out: &Path,
) -> Result<ReportFiles, ReportError> {
    let put = |name: &str, bytes: &[u8]| -> Result<PathBuf, ReportError> {
        let path = out.join(name);
        std::fs::write(&path, bytes).map_err(|source| ReportError::Write {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    };
    std::fs::create_dir_all(out).map_err(|source| ReportError::Write {
        path: out.to_path_buf(),
        source,
    })?;
    let json = serde_json::to_vec_pretty(report).map_err(|e| ReportError::Encode(e.to_string()))?;
    let plots = plots(report);
    let mut svgs = Vec::new();
    for (name, svg) in &plots {
        svgs.push(put(&format!("{name}.svg"), svg.as_bytes())?);
    }
    let (pngs, warnings) = rasterise(&plots, &put)?;
    let markdown = markdown::render(report, !pngs.is_empty());
    Ok(ReportFiles {
        dir: out.to_path_buf(),
        markdown: put("report.md", markdown.as_bytes())?,
        json: put("report.json", &json)?,
        csv: put("results.csv", csv::render(records).as_bytes())?,
        svgs,
        pngs,
        warnings,
    })
}

type Put<'a> = dyn Fn(&str, &[u8]) -> Result<PathBuf, ReportError> + 'a;

#[cfg(feature = "png")]
fn rasterise(
    plots: &[(&str, String)],
    put: &Put<'_>,
) -> Result<(Vec<PathBuf>, Vec<String>), ReportError> {
    let renderer = png::Renderer::new();
    let mut pngs = Vec::new();
    let mut warnings = Vec::new();
    for (name, svg) in plots {
        match renderer.render(svg) {
            Ok(bytes) => pngs.push(put(&format!("{name}.png"), &bytes)?),
            Err(why) => warnings.push(format!("{name}.png not written: {why}")),
        }
    }
    Ok((pngs, warnings))
}

#[cfg(not(feature = "png"))]
fn rasterise(
    _plots: &[(&str, String)],
    _put: &Put<'_>,
) -> Result<(Vec<PathBuf>, Vec<String>), ReportError> {
    Ok((
        Vec::new(),
        vec!["PNG plots need the `png` feature; the SVGs are written".into()],
    ))
}
