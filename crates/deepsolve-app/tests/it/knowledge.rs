//! The knowledge service from the settings, and the app that mounts the knowledge tools on it.

use std::sync::Arc;

use deepsolve_app::{AppBuilder, KnowledgeOptions, kb_limits, knowledge_from_settings};
use deepsolve_core::ChatModel;
use deepsolve_settings::{ModelRef, Settings};
use deepsolve_store::{Store, StoreOptions};
use deepsolve_testkit::{ScriptedModel, WellBehaved};

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
