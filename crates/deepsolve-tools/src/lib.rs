//! The work tools of the solve surface and their catalog. Each tool implements
//! `deepsolve_core::Tool`; [`catalog`] lists them with their policy, playbook line, settings
//! and factory, and holds the one rule by which every front end mounts them.
//!
//! - [`code`]: `code_execution` and `exec`, Python and shell in the sandbox
//!   (`deepsolve-sandbox`), in the turn's workspace.
//! - [`reason`]: a tool-less sub-call to the reasoning model.

pub mod catalog;
pub mod code;
pub mod reason;

pub use catalog::{
    CATALOG, Deps, Factory, PlaybookLine, Policy, ToolEntry, ToolRequestError, ToolStatus, Toolset,
    Unavailable, tool_sections,
};
pub use code::sandboxed::human_size;
pub use code::{CODE_EXECUTION, CodeExecutionTool, DEFAULT_MAX_INTERPRETERS, EXEC, ExecTool};
pub use reason::{REASON, ReasonTool};

/// Re-exported so a front end can detect a sandbox without naming the crate.
pub use deepsolve_sandbox::{PythonOptions, Sandbox, SandboxConfig, SandboxError, SandboxMode};
