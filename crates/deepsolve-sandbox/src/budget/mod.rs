//! Per-turn budgets: the memory and the tasks of all the sandboxes started for one workspace
//! (one turn: its persistent interpreter, every `exec`, every child they start) together, and
//! the workspace's size and entry count, enforced while the code runs.
//!
//! - Memory and tasks: a cgroup v2 per turn (`memory.max`, `memory.swap.max = 0`,
//!   `pids.max`) where the host delegates the controllers ([`cgroup`]); otherwise the
//!   watchdog ([`watchdog`]): one sampler thread for every live sandbox that reads each
//!   sandbox's process tree from `/proc` every few milliseconds and kills the offending
//!   sandbox when the turn is over budget. Each sandbox's RLIMIT_NPROC, set inside its own
//!   user namespace, holds a fork storm at the limit between two ticks.
//! - The workspace: a watcher thread walks each live turn's workspace (never following a
//!   symlink) as often as its size allows, and every call's end walks it once more, so even a
//!   call too short for the watcher is judged.
//!
//! A stop goes to a sandbox that is running a call (an `exec`, or the interpreter during a
//! cell) — the largest, for memory and tasks; every one, for the workspace — and only when
//! none is (a background process) to any: an idle interpreter keeps its names when another
//! call pushes the turn over. A stopped call learns why through its [`Member`], and reports a
//! [`Stopped`].

mod cgroup;
mod procfs;
mod watchdog;

use std::collections::HashMap;
use std::fmt;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::config::Limits;
use crate::workspace::Usage;
use cgroup::{CgroupParent, Events, TurnCgroup};

const MIB: u64 = 1 << 20;

/// Why the sandbox stopped a call: one of the turn's budgets was exceeded. The call's
/// processes (and, for the interpreter, its state) are gone; files it wrote are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// All the turn's sandboxed processes together used more memory than `limit_mb`.
    MemoryBudget { limit_mb: u64, used_mb: u64 },
    /// The turn's processes and threads together reached `limit`.
    ProcessBudget { limit: u64 },
    /// The workspace grew past `limit_mb` of disk.
    WorkspaceBytes { limit_mb: u64, used_mb: u64 },
    /// The workspace grew past `limit` files and directories.
    WorkspaceFiles { limit: u64, found: u64 },
    /// The workspace's directories are nested deeper than `limit` levels (too deep to count).
    WorkspaceDepth { limit: u64 },
}

impl Stopped {
    /// A stable name for metadata and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Stopped::MemoryBudget { .. } => "memory_budget",
            Stopped::ProcessBudget { .. } => "process_budget",
            Stopped::WorkspaceBytes { .. } => "workspace_bytes",
            Stopped::WorkspaceFiles { .. } => "workspace_files",
            Stopped::WorkspaceDepth { .. } => "workspace_depth",
        }
    }
}

impl fmt::Display for Stopped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stopped::MemoryBudget { limit_mb, used_mb } => write!(
                f,
                "the turn's memory budget of {limit_mb} MiB was exceeded ({used_mb} MiB)"
            ),
            Stopped::ProcessBudget { limit } => {
                write!(f, "the turn's limit of {limit} processes was reached")
            }
            Stopped::WorkspaceBytes { limit_mb, used_mb } => write!(
                f,
                "the workspace grew past its quota of {limit_mb} MiB ({used_mb} MiB)"
            ),
            Stopped::WorkspaceFiles { limit, found } => write!(
                f,
                "the workspace grew past its limit of {limit} files ({found})"
            ),
            Stopped::WorkspaceDepth { limit } => write!(
                f,
                "the workspace's directories are nested deeper than {limit} levels"
            ),
        }
    }
}

/// How the per-turn memory and process budgets are enforced on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enforcement {
    /// A cgroup v2 per turn beneath this directory.
    Cgroup { parent: PathBuf },
    /// The watchdog, because no cgroup can be used (the reason, one line).
    Watchdog { no_cgroup: String },
}

