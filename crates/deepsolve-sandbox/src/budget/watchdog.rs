//! The watchdog: two threads for every live turn of the process, started on first use and
//! idle (blocked) while no sandbox runs.
//!
//! - The **sampler** reads every live sandbox's process tree each [`TICK`] (RSS and task
//!   counts from `/proc/<pid>/stat`, the private tmpfs from `statvfs`) and judges each turn as
//!   a whole. RSS counts pages shared by forked processes once per process, so before a kill
//!   for memory the turn is measured again by PSS (`smaps_rollup`), which counts them once.
//!   With a cgroup, the kernel enforces memory and tasks; the sampler only reads the cgroup's
//!   events to name what it did.
//! - The **workspace watcher** walks each live turn's workspace, as often as the walk's own
//!   cost allows ([`walk_interval`]), so a large workspace does not starve the sampler.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use super::cgroup::TurnCgroup;
use super::procfs::{self, Reader};
use super::{MemberState, Share, TurnBudget, memory_verdict, tasks_verdict};

/// How often the sampler looks. A process touching memory at a few GB/s gets a few tens of
/// MB past the budget between two looks.
pub(crate) const TICK: Duration = Duration::from_millis(10);
/// The private tmpfs of each sandbox is read every this many ticks (it is bounded by its
/// size; the processes' RSS is what can grow without bound).
const TMPFS_EVERY: u64 = 5;
/// The watcher never walks one workspace more often than this…
const MIN_WALK_INTERVAL: Duration = Duration::from_millis(20);
/// …nor spends more than a fifth of its time walking it (a third, while it grows: the code
/// in it is writing, and the quota must catch up with it)…
const WALK_COST_FACTOR: u32 = 5;
const GROWING_WALK_COST_FACTOR: u32 = 2;
/// …nor waits longer than this between two walks.
const MAX_WALK_INTERVAL: Duration = Duration::from_millis(500);

struct Watchdog {
    turns: Mutex<Vec<Weak<TurnBudget>>>,
    /// Signalled when a turn is added, so idle threads wake up.
    added: Condvar,
    /// Cgroups whose processes were still exiting when their turn ended.
    retired: Mutex<Vec<TurnCgroup>>,
}

fn global() -> &'static Watchdog {
    static WATCHDOG: OnceLock<Watchdog> = OnceLock::new();
    WATCHDOG.get_or_init(|| {
        let watchdog = Watchdog {
            turns: Mutex::new(Vec::new()),
            added: Condvar::new(),
            retired: Mutex::new(Vec::new()),
        };
        spawn_thread("deepsolve-watchdog", sampler);
        spawn_thread("deepsolve-quota", workspace_watcher);
        watchdog
    })
}

