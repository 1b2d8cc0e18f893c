//! The sandbox the code tools run in: `sandbox.backend` decides what is acceptable, a real probe
//! decides what works (once, at start); the rest of the `sandbox` section sets each turn's
//! budgets.

use std::path::PathBuf;

use deepsolve_settings::{SandboxSettings, Settings};
use deepsolve_tools::{Limits, Sandbox, SandboxConfig, SandboxError, SandboxMode, Unavailable};

use crate::AppError;

/// Overrides the bwrap binary (unusual installs, and tests that need a broken one).
pub const BWRAP_ENV: &str = "DEEPSOLVE_BWRAP";

/// The sandbox `sandbox.backend` asks for, or why there is none.
pub async fn detect(settings: &Settings) -> Result<Sandbox, SandboxError> {
    let mode: SandboxMode = settings.sandbox.backend.parse()?;
    let mut config = SandboxConfig::with_mode(mode);
    config.seccomp = settings.sandbox.seccomp;
    config.limits = limits(&settings.sandbox);
    if let Some(path) = std::env::var_os(BWRAP_ENV).filter(|p| !p.is_empty()) {
        config.bwrap = PathBuf::from(path);
    }
    Sandbox::detect(config).await
}

/// Each turn's budgets from the `sandbox` section (already clamped by the settings). The
/// address space of one process follows the memory budget.
pub fn limits(sandbox: &SandboxSettings) -> Limits {
    const MIB: u64 = 1 << 20;
    let memory_bytes = sandbox.memory_mb.saturating_mul(MIB);
    Limits {
        memory_bytes,
        address_space_bytes: Limits::address_space_for(memory_bytes),
        processes: sandbox.max_processes,
        workspace_bytes: sandbox.workspace_mb.saturating_mul(MIB),
        workspace_files: sandbox.workspace_files,
        ..Limits::default()
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_section_sets_the_turn_budgets() {
        assert_eq!(limits(&SandboxSettings::default()), Limits::default());
        let scaled = limits(&SandboxSettings {
            memory_mb: 256,
            max_processes: 16,
            workspace_mb: 64,
            workspace_files: 500,
            ..SandboxSettings::default()
        });
        assert_eq!(scaled.memory_bytes, 256 << 20);
        assert_eq!(
            scaled.address_space_bytes,
            deepsolve_tools::Limits::address_space_for(256 << 20)
        );
        assert_eq!(scaled.processes, 16);
        assert_eq!(
            (scaled.workspace_bytes, scaled.workspace_files),
            (64 << 20, 500)
        );
        assert_eq!(scaled.effective_file_size(), 64 << 20);
    }
}
