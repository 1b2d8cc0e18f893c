//! The persistent interpreter: one sandboxed Python per turn, so names defined in one call
//! exist in the next.
//!
//! The driver (`driver.py`) runs each cell like a notebook does — statements, then the value
//! of a trailing expression — and saves open matplotlib figures as PNGs in the workspace. The
//! host talks to it over two pipes with length-prefixed JSON frames and reads the cell's
//! stdout/stderr from their own pipes while it runs (capped, head and tail kept).
//!
//! Timeouts are two-stage: at the deadline the driver is asked to interrupt the cell (a
//! `KeyboardInterrupt`, which keeps the interpreter and its state); a cell that does not stop
//! within `INTERRUPT_GRACE` is killed with the whole sandbox, and the state is lost.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;
use tokio_util::sync::CancellationToken;

use crate::budget::{Member, Stopped};
use crate::capture::{Capture, Captured};
use crate::error::SandboxError;
use crate::launch::Launch;
use crate::pipe::{FrameReader, InPipe, Sink, encode_frame};
use crate::process::{SandboxChild, describe_status};
use crate::sandbox::{Sandbox, unique};

const DRIVER: &str = include_str!("driver.py");
/// Compiles the driver under its own file name, so tracebacks can leave its frames out.
const LOADER: &str = "import sys; exec(compile(sys.argv[2], '<deepsolve driver>', 'exec'))";
const MAX_FRAME: usize = 4 << 20;
/// A cell past its deadline gets this long to stop on an interrupt before the kill.
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(1);
/// Stale output left in the pipes between cells (a background process) is discarded up to this.
const STALE_LIMIT: usize = 1 << 20;
/// After the reply, at most this much more is read: a background writer must not keep the
/// host reading forever.
const FINAL_DRAIN: usize = 8 << 20;

/// How the interpreter is started.
#[derive(Debug, Clone)]
pub struct PythonOptions {
    /// Modules imported at start-up, so the first cell that needs them does not pay for it
    /// (they land in `sys.modules`, not in the user's names).
    pub preload: Vec<String>,
    /// Import them on a thread of the driver after it reports ready, rather than before: a
    /// first cell that does not need them runs at once, and one that imports them waits on
    /// Python's import lock for the rest of that import only.
    pub preload_in_background: bool,
    pub start_timeout: Duration,
}

impl Default for PythonOptions {
    fn default() -> Self {
        PythonOptions {
            preload: vec!["numpy".into(), "sympy".into()],
            preload_in_background: true,
            start_timeout: Duration::from_secs(60),
        }
    }
}

/// How a cell ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CellStatus {
    Ok,
    /// The code raised; the traceback is in `error`.
    Error,
    /// It ran past its time and stopped on the interrupt: the interpreter and its names remain.
    Interrupted,
    /// It ran past its time and did not stop: the interpreter was killed, its state is lost.
    TimedOut,
    /// The call was cancelled: the interpreter was killed, its state is lost.
    Cancelled,
    /// The interpreter died on its own (e.g. `os._exit`, a signal, a limit): state lost.
    Crashed(String),
    /// A budget of the turn was exceeded: the interpreter was killed, its state is lost.
    Stopped(Stopped),
}

impl CellStatus {
    /// Whether the interpreter is gone after this cell.
    pub fn state_lost(&self) -> bool {
        matches!(
            self,
            CellStatus::TimedOut
                | CellStatus::Cancelled
                | CellStatus::Crashed(_)
                | CellStatus::Stopped(_)
        )
    }
}

#[derive(Debug, Clone)]
pub struct CellOutcome {
    pub status: CellStatus,
    pub stdout: Captured,
    pub stderr: Captured,
    /// `repr` of the trailing expression's value, when it was not `None`.
    pub value: Option<String>,
    /// The traceback, trimmed to the user's code.
    pub error: Option<String>,
    /// Figures saved this cell (file names in the workspace).
    pub figures: Vec<String>,
    pub elapsed: Duration,
}

/// What the driver said when it came up.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ReadyInfo {
    #[serde(default)]
    pub python: String,
    /// Imported before ready (none when they are imported in the background).
    #[serde(default)]
    pub preloaded: Vec<String>,
    #[serde(default)]
    pub preload_failed: Vec<String>,
    /// Being imported in the background as the interpreter reports ready.
    #[serde(default)]
    pub preloading: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Reply {
    id: Option<u64>,
    status: String,
    value: Option<String>,
    error: Option<String>,
    #[serde(default)]
    figures: Vec<String>,
}

