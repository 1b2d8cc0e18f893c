//! The store against real databases: SQLite files always, PostgreSQL too when
//! `DEEPSOLVE_TEST_POSTGRES_URL` is set (each test then gets a fresh database).

use std::time::Duration;

use deepsolve_protocol::{
    EventKind, Language, SolveRecord, StopReason, StoredTurnSpec, TurnEvent, Usage,
};
use deepsolve_store::{
    ArtifactOrigin, Backend, HubMsg, NewArtifact, NewTurn, Received, Role, Store, StoreError,
    StoreOptions, StoredEvent, TurnFinish, TurnImageRow, TurnStatus,
};

/// One store per backend under test; the guard keeps the SQLite directory alive.
pub(crate) async fn stores() -> Vec<(Store, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let sqlite = Store::open_sqlite(&dir.path().join("test.db"), StoreOptions::default())
        .await
        .expect("open sqlite");
    let mut out = vec![(sqlite, Some(dir))];
    if let Some(url) = fresh_postgres_url().await {
        let pg = Store::open(&url, StoreOptions::default())
            .await
            .expect("open postgres");
        out.push((pg, None));
    }
    out
}

/// A new empty database on the test server, so tests never see each other's rows.
async fn fresh_postgres_url() -> Option<String> {
    deepsolve_store::testing::scratch_postgres_from_env()
        .await
        .expect("DEEPSOLVE_TEST_POSTGRES_URL is set but unusable")
}

fn event(turn: &str, seq: u64, kind: EventKind) -> StoredEvent {
    StoredEvent::from_event(&TurnEvent {
        turn_id: turn.into(),
        seq,
        ts: 1_700_000_000_000 + seq,
        kind,
    })
    .expect("encode")
}

fn spec() -> StoredTurnSpec {
    StoredTurnSpec {
        language: Language::En,
        tools: Vec::new(),
        config: serde_json::Map::new(),
        context_window: 32_000,
        history: Vec::new(),
        material: None,
        images: Vec::new(),
    }
}

fn text(turn: &str, seq: u64) -> StoredEvent {
    event(
        turn,
        seq,
        EventKind::TextDelta {
            text: format!("t{seq}"),
        },
    )
}

async fn running_turn(store: &Store, user: &str, session: Option<&str>) -> (String, String) {
    let session = match session {
        Some(s) => s.to_string(),
        None => {
            store
                .create_session(user, "a problem")
                .await
                .expect("session")
                .id
        }
    };
    let id = format!("turn_{}", uuid::Uuid::now_v7().simple());
    store
        .create_turn(&NewTurn {
            id: id.clone(),
            session_id: session.clone(),
            user_id: user.into(),
            problem: "Solve x+1=2".into(),
            spec: spec(),
            owner: "node-a".into(),
        })
        .await
        .expect("create turn");
    (id, session)
}

#[tokio::test]
async fn sqlite_file_is_created_in_wal_mode_and_reopening_is_idempotent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("nested-ok.db");
    let store = Store::open_sqlite(&path, StoreOptions::default())
        .await
        .expect("open");
    assert_eq!(store.backend(), Backend::Sqlite);
    store.create_user("ada", Role::Admin).await.expect("user");
    store.close().await;
    assert!(path.exists());
    // WAL leaves its side files next to the database while open.
    let again = Store::open_sqlite(&path, StoreOptions::default())
        .await
        .expect("reopen");
    assert!(
        dir.path().join("nested-ok.db-wal").exists(),
        "WAL journal in use"
    );
    assert_eq!(again.count_users().await.expect("count"), 1);
}

