//! Brute-force cosine similarity over a KB's stored vectors: at the sizes a student's
//! material reaches (≤ 200 000 chunks) a scan is fast enough and needs no second index to
//! keep in step with the store.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use deepsolve_store::{KnowledgeBase, Store, StoreError};

/// Vectors read from the store per page.
const PAGE: u32 = 2_000;

/// The `limit` chunks most similar to `query`, best first, with their cosine similarity.
pub(crate) async fn nearest(
    store: &Store,
    kb: &KnowledgeBase,
    query: &[f32],
    limit: usize,
) -> Result<Vec<(String, f32)>, StoreError> {
    let query_norm = norm(query);
    let mut best = TopN::new(limit);
    if query_norm == 0.0 || limit == 0 {
        return Ok(Vec::new());
    }
    let mut after: Option<String> = None;
    loop {
        let page = store
            .kb_embeddings_page(&kb.id, &kb.user_id, after.as_deref(), PAGE)
            .await?;
        let Some(last) = page.last() else { break };
        after = Some(last.chunk_id.clone());
        for e in page {
            if let Some(score) = cosine(query, query_norm, &e.vector) {
                best.offer(score, e.chunk_id);
            }
        }
    }
    Ok(best.into_sorted())
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
struct TopN {
    limit: usize,
    heap: BinaryHeap<Entry>,
}

struct Entry(f32, String);

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    // Reversed, so the heap's top is the worst kept entry; equal scores keep the earlier id.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .0
            .total_cmp(&self.0)
            .then_with(|| self.1.cmp(&other.1))
    }
}

impl TopN {
    fn new(limit: usize) -> TopN {
        TopN {
            limit,
            heap: BinaryHeap::with_capacity(limit + 1),
        }
    }

    fn offer(&mut self, score: f32, id: String) {
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
            .map(|Entry(score, id)| (id, score))
            .collect()
    }
}
