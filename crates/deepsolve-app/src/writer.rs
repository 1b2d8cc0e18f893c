//! The event writer: one task that appends every turn's events to the store as they happen,
//! in batches, and records each turn's end after its last event. Every front end records its
//! turns through it ([`crate::life`]): a turn run from the command line is logged exactly as a
//! served one.
//!
//! `EventSink::send` is synchronous and must not drop events, so sinks push into an unbounded
//! channel; the writer drains whatever has accumulated into one transaction (one fsync for
//! many events across many turns), which is what lets one SQLite file keep up with thousands
//! of streaming turns. A turn's `Finish` travels through the same channel, so its status is
//! written only after all its events are.
//!
//! The writer runs on a thread of its own (a single-threaded runtime) with a connection of
//! its own. On the shared runtime every database round trip of a batch (begin, inserts,
//! commit) waited for a turn behind thousands of ready reader, connection and turn tasks: at
//! 2 000 streaming turns a ~800-event batch took ~32 ms, of which the database itself needed
//! a fraction, so the writer saturated and events queued for seconds before being stored.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use deepsolve_core::EventSink;
use deepsolve_core::event::now_ms;
use deepsolve_protocol::{EventKind, TurnEvent};
use deepsolve_store::{AnyConnection, Store, StoreError, StoredEvent, TurnFinish};
use tokio::sync::{mpsc, oneshot};

/// Events written per transaction at most.
const BATCH: usize = 1024;
/// Encoded event bytes per transaction at most (a batch of large events, such as a fast
/// stream's gathered text, is written in several): while a batch is written it is held three
/// or four times over, encoded here, in the database driver's arguments and in SQLite's own
/// copies. Ordinary batches (a thousand small events) stay well under it.
const BATCH_BYTES: usize = 256 * 1024;
/// Attempts at a failing batch before falling back to per-turn writes.
const ATTEMPTS: u32 = 4;

/// What a front end counts of the turns it records, as their events are logged (the server's
/// metrics); every method does nothing unless implemented. The sink measures the times
/// itself, so every front end reports the same numbers whatever the model or tool.
pub trait TurnObserver: Send + Sync {
    /// An event of this type (`EventKind::type_name`) was logged.
    fn event(&self, _type_name: &str) {}
    /// A model round's first text or reasoning arrived this long after the round started.
    fn model_first_delta(&self, _latency: Duration) {}
    /// A model round took this long.
    fn model_round(&self, _duration: Duration) {}
    /// A tool call ended.
    fn tool_call(&self, _tool: &str, _ok: bool, _duration: Duration) {}
    /// A turn ended: `stop_reason` is its stop reason's name, or `failed` when it never ran.
    fn turn_ended(&self, _stop_reason: &str, _rounds: u32, _prompt: u64, _completion: u64) {}
}

/// Counts nothing: a front end without metrics (the CLI, an eval run).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl TurnObserver for NoObserver {}

enum WriterMsg {
    Event(TurnEvent),
    Finish {
        turn_id: String,
        /// The turn's `turn_finished`, held back by its sink so that it is committed with the
        /// turn's end: a client that sees it and reads the turn finds it ended.
        last: Option<Box<TurnEvent>>,
        finish: Box<TurnFinish>,
        done: oneshot::Sender<()>,
    },
}

/// A handle to the writer task.
#[derive(Clone)]
pub struct EventWriter {
    tx: mpsc::UnboundedSender<WriterMsg>,
    observer: Arc<dyn TurnObserver>,
}

impl EventWriter {
    /// Start the writer on its own thread (see the module docs); should that thread or its
    /// runtime fail to start, the writer runs as a task on the current runtime instead.
    /// `observer` is told what every turn's events show ([`NoObserver`]: nothing is counted).
    pub fn spawn(store: Store, observer: Arc<dyn TurnObserver>) -> EventWriter {
        let (tx, rx) = mpsc::unbounded_channel();
        if let Err((store, rx)) = spawn_thread(store, rx) {
            tokio::spawn(run(store, rx));
        }
        EventWriter { tx, observer }
    }

    /// Who is told what the turns' events show.
    pub fn observer(&self) -> &Arc<dyn TurnObserver> {
        &self.observer
    }

    /// A sink for one turn.
    pub fn sink(&self, turn_id: &str, first_seq: u64) -> TurnSink {
        TurnSink {
            turn_id: turn_id.to_string(),
            tx: self.tx.clone(),
            next_seq: AtomicU64::new(first_seq),
            observer: self.observer.clone(),
            round: Mutex::new(RoundClock::default()),
            held_end: Mutex::new(None),
        }
    }

    /// Record a turn's end once every event sent before it is written, in one transaction
    /// with the `turn_finished` its sink held back.
    pub async fn finish(&self, sink: &TurnSink, finish: TurnFinish) {
        let (done, wait) = oneshot::channel();
        let last = sink
            .held_end
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let msg = WriterMsg::Finish {
            turn_id: sink.turn_id.clone(),
            last: last.map(Box::new),
            finish: Box::new(finish),
            done,
        };
        if self.tx.send(msg).is_err() {
            tracing::error!(
                turn_id = %sink.turn_id,
                "event writer is gone; the turn's end is not recorded"
            );
            return;
        }
        let _ = wait.await;
    }
}

