//! One-shot commands: `sh -c` in the sandbox, output read with a cap while it streams, the
//! whole group killed on timeout or cancel, partial output kept.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::budget::{Member, Stopped};
use crate::capture::{Capture, Captured};
use crate::error::SandboxError;
use crate::launch::{Backend, Launch};
use crate::pipe::InPipe;
use crate::process::{SandboxChild, describe_status};
use crate::sandbox::Sandbox;

/// After the process ends, output still in flight gets this long to arrive.
const DRAIN_GRACE: Duration = Duration::from_millis(300);

/// Whether a call returns only once every process of its sandbox is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Teardown {
    /// Wait: nothing the sandbox still does (a last write) is then taken for the next call's.
    Wait,
    /// Return once the root is reaped. For the probe alone: its scratch directory is its own
    /// and removed after it, and a pid namespace takes ~5 ms more to die, which every turn's
    /// first request would wait for.
    Skip,
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitKind {
    /// It exited with this status (a signal shows as 128 + signal, the shell's convention).
    Exited(i32),
    TimedOut,
    Cancelled,
    /// A budget of the turn was exceeded: the command and everything it started were killed.
    Stopped(Stopped),
}

#[derive(Debug, Clone)]
pub struct ExecOutcome {
    pub stdout: Captured,
    pub stderr: Captured,
    pub exit: ExitKind,
    /// How the host saw the sandbox end (e.g. "exit status 0").
    pub detail: String,
    pub elapsed: Duration,
}

impl ExecOutcome {
    pub fn success(&self) -> bool {
        self.exit == ExitKind::Exited(0)
    }
}

/// Sets the process limit inside the sandbox's user namespace, then becomes `sh -c COMMAND`
/// (see `Limits::sandbox_nproc` for why this is not an rlimit set from outside).
const LAUNCHER: &str = "import os, resource, sys\nn = int(sys.argv[1])\nif n > 0:\n    resource.setrlimit(resource.RLIMIT_NPROC, (n, n))\nos.execv('/bin/sh', ['sh', '-c', sys.argv[2]])\n";

impl Sandbox {
    /// Run `command` with `sh -c` in the workspace.
    pub async fn run_command(
        &self,
        command: &str,
        workspace: &Path,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<ExecOutcome, SandboxError> {
        let python = self.config().python.as_os_str().to_owned();
        let argv: Vec<OsString> = vec![
            python,
            "-I".into(),
            "-B".into(),
            "-c".into(),
            LAUNCHER.into(),
            self.inner_nproc().to_string().into(),
            command.into(),
        ];
        self.run_argv(argv, Some(workspace), timeout, cancel).await
    }

    /// Run a program (argv as seen inside the sandbox), optionally with the workspace.
    pub async fn run_argv(
        &self,
        argv: Vec<OsString>,
        workspace: Option<&Path>,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<ExecOutcome, SandboxError> {
        self.run_once(argv, workspace, timeout, cancel, Teardown::Wait)
            .await
    }

    /// [`Self::run_argv`], with the wait for the sandbox's end chosen.
    pub(crate) async fn run_once(
        &self,
        argv: Vec<OsString>,
        workspace: Option<&Path>,
        timeout: Duration,
        cancel: &CancellationToken,
        teardown: Teardown,
    ) -> Result<ExecOutcome, SandboxError> {
        let started = Instant::now();
        let limits = self.limits().clone();
        let workspace = match workspace {
            Some(ws) => Some(self.prepare_workspace(ws)?),
            None => None,
        };
        let (spawned, member) = self
            .spawn(
                Launch {
                    argv,
                    workspace: workspace.as_deref(),
                    limits: &limits,
                    cpu_s: timeout.as_secs() + 1,
                    control: None,
                    cgroup: None,
                },
                true,
            )
            .map_err(SandboxError::Spawn)?;
        let mut run = Run {
            member,
            child: spawned.child,
            stdout: InPipe::new(spawned.stdout)?,
            stderr: InPipe::new(spawned.stderr)?,
            out: Capture::new(limits.output_bytes),
            err: Capture::new(limits.output_bytes),
        };
        let exit = run.pump(started + timeout, cancel).await?;
        let status = run.child.reap().await?;
        if teardown == Teardown::Wait {
            run.member.gone().await;
        }
        let exit = match exit {
            Some(cut @ (ExitKind::Cancelled | ExitKind::Stopped(_))) => cut,
            // A budget has the last word: a killed sandbox's status (or its running out of
            // time while the watchdog killed it) is only the symptom.
            cut => match run.member.settle() {
                Some(why) => ExitKind::Stopped(why),
                None => cut.unwrap_or_else(|| ExitKind::Exited(exit_code(&status))),
            },
        };
        Ok(ExecOutcome {
            stdout: run.out.finish(),
            stderr: run.err.finish(),
            exit,
            detail: describe_status(&status),
            elapsed: started.elapsed(),
        })
    }

    /// The process limit the launcher sets inside (none without a sandbox: there it would
    /// count every process of the host user).
    fn inner_nproc(&self) -> u64 {
        match self.backend() {
            Backend::Unsandboxed => 0,
            Backend::Bwrap { .. } => self.limits().sandbox_nproc(),
        }
    }
}

struct Run {
    member: Member,
    child: SandboxChild,
    stdout: InPipe,
    stderr: InPipe,
    out: Capture,
    err: Capture,
}

impl Run {
    /// Read both streams until they close (every process holding them is gone), the
    /// deadline passes or the call is cancelled. `Some` when the run was cut short.
    async fn pump(
        &mut self,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<Option<ExitKind>, SandboxError> {
        let deadline = tokio::time::Instant::from_std(deadline);
        while !(self.stdout.is_eof() && self.stderr.is_eof()) {
            tokio::select! {
                r = self.stdout.read_into(&mut self.out), if !self.stdout.is_eof() => { r?; }
                r = self.stderr.read_into(&mut self.err), if !self.stderr.is_eof() => { r?; }
                _ = tokio::time::sleep_until(deadline) => {
                    self.stop().await?;
                    return Ok(Some(ExitKind::TimedOut));
                }
                _ = cancel.cancelled() => {
                    self.stop().await?;
                    return Ok(Some(ExitKind::Cancelled));
                }
                why = self.member.stopped() => {
                    self.stop().await?;
                    return Ok(Some(ExitKind::Stopped(why)));
                }
            }
        }
        Ok(None)
    }

    /// Kill the group, then keep what the pipes still hold (the partial output).
    async fn stop(&mut self) -> Result<(), SandboxError> {
        self.child.kill().await?;
        let until = tokio::time::Instant::now() + DRAIN_GRACE;
        while !(self.stdout.is_eof() && self.stderr.is_eof()) {
            let budget = 4 << 20;
            let got = self.stdout.drain_into(&mut self.out, budget)?
                + self.stderr.drain_into(&mut self.err, budget)?;
            if tokio::time::Instant::now() >= until {
                break;
            }
            if got == 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        Ok(())
    }
}

fn exit_code(status: &std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(-1)
}
