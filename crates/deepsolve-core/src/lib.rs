//! deepsolve-core: the deep-solve agent loop with a deterministic spine.
//!
//! No network or process I/O lives here: the loop reaches the world only through the
//! [`ChatModel`] and [`Tool`] traits, so every behaviour is testable with in-process fakes.

pub mod config;
pub mod event;
pub mod message;
pub mod model;
pub mod outcome;
pub mod solve;
pub mod tool;

pub use config::{ClampWarning, ConfigError, SolveConfig};
pub use event::{EventKind, EventSink, TurnEvent};
pub use message::{Message, Role, ToolCall};
pub use model::{
    ChatModel, ChatRequest, Completion, DeltaSink, FinishReason, ModelError, StreamDelta,
    ToolChoice, ToolSpec, Usage,
};
pub use outcome::{AnswerSource, StopReason, TurnOutcome};
pub use solve::{Language, SolveRecord};
pub use tool::{Artifact, Tool, ToolContext, ToolError, ToolOutput, ToolRef};
