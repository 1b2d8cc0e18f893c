//! The live view on a terminal's stderr. What is settled scrolls up and stays: the plan, each
//! finished step with its tool calls nested under it, warnings. Below it a region redrawn in
//! place shows what is in motion: the current step and its calls (the code they run, their
//! output), the steps still to come, what the model is doing, and the text it is writing as
//! it streams. When the turn ends the region is cleared and the steps left open are printed
//! once.
//!
//! Every line of the region is cut to the terminal's width, so none wraps and the region is
//! always exactly as many lines as were drawn: redrawing moves the cursor up that many lines
//! and clears to the end of the screen.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use console::style;
use deepsolve_protocol::{StepStatus, TurnEvent};

use super::view::{Activity, TurnView};
use super::{Renderer, event_line, files_lines, footer_line, printable, step_line, tool_lines};
use crate::output::err_bytes;

const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
/// Redraws at most this often while events stream (the tick redraws what is left).
const MIN_REDRAW: Duration = Duration::from_millis(50);
/// Lines of the streaming text shown at most.
const TEXT_LINES: usize = 8;
/// Steps to come shown at most (then `… and N more`).
const PENDING_LINES: usize = 4;

pub(crate) struct LiveRenderer {
    workspace: Option<PathBuf>,
    /// Lines settled since the last draw, printed above the region at the next one.
    settled: Vec<String>,
    /// Lines the region has on screen now.
    drawn: usize,
    last_draw: Option<Instant>,
    frame: usize,
    /// What is already printed: the plan header, steps, calls.
    plan_printed: Option<String>,
    steps_printed: HashSet<(String, String)>,
    calls_printed: HashSet<String>,
    note: Option<String>,
}

impl LiveRenderer {
    pub(crate) fn new(workspace: Option<PathBuf>) -> Self {
        LiveRenderer {
            workspace,
            settled: Vec::new(),
            drawn: 0,
            last_draw: None,
            frame: 0,
            plan_printed: None,
            steps_printed: HashSet::new(),
            calls_printed: HashSet::new(),
            note: None,
        }
    }

    fn spinner(&self) -> String {
        style(SPINNER[self.frame % SPINNER.len()])
            .for_stderr()
            .cyan()
            .to_string()
    }

    /// Settle what is done: calls made before the plan once a plan exists, the plan's
    /// header, and every finished step (with its calls) in order.
    fn settle(&mut self, view: &TurnView) {
        if !view.steps.is_empty() || view.ending.is_some() {
            for call in &view.planning {
                if call.end.is_some() && self.calls_printed.insert(call.call_id.clone()) {
                    let lines = tool_lines(call, 2, "", self.workspace.as_deref());
                    self.settled.extend(lines);
                }
            }
        }
        if let Some(analysis) = &view.analysis
            && self.plan_printed.as_ref() != Some(analysis)
        {
            self.settled.push(format!(
                "{} {}",
                style("Plan:").for_stderr().bold(),
                printable(analysis)
            ));
            self.plan_printed = Some(analysis.clone());
        }
        for step in &view.steps {
            if step.status != StepStatus::Done {
                // Steps finish in order: the rest are still in motion.
                break;
            }
            if self.steps_printed.insert(step.key()) {
                self.settled.push(step_line(step, false));
            }
            for call in &step.tools {
                if call.end.is_some() && self.calls_printed.insert(call.call_id.clone()) {
                    let lines = tool_lines(call, 6, "", self.workspace.as_deref());
                    self.settled.extend(lines);
                }
            }
        }
    }

    /// The region: the current step and its calls, the steps to come, the activity, the
    /// streaming text; cut to fit the terminal.
    fn region(&self, view: &TurnView, height: usize) -> Vec<String> {
        let spinner = self.spinner();
        let mut calls = Vec::new();
        let mut header = None;
        let open_calls = |tools: &[super::view::ToolCall], indent: usize, out: &mut Vec<String>| {
            for call in tools {
                if !self.calls_printed.contains(&call.call_id) {
                    out.extend(tool_lines(
                        call,
                        indent,
                        &spinner,
                        self.workspace.as_deref(),
                    ));
                }
            }
        };
        open_calls(&view.planning, 2, &mut calls);
        if let Some(step) = view.current() {
            header = Some(format!(
                "  {spinner} {} {}",
                printable(&step.id),
                printable(&step.goal)
            ));
            open_calls(&step.tools, 6, &mut calls);
        }
        let pending: Vec<String> = view
            .steps
            .iter()
            .filter(|s| s.status == StepStatus::Pending)
            .map(|s| step_line(s, false))
            .collect();
        let status = format!("  {spinner} {}", self.activity(view));
        let text = self.text_tail(view);

        // Fit: the header and the activity always; then the text, the steps to come, and the
        // newest call lines in what is left.
        let budget = height.saturating_sub(2).max(4);
        let fixed = 1 + usize::from(header.is_some());
        let text_rows = text.len().min(budget.saturating_sub(fixed));
        let mut left = budget.saturating_sub(fixed + text_rows);
        let pending_rows = if pending.len() > PENDING_LINES.min(left) {
            PENDING_LINES.min(left)
        } else {
            pending.len()
        };
        left = left.saturating_sub(pending_rows);
        let mut lines = Vec::new();
        lines.extend(header);
        if calls.len() > left {
            let hidden = calls.len() + 1 - left.max(1);
            lines.push(
                style(format!("      … {hidden} lines above"))
                    .for_stderr()
                    .dim()
                    .to_string(),
            );
            lines.extend(calls.split_off(hidden));
        } else {
            lines.extend(calls);
        }
        if pending_rows < pending.len() && pending_rows > 0 {
            lines.extend(pending[..pending_rows - 1].iter().cloned());
            lines.push(
                style(format!(
                    "  ○ … and {} more steps",
                    pending.len() - (pending_rows - 1)
                ))
                .for_stderr()
                .dim()
                .to_string(),
            );
        } else {
            lines.extend(pending.into_iter().take(pending_rows));
        }
        lines.push(status);
        lines.extend(text[text.len() - text_rows..].iter().cloned());
        lines
    }