/// The `EventSink` of one turn.
pub struct TurnSink {
    turn_id: String,
    tx: mpsc::UnboundedSender<WriterMsg>,
    next_seq: AtomicU64,
    observer: Arc<dyn TurnObserver>,
    round: Mutex<RoundClock>,
    /// `turn_finished`, kept until [`EventWriter::finish`] writes it with the turn's end.
    held_end: Mutex<Option<TurnEvent>>,
}

/// When the current model round started, and whether its first delta was seen.
#[derive(Default)]
struct RoundClock {
    started: Option<Instant>,
    first_delta_seen: bool,
}

impl TurnSink {
    /// Log an event the engine did not emit (a turn that could not start, a crashed task),
    /// numbered after everything the engine sent.
    pub fn send_extra(&self, kind: EventKind) {
        let seq = self.next_seq.load(Ordering::SeqCst);
        self.send(TurnEvent {
            turn_id: self.turn_id.clone(),
            seq,
            ts: now_ms(),
            kind,
        });
    }
}

impl TurnSink {
    /// What the event stream shows, to the observer: the same numbers whatever the model or
    /// tool.
    fn observe(&self, kind: &EventKind) {
        self.observer.event(kind.type_name());
        let mut round = self.round.lock().unwrap_or_else(PoisonError::into_inner);
        match kind {
            EventKind::RoundStarted { .. } => {
                *round = RoundClock {
                    started: Some(Instant::now()),
                    first_delta_seen: false,
                };
            }
            EventKind::TextDelta { .. } | EventKind::ReasoningDelta { .. } => {
                if let (Some(started), false) = (round.started, round.first_delta_seen) {
                    round.first_delta_seen = true;
                    self.observer.model_first_delta(started.elapsed());
                }
            }
            EventKind::RoundFinished { .. } => {
                if let Some(started) = round.started.take() {
                    self.observer.model_round(started.elapsed());
                }
            }
            EventKind::ToolResult {
                name,
                ok,
                duration_ms,
                ..
            } => self
                .observer
                .tool_call(name, *ok, Duration::from_millis(*duration_ms)),
            EventKind::TurnFinished {
                stop_reason,
                usage,
                rounds,
                ..
            } => self.observer.turn_ended(
                stop_reason.as_str(),
                *rounds,
                usage.prompt_tokens,
                usage.completion_tokens,
            ),
            _ => {}
        }
    }
}

impl EventSink for TurnSink {
    fn send(&self, event: TurnEvent) {
        self.next_seq.fetch_max(event.seq + 1, Ordering::SeqCst);
        self.observe(&event.kind);
        if matches!(event.kind, EventKind::TurnFinished { .. }) {
            *self.held_end.lock().unwrap_or_else(PoisonError::into_inner) = Some(event);
            return;
        }
        if self.tx.send(WriterMsg::Event(event)).is_err() {
            tracing::error!(turn_id = %self.turn_id, "event writer is gone; event lost");
        }
    }
}

type Inbox = mpsc::UnboundedReceiver<WriterMsg>;

/// Run the writer on a thread of its own, with a single-threaded runtime; hands the writer
/// back when that cannot start.
fn spawn_thread(store: Store, rx: Inbox) -> Result<(), (Store, Inbox)> {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::warn!(error = %e, "no event writer runtime; writing on the shared one");
            return Err((store, rx));
        }
    };
    // The writer travels over a channel so that a failed spawn leaves it with the caller.
    let (hand_over, take) = std::sync::mpsc::channel::<(Store, Inbox)>();
    let spawned = std::thread::Builder::new()
        .name("deepsolve-event-writer".into())
        .spawn(move || {
            if let Ok((store, rx)) = take.recv() {
                runtime.block_on(run(store, rx));
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "no event writer thread; writing on the shared runtime");
        return Err((store, rx));
    }
    hand_over
        .send((store, rx))
        .map_err(|std::sync::mpsc::SendError(writer)| writer)
}

/// A turn's end waiting for the events received with it to be written.
struct Ending {
    turn_id: String,
    finish: Box<TurnFinish>,
    done: oneshot::Sender<()>,
}

async fn run(store: Store, mut rx: Inbox) {
    let mut inbox = Vec::with_capacity(BATCH);
    let mut pending: Vec<Arc<StoredEvent>> = Vec::with_capacity(BATCH);
    let mut endings: Vec<Ending> = Vec::new();
    let mut conn = Conn::default();
    while rx.recv_many(&mut inbox, BATCH).await > 0 {
        let mut pending_bytes = 0;
        for msg in inbox.drain(..) {
            match msg {
                WriterMsg::Event(event) => {
                    pending_bytes += encode(event, &mut pending);
                    if pending_bytes >= BATCH_BYTES {
                        flush(&store, &mut conn, &mut pending).await;
                        pending_bytes = 0;
                    }
                }
                WriterMsg::Finish {
                    turn_id,
                    last,
                    finish,
                    done,
                } => {
                    // Never flushed on its own: it goes in with the end below.
                    if let Some(last) = last {
                        encode(*last, &mut pending);
                    }
                    endings.push(Ending {
                        turn_id,
                        finish,
                        done,
                    });
                }
            }
        }
        // Ends go in with the batch's last events, in one transaction (hundreds of turns end
        // at once under load): a turn's status is `finished` as soon as its `turn_finished`
        // is visible, and never before its events.
        if endings.is_empty() {
            flush(&store, &mut conn, &mut pending).await;
        } else {
            write_with_ends(&store, &mut conn, &mut pending, &endings).await;
            for ending in endings.drain(..) {
                let _ = ending.done.send(());
            }
        }
    }
}

