//! `POST /api/v1/turns/{id}/resume`: continue a turn whose server died.
//!
//! The turn runs again under its own id, from its stored spec, on the same runner and event
//! writer as a new turn. Its log goes on where it stopped (`first_seq` = last logged seq + 1),
//! so readers following it, or reconnecting with `Last-Event-ID`, see one gapless stream. The
//! engine starts from the turn's last `checkpoint` event (written after every finished step):
//! finished steps stay done and are not re-run. A turn that died before finishing any step
//! has no checkpoint and starts over from its spec.

use std::sync::Arc;

use deepsolve_core::TurnSpec;
use deepsolve_protocol::api::TurnCreated;
use deepsolve_protocol::{Checkpoint, EventKind, TurnStatus};
use deepsolve_store::{Store, TurnRecord};
use tokio_util::sync::CancellationToken;

use crate::error::{ApiError, ApiResult};
use crate::runner::{TurnKeys, engine_spec, launch, stored_config, with_images};
use crate::state::AppState;

/// Resume `turn` (already known to be the caller's) on this replica.
pub async fn resume_turn(state: &Arc<AppState>, turn: TurnRecord) -> ApiResult<TurnCreated> {
    if turn.status != TurnStatus::Interrupted {
        return Err(ApiError::conflict(format!(
            "only an interrupted turn can be resumed; this one is {}",
            turn.status.as_str()
        )));
    }
    let cancel = state.register_turn(&turn.id)?;
    match restart(state, &turn, cancel).await {
        Ok(created) => Ok(created),
        Err(e) => {
            state.unregister_turn(&turn.id);
            Err(e)
        }
    }
}

/// Build the continuation, then claim the turn and run it. Everything that can fail is read
/// before the claim, so a refused resume leaves the turn `interrupted`, resumable later.
async fn restart(
    state: &Arc<AppState>,
    turn: &TurnRecord,
    cancel: CancellationToken,
) -> ApiResult<TurnCreated> {
    ensure_session_idle(&state.store, turn).await?;
    let config = stored_config(&turn.spec, &turn.id)?;
    ensure_tools_offered(state, &turn.spec.tools)?;
    let mut spec = engine_spec(turn.spec.clone(), config, TurnKeys::from(turn));
    // The same images, from the store; the model's sight is checked again here.
    let images =
        crate::images::for_resumed_turn(state, &turn.id, &turn.spec.tools, turn.spec.language)
            .await?;
    with_images(&mut spec, images);
    continue_log(&state.store, &mut spec).await?;
    if !state
        .store
        .reclaim_interrupted(&turn.id, &state.config.instance_id)
        .await?
    {
        // Another request (or replica) resumed it between our read and our claim.
        return Err(ApiError::conflict(
            "the turn is no longer interrupted: it was resumed by another request",
        ));
    }
    Ok(launch(state, spec, cancel))
}

/// One running turn per session, as for new turns: a follow-up started after the crash must
/// end (or be cancelled) first.
async fn ensure_session_idle(store: &Store, turn: &TurnRecord) -> ApiResult<()> {
    let busy = store
        .session_turns(&turn.session_id)
        .await?
        .iter()
        .any(|t| t.id != turn.id && t.status == TurnStatus::Running);
    if busy {
        return Err(ApiError::conflict(
            "another turn of this session is running; wait for it or cancel it",
        ));
    }
    Ok(())
}

/// The turn's tools must still be mounted here (the sandbox may be gone since): refused
/// before the claim, the turn stays resumable where they are.
fn ensure_tools_offered(state: &AppState, tools: &[String]) -> ApiResult<()> {
    let available = state.app.tools().available();
    let missing: Vec<&str> = tools
        .iter()
        .filter(|t| !available.contains(t))
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(ApiError::conflict(format!(
        "the turn used tools this server does not offer now: {}",
        missing.join(", ")
    )))
}

/// Point `spec` at where the turn's log stopped: the next seq, and its last checkpoint.
async fn continue_log(store: &Store, spec: &mut TurnSpec) -> ApiResult<()> {
    spec.first_seq = store
        .last_seq(&spec.turn_id)
        .await?
        .map_or(0, |seq| seq + 1);
    spec.resume = last_checkpoint(store, &spec.turn_id).await?;
    Ok(())
}

async fn last_checkpoint(store: &Store, turn_id: &str) -> ApiResult<Option<Checkpoint>> {
    let Some(stored) = store.last_event_of_kind(turn_id, "checkpoint").await? else {
        return Ok(None);
    };
    match stored.decode()?.kind {
        EventKind::Checkpoint { checkpoint } => Ok(Some(checkpoint)),
        other => {
            // The kind column and the JSON disagree: the row is damaged, not the request.
            tracing::error!(
                turn_id,
                kind = other.type_name(),
                "checkpoint row holds another event"
            );
            Err(ApiError::internal())
        }
    }
}
