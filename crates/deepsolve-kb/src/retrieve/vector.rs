//! Brute-force cosine similarity over a KB's stored vectors: at the sizes a student's
//! material reaches (≤ 200 000 chunks) a scan is fast enough and needs no second index to
//! keep in step with the store. Reading and decoding the vectors is what costs (megabytes
//! per query), so each KB's are kept decoded in memory by [`VectorCache`], stamped with the
//! KB generation they were read at, and read again only when the generation moves.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Mutex};

use deepsolve_store::{KnowledgeBase, Store, StoreError};

/// Vectors read from the store per page.
const PAGE: u32 = 2_000;

/// What all KBs' cached vectors may take together by default: a replica serving many users
/// keeps its hottest KBs and reads the rest from the store.
pub const DEFAULT_VECTOR_CACHE_BYTES: usize = 256 * 1024 * 1024;

/// One KB's searchable vectors, decoded, with their norms, as of `generation`.
struct KbVectors {
    generation: u64,
    dimension: usize,
    ids: Vec<String>,
    /// `ids.len() * dimension` components, row by row.
    components: Vec<f32>,
    norms: Vec<f32>,
}

impl KbVectors {
    /// Roughly what it holds in memory, for the budget.
    fn bytes(&self) -> usize {
        let ids: usize = self
            .ids
            .iter()
            .map(|s| s.len() + std::mem::size_of::<String>())
            .sum();
        ids + (self.components.len() + self.norms.len()) * std::mem::size_of::<f32>()
    }

    fn nearest(&self, query: &[f32], query_norm: f32, limit: usize) -> Vec<(String, f32)> {
        let mut best = TopN::new(limit);
        if query.len() != self.dimension || self.dimension == 0 {
            return Vec::new();
        }
        for (i, row) in self.components.chunks_exact(self.dimension).enumerate() {
            let n = self.norms[i];
            if n == 0.0 {
                continue;
            }
            let dot: f32 = query.iter().zip(row).map(|(a, b)| a * b).sum();
            best.offer(dot / (query_norm * n), &self.ids[i]);
        }
        best.into_sorted()
    }
}

/// Decoded vectors of recently searched KBs, shared by every clone of a `Retriever`. Bounded
/// by a byte budget: the least recently used KBs are dropped first, and a KB bigger than the
/// whole budget is never kept (it is scanned from the store as before).
pub struct VectorCache {
    budget: usize,
    inner: Mutex<CacheInner>,
}

#[derive(Default)]
struct CacheInner {
    entries: HashMap<String, CacheEntry>,
    bytes: usize,
    /// A counter, not a clock: only the order of uses matters.
    tick: u64,
}

struct CacheEntry {
    vectors: Arc<KbVectors>,
    last_used: u64,
}

impl VectorCache {
    pub fn new(budget: usize) -> VectorCache {
        VectorCache {
            budget,
            inner: Mutex::new(CacheInner::default()),
        }
    }

    /// Bytes held now (for tests and diagnostics).
    pub fn bytes(&self) -> usize {
        self.inner.lock().map(|i| i.bytes).unwrap_or(0)
    }

    /// Drop a KB's vectors (after it was deleted).
    pub fn forget(&self, kb_id: &str) {
        if let Ok(mut inner) = self.inner.lock()
            && let Some(old) = inner.entries.remove(kb_id)
        {
            inner.bytes = inner.bytes.saturating_sub(old.vectors.bytes());
        }
    }

    fn get(&self, kb_id: &str, generation: u64) -> Option<Arc<KbVectors>> {
        let mut inner = self.inner.lock().ok()?;
        inner.tick += 1;
        let tick = inner.tick;
        let entry = inner.entries.get_mut(kb_id)?;
        if entry.vectors.generation != generation {
            return None;
        }
        entry.last_used = tick;
        Some(entry.vectors.clone())
    }

    fn put(&self, kb_id: &str, vectors: Arc<KbVectors>) {
        let size = vectors.bytes();
        // A poisoned lock only costs the caching; the caller already has its vectors.
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if let Some(old) = inner.entries.remove(kb_id) {
            inner.bytes = inner.bytes.saturating_sub(old.vectors.bytes());
        }
        if size > self.budget {
            return;
        }
        while inner.bytes + size > self.budget {
            let Some(victim) = inner
                .entries
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(id, _)| id.clone())
            else {
                break;
            };
            if let Some(old) = inner.entries.remove(&victim) {
                inner.bytes = inner.bytes.saturating_sub(old.vectors.bytes());
            }
        }
        inner.tick += 1;
        let last_used = inner.tick;
        inner.bytes += size;
        inner
            .entries
            .insert(kb_id.to_string(), CacheEntry { vectors, last_used });
    }
}

