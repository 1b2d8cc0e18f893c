//! `deepsolve eval`: problem sets through modes (`deepsolve`, `plain`) with the configured
//! model, every answer graded, a report at the end; `deepsolve eval report DIR [DIR2]` prints
//! (or compares) the reports of finished runs. The library is `deepsolve_eval`; this module
//! resolves sets, flags and settings, shows the progress, and handles Ctrl-C.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use clap::{Args, Subcommand};
use deepsolve_app::App;
use deepsolve_app::eval::TurnSolver;
use deepsolve_app::life::Recorder;
use deepsolve_app::owner::cli_owner;
use deepsolve_eval::grade::{DEFAULT_SYMPY_TIMEOUT, SandboxSympy};
use deepsolve_eval::mode::{DEEPSOLVE, PLAIN};
use deepsolve_eval::report::ReportError;
use deepsolve_eval::{
    DataError, ENDPOINT_DOWN_AFTER, Grader, Mode, PlainOptions, Problem, Progress, RecordError,
    RegradeError, ReportFiles, RunConfig, RunSummary, Runner, Selection,
};
use deepsolve_settings::Loaded;
use deepsolve_store::Store;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio_util::sync::CancellationToken;

use crate::database::{DatabaseArgs, open_store};
use crate::exit::{Exit, UsageError};
use crate::output::{errln, outln};
use crate::setup::{build_recording_app, load_settings, report_sandbox, user_id};
use crate::{ConfigArgs, ProtocolArg};

/// The sets shipped with deepsolve, usable by name.
const SHIPPED: [(&str, &str); 2] = [
    ("gsm-style-en", deepsolve_eval::sets::GSM_STYLE_EN),
    ("zh-arith", deepsolve_eval::sets::ZH_ARITH),
];

const AFTER_HELP: &str = "\
A SET is a JSONL file (GSM8K, MATH, the Qwen2.5-Math evaluation sets, or {id, question,
answer}: the layout is detected per record), or the name of a set shipped with deepsolve
when no such file exists: gsm-style-en (34 English word problems), zh-arith (34 Chinese
arithmetic problems).

Results go to --out (default: <data dir>/evals/<UTC timestamp>; with several sets, one
subdirectory per set), appended as each problem finishes. Ctrl-C stops the run; the
command it prints (--resume) continues it without redoing finished problems.

Exit codes: 0 the run finished (a problem whose endpoint failed is recorded as such);
1 another failure; 2 usage, settings or a set that cannot be read; 4 stopped because
5 problems in a row failed at the endpoint (the command it prints, with --retry-errors,
continues once the endpoint answers again); 130 cancelled.";

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, after_help = AFTER_HELP)]
pub(crate) struct EvalArgs {
    #[command(subcommand)]
    action: Option<EvalAction>,
    #[command(flatten)]
    run: RunEvalArgs,
}

#[derive(Subcommand)]
enum EvalAction {
    /// Print the report of a run directory (written again to DIR/report/), or compare two
    /// runs (written to DIR/compare-<name of DIR2>/).
    Report { dir: PathBuf, dir2: Option<PathBuf> },
    /// Grade a run's stored outputs again with this build's grader, into a new run directory
    /// OUT (the models are not asked again); `eval report DIR OUT` then shows what changed.
    Regrade { dir: PathBuf, out: PathBuf },
}

