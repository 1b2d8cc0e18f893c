//! A reply's live output as events: a flood of tiny deltas is gathered into a few events, a
//! slow stream keeps an event per delta, text held back goes out when the stream pauses, and
//! a reply past the cap ends the turn on the failed-call path with a named error.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deepsolve_core::event::ErrorKind;
use deepsolve_core::{
    ChatModel, ChatRequest, Completion, DeltaSink, Engine, EventKind, FinishReason, ModelError,
    StopReason, StreamDelta, TurnSpec, VecSink,
};
use tokio_util::sync::CancellationToken;

use crate::common::{Fake, Step, finish, plan, run_with, usage};

/// Streams `deltas` (pausing `pause` after the ones marked), then answers with their text;
/// a later call (the engine's nudge or forced answer) answers at once, without deltas.
struct Streamer {
    deltas: Vec<(String, Option<Duration>)>,
    calls: std::sync::atomic::AtomicUsize,
    /// Checked during a pause: what a reader has seen so far.
    sink: Arc<VecSink>,
    seen_during_pause: std::sync::Mutex<Vec<String>>,
}

impl Streamer {
    fn new(deltas: Vec<(String, Option<Duration>)>, sink: Arc<VecSink>) -> Self {
        Streamer {
            deltas,
            calls: std::sync::atomic::AtomicUsize::new(0),
            sink,
            seen_during_pause: std::sync::Mutex::new(Vec::new()),
        }
    }
}

fn texts(events: &[deepsolve_core::TurnEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TextDelta { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[async_trait]
impl ChatModel for Streamer {
    fn name(&self) -> &str {
        "streamer"
    }

    async fn complete(
        &self,
        _request: &ChatRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<Completion, ModelError> {
        let first = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
        let mut text = String::new();
        for (delta, pause) in self.deltas.iter().filter(|_| first) {
            text.push_str(delta);
            on_delta(StreamDelta::Text(delta.clone()));
            if let Some(pause) = pause {
                tokio::time::sleep(*pause).await;
                let seen = texts(&self.sink.0.lock().unwrap()).concat();
                self.seen_during_pause.lock().unwrap().push(seen);
            }
        }
        if !first {
            text.push_str("done");
        }
        Ok(Completion {
            text,
            reasoning: String::new(),
            tool_calls: Vec::new(),
            finish_reason: FinishReason::Stop,
            usage: usage(10, 10),
        })
    }
}

async fn one_round(model: &Streamer, sink: &Arc<VecSink>) {
    let engine = Engine::new(Vec::new()).expect("engine");
    let spec = TurnSpec::new("turn-live", "Say something.");
    engine
        .run_turn(model, spec, sink.as_ref(), CancellationToken::new())
        .await
        .expect("turn starts");
}

#[tokio::test(start_paused = true)]
async fn a_flood_of_tiny_deltas_becomes_a_few_events_with_the_same_text() {
    let sink = Arc::new(VecSink::default());
    let deltas: Vec<(String, Option<Duration>)> = (0..20_000)
        .map(|i| (format!("{} ", i % 10), None))
        .collect();
    let whole: String = deltas.iter().map(|(d, _)| d.as_str()).collect();
    let model = Streamer::new(deltas, sink.clone());
    one_round(&model, &sink).await;
    let sent = texts(&sink.take());
    assert!(
        sent.concat() == whole,
        "the text arrives whole and in order"
    );
    // The first delta at once, then the rest by size (16 KiB) and at the end of the call.
    assert!(
        sent.len() <= 2 + whole.len() / (16 * 1024),
        "{} events",
        sent.len()
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_stream_gets_an_event_per_delta() {
    let sink = Arc::new(VecSink::default());
    let pause = Some(Duration::from_millis(50));
    let deltas = vec![
        ("a".into(), pause),
        ("b".into(), pause),
        ("c".into(), pause),
    ];
    let model = Streamer::new(deltas, sink.clone());
    one_round(&model, &sink).await;
    assert_eq!(texts(&sink.take()), ["a", "b", "c"]);
}

#[tokio::test(start_paused = true)]
async fn text_held_back_goes_out_when_the_stream_pauses() {
    let sink = Arc::new(VecSink::default());
    let deltas = vec![
        ("a".into(), None),
        ("b".into(), Some(Duration::from_secs(5))),
        ("c".into(), None),
    ];
    let model = Streamer::new(deltas, sink.clone());
    one_round(&model, &sink).await;
    // "b" came within the window after "a" and was held; the pause let the timer send it.
    assert_eq!(*model.seen_during_pause.lock().unwrap(), ["ab"]);
    assert_eq!(texts(&sink.take()), ["a", "b", "c"]);
}

#[tokio::test]
async fn a_reply_past_the_cap_ends_the_turn_as_a_named_model_error() {
    let model = Fake::seq(vec![
        plan(&["a"]),
        finish("S1", "x = 4"),
        Step::Fail(ModelError::ReplyTooLarge {
            limit_bytes: 4 << 20,
        }),
    ]);
    let run = run_with(model, vec![], |_| {}).await;
    assert_eq!(run.outcome.stop_reason, StopReason::ModelError);
    let error = run.events.iter().find_map(|e| match &e.kind {
        EventKind::Error { kind, message } => Some((*kind, message.clone())),
        _ => None,
    });
    let (kind, message) = error.expect("an error event");
    assert_eq!(kind, ErrorKind::ReplyTooLarge);
    assert!(message.contains("llm.max_reply_mb"), "{message}");
    // The failed-call path: the finished step's summary is the answer, no more model calls.
    assert!(
        run.outcome
            .answer
            .as_deref()
            .unwrap_or("")
            .contains("x = 4")
    );
    assert_eq!(run.requests.len(), 3);
}
