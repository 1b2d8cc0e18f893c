//! An index opened for searching, and BM25 search over it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{IndexRecordOption, Value};
use tantivy::{Index, IndexReader, ReloadPolicy, TantivyDocument, Term};

use super::tokenizer::{ANALYZER, analyzer, terms};
use super::{FORMAT, Fields, IndexError, KbIndex, schema};

/// What an index records about itself in its commit payload.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Stamp {
    pub(crate) format: u32,
    pub(crate) generation: u64,
}

/// One BM25 match: a chunk id and its score (higher is better).
#[derive(Debug, Clone, PartialEq)]
pub struct BmHit {
    pub chunk_id: String,
    pub score: f32,
}

pub(crate) struct Searchable {
    pub(crate) generation: u64,
    dir: PathBuf,
    reader: IndexReader,
    fields: Fields,
}

impl Searchable {
    /// The index in `dir`, or `None` when there is none, it is unreadable, or it was built
    /// by another format: each of those means "rebuild", never "fail the search".
    pub(crate) fn open(dir: &Path) -> Result<Option<Searchable>, IndexError> {
        if !dir.join("meta.json").is_file() {
            return Ok(None);
        }
        match Searchable::try_open(dir) {
            Ok(found) => Ok(found),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "unreadable KB index; rebuilding");
                Ok(None)
            }
        }
    }

    fn try_open(dir: &Path) -> Result<Option<Searchable>, IndexError> {
        let index = Index::open_in_dir(dir)?;
        index.tokenizers().register(ANALYZER, analyzer());
        let stamp = index
            .load_metas()?
            .payload
            .and_then(|p| serde_json::from_str::<Stamp>(&p).ok());
        let Some(stamp) = stamp.filter(|s| s.format == FORMAT) else {
            return Ok(None);
        };
        let (expected, fields) = schema();
        if index.schema() != expected {
            return Ok(None);
        }
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(Some(Searchable {
            generation: stamp.generation,
            dir: dir.to_path_buf(),
            reader,
            fields,
        }))
    }

    /// Is the index still on disk? (Someone may have deleted the cache directory.)
    pub(crate) fn dir_exists(&self) -> bool {
        self.dir.join("meta.json").is_file()
    }
}

impl KbIndex {
    /// The best `limit` chunks for `query` by BM25 over the passage text and its context
    /// (document name, headings). The query is analysed like the passages and its terms
    /// are OR-ed: a student's question is words, not query syntax, so quotes or colons in it
    /// never fail the search. Blocking: call it off the async threads.
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<BmHit>, IndexError> {
        let s = &self.inner;
        let terms = terms(query);
        if terms.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for term in &terms {
            for field in [s.fields.text, s.fields.context] {
                let query = TermQuery::new(
                    Term::from_field_text(field, term),
                    IndexRecordOption::WithFreqs,
                );
                clauses.push((Occur::Should, Box::new(query)));
            }
        }
        let searcher = s.reader.searcher();
        let top = searcher.search(
            &BooleanQuery::new(clauses),
            &TopDocs::with_limit(limit).order_by_score(),
        )?;
        let mut hits = Vec::with_capacity(top.len());
        for (score, address) in top {
            let doc: TantivyDocument = searcher.doc(address)?;
            if let Some(id) = doc.get_first(s.fields.chunk_id).and_then(|v| v.as_str()) {
                hits.push(BmHit {
                    chunk_id: id.to_string(),
                    score,
                });
            }
        }
        Ok(hits)
    }

    /// [`KbIndex::search`] on a blocking thread.
    pub async fn search_async(&self, query: &str, limit: usize) -> Result<Vec<BmHit>, IndexError> {
        let index = self.clone();
        let query = query.to_string();
        super::spawn_blocking(move || index.search(&query, limit)).await
    }
}
