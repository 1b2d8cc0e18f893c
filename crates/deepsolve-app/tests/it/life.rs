//! A turn's life as a library caller (an eval runner) lives it: planned, recorded under an
//! owner in a new session, run with its events in the store and at the caller's sink, its end
//! recorded and its outcome handed back; a follow-up in the same session sees the first answer;
//! a turn the engine refuses is recorded failed, saying why.

use std::sync::{Arc, Mutex, PoisonError};

use deepsolve_app::life::{Recorder, SessionChoice, TurnFailure, TurnPlan, TurnRun};
use deepsolve_app::{AppBuilder, LOCAL_USER};
use deepsolve_core::{ChatModel, EventSink, Language, SolveConfig, TurnError};
use deepsolve_protocol::{ErrorKind, EventKind, StopReason, TurnEvent, TurnStatus};
use deepsolve_settings::Settings;
use deepsolve_store::{Store, StoreOptions};
use deepsolve_testkit::{ScriptedModel, WellBehaved};

const OWNER: &str = "eval:life-test";

/// The caller's sink: every event it was sent.
#[derive(Default)]
struct Seen(Mutex<Vec<TurnEvent>>);

impl Seen {
    fn events(&self) -> Vec<TurnEvent> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl EventSink for Seen {
    fn send(&self, event: TurnEvent) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event);
    }
}

async fn store(dir: &tempfile::TempDir) -> Store {
    Store::open_sqlite(&dir.path().join("life.db"), StoreOptions::default())
        .await
        .unwrap()
}

fn app() -> deepsolve_app::App {
    let model: Arc<dyn ChatModel> = Arc::new(ScriptedModel::new(WellBehaved::new(1)));
    AppBuilder::new(Settings::default(), model).build().unwrap()
}

fn plan(app: &deepsolve_app::App, problem: &str) -> TurnPlan {
    let none: &[&str] = &[];
    TurnPlan::new(
        problem,
        Language::En,
        app.tools_for_turn(none).unwrap(),
        SolveConfig::default(),
        deepsolve_core::DEFAULT_CONTEXT_WINDOW,
    )
}

#[tokio::test]
async fn a_turn_is_recorded_run_and_its_end_stored_with_every_event() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let app = app();
    let recorder = Recorder::spawn(store.clone(), OWNER);

    let spec = recorder
        .record(
            LOCAL_USER,
            SessionChoice::new(),
            plan(&app, "What is 1 + 1?"),
        )
        .await
        .unwrap();
    let turn_id = spec.turn_id.clone();
    let running = store.turn(&turn_id, LOCAL_USER).await.unwrap().unwrap();
    assert_eq!(running.status, TurnStatus::Running);
    assert_eq!(running.owner, OWNER);

    let seen = Arc::new(Seen::default());
    let outcome = recorder
        .run(TurnRun::new(&app, spec).watcher(seen.clone()))
        .await
        .unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Answered);
    assert!(outcome.answer.is_some());

    let ended = store.turn(&turn_id, LOCAL_USER).await.unwrap().unwrap();
    assert_eq!(ended.status, TurnStatus::Finished);
    assert_eq!(ended.stop_reason, Some(StopReason::Answered));
    assert_eq!(ended.answer, outcome.answer);
    assert_eq!(ended.usage, Some(outcome.usage));
    // The caller saw exactly what the log holds, in order, ending with `turn_finished`.
    let logged: Vec<u64> = (store.events_after(&turn_id, None, 10_000).await.unwrap())
        .iter()
        .map(|e| e.seq)
        .collect();
    let events = seen.events();
    assert_eq!(
        logged,
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        "the watcher and the log differ"
    );
    assert!(matches!(
        events.last().map(|e| &e.kind),
        Some(EventKind::TurnFinished { .. })
    ));
    store.close().await;
}

#[tokio::test]
async fn a_follow_up_continues_the_session_and_sees_the_first_answer() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let app = app();
    let recorder = Recorder::spawn(store.clone(), OWNER);
    let first = recorder
        .record(
            LOCAL_USER,
            SessionChoice::new(),
            plan(&app, "What is 1 + 1?"),
        )
        .await
        .unwrap();
    let session_id = first.session_id.clone().unwrap();
    let answer = recorder
        .run(TurnRun::new(&app, first))
        .await
        .unwrap()
        .answer
        .unwrap();

    let continuing = SessionChoice::continuing(&store, &session_id, LOCAL_USER)
        .await
        .unwrap()
        .expect("the user's session");
    let second = recorder
        .record(LOCAL_USER, continuing, plan(&app, "And times 3?"))
        .await
        .unwrap();
    assert_eq!(second.session_id.as_deref(), Some(session_id.as_str()));
    assert_eq!(second.history.len(), 1);
    assert_eq!(second.history[0].answer, answer);
    // Another user's session is not theirs to continue.
    let stranger = SessionChoice::continuing(&store, &session_id, "someone-else").await;
    assert!(matches!(stranger, Ok(None)));
    store.close().await;
}

#[tokio::test]
async fn a_turn_the_engine_refuses_is_recorded_failed_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let app = app();
    let recorder = Recorder::spawn(store.clone(), OWNER);
    let spec = recorder
        .record(LOCAL_USER, SessionChoice::new(), plan(&app, "   "))
        .await
        .unwrap();
    let turn_id = spec.turn_id.clone();
    let seen = Arc::new(Seen::default());
    let failure = recorder
        .run(TurnRun::new(&app, spec).watcher(seen.clone()))
        .await
        .expect_err("an empty problem does not run");
    assert!(matches!(
        failure,
        TurnFailure::NotStarted(TurnError::EmptyProblem)
    ));

    let ended = store.turn(&turn_id, LOCAL_USER).await.unwrap().unwrap();
    assert_eq!(ended.status, TurnStatus::Failed);
    assert_eq!(ended.error.as_deref(), Some("the problem is empty"));
    let logged = store.events_after(&turn_id, None, 100).await.unwrap();
    let kinds: Vec<EventKind> = logged.iter().map(|e| e.decode().unwrap().kind).collect();
    assert!(
        matches!(
            kinds.as_slice(),
            [EventKind::Error { kind: ErrorKind::TurnNotStarted, message }] if message == "the problem is empty"
        ),
        "{kinds:?}"
    );
    // What the engine did not emit is recorded only: the caller has the failure itself.
    assert!(seen.events().is_empty());
    store.close().await;
}