impl Enforcement {
    /// Lines for `doctor`: each budget, its size and what enforces it.
    pub fn describe(&self, limits: &Limits) -> Vec<String> {
        let (memory, tasks) = match self {
            Enforcement::Cgroup { parent } => (
                format!(
                    "cgroup v2 memory.max (a cgroup per turn under {})",
                    parent.display()
                ),
                "cgroup v2 pids.max".to_string(),
            ),
            Enforcement::Watchdog { no_cgroup } => (
                format!("watchdog ({no_cgroup})"),
                "watchdog, and RLIMIT_NPROC in each sandbox".to_string(),
            ),
        };
        vec![
            format!(
                "memory budget: {} MiB per turn, {memory}",
                limits.memory_bytes / MIB
            ),
            format!(
                "process budget: {} processes and threads per turn, {tasks}",
                limits.processes
            ),
            format!(
                "workspace quota: {} MiB and {} files per turn, watched while code runs; one file at most {} MiB (RLIMIT_FSIZE)",
                limits.workspace_bytes / MIB,
                limits.workspace_files,
                limits.effective_file_size() / MIB
            ),
            format!(
                "address space: {} MiB per process (RLIMIT_AS)",
                limits.address_space_bytes / MIB
            ),
        ]
    }
}

/// The budgets of one `Sandbox`: how they are enforced, and the live turns by workspace.
pub(crate) struct Budgets {
    limits: Limits,
    cgroup: Option<CgroupParent>,
    enforcement: Enforcement,
    /// Whether sandboxes are bwrap's (the tree's root is bwrap's monitor on the host, and the
    /// sandbox has a private `/tmp` to count).
    isolated: bool,
    turns: Mutex<HashMap<PathBuf, Weak<TurnBudget>>>,
}

impl Budgets {
    pub(crate) fn new(limits: &Limits, isolated: bool) -> Budgets {
        let (cgroup, enforcement) = match CgroupParent::detect() {
            Ok(parent) => {
                let enforcement = Enforcement::Cgroup {
                    parent: parent.dir().to_path_buf(),
                };
                (Some(parent), enforcement)
            }
            Err(no_cgroup) => (None, Enforcement::Watchdog { no_cgroup }),
        };
        Budgets {
            limits: limits.clone(),
            cgroup,
            enforcement,
            isolated,
            turns: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn enforcement(&self) -> &Enforcement {
        &self.enforcement
    }

    /// The budget every sandbox of `workspace` shares; without a workspace (a probe), one of
    /// its own.
    pub(crate) fn turn(&self, workspace: Option<&Path>) -> std::io::Result<Arc<TurnBudget>> {
        let Some(ws) = workspace else {
            return self.new_turn(None);
        };
        let mut turns = self.turns.lock().unwrap_or_else(|e| e.into_inner());
        turns.retain(|_, turn| turn.strong_count() > 0);
        if let Some(turn) = turns.get(ws).and_then(Weak::upgrade) {
            return Ok(turn);
        }
        let turn = self.new_turn(Some(ws))?;
        turns.insert(ws.to_path_buf(), Arc::downgrade(&turn));
        Ok(turn)
    }

    fn new_turn(&self, workspace: Option<&Path>) -> std::io::Result<Arc<TurnBudget>> {
        let limits = TurnLimits::of(&self.limits);
        let cgroup = match &self.cgroup {
            Some(parent) => Some(TurnCgroup::create(
                parent,
                &format!("deepsolve-turn-{}", crate::sandbox::unique()),
                limits.memory_bytes,
                limits.tasks,
            )?),
            None => None,
        };
        let turn = Arc::new(TurnBudget {
            limits,
            workspace: workspace.map(Path::to_path_buf),
            cgroup,
            isolated: self.isolated,
            members: Mutex::new(Vec::new()),
            quota: Mutex::new(Quota {
                previous: Usage::default(),
                next_walk: Instant::now(),
            }),
            events: Mutex::new(Events::default()),
        });
        watchdog::watch(&turn);
        Ok(turn)
    }
}

/// The limits of one turn, in the units the checks use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TurnLimits {
    pub memory_bytes: u64,
    pub tasks: u64,
    pub workspace_bytes: u64,
    pub workspace_files: u64,
}

impl TurnLimits {
    fn of(limits: &Limits) -> TurnLimits {
        TurnLimits {
            memory_bytes: limits.memory_bytes,
            tasks: limits.processes,
            workspace_bytes: limits.workspace_bytes,
            workspace_files: limits.workspace_files,
        }
    }