#[derive(Args)]
struct RunEvalArgs {
    /// Problem sets: JSONL files, or the names of shipped sets (gsm-style-en, zh-arith).
    #[arg(value_name = "SET")]
    problem_sets: Vec<String>,
    /// The modes to run, comma-separated: deepsolve (a recorded solve turn per problem) and
    /// plain (one completion asking for a boxed answer).
    #[arg(
        long = "mode",
        value_delimiter = ',',
        default_value = "deepsolve,plain"
    )]
    modes: Vec<String>,
    /// Keep the first N problems (after --sample).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Pick N problems by a hash of (seed, id): the same ones on every machine.
    #[arg(long, value_name = "N")]
    sample: Option<usize>,
    /// The seed of --sample.
    #[arg(long, value_name = "S", default_value_t = 0, requires = "sample")]
    seed: u64,
    /// Problems in flight at once.
    #[arg(long, value_name = "N", default_value_t = 2)]
    concurrency: usize,
    /// The run's directory (default: <data dir>/evals/<UTC timestamp>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Continue the run in --out: finished (problem, mode) pairs are not run again.
    #[arg(long, requires = "out")]
    resume: bool,
    /// With --resume: run again the pairs whose result is an endpoint error.
    #[arg(long, requires = "resume")]
    retry_errors: bool,
    /// An opt-in tool for the deepsolve turns (repeatable); `deepsolve doctor` lists them.
    #[arg(long = "tool", value_name = "TOOL")]
    tools: Vec<String>,
    /// How tools are offered (native, tags, auto, fence, code, structured, tongyi,
    /// deepanalyze). Overrides llm.protocol.
    #[arg(long, value_enum)]
    protocol: Option<ProtocolArg>,
    /// Record the deepsolve turns as this user of the server (default: the single-user
    /// identity).
    #[arg(long, value_name = "NAME")]
    user: Option<String>,
    #[command(flatten)]
    database: DatabaseArgs,
    #[command(flatten)]
    config: ConfigArgs,
}

pub(crate) async fn run(args: EvalArgs) -> anyhow::Result<Exit> {
    match args.action {
        Some(EvalAction::Report { dir, dir2 }) => print_report(&dir, dir2.as_deref()),
        Some(EvalAction::Regrade { dir, out }) => regrade(&dir, &out).await,
        None => evaluate(args.run).await,
    }
}

/// A set to run: its name (the run's label) and problems.
struct Set {
    name: String,
    problems: Vec<Problem>,
}

async fn evaluate(args: RunEvalArgs) -> anyhow::Result<Exit> {
    if args.problem_sets.is_empty() {
        return Err(UsageError::error(
            "no problem set given: pass a JSONL file or a shipped set's name (gsm-style-en, zh-arith); `deepsolve eval --help` says more",
        ));
    }
    check_modes(&args.modes)?;
    let selection = Selection {
        limit: args.limit,
        sample: args.sample.map(|n| (n, args.seed)),
    };
    let sets = args
        .problem_sets
        .iter()
        .map(|s| read_set(s, selection))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let out = match &args.out {
        Some(out) => out.clone(),
        None => default_out()?,
    };
    let dirs = set_dirs(&out, &sets)?;
    let loaded = load_settings(&args.config)?;
    let store = open_store(&args.database, &loaded.settings.server).await?;
    let result = run_sets(&args, &loaded, &store, &sets, &dirs, &out).await;
    store.close().await;
    result
}

/// Every mode named is known and named once.
fn check_modes(modes: &[String]) -> anyhow::Result<()> {
    if modes.is_empty() {
        return Err(UsageError::error(
            "--mode: name at least one mode (deepsolve, plain)",
        ));
    }
    for (i, mode) in modes.iter().enumerate() {
        if mode != DEEPSOLVE && mode != PLAIN {
            return Err(UsageError::error(format!(
                "--mode: unknown mode {mode:?}; the modes are deepsolve and plain"
            )));
        }
        if modes[..i].contains(mode) {
            return Err(UsageError::error(format!("--mode: {mode} is given twice")));
        }
    }
    Ok(())
}

/// A file when one exists at `name`, else a shipped set of that name; a set that cannot be
/// read (or fits no layout) is a usage error naming why.
fn read_set(name: &str, selection: Selection) -> anyhow::Result<Set> {
    let path = Path::new(name);
    let shipped = SHIPPED
        .iter()
        .find(|(n, _)| *n == name || format!("{n}.jsonl") == name);
    let problems = match (path.exists(), shipped) {
        (false, Some((n, text))) => deepsolve_eval::data::parse(Path::new(n), text),
        _ => deepsolve_eval::load(path),
    }
    .map_err(|e| set_error(name, e))?;
    let problems = deepsolve_eval::select(problems, selection);
    if problems.is_empty() {
        return Err(UsageError::error(format!(
            "{name}: the selection (--limit, --sample) keeps no problem"
        )));
    }
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "set".into());
    Ok(Set {
        name: stem,
        problems,
    })
}

fn set_error(name: &str, error: DataError) -> anyhow::Error {
    match error {
        DataError::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            UsageError::error(format!(
                "{name}: no such file, and no shipped set of that name (the shipped sets: gsm-style-en, zh-arith)"
            ))
        }
        other => UsageError::error(other.to_string()),
    }
}

