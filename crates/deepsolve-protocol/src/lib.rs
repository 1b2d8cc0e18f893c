//! deepsolve-protocol: the types that cross a process boundary — the turn's event stream (SSE
//! and the event log), what the store keeps of a turn, and the HTTP API's requests, responses
//! and error codes.
//!
//! Types only: serde for the wire, [`schemars`] for their JSON Schemas (the server's OpenAPI
//! document and the web UI's TypeScript definitions are generated from them, see
//! [`schema`]). No I/O and no runtime: every crate may depend on this one.

pub mod api;
mod content;
mod event;
mod image;
mod material;
mod outcome;
pub mod schema;
mod solve;
mod tool;
mod turn;
mod usage;

pub use content::ContentPart;
pub use event::{
    EVENT_TYPES, ErrorKind, EventKind, PlanStepView, RoundRole, StepStatus, TurnEvent, WarningKind,
};
pub use image::{StoredImage, TurnImageView};
pub use material::{Material, MaterialDocument, MaterialKb};
pub use outcome::{AnswerSource, Checkpoint, StopReason, TurnOutcome};
pub use solve::{Language, PlanVersion, SolveRecord, SolveStep, StepSummary};
pub use tool::{Artifact, ShownArgument, Source, sha256_hex};
pub use turn::{PriorTurn, StoredTurnSpec, TurnStatus};
pub use usage::{Protocol, Usage};
