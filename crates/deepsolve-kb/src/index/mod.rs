//! The full-text index of a knowledge base: a per-replica cache of the store's chunks, one
//! tantivy index per KB under `<root>/<kb_id>/`. Each index records (in its commit payload)
//! the KB generation it was built from; [`KbIndexes::ensure_current`] rebuilds it from the
//! store when it is missing, unreadable, or of another generation, so every replica can serve
//! every KB and none has to be told about changes.

mod build;
mod search;
mod tokenizer;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use deepsolve_store::{KnowledgeBase, NewKbChunk, Store, StoreError};
use tantivy::schema::{
    Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};

pub use search::BmHit;
pub(crate) use tokenizer::terms;

/// A chunk as the ingest hands it over, before it is stored (the store gives it an id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub document_id: String,
    /// Its position in the document (0-based).
    pub ordinal: u32,
    /// The page it starts on (1-based), when the format has pages.
    pub page: Option<u32>,
    /// The headings it sits under, outermost first.
    pub heading_path: Vec<String>,
    pub text: String,
}

impl From<Chunk> for NewKbChunk {
    fn from(c: Chunk) -> NewKbChunk {
        NewKbChunk {
            ordinal: c.ordinal,
            page: c.page,
            heading_path: c.heading_path,
            text: c.text,
        }
    }
}

/// Why an index could not be opened, built or searched.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("knowledge base '{0}' not found")]
    NotFound(String),
    #[error("'{0}' is not a valid knowledge base id")]
    InvalidId(String),
    #[error("reading the knowledge base from the store: {0}")]
    Store(#[from] StoreError),
    #[error("full-text index: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    #[error("index directory: {0}")]
    Io(#[from] std::io::Error),
    #[error("index task failed: {0}")]
    Task(String),
}

/// Bumped when the schema or the analyzer changes, so indexes built by an older build are
/// rebuilt rather than searched with mismatched terms.
const FORMAT: u32 = 1;

/// Indexes kept open at once: each holds file handles and maps, and a replica may serve
/// thousands of KBs of which few are searched at a time.
const MAX_OPEN: usize = 256;

/// The fields of every KB index.
#[derive(Clone, Copy)]
pub(crate) struct Fields {
    chunk_id: Field,
    text: Field,
    /// Document name and heading path: a passage under "Integration by parts" is about it.
    context: Field,
}

pub(crate) fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let analyzed = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(tokenizer::ANALYZER)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let fields = Fields {
        chunk_id: builder.add_text_field("chunk_id", STRING | STORED),
        text: builder.add_text_field("text", analyzed.clone()),
        context: builder.add_text_field("context", analyzed),
    };
    (builder.build(), fields)
}

/// An open, current index of one KB; cheap to clone, searched with [`KbIndex::search`].
#[derive(Clone)]
pub struct KbIndex {
    inner: Arc<search::Searchable>,
}

impl KbIndex {
    /// The KB generation this index was built from.
    pub fn generation(&self) -> u64 {
        self.inner.generation
    }
}

/// The per-replica indexes of every KB, under one directory.
pub struct KbIndexes {
    root: PathBuf,
    /// Open indexes by KB id, so a search does not reopen one that is still current.
    open: Mutex<HashMap<String, KbIndex>>,
    /// One rebuild at a time per KB: a second caller waits and then finds it current.
    building: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl KbIndexes {
    pub fn new(root: impl Into<PathBuf>) -> KbIndexes {
        KbIndexes {
            root: root.into(),
            open: Mutex::new(HashMap::new()),
            building: Mutex::new(HashMap::new()),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The index of `kb` at the KB's current generation in the store: the open one, the one
    /// on disk, or a fresh rebuild from the store's chunks.
    pub async fn ensure_current(
        &self,
        store: &Store,
        kb: &KnowledgeBase,
    ) -> Result<KbIndex, IndexError> {
        let dir = self.dir_of(&kb.id)?;
        let generation = current_generation(store, kb).await?;
        if let Some(index) = self.cached(&kb.id, generation) {
            return Ok(index);
        }
        let lock = self.build_lock(&kb.id);
        let _building = lock.lock().await;
        let on_disk = {
            let dir = dir.clone();
            spawn_blocking(move || search::Searchable::open(&dir)).await?
        };
        let index = match on_disk {
            Some(s) if s.generation == generation => KbIndex { inner: Arc::new(s) },
            _ => {
                let generation = build::rebuild(store, kb, &self.root, &dir).await?;
                let opened = spawn_blocking(move || search::Searchable::open(&dir)).await?;
                let searchable = opened
                    .filter(|s| s.generation == generation)
                    .ok_or_else(|| IndexError::Task("the rebuilt index did not open".into()))?;
                KbIndex {
                    inner: Arc::new(searchable),
                }
            }
        };
        self.remember(&kb.id, &index);
        Ok(index)
    }

    /// Forget a KB's index (after the KB was deleted): the open handle and the directory.
    pub async fn remove(&self, kb_id: &str) -> Result<(), IndexError> {
        let dir = self.dir_of(kb_id)?;
        if let Ok(mut open) = self.open.lock() {
            open.remove(kb_id);
        }
        match tokio::fs::remove_dir_all(&dir).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    fn dir_of(&self, kb_id: &str) -> Result<PathBuf, IndexError> {
        // The id becomes a path component: only the store's own id alphabet is accepted.
        let safe = !kb_id.is_empty()
            && kb_id.len() <= 64
            && kb_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if safe {
            Ok(self.root.join(kb_id))
        } else {
            Err(IndexError::InvalidId(kb_id.chars().take(64).collect()))
        }
    }

    fn cached(&self, kb_id: &str, generation: u64) -> Option<KbIndex> {
        let open = self.open.lock().ok()?;
        open.get(kb_id)
            .filter(|i| i.generation() == generation && i.inner.dir_exists())
            .cloned()
    }

    fn remember(&self, kb_id: &str, index: &KbIndex) {
        if let Ok(mut open) = self.open.lock() {
            if open.len() >= MAX_OPEN && !open.contains_key(kb_id) {
                // Any one will do: a dropped index is reopened from disk, not rebuilt.
                if let Some(victim) = open.keys().next().cloned() {
                    open.remove(&victim);
                }
            }
            open.insert(kb_id.to_string(), index.clone());
        }
    }

    fn build_lock(&self, kb_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        match self.building.lock() {
            Ok(mut locks) => locks.entry(kb_id.to_string()).or_default().clone(),
            // A poisoned map only means another thread panicked while inserting; a lock of
            // our own still serialises this caller's rebuild with itself.
            Err(_) => Arc::default(),
        }
    }
}

/// The KB's generation as the store has it now (the caller's copy may be old).
async fn current_generation(store: &Store, kb: &KnowledgeBase) -> Result<u64, IndexError> {
    store
        .kb(&kb.id, &kb.user_id)
        .await?
        .map(|k| k.generation)
        .ok_or_else(|| IndexError::NotFound(kb.id.clone()))
}

/// Run blocking tantivy work off the async threads.
pub(crate) async fn spawn_blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, IndexError> + Send + 'static,
) -> Result<T, IndexError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| IndexError::Task(e.to_string()))?
}