#[tokio::test]
async fn users_and_tokens_are_hashed_at_rest_and_revocable() {
    for (store, dir) in stores().await {
        let ada = store.create_user("ada", Role::Admin).await.expect("user");
        assert!(matches!(
            store.create_user("ada", Role::User).await,
            Err(StoreError::Conflict(_))
        ));
        assert!(matches!(
            store.create_user("no spaces", Role::User).await,
            Err(StoreError::Invalid(_))
        ));
        let issued = store.issue_token(&ada.id, "cli").await.expect("token");
        assert!(issued.token.starts_with("dst_") && issued.token.len() > 60);
        let who = store.authenticate(&issued.token).await.expect("auth");
        assert_eq!(who.map(|u| u.name), Some("ada".to_string()));
        assert_eq!(store.authenticate("dst_wrong").await.expect("auth"), None);
        assert_eq!(store.authenticate("").await.expect("auth"), None);
        if let Some(dir) = &dir {
            store.close().await;
            let bytes = std::fs::read_dir(dir.path())
                .expect("dir")
                .flatten()
                .flat_map(|f| std::fs::read(f.path()).unwrap_or_default())
                .collect::<Vec<u8>>();
            let needle = issued.token.as_bytes();
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle),
                "the clear token must not be stored"
            );
            continue;
        }
        assert_eq!(store.revoke_tokens(&ada.id).await.expect("revoke"), 1);
        assert_eq!(store.authenticate(&issued.token).await.expect("auth"), None);
    }
}

#[tokio::test]
async fn revoked_tokens_stop_working() {
    for (store, _dir) in stores().await {
        let bob = store.create_user("bob", Role::User).await.expect("user");
        let t = store.issue_token(&bob.id, "x").await.expect("token");
        assert!(store.authenticate(&t.token).await.expect("auth").is_some());
        assert_eq!(store.revoke_tokens(&bob.id).await.expect("revoke"), 1);
        assert!(store.authenticate(&t.token).await.expect("auth").is_none());
    }
}

#[tokio::test]
async fn browser_sessions_are_hashed_at_rest_expire_and_end_at_logout_or_revocation() {
    for (store, dir) in stores().await {
        let ada = store.create_user("ada", Role::User).await.expect("user");
        let bob = store.create_user("bob", Role::Admin).await.expect("user");
        let hour = Duration::from_secs(3600);
        let issued = store
            .create_browser_session(&ada.id, hour)
            .await
            .expect("session");
        assert!(issued.secret.starts_with("dss_") && issued.secret.len() > 60);
        let live = store
            .browser_session(&issued.secret)
            .await
            .expect("lookup")
            .expect("live");
        assert_eq!(
            (live.user.name.as_str(), live.expires_at),
            ("ada", issued.expires_at)
        );
        for forged in ["dss_wrong", "", "dst_x", &issued.secret[..20]] {
            assert!(
                store
                    .browser_session(forged)
                    .await
                    .expect("lookup")
                    .is_none()
            );
        }
        // Expired at once: never live.
        let expired = store
            .create_browser_session(&ada.id, Duration::ZERO)
            .await
            .expect("session");
        assert!(
            store
                .browser_session(&expired.secret)
                .await
                .expect("lookup")
                .is_none()
        );

        // Logout ends one session; revocation ends all of a user's, and only that user's.
        let other = store
            .create_browser_session(&ada.id, hour)
            .await
            .expect("session");
        let bobs = store
            .create_browser_session(&bob.id, hour)
            .await
            .expect("session");
        assert!(
            store
                .delete_browser_session(&issued.secret)
                .await
                .expect("logout")
        );
        assert!(
            !store
                .delete_browser_session(&issued.secret)
                .await
                .expect("logout")
        );
        assert!(
            store
                .browser_session(&issued.secret)
                .await
                .expect("lookup")
                .is_none()
        );
        assert!(
            store
                .browser_session(&other.secret)
                .await
                .expect("lookup")
                .is_some()
        );
        // The expired session was deleted when `other` was created.
        assert_eq!(
            store
                .revoke_browser_sessions(&ada.id)
                .await
                .expect("revoke"),
            1
        );
        assert!(
            store
                .browser_session(&other.secret)
                .await
                .expect("lookup")
                .is_none()
        );
        assert!(
            store
                .browser_session(&bobs.secret)
                .await
                .expect("lookup")
                .is_some()
        );

        if let Some(dir) = &dir {
            store.close().await;
            let bytes = std::fs::read_dir(dir.path())
                .expect("dir")
                .flatten()
                .flat_map(|f| std::fs::read(f.path()).unwrap_or_default())
                .collect::<Vec<u8>>();
            let needle = bobs.secret.as_bytes();
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle),
                "the clear session secret must not be stored"
            );
        }
    }
}

