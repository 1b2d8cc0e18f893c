//! deepsolve-core: the deep-solve agent loop with a deterministic spine.
//!
//! No network or process I/O lives here: the loop reaches the world only through the
//! [`ChatModel`] and [`Tool`] traits, so every behaviour is testable with in-process fakes.
//!
//! The public surface is what embedders use: the [`Engine`] and its [`TurnSpec`], the model
//! and tool traits with their types, events, the solve capability ([`solve`]), the texts the
//! model reads ([`Texts`]), and the text-tag format for tests that cross-check it. The loop's
//! parts (dispatch, context, folding, protocols, parsing) stay inside.

pub mod boxed;
mod citations;
pub mod config;
mod context;
mod dispatch;
mod engine;
pub mod event;
mod image;
mod json_repair;
mod material;
mod message;
mod model;
mod normalize;
mod outcome;
mod progress;
pub mod solve;
pub mod stream_filter;
mod texts;
mod tokens;
mod tool;
mod truncate;
mod wire;

pub use citations::{Citations, cited};
pub use config::{ClampWarning, ConfigError, SolveConfig, is_legacy};
pub use engine::prompt_room;
pub use engine::{DEFAULT_CONTEXT_WINDOW, Engine, EngineError, PriorTurn, TurnError, TurnSpec};
pub use event::{EventKind, EventSink, NullSink, TurnEvent, VecSink};
pub use image::TurnImage;
pub use json_repair::{JsonError, parse_lenient};
pub use message::{Message, Role, ToolCall};
pub use model::{
    ChatModel, ChatRequest, Completion, DeltaSink, FinishReason, Honours, ModelError, Protocol,
    ReplySchema, StreamDelta, ToolChoice, ToolSpec, Usage,
};
pub use outcome::{AnswerSource, Checkpoint, StopReason, TurnOutcome};
pub use solve::{Language, SolveRecord};
pub use texts::{OverrideError, TOOLS_MARKER, Text, Texts};
pub use tokens::{IMAGE_TOKENS, count as count_tokens, message_tokens};
pub use tool::{
    Artifact, MAX_PROGRESS_PER_CALL, Material, MaterialDocument, MaterialKb, Progress,
    ProgressReceiver, ShownArgument, Source, Tool, ToolContext, ToolError, ToolOutput, ToolRef,
    sha256_hex,
};
pub use wire::tags::{
    STOP_MARKER, manifest as tags_manifest, render_call as render_tag_call,
    render_response as render_tag_response,
};
pub use wire::{MarkupError, ParsedCall, ParsedReply, parse_reply, recommended_protocol};
