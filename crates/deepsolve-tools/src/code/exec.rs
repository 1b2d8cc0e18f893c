//! `exec {command, timeout_s?}`: a shell command in the same sandbox and workspace as
//! `code_execution`, for producing files (a PDF, a chart, a spreadsheet). New or changed files
//! come back as artifacts.

use std::time::Duration;

use async_trait::async_trait;
use deepsolve_core::{Language, SolveConfig, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use deepsolve_sandbox::{ExecOutcome, ExitKind, Sandbox, Snapshot};
use serde_json::{Value, json};

use super::sandboxed::{self, ENGINE_GRACE, Ended, Report};

use crate::toolset::PlaybookLine;

pub const EXEC: &str = "exec";
/// Its line in the playbook.
pub(crate) const PLAYBOOK: PlaybookLine = PlaybookLine {
    en: "`exec`: produce files (a worked-solution PDF, a chart, a spreadsheet)",
    zh: "`exec`：生成文件（解题 PDF、图表、表格）",
};
const MAX_COMMAND_CHARS: u64 = 100_000;

pub struct ExecTool {
    spec: ToolSpec,
    sandbox: Sandbox,
    max_timeout: Duration,
}

impl ExecTool {
    /// `max_timeout`: the default and largest per-call budget (`solve.code_timeout_s`).
    pub fn new(sandbox: Sandbox, max_timeout: Duration) -> Self {
        let max_s = max_timeout.as_secs().max(1);
        ExecTool {
            spec: ToolSpec {
                name: EXEC.into(),
                description: format!(
                    "Run a shell command (sh -c) in the sandbox, in the turn's workspace (the same files code_execution sees), to produce files such as a PDF, a chart or a spreadsheet. Returns the exit status, stdout and stderr; new or changed files come back as artifacts. No network. Default and maximum timeout: {max_s}s."
                ),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "command": {"type": "string", "minLength": 1, "maxLength": MAX_COMMAND_CHARS, "description": "The shell command."},
                        "timeout_s": {"type": "number", "description": format!("Seconds before the command is killed (1-{max_s}).")}
                    },
                    "required": ["command"],
                    "additionalProperties": false
                }),
            },
            sandbox,
            max_timeout: Duration::from_secs(max_s),
        }
    }
}

#[async_trait]
impl Tool for ExecTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn timeout(&self, config: &SolveConfig) -> Duration {
        Duration::from_secs(config.code_timeout_s) + ENGINE_GRACE
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let command = args["command"].as_str().unwrap_or_default();
        // The turn's config and deadline bound the call through the engine's deadline.
        let budget = sandboxed::call_timeout(&args, self.max_timeout)
            .min(ctx.time_left(ENGINE_GRACE, self.max_timeout));
        let workspace = sandboxed::workspace(ctx, EXEC)?;
        let workspace = self
            .sandbox
            .prepare_workspace(&workspace)
            .map_err(|e| ToolError::internal(e.to_string()))?;
        let before = Snapshot::take(&workspace);
        let outcome = self
            .sandbox
            .run_command(command, &workspace, budget, &ctx.cancel)
            .await
            .map_err(|e| ToolError::internal(e.to_string()))?;
        let artifacts = sandboxed::artifacts(Snapshot::take(&workspace).changes_since(&before));
        let mut r = Report::default();
        r.line(status_line(&outcome, budget, ctx.language));
        r.output("stdout", &outcome.stdout);
        r.output("stderr", &outcome.stderr);
        r.files(&artifacts);
        Ok(ToolOutput {
            content: r.finish(),
            ok: outcome.success(),
            metadata: json!({
                "exit": match outcome.exit { ExitKind::Exited(code) => json!(code), _ => Value::Null },
                "timed_out": outcome.exit == ExitKind::TimedOut,
                "stopped": match &outcome.exit { ExitKind::Stopped(why) => json!(why.kind()), _ => Value::Null },
                "elapsed_ms": outcome.elapsed.as_millis() as u64,
                "stdout_bytes": outcome.stdout.total_bytes,
                "stderr_bytes": outcome.stderr.total_bytes,
            }),
            artifacts,
            ..ToolOutput::default()
        })
    }
}

fn status_line(outcome: &ExecOutcome, budget: Duration, language: Language) -> String {
    match outcome.exit {
        ExitKind::Exited(code) => format!("[exit status] {code}"),
        ExitKind::TimedOut => format!(
            "[status] timed out after {}: the command and everything it started were killed. Output so far is below.",
            sandboxed::seconds(budget)
        ),
        ExitKind::Cancelled => "[status] cancelled: the command was killed.".into(),
        ExitKind::Stopped(why) => sandboxed::stopped_line(&why, Ended::Command, language),
    }
}
