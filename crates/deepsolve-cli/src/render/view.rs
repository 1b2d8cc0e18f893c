//! A turn as the terminal shows it, folded from its events: the plan's steps with the tool
//! calls made while each was current, the text being written, the answer and the ending.
//! Pure state: the renderers draw it, `solve` reads the answer and the error from it, and a
//! stored turn replays into the same view (`deepsolve show`).

use std::collections::HashMap;
use std::time::Instant;

use deepsolve_core::solve::is_solve_tool;
use deepsolve_protocol::{
    Artifact, ErrorKind, EventKind, PlanStepView, ShownArgument, Source, StepStatus, StopReason,
    TurnEvent, Usage,
};
use serde_json::Value;

/// A step of the plan, with the tool calls made while it was current.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub(crate) id: String,
    pub(crate) goal: String,
    pub(crate) status: StepStatus,
    pub(crate) summary: Option<String>,
    pub(crate) tools: Vec<ToolCall>,
}

impl Step {
    /// A step keeps its identity across plan events (and replans) by id and goal.
    pub(crate) fn key(&self) -> (String, String) {
        (self.id.clone(), self.goal.clone())
    }
}

/// One work tool call.
#[derive(Debug, Clone)]
pub(crate) struct ToolCall {
    pub(crate) call_id: String,
    pub(crate) name: String,
    /// What it was asked: the code, command, query or URL (the text of its main argument).
    pub(crate) input: String,
    /// The last lines it reported while running (`tool_progress`: code's output as it prints).
    pub(crate) progress: Vec<String>,
    pub(crate) started: Instant,
    pub(crate) end: Option<ToolEnd>,
}

impl ToolCall {
    /// The most progress lines kept: the live view shows the newest few.
    const PROGRESS_LINES: usize = 8;

    /// Keep the newest lines of a progress report.
    fn report(&mut self, message: &str) {
        let lines = message.lines().filter(|l| !l.trim().is_empty());
        self.progress.extend(lines.map(str::to_string));
        let extra = self.progress.len().saturating_sub(Self::PROGRESS_LINES);
        self.progress.drain(..extra);
    }
}

#[derive(Debug, Clone)]
pub(crate) struct ToolEnd {
    pub(crate) ok: bool,
    pub(crate) duration_ms: u64,
    pub(crate) content: String,
    pub(crate) artifacts: Vec<Artifact>,
    pub(crate) sources: Vec<Source>,
}

/// What the model is doing now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Activity {
    Starting,
    Waiting { round: u32, max_rounds: u32 },
    Thinking,
    Writing,
    Running(String),
}

/// The turn's answer.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub(crate) text: String,
    pub(crate) sources: Vec<Source>,
}

/// How the turn ended.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ending {
    pub(crate) stop_reason: StopReason,
    pub(crate) usage: Usage,
    pub(crate) rounds: u32,
    pub(crate) elapsed_ms: u64,
}

/// Where a call's line lives.
#[derive(Debug, Clone)]
enum Slot {
    Planning(usize),
    Step((String, String), usize),
}

#[derive(Debug, Default)]
pub(crate) struct TurnView {
    pub(crate) turn_id: String,
    pub(crate) model: String,
    pub(crate) resumed: bool,
    pub(crate) analysis: Option<String>,
    pub(crate) steps: Vec<Step>,
    /// Calls before any plan.
    pub(crate) planning: Vec<ToolCall>,
    pub(crate) activity: Option<Activity>,
    /// The text of the current round so far.
    pub(crate) streamed: String,
    /// A forced answer was announced: the text streaming now is the answer.
    forcing: bool,
    pub(crate) answer: Option<Answer>,
    pub(crate) ending: Option<Ending>,
    /// The last error event: why the turn ended without an answer.
    pub(crate) error: Option<(ErrorKind, String)>,
    calls: HashMap<String, Slot>,
}

impl TurnView {
    pub(crate) fn apply(&mut self, event: &TurnEvent) {
        if self.turn_id.is_empty() {
            self.turn_id = event.turn_id.clone();
        }
        match &event.kind {
            EventKind::TurnStarted { model, resumed, .. } => {
                self.model = model.clone();
                self.resumed |= *resumed;
                self.activity = Some(Activity::Starting);
            }
            EventKind::RoundStarted {
                round, max_rounds, ..
            } => {
                self.streamed.clear();
                self.activity = Some(Activity::Waiting {
                    round: *round,
                    max_rounds: *max_rounds,
                });
            }
            EventKind::ReasoningDelta { .. } => self.activity = Some(Activity::Thinking),
            EventKind::TextDelta { text } => {
                self.streamed.push_str(text);
                self.activity = Some(Activity::Writing);
            }
            EventKind::ToolCall {
                call_id,
                name,
                args,
                shown,
            } if !is_solve_tool(name) => self.call(call_id, name, main_input(args, shown.as_ref())),
            EventKind::ToolProgress { call_id, message } => {
                if let Some(call) = self.call_mut(call_id) {
                    call.report(message);
                }
            }
            EventKind::ToolResult {
                call_id,
                ok,
                content,
                duration_ms,
                artifacts,
                sources,
                ..
            } => {
                if let Some(call) = self.call_mut(call_id) {
                    call.end = Some(ToolEnd {
                        ok: *ok,
                        duration_ms: *duration_ms,
                        content: content.clone(),
                        artifacts: artifacts.clone(),
                        sources: sources.clone(),
                    });
                }
            }
            EventKind::Plan {
                analysis, steps, ..
            } => self.plan(analysis, steps),
            EventKind::Warning {
                kind: deepsolve_protocol::WarningKind::ForcedAnswer,
                ..
            } => self.forcing = true,
            EventKind::Answer { text, sources, .. } => {
                self.answer = Some(Answer {
                    text: text.clone(),
                    sources: sources.clone(),
                });
            }
            EventKind::TurnFinished {
                stop_reason,
                usage,
                rounds,
                elapsed_ms,
            } => {
                self.activity = None;
                self.ending = Some(Ending {
                    stop_reason: *stop_reason,
                    usage: *usage,
                    rounds: *rounds,
                    elapsed_ms: *elapsed_ms,
                });
            }
            EventKind::Error { kind, message } => self.error = Some((*kind, message.clone())),
            _ => {}
        }
    }

