//! Rows as the server wrote them before the protocol types were typed: a turn row with its
//! spec, usage and solve record as JSON text, and its events as the event log keeps them.
//! The JSON here is literal (copied from what those builds wrote), never produced by the
//! types under test, so a change of wire shape fails here instead of in an old database.

use deepsolve_protocol::{
    ErrorKind, EventKind, Language, RoundRole, StepStatus, StopReason, TurnEvent, TurnStatus,
    WarningKind,
};
use deepsolve_store::{Store, StoreOptions, StoredEvent};
use serde_json::{Value, json};
use sqlx::{AnyConnection, Connection};

/// A store per backend, with the URL a raw connection reaches the same database by.
async fn stores_with_urls() -> Vec<(Store, String, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("old.db");
    let sqlite = Store::open_sqlite(&path, StoreOptions::default())
        .await
        .expect("open sqlite");
    let mut out = vec![(sqlite, format!("sqlite://{}", path.display()), Some(dir))];
    let pg_url = deepsolve_store::testing::scratch_postgres_from_env()
        .await
        .expect("DEEPSOLVE_TEST_POSTGRES_URL is set but unusable");
    if let Some(url) = pg_url {
        let pg = Store::open(&url, StoreOptions::default())
            .await
            .expect("open postgres");
        out.push((pg, url, None));
    }
    out
}

/// `turns.spec` as the server wrote it: the effective config was the engine's config struct,
/// serialised field by field.
fn old_spec(history: Value) -> String {
    json!({
        "language": "en",
        "tools": ["code_execution"],
        "config": {
            "temperature": 0.3, "max_tokens": 8192, "max_rounds": 12, "max_replans": 2,
            "max_steps": 12, "settlement_rounds": 2, "turn_timeout_s": 1200,
            "tool_timeout_s": 60, "code_timeout_s": 30, "stream_idle_timeout_s": 120,
            "max_parallel_tool_calls": 8, "token_budget": 0, "ultimatum_at": 0.85,
            "plan_first": true, "fold": true
        },
        "context_window": 128000,
        "history": history
    })
    .to_string()
}

const SOLVE_JSON: &str = r#"{"analysis":"a quadratic","steps":[{"id":"S1","goal":"factor","done":true,"summary":"(x-2)(x-3)"},{"id":"S2","goal":"roots","done":true,"summary":"x = 2 or x = 3"}],"replans_used":1,"replans_max":2,"plan_history":[{"analysis":"guess","replaced_because":"wrong approach","steps":[{"id":"S1","goal":"guess","done":false}]}]}"#;
const USAGE_JSON: &str = r#"{"prompt_tokens":1200,"completion_tokens":340,"estimated":false}"#;

