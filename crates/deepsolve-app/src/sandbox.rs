//! The sandbox the code tools run in: `sandbox.backend` decides what is acceptable, a real probe
//! decides what works (once, at start).

use std::path::PathBuf;

use deepsolve_settings::Settings;
use deepsolve_tools::{Sandbox, SandboxConfig, SandboxError, SandboxMode, Unavailable};

use crate::AppError;

/// Overrides the bwrap binary (unusual installs, and tests that need a broken one).
pub const BWRAP_ENV: &str = "DEEPSOLVE_BWRAP";

/// The sandbox `sandbox.backend` asks for, or why there is none.
pub async fn detect(settings: &Settings) -> Result<Sandbox, SandboxError> {
    let mode: SandboxMode = settings.sandbox.backend.parse()?;
    let mut config = SandboxConfig::with_mode(mode);
    config.seccomp = settings.sandbox.seccomp;
    if let Some(path) = std::env::var_os(BWRAP_ENV).filter(|p| !p.is_empty()) {
        config.bwrap = PathBuf::from(path);
    }
    Sandbox::detect(config).await
}

/// Whether `sandbox.backend` demands bubblewrap (then its absence is an error, not a warning).
pub fn is_required(settings: &Settings) -> bool {
    settings.sandbox.backend.trim() == "bwrap"
}

/// [`detect`], as the app uses it: no sandbox is an error only when one is required.
pub async fn for_settings(settings: &Settings) -> Result<Result<Sandbox, Unavailable>, AppError> {
    match detect(settings).await {
        Ok(sandbox) => Ok(Ok(sandbox)),
        Err(e) if is_required(settings) => Err(AppError::SandboxRequired(e)),
        Err(e) => Ok(Err(Unavailable(e.to_string()))),
    }
}