    /// Whether the text streaming now is the answer: every step is done, or a forced answer
    /// was announced (otherwise it is the model thinking aloud between calls).
    pub(crate) fn answering(&self) -> bool {
        self.forcing
            || (!self.steps.is_empty() && self.steps.iter().all(|s| s.status == StepStatus::Done))
    }

    /// The step that is current, if any.
    pub(crate) fn current(&self) -> Option<&Step> {
        self.steps.iter().find(|s| s.status == StepStatus::Current)
    }

    /// Every file the turn reported, each path once, as it was last reported.
    pub(crate) fn files(&self) -> Vec<&Artifact> {
        let mut seen = std::collections::HashSet::new();
        let all = (self.planning.iter())
            .chain(self.steps.iter().flat_map(|s| s.tools.iter()))
            .filter_map(|t| t.end.as_ref())
            .flat_map(|e| e.artifacts.iter());
        let mut latest: Vec<&Artifact> = all
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .filter(|a| seen.insert(a.path.as_str()))
            .collect();
        latest.reverse();
        latest
    }

    fn call(&mut self, call_id: &str, name: &str, input: String) {
        let call = ToolCall {
            call_id: call_id.to_string(),
            name: name.to_string(),
            input,
            progress: Vec::new(),
            started: Instant::now(),
            end: None,
        };
        self.activity = Some(Activity::Running(name.to_string()));
        // Work goes to the current step, else the last finished one, else before the plan.
        let target = (self
            .steps
            .iter()
            .position(|s| s.status == StepStatus::Current))
        .or_else(|| {
            self.steps
                .iter()
                .rposition(|s| s.status == StepStatus::Done)
        });
        let slot = match target {
            Some(i) => {
                self.steps[i].tools.push(call);
                Slot::Step(self.steps[i].key(), self.steps[i].tools.len() - 1)
            }
            None => {
                self.planning.push(call);
                Slot::Planning(self.planning.len() - 1)
            }
        };
        self.calls.insert(call_id.to_string(), slot);
    }

    fn call_mut(&mut self, call_id: &str) -> Option<&mut ToolCall> {
        match self.calls.get(call_id)? {
            Slot::Planning(i) => self.planning.get_mut(*i),
            Slot::Step(key, i) => {
                let step = self.steps.iter_mut().find(|s| &s.key() == key)?;
                step.tools.get_mut(*i)
            }
        }
    }

    /// A plan event: the steps as they are now. A step already known keeps its calls; the
    /// calls of a step a replan dropped stay with the turn's first step-less work, so no
    /// call vanishes from the view.
    fn plan(&mut self, analysis: &str, steps: &[PlanStepView]) {
        self.analysis = Some(analysis.to_string());
        let mut old: Vec<Step> = std::mem::take(&mut self.steps);
        for view in steps {
            let key = (view.id.clone(), view.goal.clone());
            let tools = match old.iter().position(|s| s.key() == key) {
                Some(i) => old.remove(i).tools,
                None => Vec::new(),
            };
            self.steps.push(Step {
                id: view.id.clone(),
                goal: view.goal.clone(),
                status: view.status,
                summary: view.summary.clone(),
                tools,
            });
        }
        for dropped in old {
            self.planning.extend(dropped.tools);
        }
        self.reindex();
    }

    /// Rebuild where each call lives after the steps changed.
    fn reindex(&mut self) {
        self.calls.clear();
        for (i, call) in self.planning.iter().enumerate() {
            self.calls.insert(call.call_id.clone(), Slot::Planning(i));
        }
        for step in &self.steps {
            for (i, call) in step.tools.iter().enumerate() {
                self.calls
                    .insert(call.call_id.clone(), Slot::Step(step.key(), i));
            }
        }
    }
}

/// The text of the argument the call's event says to show first (its code, command, query,
/// URL or source), else its arguments as JSON.
fn main_input(args: &Value, shown: Option<&ShownArgument>) -> String {
    shown
        .and_then(|shown| args.get(&shown.name))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| args.to_string())
}
