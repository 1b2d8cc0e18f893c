//! Typed errors. Messages are written for the person reading `deepsolve doctor` or for the
//! model reading a tool result, so they say what failed and what to do.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("unknown sandbox mode '{0}': use auto, bwrap or none")]
    BadMode(String),
    /// No isolation backend works; the reason is one line for `doctor` and `solve`.
    #[error("{0}")]
    Unavailable(String),
    #[error("the workspace {path} is not usable: {reason}")]
    Workspace { path: PathBuf, reason: String },
    #[error("could not start the sandbox: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("the sandbox's I/O failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the Python interpreter did not start: {0}")]
    Start(String),
    #[error("the Python interpreter broke the protocol: {0}")]
    Protocol(String),
    #[error("the Python interpreter is not running (it exited or was stopped)")]
    Dead,
    /// A budget of the turn stopped the sandbox before it could be used.
    #[error("{0}")]
    Budget(crate::budget::Stopped),
}
