//! The full-text index on disk, derived from a real store: English stemming, Chinese words,
//! and rebuilds when the directory is gone or the store's generation moved on.

use deepsolve_kb::index::{IndexError, KbIndex, KbIndexes};
use deepsolve_store::{
    KbDocumentStatus, KnowledgeBase, NewKbChunk, NewKbDocument, Store, StoreOptions,
};

/// A store per backend under test (SQLite always, PostgreSQL when
/// `DEEPSOLVE_TEST_POSTGRES_URL` is set); the guard keeps the SQLite directory alive.
pub(crate) async fn stores() -> Vec<(Store, tempfile::TempDir)> {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Store::open_sqlite(&dir.path().join("kb.db"), StoreOptions::default())
        .await
        .unwrap();
    let mut out = vec![(sqlite, dir)];
    if let Some(url) = deepsolve_store::testing::scratch_postgres_from_env()
        .await
        .expect("DEEPSOLVE_TEST_POSTGRES_URL is set but unusable")
    {
        let pg = Store::open(&url, StoreOptions::default()).await.unwrap();
        out.push((pg, tempfile::tempdir().unwrap()));
    }
    out
}

/// A ready document of `texts` (one chunk each, on pages 1, 2, …) in `kb`; the chunk ids.
pub(crate) async fn ready_document(
    store: &Store,
    kb: &KnowledgeBase,
    name: &str,
    texts: &[&str],
) -> Vec<String> {
    let doc = store
        .add_kb_document(
            &kb.id,
            &kb.user_id,
            NewKbDocument {
                name: name.into(),
                kind: "text".into(),
                size: 100,
                pages: Some(texts.len() as u32),
            },
        )
        .await
        .unwrap();
    let chunks: Vec<NewKbChunk> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| NewKbChunk {
            ordinal: i as u32,
            page: Some(i as u32 + 1),
            heading_path: vec!["Notes".into()],
            text: (*t).into(),
        })
        .collect();
    let ids = store
        .insert_kb_chunks(&doc.id, &kb.user_id, &chunks)
        .await
        .unwrap();
    store
        .set_kb_document_status(&doc.id, &kb.user_id, KbDocumentStatus::Ready, None)
        .await
        .unwrap();
    ids
}

pub(crate) const ENGLISH: &str =
    "The derivative measures how fast a function changes as its input changes.";
pub(crate) const CHINESE: &str = "牛顿第二定律描述了物体所受的力与加速度之间的关系。";
pub(crate) const OTHER: &str = "Photosynthesis turns light, water and carbon dioxide into sugar.";

async fn best(index: &KbIndex, query: &str) -> Vec<String> {
    index
        .search_async(query, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.chunk_id)
        .collect()
}

async fn fresh(store: &Store, kb: &KnowledgeBase) -> KnowledgeBase {
    store.kb(&kb.id, &kb.user_id).await.unwrap().unwrap()
}

#[tokio::test]
async fn bm25_finds_english_by_a_stemmed_word_and_chinese_by_a_jieba_word() {
    for (store, dir) in stores().await {
        let kb = store.create_kb("u1", "Mixed").await.unwrap();
        let ids = ready_document(&store, &kb, "mixed.txt", &[ENGLISH, CHINESE, OTHER]).await;
        let indexes = KbIndexes::new(dir.path().join("kb-index"));
        let index = indexes.ensure_current(&store, &kb).await.unwrap();

        // "derivatives" and "measuring" appear in no passage; their stems do.
        assert_eq!(best(&index, "derivatives").await, [ids[0].clone()]);
        assert_eq!(best(&index, "Measuring?").await, [ids[0].clone()]);
        // 加速度 is one word to jieba, inside an unbroken run of Chinese characters.
        assert_eq!(best(&index, "加速度是什么").await, [ids[1].clone()]);
        // Query syntax is not interpreted: quotes and colons are just punctuation.
        assert_eq!(
            best(&index, "\"photosynthesis:\" AND (").await,
            [ids[2].clone()]
        );
        assert!(best(&index, "quantum").await.is_empty());
        let scored = index.search_async("function derivative", 10).await.unwrap();
        assert!(scored[0].score > 0.0);
    }
}

#[tokio::test]
async fn the_index_is_rebuilt_when_its_directory_is_deleted() {
    for (store, dir) in stores().await {
        let kb = store.create_kb("u1", "Calculus").await.unwrap();
        let ids = ready_document(&store, &kb, "calc.txt", &[ENGLISH, OTHER]).await;
        let root = dir.path().join("kb-index");
        let indexes = KbIndexes::new(&root);
        let first = indexes.ensure_current(&store, &kb).await.unwrap();
        assert_eq!(first.generation(), fresh(&store, &kb).await.generation);
        assert!(root.join(&kb.id).join("meta.json").is_file());

        std::fs::remove_dir_all(root.join(&kb.id)).unwrap();
        let again = indexes.ensure_current(&store, &kb).await.unwrap();
        assert!(
            root.join(&kb.id).join("meta.json").is_file(),
            "rebuilt on disk"
        );
        assert_eq!(best(&again, "derivatives").await, [ids[0].clone()]);
    }
}

