//! One streaming model call: deltas become events (visible text filtered live), bounded by
//! cancellation and a deadline.

use tokio::time::Instant;

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

impl TurnRun<'_> {
    pub(super) async fn call_model(
        &self,
        request: &ChatRequest,
        deadline: Instant,
    ) -> Result<Completion, CallFailure> {
        let emit = &self.emit;
        let mut filter = VisibleFilter::default();
        let mut on_delta = |delta: StreamDelta| match delta {
            StreamDelta::Text(text) => emit_pieces(emit, filter.push(&text)),
            StreamDelta::Reasoning(text) => emit.emit(EventKind::ReasoningDelta { text }),
            StreamDelta::Retrying {
                attempt,
                max,
                reason,
                delay_ms,
            } => emit.emit(EventKind::Retrying {
                attempt,
                max,
                reason,
                delay_ms,
            }),
        };
        let completion = self.model.complete(request, &mut on_delta);
        let result = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => Err(CallFailure::Cancelled),
            r = tokio::time::timeout_at(deadline, completion) => match r {
                Err(_) => Err(CallFailure::Deadline),
                Ok(Err(e)) => Err(CallFailure::Model(e)),
                Ok(Ok(c)) => Ok(c),
            },
        };
        emit_pieces(emit, filter.finish());
        result
    }
}

fn emit_pieces(emit: &Emitter<'_>, pieces: Vec<Piece>) {
    for piece in pieces {
        emit.emit(match piece {
            Piece::Text(text) => EventKind::TextDelta { text },
            Piece::Reasoning(text) => EventKind::ReasoningDelta { text },
        });
    }
}
