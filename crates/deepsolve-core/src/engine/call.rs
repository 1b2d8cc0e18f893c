//! One streaming model call: deltas become events (visible text filtered live, gathered per
//! window when the stream is fast), bounded by cancellation and a deadline.

use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;
use tokio::time::Instant;

use super::announce::Announcer;
use super::live::LiveOutput;
use super::turn::TurnRun;
use crate::event::{Emitter, EventKind};
use crate::model::{ChatRequest, Completion, ModelError, StreamDelta};
use crate::stream_filter::{Piece, VisibleFilter};

/// Why a model call gave no completion.
pub(super) enum CallFailure {
    Cancelled,
    Deadline,
    Model(ModelError),
}

/// What the delta callback and the call's loop share: the live filter, what it holds back,
/// and which tools were told the reply calls them.
struct Live<'e, 'a> {
    filter: VisibleFilter,
    output: LiveOutput<'e, 'a>,
    announcer: Announcer<'e>,
}

impl Live<'_, '_> {
    /// One delta in; true when it left text held back that was not held before.
    fn take(&mut self, delta: StreamDelta, emit: &Emitter<'_>) -> bool {
        let was_holding = self.output.is_holding();
        let now = Instant::now();
        match delta {
            StreamDelta::Text(text) => {
                for piece in self.filter.push(&text) {
                    self.output.push(piece, now);
                }
                if let Some(head) = self.filter.new_call_head() {
                    self.announcer.scan(head);
                }
            }
            StreamDelta::ToolCallStarted { name } => self.announcer.named(&name),
            StreamDelta::Reasoning(text) => self.output.push(Piece::Reasoning(text), now),
            StreamDelta::Retrying {
                attempt,
                max,
                reason,
                delay_ms,
            } => {
                self.output.flush(now);
                emit.emit(EventKind::Retrying {
                    attempt,
                    max,
                    reason,
                    delay_ms,
                });
            }
        }
        !was_holding && self.output.is_holding()
    }

    /// The end of the call: the filter's held-back text, then everything held.
    fn finish(&mut self) {
        let now = Instant::now();
        for piece in self.filter.finish() {
            self.output.push(piece, now);
        }
        self.output.flush(now);
    }
}

fn lock<'m, 'e, 'a>(live: &'m Mutex<Live<'e, 'a>>) -> MutexGuard<'m, Live<'e, 'a>> {
    live.lock().unwrap_or_else(PoisonError::into_inner)
}

impl TurnRun<'_> {
    pub(super) async fn call_model(
        &self,
        request: &ChatRequest,
        deadline: Instant,
    ) -> Result<Completion, CallFailure> {
        let emit = &self.emit;
        let live = Mutex::new(Live {
            filter: VisibleFilter::cutting_at(self.wire.protocol().live_cuts()),
            output: LiveOutput::new(emit),
            announcer: Announcer::new(&self.toolbox, &self.tool_ctx, request),
        });
        // Wakes the loop below when text starts being held, so it can set its timer.
        let held = Notify::new();
        let mut on_delta = |delta: StreamDelta| {
            if lock(&live).take(delta, emit) {
                held.notify_one();
            }
        };
        let completion =
            tokio::time::timeout_at(deadline, self.model.complete(request, &mut on_delta));
        tokio::pin!(completion);
        let result = loop {
            let due = lock(&live).output.due();
            tokio::select! {
                biased;
                _ = self.cancel.cancelled() => break Err(CallFailure::Cancelled),
                r = &mut completion => break match r {
                    Err(_) => Err(CallFailure::Deadline),
                    Ok(Err(e)) => Err(CallFailure::Model(e)),
                    Ok(Ok(c)) => Ok(c),
                },
                _ = held.notified() => {}
                _ = sleep_until(due) => lock(&live).output.flush(Instant::now()),
            }
        };
        lock(&live).finish();
        result
    }
}

/// Sleeps until `due`, or forever when there is nothing to wait for.
async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}
