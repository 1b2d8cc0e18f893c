//! The two views of a turn's event stream: a live terminal view and NDJSON.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use console::style;
use deepsolve_core::solve::is_solve_tool;
use deepsolve_protocol::{
    Artifact, EventKind, PlanStepView, Source, StepStatus, StopReason, TurnEvent, TurnOutcome,
};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

pub(crate) trait Renderer {
    fn event(&mut self, event: &TurnEvent);
    fn finish(&mut self, outcome: &TurnOutcome);
}

/// `--json`: one event per line on stdout and nothing else; the closing reason on stderr.
pub(crate) struct JsonRenderer {
    out: std::io::Stdout,
}

impl JsonRenderer {
    pub(crate) fn new() -> Self {
        JsonRenderer {
            out: std::io::stdout(),
        }
    }
}

impl Renderer for JsonRenderer {
    fn event(&mut self, event: &TurnEvent) {
        let mut out = self.out.lock();
        // Serialising our own event type cannot fail; a closed stdout (a pipe to `head`) is
        // not worth crashing the turn for.
        if let Ok(line) = serde_json::to_string(event) {
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    }

    fn finish(&mut self, outcome: &TurnOutcome) {
        if outcome.answer.is_none() {
            eprintln!("deepsolve: {}", closing_reason(outcome));
        }
    }
}

/// The human view: the plan as a checklist (a spinner on the current step, ✓ and the summary
/// when done), a line per tool call with its duration, the answer as Markdown, and a footer.
/// Without a terminal it prints the same as plain lines.
pub(crate) struct LiveRenderer {
    live: bool,
    multi: MultiProgress,
    status: Option<ProgressBar>,
    steps: Vec<(PlanStepView, ProgressBar)>,
    plan_key: Vec<(String, String)>,
    /// The turn's workspace: artifacts are listed with their full paths under it.
    workspace: Option<PathBuf>,
}

impl LiveRenderer {
    pub(crate) fn new(model: &str) -> Self {
        let live = std::io::stdout().is_terminal();
        let multi = MultiProgress::with_draw_target(if live {
            ProgressDrawTarget::stdout()
        } else {
            ProgressDrawTarget::hidden()
        });
        let r = LiveRenderer {
            live,
            multi,
            status: None,
            steps: Vec::new(),
            plan_key: Vec::new(),
            workspace: None,
        };
        r.line(format!("{} · {}", style("deepsolve").bold(), model));
        r
    }

    pub(crate) fn with_workspace(mut self, workspace: Option<PathBuf>) -> Self {
        self.workspace = workspace;
        self
    }

    /// A file the turn produced: its path (under the workspace when known), type and size.
    fn artifact_line(&self, artifact: &Artifact) -> String {
        // File names are chosen by the model's code: shown without control characters.
        let path = printable(&match &self.workspace {
            Some(ws) => ws.join(&artifact.path).display().to_string(),
            None => artifact.path.clone(),
        });
        format!(
            "{path} {}",
            style(format!(
                "({}, {})",
                artifact.mime,
                deepsolve_tools::human_size(artifact.size)
            ))
            .dim()
        )
    }

    fn line(&self, text: String) {
        if self.live {
            let _ = self.multi.println(text);
        } else {
            println!("{}", console::strip_ansi_codes(&text));
        }
    }

    fn status(&mut self, message: String) {
        if !self.live {
            return;
        }
        let bar = self.status.get_or_insert_with(|| {
            let bar = self.multi.add(ProgressBar::new_spinner());
            bar.set_style(spinner_style());
            bar.enable_steady_tick(Duration::from_millis(100));
            bar
        });
        bar.set_message(message);
    }

