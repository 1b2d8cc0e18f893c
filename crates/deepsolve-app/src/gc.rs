//! Collecting old turn workspaces (`<data dir>/turns/<turn id>`): the one driver behind
//! `deepsolve gc`, the CLI's occasional automatic pass and the server's periodic collector
//! ([`collect_pass`]: ask the store what is resumable, then collect on the blocking pool;
//! [`Collector`]: a pass now and then one every interval).
//!
//! The rule, for each directory directly under the root whose name is a turn id:
//! - **kept** while its turn is running in any process (the turn holds it: a shared `flock`,
//!   see [`crate::turn::hold_workspace`]; here the lock is taken exclusively, without
//!   waiting, and held until the deletion is done), or when the store says a server may still
//!   run or resume the turn (`running`, `interrupted`: the caller passes those ids);
//! - otherwise **removed** at once when empty, and when its newest modification time (of the
//!   directory or anything in it) is older than the retention; a retention of zero removes
//!   every finished, unused workspace.
//!
//! The workspace was written by model code, so nothing here follows a symlink: the walk opens
//! each directory relative to its parent with `O_NOFOLLOW` and only `lstat`s entries, and the
//! deletion is `std::fs::remove_dir_all`, which on Linux removes a symlink itself, never what
//! it points to, at any depth (it walks by `openat(O_NOFOLLOW)` and `unlinkat`).

use std::collections::HashSet;
use std::fs::{File, TryLockError};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use deepsolve_store::{Store, StoreError};
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, openat, statat};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Walk limits: the sandbox caps a workspace far below these; a deeper or larger tree is
/// still deleted whole, only its newest time may be missed past the limits.
const MAX_DEPTH: usize = 64;
const MAX_ENTRIES: u64 = 1_000_000;

/// One day, the unit of `sandbox.retention_days`.
const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// What a collection may remove, and how.
#[derive(Debug, Clone)]
pub struct GcOptions {
    /// How long a finished, non-empty workspace is kept after its last change.
    pub retention: Duration,
    /// Report what would go; remove nothing.
    pub dry_run: bool,
    /// Turns the store says a server may still run or resume: kept whatever their age.
    pub resumable: HashSet<String>,
    /// The time ages are measured from.
    pub now: SystemTime,
    /// Set to end a pass early (a stopping server); checked between workspaces.
    pub stop: Option<Arc<AtomicBool>>,
}

impl GcOptions {
    /// `sandbox.retention_days`, now, nothing resumable, for real.
    pub fn new(retention_days: u64) -> GcOptions {
        GcOptions {
            retention: days(retention_days),
            dry_run: false,
            resumable: HashSet::new(),
            now: SystemTime::now(),
            stop: None,
        }
    }

    fn stopped(&self) -> bool {
        self.stop
            .as_ref()
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
    }
}

/// `sandbox.retention_days` as a duration.
pub fn days(n: u64) -> Duration {
    DAY.saturating_mul(u32::try_from(n).unwrap_or(u32::MAX))
}

/// What one pass did (or, dry, would do).
#[derive(Debug, Default)]
pub struct GcReport {
    pub removed: Vec<Removed>,
    pub kept: Vec<Kept>,
    /// Workspaces that should have gone but could not be deleted (they stay for the next pass).
    pub failed: Vec<Failed>,
}

impl GcReport {
    /// Bytes of the regular files in the removed workspaces.
    pub fn removed_bytes(&self) -> u64 {
        self.removed.iter().map(|r| r.bytes).sum()
    }
}

#[derive(Debug)]
pub struct Removed {
    pub turn_id: String,
    pub bytes: u64,
    pub why: Expired,
}

/// Why a workspace goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expired {
    /// It holds nothing.
    Empty,
    /// Nothing in it changed for longer than the retention.
    Old { newest: SystemTime },
}

#[derive(Debug)]
pub struct Kept {
    pub turn_id: String,
    pub why: KeptBecause,
}

