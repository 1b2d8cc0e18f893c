//! PostgreSQL LISTEN/NOTIFY: readers on this replica learn that another replica appended
//! events to a turn they follow, and re-read the log: how replicas behind one load balancer share live turns.

use std::time::Duration;

use sqlx::postgres::PgListener;

use crate::error::StoreError;
use crate::events::NOTIFY_CHANNEL;
use crate::hub::HubMsg;
use crate::{Backend, Store};

/// The notification kind that asks the owning replica to cancel a turn.
const CANCEL: &str = "cancel";

impl Store {
    /// Start the listener task (PostgreSQL only; a no-op on SQLite, where one process owns the
    /// file). It reconnects on errors; readers also poll, so a missed notification only delays
    /// them.
    pub async fn start_listener(&self) -> Result<(), StoreError> {
        if self.backend() != Backend::Postgres {
            return Ok(());
        }
        let mut listener = PgListener::connect(&self.inner.url).await?;
        listener.listen(NOTIFY_CHANNEL).await?;
        let store = self.clone();
        tokio::spawn(async move {
            loop {
                match listener.recv().await {
                    Ok(note) => store.on_notification(note.payload()),
                    Err(e) => {
                        tracing::warn!(error = %e, "event listener lost its connection; retrying");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        });
        Ok(())
    }

    fn on_notification(&self, payload: &str) {
        let mut parts = payload.split(' ');
        let (Some(tag), Some(turn_id), what) = (parts.next(), parts.next(), parts.next()) else {
            return;
        };
        // Our own appends were delivered in-process already.
        if tag == self.inner.process_tag {
            return;
        }
        if what == Some(CANCEL) {
            let _ = self.inner.cancels.send(turn_id.to_string());
        } else {
            self.hub().publish(turn_id, HubMsg::Poke);
        }
    }

    /// Ask whichever replica runs a turn to cancel it (PostgreSQL; on SQLite one process runs
    /// everything, so there is nobody else to ask).
    pub async fn request_cancel(&self, turn_id: &str) -> Result<bool, StoreError> {
        if self.backend() != Backend::Postgres {
            return Ok(false);
        }
        self.notify_other_replicas(turn_id, CANCEL).await?;
        Ok(true)
    }

    /// Turn ids other replicas asked this one to cancel.
    pub fn cancel_requests(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.inner.cancels.subscribe()
    }
}
