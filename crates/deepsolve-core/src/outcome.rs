//! How a turn ended: the outcome types are wire types, defined in `deepsolve-protocol`.

pub use deepsolve_protocol::{AnswerSource, Checkpoint, StopReason, TurnOutcome};
