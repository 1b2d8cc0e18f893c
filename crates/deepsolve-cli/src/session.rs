//! Sessions from the command line: the store the server uses, as its single-user identity
//! (or `--user`), so `solve -c` follows up on the last conversation, `--session ID` on any,
//! and the server's history shows what was solved here.

use deepsolve_protocol::PriorTurn;
use deepsolve_store::Store;

use crate::exit::UsageError;

/// The session a turn continues and what it sees of it.
pub(crate) struct FollowUp {
    pub(crate) session_id: String,
    /// The earlier turns with an answer, oldest first (the server builds a follow-up's
    /// history the same way: `Store::prior_turns`).
    pub(crate) history: Vec<PriorTurn>,
}

/// The session `solve -c` or `--session ID` continues (`None`: a new one).
pub(crate) async fn follow_up(
    store: &Store,
    user_id: &str,
    continue_last: bool,
    session: Option<&str>,
) -> anyhow::Result<Option<FollowUp>> {
    let session = match (continue_last, session) {
        (false, None) => return Ok(None),
        (_, Some(id)) => store.session(id, user_id).await?.ok_or_else(|| {
            UsageError::error(format!(
                "no session '{id}' (`deepsolve history` lists the turns with their sessions)"
            ))
        })?,
        (true, None) => store
            .list_sessions(user_id, 1)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| {
                UsageError::error("no earlier session to continue: solve a problem first")
            })?,
    };
    // A turn of the session whose process was killed would block the follow-up as "still
    // running": it is interrupted instead.
    deepsolve_app::owner::interrupt_dead_cli_turns(store).await?;
    Ok(Some(FollowUp {
        history: store.prior_turns(&session.id).await?,
        session_id: session.id,
    }))
}
