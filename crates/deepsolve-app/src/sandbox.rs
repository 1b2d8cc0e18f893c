//! The sandbox the code tools run in: `sandbox.backend` decides what is acceptable, a real probe
//! decides what works (once, at start; a command-line process takes the last probe's verdict
//! while nothing it depends on changed and probes again beside the turn); the rest of the
//! `sandbox` section sets each turn's budgets.

use std::path::{Path, PathBuf};

use deepsolve_settings::{SandboxSettings, Settings};
use deepsolve_tools::{
    Limits, Recheck, Sandbox, SandboxConfig, SandboxError, SandboxMode, Unavailable,
};

use crate::AppError;

/// Overrides the bwrap binary (unusual installs, and tests that need a broken one).
pub const BWRAP_ENV: &str = "DEEPSOLVE_BWRAP";

/// The sandbox `sandbox.backend` asks for, or why there is none.
pub async fn detect(settings: &Settings) -> Result<Sandbox, SandboxError> {
    Sandbox::detect(config(settings)?).await
}

/// What the sandbox is set up from: the `sandbox` section and [`BWRAP_ENV`].
fn config(settings: &Settings) -> Result<SandboxConfig, SandboxError> {
    let mode: SandboxMode = settings.sandbox.backend.parse()?;
    let mut config = SandboxConfig::with_mode(mode);
    config.seccomp = settings.sandbox.seccomp;
    config.limits = limits(&settings.sandbox);
    if let Some(path) = std::env::var_os(BWRAP_ENV).filter(|p| !p.is_empty()) {
        config.bwrap = PathBuf::from(path);
    }
    Ok(config)
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
    as_app(settings, detect(settings).await)
}

/// [`for_settings`], with the probe's verdict kept in `file` between processes
/// (`Sandbox::detect_remembered`: while nothing it depends on changes, the sandbox is set up
/// without probing), and the [`Recheck`] to run beside the turn when it was.
pub async fn for_settings_remembered(
    settings: &Settings,
    file: &Path,
) -> (
    Result<Result<Sandbox, Unavailable>, AppError>,
    Option<Recheck>,
) {
    let (detected, recheck) = match config(settings) {
        Ok(config) => Sandbox::detect_remembered(config, file).await,
        Err(e) => (Err(e), None),
    };
    (as_app(settings, detected), recheck)
}

/// Where a command-line process keeps the probe's verdict: the user's cache directory.
pub fn probe_file() -> Option<PathBuf> {
    dirs::cache_dir().map(|dir| dir.join("deepsolve").join("sandbox-probe.json"))
}

fn as_app(
    settings: &Settings,
    detected: Result<Sandbox, SandboxError>,
) -> Result<Result<Sandbox, Unavailable>, AppError> {
    match detected {
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
