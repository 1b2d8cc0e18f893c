//! The code tools: `code_execution` (Python, one persistent interpreter per turn) and `exec`
//! (a shell command), both in the sandbox (`deepsolve-sandbox`) and the turn's workspace, and
//! the plumbing they share (`sandboxed`). They are built only with a `Sandbox` whose probe ran
//! real code (or the explicit, loudly warned `sandbox.backend: none`).

pub(crate) mod exec;
mod live;
pub(crate) mod python;
pub(crate) mod sandboxed;

use std::sync::Arc;
use std::time::Duration;

use deepsolve_core::ToolRef;
use deepsolve_sandbox::{PythonOptions, Sandbox};

use crate::toolset::{Deps, Unavailable};

pub use exec::{EXEC, ExecTool};
pub use python::{CODE_EXECUTION, CodeExecutionTool, DEFAULT_MAX_INTERPRETERS};

/// The catalog's factory for `code_execution`.
pub(crate) fn build_code_execution(deps: &Deps) -> Result<ToolRef, Unavailable> {
    let tool = CodeExecutionTool::new(sandbox(deps)?, PythonOptions::default(), call_limit(deps));
    Ok(Arc::new(tool))
}

/// The catalog's factory for `exec`.
pub(crate) fn build_exec(deps: &Deps) -> Result<ToolRef, Unavailable> {
    Ok(Arc::new(ExecTool::new(sandbox(deps)?, call_limit(deps))))
}

fn sandbox(deps: &Deps) -> Result<Sandbox, Unavailable> {
    deps.sandbox
        .clone()
        .map_err(|why| Unavailable(format!("no sandbox: {why}")))
}

/// The default and largest per-call budget: `solve.code_timeout_s`.
fn call_limit(deps: &Deps) -> Duration {
    Duration::from_secs(deps.settings.solve.code_timeout_s)
}
