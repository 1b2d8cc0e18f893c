//! Following a turn's events over SSE: replay from the log after `Last-Event-ID`, then live.
//!
//! Each reader is a small task that feeds the HTTP response through a bounded channel. It
//! subscribes to the store's hub *before* reading the log, so nothing committed in between
//! is missed; live events are forwarded without touching the database, and anything out of
//! order (a lag, a poke from another replica, a gap) makes it re-read the log. The stream
//! ends after `turn_finished`, or once the log is drained and the turn is no longer running
//! (failed or interrupted turns have no `turn_finished`).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::Event;
use deepsolve_store::{HubMsg, Received, Store, StoredEvent};
use futures::Stream;
use tokio::sync::mpsc;

/// Events read from the log per query.
const PAGE: u32 = 500;
/// Events buffered per reader before the reader waits for its client.
const BUFFER: usize = 256;

/// The SSE stream of a turn's events with `seq > after`.
pub fn follow(
    store: Store,
    turn_id: String,
    after: Option<u64>,
    poll: Duration,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let rx = tail(store, turn_id, after, poll);
    futures::stream::unfold(rx, |mut rx| async move {
        let event = rx.recv().await?;
        let sse = Event::default()
            .id(event.seq.to_string())
            .data(event.data.as_str());
        Some((Ok(sse), rx))
    })
}

/// A turn's events with `seq > after`, in order and without gaps, from the log then live; the
/// channel closes after `turn_finished` or when the turn ended without one. Dropping the
/// receiver stops the reader task. A live event is shared with every other reader of the
/// turn, not copied for each (events can be megabytes).
pub fn tail(
    store: Store,
    turn_id: String,
    after: Option<u64>,
    poll: Duration,
) -> mpsc::Receiver<Arc<StoredEvent>> {
    let (tx, rx) = mpsc::channel(BUFFER);
    tokio::spawn(async move {
        let mut reader = Reader {
            store,
            turn_id,
            last: after,
            tx,
        };
        if let Err(e) = reader.run(poll).await {
            tracing::debug!(error = %e, "event reader stopped");
        }
    });
    rx
}

#[derive(Debug, thiserror::Error)]
enum Stop {
    #[error("the client went away")]
    ClientGone,
    #[error(transparent)]
    Store(#[from] deepsolve_store::StoreError),
}

enum Progress {
    /// `turn_finished` was sent: nothing more will come.
    Finished,
    Open,
}

struct Reader {
    store: Store,
    turn_id: String,
    /// The last `seq` sent.
    last: Option<u64>,
    tx: mpsc::Sender<Arc<StoredEvent>>,
}

impl Reader {
    async fn run(&mut self, poll: Duration) -> Result<(), Stop> {
        let mut sub = self.store.subscribe(&self.turn_id);
        let mut reread = true;
        loop {
            if reread {
                if let Progress::Finished = self.drain().await? {
                    return Ok(());
                }
                if self.turn_is_over().await? {
                    // A last drain: events committed just before the status changed.
                    self.drain().await?;
                    return Ok(());
                }
                reread = false;
            }
            tokio::select! {
                _ = self.tx.closed() => return Err(Stop::ClientGone),
                received = sub.recv() => match received {
                    Received::Msg(HubMsg::Event(event)) => match self.offer(event).await? {
                        Offer::Finished => return Ok(()),
                        Offer::Sent | Offer::Old => {}
                        Offer::Gap => reread = true,
                    },
                    Received::Msg(HubMsg::Poke) | Received::Lagged => reread = true,
                },
                _ = tokio::time::sleep(poll) => reread = true,
            }
        }
    }

    /// Send everything the log has after `last`.
    async fn drain(&mut self) -> Result<Progress, Stop> {
        loop {
            let page = self
                .store
                .events_after(&self.turn_id, self.last, PAGE)
                .await?;
            let full = page.len() == PAGE as usize;
            for event in page {
                if let Offer::Finished = self.send(Arc::new(event)).await? {
                    return Ok(Progress::Finished);
                }
            }
            if !full {
                return Ok(Progress::Open);
            }
        }
    }

    async fn turn_is_over(&self) -> Result<bool, Stop> {
        Ok(self
            .store
            .turn_unscoped(&self.turn_id)
            .await?
            .is_none_or(|t| t.status.is_terminal()))
    }

    /// A live event: send it if it is the next one.
    async fn offer(&mut self, event: Arc<StoredEvent>) -> Result<Offer, Stop> {
        match self.last {
            Some(last) if event.seq <= last => Ok(Offer::Old),
            Some(last) if event.seq != last + 1 => Ok(Offer::Gap),
            // With nothing sent yet, the first live event must be the turn's first; the log
            // knows whether earlier ones exist.
            None if event.seq != 0 => Ok(Offer::Gap),
            _ => self.send(event).await,
        }
    }

    async fn send(&mut self, event: Arc<StoredEvent>) -> Result<Offer, Stop> {
        let seq = event.seq;
        let finished = event.is_turn_finished();
        self.tx.send(event).await.map_err(|_| Stop::ClientGone)?;
        self.last = Some(seq);
        Ok(if finished {
            Offer::Finished
        } else {
            Offer::Sent
        })
    }
}

enum Offer {
    Sent,
    Finished,
    Old,
    Gap,
}
