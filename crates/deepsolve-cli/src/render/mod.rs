//! The views of a turn's event stream. Progress goes to stderr — a live view on a terminal
//! ([`live`]), plain lines otherwise ([`plain`]) — and with `--json` every event goes to
//! stdout as one line ([`JsonRenderer`]). The answer itself is delivered by the caller
//! ([`crate::answer`]) between the final view and the footer, so stdout holds only it.

mod live;
mod plain;
pub(crate) mod view;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use console::style;
use deepsolve_core::solve::is_solve_tool;
use deepsolve_protocol::{Artifact, EventKind, Source, StopReason, TurnEvent};

use crate::output::{errln, outln};
use view::ToolCall;
pub(crate) use view::TurnView;

/// Lines of a call's input shown under it.
const INPUT_LINES: usize = 3;
/// Lines of a call's output shown under it.
const OUTPUT_LINES: usize = 2;

/// A view of a turn's events on the terminal.
pub(crate) trait Renderer {
    /// `event` has just been applied to `view`.
    fn event(&mut self, view: &TurnView, event: &TurnEvent);
    /// Time passes (the live view's spinners and clocks).
    fn tick(&mut self, _view: &TurnView) {}
    /// A line from the command itself (`cancelling…`).
    fn note(&mut self, view: &TurnView, text: &str);
    /// The turn is over: its final state, once.
    fn finish(&mut self, view: &TurnView);
    /// After the answer: the files the turn wrote and the closing footer.
    fn footer(&mut self, view: &TurnView);
}

/// The events folded into a view and shown by a renderer.
pub(crate) struct Display {
    pub(crate) view: TurnView,
    renderer: Box<dyn Renderer + Send>,
}

impl Display {
    /// `--json`: events on stdout. Else the live view when stderr is a terminal, plain lines
    /// when it is not. Artifacts are listed under `workspace` when the turn has one.
    pub(crate) fn new(json: bool, workspace: Option<PathBuf>) -> Display {
        let renderer: Box<dyn Renderer + Send> = if json {
            Box::new(JsonRenderer)
        } else if std::io::stderr().is_terminal() {
            Box::new(live::LiveRenderer::new(workspace))
        } else {
            Box::new(plain::PlainRenderer::new(workspace))
        };
        Display {
            view: TurnView::default(),
            renderer,
        }
    }

    pub(crate) fn event(&mut self, event: &TurnEvent) {
        self.view.apply(event);
        self.renderer.event(&self.view, event);
    }

    pub(crate) fn tick(&mut self) {
        self.renderer.tick(&self.view);
    }

    pub(crate) fn note(&mut self, text: &str) {
        self.renderer.note(&self.view, text);
    }

    pub(crate) fn finish(&mut self) {
        self.renderer.finish(&self.view);
    }

    pub(crate) fn footer(&mut self) {
        self.renderer.footer(&self.view);
    }
}

/// `--json`: one event per line on stdout and nothing else.
struct JsonRenderer;

impl Renderer for JsonRenderer {
    fn event(&mut self, _view: &TurnView, event: &TurnEvent) {
        // Serialising our own event type cannot fail.
        if let Ok(line) = serde_json::to_string(event) {
            outln!("{line}");
        }
    }

    fn note(&mut self, _view: &TurnView, text: &str) {
        errln!("{text}");
    }

    fn finish(&mut self, _view: &TurnView) {}

    fn footer(&mut self, _view: &TurnView) {}
}

/// The line an event settles as, the same in both renderers: the header, a refused solve
/// tool, a replan, a retry, a warning. `None` for the events each renderer shows its own way.
fn event_line(kind: &EventKind) -> Option<String> {
    let line = match kind {
        EventKind::TurnStarted { model, resumed, .. } => {
            let resumed = if *resumed { " · resumed" } else { "" };
            format!(
                "{} · {}{resumed}",
                style("deepsolve").for_stderr().bold(),
                printable(model)
            )
        }
        EventKind::ToolResult {
            name, ok, content, ..
        } if is_solve_tool(name) && !ok => {
            let first = content.lines().next().unwrap_or_default();
            format!(
                "  {} {name}: {}",
                style("✗").for_stderr().red(),
                printable(first)
            )
        }
        EventKind::Replanned { reason } => format!(
            "{} replanned: {}",
            style("↻").for_stderr().yellow(),
            printable(reason)
        ),
        EventKind::Retrying {
            attempt,
            max,
            reason,
            delay_ms,
        } => format!(
            "  {} retrying ({attempt}/{max}) in {}: {}",
            style("…").for_stderr().yellow(),
            format_duration(*delay_ms),
            printable(reason)
        ),
        EventKind::Warning { message, .. } => format!(
            "{} {}",
            style("warning:").for_stderr().yellow(),
            printable(message)
        ),
        _ => return None,
    };
    Some(line)
}

