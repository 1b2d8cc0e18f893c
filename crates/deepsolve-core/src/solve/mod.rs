//! The solve capability: the session and its store, the three solve tools, the playbook.

mod prompt;
mod session;
pub mod spine;
mod store;

pub use prompt::{Language, playbook_for};
pub(crate) use prompt::{ToolLine, playbook};
pub use session::{OnceRule, PlanVersion, SolveRecord, SolveSession, SolveStep};
pub use spine::{SpineEffect, is_solve_tool, solve_tool_specs};
pub(crate) use store::SessionHandle;
pub use store::{SolveSessionStore, StoreError};
