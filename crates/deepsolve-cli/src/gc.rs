//! `deepsolve gc`: remove old turn workspaces (`<data dir>/turns/<turn id>`) by the rule and
//! driver of `deepsolve_app::gc`, and the occasional automatic pass `deepsolve solve` starts.
//!
//! Both ask the store which turns a server may still run or resume, when there is one: the
//! `--database` URL, else `server.database`, else the default SQLite file. An SQLite file
//! that does not exist is no store (and is not created); one that exists but cannot be read
//! stops the collection, since without it a resumable turn's workspace could go.

use crate::exit::Exit;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use clap::Args;
use deepsolve_app::gc::{CollectError, Expired, KeptBecause, collect_pass};
use deepsolve_app::{GcOptions, GcReport, default_workspace_root};
use deepsolve_settings::Settings;
use deepsolve_store::{Store, StoreOptions, redact_url};

use crate::ConfigArgs;
use crate::database::{self, DatabaseArgs};
use crate::output::{errln, outln};
use crate::setup::load_settings;

/// The automatic pass runs at most this often; the stamp file records the last one.
const AUTOMATIC_EVERY: Duration = Duration::from_secs(24 * 60 * 60);
const STAMP: &str = "gc-stamp";
/// How long `deepsolve solve` waits, once its turn is over, for an automatic pass still under
/// way before it exits anyway (an interrupted pass is finished by the next one).
const AUTOMATIC_GRACE: Duration = Duration::from_secs(2);

#[derive(Args)]
pub(crate) struct GcArgs {
    /// Show what would be removed; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Keep a finished turn's workspace this many days after its last change (0: remove
    /// every finished one). Sets sandbox.retention_days for this run.
    #[arg(long, value_name = "N")]
    pub retention_days: Option<u64>,
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub config: ConfigArgs,
}

pub(crate) async fn run(args: GcArgs) -> anyhow::Result<Exit> {
    let mut config = args.config.clone();
    if let Some(n) = args.retention_days {
        config.sets.push(format!("sandbox.retention_days={n}"));
    }
    let loaded = load_settings(&config)?;
    let retention_days = loaded.settings.sandbox.retention_days;
    let root = default_workspace_root().context("no place for turn workspaces")?;
    let store = store_url(&args.database, &loaded.settings)?;
    let options = GcOptions {
        dry_run: args.dry_run,
        ..GcOptions::new(retention_days)
    };
    let report = collect(store.as_deref(), root.clone(), options).await?;
    if !args.dry_run {
        touch_stamp(&root);
    }
    print_report(
        &root,
        store.as_deref(),
        retention_days,
        args.dry_run,
        &report,
    );
    Ok(if report.failed.is_empty() {
        Exit::Answer
    } else {
        Exit::Failure
    })
}

/// The store's URL when there is a store to ask, never creating one.
fn store_url(args: &DatabaseArgs, settings: &Settings) -> anyhow::Result<Option<String>> {
    match database::configured_database(args, &settings.server) {
        Some(url) if url.starts_with("sqlite:") => Ok(existing_sqlite(&url)),
        Some(url) => Ok(Some(url)),
        None => Ok(existing_sqlite(&database::sqlite_url(
            &database::default_database_file()?,
        ))),
    }
}

/// An SQLite URL opened read-write without creating the file; `None` when the file (or an
/// in-memory database) holds no turns.
fn existing_sqlite(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    if path.is_empty() || path == ":memory:" || !Path::new(path).is_file() {
        return None;
    }
    Some(if query.contains("mode=") {
        url.to_string()
    } else if query.is_empty() {
        format!("{url}?mode=rw")
    } else {
        format!("{url}&mode=rw")
    })
}

/// One pass of the app's driver, asking the store at `url` (when there is one) which turns
/// are resumable; a store that cannot be read stops it before anything is removed.
async fn collect(url: Option<&str>, root: PathBuf, options: GcOptions) -> anyhow::Result<GcReport> {
    let cannot = |url: &str| {
        format!(
            "cannot read the database {} to see which turns are resumable (nothing was removed)",
            redact_url(url)
        )
    };
    let store = match url {
        Some(url) => {
            let options = StoreOptions {
                max_connections: 1,
                acquire_timeout: Duration::from_secs(10),
            };
            let store = Store::open(url, options)
                .await
                .with_context(|| cannot(url))?;
            Some(store)
        }
        None => None,
    };
    let report = collect_pass(root, store.as_ref(), options).await;
    if let Some(store) = store {
        store.close().await;
    }
    match (report, url) {
        (Err(e @ CollectError::Store(_)), Some(url)) => {
            Err(anyhow::Error::new(e).context(cannot(url)))
        }
        (report, _) => Ok(report?),
    }
}

