//! Where a turn's events go, and the emitter that stamps them. The event types themselves are
//! wire types (`deepsolve-protocol`): the same events feed the CLI renderers, SSE clients and
//! the turn log; `seq` is monotonic per turn with no gaps.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

pub use deepsolve_protocol::{
    ErrorKind, EventKind, PlanStepView, RoundRole, StepStatus, TurnEvent, WarningKind,
};

/// Where a turn's events go. Implementations must not drop events.
pub trait EventSink: Send + Sync {
    fn send(&self, event: TurnEvent);
}

impl EventSink for tokio::sync::mpsc::UnboundedSender<TurnEvent> {
    fn send(&self, event: TurnEvent) {
        // A closed receiver means nobody is listening any more (e.g. the CLI is exiting);
        // the turn itself goes on and its outcome is still returned.
        let _ = tokio::sync::mpsc::UnboundedSender::send(self, event);
    }
}

/// Collects events in memory (tests, benchmarks, embedding).
#[derive(Debug, Default)]
pub struct VecSink(pub Mutex<Vec<TurnEvent>>);

impl VecSink {
    pub fn take(&self) -> Vec<TurnEvent> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl EventSink for VecSink {
    fn send(&self, event: TurnEvent) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(event);
    }
}

/// Discards events (benchmarks).
#[derive(Debug, Default)]
pub struct NullSink;

impl EventSink for NullSink {
    fn send(&self, _event: TurnEvent) {}
}

/// Stamps `turn_id`, `seq` and `ts` on events of one turn.
pub(crate) struct Emitter<'a> {
    turn_id: String,
    /// Held while stamping *and* sending, so events reach the sink in `seq` order even when
    /// parallel tool calls emit at once.
    next_seq: Mutex<u64>,
    sink: &'a dyn EventSink,
}

impl<'a> Emitter<'a> {
    pub(crate) fn new(turn_id: impl Into<String>, first_seq: u64, sink: &'a dyn EventSink) -> Self {
        Emitter {
            turn_id: turn_id.into(),
            next_seq: Mutex::new(first_seq),
            sink,
        }
    }

    pub(crate) fn emit(&self, kind: EventKind) {
        let mut next = self.next_seq.lock().unwrap_or_else(|e| e.into_inner());
        self.sink.send(TurnEvent {
            turn_id: self.turn_id.clone(),
            seq: *next,
            ts: now_ms(),
            kind,
        });
        *next += 1;
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
