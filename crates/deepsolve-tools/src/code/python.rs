//! `code_execution {code, timeout_s?}`: Python in the sandbox, one persistent interpreter per
//! turn. A turn that never runs code starts none: the interpreter is started in the
//! background when the streamed reply first names the tool (`announced`), so it comes up
//! while the model is still writing the code, and the call waits for it; without an
//! announcement the first call starts it. One that crashed or was killed is restarted for
//! the next call, and that call's result says the earlier names are gone.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use deepsolve_core::{Language, SolveConfig, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use deepsolve_sandbox::{
    CellOutcome, CellStatus, Interpreter, PythonOptions, Sandbox, SandboxError, Snapshot,
};
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

use super::sandboxed::{self, ENGINE_GRACE, Ended, Report};

use crate::toolset::PlaybookLine;

pub const CODE_EXECUTION: &str = "code_execution";
/// Its line in the playbook.
pub(crate) const PLAYBOOK: PlaybookLine = PlaybookLine {
    en: "`code_execution`: computation, symbolic algebra, plots, numerical checks",
    zh: "`code_execution`：计算、符号运算、作图、数值验算",
};
const MAX_CODE_CHARS: u64 = 200_000;
/// However long the interpreter takes to come up, the cell itself gets at least this much.
const MIN_CELL: Duration = Duration::from_secs(1);
/// Live interpreters across all turns (each is a Python process with its preloads, ~100 MB):
/// a busy server must not start one per concurrent turn without bound.
pub const DEFAULT_MAX_INTERPRETERS: usize = 32;

type Starting = JoinHandle<Result<Interpreter, SandboxError>>;

/// One turn's interpreter, as the calls of that turn see it.
#[derive(Default)]
struct Slot {
    ready: Option<Interpreter>,
    starting: Option<Starting>,
    /// Why the last interpreter is gone, for the next call to say.
    lost: Option<String>,
    /// Set while a call has the interpreter out; still set at the next call means that call
    /// was dropped (cancelled or timed out by the engine) and its interpreter killed with it.
    in_flight: bool,
    /// This turn's share of the interpreter cap, held while it has (or starts) one.
    permit: Option<OwnedSemaphorePermit>,
    /// `starting` was begun by an announcement (not by a restart after a call).
    announced: bool,
}

/// Where a call's interpreter came from, as its result's metadata says (`interpreter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// Kept from an earlier call of the turn.
    Kept,
    /// Started when the model's stream named the tool, before the call.
    Announced,
    /// Started after the earlier one was lost.
    Restarted,
    /// Started by this call.
    Call,
}

impl Origin {
    fn as_str(self) -> &'static str {
        match self {
            Origin::Kept => "kept",
            Origin::Announced => "announced",
            Origin::Restarted => "restarted",
            Origin::Call => "started_by_call",
        }
    }
}

pub struct CodeExecutionTool {
    spec: ToolSpec,
    sandbox: Sandbox,
    python: PythonOptions,
    max_timeout: Duration,
    turns: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Slot>>>>,
    permits: Arc<Semaphore>,
    max_interpreters: usize,
    /// Counts starts on an announcement (for tests and diagnostics).
    started_ahead: AtomicU64,
}

