//! Retrieval: BM25 over a KB's full-text index and, when an embedding model is configured,
//! brute-force cosine over its stored vectors, fused by reciprocal rank into at most `top_k`
//! hits, each carrying what a citation needs.

mod embed;
mod fusion;
pub mod testing;
mod vector;

use std::collections::HashMap;
use std::sync::Arc;

use deepsolve_store::{EmbeddingSpec, KbChunk, KbEmbedding, KnowledgeBase, Store, StoreError};
use serde::Serialize;

pub use embed::{EmbedError, Embedder, OpenAiEmbedder, OpenAiEmbedderConfig};
pub use fusion::{RRF_K, reciprocal_rank_fusion};
pub use vector::{DEFAULT_VECTOR_CACHE_BYTES, VectorCache, cosine};

use crate::index::{IndexError, KbIndexes};

/// Hits returned when the caller does not say.
pub const DEFAULT_TOP_K: u32 = 5;
/// The most hits one retrieval returns: more passages than this crowd a model's context.
pub const MAX_TOP_K: u32 = 20;
/// Candidates taken from each ranking per hit wanted: fusion needs more than `top_k` from
/// each list to find the passages both agree on.
const CANDIDATES_PER_HIT: usize = 2;
/// Chunks embedded per store round trip by [`embed_missing`].
const EMBED_PAGE: u32 = 64;

/// `top_k` as asked, defaulted and clamped to 1–20.
pub fn clamp_top_k(top_k: Option<u32>) -> usize {
    top_k.unwrap_or(DEFAULT_TOP_K).clamp(1, MAX_TOP_K) as usize
}

/// One passage found, with what a citation shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    /// The knowledge base's id.
    pub kb: String,
    pub document_id: String,
    /// The document's name.
    pub title: String,
    pub page: Option<u32>,
    pub heading_path: Vec<String>,
    pub chunk_id: String,
    /// The fused reciprocal-rank score (higher is better).
    pub score: f64,
    pub text: String,
}

/// The hits, best first, and what limited them.
#[derive(Debug)]
pub struct Retrieval {
    pub hits: Vec<Hit>,
    /// KBs whose vectors were made by another model or dimension than the configured
    /// embedder (or never made): searched by BM25 only until re-embedded.
    pub needs_reindex: Vec<String>,
    /// Why vector search was skipped although an embedder is configured (BM25 still ran).
    pub embedding_error: Option<EmbedError>,
}

