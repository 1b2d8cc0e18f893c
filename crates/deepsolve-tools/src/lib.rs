//! Work tools for the solve surface (DESIGN §6). Each implements `deepsolve_core::Tool`.

mod reason;

pub use reason::{REASON, ReasonTool};