    /// The quota walk counts up to this many entries: enough to see a workspace grow well
    /// past its limit, bounded whatever it holds.
    fn walk_cap(&self) -> u64 {
        self.workspace_files.saturating_mul(4)
    }
}

/// Everything the sandboxes of one turn share. Dropped (and its cgroup removed) when the last
/// of them is gone.
pub(crate) struct TurnBudget {
    limits: TurnLimits,
    workspace: Option<PathBuf>,
    cgroup: Option<TurnCgroup>,
    isolated: bool,
    members: Mutex<Vec<Arc<MemberState>>>,
    quota: Mutex<Quota>,
    /// The cgroup's event counts already acted on.
    events: Mutex<Events>,
}

struct Quota {
    /// What the last walk saw (or the workspace as the last sandbox to join found it).
    previous: Usage,
    next_walk: Instant,
}

impl TurnBudget {
    /// The file a sandbox writes its pid to, between fork and exec, to join the turn's
    /// cgroup (when there is one).
    pub(crate) fn cgroup_procs(&self) -> Option<PathBuf> {
        self.cgroup.as_ref().map(TurnCgroup::procs)
    }

    /// Watch the sandbox whose root process (our child, un-reaped) is `root`.
    /// `busy`: whether it runs a call from the start (an `exec` does; an interpreter only
    /// while a cell runs, see [`Member::set_busy`]).
    pub(crate) fn join(self: &Arc<Self>, root: i32, busy: bool) -> std::io::Result<Member> {
        let pid = rustix::process::Pid::from_raw(root)
            .ok_or_else(|| std::io::Error::other("the sandbox has no pid"))?;
        let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())?;
        self.rebaseline();
        let state = Arc::new(MemberState {
            root,
            pidfd,
            init: OnceLock::new(),
            tmpfs: AtomicU64::new(0),
            busy: AtomicBool::new(busy),
            settled: AtomicBool::new(false),
            reason: watch::Sender::new(None),
            exited: AtomicBool::new(false),
        });
        self.lock_members().push(state.clone());
        Ok(Member {
            turn: self.clone(),
            state,
        })
    }

    /// The quota judges growth from here on, as a sandbox joins or leaves: what the workspace
    /// holds then is not the doing of the sandboxes that go on (a workspace the turn found over
    /// quota, or the last writes of a sandbox killed for it).
    fn rebaseline(&self) {
        if let Some(ws) = &self.workspace {
            let usage = Usage::of(ws, self.limits.walk_cap());
            self.quota
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .previous = usage;
        }
    }

    fn lock_members(&self) -> std::sync::MutexGuard<'_, Vec<Arc<MemberState>>> {
        self.members.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Members still running and not stopped.
    fn live_members(&self) -> Vec<Arc<MemberState>> {
        self.lock_members()
            .iter()
            .filter(|m| m.is_live())
            .cloned()
            .collect()
    }

    /// Stop the sandboxes running a call, or, when none is, every live one.
    fn stop_all(&self, why: Stopped) {
        let live = self.live_members();
        let busy = live.iter().any(|m| m.busy.load(Ordering::Relaxed));
        for member in live {
            if !busy || member.busy.load(Ordering::Relaxed) {
                member.stop(why);
            }
        }
    }

    /// With a cgroup: what the kernel did since the last look (an OOM kill, a refused fork).
    fn cgroup_events(&self) -> Option<Stopped> {
        let cgroup = self.cgroup.as_ref()?;
        let now = cgroup.events();
        let mut seen = self.events.lock().unwrap_or_else(|e| e.into_inner());
        let why = cgroup_verdict(&self.limits, *seen, now);
        *seen = now;
        why
    }

    /// Name what the kernel did for the turn's sandboxes.
    fn check_cgroup(&self) {
        if let Some(why) = self.cgroup_events() {
            self.stop_all(why);
        }
    }