    fn show_plan(&mut self, analysis: &str, steps: &[PlanStepView]) {
        let key: Vec<(String, String)> = steps
            .iter()
            .map(|s| (s.id.clone(), s.goal.clone()))
            .collect();
        if key != self.plan_key {
            for (_, bar) in self.steps.drain(..) {
                bar.finish_and_clear();
            }
            self.plan_key = key;
            self.line(format!("{} {}", style("Plan:").bold(), analysis));
            for step in steps {
                let bar = self.step_bar(step);
                self.steps.push((step.clone(), bar));
            }
            if !self.live {
                for step in steps {
                    println!("  ○ {} {}", step.id, step.goal);
                }
            }
        }
        for (i, step) in steps.iter().enumerate() {
            let Some((old, bar)) = self.steps.get_mut(i) else {
                continue;
            };
            if old.status != step.status {
                apply_status(bar, step);
                *old = step.clone();
            }
        }
    }

    fn step_bar(&self, step: &PlanStepView) -> ProgressBar {
        let bar = if self.live {
            self.multi.insert_before(
                self.status.as_ref().unwrap_or(&ProgressBar::hidden()),
                ProgressBar::new_spinner(),
            )
        } else {
            ProgressBar::hidden()
        };
        apply_status(&bar, step);
        bar
    }