#[tokio::test]
async fn sessions_and_turns_are_scoped_to_their_owner() {
    for (store, _dir) in stores().await {
        let (turn, session) = running_turn(&store, "alice", None).await;
        assert!(store.turn(&turn, "alice").await.expect("get").is_some());
        assert!(store.turn(&turn, "mallory").await.expect("get").is_none());
        assert!(
            store
                .session(&session, "mallory")
                .await
                .expect("get")
                .is_none()
        );
        assert!(
            store
                .list_sessions("mallory", 50)
                .await
                .expect("list")
                .is_empty()
        );
        assert_eq!(
            store.list_sessions("alice", 50).await.expect("list").len(),
            1
        );
        assert!(
            !store
                .delete_session(&session, "mallory")
                .await
                .expect("delete")
        );
        // Running turns block deletion; finished ones go with the session, events included.
        assert!(matches!(
            store.delete_session(&session, "alice").await,
            Err(StoreError::Conflict(_))
        ));
        store
            .append_events(&[text(&turn, 0)])
            .await
            .expect("append");
        store
            .finish_turn(&turn, &TurnFinish::default())
            .await
            .expect("finish");
        assert!(
            store
                .delete_session(&session, "alice")
                .await
                .expect("delete")
        );
        assert!(store.turn(&turn, "alice").await.expect("get").is_none());
        assert!(
            store
                .events_after(&turn, None, 10)
                .await
                .expect("events")
                .is_empty()
        );
    }
}

#[tokio::test]
async fn one_running_turn_per_session() {
    for (store, _dir) in stores().await {
        let (first, session) = running_turn(&store, "u", None).await;
        let second = NewTurn {
            id: "turn_second".into(),
            session_id: session.clone(),
            user_id: "u".into(),
            problem: "next".into(),
            spec: spec(),
            owner: "node-a".into(),
        };
        assert!(matches!(
            store.create_turn(&second).await,
            Err(StoreError::Conflict(_))
        ));
        store
            .finish_turn(&first, &TurnFinish::default())
            .await
            .expect("finish");
        store.create_turn(&second).await.expect("now it may start");
    }
}