#[tokio::test]
async fn a_generation_bump_rebuilds_and_a_new_document_is_found() {
    for (store, dir) in stores().await {
        let kb = store.create_kb("u1", "Growing").await.unwrap();
        ready_document(&store, &kb, "a.txt", &[OTHER]).await;
        let indexes = KbIndexes::new(dir.path().join("kb-index"));
        let before = indexes.ensure_current(&store, &kb).await.unwrap();
        assert!(best(&before, "derivative").await.is_empty());

        // The caller's copy of the KB is stale; the store's generation is what counts.
        let ids = ready_document(&store, &kb, "b.txt", &[ENGLISH]).await;
        let after = indexes.ensure_current(&store, &kb).await.unwrap();
        assert!(after.generation() > before.generation());
        assert_eq!(after.generation(), fresh(&store, &kb).await.generation);
        assert_eq!(best(&after, "derivative").await, [ids[0].clone()]);

        // A document that is not ready yet is not searched.
        let pending = store
            .add_kb_document(
                &kb.id,
                "u1",
                NewKbDocument {
                    name: "c.txt".into(),
                    kind: "text".into(),
                    size: 1,
                    pages: None,
                },
            )
            .await
            .unwrap();
        store
            .insert_kb_chunks(
                &pending.id,
                "u1",
                &[NewKbChunk {
                    ordinal: 0,
                    page: None,
                    heading_path: Vec::new(),
                    text: CHINESE.into(),
                }],
            )
            .await
            .unwrap();
        let latest = indexes.ensure_current(&store, &kb).await.unwrap();
        assert!(best(&latest, "加速度").await.is_empty());
    }
}

#[tokio::test]
async fn a_current_index_on_disk_is_reused_by_a_new_replica_process() {
    let (store, dir) = stores().await.remove(0);
    let kb = store.create_kb("u1", "Reuse").await.unwrap();
    ready_document(&store, &kb, "a.txt", &[ENGLISH]).await;
    let root = dir.path().join("kb-index");
    KbIndexes::new(&root)
        .ensure_current(&store, &kb)
        .await
        .unwrap();
    // A rebuild replaces the whole directory, so a marker inside it survives only a reuse.
    let marker = root.join(&kb.id).join("marker");
    std::fs::write(&marker, b"x").unwrap();
    let reopened = KbIndexes::new(&root)
        .ensure_current(&store, &kb)
        .await
        .unwrap();
    assert!(marker.exists(), "the current index was reused");
    assert_eq!(best(&reopened, "derivatives").await.len(), 1);

    // A stamp from another generation is rebuilt even in a fresh process.
    ready_document(&store, &kb, "b.txt", &[OTHER]).await;
    KbIndexes::new(&root)
        .ensure_current(&store, &kb)
        .await
        .unwrap();
    assert!(!marker.exists(), "the stale index was rebuilt");
}

#[tokio::test]
async fn another_users_or_a_garbled_knowledge_base_is_refused() {
    let (store, dir) = stores().await.remove(0);
    let kb = store.create_kb("owner", "Mine").await.unwrap();
    let indexes = KbIndexes::new(dir.path().join("kb-index"));
    let stolen = KnowledgeBase {
        user_id: "intruder".into(),
        ..kb.clone()
    };
    assert!(matches!(
        indexes.ensure_current(&store, &stolen).await,
        Err(IndexError::NotFound(_))
    ));
    assert!(
        !dir.path().join("kb-index").join(&kb.id).exists(),
        "nothing was built for the intruder"
    );
    let escape = KnowledgeBase {
        id: "../etc".into(),
        ..kb
    };
    assert!(matches!(
        indexes.ensure_current(&store, &escape).await,
        Err(IndexError::InvalidId(_))
    ));
    assert!(!dir.path().join("etc").exists());
}

#[tokio::test]
async fn concurrent_searches_of_a_stale_index_share_one_rebuild_and_old_builds_are_swept() {
    let (store, dir) = stores().await.remove(0);
    let kb = store.create_kb("u1", "Busy").await.unwrap();
    let ids = ready_document(&store, &kb, "a.txt", &[ENGLISH]).await;
    let root = dir.path().join("kb-index");
    // What a process killed mid-build leaves behind.
    let abandoned = root.join(format!(".build-{}-1-0", kb.id));
    std::fs::create_dir_all(&abandoned).unwrap();
    let indexes = KbIndexes::new(&root);
    let (a, b) = tokio::join!(
        indexes.ensure_current(&store, &kb),
        indexes.ensure_current(&store, &kb)
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.generation(), b.generation());
    assert_eq!(best(&a, "derivatives").await, ids);
    assert_eq!(best(&b, "derivatives").await, ids);
    assert!(!abandoned.exists());
    let left: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        [std::ffi::OsString::from(&kb.id)],
        "only the index itself"
    );
}