pub struct Interpreter {
    child: SandboxChild,
    /// Its place in the turn's budget.
    member: Member,
    requests: pipe::Sender,
    replies: FrameReader,
    stdout: InPipe,
    stderr: InPipe,
    output_bytes: usize,
    next_id: u64,
    /// Set while a cell runs; still set at the next call means the last call was dropped
    /// mid-cell (cancelled from outside), so the interpreter is in an unknown state.
    busy: bool,
    alive: bool,
    token: String,
    workspace: PathBuf,
    ready: ReadyInfo,
    startup: Duration,
}

impl Sandbox {
    /// Start an interpreter for `workspace` and wait until it is ready.
    pub async fn start_python(
        &self,
        workspace: &Path,
        options: &PythonOptions,
    ) -> Result<Interpreter, SandboxError> {
        let started = Instant::now();
        self.count_interpreter_start();
        let workspace = self.prepare_workspace(workspace)?;
        let token = format!("deepsolve-py-{}-{}", std::process::id(), unique());
        let isolated = self.is_isolated();
        let driver_options = json!({
            "token": token,
            "workdir": self.inner_workdir(&workspace),
            // Outside a sandbox these would act on the host user's processes: leave them off.
            "nproc": if isolated { self.limits().sandbox_nproc() } else { 0 },
            "isolated": isolated,
            "preload": options.preload,
            "preload_in_background": options.preload_in_background,
        });
        let argv: Vec<OsString> = vec![
            self.config().python.as_os_str().to_owned(),
            "-I".into(),
            "-B".into(),
            "-c".into(),
            LOADER.into(),
            driver_options.to_string().into(),
            DRIVER.into(),
        ];
        let (req_r, req_w) = std::io::pipe()?;
        let (rep_r, rep_w) = std::io::pipe()?;
        let limits = self.limits().clone();
        let (spawned, member) = self
            .spawn(
                Launch {
                    argv,
                    workspace: Some(&workspace),
                    limits: &limits,
                    cpu_s: limits.interpreter_cpu_s,
                    control: Some((req_r.into(), rep_w.into())),
                    cgroup: None,
                },
                false,
            )
            .map_err(SandboxError::Spawn)?;
        let mut interp = Interpreter {
            child: spawned.child,
            member,
            requests: pipe::Sender::from_owned_fd(req_w.into())?,
            replies: FrameReader::new(InPipe::new(rep_r)?, MAX_FRAME),
            stdout: InPipe::new(spawned.stdout)?,
            stderr: InPipe::new(spawned.stderr)?,
            output_bytes: limits.output_bytes,
            next_id: 1,
            busy: false,
            alive: true,
            token,
            workspace,
            ready: ReadyInfo::default(),
            startup: Duration::ZERO,
        };
        interp.await_ready(options.start_timeout).await?;
        interp.startup = started.elapsed();
        Ok(interp)
    }
}

impl Interpreter {
    async fn await_ready(&mut self, limit: Duration) -> Result<(), SandboxError> {
        let mut err = Capture::new(16 * 1024);
        let mut out = Capture::new(16 * 1024);
        let deadline = tokio::time::Instant::now() + limit;
        let frame = loop {
            tokio::select! {
                f = self.replies.next_frame() => break f,
                r = self.stdout.read_into(&mut out), if !self.stdout.is_eof() => { r?; }
                r = self.stderr.read_into(&mut err), if !self.stderr.is_eof() => { r?; }
                _ = tokio::time::sleep_until(deadline) => {
                    self.shutdown().await;
                    return Err(SandboxError::Start(format!("not ready after {}s", limit.as_secs())));
                }
                why = self.member.stopped() => {
                    self.shutdown().await;
                    return Err(SandboxError::Budget(why));
                }
            }
        };
        let why = match frame {
            Ok(Some(body)) => match serde_json::from_slice::<ReadyInfo>(&body) {
                Ok(info) => {
                    self.ready = info;
                    return Ok(());
                }
                Err(e) => format!("bad ready frame ({e})"),
            },
            Ok(None) => "it exited during start-up".to_string(),
            Err(e) => e.to_string(),
        };
        // Whatever it (or bwrap) said on stderr is the useful part of the error.
        self.shutdown().await;
        let _ = self.stderr.drain_into(&mut err, 1 << 16);
        let said = err.finish().text;
        let said = said.trim();
        Err(SandboxError::Start(if said.is_empty() {
            why
        } else {
            format!("{why}: {said}")
        }))
    }

