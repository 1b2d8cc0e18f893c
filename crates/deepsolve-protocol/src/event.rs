//! The one typed event stream of a turn. The same events feed the CLI renderers, SSE clients
//! and the turn log; `seq` is monotonic per turn with no gaps.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::outcome::{Checkpoint, StopReason};
use crate::tool::{Artifact, ShownArgument, Source};
use crate::usage::{Protocol, Usage};

/// One event of a turn: its id, its place in the turn's log, when, and what happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TurnEvent {
    pub turn_id: String,
    /// The event's place in the turn's log: 0, 1, 2, … with no gaps (the SSE `id`).
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub ts: u64,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// Which kind of reply a round produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RoundRole {
    /// Work in progress (tool calls, thinking aloud).
    Narration,
    /// The final answer.
    Answer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Pending,
    Current,
    Done,
}

/// A plan step as the checklist shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PlanStepView {
    pub id: String,
    pub goal: String,
    pub status: StepStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// What a `warning` event is about. Kinds a newer server adds read back as `unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WarningKind {
    /// The model spent its whole output budget without visible output: one retry with more.
    Length,
    /// A budget ran out (or the forced call failed): the turn ends with an answer without tools.
    ForcedAnswer,
    /// The model wrote its own `<tool_response>`; it was cut before anything saw it.
    InventedToolResponse,
    /// The prompt exceeded the model's context length: old tool output is snipped.
    ContextLength,
    /// The provider does not support native tool calling: switching to the text-tag protocol.
    Protocol,
    /// The stream broke after output had started: salvaged with a forced answer.
    StreamCut,
    /// A kind this build does not know.
    #[serde(other)]
    Unknown,
}

impl WarningKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WarningKind::Length => "length",
            WarningKind::ForcedAnswer => "forced_answer",
            WarningKind::InventedToolResponse => "invented_tool_response",
            WarningKind::ContextLength => "context_length",
            WarningKind::Protocol => "protocol",
            WarningKind::StreamCut => "stream_cut",
            WarningKind::Unknown => "unknown",
        }
    }
}

/// What an `error` event is about: why the model failed, or why the turn could not run.
/// Kinds a newer server adds read back as `unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The provider refused the credentials.
    Auth,
    ContextLength,
    ToolsUnsupported,
    RateLimited,
    /// The provider answered 5xx.
    Server,
    BadRequest,
    Transport,
    IdleTimeout,
    StreamCut,
    /// The model's reply could not be read.
    Protocol,
    /// The model's reply grew past the per-reply cap (`llm.max_reply_mb`).
    ReplyTooLarge,
    /// The server could not start the turn (e.g. a refused setting).
    TurnNotStarted,
    /// The turn failed inside the server.
    Internal,
    /// A kind this build does not know.
    #[serde(other)]
    Unknown,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Auth => "auth",
            ErrorKind::ContextLength => "context_length",
            ErrorKind::ToolsUnsupported => "tools_unsupported",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::Server => "server",
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::Transport => "transport",
            ErrorKind::IdleTimeout => "idle_timeout",
            ErrorKind::StreamCut => "stream_cut",
            ErrorKind::Protocol => "protocol",
            ErrorKind::ReplyTooLarge => "reply_too_large",
            ErrorKind::TurnNotStarted => "turn_not_started",
            ErrorKind::Internal => "internal",
            ErrorKind::Unknown => "unknown",
        }
    }
}

/// What happened, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
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
        /// How tools are offered this turn (what `auto` chose; never `auto`). A switch to
        /// tags later in the turn is a `protocol` warning. Absent in older logs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        protocol: Option<Protocol>,
    },
    RoundStarted {
        round: u32,
        /// The budget's last round, before the settlement rounds. Held at decoding time, it
        /// moves on by one for each call asked for after the model's reasoning: that call is
        /// the second half of the round that reasoned.
        max_rounds: u32,
        context_tokens: u64,
        context_window: u64,
        /// What the round's reply is held to when the solve spine is enforced at decoding
        /// time (`solve.enforce`): `auto` (free text or a call), `required` (a call), `none`
        /// (text only), or the name of the one tool it must call. Absent when the prompt alone
        /// holds the spine.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_choice: Option<String>,
        /// The round asks for the model's first working of a new problem the way the model
        /// is asked plainly: a short step-by-step system prompt, no tools (`solve.draft`). Its
        /// reply is kept as the reasoning the plan starts from.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        draft: bool,
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
        /// The argument a front end shows first, as the tool's catalog entry says; absent:
        /// the arguments are shown as they are.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shown: Option<ShownArgument>,
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
        /// The citation sources the result numbered (`[n]` in its content).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        sources: Vec<Source>,
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
        kind: WarningKind,
        message: String,
    },
    Answer {
        text: String,
        /// True when the answer came from the forced-answer path or from step summaries.
        forced: bool,
        /// The sources the answer cites (`[n]` in its text), ordered by `n`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        sources: Vec<Source>,
    },
    TurnFinished {
        stop_reason: StopReason,
        usage: Usage,
        rounds: u32,
        elapsed_ms: u64,
    },
    Error {
        kind: ErrorKind,
        message: String,
    },
}

/// Every event's `type` tag ([`EventKind::type_name`]), in declaration order: the one list the
/// web UI's SSE listener (`EVENT_TYPES` in the generated `web/src/protocol.ts`) and the
/// server's metrics labels are made from. A test checks it against the enum's schema.
pub const EVENT_TYPES: &[&str] = &[
    "turn_started",
    "round_started",
    "reasoning_delta",
    "text_delta",
    "round_finished",
    "tool_call",
    "tool_progress",
    "tool_result",
    "plan",
    "step_finished",
    "checkpoint",
    "replanned",
    "context_folded",
    "retrying",
    "warning",
    "answer",
    "turn_finished",
    "error",
];

