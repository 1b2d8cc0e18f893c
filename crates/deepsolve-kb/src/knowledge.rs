//! [`Knowledge`]: the knowledge-base service the tools and the interfaces use — search, read a
//! document's text, resolve names, a turn's attachments, what a turn may read, and the
//! ingestor. Cheap to clone.

use std::path::PathBuf;
use std::sync::Arc;

use deepsolve_core::{Material, MaterialDocument, MaterialKb};
use deepsolve_store::{KbDocumentStatus, KnowledgeBase, Store, StoreError};

use crate::extract;
use crate::index::KbIndexes;
use crate::ingest::{Ingestor, KbLimits};
use crate::retrieve::{Embedder, Retrieval, RetrieveError, Retriever};

/// Why a knowledge-base request failed, in words for the person (or model) who made it.
#[derive(Debug, thiserror::Error)]
pub enum KbError {
    #[error("unknown knowledge base '{name}' (yours: {})", or_none(available))]
    UnknownKb {
        name: String,
        /// The names of the user's knowledge bases.
        available: Vec<String>,
    },
    #[error("unknown document '{0}'")]
    UnknownDocument(String),
    #[error(transparent)]
    Retrieve(#[from] RetrieveError),
    #[error("reading the knowledge base: {0}")]
    Store(#[from] StoreError),
}

fn or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

/// A window of a document's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceText {
    /// The document's name.
    pub name: String,
    pub text: String,
    /// Where `text` starts in the document's text, in characters.
    pub offset: usize,
    /// Where the next window starts; `None` when `text` reaches the end.
    pub next_offset: Option<usize>,
    pub total_chars: usize,
    /// The page `offset` is on, where the format has pages.
    pub page: Option<u32>,
}

/// The knowledge-base service.
#[derive(Clone)]
pub struct Knowledge {
    store: Store,
    indexes: Arc<KbIndexes>,
    retriever: Retriever,
    ingestor: Arc<Ingestor>,
    embedder: Option<Arc<dyn Embedder>>,
}

impl Knowledge {
    /// Over `store`, with this replica's full-text indexes under `index_root` and, when given,
    /// an embedder for hybrid search; the ingestor has the default limits
    /// ([`Knowledge::with_limits`] to change them).
    pub fn new(
        store: Store,
        index_root: PathBuf,
        embedder: Option<Arc<dyn Embedder>>,
    ) -> Knowledge {
        let indexes = Arc::new(KbIndexes::new(index_root));
        let retriever = Retriever::new(store.clone(), indexes.clone(), embedder.clone());
        let ingestor = Arc::new(Ingestor::new(
            store.clone(),
            extract::Limits::default(),
            KbLimits::default(),
            embedder.clone(),
        ));
        Knowledge {
            store,
            indexes,
            retriever,
            ingestor,
            embedder,
        }
    }

    /// The same service with an ingestor of these limits (`extract.pdf_child` is how PDFs
    /// are parsed: the `deepsolve` binary passes itself).
    pub fn with_limits(mut self, extract: extract::Limits, limits: KbLimits) -> Knowledge {
        self.ingestor = Arc::new(Ingestor::new(
            self.store.clone(),
            extract,
            limits,
            self.embedder.clone(),
        ));
        self
    }