/// Each set's run directory: `out` itself for one set, `out/<set name>` for several.
fn set_dirs(out: &Path, sets: &[Set]) -> anyhow::Result<Vec<PathBuf>> {
    if let [_] = sets {
        return Ok(vec![out.to_path_buf()]);
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for set in sets {
        let dir = out.join(&set.name);
        if dirs.contains(&dir) {
            return Err(UsageError::error(format!(
                "two sets are named {:?}: their results would share a directory",
                set.name
            )));
        }
        dirs.push(dir);
    }
    Ok(dirs)
}

/// `<data dir>/evals/<UTC timestamp>`.
fn default_out() -> anyhow::Result<PathBuf> {
    let data = deepsolve_app::data_dir().context("no data directory: pass --out")?;
    Ok(data.join("evals").join(utc_stamp(SystemTime::now())))
}

/// `20261205-023000`, in UTC.
fn utc_stamp(at: SystemTime) -> String {
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = crate::history::civil_from_days(i64::try_from(days).unwrap_or(0));
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

async fn run_sets(
    args: &RunEvalArgs,
    loaded: &Loaded,
    store: &Store,
    sets: &[Set],
    dirs: &[PathBuf],
    out: &Path,
) -> anyhow::Result<Exit> {
    let user = user_id(store, args.user.as_deref()).await?;
    let (builder, _recheck) = crate::solve::app_builder(loaded).await?;
    // Recorded `running` under this process: should it die, its turns become interrupted.
    let recorder = Recorder::spawn(store.clone(), cli_owner());
    let app = Arc::new(build_recording_app(builder, &recorder, None)?);
    let modes = modes(args, loaded, &app, &recorder, &user)?;
    let grader = grader().await;
    errln!("eval: results in {}", out.display());

    let cancel = CancellationToken::new();
    let interrupts = tokio::spawn(watch_interrupts(cancel.clone()));
    let mut finished: Vec<&Path> = Vec::new();
    for (set, dir) in sets.iter().zip(dirs) {
        let summary = run_set(args, set, dir, &app, &modes, grader.clone(), &cancel).await?;
        if summary.cancelled {
            interrupts.abort();
            say_resume(&summary, out);
            return Ok(Exit::Cancelled);
        }
        if let Some(error) = &summary.endpoint_down {
            interrupts.abort();
            say_endpoint_down(&summary, error, out);
            return Ok(Exit::Unavailable);
        }
        finished.push(dir);
    }
    interrupts.abort();
    for dir in finished {
        print_report(dir, None)?;
    }
    Ok(Exit::Answer)
}

/// The modes asked for, in the order given.
fn modes(
    args: &RunEvalArgs,
    loaded: &Loaded,
    app: &Arc<App>,
    recorder: &Recorder,
    user: &str,
) -> anyhow::Result<Vec<Mode>> {
    let mut modes = Vec::new();
    for name in &args.modes {
        if name == PLAIN {
            modes.push(Mode::plain(
                app.model().clone(),
                PlainOptions::like_solve(&loaded.settings.solve),
            ));
            continue;
        }
        let tools = app.tools_for_turn_with(&args.tools, false)?;
        report_sandbox(app);
        let honours = app.model().honours();
        let (window, _) = deepsolve_app::probe::context_window(&loaded.settings, &honours);
        let solver = TurnSolver::new(app.clone(), recorder.clone(), user)
            .tools(tools)
            .config(loaded.settings.solve.clone(), window)
            .protocol(crate::solve::protocol(
                args.protocol,
                loaded.settings.llm.protocol,
            ));
        modes.push(Mode::deepsolve(Arc::new(solver)));
    }
    Ok(modes)
}

/// The grader, with sympy in the sandbox when there is one (else said, and answers that need
/// it are `unverified`).
async fn grader() -> Grader {
    match SandboxSympy::detect(DEFAULT_SYMPY_TIMEOUT).await {
        Ok(sympy) => Grader::with_symbolic(Arc::new(sympy)),
        Err(why) => {
            errln!(
                "warning: no sandbox for sympy ({why}): answers only sympy can compare count as unverified"
            );
            Grader::new()
        }
    }
}

async fn run_set(
    args: &RunEvalArgs,
    set: &Set,
    dir: &Path,
    app: &App,
    modes: &[Mode],
    grader: Grader,
    cancel: &CancellationToken,
) -> anyhow::Result<RunSummary> {
    let config = RunConfig {
        concurrency: args.concurrency.max(1),
        resume: args.resume,
        retry_errors: args.retry_errors,
        label: set.name.clone(),
        model: app.model().name().to_string(),
        ..RunConfig::new(dir)
    };
    let total = set.problems.len() * modes.len();
    let shown = Shown::new(&set.name, total);
    let runner = Runner::new(config, grader).on_progress(shown.callback());
    let summary = runner.run(&set.problems, modes, cancel).await;
    shown.finish();
    let summary = summary.map_err(|e| match e {
        deepsolve_eval::RunError::Exists(_) => UsageError::error(e.to_string()),
        other => anyhow::Error::new(other),
    })?;
    if summary.skipped > 0 {
        errln!(
            "eval: {}: {} of {} already done, {} run now",
            set.name,
            summary.skipped,
            summary.total,
            summary.ran
        );
    }
    for tally in summary.tallies.iter().filter(|t| t.errors > 0) {
        errln!(
            "warning: {}: {} of {} {} problems failed at the endpoint (recorded; --resume --retry-errors runs them again)",
            set.name,
            tally.errors,
            tally.done,
            tally.mode
        );
    }
    Ok(summary)
}

/// The progress on stderr: a bar on a terminal, a line per finished problem otherwise.
struct Shown {
    bar: Option<ProgressBar>,
    set: String,
}

impl Shown {
    fn new(set: &str, total: usize) -> Shown {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(
                Some(u64::try_from(total).unwrap_or(u64::MAX)),
                ProgressDrawTarget::stderr(),
            );
            bar.set_style(
                ProgressStyle::with_template(
                    "  {prefix} [{bar:24.cyan/blue}] {pos}/{len} {elapsed_precise} {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_prefix(set.to_string());
            bar.enable_steady_tick(std::time::Duration::from_millis(200));
            bar
        });
        Shown {
            bar,
            set: set.to_string(),
        }
    }

    fn callback(&self) -> deepsolve_eval::ProgressFn {
        let bar = self.bar.clone();
        let set = self.set.clone();
        Arc::new(move |p: &Progress<'_>| {
            let tallies = tallies_line(p);
            match &bar {
                Some(bar) => {
                    bar.set_position(u64::try_from(p.done).unwrap_or(u64::MAX));
                    bar.set_message(tallies);
                }
                None => {
                    let last = p.last;
                    let verdict = match (&last.error, last.correct) {
                        (Some(e), _) => format!("error ({})", e.kind),
                        (None, true) => "correct".to_string(),
                        (None, false) => "wrong".to_string(),
                    };
                    errln!(
                        "eval: {set} [{}/{}] {} {}: {verdict} · {tallies}",
                        p.done,
                        p.total,
                        last.id,
                        last.mode
                    );
                }
            }
        })
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}

/// `deepsolve 3/4 75% · plain 2/4 50%`.
fn tallies_line(p: &Progress<'_>) -> String {
    p.tallies
        .iter()
        .map(|t| {
            let errors = if t.errors > 0 {
                format!(" ({} errors)", t.errors)
            } else {
                String::new()
            };
            format!(
                "{} {}/{} {:.0}%{errors}",
                t.mode,
                t.correct,
                t.done,
                t.accuracy() * 100.0
            )
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

/// The first Ctrl-C (or SIGTERM) cancels the run, leaving it resumable; a second quits at
/// once (what finished is on disk already).
async fn watch_interrupts(cancel: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return;
    };
    let mut count = 0;
    loop {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        count += 1;
        if count > 1 {
            errln!("deepsolve: quit; `deepsolve eval … --resume` continues the run");
            std::process::exit(i32::from(Exit::Cancelled.code()));
        }
        errln!("eval: cancelling… (Ctrl-C again quits at once)");
        cancel.cancel();
    }
}

/// How far a cancelled run got, and the command that continues it.
fn say_resume(summary: &RunSummary, out: &Path) {
    errln!(
        "eval: cancelled with {} of {} done; continue with:\n  {}",
        summary.ran + summary.skipped,
        summary.total,
        resume_command(std::env::args().skip(1).collect(), out)
    );
}

fn say_endpoint_down(summary: &RunSummary, error: &RecordError, out: &Path) {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--retry-errors") {
        args.push("--retry-errors".into());
    }
    errln!(
        "eval: stopped: the last {ENDPOINT_DOWN_AFTER} problems all failed at the endpoint ({}: {}), {} of {} done; once it answers again, continue with:\n  {}",
        error.kind,
        error.message,
        summary.ran + summary.skipped,
        summary.total,
        resume_command(args, out)
    );
}

/// This command line with `--out DIR` and `--resume` (when missing), quoted for a shell.
fn resume_command(mut args: Vec<String>, out: &Path) -> String {
    let has = |args: &[String], flag: &str| {
        args.iter()
            .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
    };
    if !has(&args, "--out") {
        args.push("--out".into());
        args.push(out.display().to_string());
    }
    if !has(&args, "--resume") {
        args.push("--resume".into());
    }
    std::iter::once("deepsolve".to_string())
        .chain(args.iter().map(|a| shell_quote(a)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// A run graded again into `out`: each changed verdict on stdout, the counts on stderr.
async fn regrade(dir: &Path, out: &Path) -> anyhow::Result<Exit> {
    let grader = grader().await;
    let done = deepsolve_eval::regrade(dir, out, &grader)
        .await
        .map_err(|e| match e {
            RegradeError::NoResults(_) | RegradeError::Exists(_) => {
                UsageError::error(e.to_string())
            }
            other => anyhow::Error::new(other),
        })?;
    let verdict = |correct: bool| if correct { "right" } else { "wrong" };
    let shown = |answer: &Option<String>| match answer {
        Some(a) => format!("{a:?}"),
        None => "no answer".to_string(),
    };
    for change in &done.changes {
        outln!(
            "{} {}: {} → {} ({} → {})",
            change.id,
            change.mode,
            verdict(change.was_correct),
            verdict(change.is_correct),
            shown(&change.was_answer),
            shown(&change.is_answer)
        );
    }
    errln!(
        "eval: graded {} outputs again ({} records without one copied as they were): {} changed; the run is in {}",
        done.graded,
        done.copied,
        done.changes.len(),
        out.display()
    );
    errln!(
        "  deepsolve eval report {} {}   compares the two gradings",
        dir.display(),
        out.display()
    );
    Ok(Exit::Answer)
}

/// A run's report (or two runs compared): the Markdown on stdout, the files on stderr.
fn print_report(dir: &Path, dir2: Option<&Path>) -> anyhow::Result<Exit> {
    let made = match dir2 {
        Some(dir2) => deepsolve_eval::compare(dir, dir2),
        None => deepsolve_eval::report(dir),
    };
    let (_, files) = made.map_err(|e| match e {
        ReportError::NoResults(_) | ReportError::Empty(_) => UsageError::error(e.to_string()),
        other => anyhow::Error::new(other),
    })?;
    let markdown = std::fs::read_to_string(&files.markdown)
        .with_context(|| format!("cannot read {}", files.markdown.display()))?;
    outln!("{}", markdown.trim_end());
    say_files(&files);
    Ok(Exit::Answer)
}

fn say_files(files: &ReportFiles) {
    errln!("eval: report in {}", files.dir.display());
    let mut written = vec![&files.markdown, &files.json, &files.csv];
    written.extend(files.svgs.iter());
    written.extend(files.pngs.iter());
    for path in written {
        errln!("  {}", path.display());
    }
    for warning in &files.warnings {
        errln!("warning: {warning}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_utc_dates() {
        let at = UNIX_EPOCH + std::time::Duration::from_secs(1_796_437_800);
        assert_eq!(utc_stamp(at), "20261205-023000");
        assert_eq!(utc_stamp(UNIX_EPOCH), "19700101-000000");
    }

    #[test]
    fn the_resume_command_adds_out_and_resume_once() {
        let args = vec!["eval".to_string(), "my set.jsonl".to_string()];
        assert_eq!(
            resume_command(args, Path::new("/tmp/r")),
            "deepsolve eval 'my set.jsonl' --out /tmp/r --resume"
        );
        let args: Vec<String> = ["eval", "s", "--out=/x", "--resume"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            resume_command(args, Path::new("/x")),
            "deepsolve eval s --out=/x --resume"
        );
    }
}