/// The `limit` chunks most similar to `query`, best first, with their cosine similarity:
/// from the cached vectors when they are of the KB's current generation, else from the store
/// (and cached for the next query).
pub(crate) async fn nearest(
    store: &Store,
    cache: &VectorCache,
    kb: &KnowledgeBase,
    query: &[f32],
    limit: usize,
) -> Result<Vec<(String, f32)>, StoreError> {
    let query_norm = norm(query);
    if query_norm == 0.0 || limit == 0 {
        return Ok(Vec::new());
    }
    // The caller's copy of the KB may be old; the store's generation says what is current.
    // It is read before the vectors, so a change committed meanwhile leaves the entry
    // stamped behind and it is read again next time, never the other way round.
    let Some(current) = store.kb(&kb.id, &kb.user_id).await? else {
        cache.forget(&kb.id);
        return Ok(Vec::new());
    };
    if let Some(vectors) = cache.get(&kb.id, current.generation) {
        return Ok(vectors.nearest(query, query_norm, limit));
    }
    let vectors = Arc::new(load(store, kb, current.generation).await?);
    let near = vectors.nearest(query, query_norm, limit);
    cache.put(&kb.id, vectors);
    Ok(near)
}

/// Every searchable vector of a KB, decoded. The store keeps one dimension per KB; a vector
/// of another length (only a corrupt row could have one) is left out, as a comparison with
/// it would be.
async fn load(store: &Store, kb: &KnowledgeBase, generation: u64) -> Result<KbVectors, StoreError> {
    let mut out = KbVectors {
        generation,
        dimension: 0,
        ids: Vec::new(),
        components: Vec::new(),
        norms: Vec::new(),
    };
    let mut after: Option<String> = None;
    loop {
        let page = store
            .kb_embeddings_page(&kb.id, &kb.user_id, after.as_deref(), PAGE)
            .await?;
        let Some(last) = page.last() else { break };
        after = Some(last.chunk_id.clone());
        for e in page {
            if out.ids.is_empty() {
                out.dimension = e.vector.len();
            }
            if e.vector.len() != out.dimension {
                continue;
            }
            out.norms.push(norm(&e.vector));
            out.components.extend_from_slice(&e.vector);
            out.ids.push(e.chunk_id);
        }
    }
    out.ids.shrink_to_fit();
    out.components.shrink_to_fit();
    out.norms.shrink_to_fit();
    Ok(out)
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

/// `None` for a vector of another dimension or of zero length: it cannot be compared.
pub fn cosine(query: &[f32], query_norm: f32, v: &[f32]) -> Option<f32> {
    if v.len() != query.len() {
        return None;
    }
    let n = norm(v);
    if n == 0.0 {
        return None;
    }
    let dot: f32 = query.iter().zip(v).map(|(a, b)| a * b).sum();
    Some(dot / (query_norm * n))
}

/// A min-heap of the best `limit` (score, id) pairs seen.
struct TopN<'a> {
    limit: usize,
    heap: BinaryHeap<Entry<'a>>,
}

struct Entry<'a>(f32, &'a str);

impl PartialEq for Entry<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Entry<'_> {}
impl PartialOrd for Entry<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry<'_> {
    // Reversed, so the heap's top is the worst kept entry; equal scores keep the earlier id.
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.total_cmp(&self.0).then_with(|| self.1.cmp(other.1))
    }
}

impl<'a> TopN<'a> {
    fn new(limit: usize) -> TopN<'a> {
        TopN {
            limit,
            heap: BinaryHeap::with_capacity(limit + 1),
        }
    }

    fn offer(&mut self, score: f32, id: &'a str) {
        self.heap.push(Entry(score, id));
        if self.heap.len() > self.limit {
            self.heap.pop();
        }
    }

    fn into_sorted(self) -> Vec<(String, f32)> {
        // Ascending by `Ord` is best first (the order is reversed).
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|Entry(score, id)| (id.to_string(), score))
            .collect()
    }
}