impl EventKind {
    /// The `type` tag (also the store's `kind` column).
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn roundtrip(kind: &EventKind) -> Value {
        let event = TurnEvent {
            turn_id: "turn_1".into(),
            seq: 3,
            ts: 1_700_000_000_000,
            kind: kind.clone(),
        };
        let json = serde_json::to_value(&event).expect("json");
        let back: TurnEvent = serde_json::from_value(json.clone()).expect("decoded");
        assert_eq!(back, event);
        json
    }

    #[test]
    fn warning_and_error_kinds_keep_their_strings() {
        let warnings = [
            (WarningKind::Length, "length"),
            (WarningKind::ForcedAnswer, "forced_answer"),
            (WarningKind::InventedToolResponse, "invented_tool_response"),
            (WarningKind::ContextLength, "context_length"),
            (WarningKind::Protocol, "protocol"),
            (WarningKind::StreamCut, "stream_cut"),
        ];
        for (kind, name) in warnings {
            assert_eq!(kind.as_str(), name);
            let json = roundtrip(&EventKind::Warning {
                kind,
                message: "m".into(),
            });
            assert_eq!(json["kind"], name);
            assert_eq!(json["type"], "warning");
        }
        for kind in [
            ErrorKind::Auth,
            ErrorKind::ContextLength,
            ErrorKind::ToolsUnsupported,
            ErrorKind::RateLimited,
            ErrorKind::Server,
            ErrorKind::BadRequest,
            ErrorKind::Transport,
            ErrorKind::IdleTimeout,
            ErrorKind::StreamCut,
            ErrorKind::Protocol,
            ErrorKind::ReplyTooLarge,
            ErrorKind::TurnNotStarted,
            ErrorKind::Internal,
        ] {
            let json = roundtrip(&EventKind::Error {
                kind,
                message: "m".into(),
            });
            assert_eq!(json["kind"], kind.as_str());
        }
    }

    #[test]
    fn an_unknown_kind_in_a_stored_event_still_reads() {
        let warning: TurnEvent = serde_json::from_value(json!({
            "turn_id": "t", "seq": 0, "ts": 1, "type": "warning",
            "kind": "something_new", "message": "from a newer server"
        }))
        .expect("decoded");
        assert_eq!(
            warning.kind,
            EventKind::Warning {
                kind: WarningKind::Unknown,
                message: "from a newer server".into()
            }
        );
        let error: TurnEvent = serde_json::from_value(json!({
            "turn_id": "t", "seq": 1, "ts": 1, "type": "error",
            "kind": "quota_exceeded", "message": "m"
        }))
        .expect("decoded");
        assert!(matches!(
            error.kind,
            EventKind::Error {
                kind: ErrorKind::Unknown,
                ..
            }
        ));
    }

    #[test]
    fn events_are_flat_objects_tagged_by_type() {
        let json = roundtrip(&EventKind::TurnStarted {
            model: "m".into(),
            problem: "p".into(),
            tools: vec!["reason".into()],
            language: "en".into(),
            resumed: false,
            protocol: None,
        });
        assert_eq!(
            json,
            json!({"turn_id": "turn_1", "seq": 3, "ts": 1_700_000_000_000u64,
                   "type": "turn_started", "model": "m", "problem": "p",
                   "tools": ["reason"], "language": "en"})
        );
        let resumed = roundtrip(&EventKind::TurnStarted {
            model: "m".into(),
            problem: "p".into(),
            tools: Vec::new(),
            language: "zh".into(),
            resumed: true,
            protocol: Some(Protocol::DeepAnalyze),
        });
        assert_eq!(resumed["resumed"], true);
        assert_eq!(resumed["protocol"], "deepanalyze");
    }

    #[test]
    fn sources_ride_on_results_and_answers_and_old_events_read_without_them() {
        let source = Source {
            n: 2,
            title: "lecture.pdf".into(),
            document_id: Some("doc_1".into()),
            page: Some(12),
            section: Some("3 Limits › 3.2".into()),
            excerpt: Some("A sequence converges when".into()),
            ..Source::default()
        };
        let answer = roundtrip(&EventKind::Answer {
            text: "By [2].".into(),
            forced: false,
            sources: vec![source.clone()],
        });
        assert_eq!(answer["sources"][0]["section"], "3 Limits › 3.2");
        let old_answer: TurnEvent = serde_json::from_value(json!({
            "turn_id": "t", "seq": 9, "ts": 1, "type": "answer", "text": "x", "forced": true
        }))
        .expect("an answer stored before sources");
        assert!(
            matches!(old_answer.kind, EventKind::Answer { ref sources, .. } if sources.is_empty())
        );
        let result = roundtrip(&EventKind::ToolResult {
            call_id: "c".into(),
            name: "rag".into(),
            ok: true,
            content: "[2] lecture.pdf".into(),
            artifacts: Vec::new(),
            sources: vec![source],
            duration_ms: 3,
        });
        assert_eq!(result["sources"][0]["n"], 2);
        let old_result: TurnEvent = serde_json::from_value(json!({
            "turn_id": "t", "seq": 4, "ts": 1, "type": "tool_result", "call_id": "c",
            "name": "reason", "ok": true, "content": "x", "duration_ms": 1
        }))
        .expect("a result stored before sources");
        assert!(
            matches!(old_result.kind, EventKind::ToolResult { ref sources, .. } if sources.is_empty())
        );
        let quiet = roundtrip(&EventKind::Answer {
            text: "x".into(),
            forced: false,
            sources: Vec::new(),
        });
        assert!(quiet.get("sources").is_none(), "no empty list on the wire");
    }
}