    fn tool_result(&self, name: &str, ok: bool, content: &str, duration_ms: u64) {
        let first = content.lines().next().unwrap_or_default();
        // Tool output may come from hostile code: no escape sequences reach the terminal.
        let first: String = printable(first).chars().take(120).collect();
        if is_solve_tool(name) {
            if !ok {
                self.line(format!(
                    "  {} {name}: {}",
                    style("✗").red(),
                    style(first).dim()
                ));
            }
            return;
        }
        let mark = if ok {
            style("✓").green()
        } else {
            style("✗").red()
        };
        let detail = if ok {
            String::new()
        } else {
            format!(" {}", style(first).dim())
        };
        self.line(format!(
            "  ↳ {name} {} {mark}{detail}",
            style(format_duration(duration_ms)).dim()
        ));
    }
}

/// A cited source as the Sources list shows it (`[1] lecture.pdf, p. 12 · 3.2 Limits`). Titles
/// are file names a user chose: printed without control characters.
pub(crate) fn source_line(source: &Source) -> String {
    printable(&source.list_line())
}

/// `text` with control characters (escape sequences, newlines) shown as `\u{…}` escapes.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn spinner_style() -> ProgressStyle {
    ProgressStyle::with_template("  {spinner:.cyan} {wide_msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
}

fn apply_status(bar: &ProgressBar, step: &PlanStepView) {
    match step.status {
        StepStatus::Done => {
            let summary = step.summary.as_deref().unwrap_or_default();
            let text = format!(
                "{} {} {} — {}",
                style("✓").green(),
                step.id,
                step.goal,
                summary
            );
            if bar.is_hidden() {
                println!("  {}", console::strip_ansi_codes(&text));
            }
            bar.set_style(
                ProgressStyle::with_template("  {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.finish_with_message(text);
        }
        StepStatus::Current => {
            bar.set_style(spinner_style());
            bar.set_message(format!("{} {}", step.id, step.goal));
            bar.enable_steady_tick(Duration::from_millis(100));
        }
        StepStatus::Pending => {
            bar.set_style(
                ProgressStyle::with_template("  {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_message(format!("○ {} {}", step.id, style(&step.goal).dim()));
            bar.tick();
        }
    }
}

impl Renderer for LiveRenderer {
    fn event(&mut self, event: &TurnEvent) {
        match &event.kind {
            EventKind::RoundStarted {
                round, max_rounds, ..
            } => {
                self.status(format!(
                    "round {round} of {max_rounds} · waiting for the model"
                ));
            }
            EventKind::ReasoningDelta { .. } => self.status("thinking…".into()),
            EventKind::TextDelta { .. } => self.status("writing…".into()),
            EventKind::ToolCall { name, .. } if !is_solve_tool(name) => {
                self.status(format!("running {name}…"));
            }
            EventKind::ToolResult {
                name,
                ok,
                content,
                duration_ms,
                artifacts,
                sources,
                ..
            } => {
                self.tool_result(name, *ok, content, *duration_ms);
                if let Some(first) = sources.first() {
                    let more = match sources.len() - 1 {
                        0 => String::new(),
                        n => format!(" (+{n} more)"),
                    };
                    self.line(format!(
                        "    {} {}{more}",
                        style("▸").dim(),
                        source_line(first)
                    ));
                }
                for artifact in artifacts {
                    self.line(format!("    ▸ {}", self.artifact_line(artifact)));
                }
            }
            EventKind::Plan {
                analysis, steps, ..
            } => self.show_plan(analysis, steps),
            EventKind::Replanned { reason } => {
                self.line(format!("{} replanned: {reason}", style("↻").yellow()));
            }
            EventKind::Retrying {
                attempt,
                max,
                reason,
                delay_ms,
            } => self.line(format!(
                "  {} retrying ({attempt}/{max}) in {}: {reason}",
                style("…").yellow(),
                format_duration(*delay_ms)
            )),
            EventKind::Warning { message, .. } => {
                self.line(format!("{} {message}", style("warning:").yellow()));
            }
            EventKind::Error { message, .. } => {
                self.line(format!("{} {message}", style("error:").red()));
            }
            _ => {}
        }
    }

    fn finish(&mut self, outcome: &TurnOutcome) {
        if let Some(bar) = self.status.take() {
            bar.finish_and_clear();
        }
        // Finished and open steps stay on screen as the turn's checklist.
        for (_, bar) in self.steps.drain(..) {
            if !bar.is_finished() {
                bar.abandon();
            }
        }
        if let Some(answer) = &outcome.answer {
            println!();
            if self.live {
                termimad::MadSkin::default().print_text(answer);
            } else {
                println!("{answer}");
            }
        }
        if outcome.answer.is_some() && !outcome.sources.is_empty() {
            println!();
            println!("{}", style("Sources").bold());
            for source in &outcome.sources {
                println!("  {}", source_line(source));
            }
        }
        if !outcome.artifacts.is_empty() {
            println!();
            println!("{}", style("Files:").bold());
            // A file written by several calls is listed once, as it is now.
            let mut seen = std::collections::HashSet::new();
            let mut latest: Vec<&Artifact> = outcome
                .artifacts
                .iter()
                .rev()
                .filter(|a| seen.insert(a.path.as_str()))
                .collect();
            latest.reverse();
            for artifact in latest {
                println!("  {}", self.artifact_line(artifact));
            }
        }
        println!();
        println!("{}", footer(outcome));
        if outcome.answer.is_none() {
            eprintln!("deepsolve: {}", closing_reason(outcome));
        }
    }
}

fn footer(o: &TurnOutcome) -> String {
    let estimated = if o.usage.estimated {
        " (estimated)"
    } else {
        ""
    };
    let text = format!(
        "— {} · {} rounds · {} tokens{estimated} · {}",
        o.stop_reason,
        o.rounds,
        o.usage.total(),
        format_duration(o.elapsed_ms)
    );
    style(text).dim().to_string()
}

/// One line saying why a turn ended without an answer.
pub(crate) fn closing_reason(o: &TurnOutcome) -> String {
    match o.stop_reason {
        StopReason::Cancelled => "cancelled".into(),
        StopReason::ModelError => format!(
            "model error: {}",
            o.error.as_deref().unwrap_or("the model call failed")
        ),
        other => format!("no answer ({other})"),
    }
}

fn format_duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else {
        format!("{:.1}s", ms as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_line_names_the_file_page_and_section() {
        let source = Source {
            n: 1,
            title: "lecture.pdf".into(),
            page: Some(12),
            section: Some("3 Calculus › 3.2 Limits".into()),
            ..Source::default()
        };
        assert_eq!(
            source_line(&source),
            "[1] lecture.pdf, p. 12 · 3 Calculus › 3.2 Limits"
        );
        let bare = Source {
            n: 2,
            title: "notes\u{1b}[2J.md".into(),
            ..Source::default()
        };
        assert_eq!(source_line(&bare), "[2] notes\\u{1b}[2J.md");
    }
}
