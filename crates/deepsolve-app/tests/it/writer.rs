//! The event writer under concurrent turns, on SQLite and (when configured) PostgreSQL: every
//! event is stored, in `seq` order, and reaches a live reader only once it is committed; a
//! turn's `turn_finished` is committed with its end, never before.

use std::sync::Arc;

use deepsolve_app::writer::{EventWriter, NoObserver};
use deepsolve_core::EventSink;
use deepsolve_protocol::{EventKind, StopReason, StoredTurnSpec, TurnEvent, TurnStatus, Usage};
use deepsolve_store::{HubMsg, NewTurn, Received, Store, StoreOptions, TurnFinish};

const TURNS: usize = 24;
/// Fewer than the hub's per-turn backlog, so a reader that falls behind is a bug, not a lag.
const EVENTS: u64 = 100;

async fn stores() -> Vec<(Store, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let sqlite = Store::open_sqlite(&dir.path().join("w.db"), StoreOptions::default())
        .await
        .expect("sqlite");
    let mut all = vec![(sqlite, Some(dir))];
    if let Some(url) = deepsolve_store::testing::scratch_postgres_from_env()
        .await
        .expect("scratch postgres")
    {
        all.push((
            Store::open(&url, StoreOptions::default())
                .await
                .expect("postgres"),
            None,
        ));
    }
    all
}

async fn running_turn(store: &Store, i: usize) -> String {
    let session = store.create_session("u", "p").await.expect("session").id;
    let spec: StoredTurnSpec = serde_json::from_value(serde_json::json!({
        "language": "en", "tools": [], "config": {}, "context_window": 32000
    }))
    .expect("spec");
    let id = format!("turn_writer_{i}");
    store
        .create_turn(&NewTurn {
            id: id.clone(),
            session_id: session,
            user_id: "u".into(),
            problem: "p".into(),
            spec,
            owner: "test".into(),
        })
        .await
        .expect("turn");
    id
}

/// Follow one turn through the hub; for each event, check the log already has it.
async fn read_live(store: Store, turn: String) -> Vec<u64> {
    let mut sub = store.subscribe(&turn);
    let mut seen = Vec::new();
    while seen.last() != Some(&(EVENTS - 1)) {
        match sub.recv().await {
            Received::Msg(HubMsg::Event(event)) => {
                let stored = store.last_seq(&turn).await.expect("last seq");
                assert!(
                    stored >= Some(event.seq),
                    "event {} of {turn} reached a reader before it was committed (log: {stored:?})",
                    event.seq
                );
                seen.push(event.seq);
            }
            Received::Msg(HubMsg::Poke) => {}
            Received::Lagged => panic!("a reader of {turn} lagged after {seen:?}"),
        }
    }
    seen
}

/// One turn's events through its sink, interleaved with the other turns', then its end.
async fn stream_turn(store: Store, writer: EventWriter, turn: String) {
    let sink = writer.sink(&turn, 0);
    for seq in 0..EVENTS - 1 {
        sink.send(TurnEvent {
            turn_id: turn.clone(),
            seq,
            ts: seq,
            kind: EventKind::TextDelta {
                text: format!("{turn} {seq}"),
            },
        });
        if seq % 7 == 0 {
            tokio::task::yield_now().await;
        }
    }
    sink.send(TurnEvent {
        turn_id: turn.clone(),
        seq: EVENTS - 1,
        ts: EVENTS,
        kind: EventKind::TurnFinished {
            stop_reason: StopReason::Answered,
            usage: Usage::default(),
            rounds: 1,
            elapsed_ms: 1,
        },
    });
    // The end is recorded a while after the engine's last event (the runner stores the
    // turn's files first); until then `turn_finished` must not be in the log, or a client
    // that sees it would read the turn as still running.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let logged = store.last_seq(&turn).await.expect("last seq");
    let status = store
        .turn_unscoped(&turn)
        .await
        .expect("turn")
        .expect("row")
        .status;
    assert!(
        logged < Some(EVENTS - 1) || status != TurnStatus::Running,
        "{turn}'s turn_finished was committed before its end was recorded"
    );
    let finish = TurnFinish {
        status: Some(TurnStatus::Finished),
        ..TurnFinish::default()
    };
    writer.finish(&sink, finish).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_turns_lose_no_event_keep_their_order_and_publish_only_committed_ones() {
    for (store, _dir) in stores().await {
        let mut turns = Vec::new();
        for i in 0..TURNS {
            turns.push(running_turn(&store, i).await);
        }
        // Readers attach before the first event, as an SSE reader would.
        let readers: Vec<_> = turns
            .iter()
            .map(|t| tokio::spawn(read_live(store.clone(), t.clone())))
            .collect();
        tokio::task::yield_now().await;
        while store.hub().watched_turns() < TURNS {
            tokio::task::yield_now().await;
        }
        let writer = EventWriter::spawn(store.clone(), Arc::new(NoObserver));
        let streams: Vec<_> = turns
            .iter()
            .map(|t| tokio::spawn(stream_turn(store.clone(), writer.clone(), t.clone())))
            .collect();
        for s in streams {
            s.await.expect("stream");
        }
        let all: Vec<u64> = (0..EVENTS).collect();
        for (turn, reader) in turns.iter().zip(readers) {
            assert_eq!(reader.await.expect("reader"), all, "live order of {turn}");
            let logged: Vec<u64> = store
                .events_after(turn, None, 10_000)
                .await
                .expect("log")
                .iter()
                .map(|e| e.seq)
                .collect();
            assert_eq!(logged, all, "the log of {turn}");
            let record = store
                .turn_unscoped(turn)
                .await
                .expect("read")
                .expect("turn");
            assert_eq!(record.status, TurnStatus::Finished, "{turn}");
        }
    }
}