/// Why a workspace stays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeptBecause {
    /// A running turn holds it (in this process or another).
    InUse,
    /// The store has its turn `running` or `interrupted`: a server may still need it.
    Resumable,
    /// It changed more recently than the retention.
    WithinRetention { newest: SystemTime },
}

#[derive(Debug)]
pub struct Failed {
    pub turn_id: String,
    pub error: std::io::Error,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot read the workspaces directory {}", path.display())]
pub struct GcError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Why a collection pass did not run.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("cannot ask the store which turns are resumable")]
    Store(#[from] StoreError),
    #[error(transparent)]
    Gc(#[from] GcError),
    #[error("the collection task failed")]
    Task(#[from] tokio::task::JoinError),
}

/// One pass over the workspaces under `root`: the turns `store` has `running` (on any
/// process) or `interrupted` are added to `options.resumable` and kept; the file work runs on
/// the blocking pool. Without a store nothing more is resumable.
pub async fn collect_pass(
    root: PathBuf,
    store: Option<&Store>,
    mut options: GcOptions,
) -> Result<GcReport, CollectError> {
    if let Some(store) = store {
        options
            .resumable
            .extend(store.resumable_turn_ids_unscoped().await?);
    }
    let report = tokio::task::spawn_blocking(move || collect_workspaces(&root, &options)).await??;
    Ok(report)
}

/// A collector running in the background ([`Collector::spawn`]); [`Collector::stop`] (or
/// dropping it) ends it.
pub struct Collector {
    cancel: CancellationToken,
    /// Ends a pass between two workspaces.
    stop: Arc<AtomicBool>,
    task: Option<JoinHandle<()>>,
}

impl Collector {
    /// Collect the workspaces under `root` with `retention`, keeping what `store` says is
    /// resumable: a pass now, then one every `interval` (no root: nothing to do). Each pass's
    /// removals and failures are logged.
    pub fn spawn(
        store: Store,
        root: Option<PathBuf>,
        retention: Duration,
        interval: Duration,
    ) -> Self {
        let cancel = CancellationToken::new();
        let stop = Arc::new(AtomicBool::new(false));
        let passes = Passes {
            store,
            root,
            retention,
            interval,
        };
        let task = tokio::spawn(passes.run(cancel.clone(), stop.clone()));
        Collector {
            cancel,
            stop,
            task: Some(task),
        }
    }

    /// Stop collecting and wait for a pass under way to end (it ends at the next workspace).
    pub async fn stop(mut self) {
        self.signal();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    fn signal(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.cancel.cancel();
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.signal();
    }
}

/// What a [`Collector`] collects, and how often.
struct Passes {
    store: Store,
    root: Option<PathBuf>,
    retention: Duration,
    interval: Duration,
}

impl Passes {
    async fn run(self, cancel: CancellationToken, stop: Arc<AtomicBool>) {
        let Some(root) = &self.root else {
            return;
        };
        loop {
            let options = GcOptions {
                retention: self.retention,
                stop: Some(stop.clone()),
                ..GcOptions::new(0)
            };
            match collect_pass(root.clone(), Some(&self.store), options).await {
                Ok(report) => log_report(&report),
                Err(e) => tracing::warn!(error = %e, "workspace collection skipped"),
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(self.interval) => {}
            }
        }
    }
}

fn log_report(report: &GcReport) {
    if !report.removed.is_empty() {
        tracing::info!(
            removed = report.removed.len(),
            bytes = report.removed_bytes(),
            kept = report.kept.len(),
            "old turn workspaces removed"
        );
    }
    for failed in &report.failed {
        tracing::warn!(turn_id = %failed.turn_id, error = %failed.error, "turn workspace not removed");
    }
}

/// Collect the workspaces under `root` by the rule of this module. A missing root is an empty
/// report (no turn ever had a workspace).
pub fn collect_workspaces(root: &Path, options: &GcOptions) -> Result<GcReport, GcError> {
    let mut report = GcReport::default();
    for (turn_id, path) in candidates(root)? {
        if options.stopped() {
            break;
        }
        collect_one(turn_id, &path, options, &mut report);
    }
    Ok(report)
}

/// The directories directly under `root` named like a turn id, sorted (oldest turn first).
fn candidates(root: &Path) -> Result<Vec<(String, PathBuf)>, GcError> {
    let fail = |source| GcError {
        path: root.to_path_buf(),
        source,
    };
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(fail(e)),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(fail)?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        // `file_type` does not follow a symlink: a link named like a turn is not a workspace.
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && is_turn_dir_name(&name) {
            found.push((name, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// `turn_` and hex digits: the names [`crate::new_turn_id`] makes, nothing else.
pub(crate) fn is_turn_dir_name(name: &str) -> bool {
    name.strip_prefix("turn_")
        .is_some_and(|hex| !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn collect_one(turn_id: String, path: &Path, options: &GcOptions, report: &mut GcReport) {
    if options.resumable.contains(&turn_id) {
        report.kept.push(Kept {
            turn_id,
            why: KeptBecause::Resumable,
        });
        return;
    }
    let lock = match lock_exclusive(path) {
        Ok(Locked::Held(lock)) => lock,
        Ok(Locked::InUse) => {
            report.kept.push(Kept {
                turn_id,
                why: KeptBecause::InUse,
            });
            return;
        }
        // Gone or replaced since it was listed: not ours to judge in this pass.
        Ok(Locked::Vanished) => return,
        Err(error) => {
            report.failed.push(Failed { turn_id, error });
            return;
        }
    };
    let contents = match Contents::of(&lock) {
        Ok(contents) => contents,
        Err(error) => {
            report.failed.push(Failed { turn_id, error });
            return;
        }
    };
    match judge(&contents, options.retention, options.now) {
        Verdict::Keep(why) => report.kept.push(Kept { turn_id, why }),
        Verdict::Remove(why) => {
            // Deleted while the exclusive lock is held: no turn can take it meanwhile.
            let removed = if options.dry_run {
                Ok(())
            } else {
                std::fs::remove_dir_all(path)
            };
            match removed {
                Ok(()) => report.removed.push(Removed {
                    turn_id,
                    bytes: contents.bytes,
                    why,
                }),
                Err(error) => report.failed.push(Failed { turn_id, error }),
            }
        }
    }
    drop(lock);
}

enum Locked {
    Held(File),
    InUse,
    Vanished,
}

/// The workspace opened and locked exclusively, without waiting; checked to be still the
/// directory at `path` once locked.
fn lock_exclusive(path: &Path) -> std::io::Result<Locked> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Locked::Vanished),
        Err(e) => return Err(e),
    };
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Ok(Locked::InUse),
        Err(TryLockError::Error(e)) => return Err(e),
    }
    let locked = file.metadata()?;
    let same = match std::fs::symlink_metadata(path) {
        Ok(there) => there.is_dir() && (there.dev(), there.ino()) == (locked.dev(), locked.ino()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(e),
    };
    Ok(if same {
        Locked::Held(file)
    } else {
        Locked::Vanished
    })
}

/// What a workspace holds, found without following a symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Contents {
    /// Entries of any kind below the directory.
    entries: u64,
    /// Bytes of its regular files.
    bytes: u64,
    /// The newest modification time of the directory and of everything in it.
    newest: SystemTime,
}

impl Contents {
    fn of(dir: &File) -> std::io::Result<Contents> {
        let mut contents = Contents {
            entries: 0,
            bytes: 0,
            newest: dir.metadata()?.modified()?,
        };
        contents.walk(dir.as_fd(), 0)?;
        Ok(contents)
    }

    fn walk(&mut self, dir: BorrowedFd<'_>, depth: usize) -> std::io::Result<()> {
        for entry in Dir::read_from(dir)? {
            if self.entries >= MAX_ENTRIES {
                return Ok(());
            }
            let entry = entry?;
            let name = entry.file_name();
            if name == c"." || name == c".." {
                continue;
            }
            let Ok(stat) = statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            self.entries += 1;
            self.newest = self.newest.max(mtime(&stat));
            match FileType::from_raw_mode(stat.st_mode) {
                FileType::RegularFile => {
                    self.bytes += u64::try_from(stat.st_size).unwrap_or(0);
                }
                FileType::Directory if depth < MAX_DEPTH => {
                    let flags =
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                    // A directory that cannot be opened (its mode is 000) still counts as an
                    // entry with its own time; the deletion reports what it cannot remove.
                    if let Ok(sub) = openat(dir, name, flags, Mode::empty()) {
                        self.walk(sub.as_fd(), depth + 1)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn mtime(stat: &rustix::fs::Stat) -> SystemTime {
    let secs = u64::try_from(stat.st_mtime).unwrap_or(0);
    let nanos = u32::try_from(stat.st_mtime_nsec).unwrap_or(0);
    UNIX_EPOCH + Duration::new(secs, nanos.min(999_999_999))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Remove(Expired),
    Keep(KeptBecause),
}

/// The rule for a workspace no turn holds and no server may resume.
pub(crate) fn judge(contents: &Contents, retention: Duration, now: SystemTime) -> Verdict {
    let newest = contents.newest;
    if contents.entries == 0 {
        return Verdict::Remove(Expired::Empty);
    }
    // A time in the future (a skewed clock) is recent: only a zero retention removes it.
    let old = retention.is_zero() || now.duration_since(newest).is_ok_and(|age| age >= retention);
    if old {
        Verdict::Remove(Expired::Old { newest })
    } else {
        Verdict::Keep(KeptBecause::WithinRetention { newest })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contents(entries: u64, age: Duration, now: SystemTime) -> Contents {
        Contents {
            entries,
            bytes: 0,
            newest: now - age,
        }
    }

    #[test]
    fn empty_goes_at_once_old_goes_after_the_retention() {
        let now = SystemTime::now();
        let week = 7 * DAY;
        let hour = Duration::from_secs(3600);
        assert_eq!(
            judge(&contents(0, Duration::ZERO, now), week, now),
            Verdict::Remove(Expired::Empty)
        );
        assert_eq!(
            judge(&contents(3, 8 * DAY, now), week, now),
            Verdict::Remove(Expired::Old {
                newest: now - 8 * DAY
            })
        );
        assert_eq!(
            judge(&contents(3, week - hour, now), week, now),
            Verdict::Keep(KeptBecause::WithinRetention {
                newest: now - week + hour
            })
        );
    }

    #[test]
    fn zero_retention_removes_every_unused_workspace() {
        let now = SystemTime::now();
        let fresh = contents(1, Duration::ZERO, now);
        assert!(matches!(
            judge(&fresh, Duration::ZERO, now),
            Verdict::Remove(Expired::Old { .. })
        ));
        let future = Contents {
            newest: now + DAY,
            ..fresh
        };
        assert!(matches!(
            judge(&future, Duration::ZERO, now),
            Verdict::Remove(_)
        ));
        // With a retention, a future time is recent.
        assert!(matches!(
            judge(&future, DAY, now),
            Verdict::Keep(KeptBecause::WithinRetention { .. })
        ));
    }

    #[test]
    fn only_turn_id_names_are_workspaces() {
        assert!(is_turn_dir_name("turn_0190af3b2c4d7e8f9a0b1c2d3e4f5a6b"));
        assert!(is_turn_dir_name(&crate::new_turn_id()));
        for other in [
            "turn_",
            "turn_xyz",
            "turn_12/..",
            "Turn_12",
            "turn-12",
            "12",
            ".",
            "..",
            "",
            "turn_12 ",
            "data",
        ] {
            assert!(!is_turn_dir_name(other), "{other:?}");
        }
    }

    #[test]
    fn retention_days_saturate() {
        assert_eq!(GcOptions::new(7).retention, 7 * DAY);
        assert_eq!(GcOptions::new(0).retention, Duration::ZERO);
        assert!(GcOptions::new(u64::MAX).retention >= 3650 * DAY);
    }
}
