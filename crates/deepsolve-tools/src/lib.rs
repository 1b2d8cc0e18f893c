//! Work tools for the solve surface (DESIGN §6). Each implements `deepsolve_core::Tool`.
//!
//! - `reason`: a tool-less sub-call to the reasoning model.
//! - `code_execution` and `exec`: Python and shell in the sandbox (`deepsolve-sandbox`), in
//!   the turn's workspace; mount them only with a `Sandbox` that `detect` returned.

mod code;
mod exec;
mod reason;
mod sandboxed;

pub use code::{CODE_EXECUTION, CodeExecutionTool, DEFAULT_MAX_INTERPRETERS};
pub use exec::{EXEC, ExecTool};
pub use reason::{REASON, ReasonTool};
pub use sandboxed::human_size;

/// Re-exported so a front end can detect a sandbox without naming the crate.
pub use deepsolve_sandbox::{PythonOptions, Sandbox, SandboxConfig, SandboxError, SandboxMode};
