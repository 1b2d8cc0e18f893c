//! Reciprocal-rank fusion: each ranking gives an item 1 / (k + rank); the sums order the
//! result. Ranks, not scores, are fused, because BM25 scores and cosine similarities live on
//! scales that cannot be compared.

use std::collections::HashMap;

/// The usual constant: large enough that the first few ranks of one list do not drown
/// agreement between lists.
pub const RRF_K: f64 = 60.0;

/// Fuse rankings (best first, ranks counted from 1) into one, best first, with fused
/// scores. Ties go to the item ranked best in any list, then to the earlier list, so the
/// order is deterministic.
pub fn reciprocal_rank_fusion(rankings: &[Vec<String>], k: f64) -> Vec<(String, f64)> {
    // id -> (score, best rank, first list seen in)
    let mut fused: HashMap<&str, (f64, usize, usize)> = HashMap::new();
    for (list, ranking) in rankings.iter().enumerate() {
        for (i, id) in ranking.iter().enumerate() {
            let rank = i + 1;
            let entry = fused.entry(id.as_str()).or_insert((0.0, rank, list));
            entry.0 += 1.0 / (k + rank as f64);
            entry.1 = entry.1.min(rank);
        }
    }
    let mut out: Vec<(&str, (f64, usize, usize))> = fused.into_iter().collect();
    out.sort_by(|a, b| {
        b.1.0
            .total_cmp(&a.1.0)
            .then(a.1.1.cmp(&b.1.1))
            .then(a.1.2.cmp(&b.1.2))
            .then(a.0.cmp(b.0))
    });
    out.into_iter()
        .map(|(id, (score, _, _))| (id.to_string(), score))
        .collect()
}
