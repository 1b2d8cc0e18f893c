//! Rebuilding a KB's index from the store: into a fresh directory beside it, then swapped
//! in, so a half-built index is never opened.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use deepsolve_store::{KbChunk, KnowledgeBase, Store};
use tantivy::{Index, IndexWriter, TantivyDocument, doc};

use super::search::Stamp;
use super::tokenizer::{ANALYZER, analyzer};
use super::{FORMAT, IndexError, current_generation, schema, spawn_blocking};

/// Chunks read from the store per page.
const PAGE: u32 = 500;

/// The writer's memory budget: enough to index a page of chunks between flushes, small
/// enough for a replica rebuilding several KBs at once.
const WRITER_HEAP: usize = 50_000_000;

/// Tells concurrent builds in this process apart.
static BUILDS: AtomicU64 = AtomicU64::new(0);

/// Rebuild `kb`'s index into `dir` and return the generation it was built from. The
/// generation is read before the chunks: a change committed meanwhile leaves the index
/// stamped older than the store, so the next search rebuilds again — never the reverse.
pub(crate) async fn rebuild(
    store: &Store,
    kb: &KnowledgeBase,
    root: &Path,
    dir: &Path,
) -> Result<u64, IndexError> {
    let generation = current_generation(store, kb).await?;
    tokio::fs::create_dir_all(root).await?;
    remove_abandoned_builds(root, &kb.id).await?;
    let build_dir = root.join(format!(
        ".build-{}-{}-{}",
        kb.id,
        std::process::id(),
        BUILDS.fetch_add(1, Ordering::Relaxed)
    ));
    let result = build_into(store, kb, &build_dir, generation).await;
    let result = match result {
        Ok(()) => swap_in(build_dir.clone(), dir.to_path_buf()).await,
        Err(e) => Err(e),
    };
    if result.is_err() {
        let _ = tokio::fs::remove_dir_all(&build_dir).await;
    }
    result.map(|()| generation)
}

/// Builds of this KB left behind by a process that died mid-build. The caller holds the
/// KB's build lock, and each replica has its own index directory, so none is in progress.
async fn remove_abandoned_builds(root: &Path, kb_id: &str) -> Result<(), IndexError> {
    let prefix = format!(".build-{kb_id}-");
    let mut entries = tokio::fs::read_dir(root).await?;
    while let Some(entry) = entries.next_entry().await? {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            tokio::fs::remove_dir_all(entry.path()).await?;
        }
    }
    Ok(())
}

/// Page the KB's chunks from the store into a writer on a blocking thread.
async fn build_into(
    store: &Store,
    kb: &KnowledgeBase,
    build_dir: &Path,
    generation: u64,
) -> Result<(), IndexError> {
    tokio::fs::create_dir_all(build_dir).await?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Vec<KbChunk>>(2);
    let writer_dir = build_dir.to_path_buf();
    let writer = tokio::task::spawn_blocking(move || write_index(&writer_dir, rx, generation));
    let mut after: Option<String> = None;
    let fed = loop {
        let page = match store
            .kb_chunks_page(&kb.id, &kb.user_id, after.as_deref(), PAGE)
            .await
        {
            Ok(page) => page,
            Err(e) => break Err(IndexError::from(e)),
        };
        let Some(last) = page.last() else {
            break Ok(());
        };
        after = Some(last.id.clone());
        if tx.send(page).await.is_err() {
            // The writer stopped early; its own error is the one to report.
            break Ok(());
        }
    };
    drop(tx);
    let written = writer.await.map_err(|e| IndexError::Task(e.to_string()))?;
    fed.and(written)
}

fn write_index(
    dir: &Path,
    mut rx: tokio::sync::mpsc::Receiver<Vec<KbChunk>>,
    generation: u64,
) -> Result<(), IndexError> {
    let (schema, fields) = schema();
    let index = Index::create_in_dir(dir, schema)?;
    index.tokenizers().register(ANALYZER, analyzer());
    let mut writer: IndexWriter<TantivyDocument> = index.writer_with_num_threads(1, WRITER_HEAP)?;
    while let Some(page) = rx.blocking_recv() {
        for chunk in page {
            let context = std::iter::once(chunk.document_name.as_str())
                .chain(chunk.heading_path.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" / ");
            writer.add_document(doc!(
                fields.chunk_id => chunk.id,
                fields.text => chunk.text,
                fields.context => context,
            ))?;
        }
    }
    let stamp = serde_json::to_string(&Stamp {
        format: FORMAT,
        generation,
    })
    .map_err(|e| IndexError::Task(e.to_string()))?;
    let mut commit = writer.prepare_commit()?;
    commit.set_payload(&stamp);
    commit.commit()?;
    writer.wait_merging_threads()?;
    Ok(())
}

/// Replace `dir` with the finished build. Searches holding the old index keep reading its
/// files (unlinked files stay readable while open).
async fn swap_in(build_dir: PathBuf, dir: PathBuf) -> Result<(), IndexError> {
    spawn_blocking(move || {
        match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        std::fs::rename(&build_dir, &dir)?;
        Ok(())
    })
    .await
}
