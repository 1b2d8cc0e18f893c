//! Progress for a stderr that is not a terminal (a log file, CI, a pipe): plain lines as
//! things happen, no cursor movement. The plan, then each step as it starts with its tool
//! calls under it as they end, then the step's summary.

use std::collections::HashSet;
use std::path::PathBuf;

use console::style;
use deepsolve_core::solve::is_solve_tool;
use deepsolve_protocol::{EventKind, StepStatus, TurnEvent};

use super::view::TurnView;
use super::{Renderer, event_line, files_lines, footer_line, printable, step_line, tool_lines};
use crate::output::errln;

pub(crate) struct PlainRenderer {
    workspace: Option<PathBuf>,
    /// The plan last printed, by step keys.
    plan: Vec<(String, String)>,
    /// Steps announced as started, and as done.
    started: HashSet<(String, String)>,
    done: HashSet<(String, String)>,
}

impl PlainRenderer {
    pub(crate) fn new(workspace: Option<PathBuf>) -> Self {
        PlainRenderer {
            workspace,
            plan: Vec::new(),
            started: HashSet::new(),
            done: HashSet::new(),
        }
    }

    fn plan(&mut self, view: &TurnView) {
        let keys: Vec<(String, String)> = view.steps.iter().map(|s| s.key()).collect();
        if keys != self.plan {
            errln!(
                "{} {}",
                style("Plan:").for_stderr().bold(),
                printable(view.analysis.as_deref().unwrap_or_default())
            );
            for step in view.steps.iter().filter(|s| s.status != StepStatus::Done) {
                errln!("  ○ {} {}", printable(&step.id), printable(&step.goal));
            }
            self.plan = keys;
        }
        for step in &view.steps {
            let key = step.key();
            if step.status == StepStatus::Current && self.started.insert(key.clone()) {
                errln!("{}", step_line(step, false));
            }
            if step.status == StepStatus::Done && self.done.insert(key) {
                errln!("{}", step_line(step, false));
            }
        }
    }

    /// A call's lines, once it ended: under its step, or at the top level before a plan.
    fn tool_result(&self, view: &TurnView, call_id: &str) {
        let in_step = view
            .steps
            .iter()
            .flat_map(|s| s.tools.iter())
            .find(|t| t.call_id == call_id);
        let (call, indent) = match in_step {
            Some(call) => (call, 6),
            None => match view.planning.iter().find(|t| t.call_id == call_id) {
                Some(call) => (call, 2),
                None => return,
            },
        };
        for line in tool_lines(call, indent, "…", self.workspace.as_deref()) {
            errln!("{line}");
        }
    }
}

impl Renderer for PlainRenderer {
    fn event(&mut self, view: &TurnView, event: &TurnEvent) {
        if let Some(line) = event_line(&event.kind) {
            errln!("{line}");
            return;
        }
        match &event.kind {
            EventKind::Plan { .. } => self.plan(view),
            EventKind::ToolResult { call_id, name, .. } if !is_solve_tool(name) => {
                self.tool_result(view, call_id);
            }
            _ => {}
        }
    }

    fn note(&mut self, _view: &TurnView, text: &str) {
        errln!("{text}");
    }

    fn finish(&mut self, view: &TurnView) {
        // The steps left open when the turn ended, once.
        for step in &view.steps {
            if step.status != StepStatus::Done && !self.done.contains(&step.key()) {
                errln!("{}", step_line(step, true));
            }
        }
    }

    fn footer(&mut self, view: &TurnView) {
        for line in files_lines(view, self.workspace.as_deref()) {
            errln!("{line}");
        }
        if let Some(footer) = footer_line(view) {
            errln!("{footer}");
        }
    }
}