/// The events of a turn, as `turn_events.data` held them (one JSON object per line).
const FINISHED_EVENTS: &str = r#"
{"turn_id":"turn_old_done","seq":0,"ts":1700000000000,"type":"turn_started","model":"mock-model","problem":"Solve x^2 - 5x + 6 = 0","tools":["code_execution"],"language":"en"}
{"turn_id":"turn_old_done","seq":1,"ts":1700000000001,"type":"round_started","round":1,"max_rounds":12,"context_tokens":900,"context_window":128000}
{"turn_id":"turn_old_done","seq":2,"ts":1700000000002,"type":"reasoning_delta","text":"think"}
{"turn_id":"turn_old_done","seq":3,"ts":1700000000003,"type":"text_delta","text":"Let me plan"}
{"turn_id":"turn_old_done","seq":4,"ts":1700000000004,"type":"tool_call","call_id":"c1","name":"solve_plan","args":{"analysis":"a quadratic","steps":["factor","roots"]}}
{"turn_id":"turn_old_done","seq":5,"ts":1700000000005,"type":"plan","analysis":"a quadratic","steps":[{"id":"S1","goal":"factor","status":"current"},{"id":"S2","goal":"roots","status":"pending"}],"replans_used":0,"replans_max":2}
{"turn_id":"turn_old_done","seq":6,"ts":1700000000006,"type":"tool_result","call_id":"c1","name":"solve_plan","ok":true,"content":"plan accepted","duration_ms":1}
{"turn_id":"turn_old_done","seq":7,"ts":1700000000007,"type":"round_finished","round":1,"role":"narration","finish_reason":"tool_calls","usage":{"prompt_tokens":600,"completion_tokens":100,"estimated":false}}
{"turn_id":"turn_old_done","seq":8,"ts":1700000000008,"type":"tool_progress","call_id":"c2","message":"running"}
{"turn_id":"turn_old_done","seq":9,"ts":1700000000009,"type":"tool_result","call_id":"c2","name":"code_execution","ok":true,"content":"[2, 3]","artifacts":[{"path":"plot.png","size":2048,"mime":"image/png"}],"duration_ms":350}
{"turn_id":"turn_old_done","seq":10,"ts":1700000000010,"type":"step_finished","step_id":"S1","summary":"(x-2)(x-3)"}
{"turn_id":"turn_old_done","seq":11,"ts":1700000000011,"type":"checkpoint","checkpoint":{"record":{"analysis":"a quadratic","steps":[{"id":"S1","goal":"factor","done":true,"summary":"(x-2)(x-3)"},{"id":"S2","goal":"roots","done":false}],"replans_used":0,"replans_max":2},"rounds":2,"usage":{"prompt_tokens":900,"completion_tokens":200,"estimated":true},"elapsed_ms":1500}}
{"turn_id":"turn_old_done","seq":12,"ts":1700000000012,"type":"context_folded","tokens_before":3000,"tokens_after":1200}
{"turn_id":"turn_old_done","seq":13,"ts":1700000000013,"type":"retrying","attempt":1,"max":3,"reason":"server error 503","delay_ms":500}
{"turn_id":"turn_old_done","seq":14,"ts":1700000000014,"type":"replanned","reason":"wrong approach"}
{"turn_id":"turn_old_done","seq":15,"ts":1700000000015,"type":"warning","kind":"length","message":"retrying once with max_tokens = 16384"}
{"turn_id":"turn_old_done","seq":16,"ts":1700000000016,"type":"warning","kind":"stream_cut","message":"the stream broke after output had started: reset; salvaging with a forced answer"}
{"turn_id":"turn_old_done","seq":17,"ts":1700000000017,"type":"warning","kind":"forced_answer","message":"model_error: asking the model for a final answer without tools"}
{"turn_id":"turn_old_done","seq":18,"ts":1700000000018,"type":"answer","text":"x = 2 or x = 3","forced":false}
{"turn_id":"turn_old_done","seq":19,"ts":1700000000019,"type":"turn_finished","stop_reason":"answered","usage":{"prompt_tokens":1200,"completion_tokens":340,"estimated":false},"rounds":3,"elapsed_ms":2100}
"#;

/// An interrupted turn: it died after its first step's checkpoint; a server error was logged.
const INTERRUPTED_EVENTS: &str = r#"
{"turn_id":"turn_old_cut","seq":0,"ts":1700000001000,"type":"turn_started","model":"mock-model","problem":"And x^2 - 7x + 12 = 0?","tools":["code_execution"],"language":"en","resumed":true}
{"turn_id":"turn_old_cut","seq":1,"ts":1700000001001,"type":"checkpoint","checkpoint":{"record":{"analysis":"again","steps":[{"id":"S1","goal":"factor","done":true,"summary":"(x-3)(x-4)"},{"id":"S2","goal":"roots","done":false}],"replans_used":0,"replans_max":2},"rounds":1,"usage":{"prompt_tokens":500,"completion_tokens":80,"estimated":false},"elapsed_ms":700}}
{"turn_id":"turn_old_cut","seq":2,"ts":1700000001002,"type":"error","kind":"idle_timeout","message":"no data from the model for 120s"}
{"turn_id":"turn_old_cut","seq":3,"ts":1700000001003,"type":"error","kind":"internal","message":"the turn failed inside the server"}
"#;