fn spawn_thread(name: &str, body: fn(&'static Watchdog)) {
    let started = std::thread::Builder::new()
        .name(name.into())
        // The thread starts inside `get_or_init`; it waits for the value like anyone else.
        .spawn(move || body(global()));
    if let Err(e) = started {
        // Without the thread no turn is watched: say so loudly; the kernel's per-sandbox
        // rlimits still hold.
        tracing::error!("could not start the sandbox {name} thread: {e}");
    }
}

/// Watch `turn` until it is dropped.
pub(super) fn watch(turn: &Arc<TurnBudget>) {
    let watchdog = global();
    lock(&watchdog.turns).push(Arc::downgrade(turn));
    watchdog.added.notify_all();
}

/// Remove a turn's cgroup once its processes are gone (now if they already are).
pub(super) fn retire(cgroup: TurnCgroup) {
    if !cgroup.remove() {
        lock(&global().retired).push(cgroup);
    }
}

/// Sample `turn` once now, off the sampler's clock. A call's end is judged on what the turn
/// holds then: a cell that grew past the budget and returned between two ticks (or while a
/// loaded host kept the sampler waiting) would otherwise be reported as fine.
pub(super) fn sample_now(turn: &TurnBudget) {
    turn.sample(&mut Reader::default(), true);
}

/// How long the watcher waits before walking a workspace again, given the last walk's cost
/// and whether the workspace grew since the walk before.
pub(super) fn walk_interval(cost: Duration, growing: bool) -> Duration {
    let factor = if growing {
        GROWING_WALK_COST_FACTOR
    } else {
        WALK_COST_FACTOR
    };
    (cost * factor).clamp(MIN_WALK_INTERVAL, MAX_WALK_INTERVAL)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Watchdog {
    /// The live turns; blocks while there are none.
    fn live_turns(&self) -> Vec<Arc<TurnBudget>> {
        let mut turns = lock(&self.turns);
        loop {
            turns.retain(|t| t.strong_count() > 0);
            let live: Vec<Arc<TurnBudget>> = turns.iter().filter_map(Weak::upgrade).collect();
            if !live.is_empty() || !lock(&self.retired).is_empty() {
                return live;
            }
            turns = self.added.wait(turns).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn remove_retired(&self) {
        lock(&self.retired).retain(|cgroup| !cgroup.remove());
    }
}

fn sampler(watchdog: &'static Watchdog) {
    let mut reader = Reader::default();
    let mut tick: u64 = 0;
    loop {
        let turns = watchdog.live_turns();
        let with_tmpfs = tick.is_multiple_of(TMPFS_EVERY);
        for turn in &turns {
            turn.sample(&mut reader, with_tmpfs);
        }
        drop(turns);
        reader.end_tick();
        tick += 1;
        watchdog.remove_retired();
        std::thread::sleep(TICK);
    }
}

fn workspace_watcher(watchdog: &'static Watchdog) {
    loop {
        let turns = watchdog.live_turns();
        let mut wake = Instant::now() + MAX_WALK_INTERVAL;
        for turn in &turns {
            if turn.workspace.is_none() || turn.live_members().is_empty() {
                continue;
            }
            if turn.next_walk() <= Instant::now() {
                turn.check_workspace();
            }
            wake = wake.min(turn.next_walk());
        }
        drop(turns);
        let nap = wake.saturating_duration_since(Instant::now());
        std::thread::sleep(nap.max(Duration::from_millis(5)));
    }
}

impl TurnBudget {
    /// One tick of the sampler for this turn.
    fn sample(&self, reader: &mut Reader, with_tmpfs: bool) {
        let members = self.live_members();
        if members.is_empty() {
            return;
        }
        if self.cgroup.is_some() {
            self.check_cgroup();
            return;
        }
        let mut trees = Vec::with_capacity(members.len());
        for member in &members {
            match member.sample(reader, self.isolated, with_tmpfs) {
                Some(tree) => trees.push((member, tree)),
                None => continue,
            }
        }
        let shares: Vec<Share> = trees.iter().map(|(_, t)| t.share).collect();
        if let Some((worst, why)) = tasks_verdict(&self.limits, &shares) {
            trees[worst].0.stop(why);
            return;
        }
        if memory_verdict(&self.limits, &shares).is_none() {
            return;
        }
        // Over by RSS: confirm by PSS before killing anything.
        let confirmed: Vec<Share> = trees
            .iter()
            .map(|(_, t)| Share {
                memory: procfs::tree_pss(&t.procs) + t.tmpfs,
                ..t.share
            })
            .collect();
        if let Some((worst, why)) = memory_verdict(&self.limits, &confirmed) {
            trees[worst].0.stop(why);
        }
    }
}

/// One sandbox at one tick.
struct Tree {
    share: Share,
    procs: Vec<String>,
    tmpfs: u64,
}

impl MemberState {
    /// Read the sandbox, or `None` when it has exited (then its pids may be recycled, so a
    /// sample taken around the exit is thrown away).
    fn sample(&self, reader: &mut Reader, isolated: bool, with_tmpfs: bool) -> Option<Tree> {
        if self.has_exited() {
            return None;
        }
        let listed = self
            .init
            .get()
            .and_then(|init| init.procfs.get())
            .and_then(|dir| reader.list_namespace(dir));
        let sample = match listed {
            Some(sample) => sample,
            None => {
                let tree = reader.walk_tree(self.root, !isolated);
                if isolated {
                    self.learn_namespace(tree.first_child);
                }
                tree
            }
        };
        // The sandbox's own /tmp and /dev/shm, seen through its pid-namespace init, are
        // memory too.
        let tmpfs = match self.init.get() {
            Some(init) if with_tmpfs => {
                let used =
                    procfs::tmpfs_used(init.pid, "/tmp") + procfs::tmpfs_used(init.pid, "/dev/shm");
                self.tmpfs.store(used, Ordering::Relaxed);
                used
            }
            _ => self.tmpfs.load(Ordering::Relaxed),
        };
        if self.has_exited() || self.init.get().is_some_and(|i| super::pidfd_exited(&i.fd)) {
            return None;
        }
        Some(Tree {
            share: Share {
                memory: sample.rss_bytes + tmpfs,
                tasks: sample.tasks,
                busy: self.busy.load(Ordering::Relaxed),
            },
            procs: sample.procs,
            tmpfs,
        })
    }

    /// Learn the sandbox's pid-namespace init (the root's child), once it exists, and then its
    /// procfs, once bwrap has mounted it. The init's pidfd is opened first, then the process
    /// behind the pid is checked to be the root's child and alive: a recycled pid is never
    /// taken for it.
    fn learn_namespace(&self, first_child: Option<i32>) {
        if let Some(init) = self.init.get() {
            if init.procfs.get().is_none()
                && let Some(dir) = procfs::namespace_procfs(init.pid)
            {
                let _ = init.procfs.set(dir);
            }
            return;
        }
        let Some(pid) = first_child.and_then(rustix::process::Pid::from_raw) else {
            return;
        };
        let Ok(fd) = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) else {
            return;
        };
        let raw = pid.as_raw_nonzero().get();
        let parent = std::fs::read(format!("/proc/{raw}/stat"))
            .ok()
            .and_then(|stat| procfs::parse_ppid(&stat));
        if parent == Some(self.root) && !super::pidfd_exited(&fd) && !self.has_exited() {
            let _ = self.init.set(super::Init {
                pid: raw,
                fd,
                procfs: OnceLock::new(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_are_paced_by_their_cost() {
        assert_eq!(walk_interval(Duration::ZERO, false), MIN_WALK_INTERVAL);
        assert_eq!(
            walk_interval(Duration::from_millis(8), false),
            Duration::from_millis(40)
        );
        assert_eq!(
            walk_interval(Duration::from_millis(40), true),
            Duration::from_millis(80)
        );
        assert_eq!(
            walk_interval(Duration::from_secs(2), true),
            MAX_WALK_INTERVAL
        );
    }
}