impl CodeExecutionTool {
    /// `max_timeout`: the default and largest per-call budget (`solve.code_timeout_s`).
    pub fn new(sandbox: Sandbox, python: PythonOptions, max_timeout: Duration) -> Self {
        let max_s = max_timeout.as_secs().max(1);
        CodeExecutionTool {
            spec: ToolSpec {
                name: CODE_EXECUTION.into(),
                description: format!(
                    "Run Python 3 in a sandbox. One interpreter per turn: names defined in earlier calls stay defined. Returns stdout, stderr, the value of a trailing expression or of the name a trailing assignment sets (like a notebook cell) and errors. numpy, sympy, scipy and matplotlib are installed; open matplotlib figures are saved as PNG files. The working directory is the turn's workspace; files written there come back as artifacts. No network. Default and maximum timeout: {max_s}s."
                ),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "code": {"type": "string", "minLength": 1, "maxLength": MAX_CODE_CHARS, "description": "Python source to run, like a notebook cell."},
                        "timeout_s": {"type": "number", "description": format!("Seconds before the cell is interrupted (1-{max_s}).")}
                    },
                    "required": ["code"],
                    "additionalProperties": false
                }),
            },
            sandbox,
            python,
            max_timeout: Duration::from_secs(max_s),
            turns: Mutex::new(HashMap::new()),
            permits: Arc::new(Semaphore::new(DEFAULT_MAX_INTERPRETERS)),
            max_interpreters: DEFAULT_MAX_INTERPRETERS,
            started_ahead: AtomicU64::new(0),
        }
    }

    /// At most `n` turns have an interpreter at once; a turn beyond that waits for one (up to
    /// its call's timeout) and is not started ahead.
    pub fn with_max_interpreters(mut self, n: usize) -> Self {
        let n = n.max(1);
        self.permits = Arc::new(Semaphore::new(n));
        self.max_interpreters = n;
        self
    }

    fn slot(&self, turn_id: &str) -> Arc<tokio::sync::Mutex<Slot>> {
        let mut turns = self.turns.lock().unwrap_or_else(|e| e.into_inner());
        turns.entry(turn_id.to_string()).or_default().clone()
    }

    async fn permit(&self, wait: Duration) -> Result<OwnedSemaphorePermit, ToolError> {
        let busy = || {
            ToolError::actionable(format!(
                "all {} Python sandboxes are in use by other turns; try again shortly",
                self.max_interpreters
            ))
        };
        match tokio::time::timeout(wait, self.permits.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(busy()),
        }
    }

    fn start(&self, workspace: PathBuf) -> Starting {
        let sandbox = self.sandbox.clone();
        let options = self.python.clone();
        // Spawned from a runtime worker thread, which lives as long as the runtime — bwrap's
        // --die-with-parent follows the spawning thread.
        tokio::spawn(async move { sandbox.start_python(&workspace, &options).await })
    }

    /// Interpreters started ahead, on an announcement, since this tool was built.
    pub fn started_ahead(&self) -> u64 {
        self.started_ahead.load(Ordering::Relaxed)
    }

    /// The turn's interpreter, ready, and where it came from: kept from the last call, started
    /// ahead, or a fresh one (noting that earlier names are gone when there was one before).
    async fn interpreter(
        &self,
        slot: &mut Slot,
        workspace: &Path,
        wait: Duration,
    ) -> Result<(Interpreter, Origin), ToolError> {
        if slot.in_flight {
            slot.in_flight = false;
            slot.lost.get_or_insert_with(|| {
                "the previous call was stopped before it finished".to_string()
            });
        }
        if let Some(interp) = slot.ready.take() {
            if interp.is_alive() {
                return Ok((interp, Origin::Kept));
            }
            // Between calls, the turn's other code (an `exec`, a background process) can push
            // the turn over a budget and the interpreter with it.
            slot.lost.get_or_insert_with(|| match interp.stopped_by() {
                Some(why) => format!("stopped between calls: {why}"),
                None => "the interpreter stopped".to_string(),
            });
        }
        let announced = std::mem::take(&mut slot.announced);
        let (handle, origin) = match slot.starting.take() {
            Some(handle) if announced => (handle, Origin::Announced),
            Some(handle) => (handle, Origin::Restarted),
            None => {
                if slot.permit.is_none() {
                    slot.permit = Some(self.permit(wait).await?);
                }
                (self.start(workspace.to_path_buf()), Origin::Call)
            }
        };
        let interp = started(handle).await?;
        if interp.is_alive() {
            return Ok((interp, origin));
        }
        // Started ahead, then stopped while it waited for this call: the turn's other code
        // pushed the turn over a budget. Once more, fresh.
        if let Some(why) = interp.stopped_by() {
            slot.lost
                .get_or_insert_with(|| format!("stopped between calls: {why}"));
        }
        let interp = started(self.start(workspace.to_path_buf())).await?;
        Ok((interp, Origin::Call))
    }
}

