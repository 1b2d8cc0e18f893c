//! A sandboxed process and its whole process group, killed together.
//!
//! The child leads its own process group. With bwrap, the group holds bwrap itself; the
//! sandboxed programs live in a pid namespace whose init dies with bwrap (`--die-with-parent`),
//! and the kernel then kills every process in that namespace — grandchildren that called
//! `setsid` included. Without bwrap, the group kill is all there is.
//!
//! The group is only ever signalled while the leader is un-reaped (alive or a zombie), so its
//! pgid cannot have been recycled for an unrelated process.

use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use tokio::process::Child;

/// How long a group gets between SIGTERM and SIGKILL.
const TERM_GRACE: Duration = Duration::from_millis(200);

pub(crate) struct SandboxChild {
    child: Child,
    pid: Option<i32>,
    status: Option<ExitStatus>,
}

impl SandboxChild {
    pub(crate) fn new(child: Child) -> Self {
        let pid = child.id().and_then(|p| i32::try_from(p).ok());
        SandboxChild {
            child,
            pid,
            status: None,
        }
    }

    /// The leader's pid (also the group id); `None` once reaped.
    pub(crate) fn pid(&self) -> Option<i32> {
        self.pid.filter(|_| self.status.is_none())
    }

    fn signal_group(&self, signal: libc::c_int) {
        if let Some(pid) = self.pid() {
            // SAFETY: killpg on our own, un-reaped child's group. ESRCH (already gone) is fine.
            unsafe { libc::killpg(pid, signal) };
        }
    }

    /// Whether the leader has exited, without reaping it (so the group stays safe to signal).
    fn has_exited(&self) -> bool {
        let Some(pid) = self.pid() else {
            return true;
        };
        // SAFETY: waitid with WNOWAIT only inspects our own child; the siginfo is ours.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let r = libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            );
            r == 0 && info.si_pid() != 0
        }
    }

    /// SIGTERM to the group, a short grace, SIGKILL to the group, then reap the leader.
    pub(crate) async fn kill(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        self.signal_group(libc::SIGTERM);
        let until = tokio::time::Instant::now() + TERM_GRACE;
        while !self.has_exited() && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.reap().await
    }

    /// SIGKILL to whatever is left of the group, then reap the leader. Used after the leader
    /// finished on its own too: stragglers it left behind die with the group.
    pub(crate) async fn reap(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        self.signal_group(libc::SIGKILL);
        let status = self.child.wait().await?;
        self.status = Some(status);
        Ok(status)
    }

    /// Synchronous SIGKILL to the group (for `Drop` paths that cannot await).
    pub(crate) fn kill_now(&self) {
        self.signal_group(libc::SIGKILL);
    }
}

impl Drop for SandboxChild {
    fn drop(&mut self) {
        // tokio's kill_on_drop kills the leader and reaps it in the background; the rest of
        // the group must not outlive it.
        self.kill_now();
    }
}

/// A one-line description of how a process ended.
pub(crate) fn describe_status(status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig} ({})", signal_name(sig)),
        _ => "ended".to_string(),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGXCPU => "SIGXCPU: CPU time limit",
        libc::SIGXFSZ => "SIGXFSZ: file size limit",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        _ => "signal",
    }
}
