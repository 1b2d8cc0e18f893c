//! The code tools (`code_execution`, `exec`) for a `solve` turn: auto-mounted when a sandbox
//! backend works (checked once, at startup, by a real probe), not mounted — with a one-line
//! reason — when none does, and an error when `tools.sandbox: bwrap` demands one that is not
//! there. Each turn gets its own workspace, kept afterwards so its artifacts survive.

use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use deepsolve_core::ToolRef;
use deepsolve_settings::Settings;
use deepsolve_tools::{
    CODE_EXECUTION, CodeExecutionTool, EXEC, ExecTool, PythonOptions, Sandbox, SandboxConfig,
    SandboxError, SandboxMode,
};

/// Overrides the bwrap binary (unusual installs, and tests that need a broken one).
const BWRAP_ENV: &str = "DEEPSOLVE_BWRAP";

/// The sandbox `tools.sandbox` asks for, or why there is none.
pub async fn detect(settings: &Settings) -> Result<Sandbox, SandboxError> {
    let mode: SandboxMode = settings.tools.sandbox.parse()?;
    let mut config = SandboxConfig::with_mode(mode);
    if let Some(path) = std::env::var_os(BWRAP_ENV).filter(|p| !p.is_empty()) {
        config.bwrap = PathBuf::from(path);
    }
    Sandbox::detect(config).await
}

/// The code tools and their names, or nothing (after saying why on stderr).
pub async fn mount(settings: &Settings) -> anyhow::Result<Option<(Vec<ToolRef>, Vec<String>)>> {
    let sandbox = match detect(settings).await {
        Ok(sandbox) => sandbox,
        Err(e) if settings.tools.sandbox.trim() == "bwrap" => {
            bail!("tools.sandbox is `bwrap`, but {e}")
        }
        Err(e) => {
            eprintln!("warning: code tools are off: {e} (see `deepsolve doctor`)");
            return Ok(None);
        }
    };
    if let Some(warning) = sandbox.warning() {
        eprintln!("WARNING: {warning}");
    }
    let limit = Duration::from_secs(settings.solve.code_timeout_s);
    let tools: Vec<ToolRef> = vec![
        std::sync::Arc::new(CodeExecutionTool::new(
            sandbox.clone(),
            PythonOptions::default(),
            limit,
        )),
        std::sync::Arc::new(ExecTool::new(sandbox, limit)),
    ];
    Ok(Some((tools, vec![CODE_EXECUTION.into(), EXEC.into()])))
}

/// Where a turn's files live: `$XDG_DATA_HOME/deepsolve/turns/<turn id>` (created now, kept
/// after the turn).
pub fn turn_workspace(turn_id: &str) -> anyhow::Result<PathBuf> {
    let base = dirs::data_dir()
        .or_else(|| dirs::home_dir().map(|h| h.join(".local/share")))
        .context("no data directory for turn workspaces (set XDG_DATA_HOME)")?;
    let dir = base.join("deepsolve").join("turns").join(turn_id);
    // Private to this user: the turn's files are the user's data.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("cannot create the turn's workspace {}", dir.display()))?;
    Ok(dir)
}