#[tokio::test]
async fn the_event_log_appends_in_order_and_reads_after_a_seq() {
    for (store, _dir) in stores().await {
        let (turn, _) = running_turn(&store, "u", None).await;
        let batch: Vec<StoredEvent> = (0..5).map(|s| text(&turn, s)).collect();
        store.append_events(&batch[..2]).await.expect("append");
        store.append_events(&batch[2..]).await.expect("append");
        let all = store.events_after(&turn, None, 100).await.expect("all");
        assert_eq!(all, batch, "events read back verbatim, in seq order");
        let tail = store.events_after(&turn, Some(2), 100).await.expect("tail");
        assert_eq!(tail.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![3, 4]);
        let page = store.events_after(&turn, Some(0), 2).await.expect("page");
        assert_eq!(page.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(store.last_seq(&turn).await.expect("last"), Some(4));
        let latest = store.last_event_of_kind(&turn, &batch[0].kind).await;
        assert_eq!(latest.expect("latest"), Some(batch[4].clone()));
        let none = store.last_event_of_kind(&turn, "checkpoint").await;
        assert_eq!(none.expect("none"), None);
        assert!(
            store.append_events(&[text(&turn, 3)]).await.is_err(),
            "history is never rewritten"
        );
        assert_eq!(
            store
                .events_after(&turn, None, 100)
                .await
                .expect("all")
                .len(),
            5
        );
        let decoded = all[1].decode().expect("decode");
        assert_eq!(decoded.seq, 1);
        assert_eq!(decoded.turn_id, turn);
    }
}

#[tokio::test]
async fn subscribers_get_committed_events_and_a_poke_when_the_turn_ends() {
    for (store, _dir) in stores().await {
        let (turn, _) = running_turn(&store, "u", None).await;
        let mut sub = store.subscribe(&turn);
        let mut other = store.subscribe("turn_unrelated");
        store
            .append_events(&[text(&turn, 0), text(&turn, 1)])
            .await
            .expect("append");
        for want in 0..2 {
            match tokio::time::timeout(Duration::from_secs(5), sub.recv()).await {
                Ok(Received::Msg(HubMsg::Event(e))) => assert_eq!(e.seq, want),
                other => panic!("expected event {want}, got {other:?}"),
            }
        }
        store
            .finish_turn(&turn, &TurnFinish::default())
            .await
            .expect("finish");
        assert!(matches!(
            tokio::time::timeout(Duration::from_secs(5), sub.recv()).await,
            Ok(Received::Msg(HubMsg::Poke))
        ));
        assert!(
            tokio::time::timeout(Duration::from_millis(50), other.recv())
                .await
                .is_err(),
            "readers of other turns hear nothing"
        );
        assert_eq!(store.hub().watched_turns(), 2);
        drop(sub);
        drop(other);
        assert_eq!(store.hub().watched_turns(), 0, "channels are freed");
    }
}

#[tokio::test]
async fn a_writer_connection_appends_and_ends_many_turns_at_once() {
    for (store, _dir) in stores().await {
        let (a, _) = running_turn(&store, "u", None).await;
        let (b, _) = running_turn(&store, "u", None).await;
        let mut sub = store.subscribe(&a);
        let mut conn = store.writer_connection().await.expect("writer connection");
        store
            .append_events_on(&mut conn, &[text(&a, 0), text(&b, 0), text(&a, 1)])
            .await
            .expect("append");
        for want in 0..2 {
            match tokio::time::timeout(Duration::from_secs(5), sub.recv()).await {
                Ok(Received::Msg(HubMsg::Event(e))) => assert_eq!(e.seq, want),
                other => panic!("expected event {want}, got {other:?}"),
            }
        }
        // A duplicate seq is refused, and nothing of its batch lands.
        assert!(
            store
                .append_events_on(&mut conn, &[text(&b, 1), text(&a, 1)])
                .await
                .is_err()
        );
        let mut conn = store.writer_connection().await.expect("a fresh one");
        assert_eq!(store.last_seq(&b).await.expect("seq"), Some(0));
        let finished = TurnFinish {
            answer: Some("x = 1".into()),
            ..TurnFinish::default()
        };
        // The last event of b and both ends in one transaction.
        store
            .append_and_finish_on(
                &mut conn,
                &[text(&b, 1)],
                &[(&a, &finished), (&b, &TurnFinish::default())],
            )
            .await
            .expect("finish both");
        assert_eq!(store.last_seq(&b).await.expect("seq"), Some(1));
        assert!(matches!(
            tokio::time::timeout(Duration::from_secs(5), sub.recv()).await,
            Ok(Received::Msg(HubMsg::Poke))
        ));
        for turn in [&a, &b] {
            let record = store
                .turn_unscoped(turn)
                .await
                .expect("read")
                .expect("turn");
            assert_eq!(record.status, TurnStatus::Finished);
        }
        let record = store.turn_unscoped(&a).await.expect("read").expect("turn");
        assert_eq!(record.answer.as_deref(), Some("x = 1"));
    }
}

#[tokio::test]
async fn finished_turns_feed_follow_ups_with_answers_and_solve_records() {
    for (store, _dir) in stores().await {
        let (turn, session) = running_turn(&store, "u", None).await;
        let solve = SolveRecord {
            analysis: "linear".into(),
            replans_max: 2,
            ..Default::default()
        };
        let finish = TurnFinish {
            status: Some(TurnStatus::Finished),
            answer: Some("x = 1".into()),
            stop_reason: Some(StopReason::Answered),
            usage: Some(Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
                estimated: false,
                cached_tokens: None,
            }),
            solve: Some(solve.clone()),
            rounds: 4,
            elapsed_ms: 1234,
            error: None,
        };
        store.finish_turn(&turn, &finish).await.expect("finish");
        let rec = store.turn(&turn, "u").await.expect("get").expect("exists");
        assert_eq!(rec.status, TurnStatus::Finished);
        assert_eq!(rec.answer.as_deref(), Some("x = 1"));
        assert_eq!(rec.usage.map(|u| u.total()), Some(15));
        assert_eq!((rec.rounds, rec.elapsed_ms), (4, 1234));
        assert!(rec.finished_at.is_some());
        // A turn without an answer is not history.
        let (failed, _) = running_turn(&store, "u", Some(&session)).await;
        store
            .finish_turn(
                &failed,
                &TurnFinish {
                    status: Some(TurnStatus::Failed),
                    ..Default::default()
                },
            )
            .await
            .expect("finish");
        let prior = store.prior_turns(&session).await.expect("prior");
        assert_eq!(prior.len(), 1);
        assert_eq!(prior[0].answer, "x = 1");
        assert_eq!(prior[0].problem, "Solve x+1=2");
        assert_eq!(prior[0].solve.as_ref(), Some(&solve));
    }
}

