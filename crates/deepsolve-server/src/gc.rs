//! The server's workspace collector: `deepsolve_app::gc`'s driver on the server's store and
//! settings — a pass at start, then one every `workspace_gc_interval`, keeping the workspaces
//! of turns a server may still run or resume (`running` on any replica, `interrupted`) and of
//! turns running in any process (they hold their workspace's lock).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use deepsolve_app::GcReport;
use deepsolve_app::gc::{GcOptions, collect_pass};

pub use deepsolve_app::gc::{CollectError, Collector};

use crate::state::AppState;

/// Start collecting the workspaces under `workspace_root` (nothing to do without one): a
/// pass now, then one every `workspace_gc_interval`.
pub fn spawn_collector(state: &Arc<AppState>) -> Collector {
    Collector::spawn(
        state.store.clone(),
        state.config.workspace_root.clone(),
        state.config.workspace_retention,
        state.config.workspace_gc_interval,
    )
}

/// One pass over the workspaces (an empty report without a workspace root); `stop` ends it
/// between two workspaces.
pub async fn collect_once(
    state: &AppState,
    stop: Option<Arc<AtomicBool>>,
) -> Result<GcReport, CollectError> {
    let Some(root) = state.config.workspace_root.clone() else {
        return Ok(GcReport::default());
    };
    let options = GcOptions {
        retention: state.config.workspace_retention,
        stop,
        ..GcOptions::new(0)
    };
    collect_pass(root, Some(&state.store), options).await
}
