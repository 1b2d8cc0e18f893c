//! deepsolve-core: the deep-solve agent loop with a deterministic spine.
//!
//! No network or process I/O lives here: the loop reaches the world only through the
//! [`ChatModel`] and [`Tool`] traits, so every behaviour is testable with in-process fakes.

pub mod config;
mod context;
pub mod dispatch;
pub mod engine;
pub mod event;
pub mod json_repair;
pub mod message;
pub mod model;
pub mod normalize;
pub mod outcome;
pub mod progress;
pub mod solve;
pub mod stream_filter;
pub mod texts;
pub mod tokens;
pub mod tool;
pub mod truncate;
pub mod wire;

pub use config::{ClampWarning, ConfigError, SolveConfig};
pub use engine::{Engine, EngineError, PriorTurn, TurnError, TurnSpec};
pub use event::{EventKind, EventSink, NullSink, TurnEvent, VecSink};
pub use message::{Message, Role, ToolCall};
pub use model::{
    ChatModel, ChatRequest, Completion, DeltaSink, FinishReason, ModelError, Protocol, StreamDelta,
    ToolChoice, ToolSpec, Usage,
};
pub use outcome::{AnswerSource, Checkpoint, StopReason, TurnOutcome};
pub use solve::{Language, SolveRecord};
pub use texts::{Text, TextError, Texts};
pub use tool::{Artifact, Tool, ToolContext, ToolError, ToolOutput, ToolRef};
pub use wire::tags::{
    manifest as tags_manifest, render_call as render_tag_call,
    render_response as render_tag_response,
};
pub use wire::{MarkupError, ParsedCall, ParsedReply, parse_reply};