fn stored_events(lines: &str) -> Vec<StoredEvent> {
    lines
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let v: Value = serde_json::from_str(line).expect("literal event JSON");
            StoredEvent {
                turn_id: v["turn_id"].as_str().expect("turn_id").to_string(),
                seq: v["seq"].as_u64().expect("seq"),
                kind: v["type"].as_str().expect("type").to_string(),
                ts: v["ts"].as_u64().expect("ts"),
                data: line.to_string(),
            }
        })
        .collect()
}

struct OldTurn<'a> {
    id: &'a str,
    session_id: &'a str,
    status: &'a str,
    spec: String,
    answer: Option<&'a str>,
    stop_reason: Option<&'a str>,
    usage: Option<&'a str>,
    solve: Option<&'a str>,
    finished_at: Option<i64>,
}

/// The row exactly as the old `create_turn` + `finish_turn` (or `mark_interrupted`) left it.
async fn insert_old_turn(url: &str, t: &OldTurn<'_>) {
    sqlx::any::install_default_drivers();
    let mut conn = AnyConnection::connect(url).await.expect("raw connection");
    sqlx::query(
        "INSERT INTO turns (id, session_id, user_id, problem, spec, status, answer, stop_reason, \
         usage, solve, rounds, elapsed_ms, error, owner, created_at, updated_at, finished_at) \
         VALUES ($1, $2, 'u', 'Solve x^2 - 5x + 6 = 0', $3, $4, $5, $6, $7, $8, 3, 2100, NULL, \
         'node-old', 1700000000000, 1700000000500, $9)",
    )
    .bind(t.id)
    .bind(t.session_id)
    .bind(&t.spec)
    .bind(t.status)
    .bind(t.answer)
    .bind(t.stop_reason)
    .bind(t.usage)
    .bind(t.solve)
    .bind(t.finished_at)
    .execute(&mut conn)
    .await
    .expect("insert old row");
    conn.close().await.expect("close");
}