    /// Walk the workspace now and stop the turn's sandboxes if it is over its quota.
    fn check_workspace(&self) {
        if let Some(why) = self.workspace_verdict() {
            self.stop_all(why);
        }
    }

    /// Walk the workspace now: whether it is over its quota (see [`quota_verdict`]).
    fn workspace_verdict(&self) -> Option<Stopped> {
        let ws = self.workspace.as_ref()?;
        let previous = self
            .quota
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .previous;
        // Past both the limit and the last count, the verdict is known: stop counting there,
        // so a walk costs about the limit's worth of entries, not whatever the code made.
        let decided = previous
            .entries
            .max(self.limits.workspace_files)
            .min(self.limits.walk_cap());
        // A sandbox stopped for this turn may still be writing its last bytes while it dies:
        // until it is gone, and in the walk right after, growth is recorded, not held
        // against the others.
        let settling = self.lock_members().iter().any(|m| m.settling());
        let started = Instant::now();
        let usage = Usage::of(ws, decided);
        let cost = started.elapsed();
        let dying = settling || self.lock_members().iter().any(|m| m.settling());
        let mut quota = self.quota.lock().unwrap_or_else(|e| e.into_inner());
        let why = quota_verdict(&self.limits, quota.previous, usage).filter(|_| !dying);
        let growing = usage.entries > previous.entries || usage.bytes > previous.bytes;
        quota.previous = if usage.entries > decided {
            // A partial count: its bytes are a floor, never a shrink to grow back from.
            Usage {
                bytes: usage.bytes.max(previous.bytes),
                ..usage
            }
        } else {
            usage
        };
        quota.next_walk = Instant::now() + watchdog::walk_interval(cost, growing);
        why
    }

    fn next_walk(&self) -> Instant {
        self.quota
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .next_walk
    }
}

impl Drop for TurnBudget {
    fn drop(&mut self) {
        if let Some(cgroup) = self.cgroup.take() {
            watchdog::retire(cgroup);
        }
    }
}

/// One watched sandbox, as the watchdog sees it.
struct MemberState {
    /// Our (un-reaped) child: bwrap's monitor, or the program itself without bwrap.
    root: i32,
    /// Signals reach exactly this process, never a recycled pid.
    pidfd: OwnedFd,
    /// The sandbox's pid-namespace init, once the sampler saw it.
    init: OnceLock<Init>,
    /// Bytes in its private tmpfs at the last reading.
    tmpfs: AtomicU64,
    /// Whether it is running a call (budget stops go to such sandboxes first).
    busy: AtomicBool,
    /// Stopped and gone, and a walk has since recorded what it left.
    settled: AtomicBool,
    reason: watch::Sender<Option<Stopped>>,
    exited: AtomicBool,
}

impl MemberState {
    fn is_live(&self) -> bool {
        self.reason.borrow().is_none() && !self.exited.load(Ordering::Relaxed)
    }

    /// Whether the root has exited (checked without reaping it). Once it has, its pid may be
    /// recycled: the member is never sampled again.
    fn has_exited(&self) -> bool {
        if self.exited.load(Ordering::Relaxed) {
            return true;
        }
        let exited = pidfd_exited(&self.pidfd);
        if exited {
            self.exited.store(true, Ordering::Relaxed);
        }
        exited
    }

    /// Stopped by a budget and not gone yet — or gone, and this is the first time anyone
    /// asks (the walk that asks records its last writes as final).
    fn settling(&self) -> bool {
        if self.reason.borrow().is_none() {
            return false;
        }
        !self.is_gone() || !self.settled.swap(true, Ordering::Relaxed)
    }

    /// Whether nothing of the sandbox is left: its namespace's init has exited (or, when it
    /// was never seen, the root has).
    fn is_gone(&self) -> bool {
        match self.init.get() {
            Some(init) => pidfd_exited(&init.fd),
            None => self.has_exited(),
        }
    }