fn print_report(
    root: &Path,
    store: Option<&str>,
    retention_days: u64,
    dry_run: bool,
    report: &GcReport,
) {
    outln!("workspaces: {}", root.display());
    match store {
        Some(url) => outln!("resumable turns from: {}", redact_url(url)),
        None => outln!("resumable turns from: no database (none is resumable)"),
    }
    let verb = if dry_run { "would remove" } else { "removed" };
    let bytes = report.removed_bytes();
    outln!(
        "{verb} {} ({})",
        count(report.removed.len()),
        human_bytes(bytes)
    );
    let now = SystemTime::now();
    for removed in &report.removed {
        let why = match removed.why {
            Expired::Empty => "empty".to_string(),
            Expired::Old { newest } => format!("unchanged for {}", age(now, newest)),
        };
        outln!(
            "  {}  {why}, {}",
            removed.turn_id,
            human_bytes(removed.bytes)
        );
    }
    outln!("kept {}", count(report.kept.len()));
    for kept in &report.kept {
        let why = match kept.why {
            KeptBecause::InUse => "in use: its turn is running".to_string(),
            KeptBecause::Resumable => {
                "resumable: the store has its turn running or interrupted".to_string()
            }
            KeptBecause::WithinRetention { newest } => format!(
                "within retention: changed {} ago, kept {} after",
                age(now, newest),
                plural(retention_days, "day")
            ),
        };
        outln!("  {}  {why}", kept.turn_id);
    }
    if !report.failed.is_empty() {
        outln!("could not remove {}", count(report.failed.len()));
        for failed in &report.failed {
            outln!("  {}  {}", failed.turn_id, failed.error);
        }
    }
}

fn count(n: usize) -> String {
    plural(n as u64, "workspace")
}

fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Exact below a KiB, else one decimal in the largest unit that fits, with the exact count.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return plural(bytes, "byte");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {} = {bytes} bytes", UNITS[unit])
}

fn age(now: SystemTime, then: SystemTime) -> String {
    let secs = now.duration_since(then).unwrap_or_default().as_secs();
    match secs {
        s if s >= 86_400 => plural(s / 86_400, "day"),
        s if s >= 3_600 => plural(s / 3_600, "hour"),
        s => plural(s / 60, "minute"),
    }
}

/// `deepsolve solve`'s automatic pass: at most once a day (the stamp in the data dir), on a
/// thread of its own, never failing the turn: a problem is one warning line on stderr. The
/// returned handle lets the command wait briefly for it before exiting.
pub(crate) fn collect_in_background(settings: &Settings) -> Option<Automatic> {
    let root = default_workspace_root().ok()?;
    if !root.is_dir() || !stamp_is_stale(&root) {
        return None;
    }
    touch_stamp(&root);
    let settings = settings.clone();
    let (done, wait) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("deepsolve-gc".into())
        .spawn(move || {
            if let Err(e) = automatic_pass(&root, &settings) {
                errln!("warning: automatic workspace cleanup skipped: {e:#}");
            }
            let _ = done.send(());
        })
        .ok()?;
    Some(Automatic { wait })
}

/// An automatic pass under way.
pub(crate) struct Automatic {
    wait: std::sync::mpsc::Receiver<()>,
}

impl Automatic {
    /// Wait a little for the pass to end; past [`AUTOMATIC_GRACE`] the process exits anyway.
    pub(crate) fn finish(self) {
        let _ = self.wait.recv_timeout(AUTOMATIC_GRACE);
    }
}

fn automatic_pass(root: &Path, settings: &Settings) -> anyhow::Result<()> {
    let url = store_url(&DatabaseArgs::default(), settings)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("no runtime to ask the store")?;
    let options = GcOptions::new(settings.sandbox.retention_days);
    let report = runtime.block_on(collect(url.as_deref(), root.to_path_buf(), options))?;
    if let Some(failed) = report.failed.first() {
        errln!(
            "warning: could not remove the old workspace {}: {} (see `deepsolve gc`)",
            root.join(&failed.turn_id).display(),
            failed.error
        );
    }
    Ok(())
}

/// The stamp lives beside the workspaces' root, in the data dir.
fn stamp_path(root: &Path) -> PathBuf {
    root.parent().unwrap_or(root).join(STAMP)
}

fn stamp_is_stale(root: &Path) -> bool {
    let last = std::fs::metadata(stamp_path(root)).and_then(|m| m.modified());
    match last {
        Ok(last) => SystemTime::now()
            .duration_since(last)
            .is_ok_and(|age| age >= AUTOMATIC_EVERY),
        Err(_) => true,
    }
}

/// Best effort: without a stamp the next command simply collects again. Its time is its
/// modification time (the content, the same in seconds, is for a reader).
fn touch_stamp(root: &Path) {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let _ = std::fs::write(stamp_path(root), format!("{secs}\n"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use deepsolve_app::gc::days;

    #[test]
    fn an_sqlite_file_that_does_not_exist_is_no_store() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.db");
        let url = format!("sqlite://{}", file.display());
        assert_eq!(existing_sqlite(&url), None);
        assert_eq!(existing_sqlite("sqlite::memory:"), None);
        std::fs::write(&file, b"").unwrap();
        assert_eq!(existing_sqlite(&url), Some(format!("{url}?mode=rw")));
        assert_eq!(
            existing_sqlite(&format!("{url}?cache=shared")),
            Some(format!("{url}?cache=shared&mode=rw"))
        );
    }

    #[test]
    fn sizes_and_ages_read_plainly() {
        assert_eq!(human_bytes(0), "0 bytes");
        assert_eq!(human_bytes(1), "1 byte");
        assert_eq!(human_bytes(1536), "1.5 KiB = 1536 bytes");
        let now = SystemTime::now();
        assert_eq!(age(now, now - days(3)), "3 days");
        assert_eq!(age(now, now - Duration::from_secs(7200)), "2 hours");
        assert_eq!(age(now, now + days(1)), "0 minutes");
    }
}