    fn activity(&self, view: &TurnView) -> String {
        if let Some(note) = &self.note {
            return note.clone();
        }
        match &view.activity {
            None | Some(Activity::Starting) => "starting…".into(),
            Some(Activity::Waiting { round, max_rounds }) => {
                format!("round {round} of {max_rounds} · waiting for the model")
            }
            Some(Activity::Thinking) => "thinking…".into(),
            Some(Activity::Writing) if view.answering() => "writing the answer…".into(),
            Some(Activity::Writing) => "writing…".into(),
            Some(Activity::Running(name)) => format!("running {}…", printable(name)),
        }
    }

    /// The last lines of the text the model is writing (the answer, or its thinking aloud
    /// between calls, dimmed).
    fn text_tail(&self, view: &TurnView) -> Vec<String> {
        let text = view.streamed.trim_end();
        if text.is_empty() {
            return Vec::new();
        }
        let mut tail: Vec<&str> = text.rsplit('\n').take(TEXT_LINES).collect();
        tail.reverse();
        tail.into_iter()
            .map(|line| {
                let line = format!("  │ {}", printable(line));
                if view.answering() {
                    line
                } else {
                    style(line).for_stderr().dim().to_string()
                }
            })
            .collect()
    }

    fn draw(&mut self, view: &TurnView, region: bool) {
        let (rows, cols) = console::Term::stderr().size();
        let width = usize::from(cols).saturating_sub(1).max(20);
        let mut out = String::new();
        if self.drawn > 0 {
            let _ = write!(out, "\x1b[{}A\r\x1b[J", self.drawn);
        }
        for line in self.settled.drain(..) {
            out.push_str(&line);
            out.push('\n');
        }
        self.drawn = 0;
        if region {
            for line in self.region(view, usize::from(rows)) {
                out.push_str(&console::truncate_str(&line, width, "…"));
                out.push('\n');
                self.drawn += 1;
            }
        }
        err_bytes(out.as_bytes());
        self.last_draw = Some(Instant::now());
    }

    /// Draw now if the last draw is old enough or something settled (the tick draws the
    /// rest).
    fn draw_soon(&mut self, view: &TurnView) {
        let due = self.last_draw.is_none_or(|at| at.elapsed() >= MIN_REDRAW);
        if due || !self.settled.is_empty() {
            self.draw(view, true);
        }
    }
}

impl Renderer for LiveRenderer {
    fn event(&mut self, view: &TurnView, event: &TurnEvent) {
        if let Some(line) = event_line(&event.kind) {
            self.settled.push(line);
        }
        self.settle(view);
        self.draw_soon(view);
    }

    fn tick(&mut self, view: &TurnView) {
        self.frame += 1;
        self.draw(view, true);
    }

    fn note(&mut self, view: &TurnView, text: &str) {
        self.note = Some(text.to_string());
        self.draw(view, true);
    }

    fn finish(&mut self, view: &TurnView) {
        self.settle(view);
        // Whatever is still open is printed once, as it ended.
        for call in &view.planning {
            if self.calls_printed.insert(call.call_id.clone()) {
                self.settled
                    .extend(tool_lines(call, 2, "…", self.workspace.as_deref()));
            }
        }
        for step in view.steps.iter().filter(|s| s.status != StepStatus::Done) {
            self.settled.push(step_line(step, true));
            for call in &step.tools {
                if self.calls_printed.insert(call.call_id.clone()) {
                    self.settled
                        .extend(tool_lines(call, 6, "…", self.workspace.as_deref()));
                }
            }
        }
        self.draw(view, false);
    }

    fn footer(&mut self, view: &TurnView) {
        self.settled
            .extend(files_lines(view, self.workspace.as_deref()));
        self.settled.extend(footer_line(view));
        self.draw(view, false);
    }
}
