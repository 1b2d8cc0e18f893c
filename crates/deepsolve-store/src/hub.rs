//! In-process live tailing: the store publishes every committed event to the readers of its
//! turn, and "pokes" them when something they cannot see directly changed (the turn finished,
//! or another replica appended events — announced through PostgreSQL LISTEN/NOTIFY).
//!
//! A reader subscribes *before* it reads the log, so nothing committed in between is missed;
//! it de-duplicates by `seq`, and re-reads the log after a poke or a lag.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::broadcast;

use crate::model::{AppendEvent, StoredEvent};

/// Messages per turn a slow reader may fall behind before it must re-read the log. The ring
/// is allocated whole when a turn's first reader attaches (about 40 bytes a slot), so it is
/// sized for the backlog a live reader really has — the events of a few writer batches —
/// not for a whole turn: a reader further behind loses nothing, it reads the log instead.
const CAPACITY: usize = 128;

/// What a subscriber receives.
#[derive(Debug, Clone)]
pub enum HubMsg {
    /// An event just committed by this process.
    Event(Arc<StoredEvent>),
    /// Something changed that is only in the database: re-read the log and the turn's status.
    Poke,
}

/// The per-turn broadcast channels of the readers currently attached.
#[derive(Default)]
pub struct Hub {
    turns: Mutex<HashMap<String, broadcast::Sender<HubMsg>>>,
}

impl Hub {
    pub fn subscribe(self: &Arc<Self>, turn_id: &str) -> Subscription {
        let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        let rx = turns
            .entry(turn_id.to_string())
            .or_insert_with(|| broadcast::channel(CAPACITY).0)
            .subscribe();
        Subscription {
            hub: self.clone(),
            turn_id: turn_id.to_string(),
            rx: Some(rx),
        }
    }

    /// Deliver to the turn's readers, if any. Never blocks: a full channel drops the oldest
    /// message for the slowest reader, which then sees `Lagged` and re-reads the log.
    pub fn publish(&self, turn_id: &str, msg: HubMsg) {
        let turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(tx) = turns.get(turn_id) {
            let _ = tx.send(msg);
        }
    }

    /// Deliver a batch of committed events under one lock (the writer's hot path).
    pub fn publish_events<E: AppendEvent>(&self, events: &[E]) {
        let turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        if turns.is_empty() {
            return;
        }
        for e in events {
            if let Some(tx) = turns.get(&e.event().turn_id) {
                let _ = tx.send(HubMsg::Event(e.shared()));
            }
        }
    }

    /// Turns with at least one reader attached (for tests and metrics).
    pub fn watched_turns(&self) -> usize {
        self.turns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn detach(&self, turn_id: &str) {
        let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        if turns
            .get(turn_id)
            .is_some_and(|tx| tx.receiver_count() == 0)
        {
            turns.remove(turn_id);
        }
    }
}

/// A reader's attachment to one turn; detaches (and frees the channel) when dropped.
pub struct Subscription {
    hub: Arc<Hub>,
    turn_id: String,
    rx: Option<broadcast::Receiver<HubMsg>>,
}

/// What `Subscription::recv` yields.
#[derive(Debug)]
pub enum Received {
    Msg(HubMsg),
    /// Messages were lost to a slow reader: re-read the log.
    Lagged,
}

impl Subscription {
    pub async fn recv(&mut self) -> Received {
        let Some(rx) = self.rx.as_mut() else {
            // Closed: nothing will ever arrive; the reader's own poll timer keeps it going.
            return std::future::pending().await;
        };
        match rx.recv().await {
            Ok(msg) => Received::Msg(msg),
            Err(broadcast::error::RecvError::Lagged(_)) => Received::Lagged,
            // The hub never drops a sender while receivers exist; treat it like a lag so the
            // reader falls back to the log instead of spinning.
            Err(broadcast::error::RecvError::Closed) => {
                self.rx = None;
                Received::Lagged
            }
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        drop(self.rx.take());
        self.hub.detach(&self.turn_id);
    }
}