    /// Run one cell. `timeout` is the cell's budget (the interrupt comes then; the kill
    /// `INTERRUPT_GRACE` later); `cancel` kills at once. Dropping this future mid-cell leaves
    /// the interpreter marked busy: the next call kills it and reports it dead.
    pub async fn run(
        &mut self,
        code: &str,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<CellOutcome, SandboxError> {
        self.run_watched(code, timeout, cancel, &|_: &[u8]| {})
            .await
    }

    /// [`Interpreter::run`], handing `watch` what the cell writes (stdout and stderr, as it
    /// arrives, uncapped) while it runs: a front end can show the output as it prints.
    pub async fn run_watched(
        &mut self,
        code: &str,
        timeout: Duration,
        cancel: &CancellationToken,
        watch: &(dyn Fn(&[u8]) + Sync),
    ) -> Result<CellOutcome, SandboxError> {
        if self.busy {
            self.shutdown().await;
        }
        if !self.alive {
            return Err(SandboxError::Dead);
        }
        self.busy = true;
        self.member.set_busy(true);
        let started = Instant::now();
        let mut cell = Cell {
            out: Capture::new(self.output_bytes),
            err: Capture::new(self.output_bytes),
        };
        self.discard_stale()?;
        let id = self.next_id;
        self.next_id += 1;
        let request =
            json!({"op": "run", "id": id, "code": code, "cpu_s": timeout.as_secs().max(1)});
        if let Err(e) = self.send(&request).await {
            self.shutdown().await;
            return Err(e);
        }
        let status = self.wait_reply(id, timeout, cancel, &mut cell, watch).await;
        let (status, reply) = match status {
            Ok(Ended::Replied(reply)) => (reply_status(&reply.status), Some(reply)),
            Ok(Ended::Stopped(status)) => (status, None),
            Err(e) => {
                self.shutdown().await;
                return Err(e);
            }
        };
        let status = self.judge(status).await;
        // Everything the cell wrote before its reply is in the pipes now; a killed sandbox's
        // last words too.
        self.stdout
            .drain_into(&mut Watched(&mut cell.out, watch), FINAL_DRAIN)?;
        self.stderr
            .drain_into(&mut Watched(&mut cell.err, watch), FINAL_DRAIN)?;
        self.busy = false;
        self.member.set_busy(false);
        let reply = reply.unwrap_or(Reply {
            id: Some(id),
            status: String::new(),
            value: None,
            error: None,
            figures: Vec::new(),
        });
        Ok(CellOutcome {
            status,
            stdout: cell.out.finish(),
            stderr: cell.err.finish(),
            value: reply.value,
            error: reply.error,
            figures: reply.figures,
            elapsed: started.elapsed(),
        })
    }

    async fn wait_reply(
        &mut self,
        id: u64,
        timeout: Duration,
        cancel: &CancellationToken,
        cell: &mut Cell,
        watch: &(dyn Fn(&[u8]) + Sync),
    ) -> Result<Ended, SandboxError> {
        let mut deadline = tokio::time::Instant::now() + timeout;
        let mut interrupted = false;
        let mut out = Watched(&mut cell.out, watch);
        let mut err = Watched(&mut cell.err, watch);
        loop {
            tokio::select! {
                frame = self.replies.next_frame() => match frame {
                    Ok(Some(body)) => {
                        let Ok(reply) = serde_json::from_slice::<Reply>(&body) else {
                            return Err(SandboxError::Protocol("an unreadable reply frame".into()));
                        };
                        // A stray frame (e.g. forged by the cell itself) is not this reply.
                        if reply.id == Some(id) {
                            return Ok(Ended::Replied(reply));
                        }
                    }
                    Ok(None) => return Ok(Ended::Stopped(self.crashed().await)),
                    Err(e) => return Err(SandboxError::Protocol(e.to_string())),
                },
                r = self.stdout.read_into(&mut out), if !self.stdout.is_eof() => { r?; }
                r = self.stderr.read_into(&mut err), if !self.stderr.is_eof() => { r?; }
                _ = tokio::time::sleep_until(deadline) => {
                    if interrupted {
                        self.kill().await;
                        return Ok(Ended::Stopped(CellStatus::TimedOut));
                    }
                    interrupted = true;
                    deadline = tokio::time::Instant::now() + INTERRUPT_GRACE;
                    if self.send(&json!({"op": "interrupt", "id": id})).await.is_err() {
                        self.kill().await;
                        return Ok(Ended::Stopped(CellStatus::TimedOut));
                    }
                }
                _ = cancel.cancelled() => {
                    self.kill().await;
                    return Ok(Ended::Stopped(CellStatus::Cancelled));
                }
                why = self.member.stopped() => {
                    self.kill().await;
                    return Ok(Ended::Stopped(CellStatus::Stopped(why)));
                }
            }
        }
    }

    /// A budget has the last word on how a cell ended: a killed interpreter's exit (or its
    /// running out of time while the watchdog killed it) is only the symptom. A cell that
    /// ended over a budget stops the interpreter too, however quickly it ran.
    async fn judge(&mut self, status: CellStatus) -> CellStatus {
        if matches!(status, CellStatus::Cancelled | CellStatus::Stopped(_)) {
            return status;
        }
        match self.member.settle() {
            Some(why) => {
                self.kill().await;
                CellStatus::Stopped(why)
            }
            None => status,
        }
    }

    async fn send(&mut self, message: &serde_json::Value) -> Result<(), SandboxError> {
        let frame = encode_frame(message.to_string().as_bytes());
        self.requests.write_all(&frame).await?;
        Ok(())
    }

    fn discard_stale(&mut self) -> Result<(), SandboxError> {
        let mut sink = Capture::new(0);
        self.stdout.drain_into(&mut sink, STALE_LIMIT)?;
        self.stderr.drain_into(&mut sink, STALE_LIMIT)?;
        Ok(())
    }

    /// The driver's reply pipe closed: it died. Reap it and say how.
    async fn crashed(&mut self) -> CellStatus {
        self.alive = false;
        let killed = self.child.kill().await;
        self.member.gone().await;
        match killed {
            Ok(status) => CellStatus::Crashed(format!(
                "the interpreter exited ({})",
                describe_status(&status)
            )),
            Err(e) => CellStatus::Crashed(format!("the interpreter exited ({e})")),
        }
    }

    async fn kill(&mut self) {
        self.alive = false;
        let _ = self.child.kill().await;
        self.member.gone().await;
    }

    /// Stop the interpreter and its whole sandbox now.
    pub async fn shutdown(&mut self) {
        self.busy = false;
        self.member.set_busy(false);
        self.kill().await;
    }

    pub fn is_alive(&self) -> bool {
        self.alive && !self.busy && self.member.reason().is_none()
    }

    /// The budget that stopped this interpreter (between calls too: the turn's other code can
    /// push it over).
    pub fn stopped_by(&self) -> Option<Stopped> {
        self.member.reason()
    }

    /// A string unique to this interpreter that appears in its processes' command lines
    /// (tests use it to prove nothing outlives a kill).
    pub fn token(&self) -> &str {
        &self.token
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    pub fn ready_info(&self) -> &ReadyInfo {
        &self.ready
    }

    /// Time from spawn to ready (preloads included).
    pub fn startup(&self) -> Duration {
        self.startup
    }
}

struct Cell {
    out: Capture,
    err: Capture,
}

/// A cell's output going to its capture and, as it arrives, to a watcher.
struct Watched<'a>(&'a mut Capture, &'a (dyn Fn(&[u8]) + Sync));

impl Sink for Watched<'_> {
    fn push(&mut self, bytes: &[u8]) {
        self.0.push(bytes);
        (self.1)(bytes);
    }
}

enum Ended {
    Replied(Reply),
    Stopped(CellStatus),
}

fn reply_status(status: &str) -> CellStatus {
    match status {
        "ok" => CellStatus::Ok,
        "interrupted" => CellStatus::Interrupted,
        _ => CellStatus::Error,
    }
}