#[derive(Debug, thiserror::Error)]
pub enum RetrieveError {
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error("reading the knowledge base: {0}")]
    Store(#[from] StoreError),
    #[error(transparent)]
    Embed(#[from] EmbedError),
}

/// Does a KB's recorded embedding differ from what the embedder makes? `dimension` is the
/// embedder's, when known (from a query vector).
pub fn needs_reindex(kb: &KnowledgeBase, model: &str, dimension: Option<usize>) -> bool {
    match &kb.embedding {
        None => true,
        Some(spec) => {
            spec.model != model || dimension.is_some_and(|d| d != spec.dimension as usize)
        }
    }
}

/// Searches knowledge bases; cheap to clone (clones share the vector cache).
#[derive(Clone)]
pub struct Retriever {
    store: Store,
    indexes: Arc<KbIndexes>,
    embedder: Option<Arc<dyn Embedder>>,
    vectors: Arc<VectorCache>,
}

impl Retriever {
    pub fn new(
        store: Store,
        indexes: Arc<KbIndexes>,
        embedder: Option<Arc<dyn Embedder>>,
    ) -> Retriever {
        Retriever {
            store,
            indexes,
            embedder,
            vectors: Arc::new(VectorCache::new(DEFAULT_VECTOR_CACHE_BYTES)),
        }
    }

    /// The same, with its decoded vectors bounded by `bytes` instead of the default (0 keeps
    /// none: every query reads them from the store).
    pub fn with_vector_cache_bytes(mut self, bytes: usize) -> Retriever {
        self.vectors = Arc::new(VectorCache::new(bytes));
        self
    }

    /// The decoded vectors kept for this retriever and its clones.
    pub fn vector_cache(&self) -> &VectorCache {
        &self.vectors
    }

    /// The best `top_k` (default 5, clamped 1–20) passages of `kbs` for `query`.
    pub async fn retrieve(
        &self,
        kbs: &[KnowledgeBase],
        query: &str,
        top_k: Option<u32>,
    ) -> Result<Retrieval, RetrieveError> {
        let top_k = clamp_top_k(top_k);
        let candidates = top_k * CANDIDATES_PER_HIT;
        let mut rankings: Vec<Vec<String>> = Vec::new();
        let mut owner: HashMap<String, usize> = HashMap::new();
        for (i, kb) in kbs.iter().enumerate() {
            let index = self.indexes.ensure_current(&self.store, kb).await?;
            let bm = index.search_async(query, candidates).await?;
            for hit in &bm {
                owner.insert(hit.chunk_id.clone(), i);
            }
            rankings.push(bm.into_iter().map(|h| h.chunk_id).collect());
        }
        let vectors = self.vector_rankings(kbs, query, candidates).await?;
        for (i, ranking) in vectors.rankings {
            for id in &ranking {
                owner.insert(id.clone(), i);
            }
            rankings.push(ranking);
        }
        let fused = reciprocal_rank_fusion(&rankings, RRF_K);
        let hits = self.hits(kbs, &owner, fused, top_k).await?;
        Ok(Retrieval {
            hits,
            needs_reindex: vectors.needs_reindex,
            embedding_error: vectors.error,
        })
    }

    /// Cosine rankings of the KBs whose vectors match the embedder.
    async fn vector_rankings(
        &self,
        kbs: &[KnowledgeBase],
        query: &str,
        candidates: usize,
    ) -> Result<VectorRankings, RetrieveError> {
        let mut out = VectorRankings::default();
        let Some(embedder) = &self.embedder else {
            return Ok(out);
        };
        let model = embedder.model();
        let comparable: Vec<usize> = (0..kbs.len())
            .filter(|&i| !needs_reindex(&kbs[i], model, None))
            .collect();
        let mut query_vector = None;
        if !comparable.is_empty() {
            match embedder.embed(&[query.to_string()]).await {
                Ok(mut v) => query_vector = v.pop(),
                Err(e) => out.error = Some(e),
            }
        }
        let dimension = query_vector.as_ref().map(Vec::len);
        for (i, kb) in kbs.iter().enumerate() {
            if needs_reindex(kb, model, dimension) {
                out.needs_reindex.push(kb.id.clone());
                continue;
            }
            if let Some(q) = &query_vector {
                let near = vector::nearest(&self.store, &self.vectors, kb, q, candidates).await?;
                out.rankings
                    .push((i, near.into_iter().map(|(id, _)| id).collect()));
            }
        }
        Ok(out)
    }

    /// The fused ids' chunks, as hits, best first.
    async fn hits(
        &self,
        kbs: &[KnowledgeBase],
        owner: &HashMap<String, usize>,
        fused: Vec<(String, f64)>,
        top_k: usize,
    ) -> Result<Vec<Hit>, RetrieveError> {
        let wanted: Vec<(String, f64)> = fused.into_iter().take(top_k).collect();
        let mut by_kb: HashMap<usize, Vec<String>> = HashMap::new();
        for (id, _) in &wanted {
            if let Some(&i) = owner.get(id) {
                by_kb.entry(i).or_default().push(id.clone());
            }
        }
        let mut chunks: HashMap<String, KbChunk> = HashMap::new();
        for (i, ids) in by_kb {
            let kb = &kbs[i];
            for c in self
                .store
                .kb_chunks_by_ids(&kb.id, &kb.user_id, &ids)
                .await?
            {
                chunks.insert(c.id.clone(), c);
            }
        }
        // A chunk deleted (or its document un-readied) since the index was read is left out.
        Ok(wanted
            .into_iter()
            .filter_map(|(id, score)| chunks.remove(&id).map(|c| hit_of(c, score)))
            .collect())
    }
}

#[derive(Default)]
struct VectorRankings {
    rankings: Vec<(usize, Vec<String>)>,
    needs_reindex: Vec<String>,
    error: Option<EmbedError>,
}

fn hit_of(c: KbChunk, score: f64) -> Hit {
    Hit {
        kb: c.kb_id,
        document_id: c.document_id,
        title: c.document_name,
        page: c.page,
        heading_path: c.heading_path,
        chunk_id: c.id,
        score,
        text: c.text,
    }
}

/// Embed every chunk of `kb` that has no vector yet. The embedder's model and dimension
/// (from one probe) are recorded on the KB first; when they differ from the recorded ones
/// the old vectors are cleared with it, so every chunk is re-embedded. Returns how many
/// chunks were embedded.
pub async fn embed_missing(
    store: &Store,
    kb: &KnowledgeBase,
    embedder: &dyn Embedder,
) -> Result<usize, RetrieveError> {
    let spec = probe(embedder).await?;
    let current = store
        .kb(&kb.id, &kb.user_id)
        .await?
        .ok_or_else(|| IndexError::NotFound(kb.id.clone()))?;
    if current.embedding.as_ref() != Some(&spec) {
        store
            .set_kb_embedding_model(&kb.id, &kb.user_id, Some(&spec))
            .await?;
    }
    let mut done = 0;
    loop {
        let page = store
            .kb_chunks_missing_embedding(&kb.id, &kb.user_id, EMBED_PAGE)
            .await?;
        if page.is_empty() {
            return Ok(done);
        }
        let texts: Vec<String> = page.iter().map(|c| c.text.clone()).collect();
        let vectors = embedder.embed(&texts).await?;
        let whole = vectors.len() == texts.len()
            && vectors.iter().all(|v| v.len() == spec.dimension as usize);
        if !whole {
            return Err(EmbedError::Malformed(format!(
                "{} vectors for {} texts, or not all of dimension {}",
                vectors.len(),
                texts.len(),
                spec.dimension
            ))
            .into());
        }
        let embeddings: Vec<KbEmbedding> = page
            .into_iter()
            .zip(vectors)
            .map(|(c, vector)| KbEmbedding {
                chunk_id: c.id,
                vector,
            })
            .collect();
        store
            .set_kb_chunk_embeddings(&kb.id, &kb.user_id, &embeddings)
            .await?;
        done += embeddings.len();
    }
}

/// The model and dimension the embedder makes now (a server's model may change under the
/// same name's configuration, so the dimension is measured, not configured).
async fn probe(embedder: &dyn Embedder) -> Result<EmbeddingSpec, RetrieveError> {
    let vector = embedder
        .embed(&["dimension probe".to_string()])
        .await?
        .pop()
        .unwrap_or_default();
    let dimension = u32::try_from(vector.len()).unwrap_or(0);
    if dimension == 0 {
        return Err(EmbedError::Malformed("the probe came back without a vector".into()).into());
    }
    Ok(EmbeddingSpec {
        model: embedder.model().to_string(),
        dimension,
    })
}

/// The terms the index would make of a text (for the test embedder).
fn tokenizer_terms(text: &str) -> Vec<String> {
    crate::index::terms(text)
}