#[tokio::test]
async fn a_restart_interrupts_only_its_own_running_turns_and_resume_reclaims_them() {
    for (store, _dir) in stores().await {
        let (theirs, _) = running_turn(&store, "u", None).await;
        reown(&store, &theirs, "node-z").await;
        let (mine, _) = running_turn(&store, "u", None).await;
        let interrupted = store.mark_interrupted("node-a").await.expect("mark");
        assert_eq!(interrupted, vec![mine.clone()]);
        let rec = store.turn(&mine, "u").await.expect("get").expect("exists");
        assert_eq!(rec.status, TurnStatus::Interrupted);
        // finish_turn never overwrites an interruption.
        store
            .finish_turn(&mine, &TurnFinish::default())
            .await
            .expect("noop");
        let rec = store.turn(&mine, "u").await.expect("get").expect("exists");
        assert_eq!(rec.status, TurnStatus::Interrupted);
        assert!(
            store
                .reclaim_interrupted(&mine, "node-b")
                .await
                .expect("reclaim")
        );
        assert!(
            !store
                .reclaim_interrupted(&mine, "node-c")
                .await
                .expect("twice")
        );
        let rec = store.turn(&mine, "u").await.expect("get").expect("exists");
        assert_eq!(
            (rec.status, rec.owner.as_str()),
            (TurnStatus::Running, "node-b")
        );
        assert_eq!(
            store.count_turns(TurnStatus::Running).await.expect("count"),
            2
        );
    }
}

#[tokio::test]
async fn resumable_turns_are_the_running_and_interrupted_ones_of_every_owner() {
    for (store, _dir) in stores().await {
        let (finished, _) = running_turn(&store, "u", None).await;
        store
            .finish_turn(&finished, &TurnFinish::default())
            .await
            .expect("finish");
        let (cancelled, _) = running_turn(&store, "u", None).await;
        let cancel = TurnFinish {
            status: Some(TurnStatus::Cancelled),
            ..Default::default()
        };
        store
            .finish_turn(&cancelled, &cancel)
            .await
            .expect("cancel");
        let (interrupted, _) = running_turn(&store, "u", None).await;
        store.mark_interrupted("node-a").await.expect("mark");
        let (elsewhere, _) = running_turn(&store, "v", None).await;
        reown(&store, &elsewhere, "node-z").await;
        let (running, _) = running_turn(&store, "v", None).await;
        let mut expected = vec![interrupted, elsewhere, running];
        expected.sort();
        let mut ids = store.resumable_turn_ids_unscoped().await.expect("ids");
        ids.sort();
        assert_eq!(ids, expected);
    }
}

