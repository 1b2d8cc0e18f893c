//! Hybrid retrieval over a real store and index: fusion, `top_k`, hits, and what a model
//! mismatch reports.

use std::sync::Arc;

use deepsolve_kb::index::KbIndexes;
use deepsolve_kb::retrieve::testing::HashEmbedder;
use deepsolve_kb::retrieve::{
    Embedder, RRF_K, Retriever, clamp_top_k, embed_missing, reciprocal_rank_fusion,
};

use crate::index::{CHINESE, ENGLISH, OTHER, ready_document, stores};

fn ids(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn reciprocal_rank_fusion_rewards_agreement_between_rankings() {
    let bm25 = ids(&["a", "b", "c"]);
    let vector = ids(&["c", "a", "d"]);
    let fused = reciprocal_rank_fusion(&[bm25, vector], RRF_K);
    let order: Vec<&str> = fused.iter().map(|(id, _)| id.as_str()).collect();
    // a: 1/61 + 1/62, c: 1/63 + 1/61, b: 1/62, d: 1/63.
    assert_eq!(order, ["a", "c", "b", "d"]);
    let a = 1.0 / 61.0 + 1.0 / 62.0;
    assert!((fused[0].1 - a).abs() < 1e-12, "{fused:?}");
    assert!((fused[3].1 - 1.0 / 63.0).abs() < 1e-12, "{fused:?}");

    // Equal sums: the item with the better single rank first.
    let tie = reciprocal_rank_fusion(&[ids(&["x", "y"]), ids(&["y", "x"])], RRF_K);
    assert_eq!(tie[0].1, tie[1].1);
    assert_eq!(tie[0].0, "x");
}

#[test]
fn top_k_defaults_to_five_and_is_clamped() {
    assert_eq!(clamp_top_k(None), 5);
    assert_eq!(clamp_top_k(Some(0)), 1);
    assert_eq!(clamp_top_k(Some(7)), 7);
    assert_eq!(clamp_top_k(Some(500)), 20);
}

#[tokio::test]
async fn hybrid_hits_carry_their_citation_and_both_rankings_count() {
    for (store, dir) in stores().await {
        let kb = store.create_kb("u1", "Physics").await.unwrap();
        let chunk_ids =
            ready_document(&store, &kb, "lecture-3.pdf", &[OTHER, ENGLISH, CHINESE]).await;
        let embedder = HashEmbedder::new("hash-64", 64);
        assert_eq!(embed_missing(&store, &kb, &embedder).await.unwrap(), 3);
        assert_eq!(embed_missing(&store, &kb, &embedder).await.unwrap(), 0);
        let kb = store.kb(&kb.id, "u1").await.unwrap().unwrap();
        assert_eq!(kb.embedding.as_ref().map(|e| e.dimension), Some(64));

        let indexes = Arc::new(KbIndexes::new(dir.path().join("kb-index")));
        let embedder: Arc<dyn Embedder> = Arc::new(embedder);
        let hybrid = Retriever::new(store.clone(), indexes.clone(), Some(embedder));
        let found = hybrid
            .retrieve(
                std::slice::from_ref(&kb),
                "how fast does the function change",
                None,
            )
            .await
            .unwrap();
        assert!(found.needs_reindex.is_empty());
        assert!(found.embedding_error.is_none());
        let top = &found.hits[0];
        assert_eq!(top.chunk_id, chunk_ids[1]);
        assert_eq!(top.kb, kb.id);
        assert_eq!(top.title, "lecture-3.pdf");
        assert_eq!(top.page, Some(2));
        assert_eq!(top.heading_path, ["Notes"]);
        assert_eq!(top.text, ENGLISH);
        // First in both rankings: both reciprocal ranks are in its score.
        assert!((top.score - 2.0 / (RRF_K + 1.0)).abs() < 1e-12, "{top:?}");

        // BM25 alone scores the same passage with one ranking's share.
        let bm25_only = Retriever::new(store.clone(), indexes, None);
        let alone = bm25_only
            .retrieve(
                std::slice::from_ref(&kb),
                "how fast does the function change",
                Some(1),
            )
            .await
            .unwrap();
        assert_eq!(alone.hits.len(), 1);
        assert_eq!(alone.hits[0].chunk_id, chunk_ids[1]);
        assert!((alone.hits[0].score - 1.0 / (RRF_K + 1.0)).abs() < 1e-12);
    }
}

#[tokio::test]
async fn top_k_bounds_the_hits() {
    let (store, dir) = stores().await.remove(0);
    let kb = store.create_kb("u1", "Many").await.unwrap();
    let texts: Vec<String> = (0..30).map(|i| format!("integral number {i}")).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    ready_document(&store, &kb, "many.txt", &refs).await;
    let retriever = Retriever::new(store, Arc::new(KbIndexes::new(dir.path().join("i"))), None);
    let kbs = [kb];
    assert_eq!(
        retriever
            .retrieve(&kbs, "integral", None)
            .await
            .unwrap()
            .hits
            .len(),
        5
    );
    assert_eq!(
        retriever
            .retrieve(&kbs, "integral", Some(99))
            .await
            .unwrap()
            .hits
            .len(),
        20
    );
    assert_eq!(
        retriever
            .retrieve(&kbs, "integral", Some(0))
            .await
            .unwrap()
            .hits
            .len(),
        1
    );
}

#[tokio::test]
async fn another_embedding_model_reports_needs_reindex_and_falls_back_to_bm25() {
    let (store, dir) = stores().await.remove(0);
    let kb = store.create_kb("u1", "Old vectors").await.unwrap();
    let chunk_ids = ready_document(&store, &kb, "a.txt", &[ENGLISH, OTHER]).await;
    embed_missing(&store, &kb, &HashEmbedder::new("old-model", 16))
        .await
        .unwrap();
    let kb = store.kb(&kb.id, "u1").await.unwrap().unwrap();
    let indexes = Arc::new(KbIndexes::new(dir.path().join("kb-index")));
    let kbs = [kb.clone()];

    for embedder in [
        HashEmbedder::new("new-model", 16),
        HashEmbedder::new("old-model", 32),
    ] {
        let embedder: Arc<dyn Embedder> = Arc::new(embedder);
        let retriever = Retriever::new(store.clone(), indexes.clone(), Some(embedder));
        let found = retriever.retrieve(&kbs, "derivative", None).await.unwrap();
        assert_eq!(found.needs_reindex, std::slice::from_ref(&kb.id));
        assert_eq!(found.hits.len(), 1);
        assert_eq!(found.hits[0].chunk_id, chunk_ids[0]);
    }

    // Re-embedding with the new model clears the old vectors and records the new model.
    let new = HashEmbedder::new("new-model", 16);
    assert_eq!(embed_missing(&store, &kb, &new).await.unwrap(), 2);
    let kb = store.kb(&kb.id, "u1").await.unwrap().unwrap();
    let retriever = Retriever::new(store.clone(), indexes, Some(Arc::new(new)));
    let found = retriever.retrieve(&[kb], "derivative", None).await.unwrap();
    assert!(found.needs_reindex.is_empty());
}

#[tokio::test]
async fn several_knowledge_bases_are_searched_together_and_each_hit_names_its_own() {
    let (store, dir) = stores().await.remove(0);
    let physics = store.create_kb("u1", "Physics").await.unwrap();
    let biology = store.create_kb("u1", "Biology").await.unwrap();
    let p = ready_document(&store, &physics, "forces.txt", &[CHINESE, ENGLISH]).await;
    let b = ready_document(&store, &biology, "plants.txt", &[OTHER]).await;
    let retriever = Retriever::new(store, Arc::new(KbIndexes::new(dir.path().join("i"))), None);
    let found = retriever
        .retrieve(
            &[physics.clone(), biology.clone()],
            "derivative photosynthesis",
            None,
        )
        .await
        .unwrap();
    let got: Vec<(&str, &str, &str)> = found
        .hits
        .iter()
        .map(|h| (h.kb.as_str(), h.chunk_id.as_str(), h.title.as_str()))
        .collect();
    // Each KB's best is first in its own ranking; the earlier KB's wins the tie.
    assert_eq!(
        got,
        [
            (physics.id.as_str(), p[1].as_str(), "forces.txt"),
            (biology.id.as_str(), b[0].as_str(), "plants.txt"),
        ]
    );
}

#[tokio::test]
async fn a_failing_embeddings_endpoint_leaves_bm25_answering() {
    use crate::embed::{Reply, serve};
    use deepsolve_kb::retrieve::{EmbedError, OpenAiEmbedder};

    let (store, dir) = stores().await.remove(0);
    let kb = store.create_kb("u1", "Calculus").await.unwrap();
    let ids = ready_document(&store, &kb, "calc.txt", &[ENGLISH, OTHER]).await;
    let (_fx, config) = serve(vec![Reply::Status(400, "no such model")]).await;
    let client = OpenAiEmbedder::new(config).unwrap();
    // The KB's vectors come from a working endpoint under the same model name, so the
    // failing one is asked for the query's vector.
    let (_fx2, config2) = serve(Vec::new()).await;
    embed_missing(&store, &kb, &OpenAiEmbedder::new(config2).unwrap())
        .await
        .unwrap();
    let kb = store.kb(&kb.id, "u1").await.unwrap().unwrap();
    let retriever = Retriever::new(
        store,
        Arc::new(KbIndexes::new(dir.path().join("i"))),
        Some(Arc::new(client)),
    );
    let found = retriever
        .retrieve(&[kb], "derivatives", None)
        .await
        .unwrap();
    assert!(
        matches!(
            found.embedding_error,
            Some(EmbedError::Rejected { status: 400, .. })
        ),
        "{:?}",
        found.embedding_error
    );
    assert_eq!(found.hits.len(), 1);
    assert_eq!(found.hits[0].chunk_id, ids[0]);
}

#[tokio::test]
async fn cached_vectors_answer_as_the_store_does_and_follow_a_new_embedding() {
    use deepsolve_store::KbEmbedding;

    for (store, dir) in stores().await {
        let kb = store.create_kb("u1", "Cached").await.unwrap();
        let chunk_ids = ready_document(&store, &kb, "a.txt", &[ENGLISH, OTHER, CHINESE]).await;
        let hasher = HashEmbedder::new("hash-64", 64);
        embed_missing(&store, &kb, &hasher).await.unwrap();
        let kb = store.kb(&kb.id, "u1").await.unwrap().unwrap();
        let indexes = Arc::new(KbIndexes::new(dir.path().join("i")));
        let embedder: Arc<dyn Embedder> = Arc::new(HashEmbedder::new("hash-64", 64));
        let cached = Retriever::new(store.clone(), indexes.clone(), Some(embedder.clone()));
        // A clone shares the cache: what one fills, the other reads.
        let clone = cached.clone();
        let uncached =
            Retriever::new(store.clone(), indexes, Some(embedder)).with_vector_cache_bytes(0);
        let kbs = [kb.clone()];
        let query = "how fast does the function change";

        let first = cached.retrieve(&kbs, query, None).await.unwrap();
        assert!(clone.vector_cache().bytes() > 0, "the first query fills it");
        let again = clone.retrieve(&kbs, query, None).await.unwrap();
        let direct = uncached.retrieve(&kbs, query, None).await.unwrap();
        assert_eq!(uncached.vector_cache().bytes(), 0);
        assert_eq!(first.hits, direct.hits);
        assert_eq!(again.hits, direct.hits);
        // The photosynthesis chunk shares no word with the query: at best second by cosine.
        let other_score = |hits: &[deepsolve_kb::retrieve::Hit]| {
            hits.iter()
                .find(|h| h.chunk_id == chunk_ids[1])
                .map_or(0.0, |h| h.score)
        };
        assert!(
            other_score(&first.hits) < 1.0 / (RRF_K + 1.5),
            "{:?}",
            first.hits
        );

        // The photosynthesis chunk is given the query's own vector: BM25 still does not find
        // it, so only a reread of the vectors can rank it first by cosine.
        store
            .set_kb_chunk_embeddings(
                &kb.id,
                "u1",
                &[KbEmbedding {
                    chunk_id: chunk_ids[1].clone(),
                    vector: hasher.vector(query),
                }],
            )
            .await
            .unwrap();
        let after = clone.retrieve(&kbs, query, None).await.unwrap();
        let direct = uncached.retrieve(&kbs, query, None).await.unwrap();
        assert_eq!(after.hits, direct.hits);
        assert!(
            (other_score(&after.hits) - 1.0 / (RRF_K + 1.0)).abs() < 1e-12,
            "{:?}",
            after.hits
        );
    }
}
