//! The knowledge service from the settings, and the app that mounts the knowledge tools on it.

use std::sync::Arc;

use deepsolve_app::{AppBuilder, KnowledgeOptions, kb_limits, knowledge_from_settings};
use deepsolve_core::{ChatModel, EventKind, StopReason, TurnSpec, VecSink};
use deepsolve_settings::{ModelRef, Settings};
use deepsolve_store::{Store, StoreOptions};
use deepsolve_testkit::{ScriptedModel, WellBehaved};
use tokio_util::sync::CancellationToken;

async fn store(dir: &tempfile::TempDir) -> Store {
    Store::open_sqlite(&dir.path().join("app.db"), StoreOptions::default())
        .await
        .unwrap()
}

#[tokio::test]
async fn the_settings_choose_the_embedder_the_limits_and_the_index_root() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let options = KnowledgeOptions {
        index_root: Some(dir.path().join("idx")),
        pdf_child: None,
    };
    let plain =
        knowledge_from_settings(&Settings::default(), store.clone(), options.clone()).unwrap();
    assert_eq!(
        plain.embedding_model(),
        None,
        "BM25 only without models.embedding"
    );
    assert_eq!(plain.indexes().root(), dir.path().join("idx"));

    let mut settings = Settings::default();
    settings.models.embedding = Some(ModelRef {
        model: "bge-m3".into(),
        base_url: Some("http://127.0.0.1:9/v1".into()),
        api_key_env: None,
    });
    settings.kb.max_file_mb = 3;
    settings.kb.max_pages = 7;
    settings.kb.max_chunks = 500;
    let hybrid = knowledge_from_settings(&settings, store.clone(), options.clone()).unwrap();
    assert_eq!(hybrid.embedding_model(), Some("bge-m3"));
    let limits = hybrid.ingestor().limits();
    assert_eq!(
        (
            limits.max_file_bytes,
            limits.max_pages,
            limits.max_chunks_per_kb
        ),
        (3 * 1024 * 1024, 7, 500)
    );
    assert_eq!(kb_limits(&settings), *limits);

    // A key variable that is named but unset is an error naming the setting, not the key.
    settings.models.embedding = Some(ModelRef {
        model: "bge-m3".into(),
        base_url: Some("http://127.0.0.1:9/v1".into()),
        api_key_env: Some("DEEPSOLVE_TEST_UNSET_EMBEDDING_KEY".into()),
    });
    let err = knowledge_from_settings(&settings, store, options)
        .err()
        .expect("an unset key variable");
    assert_eq!(
        err.to_string(),
        "models.embedding: the embedding API key variable DEEPSOLVE_TEST_UNSET_EMBEDDING_KEY is not set"
    );
}

#[tokio::test]
async fn an_app_with_knowledge_offers_its_tools_to_turns_with_material() {
    let dir = tempfile::tempdir().unwrap();
    let options = KnowledgeOptions {
        index_root: Some(dir.path().join("idx")),
        pdf_child: None,
    };
    let knowledge =
        knowledge_from_settings(&Settings::default(), store(&dir).await, options).unwrap();
    let model: Arc<dyn ChatModel> = Arc::new(ScriptedModel::new(WellBehaved::new(1)));
    let app = AppBuilder::new(Settings::default(), model.clone())
        .knowledge(knowledge)
        .build()
        .unwrap();
    assert!(app.knowledge().is_some());
    let none: &[&str] = &[];
    assert_eq!(
        app.tools_for_turn_with(none, true).unwrap(),
        ["rag", "read_source"]
    );
    assert!(app.tools_for_turn(none).unwrap().is_empty());
    let names = app.engine().work_tool_names();
    assert!(names.contains(&"rag".to_string()) && names.contains(&"read_source".to_string()));

    let bare = AppBuilder::new(Settings::default(), model).build().unwrap();
    assert!(bare.knowledge().is_none());
    let err = bare.tools_for_turn_with(none, true).unwrap_err();
    assert!(err.to_string().contains("no knowledge bases"), "{err}");
}

#[tokio::test]
async fn a_turn_with_material_searches_reads_and_cites_its_documents() {
    let dir = tempfile::tempdir().unwrap();
    let options = KnowledgeOptions {
        index_root: Some(dir.path().join("idx")),
        pdf_child: None,
    };
    let store = store(&dir).await;
    let knowledge = knowledge_from_settings(&Settings::default(), store.clone(), options).unwrap();
    let kb = store.create_kb("u1", "Algebra").await.unwrap();
    let text = deepsolve_testkit::documents::notes_markdown();
    let doc = knowledge
        .ingestor()
        .add("u1", &kb.id, "notes.md", text.len() as u64)
        .await
        .unwrap();
    let quiet = |_: deepsolve_kb::IngestProgress| {};
    knowledge
        .ingestor()
        .run("u1", &doc.id, text.into_bytes(), &quiet)
        .await
        .unwrap();
    let material = knowledge
        .material("u1", std::slice::from_ref(&kb), None)
        .await
        .unwrap();

    let model = Arc::new(ScriptedModel::new(deepsolve_testkit::policy::KbCite));
    let app = AppBuilder::new(Settings::default(), model.clone())
        .knowledge(knowledge)
        .build()
        .unwrap();
    let none: &[&str] = &[];
    let mut spec = TurnSpec::new(deepsolve_app::new_turn_id(), "What is an eigenvalue?");
    spec.user_id = Some("u1".into());
    spec.tools = app.tools_for_turn_with(none, true).unwrap();
    spec.material = Some(Arc::new(material));
    let sink = VecSink::default();
    let outcome = app
        .engine()
        .run_turn(model.as_ref(), spec, &sink, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Answered, "{outcome:?}");
    let cited: Vec<(u32, Option<&str>)> = outcome
        .sources
        .iter()
        .map(|s| (s.n, s.document_id.as_deref()))
        .collect();
    assert_eq!(
        cited,
        [(1, Some(doc.id.as_str())), (2, Some(doc.id.as_str()))]
    );
    assert_eq!(outcome.sources[0].title, "notes.md");
    assert!(
        outcome.sources[0].chunk_id.is_some(),
        "[1] is the rag passage"
    );
    assert!(
        outcome.sources[1].chunk_id.is_none(),
        "[2] is what read_source read"
    );
    // Each tool result carries the sources it numbered.
    let events = sink.0.lock().unwrap();
    let numbered: Vec<u32> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult { sources, .. } => Some(sources.iter().map(|s| s.n)),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(numbered, [1, 2]);
}
