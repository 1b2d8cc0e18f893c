//! Following a turn's events over SSE: replay from the log after `Last-Event-ID`, then live.
//! Each frame is `event: <type>` (the event's `type`), `id: <seq>`, `data: <the event's JSON>`.
//!
//! A reader subscribes to the store's hub *before* reading the log, so nothing committed in
//! between is missed; live events are forwarded without touching the database, and anything
//! out of order (a lag, a poke from another replica, a gap) makes it re-read the log. The
//! stream ends after `turn_finished`, or once the log is drained and the turn is no longer
//! running (failed or interrupted turns have no `turn_finished`).
//!
//! The SSE response reads the hub itself, on its connection's task: a live event goes from
//! the writer's publish straight to the connection, with no reader task and no channel in
//! between (one wake-up per event per reader, not two).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::Event;
use deepsolve_store::{HubMsg, Received, Store, StoreError, StoredEvent, Subscription};
use futures::Stream;
use tokio::sync::mpsc;

/// Events read from the log per query.
const PAGE: u32 = 500;
/// Events buffered per [`tail`] receiver before its reader waits for it.
const BUFFER: usize = 256;

/// The SSE stream of a turn's events with `seq > after`.
pub fn follow(
    store: Store,
    turn_id: String,
    after: Option<u64>,
    poll: Duration,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let reader = Reader::new(store, turn_id, after, poll);
    futures::stream::unfold(reader, |mut reader| async move {
        let event = reader.next().await?;
        // `event:` names the type, so a browser's `EventSource.addEventListener('answer', …)`
        // gets exactly those frames.
        let mut sse = Event::default();
        if is_event_name(&event.kind) {
            sse = sse.event(event.kind.as_str());
        }
        let sse = sse.id(event.seq.to_string()).data(event.data.as_str());
        Some((Ok(sse), reader))
    })
}

/// The store's `kind` is the event's `type` (`snake_case`); anything else (a damaged row)
/// would break the frame, and goes without an `event:` line.
fn is_event_name(kind: &str) -> bool {
    !kind.is_empty() && kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
}

/// A turn's events with `seq > after`, in order and without gaps, from the log then live, on
/// a task of their own (for consumers that are not a response stream); the channel closes
/// after `turn_finished` or when the turn ended without one. Dropping the receiver stops the
/// reader task. A live event is shared with every other reader of the turn, not copied for
/// each (events can be megabytes).
pub fn tail(
    store: Store,
    turn_id: String,
    after: Option<u64>,
    poll: Duration,
) -> mpsc::Receiver<Arc<StoredEvent>> {
    let (tx, rx) = mpsc::channel(BUFFER);
    let mut reader = Reader::new(store, turn_id, after, poll);
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                _ = tx.closed() => return,
                next = reader.next() => next,
            };
            let Some(event) = next else { return };
            if tx.send(event).await.is_err() {
                return;
            }
        }
    });
    rx
}

/// Where a reader is in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Following live events.
    Live,
    /// The turn ended without a `turn_finished` seen: drain the log once more (events
    /// committed just before its status changed), then stop.
    LastDrain,
    /// Nothing more will come (after `turn_finished`, or the last drain).
    Done,
}

/// One reader of one turn: what it has queued for its consumer, and where it is.
struct Reader {
    store: Store,
    turn_id: String,
    sub: Subscription,
    poll: Duration,
    /// The last `seq` queued.
    last: Option<u64>,
    /// Events read but not yet taken by the consumer (at most a page of the log).
    ready: VecDeque<Arc<StoredEvent>>,
    /// The log must be read before live events can be trusted again.
    reread: bool,
    phase: Phase,
}

impl Reader {
    /// Subscribes at once: everything committed from here on reaches this reader.
    fn new(store: Store, turn_id: String, after: Option<u64>, poll: Duration) -> Reader {
        let sub = store.subscribe(&turn_id);
        Reader {
            store,
            turn_id,
            sub,
            poll,
            last: after,
            ready: VecDeque::new(),
            reread: true,
            phase: Phase::Live,
        }
    }

    /// The next event, or `None` once the turn is over (or the store failed).
    async fn next(&mut self) -> Option<Arc<StoredEvent>> {
        match self.next_event().await {
            Ok(event) => event,
            Err(e) => {
                tracing::debug!(turn_id = %self.turn_id, error = %e, "event reader stopped");
                None
            }
        }
    }

    async fn next_event(&mut self) -> Result<Option<Arc<StoredEvent>>, StoreError> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Ok(Some(event));
            }
            if self.phase == Phase::Done {
                return Ok(None);
            }
            if self.reread {
                self.read_log().await?;
                continue;
            }
            tokio::select! {
                received = self.sub.recv() => match received {
                    Received::Msg(HubMsg::Event(event)) => self.offer(event),
                    Received::Msg(HubMsg::Poke) | Received::Lagged => self.reread = true,
                },
                _ = tokio::time::sleep(self.poll) => self.reread = true,
            }
        }
    }

    /// Queue a page of what the log has after `last`. Once the log is drained, live events
    /// take over; or, when the turn is over, one last drain and the end.
    async fn read_log(&mut self) -> Result<(), StoreError> {
        let page = self
            .store
            .events_after(&self.turn_id, self.last, PAGE)
            .await?;
        let full = page.len() == PAGE as usize;
        for event in page {
            self.queue(Arc::new(event));
            if self.phase == Phase::Done {
                return Ok(());
            }
        }
        if full {
            // More to read once this page is taken.
            return Ok(());
        }
        if self.phase == Phase::LastDrain {
            self.phase = Phase::Done;
        } else if self.turn_is_over().await? {
            self.phase = Phase::LastDrain;
        } else {
            self.reread = false;
        }
        Ok(())
    }

    async fn turn_is_over(&self) -> Result<bool, StoreError> {
        Ok(self
            .store
            .turn_unscoped(&self.turn_id)
            .await?
            .is_none_or(|t| t.status.is_terminal()))
    }

    /// A live event: queued if it is the next one; a gap sends the reader to the log.
    fn offer(&mut self, event: Arc<StoredEvent>) {
        match self.last {
            Some(last) if event.seq <= last => {}
            Some(last) if event.seq != last + 1 => self.reread = true,
            // With nothing sent yet, the first live event must be the turn's first; the log
            // knows whether earlier ones exist.
            None if event.seq != 0 => self.reread = true,
            _ => self.queue(event),
        }
    }

    fn queue(&mut self, event: Arc<StoredEvent>) {
        self.last = Some(event.seq);
        if event.is_turn_finished() {
            self.phase = Phase::Done;
        }
        self.ready.push_back(event);
    }
}