/// The interpreter a start task produced, or why there is none.
async fn started(handle: Starting) -> Result<Interpreter, ToolError> {
    match handle.await {
        Ok(Ok(interp)) => Ok(interp),
        // Not the tool's fault, and the model can act on it (use less, clean up).
        Ok(Err(SandboxError::Budget(why))) => Err(ToolError::actionable(format!(
            "the Python sandbox was stopped while starting: {why}"
        ))),
        Ok(Err(e)) => Err(ToolError::internal(format!(
            "the Python sandbox did not start: {e}"
        ))),
        Err(e) => Err(ToolError::internal(format!(
            "the Python sandbox did not start: {e}"
        ))),
    }
}

#[async_trait]
impl Tool for CodeExecutionTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn timeout(&self, config: &SolveConfig) -> Duration {
        Duration::from_secs(config.code_timeout_s) + ENGINE_GRACE
    }

    fn announced(&self, ctx: &ToolContext) {
        let Some(workspace) = ctx.workspace.clone() else {
            return;
        };
        let slot = self.slot(&ctx.turn_id);
        // A call holding the slot has (or is getting) the interpreter: nothing to start.
        let Ok(mut slot) = slot.try_lock() else {
            return;
        };
        if slot.ready.is_some() || slot.starting.is_some() {
            return;
        }
        // Start ahead only within the cap; otherwise the call waits for a free one.
        if slot.permit.is_none() {
            slot.permit = self.permits.clone().try_acquire_owned().ok();
        }
        if slot.permit.is_some() {
            slot.starting = Some(self.start(workspace));
            slot.announced = true;
            self.started_ahead.fetch_add(1, Ordering::Relaxed);
        }
    }

    async fn turn_finished(&self, ctx: &ToolContext) {
        let removed = {
            let mut turns = self.turns.lock().unwrap_or_else(|e| e.into_inner());
            turns.remove(&ctx.turn_id)
        };
        let Some(slot) = removed else {
            return;
        };
        let mut slot = slot.lock().await;
        if let Some(mut interp) = slot.ready.take() {
            interp.shutdown().await;
        }
        if let Some(handle) = slot.starting.take() {
            handle.abort();
            if let Ok(Ok(mut interp)) = handle.await {
                interp.shutdown().await;
            }
        }
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let called = Instant::now();
        let code = args["code"].as_str().unwrap_or_default().to_string();
        // The turn's config and deadline bound the call through the engine's deadline.
        let budget = sandboxed::call_timeout(&args, self.max_timeout)
            .min(ctx.time_left(ENGINE_GRACE, self.max_timeout));
        let workspace = sandboxed::workspace(ctx, CODE_EXECUTION)?;
        let slot = self.slot(&ctx.turn_id);
        let mut slot = slot.lock().await;
        let (mut interp, origin) = self.interpreter(&mut slot, &workspace, budget).await?;
        let lost_before = slot.lost.take();
        // The wait for a (re)start comes out of the call's budget, within reason.
        let cell_budget = budget.saturating_sub(called.elapsed()).max(MIN_CELL);
        let before = Snapshot::take(interp.workspace());
        slot.in_flight = true;
        // What the cell prints goes out as the call's progress while it runs.
        let live = super::live::LiveOutput::new(ctx.progress.clone());
        let watch = |bytes: &[u8]| live.push(bytes);
        let outcome = (interp.run_watched(&code, cell_budget, &ctx.cancel, &watch)).await;
        live.finish();
        slot.in_flight = false;
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => {
                slot.lost = Some(e.to_string());
                slot.starting = Some(self.start(workspace));
                return Err(ToolError::internal(format!(
                    "{e}; the interpreter will be restarted"
                )));
            }
        };
        let artifacts =
            sandboxed::artifacts(Snapshot::take(interp.workspace()).changes_since(&before));
        if outcome.status.state_lost() {
            slot.lost = Some(lost_reason(&outcome.status, budget));
            slot.starting = Some(self.start(workspace));
        } else {
            slot.ready = Some(interp);
        }
        drop(slot);
        let content = render(
            &outcome,
            lost_before.as_deref(),
            budget,
            &artifacts,
            ctx.language,
        );
        Ok(ToolOutput {
            content,
            ok: outcome.status == CellStatus::Ok,
            artifacts,
            metadata: metadata(&outcome, origin),
            ..ToolOutput::default()
        })
    }
}

