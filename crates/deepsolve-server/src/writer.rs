//! The event writer: one task that appends every turn's events to the store as they happen
//! (DESIGN R9), in batches, and records each turn's end after its last event.
//!
//! `EventSink::send` is synchronous and must not drop events, so sinks push into an unbounded
//! channel; the writer drains whatever has accumulated into one transaction (one fsync for
//! many events across many turns), which is what lets one SQLite file keep up with thousands
//! of streaming turns. A turn's `Finish` travels through the same channel, so its status is
//! written only after all its events are.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use deepsolve_core::event::{EventKind, now_ms};
use deepsolve_core::{EventSink, TurnEvent};
use deepsolve_store::{Store, StoredEvent, TurnFinish};
use tokio::sync::{mpsc, oneshot};

use crate::metrics::Metrics;

/// Events written per transaction at most.
const BATCH: usize = 1024;
/// Attempts at a failing batch before falling back to per-turn writes.
const ATTEMPTS: u32 = 4;

enum WriterMsg {
    Event(TurnEvent),
    Finish {
        turn_id: String,
        finish: Box<TurnFinish>,
        done: oneshot::Sender<()>,
    },
}

/// A handle to the writer task.
#[derive(Clone)]
pub struct EventWriter {
    tx: mpsc::UnboundedSender<WriterMsg>,
    metrics: Arc<Metrics>,
}

impl EventWriter {
    /// Start the writer task on the current runtime.
    pub fn spawn(store: Store, metrics: Arc<Metrics>) -> EventWriter {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(store, rx));
        EventWriter { tx, metrics }
    }

    /// A sink for one turn.
    pub fn sink(&self, turn_id: &str, first_seq: u64) -> TurnSink {
        TurnSink {
            turn_id: turn_id.to_string(),
            tx: self.tx.clone(),
            next_seq: AtomicU64::new(first_seq),
            metrics: self.metrics.clone(),
            round: Mutex::new(RoundClock::default()),
        }
    }

    /// Record a turn's end once every event sent before it is written.
    pub async fn finish(&self, turn_id: &str, finish: TurnFinish) {
        let (done, wait) = oneshot::channel();
        let msg = WriterMsg::Finish {
            turn_id: turn_id.to_string(),
            finish: Box::new(finish),
            done,
        };
        if self.tx.send(msg).is_err() {
            tracing::error!(
                turn_id,
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
    metrics: Arc<Metrics>,
    round: Mutex<RoundClock>,
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
    /// Metrics from the event stream: the same numbers whatever the model or tool.
    fn observe(&self, kind: &EventKind) {
        self.metrics.event(kind.type_name());
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
                    self.metrics.model_first_delta(started.elapsed());
                }
            }
            EventKind::RoundFinished { .. } => {
                if let Some(started) = round.started.take() {
                    self.metrics.model_round(started.elapsed());
                }
            }
            EventKind::ToolResult {
                name,
                ok,
                duration_ms,
                ..
            } => self
                .metrics
                .tool_call(name, *ok, Duration::from_millis(*duration_ms)),
            EventKind::TurnFinished {
                stop_reason,
                usage,
                rounds,
                ..
            } => self.metrics.turn_ended(
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
        if self.tx.send(WriterMsg::Event(event)).is_err() {
            tracing::error!(turn_id = %self.turn_id, "event writer is gone; event lost");
        }
    }
}

async fn run(store: Store, mut rx: mpsc::UnboundedReceiver<WriterMsg>) {
    let mut inbox = Vec::with_capacity(BATCH);
    let mut pending: Vec<StoredEvent> = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut inbox, BATCH).await > 0 {
        for msg in inbox.drain(..) {
            match msg {
                WriterMsg::Event(event) => match StoredEvent::from_event(&event) {
                    Ok(stored) => pending.push(stored),
                    Err(e) => tracing::error!(error = %e, "unencodable event dropped"),
                },
                WriterMsg::Finish {
                    turn_id,
                    finish,
                    done,
                } => {
                    flush(&store, &mut pending).await;
                    finish_turn(&store, &turn_id, &finish).await;
                    let _ = done.send(());
                }
            }
        }
        flush(&store, &mut pending).await;
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
async fn flush(store: &Store, pending: &mut Vec<StoredEvent>) {
    if pending.is_empty() {
        return;
    }
    for attempt in 0..ATTEMPTS {
        match store.append_events(pending).await {
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
    let mut by_turn: HashMap<String, Vec<StoredEvent>> = HashMap::new();
    for e in pending.drain(..) {
        by_turn.entry(e.turn_id.clone()).or_default().push(e);
    }
    for (turn_id, events) in by_turn {
        if let Err(e) = store.append_events(&events).await {
            tracing::error!(turn_id, error = %e, lost = events.len(), "events could not be logged");
        }
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(50u64 << attempt.min(6))
}