#[tokio::test]
async fn turns_and_events_written_by_the_untyped_server_read_back_typed() {
    for (store, url, _dir) in stores_with_urls().await {
        let session = store.create_session("u", "old").await.expect("session").id;
        insert_old_turn(
            &url,
            &OldTurn {
                id: "turn_old_done",
                session_id: &session,
                status: "finished",
                spec: old_spec(json!([])),
                answer: Some("x = 2 or x = 3"),
                stop_reason: Some("answered"),
                usage: Some(USAGE_JSON),
                solve: Some(SOLVE_JSON),
                finished_at: Some(1_700_000_002_100),
            },
        )
        .await;
        // The follow-up carried the first turn as history; it died and was marked interrupted.
        let history = json!([{
            "problem": "Solve x^2 - 5x + 6 = 0",
            "answer": "x = 2 or x = 3",
            "solve": serde_json::from_str::<Value>(SOLVE_JSON).expect("solve json")
        }]);
        insert_old_turn(
            &url,
            &OldTurn {
                id: "turn_old_cut",
                session_id: &session,
                status: "interrupted",
                spec: old_spec(history),
                answer: None,
                stop_reason: None,
                usage: None,
                solve: None,
                finished_at: None,
            },
        )
        .await;
        store
            .append_events(&stored_events(FINISHED_EVENTS))
            .await
            .expect("append finished turn's events");
        store
            .append_events(&stored_events(INTERRUPTED_EVENTS))
            .await
            .expect("append interrupted turn's events");

        // The rows, typed.
        let done = store
            .turn("turn_old_done", "u")
            .await
            .expect("read")
            .expect("row");
        assert_eq!(done.status, TurnStatus::Finished);
        assert_eq!(done.stop_reason, Some(StopReason::Answered));
        assert_eq!(done.spec.language, Language::En);
        assert_eq!(done.spec.tools, ["code_execution"]);
        assert_eq!(done.spec.context_window, 128_000);
        assert_eq!(done.spec.config["max_rounds"], 12);
        assert_eq!(done.spec.config["ultimatum_at"], 0.85);
        assert!(done.spec.history.is_empty());
        assert_eq!(done.usage.map(|u| u.total()), Some(1540));
        let solve = done.solve.expect("solve record");
        assert!(solve.all_done());
        assert_eq!(solve.plan_history[0].replaced_because, "wrong approach");
        assert_eq!(solve.summaries().len(), 2);

        let cut = store
            .turn("turn_old_cut", "u")
            .await
            .expect("read")
            .expect("row");
        assert_eq!(cut.status, TurnStatus::Interrupted);
        assert_eq!(cut.stop_reason, None);
        assert_eq!(cut.spec.history.len(), 1);
        assert_eq!(cut.spec.history[0].answer, "x = 2 or x = 3");
        assert!(
            cut.spec.history[0]
                .solve
                .as_ref()
                .is_some_and(|s| s.all_done())
        );

        // A follow-up sees the finished turn with its solve record.
        let prior = store.prior_turns(&session).await.expect("prior turns");
        assert_eq!(prior.len(), 1);
        assert_eq!(prior[0].problem, "Solve x^2 - 5x + 6 = 0");

        // Every event decodes, and encodes back to exactly the JSON it was stored as.
        for turn in ["turn_old_done", "turn_old_cut"] {
            for stored in store.events_after(turn, None, 100).await.expect("events") {
                let event: TurnEvent = stored.decode().expect("decodes typed");
                assert_eq!(event.kind.type_name(), stored.kind);
                let original: Value = serde_json::from_str(&stored.data).expect("json");
                let mut encoded = serde_json::to_value(&event).expect("encode");
                // The one field added since these rows were written: a checkpoint's numbered
                // sources, empty in a turn that cited nothing.
                if let Some(checkpoint) =
                    encoded.get_mut("checkpoint").and_then(Value::as_object_mut)
                    && checkpoint.get("sources") == Some(&Value::Array(Vec::new()))
                {
                    checkpoint.remove("sources");
                }
                assert_eq!(
                    encoded, original,
                    "event {} of {turn} changed shape",
                    stored.seq
                );
            }
        }
        let events: Vec<TurnEvent> = store
            .events_after("turn_old_done", None, 100)
            .await
            .expect("events")
            .iter()
            .map(|e| e.decode().expect("decode"))
            .collect();
        assert!(events.iter().any(|e| matches!(
            &e.kind,
            EventKind::Plan { steps, .. } if steps[0].status == StepStatus::Current
        )));
        assert!(events.iter().any(|e| matches!(
            &e.kind,
            EventKind::RoundFinished { role: RoundRole::Narration, usage, .. } if usage.total() == 700
        )));
        assert!(events.iter().any(|e| matches!(
            &e.kind,
            EventKind::ToolResult { artifacts, .. } if artifacts.len() == 1 && artifacts[0].mime == "image/png"
        )));
        let warnings: Vec<WarningKind> = events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::Warning { kind, .. } => Some(kind),
                _ => None,
            })
            .collect();
        assert_eq!(
            warnings,
            [
                WarningKind::Length,
                WarningKind::StreamCut,
                WarningKind::ForcedAnswer
            ]
        );

        // What a resume reads: the next seq and the last checkpoint.
        assert_eq!(store.last_seq("turn_old_cut").await.expect("seq"), Some(3));
        let checkpoint = store
            .last_event_of_kind("turn_old_cut", "checkpoint")
            .await
            .expect("query")
            .expect("a checkpoint")
            .decode()
            .expect("decode");
        let EventKind::Checkpoint { checkpoint } = checkpoint.kind else {
            panic!("the checkpoint row holds {:?}", checkpoint.kind);
        };
        assert_eq!(checkpoint.rounds, 1);
        assert_eq!(checkpoint.elapsed_ms, 700);
        assert_eq!(
            checkpoint.record.current().map(|s| s.id.as_str()),
            Some("S2")
        );
        let errors: Vec<ErrorKind> = store
            .events_after("turn_old_cut", None, 100)
            .await
            .expect("events")
            .iter()
            .filter_map(|e| match e.decode().expect("decode").kind {
                EventKind::Error { kind, .. } => Some(kind),
                _ => None,
            })
            .collect();
        assert_eq!(errors, [ErrorKind::IdleTimeout, ErrorKind::Internal]);
    }
}