    pub fn ingestor(&self) -> &Ingestor {
        &self.ingestor
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The per-replica indexes (to forget a deleted KB's: `indexes().remove(id)`).
    pub fn indexes(&self) -> &KbIndexes {
        &self.indexes
    }

    /// The embedding model, when one is configured.
    pub fn embedding_model(&self) -> Option<&str> {
        self.embedder.as_deref().map(Embedder::model)
    }

    /// The best `top_k` (default 5, 1–20) passages for `query` in the KBs `kb_ids` of this
    /// user (an unknown id is [`KbError::UnknownKb`]).
    pub async fn search(
        &self,
        user_id: &str,
        kb_ids: &[String],
        query: &str,
        top_k: Option<u32>,
    ) -> Result<Retrieval, KbError> {
        let mut kbs = Vec::with_capacity(kb_ids.len());
        for id in kb_ids {
            match self.store.kb(id, user_id).await? {
                Some(kb) => kbs.push(kb),
                None => return Err(self.unknown_kb(user_id, id).await),
            }
        }
        Ok(self.retriever.retrieve(&kbs, query, top_k).await?)
    }

    /// Up to `max_chars` characters (at least 1) of a document's text from `offset`.
    pub async fn read(
        &self,
        user_id: &str,
        document_id: &str,
        offset: usize,
        max_chars: usize,
    ) -> Result<SourceText, KbError> {
        let doc = self
            .store
            .kb_document(document_id, user_id)
            .await?
            .ok_or_else(|| KbError::UnknownDocument(document_id.to_string()))?;
        let total = to_usize(self.store.kb_text_chars(&doc.id, user_id).await?);
        let start = offset.min(total);
        let end = start.saturating_add(max_chars.max(1)).min(total);
        let pages = self
            .store
            .kb_pages_between(&doc.id, user_id, start as u64, end as u64)
            .await?;
        let mut text = String::new();
        for p in &pages {
            let from = start.saturating_sub(to_usize(p.start_char));
            let upto = end.saturating_sub(to_usize(p.start_char));
            text.extend(p.text.chars().skip(from).take(upto.saturating_sub(from)));
        }
        Ok(SourceText {
            name: doc.name,
            text,
            offset: start,
            next_offset: (end < total).then_some(end),
            total_chars: total,
            page: pages.first().and_then(|p| p.page),
        })
    }

    /// The user's (visible) KBs named or with the ids in `names_or_ids`, in that order.
    pub async fn resolve_kbs(
        &self,
        user_id: &str,
        names_or_ids: &[String],
    ) -> Result<Vec<KnowledgeBase>, KbError> {
        let all = self.store.list_kbs(user_id).await?;
        let mut found: Vec<KnowledgeBase> = Vec::new();
        for wanted in names_or_ids {
            let wanted = wanted.trim();
            let kb = all
                .iter()
                .find(|k| k.id == wanted)
                .or_else(|| all.iter().find(|k| k.name == wanted))
                .or_else(|| all.iter().find(|k| k.name.eq_ignore_ascii_case(wanted)));
            match kb {
                Some(kb) if !found.iter().any(|f| f.id == kb.id) => found.push(kb.clone()),
                Some(_) => {}
                None => {
                    return Err(KbError::UnknownKb {
                        name: wanted.to_string(),
                        available: all.iter().map(|k| k.name.clone()).collect(),
                    });
                }
            }
        }
        Ok(found)
    }

    /// The turn's hidden KB of attachments, created on first use.
    pub async fn attachments_kb(
        &self,
        user_id: &str,
        turn_id: &str,
    ) -> Result<KnowledgeBase, KbError> {
        Ok(self.store.turn_attachments_kb(user_id, turn_id).await?)
    }

    /// What a turn over `kbs` (and its `attachments`) may read: the KBs and their ready
    /// documents.
    pub async fn material(
        &self,
        user_id: &str,
        kbs: &[KnowledgeBase],
        attachments: Option<&KnowledgeBase>,
    ) -> Result<Material, KbError> {
        let mut material = Material::default();
        let all = kbs
            .iter()
            .map(|kb| (kb, false))
            .chain(attachments.map(|kb| (kb, true)));
        for (kb, attached) in all {
            let docs: Vec<_> = self
                .store
                .kb_documents(&kb.id, user_id)
                .await?
                .into_iter()
                .filter(|d| d.status == KbDocumentStatus::Ready)
                .collect();
            material.knowledge_bases.push(MaterialKb {
                id: kb.id.clone(),
                name: if attached {
                    ATTACHMENTS.to_string()
                } else {
                    kb.name.clone()
                },
                documents: u32::try_from(docs.len()).unwrap_or(u32::MAX),
                attachments: attached,
            });
            material
                .documents
                .extend(docs.into_iter().map(|d| MaterialDocument {
                    id: d.id,
                    name: d.name,
                    kind: d.kind,
                    pages: d.pages,
                    size: d.size,
                    kb: kb.id.clone(),
                    attached,
                }));
        }
        Ok(material)
    }

    /// Delete a KB of this user with its documents, and this replica's index of it (other
    /// replicas find their copies behind the store and never open them again); `false`: no
    /// such KB.
    pub async fn delete_kb(&self, user_id: &str, kb_id: &str) -> Result<bool, KbError> {
        if !self.store.delete_kb(kb_id, user_id).await? {
            return Ok(false);
        }
        self.retriever.vector_cache().forget(kb_id);
        if let Err(e) = self.indexes.remove(kb_id).await {
            // The rows are gone, which is what matters; the directory is only a cache.
            tracing::warn!(
                kb = kb_id,
                "cannot remove a deleted knowledge base's index: {e}"
            );
        }
        Ok(true)
    }

    async fn unknown_kb(&self, user_id: &str, name: &str) -> KbError {
        let available = match self.store.list_kbs(user_id).await {
            Ok(kbs) => kbs.into_iter().map(|k| k.name).collect(),
            Err(e) => return KbError::Store(e),
        };
        KbError::UnknownKb {
            name: name.to_string(),
            available,
        }
    }
}

/// The name a turn's attachments KB goes by in its material (and in `rag {kb}`).
pub const ATTACHMENTS: &str = "attachments";

fn to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}
