//! The solve capability: the session and its store, the three solve tools, the playbook.

mod prompt;
mod session;
pub mod spine;
mod store;

pub(crate) use prompt::playbook;
pub use prompt::{Language, ToolLine};
pub use session::{NewSteps, PlanVersion, SolveRecord, SolveSession, SolveStep};
pub use spine::{SOLVE_TOOL_NAMES, SpineEffect, SpineResult, is_solve_tool, solve_tool_specs};
pub use store::{DEFAULT_CAPACITY, SessionHandle, SolveSessionStore, StoreError};
