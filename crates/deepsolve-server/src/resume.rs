//! `POST /api/v1/turns/{id}/resume`: continue a turn whose server died.
//!
//! The turn runs again under its own id, from its stored spec, on the same runner and event
//! writer as a new turn. Its log goes on where it stopped (`first_seq` = last logged seq + 1),
//! so readers following it, or reconnecting with `Last-Event-ID`, see one gapless stream. The
//! engine starts from the turn's last `checkpoint` event (written after every finished step):
//! finished steps stay done and are not re-run. A turn that died before finishing any step
//! has no checkpoint and starts over from its spec.

use std::sync::Arc;

use deepsolve_app::stored::{StoredTurnError, resume_spec};
use deepsolve_protocol::TurnStatus;
use deepsolve_protocol::api::TurnCreated;
use deepsolve_store::TurnRecord;
use tokio_util::sync::CancellationToken;

use crate::error::{ApiError, ApiResult};
use crate::runner::launch;
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

/// Build the continuation (`deepsolve_app::stored::resume_spec`: everything that can refuse
/// is checked before the claim, so a refused resume leaves the turn `interrupted`, resumable
/// later), then claim the turn and run it.
async fn restart(
    state: &Arc<AppState>,
    turn: &TurnRecord,
    cancel: CancellationToken,
) -> ApiResult<TurnCreated> {
    let mut spec = resume_spec(&state.store, turn, &state.app.tools().available())
        .await
        .map_err(|e| refused(&turn.id, e))?;
    // The same images, from the store; the model's sight is checked again here.
    let images =
        crate::images::for_resumed_turn(state, &turn.id, &turn.spec.tools, turn.spec.language)
            .await?;
    images.put_on(&mut spec);
    if !crate::runner::recorder(state).reclaim(&turn.id).await? {
        // Another request (or replica) resumed it between our read and our claim.
        return Err(ApiError::conflict(
            "the turn is no longer interrupted: it was resumed by another request",
        ));
    }
    Ok(launch(state, spec, cancel))
}

/// A refusal as the API says it: the client's conflicts as 409s; a damaged row is the
/// server's fault, logged and not described.
fn refused(turn_id: &str, e: StoredTurnError) -> ApiError {
    match e {
        StoredTurnError::NotInterrupted(_) | StoredTurnError::SessionBusy => {
            ApiError::conflict(e.to_string())
        }
        StoredTurnError::ToolsMissing(tools) => ApiError::conflict(format!(
            "the turn used tools this server does not offer now: {}",
            tools.join(", ")
        )),
        StoredTurnError::Store(e) => ApiError::from(e),
        StoredTurnError::DamagedConfig(_) | StoredTurnError::DamagedCheckpoint(_) => {
            tracing::error!(turn_id, error = %e, "a stored turn cannot be resumed");
            ApiError::internal()
        }
    }
}