    /// Record why (the first reason wins), then kill the sandbox: SIGKILL to bwrap's monitor
    /// takes the pid namespace with it (`--die-with-parent`); the call's owner then kills the
    /// process group and reaps.
    fn stop(&self, why: Stopped) {
        let first = self.reason.send_if_modified(|reason| {
            if reason.is_none() {
                *reason = Some(why);
                true
            } else {
                false
            }
        });
        if first {
            let _ = rustix::process::pidfd_send_signal(&self.pidfd, rustix::process::Signal::KILL);
        }
    }
}

/// A sandbox's pid-namespace init: bwrap's monitor's child. It exits only after the kernel has
/// reaped every other process of the namespace, so it tells when the sandbox is really gone;
/// and its root leads to the namespace's own procfs.
struct Init {
    /// Its host pid, valid while `fd` says it has not exited.
    pid: i32,
    fd: OwnedFd,
    /// `/proc/<pid>/root/proc`, once bwrap has mounted it.
    procfs: OnceLock<String>,
}

/// Whether the process behind a pidfd has exited (it is then readable), without waiting.
fn pidfd_exited(pidfd: &OwnedFd) -> bool {
    let mut fds = [rustix::event::PollFd::new(
        pidfd,
        rustix::event::PollFlags::IN,
    )];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(rustix::event::poll(&mut fds, Some(&zero)), Ok(n) if n > 0)
}

/// How long a killed sandbox gets to finish dying before its owner goes on anyway.
const TEARDOWN_LIMIT: Duration = Duration::from_secs(2);

/// A sandbox's place in its turn's budget; dropping it stops the watching.
pub(crate) struct Member {
    turn: Arc<TurnBudget>,
    state: Arc<MemberState>,
}

impl Member {
    /// Resolves once the sandbox was stopped by a budget, with the reason.
    pub(crate) async fn stopped(&self) -> Stopped {
        let mut reason = self.state.reason.subscribe();
        let seen = reason.wait_for(Option::is_some).await.ok().and_then(|r| *r);
        match seen {
            Some(why) => why,
            // The sender lives in `self.state`, as long as we do: not reached.
            None => std::future::pending().await,
        }
    }

    /// After the sandbox's root was killed and reaped: wait (briefly) until every process of
    /// it is gone, so nothing it still does (a last write) is taken for the next call's.
    pub(crate) async fn gone(&self) {
        let until = Instant::now() + TEARDOWN_LIMIT;
        while !self.state.is_gone() && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Whether the sandbox is running a call now.
    pub(crate) fn set_busy(&self, busy: bool) {
        self.state.busy.store(busy, Ordering::Relaxed);
    }

    /// Why the sandbox was stopped, if it was.
    pub(crate) fn reason(&self) -> Option<Stopped> {
        *self.state.reason.borrow()
    }

    /// At the end of a call: the last word on whether a budget stopped it. Besides what the
    /// watchdog already decided, the turn's memory and tasks (one more sample, or the
    /// cgroup's events) and one more walk of the workspace are judged now, so a call too short
    /// for the watcher's next look is held to the budgets too. The verdict is this call's
    /// alone: the turn's other sandboxes are the watchdog's to judge.
    pub(crate) fn settle(&self) -> Option<Stopped> {
        if self.turn.cgroup.is_none() {
            watchdog::sample_now(&self.turn);
        }
        if let Some(why) = self.reason() {
            return Some(why);
        }
        let why = self
            .turn
            .cgroup_events()
            .or_else(|| self.turn.workspace_verdict());
        if let Some(why) = why {
            self.state.stop(why);
        }
        self.reason()
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.turn
            .lock_members()
            .retain(|m| !Arc::ptr_eq(m, &self.state));
        // What it wrote is final now (its owner waited for it to be gone): the others are
        // judged on growth from here, not on its last writes.
        self.turn.rebaseline();
    }
}

/// One sandbox's use at one tick.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Share {
    /// RSS of its processes (or PSS, once confirmed) plus its private tmpfs, bytes.
    pub memory: u64,
    pub tasks: u64,
    /// It is running a call.
    pub busy: bool,
}

