//! The workspace collector: a background task that removes old turn workspaces by
//! `deepsolve_app::gc`'s rule, once at start and then every `workspace_gc_interval`.
//!
//! It asks the store which turns a server may still run or resume (`running` on any replica,
//! `interrupted`) and keeps their workspaces whatever their age; a turn running in any
//! process holds its workspace's lock, so that one is kept too. The file work runs on the
//! blocking pool: requests never wait for it.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use deepsolve_app::{GcOptions, GcReport, collect_workspaces};
use deepsolve_store::StoreError;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::state::AppState;

/// Why a collection pass did not run.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("cannot ask the store which turns are resumable")]
    Store(#[from] StoreError),
    #[error(transparent)]
    Gc(#[from] deepsolve_app::gc::GcError),
    #[error("the collection task failed")]
    Task(#[from] tokio::task::JoinError),
}

/// The running collector; [`Collector::stop`] (or dropping it) ends it.
pub struct Collector {
    cancel: CancellationToken,
    /// Ends a pass between two workspaces.
    stop: Arc<AtomicBool>,
    task: Option<JoinHandle<()>>,
}

impl Collector {
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

/// Start collecting the workspaces under `workspace_root` (nothing to do without one): a
/// pass now, then one every `workspace_gc_interval`.
pub fn spawn_collector(state: &Arc<AppState>) -> Collector {
    let cancel = CancellationToken::new();
    let stop = Arc::new(AtomicBool::new(false));
    let task = tokio::spawn(run(Arc::downgrade(state), cancel.clone(), stop.clone()));
    Collector {
        cancel,
        stop,
        task: Some(task),
    }
}

async fn run(state: Weak<AppState>, cancel: CancellationToken, stop: Arc<AtomicBool>) {
    loop {
        let Some(current) = state.upgrade() else {
            return;
        };
        if current.config.workspace_root.is_none() {
            return;
        }
        let interval = current.config.workspace_gc_interval;
        match collect_once(&current, Some(stop.clone())).await {
            Ok(report) => log_report(&report),
            Err(e) => tracing::warn!(error = %e, "workspace collection skipped"),
        }
        drop(current);
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}

/// One pass over the workspaces (an empty report without a workspace root).
pub async fn collect_once(
    state: &AppState,
    stop: Option<Arc<AtomicBool>>,
) -> Result<GcReport, CollectError> {
    let Some(root) = state.config.workspace_root.clone() else {
        return Ok(GcReport::default());
    };
    let resumable: HashSet<String> = state
        .store
        .resumable_turn_ids_unscoped()
        .await?
        .into_iter()
        .collect();
    let options = GcOptions {
        retention: state.config.workspace_retention,
        resumable,
        stop,
        ..GcOptions::new(0)
    };
    let report = tokio::task::spawn_blocking(move || collect_workspaces(&root, &options)).await??;
    Ok(report)
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