/// `text` with control characters (escape sequences, newlines) shown as `\u{…}` escapes: text
/// from the model, tools and file names never moves the cursor or recolours the terminal.
pub(crate) fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c == '\t' {
                "    ".to_string()
            } else if c.is_control() {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A cited source as the Sources list shows it (`[1] lecture.pdf, p. 12 · 3.2 Limits`).
pub(crate) fn source_line(source: &Source) -> String {
    printable(&source.list_line())
}

pub(crate) fn format_duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else {
        format!("{:.1}s", ms as f64 / 1000.0)
    }
}

/// A file the turn produced: its path (under the workspace when known), type and size.
fn artifact_line(artifact: &Artifact, workspace: Option<&Path>) -> String {
    let path = printable(&match workspace {
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
        .for_stderr()
        .dim()
    )
}

/// The lines of one tool call: `↳ name 1.2s ✓` (a spinner and its clock while it runs), the
/// first lines of its input and of its output, its first source and its files. `indent` is
/// the call line's.
fn tool_lines(
    call: &ToolCall,
    indent: usize,
    spinner: &str,
    workspace: Option<&Path>,
) -> Vec<String> {
    let pad = " ".repeat(indent);
    let detail = " ".repeat(indent + 2);
    let dim = |s: String| style(s).for_stderr().dim().to_string();
    let mut lines = Vec::new();
    let name = printable(&call.name);
    match &call.end {
        None => lines.push(format!(
            "{pad}{} {name} {}",
            style(spinner).for_stderr().cyan(),
            dim(format_duration(call.started.elapsed().as_millis() as u64))
        )),
        Some(end) => {
            let mark = if end.ok {
                style("✓").for_stderr().green()
            } else {
                style("✗").for_stderr().red()
            };
            lines.push(format!(
                "{pad}↳ {name} {} {mark}",
                dim(format_duration(end.duration_ms))
            ));
        }
    }
    let input: Vec<&str> = call
        .input
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    for line in input.iter().take(INPUT_LINES) {
        lines.push(format!(
            "{detail}{} {}",
            dim("│".into()),
            dim(printable(line))
        ));
    }
    if input.len() > INPUT_LINES {
        lines.push(format!(
            "{detail}{}",
            dim(format!("│ … {} more lines", input.len() - INPUT_LINES))
        ));
    }
    let Some(end) = &call.end else {
        // Running: its newest output so far.
        let newest = call.progress.len().saturating_sub(OUTPUT_LINES);
        for line in &call.progress[newest..] {
            lines.push(format!("{detail}{}", dim(format!("… {}", printable(line)))));
        }
        return lines;
    };
    let output = end
        .content
        .lines()
        .filter(|l| !l.trim().is_empty() && !is_section_header(l));
    for line in output.take(OUTPUT_LINES) {
        let line = printable(line);
        lines.push(if end.ok {
            format!("{detail}→ {line}")
        } else {
            format!("{detail}{}", style(format!("→ {line}")).for_stderr().red())
        });
    }
    if let Some(first) = end.sources.first() {
        let more = match end.sources.len() - 1 {
            0 => String::new(),
            n => format!(" (+{n} more)"),
        };
        lines.push(format!("{detail}▸ {}{more}", source_line(first)));
    }
    for artifact in &end.artifacts {
        lines.push(format!("{detail}▸ {}", artifact_line(artifact, workspace)));
    }
    lines
}

/// `[stdout]`, `[value]`: the labels of a code tool's output sections.
fn is_section_header(line: &str) -> bool {
    let t = line.trim();
    t.len() > 2
        && t.starts_with('[')
        && t.ends_with(']')
        && t[1..t.len() - 1]
            .chars()
            .all(|c| c.is_ascii_lowercase() || c == '_' || c == ' ')
}

/// `✓ S1 goal — summary` for a finished step, `◌ S2 goal — not finished` for the one that was
/// current when the turn ended, `○ S3 goal` for one never started.
fn step_line(step: &view::Step, ended: bool) -> String {
    use deepsolve_protocol::StepStatus;
    let id = printable(&step.id);
    let goal = printable(&step.goal);
    match step.status {
        StepStatus::Done => format!(
            "  {} {id} {goal} — {}",
            style("✓").for_stderr().green(),
            printable(step.summary.as_deref().unwrap_or_default())
        ),
        StepStatus::Current if ended => format!(
            "  {} {id} {goal} {}",
            style("◌").for_stderr().yellow(),
            style("— not finished").for_stderr().dim()
        ),
        StepStatus::Current => format!("  ▸ {id} {goal}"),
        StepStatus::Pending => format!("  ○ {id} {}", style(goal).for_stderr().dim()),
    }
}

/// The files the turn wrote, each once.
fn files_lines(view: &TurnView, workspace: Option<&Path>) -> Vec<String> {
    let files = view.files();
    if files.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![
        String::new(),
        style("Files:").for_stderr().bold().to_string(),
    ];
    lines.extend(
        files
            .into_iter()
            .map(|a| format!("  {}", artifact_line(a, workspace))),
    );
    lines
}

/// `— answered · 7 rounds · 1274 tokens · 2.6s · turn_…`.
fn footer_line(view: &TurnView) -> Option<String> {
    let ending = view.ending?;
    let estimated = if ending.usage.estimated {
        " (estimated)"
    } else {
        ""
    };
    Some(
        style(format!(
            "— {} · {} rounds · {} tokens{estimated} · {} · {}",
            ending.stop_reason,
            ending.rounds,
            ending.usage.total(),
            format_duration(ending.elapsed_ms),
            view.turn_id
        ))
        .for_stderr()
        .dim()
        .to_string(),
    )
}

/// One line saying why a turn has no answer (`None` when it has one).
pub(crate) fn closing_reason(view: &TurnView) -> Option<String> {
    if view.answer.is_some() {
        return None;
    }
    Some(match view.ending.map(|e| e.stop_reason) {
        Some(StopReason::Cancelled) => "cancelled".into(),
        Some(StopReason::ModelError) | None if view.error.is_some() => format!(
            "model error: {}",
            view.error
                .as_ref()
                .map(|(_, m)| m.as_str())
                .unwrap_or_default()
        ),
        Some(other) => format!("no answer ({other})"),
        None => "the turn did not finish".into(),
    })
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

    fn event(seq: u64, kind: deepsolve_protocol::EventKind) -> TurnEvent {
        TurnEvent {
            turn_id: "t".into(),
            seq,
            ts: 0,
            kind,
        }
    }

    /// A running call shows the argument its event names and its newest output; once it
    /// ends, its result instead.
    #[test]
    fn a_running_call_shows_its_shown_argument_and_newest_output() {
        use deepsolve_protocol::{EventKind, ShownArgument};
        let mut view = TurnView::default();
        view.apply(&event(
            0,
            EventKind::ToolCall {
                call_id: "c".into(),
                name: "code_execution".into(),
                args: serde_json::json!({"timeout_s": 5, "code": "print(1)"}),
                shown: Some(ShownArgument {
                    name: "code".into(),
                    language: Some("python".into()),
                }),
            },
        ));
        for (seq, message) in [(1, "one"), (2, "two\nthree")] {
            view.apply(&event(
                seq,
                EventKind::ToolProgress {
                    call_id: "c".into(),
                    message: message.into(),
                },
            ));
        }
        let call = &view.planning[0];
        assert_eq!(call.input, "print(1)");
        let lines = tool_lines(call, 0, "*", None);
        assert!(lines[1].contains("print(1)"), "{lines:?}");
        let shown: Vec<&String> = lines.iter().filter(|l| l.contains('…')).collect();
        assert_eq!(shown.len(), OUTPUT_LINES, "{lines:?}");
        assert!(
            shown[0].contains("two") && shown[1].contains("three"),
            "{lines:?}"
        );
    }
}
