//! A deterministic embedder for tests: a hashed bag of words. Texts sharing words get
//! similar vectors, with no model and no network.

use async_trait::async_trait;

use super::tokenizer_terms;
use super::{EmbedError, Embedder};

pub struct HashEmbedder {
    model: String,
    dimension: usize,
}

impl HashEmbedder {
    pub fn new(model: impl Into<String>, dimension: usize) -> HashEmbedder {
        HashEmbedder {
            model: model.into(),
            dimension: dimension.max(1),
        }
    }

    /// The vector of one text: each analysed term adds 1 to the slot its FNV-1a hash picks.
    pub fn vector(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0; self.dimension];
        for term in tokenizer_terms(text) {
            let hash = term.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
            });
            let slot = (hash % self.dimension as u64) as usize;
            v[slot] += 1.0;
        }
        v
    }
}

#[async_trait]
impl Embedder for HashEmbedder {
    fn model(&self) -> &str {
        &self.model
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| self.vector(t)).collect())
    }
}
