//! The knowledge-base service from the settings: the embedder of `models.embedding` (none:
//! BM25 only), the limits of `kb.*`, this replica's index under `<data dir>/kb-index` unless
//! the caller gives a root, and the PDF parser's child process.

use std::path::PathBuf;
use std::sync::Arc;

use deepsolve_kb::extract::{self, ChildCommand};
use deepsolve_kb::retrieve::{OpenAiEmbedder, OpenAiEmbedderConfig};
use deepsolve_kb::{Embedder, KbLimits, Knowledge};
use deepsolve_settings::{ApiKeySource, Settings};
use deepsolve_store::Store;

use crate::models::DEFAULT_BASE_URL;
use crate::turn::{WorkspaceError, data_dir};

/// Why the knowledge-base service could not be built.
#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    #[error("models.embedding: {0}")]
    Embedding(#[source] deepsolve_kb::retrieve::EmbedError),
    #[error("no directory for the knowledge-base index: {0}")]
    DataDir(#[source] WorkspaceError),
}

/// How the front end wants the service built.
#[derive(Debug, Clone, Default)]
pub struct KnowledgeOptions {
    /// Where this replica's full-text indexes live; `None`: `<data dir>/kb-index`.
    pub index_root: Option<PathBuf>,
    /// The program that runs `deepsolve_kb::extract::pdf_child_main` (the `deepsolve` binary
    /// passes itself and its hidden subcommand); `None`: the `deepsolve-kb-pdf` binary next to
    /// the running one, if there is one.
    pub pdf_child: Option<ChildCommand>,
}

/// `Knowledge` over `store`, as the settings say.
pub fn knowledge_from_settings(
    settings: &Settings,
    store: Store,
    options: KnowledgeOptions,
) -> Result<Knowledge, KnowledgeError> {
    let index_root = match options.index_root {
        Some(root) => root,
        None => data_dir()
            .map_err(KnowledgeError::DataDir)?
            .join("kb-index"),
    };
    let embedder = embedder(settings)?;
    let mut limits = extract::Limits::default();
    if let Some(child) = options.pdf_child {
        limits.pdf_child = Some(child);
    }
    Ok(Knowledge::new(store, index_root, embedder).with_limits(limits, kb_limits(settings)))
}

/// `kb.*` as the ingest's limits.
pub fn kb_limits(settings: &Settings) -> KbLimits {
    let kb = &settings.kb;
    KbLimits {
        max_file_bytes: kb.max_file_mb.saturating_mul(1024 * 1024),
        max_pages: u32::try_from(kb.max_pages).unwrap_or(u32::MAX),
        max_chunks_per_kb: kb.max_chunks,
        ingest_timeout: std::time::Duration::from_secs(kb.ingest_timeout_s),
    }
}

/// The embedder of `models.embedding`, on the main endpoint unless it names one. Its key is
/// read from the variable it names; else from the variable the main key came from (or
/// `llm.api_key_env`); else it sends none (a local server). The key itself never passes
/// through here.
pub fn embedder(settings: &Settings) -> Result<Option<Arc<dyn Embedder>>, KnowledgeError> {
    let Some(model) = settings.models.embedding.clone() else {
        return Ok(None);
    };
    let llm = &settings.llm;
    let base_url = model
        .base_url
        .or_else(|| llm.base_url.clone())
        .unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
    let main_key_var = match &llm.api_key_source {
        Some(ApiKeySource::Env(var)) => Some(var.clone()),
        _ => llm.api_key_env.clone(),
    };
    let mut config = OpenAiEmbedderConfig::new(base_url, model.model);
    config.api_key_env = model.api_key_env.or(main_key_var);
    let client = OpenAiEmbedder::new(config).map_err(KnowledgeError::Embedding)?;
    Ok(Some(Arc::new(client)))
}