/// The process budget: the sandbox with the most tasks (of those running a call, if any is)
/// goes when the turn's total reaches the limit (within one sandbox, its RLIMIT_NPROC stops forks right there, so a fork storm
/// is named rather than left spinning against the limit).
pub(crate) fn tasks_verdict(limits: &TurnLimits, shares: &[Share]) -> Option<(usize, Stopped)> {
    let total: u64 = shares.iter().map(|s| s.tasks).sum();
    if total < limits.tasks {
        return None;
    }
    let worst = largest(shares, |s| s.tasks)?;
    Some((
        worst,
        Stopped::ProcessBudget {
            limit: limits.tasks,
        },
    ))
}

/// The memory budget: the sandbox using the most (of those running a call, if any is) goes
/// when the turn's total is over it.
pub(crate) fn memory_verdict(limits: &TurnLimits, shares: &[Share]) -> Option<(usize, Stopped)> {
    let total: u64 = shares.iter().map(|s| s.memory).sum();
    if total <= limits.memory_bytes {
        return None;
    }
    let worst = largest(shares, |s| s.memory)?;
    Some((
        worst,
        Stopped::MemoryBudget {
            limit_mb: limits.memory_bytes / MIB,
            used_mb: total.div_ceil(MIB),
        },
    ))
}

fn largest(shares: &[Share], key: impl Fn(&Share) -> u64) -> Option<usize> {
    let any_busy = shares.iter().any(|s| s.busy);
    (0..shares.len())
        .filter(|&i| shares[i].busy || !any_busy)
        .max_by_key(|&i| key(&shares[i]))
}

/// Growth in allocated bytes smaller than this is not growth: the filesystem itself adjusts a
/// file's blocks after it is written (ext4 adds extent blocks at writeback).
const BYTES_SLACK: u64 = MIB;

/// The workspace quota. Over a limit and grown since the last walk: stopped — so a workspace
/// that is over its quota can still be cleaned up, but not grown. A workspace too large or too
/// deep to count is always stopped (fail closed): it cannot get there by accident.
pub(crate) fn quota_verdict(limits: &TurnLimits, previous: Usage, now: Usage) -> Option<Stopped> {
    if now.too_deep {
        return Some(Stopped::WorkspaceDepth {
            limit: crate::workspace::QUOTA_DEPTH as u64,
        });
    }
    let uncountable = now.entries > limits.walk_cap();
    if uncountable || (now.entries > limits.workspace_files && now.entries > previous.entries) {
        return Some(Stopped::WorkspaceFiles {
            limit: limits.workspace_files,
            found: now.entries,
        });
    }
    if now.bytes > limits.workspace_bytes && now.bytes > previous.bytes + BYTES_SLACK {
        return Some(Stopped::WorkspaceBytes {
            limit_mb: limits.workspace_bytes / MIB,
            used_mb: now.bytes.div_ceil(MIB),
        });
    }
    None
}