fn lost_reason(status: &CellStatus, budget: Duration) -> String {
    match status {
        CellStatus::TimedOut => format!(
            "the previous call ran past {} and was killed",
            sandboxed::seconds(budget)
        ),
        CellStatus::Cancelled => "the previous call was cancelled".into(),
        CellStatus::Crashed(why) => why.clone(),
        CellStatus::Stopped(why) => format!("the previous call was stopped: {why}"),
        _ => "the interpreter stopped".into(),
    }
}

fn render(
    outcome: &CellOutcome,
    lost_before: Option<&str>,
    budget: Duration,
    artifacts: &[deepsolve_core::Artifact],
    language: Language,
) -> String {
    let mut r = Report::default();
    if let Some(why) = lost_before {
        r.line(format!(
            "[note] The Python interpreter was restarted ({why}): names defined in earlier calls are gone; define them again."
        ));
    }
    let limit = sandboxed::seconds(budget);
    match &outcome.status {
        CellStatus::Ok | CellStatus::Error => {}
        CellStatus::Interrupted => r.line(format!(
            "[status] timed out after {limit}: the cell was interrupted (KeyboardInterrupt) and processes it started were stopped. The interpreter and its names are kept. Output so far is below."
        )),
        CellStatus::TimedOut => r.line(format!(
            "[status] timed out after {limit} and did not stop on an interrupt: the interpreter was killed, so names defined in earlier calls are gone. Output so far is below."
        )),
        CellStatus::Cancelled => r.line("[status] cancelled: the interpreter was stopped and its state is gone."),
        CellStatus::Crashed(why) => r.line(format!(
            "[status] the interpreter crashed ({why}): names defined in earlier calls are gone. Output so far is below."
        )),
        CellStatus::Stopped(why) => r.line(sandboxed::stopped_line(why, Ended::Interpreter, language)),
    }
    r.output("stdout", &outcome.stdout);
    r.output("stderr", &outcome.stderr);
    if let Some(value) = &outcome.value {
        r.section("value", value);
    }
    if let Some(error) = &outcome.error {
        r.section("error", error);
    }
    r.files(artifacts);
    r.finish()
}

fn metadata(outcome: &CellOutcome, origin: Origin) -> Value {
    let status = match &outcome.status {
        CellStatus::Ok => "ok",
        CellStatus::Error => "error",
        CellStatus::Interrupted => "interrupted",
        CellStatus::TimedOut => "timed_out",
        CellStatus::Cancelled => "cancelled",
        CellStatus::Crashed(_) => "crashed",
        CellStatus::Stopped(_) => "stopped",
    };
    let stopped = match &outcome.status {
        CellStatus::Stopped(why) => json!(why.kind()),
        _ => Value::Null,
    };
    json!({
        "status": status,
        "stopped": stopped,
        "state_lost": outcome.status.state_lost(),
        "elapsed_ms": outcome.elapsed.as_millis() as u64,
        "stdout_bytes": outcome.stdout.total_bytes,
        "stderr_bytes": outcome.stderr.total_bytes,
        "figures": outcome.figures,
        "interpreter": origin.as_str(),
    })
}
