//! Live output of one model call, passed on as events at a bounded rate.
//!
//! A provider may stream a reply in hundreds of thousands of tiny deltas. One event per delta
//! would cost an event's overhead (its envelope, a log row, a message to every reader) for
//! every few bytes of text, and a fast stream would queue events faster than any store can
//! write them. So text is passed on at once when the stream is slow (each delta of a model
//! writing 20 tokens a second is its own event, as before), and gathered into one event per
//! window when it is fast, or sooner once a window's text reaches [`MAX_PENDING_BYTES`].

use std::time::Duration;

use tokio::time::Instant;

use crate::event::{Emitter, EventKind};
use crate::stream_filter::Piece;

/// At most one event of each kind per window while deltas arrive faster than this.
pub(super) const WINDOW: Duration = Duration::from_millis(20);
/// Text held back is passed on once it reaches this size, whatever the window.
pub(super) const MAX_PENDING_BYTES: usize = 16 * 1024;

/// Text and reasoning held back for the current window.
///
/// Within a window reasoning goes out before text: each keeps its own order, and which of
/// the two came first within 20 ms is not worth an event per switch (a stream alternating
/// between them in every delta would otherwise be one event per delta again).
pub(super) struct LiveOutput<'e, 'a> {
    emit: &'e Emitter<'a>,
    reasoning: String,
    text: String,
    /// When the last event went out (`None`: none yet, so the first goes out at once).
    last_sent: Option<Instant>,
}

impl<'e, 'a> LiveOutput<'e, 'a> {
    pub(super) fn new(emit: &'e Emitter<'a>) -> Self {
        LiveOutput {
            emit,
            reasoning: String::new(),
            text: String::new(),
            last_sent: None,
        }
    }

    /// Take in one piece: passed on now when the window allows, else held back.
    pub(super) fn push(&mut self, piece: Piece, now: Instant) {
        match piece {
            Piece::Text(t) => self.text.push_str(&t),
            Piece::Reasoning(t) => self.reasoning.push_str(&t),
        }
        let full = self.text.len().max(self.reasoning.len()) >= MAX_PENDING_BYTES;
        if full || self.due().is_none_or(|due| due <= now) {
            self.flush(now);
        }
    }

    /// When held-back text must go out (`None` when nothing is held, or it may go now).
    pub(super) fn due(&self) -> Option<Instant> {
        if !self.is_holding() {
            return None;
        }
        self.last_sent.map(|sent| sent + WINDOW)
    }

    /// True when text is held back.
    pub(super) fn is_holding(&self) -> bool {
        !self.text.is_empty() || !self.reasoning.is_empty()
    }

    /// Pass on whatever is held back.
    pub(super) fn flush(&mut self, now: Instant) {
        if !self.is_holding() {
            return;
        }
        self.last_sent = Some(now);
        if !self.reasoning.is_empty() {
            let text = std::mem::take(&mut self.reasoning);
            self.emit.emit(EventKind::ReasoningDelta { text });
        }
        if !self.text.is_empty() {
            let text = std::mem::take(&mut self.text);
            self.emit.emit(EventKind::TextDelta { text });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::VecSink;

    fn texts(sink: &VecSink) -> Vec<String> {
        sink.take()
            .into_iter()
            .map(|e| match e.kind {
                EventKind::TextDelta { text } => format!("t:{text}"),
                EventKind::ReasoningDelta { text } => format!("r:{text}"),
                other => format!("?:{}", other.type_name()),
            })
            .collect()
    }

    #[test]
    fn a_slow_stream_passes_every_delta_on_at_once() {
        let sink = VecSink::default();
        let emit = Emitter::new("t", 0, &sink);
        let mut live = LiveOutput::new(&emit);
        let start = Instant::now();
        for i in 0..3u32 {
            live.push(Piece::Text(format!("{i}")), start + WINDOW * (i * 2));
            assert!(!live.is_holding());
        }
        assert_eq!(texts(&sink), ["t:0", "t:1", "t:2"]);
    }

    #[test]
    fn a_fast_stream_is_gathered_per_window_in_order() {
        let sink = VecSink::default();
        let emit = Emitter::new("t", 0, &sink);
        let mut live = LiveOutput::new(&emit);
        let start = Instant::now();
        let ms = Duration::from_millis(1);
        live.push(Piece::Text("a".into()), start);
        live.push(Piece::Text("b".into()), start + ms);
        live.push(Piece::Reasoning("r".into()), start + ms * 2);
        live.push(Piece::Text("c".into()), start + ms * 3);
        assert_eq!(live.due(), Some(start + WINDOW));
        live.push(Piece::Reasoning("s".into()), start + WINDOW);
        live.push(Piece::Text("d".into()), start + WINDOW + ms);
        assert_eq!(live.due(), Some(start + WINDOW * 2));
        live.flush(start + WINDOW + ms * 2);
        assert!(!live.is_holding());
        assert_eq!(texts(&sink), ["t:a", "r:rs", "t:bc", "t:d"]);
    }

    #[test]
    fn after_a_fast_burst_a_delta_that_comes_after_a_quiet_window_goes_out_at_once() {
        let sink = VecSink::default();
        let emit = Emitter::new("t", 0, &sink);
        let mut live = LiveOutput::new(&emit);
        let start = Instant::now();
        let ms = Duration::from_millis(1);
        live.push(Piece::Text("a".into()), start);
        live.push(Piece::Text("b".into()), start + ms);
        assert!(live.is_holding());
        live.flush(start + WINDOW);
        // Quiet for a window since the last event: no waiting, whatever came before.
        live.push(Piece::Text("c".into()), start + WINDOW * 2 + ms);
        assert!(!live.is_holding());
        // A stream slower than the window is never held, however long it goes on.
        for i in 3..10u32 {
            live.push(
                Piece::Text(format!("{i}")),
                start + WINDOW * (i + 1) + ms * i,
            );
            assert!(!live.is_holding());
        }
        assert_eq!(
            texts(&sink),
            [
                "t:a", "t:b", "t:c", "t:3", "t:4", "t:5", "t:6", "t:7", "t:8", "t:9"
            ]
        );
    }

    #[test]
    fn held_text_goes_out_once_it_is_large() {
        let sink = VecSink::default();
        let emit = Emitter::new("t", 0, &sink);
        let mut live = LiveOutput::new(&emit);
        let now = Instant::now();
        live.push(Piece::Text("x".into()), now);
        let chunk = "y".repeat(MAX_PENDING_BYTES / 4);
        for _ in 0..4 {
            live.push(Piece::Text(chunk.clone()), now);
        }
        assert!(!live.is_holding());
        let sent = texts(&sink);
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[1].len(), "t:".len() + MAX_PENDING_BYTES);
    }
}
