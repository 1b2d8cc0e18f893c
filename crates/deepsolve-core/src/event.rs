//! The one typed event stream of a turn (DESIGN §7). The same events feed the CLI renderers,
//! SSE clients and the turn log; `seq` is monotonic per turn with no gaps.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::Usage;
use crate::outcome::{Checkpoint, StopReason};
use crate::tool::Artifact;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnEvent {
    pub turn_id: String,
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub ts: u64,
    #[serde(flatten)]
    pub kind: EventKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoundRole {
    Narration,
    Answer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Pending,
    Current,
    Done,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStepView {
    pub id: String,
    pub goal: String,
    pub status: StepStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    TurnStarted {
        model: String,
        problem: String,
        tools: Vec<String>,
        language: String,
        /// The turn continues from a checkpoint after an interruption.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        resumed: bool,
    },
    RoundStarted {
        round: u32,
        max_rounds: u32,
        context_tokens: u64,
        context_window: u64,
    },
    ReasoningDelta {
        text: String,
    },
    TextDelta {
        text: String,
    },
    RoundFinished {
        round: u32,
        role: RoundRole,
        finish_reason: String,
        usage: Usage,
    },
    ToolCall {
        call_id: String,
        name: String,
        args: Value,
    },
    ToolProgress {
        call_id: String,
        message: String,
    },
    ToolResult {
        call_id: String,
        name: String,
        ok: bool,
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        artifacts: Vec<Artifact>,
        duration_ms: u64,
    },
    Plan {
        analysis: String,
        steps: Vec<PlanStepView>,
        replans_used: u32,
        replans_max: u32,
    },
    StepFinished {
        step_id: String,
        summary: String,
    },
    /// After every finished step: what a resume needs (see [`Checkpoint`]).
    Checkpoint {
        checkpoint: Checkpoint,
    },
    Replanned {
        reason: String,
    },
    ContextFolded {
        tokens_before: u64,
        tokens_after: u64,
    },
    Retrying {
        attempt: u32,
        max: u32,
        reason: String,
        delay_ms: u64,
    },
    Warning {
        kind: String,
        message: String,
    },
    Answer {
        text: String,
        /// True when the answer came from the forced-answer path or from step summaries.
        forced: bool,
    },
    TurnFinished {
        stop_reason: StopReason,
        usage: Usage,
        rounds: u32,
        elapsed_ms: u64,
    },
    Error {
        kind: String,
        message: String,
    },
}

impl EventKind {
    pub fn type_name(&self) -> &'static str {
        match self {
            EventKind::TurnStarted { .. } => "turn_started",
            EventKind::RoundStarted { .. } => "round_started",
            EventKind::ReasoningDelta { .. } => "reasoning_delta",
            EventKind::TextDelta { .. } => "text_delta",
            EventKind::RoundFinished { .. } => "round_finished",
            EventKind::ToolCall { .. } => "tool_call",
            EventKind::ToolProgress { .. } => "tool_progress",
            EventKind::ToolResult { .. } => "tool_result",
            EventKind::Plan { .. } => "plan",
            EventKind::StepFinished { .. } => "step_finished",
            EventKind::Checkpoint { .. } => "checkpoint",
            EventKind::Replanned { .. } => "replanned",
            EventKind::ContextFolded { .. } => "context_folded",
            EventKind::Retrying { .. } => "retrying",
            EventKind::Warning { .. } => "warning",
            EventKind::Answer { .. } => "answer",
            EventKind::TurnFinished { .. } => "turn_finished",
            EventKind::Error { .. } => "error",
        }
    }
}

/// Where a turn's events go. Implementations must not drop events.
pub trait EventSink: Send + Sync {
    fn send(&self, event: TurnEvent);
}

impl EventSink for tokio::sync::mpsc::UnboundedSender<TurnEvent> {
    fn send(&self, event: TurnEvent) {
        // A closed receiver means nobody is listening any more (e.g. the CLI is exiting);
        // the turn itself goes on and its outcome is still returned.
        let _ = tokio::sync::mpsc::UnboundedSender::send(self, event);
    }
}

/// Collects events in memory (tests, benchmarks, embedding).
#[derive(Debug, Default)]
pub struct VecSink(pub Mutex<Vec<TurnEvent>>);

impl VecSink {
    pub fn take(&self) -> Vec<TurnEvent> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl EventSink for VecSink {
    fn send(&self, event: TurnEvent) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(event);
    }
}

/// Discards events (benchmarks).
#[derive(Debug, Default)]
pub struct NullSink;

impl EventSink for NullSink {
    fn send(&self, _event: TurnEvent) {}
}

/// Stamps `turn_id`, `seq` and `ts` on events of one turn.
pub struct Emitter<'a> {
    turn_id: String,
    /// Held while stamping *and* sending, so events reach the sink in `seq` order even when
    /// parallel tool calls emit at once.
    next_seq: Mutex<u64>,
    sink: &'a dyn EventSink,
}

impl<'a> Emitter<'a> {
    pub fn new(turn_id: impl Into<String>, first_seq: u64, sink: &'a dyn EventSink) -> Self {
        Emitter {
            turn_id: turn_id.into(),
            next_seq: Mutex::new(first_seq),
            sink,
        }
    }

    pub fn emit(&self, kind: EventKind) {
        let mut next = self.next_seq.lock().unwrap_or_else(|e| e.into_inner());
        self.sink.send(TurnEvent {
            turn_id: self.turn_id.clone(),
            seq: *next,
            ts: now_ms(),
            kind,
        });
        *next += 1;
    }

    pub fn next_seq(&self) -> u64 {
        *self.next_seq.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