/// Encode `event` onto `pending`; its encoded size (0 when it cannot be encoded).
fn encode(event: TurnEvent, pending: &mut Vec<Arc<StoredEvent>>) -> usize {
    match StoredEvent::from_event(&event) {
        Ok(stored) => {
            // The event itself is not needed any more once encoded.
            drop(event);
            let bytes = stored.data.len();
            // Shared from here on: the store writes it, and the hub hands this very
            // allocation to every live reader of the turn.
            pending.push(Arc::new(stored));
            bytes
        }
        Err(e) => {
            tracing::error!(error = %e, "unencodable event dropped");
            0
        }
    }
}

/// The writer's own connection, opened on first use and again after an error.
#[derive(Default)]
struct Conn(Option<AnyConnection>);

impl Conn {
    async fn get(&mut self, store: &Store) -> Result<&mut AnyConnection, StoreError> {
        Ok(match self.0 {
            Some(ref mut conn) => conn,
            None => self.0.insert(store.writer_connection().await?),
        })
    }

    async fn append(
        &mut self,
        store: &Store,
        events: &[Arc<StoredEvent>],
    ) -> Result<(), StoreError> {
        let result = store.append_events_on(self.get(store).await?, events).await;
        self.forget_if_failed(result)
    }

    async fn append_and_finish(
        &mut self,
        store: &Store,
        events: &[Arc<StoredEvent>],
        ends: &[(&str, &TurnFinish)],
    ) -> Result<(), StoreError> {
        let result = store
            .append_and_finish_on(self.get(store).await?, events, ends)
            .await;
        self.forget_if_failed(result)
    }

    /// The connection may be what broke: the next attempt opens a fresh one.
    fn forget_if_failed(&mut self, result: Result<(), StoreError>) -> Result<(), StoreError> {
        if result.is_err() {
            self.0 = None;
        }
        result
    }
}

/// Write `pending` and record the ends in one transaction; should that fail, the events the
/// usual way (with retries) and then the ends one by one with retries, so one bad turn cannot
/// keep the others' events or ends unrecorded.
async fn write_with_ends(
    store: &Store,
    conn: &mut Conn,
    pending: &mut Vec<Arc<StoredEvent>>,
    endings: &[Ending],
) {
    let ends: Vec<(&str, &TurnFinish)> = endings
        .iter()
        .map(|e| (e.turn_id.as_str(), &*e.finish))
        .collect();
    match conn.append_and_finish(store, pending, &ends).await {
        Ok(()) => pending.clear(),
        Err(e) => {
            tracing::warn!(error = %e, ends = ends.len(), "recording turn ends failed");
            flush(store, conn, pending).await;
            for (turn_id, finish) in ends {
                finish_turn(store, turn_id, finish).await;
            }
        }
    }
}

async fn finish_turn(store: &Store, turn_id: &str, finish: &TurnFinish) {
    for attempt in 0..ATTEMPTS {
        match store.finish_turn(turn_id, finish).await {
            Ok(()) => return,
            Err(e) => {
                tracing::warn!(turn_id, attempt, error = %e, "recording the turn's end failed");
                tokio::time::sleep(backoff(attempt)).await;
            }
        }
    }
    tracing::error!(turn_id, "the turn's end could not be recorded");
}

/// Write the batch, retrying transient failures. A batch that keeps failing is split by turn
/// so one bad turn (say, deleted meanwhile) cannot take the others' events down with it.
async fn flush(store: &Store, conn: &mut Conn, pending: &mut Vec<Arc<StoredEvent>>) {
    if pending.is_empty() {
        return;
    }
    for attempt in 0..ATTEMPTS {
        match conn.append(store, pending).await {
            Ok(()) => {
                pending.clear();
                return;
            }
            Err(e) => {
                tracing::warn!(attempt, error = %e, events = pending.len(), "event batch failed");
                tokio::time::sleep(backoff(attempt)).await;
            }
        }
    }
    let mut by_turn: HashMap<String, Vec<Arc<StoredEvent>>> = HashMap::new();
    for e in pending.drain(..) {
        by_turn.entry(e.turn_id.clone()).or_default().push(e);
    }
    for (turn_id, events) in by_turn {
        if let Err(e) = conn.append(store, &events).await {
            tracing::error!(turn_id, error = %e, lost = events.len(), "events could not be logged");
        }
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(50u64 << attempt.min(6))
}