#[tokio::test]
async fn dead_owners_are_found_by_prefix_and_their_turns_interrupted_with_why() {
    for (store, _dir) in stores().await {
        let (cli, _) = running_turn(&store, "u", None).await;
        reown(&store, &cli, "cli:host:1").await;
        let (other_cli, _) = running_turn(&store, "u", None).await;
        reown(&store, &other_cli, "cli:host:2").await;
        // A LIKE wildcard in the prefix is taken literally.
        let (wild, _) = running_turn(&store, "u", None).await;
        reown(&store, &wild, "clix%").await;
        running_turn(&store, "u", None).await;
        assert_eq!(
            store.running_owners("cli:").await.expect("owners"),
            ["cli:host:1", "cli:host:2"]
        );
        assert_eq!(
            store.running_owners("cli%").await.expect("owners"),
            Vec::<String>::new()
        );
        let ids = store
            .interrupt_owner("cli:host:1", "the process ended")
            .await
            .expect("interrupt");
        assert_eq!(ids, std::slice::from_ref(&cli));
        let rec = store.turn(&cli, "u").await.expect("get").expect("exists");
        assert_eq!(rec.status, TurnStatus::Interrupted);
        assert_eq!(rec.error.as_deref(), Some("the process ended"));
        assert_eq!(
            store.running_owners("cli:").await.expect("owners"),
            ["cli:host:2"]
        );
        // Newest first, as many as asked.
        let recent = store.user_turns("u", 2).await.expect("recent");
        assert_eq!(recent.len(), 2);
        assert!(recent[0].created_at >= recent[1].created_at);
        assert!(
            store
                .user_turns("nobody", 5)
                .await
                .expect("none")
                .is_empty()
        );
    }
}

/// Hand a turn to another node through the public API: interrupt it and reclaim it there.
async fn reown(store: &Store, turn: &str, node: &str) {
    store.mark_interrupted("node-a").await.expect("mark");
    assert!(
        store
            .reclaim_interrupted(turn, node)
            .await
            .expect("reclaim")
    );
}

#[tokio::test]
async fn artifacts_are_served_to_their_owner_only() {
    for (store, _dir) in stores().await {
        let (turn, _) = running_turn(&store, "alice", None).await;
        let meta = store
            .put_artifact(NewArtifact {
                turn_id: turn.clone(),
                user_id: "alice".into(),
                name: "plot.svg".into(),
                mime: "image/svg+xml".into(),
                content: b"<svg/>".to_vec(),
                origin: ArtifactOrigin::Workspace,
            })
            .await
            .expect("put");
        assert_eq!(meta.size, 6);
        let drawn = store
            .put_artifact(NewArtifact {
                turn_id: turn.clone(),
                user_id: "alice".into(),
                name: "figure.svg".into(),
                mime: "image/svg+xml".into(),
                content: b"<svg/>".to_vec(),
                origin: ArtifactOrigin::Rendered,
            })
            .await
            .expect("put");
        let (got, _) = store
            .artifact(&drawn.id, "alice")
            .await
            .expect("get")
            .expect("mine");
        assert_eq!(got.origin, ArtifactOrigin::Rendered, "the origin is kept");
        let (got, bytes) = store
            .artifact(&meta.id, "alice")
            .await
            .expect("get")
            .expect("mine");
        assert_eq!((got, bytes), (meta.clone(), b"<svg/>".to_vec()));
        assert!(
            store
                .artifact(&meta.id, "mallory")
                .await
                .expect("get")
                .is_none()
        );
        let listed = store.turn_artifacts(&turn).await.expect("list");
        assert!(listed.len() == 2 && listed.contains(&meta) && listed.contains(&drawn));
    }
}

fn image_row(id: &str, content: &[u8]) -> TurnImageRow {
    TurnImageRow {
        id: id.into(),
        name: format!("{id}.png"),
        mime: "image/png".into(),
        width: 640,
        height: 480,
        content: content.to_vec(),
    }
}