/// What the cgroup's counters say happened since `seen`.
fn cgroup_verdict(limits: &TurnLimits, seen: Events, now: Events) -> Option<Stopped> {
    if now.oom_kills > seen.oom_kills {
        return Some(Stopped::MemoryBudget {
            limit_mb: limits.memory_bytes / MIB,
            used_mb: limits.memory_bytes / MIB,
        });
    }
    if now.pids_max > seen.pids_max {
        return Some(Stopped::ProcessBudget {
            limit: limits.tasks,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: TurnLimits = TurnLimits {
        memory_bytes: 256 * MIB,
        tasks: 64,
        workspace_bytes: 64 * MIB,
        workspace_files: 100,
    };

    fn share(memory_mb: u64, tasks: u64) -> Share {
        Share {
            memory: memory_mb * MIB,
            tasks,
            busy: false,
        }
    }

    fn busy(share: Share) -> Share {
        Share {
            busy: true,
            ..share
        }
    }

    #[test]
    fn the_turn_is_judged_as_a_whole_and_the_largest_sandbox_goes() {
        // Each sandbox alone is within the budget; together they are not.
        let shares = [share(100, 3), share(180, 5), share(20, 2)];
        assert_eq!(
            memory_verdict(&LIMITS, &shares),
            Some((
                1,
                Stopped::MemoryBudget {
                    limit_mb: 256,
                    used_mb: 300
                }
            ))
        );
        assert_eq!(memory_verdict(&LIMITS, &shares[..1]), None);
        // A call that pushes the turn over goes, not the larger idle interpreter.
        let pushed = [share(180, 3), busy(share(100, 5))];
        assert!(matches!(memory_verdict(&LIMITS, &pushed), Some((1, _))));
        assert_eq!(memory_verdict(&LIMITS, &[share(256, 1)]), None);
        assert_eq!(memory_verdict(&LIMITS, &[]), None);
    }

    #[test]
    fn reaching_the_task_limit_stops_the_sandbox_with_the_most() {
        assert_eq!(tasks_verdict(&LIMITS, &[share(1, 40), share(1, 23)]), None);
        assert_eq!(
            tasks_verdict(&LIMITS, &[share(1, 40), share(1, 24)]),
            Some((0, Stopped::ProcessBudget { limit: 64 }))
        );
        assert_eq!(
            tasks_verdict(&LIMITS, &[share(1, 40), busy(share(1, 24))]),
            Some((1, Stopped::ProcessBudget { limit: 64 }))
        );
    }

    fn usage(mb: u64, entries: u64) -> Usage {
        Usage {
            bytes: mb * MIB,
            entries,
            too_deep: false,
        }
    }

    #[test]
    fn an_over_quota_workspace_may_shrink_but_not_grow() {
        let v = |previous, now| quota_verdict(&LIMITS, previous, now);
        assert_eq!(v(usage(1, 5), usage(64, 100)), None);
        assert_eq!(
            v(usage(1, 5), usage(70, 10)),
            Some(Stopped::WorkspaceBytes {
                limit_mb: 64,
                used_mb: 70
            })
        );
        assert_eq!(v(usage(80, 10), usage(70, 10)), None, "shrinking is fine");
        assert_eq!(
            v(usage(70, 10), usage(70, 10)),
            None,
            "so is standing still"
        );
        let settled = Usage {
            bytes: 70 * MIB + 64 * 1024,
            ..usage(70, 10)
        };
        assert_eq!(
            v(usage(70, 10), settled),
            None,
            "the filesystem's own adjustments"
        );
        assert!(
            v(usage(70, 10), usage(72, 10)).is_some(),
            "but not writing more"
        );
        assert_eq!(
            v(usage(1, 150), usage(1, 151)),
            Some(Stopped::WorkspaceFiles {
                limit: 100,
                found: 151
            })
        );
        assert_eq!(v(usage(1, 150), usage(1, 120)), None);
        // Past what the walk counts, or too deep to count: always stopped.
        assert!(matches!(
            v(usage(1, 401), usage(1, 401)),
            Some(Stopped::WorkspaceFiles { .. })
        ));
        let deep = Usage {
            too_deep: true,
            ..usage(1, 70)
        };
        assert_eq!(
            v(deep, deep),
            Some(Stopped::WorkspaceDepth {
                limit: crate::workspace::QUOTA_DEPTH as u64
            })
        );
    }

    #[test]
    fn cgroup_events_name_the_limit_once() {
        let seen = Events::default();
        let oom = Events {
            oom_kills: 1,
            pids_max: 0,
        };
        assert!(matches!(
            cgroup_verdict(&LIMITS, seen, oom),
            Some(Stopped::MemoryBudget { limit_mb: 256, .. })
        ));
        assert_eq!(cgroup_verdict(&LIMITS, oom, oom), None);
        let forks = Events {
            oom_kills: 1,
            pids_max: 7,
        };
        assert_eq!(
            cgroup_verdict(&LIMITS, oom, forks),
            Some(Stopped::ProcessBudget { limit: 64 })
        );
    }

    #[test]
    fn enforcement_is_described_with_its_reason() {
        let lines = Enforcement::Watchdog {
            no_cgroup: "cgroup v2 memory controller not delegated".into(),
        }
        .describe(&Limits::default());
        assert_eq!(
            lines[0],
            "memory budget: 2048 MiB per turn, watchdog (cgroup v2 memory controller not delegated)"
        );
        assert!(lines[1].contains("64 processes"), "{lines:?}");
        assert!(lines[2].contains("1024 MiB and 10000 files"), "{lines:?}");
    }
}