#[tokio::test]
async fn a_turns_images_are_stored_with_it_in_order_and_scoped_to_its_user() {
    for (store, _dir) in stores().await {
        let session = store
            .create_session("alice", "a figure")
            .await
            .expect("session");
        let new = NewTurn {
            id: "turn_with_images".into(),
            session_id: session.id.clone(),
            user_id: "alice".into(),
            problem: "Find angle C.".into(),
            spec: spec(),
            owner: "node-a".into(),
        };
        let rows = [
            image_row("image_2", b"\x89PNG two"),
            image_row("image_1", b"\x89PNG one"),
        ];
        store
            .create_turn_with_images(&new, &rows)
            .await
            .expect("created");
        assert_eq!(store.turn_images(&new.id).await.expect("read"), rows);
        let one = store
            .turn_image(&new.id, "image_1", "alice")
            .await
            .expect("read");
        assert_eq!(one.as_ref(), Some(&rows[1]));
        let theirs = store
            .turn_image(&new.id, "image_1", "mallory")
            .await
            .expect("read");
        assert_eq!(theirs, None);
        // A refused turn (its session busy) leaves no image behind.
        let second = NewTurn {
            id: "turn_refused".into(),
            ..new.clone()
        };
        let refused = store.create_turn_with_images(&second, &rows).await;
        assert!(
            matches!(refused, Err(StoreError::Conflict(_))),
            "{refused:?}"
        );
        assert!(
            store
                .turn_images("turn_refused")
                .await
                .expect("read")
                .is_empty()
        );
        // Deleted with the session.
        store
            .finish_turn(&new.id, &TurnFinish::default())
            .await
            .expect("finished");
        assert!(
            store
                .delete_session(&session.id, "alice")
                .await
                .expect("deleted")
        );
        assert!(store.turn_images(&new.id).await.expect("read").is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_from_many_turns_all_land() {
    for (store, _dir) in stores().await {
        let mut turns = Vec::new();
        for _ in 0..20 {
            turns.push(running_turn(&store, "u", None).await.0);
        }
        let tasks: Vec<_> = turns
            .iter()
            .cloned()
            .map(|turn| {
                let store = store.clone();
                tokio::spawn(async move {
                    for seq in 0..25 {
                        store
                            .append_events(&[text(&turn, seq)])
                            .await
                            .expect("append");
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("task");
        }
        for turn in &turns {
            assert_eq!(store.last_seq(turn).await.expect("last"), Some(24));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_replicas_hear_each_others_appends_and_ends() {
    let Some(url) = fresh_postgres_url().await else {
        eprintln!("skipped: DEEPSOLVE_TEST_POSTGRES_URL is not set");
        return;
    };
    let a = Store::open(&url, StoreOptions::default())
        .await
        .expect("replica a");
    let b = Store::open(&url, StoreOptions::default())
        .await
        .expect("replica b");
    a.start_listener().await.expect("listen a");
    b.start_listener().await.expect("listen b");
    let (turn, _) = running_turn(&a, "u", None).await;
    let mut on_b = b.subscribe(&turn);
    let mut on_a = a.subscribe(&turn);
    a.append_events(&[text(&turn, 0)]).await.expect("append");
    let got = tokio::time::timeout(Duration::from_secs(10), on_b.recv()).await;
    assert!(matches!(got, Ok(Received::Msg(HubMsg::Poke))), "{got:?}");
    assert_eq!(
        b.events_after(&turn, None, 10).await.expect("read").len(),
        1
    );
    // The appending replica delivers in-process and ignores its own notification.
    assert!(matches!(on_a.recv().await, Received::Msg(HubMsg::Event(_))));
    assert!(
        tokio::time::timeout(Duration::from_millis(300), on_a.recv())
            .await
            .is_err(),
        "no echo of its own append"
    );
    a.finish_turn(&turn, &TurnFinish::default())
        .await
        .expect("finish");
    let got = tokio::time::timeout(Duration::from_secs(10), on_b.recv()).await;
    assert!(matches!(got, Ok(Received::Msg(HubMsg::Poke))), "{got:?}");
}
