//! A document into a knowledge base: recorded first ([`Ingestor::add`], status `queued`), then
//! read ([`Ingestor::run`]): extracted (PDF in the child process), chunked, its pages and
//! chunks stored, embedded when an embedder is configured, and `ready`. Any failure leaves the
//! document `failed` with a message that names it and the problem, keeps nothing half-stored,
//! and touches no other document.
//!
//! Every stage runs within one budget per document ([`KbLimits::ingest_timeout`], wall clock,
//! which also bounds its CPU: each stage uses one core at most): past it the document fails
//! naming the stage and the limit. [`Ingestor::run_until`] also stops when its token is
//! cancelled (the document deleted, the server stopping). Either way the work on blocking
//! threads stops too: the chunker asks between windows, the PDF child is killed.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use deepsolve_store::{
    ChunkInsert, KbDocument, KbDocumentStatus, NewKbChunk, NewKbDocument, NewKbPage, Store,
    StoreError,
};

use crate::chunk::{ChunkError, ChunkOptions, chunk_until};
use crate::extract::{self, ExtractError, Extracted, Input, Kind};
use crate::retrieve::{Embedder, embed_missing};

/// How often a running ingest touches its document while it waits on a long step (the PDF
/// child's up to 120 s, embedding calls): a server's sweep fails only documents untouched for
/// far longer (`deepsolve_server::ingest::STALE_AFTER`), so a live ingest is never taken
/// for a dead one.
pub const INGEST_HEARTBEAT: Duration = Duration::from_secs(30);

/// Progress steps while a document's chunks are stored: pages are stored in this many groups
/// at most (a page per group up to 20 pages), each group one store transaction and
/// a generation bump, so a 2 000-page document does not make 2 000 of them.
const PROGRESS_STEPS: usize = 20;

/// Longest document name kept (characters); longer ones lose their middle, keeping the
/// start and the extension.
const NAME_CHARS: usize = 200;

/// [`KbLimits::ingest_timeout`] unless the settings say (`kb.ingest_timeout_s`).
pub const DEFAULT_INGEST_TIMEOUT: Duration = Duration::from_secs(600);

/// What a knowledge base accepts, beyond what one extraction bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KbLimits {
    /// Largest file accepted, in bytes (50 MiB).
    pub max_file_bytes: u64,
    /// Most pages a document may have (2 000).
    pub max_pages: u32,
    /// Most chunks one knowledge base may hold, all its documents together (200 000).
    pub max_chunks_per_kb: u64,
    /// Wall-clock time one document's ingest may take, all stages together (10 minutes).
    pub ingest_timeout: Duration,
}

impl Default for KbLimits {
    fn default() -> Self {
        KbLimits {
            max_file_bytes: 50 * 1024 * 1024,
            max_pages: 2_000,
            max_chunks_per_kb: 200_000,
            ingest_timeout: DEFAULT_INGEST_TIMEOUT,
        }
    }
}

/// How far one document's ingest got, for a progress display.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestProgress {
    pub document_id: String,
    pub pages_done: u32,
    /// Known once the document is extracted.
    pub pages_total: Option<u32>,
    /// `extracting`, `chunking`, `storing`, `embedding` or `ready`.
    pub stage: &'static str,
}

/// Why a document could not be added or read. Every message names the document, for people:
/// `lecture.pdf: not a PDF (no %PDF header)`.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("{name}: {} is over the limit of {}", human_bytes(*.size), human_bytes(*.limit))]
    TooLarge { name: String, size: u64, limit: u64 },
    #[error("{name}: not a PDF (no %PDF header)")]
    NotPdf { name: String },
    #[error("{name}: not a DOCX (not a zip archive)")]
    NotDocx { name: String },
    #[error(transparent)]
    Extract(#[from] ExtractError),
    #[error(
        "{name}: its {chunks} passages would take the knowledge base '{kb}' over its limit of {limit} (it holds {existing})"
    )]
    TooManyChunks {
        name: String,
        kb: String,
        chunks: u64,
        existing: u64,
        limit: u64,
    },
    #[error("{name}: cannot split it into passages: {reason}")]
    Chunk { name: String, reason: String },
    #[error("no knowledge base '{0}'")]
    UnknownKb(String),
    #[error("no document '{0}'")]
    UnknownDocument(String),
    #[error("{name}: storing it failed: {source}")]
    Store {
        name: String,
        #[source]
        source: StoreError,
    },
    #[error("{name}: reading it stopped unexpectedly: {reason}")]
    Task { name: String, reason: String },
    #[error(
        "{name}: {stage} took it past the ingest time limit of {} s (kb.ingest_timeout_s)",
        .limit.as_secs()
    )]
    TimedOut {
        name: String,
        /// `extracting`, `chunking`, `storing` or `embedding`.
        stage: &'static str,
        limit: Duration,
    },
    #[error("{name}: reading it was stopped (the document was deleted or the server stopped)")]
    Cancelled { name: String },
}

impl IngestError {
    fn store(name: &str) -> impl FnOnce(StoreError) -> IngestError + '_ {
        move |source| IngestError::Store {
            name: name.to_string(),
            source,
        }
    }
}

/// Adds documents to knowledge bases and reads them in; cheap to share (`Arc` inside).
#[derive(Clone)]
pub struct Ingestor {
    store: Store,
    extract: extract::Limits,
    limits: KbLimits,
    embedder: Option<Arc<dyn Embedder>>,
    chunking: ChunkOptions,
}

impl Ingestor {
    /// `extract` bounds one extraction (its file size and page limits are lowered to
    /// `limits`' where those are smaller); `embedder`, when given, embeds every new chunk.
    pub fn new(
        store: Store,
        extract: extract::Limits,
        limits: KbLimits,
        embedder: Option<Arc<dyn Embedder>>,
    ) -> Ingestor {
        let extract = extract::Limits {
            max_file_bytes: extract.max_file_bytes.min(limits.max_file_bytes),
            max_pages: extract.max_pages.min(limits.max_pages),
            ..extract
        };
        Ingestor {
            store,
            extract,
            limits,
            embedder,
            chunking: ChunkOptions::default(),
        }
    }

    pub fn limits(&self) -> &KbLimits {
        &self.limits
    }

    /// Record a document of `bytes_len` bytes called `name` (only its base name is kept:
    /// `../../etc/passwd` becomes `passwd`) in the KB `kb_id` of this user, `queued`. Its kind
    /// is guessed from the name here and decided by its bytes in [`Ingestor::run`].
    pub async fn add(
        &self,
        user_id: &str,
        kb_id: &str,
        name: &str,
        bytes_len: u64,
    ) -> Result<KbDocument, IngestError> {
        let name = base_name(name);
        if bytes_len > self.limits.max_file_bytes {
            return Err(IngestError::TooLarge {
                name,
                size: bytes_len,
                limit: self.limits.max_file_bytes,
            });
        }
        let kind = extract::detect(&name, &[]).map_or("unknown", kind_name);
        let new = NewKbDocument {
            name: name.clone(),
            kind: kind.to_string(),
            size: bytes_len,
            pages: None,
        };
        match self.store.add_kb_document(kb_id, user_id, new).await {
            Err(StoreError::NotFound(_)) => Err(IngestError::UnknownKb(kb_id.to_string())),
            other => other.map_err(IngestError::store(&name)),
        }
    }

    /// Read the document `document_id` (recorded by [`Ingestor::add`]) from `bytes`: the
    /// document ends `ready`, or `failed` with the returned error's message.
    pub async fn run(
        &self,
        user_id: &str,
        document_id: &str,
        bytes: Vec<u8>,
        on_progress: &(dyn Fn(IngestProgress) + Send + Sync),
    ) -> Result<KbDocument, IngestError> {
        let never = CancellationToken::new();
        self.run_until(user_id, document_id, bytes, on_progress, &never)
            .await
    }

    /// [`Ingestor::run`], stopped within a poll once `cancel` is cancelled: then
    /// [`IngestError::Cancelled`], with what was stored of the document cleared and its
    /// status left to the canceller (gone when it was deleted; the server marks the ones a
    /// shutdown interrupted).
    pub async fn run_until(
        &self,
        user_id: &str,
        document_id: &str,
        bytes: Vec<u8>,
        on_progress: &(dyn Fn(IngestProgress) + Send + Sync),
        cancel: &CancellationToken,
    ) -> Result<KbDocument, IngestError> {
        let doc = self
            .store
            .kb_document(document_id, user_id)
            .await
            .map_err(|source| IngestError::Store {
                name: document_id.to_string(),
                source,
            })?
            .ok_or_else(|| IngestError::UnknownDocument(document_id.to_string()))?;
        let budget = Budget::new(cancel, self.limits.ingest_timeout);
        let work = self.read_in(&doc, bytes, on_progress, &budget);
        let outcome = self
            .with_heartbeat(&doc, budget.bound(&doc.name, work))
            .await;
        // Whatever ended the work, nothing it left on a blocking thread goes on.
        budget.work.cancel();
        match outcome {
            Ok(()) => self.finish(&doc).await,
            Err(e @ IngestError::Cancelled { .. }) => {
                self.clear(&doc).await;
                Err(e)
            }
            Err(e) => {
                self.fail(&doc, &e).await;
                Err(e)
            }
        }
    }

    /// Run `work`, touching the document every [`INGEST_HEARTBEAT`] until it ends.
    async fn with_heartbeat<T>(
        &self,
        doc: &KbDocument,
        work: impl std::future::Future<Output = T>,
    ) -> T {
        tokio::pin!(work);
        let mut beat = tokio::time::interval(INGEST_HEARTBEAT);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick is immediate; the status write at the start already touched it.
        beat.tick().await;
        loop {
            tokio::select! {
                out = &mut work => return out,
                _ = beat.tick() => {
                    if let Err(e) = self.store.touch_kb_document(&doc.id, &doc.user_id).await {
                        // Only the sweep's view suffers; the ingest itself goes on.
                        tracing::warn!(document = %doc.name, "cannot record ingest progress: {e}");
                    }
                }
            }
        }
    }

    async fn read_in(
        &self,
        doc: &KbDocument,
        bytes: Vec<u8>,
        on_progress: &(dyn Fn(IngestProgress) + Send + Sync),
        budget: &Budget,
    ) -> Result<(), IngestError> {
        let name = doc.name.as_str();
        let store = |e| IngestError::store(name)(e);
        let progress = |pages_done, pages_total, stage| {
            budget.enter(stage);
            on_progress(IngestProgress {
                document_id: doc.id.clone(),
                pages_done,
                pages_total,
                stage,
            });
        };
        self.store
            .set_kb_document_status(&doc.id, &doc.user_id, KbDocumentStatus::Ingesting, None)
            .await
            .map_err(store)?;
        // A retried document starts from nothing.
        self.store
            .clear_kb_document_content(&doc.id, &doc.user_id)
            .await
            .map_err(store)?;
        progress(0, None, "extracting");
        let extracted = self.extract(name, bytes, budget).await?;
        let pages = u32::try_from(extracted.pages.len()).unwrap_or(u32::MAX);
        self.store
            .set_kb_document_extracted(
                &doc.id,
                &doc.user_id,
                kind_name(extracted.kind),
                Some(pages),
            )
            .await
            .map_err(store)?;
        self.store
            .set_kb_document_progress(&doc.id, &doc.user_id, 0, Some(pages))
            .await
            .map_err(store)?;
        progress(0, Some(pages), "chunking");
        let chunks = self.chunk(doc, &extracted, budget).await?;
        progress(0, Some(pages), "storing");
        self.store
            .set_kb_pages(&doc.id, &doc.user_id, &page_rows(&extracted))
            .await
            .map_err(store)?;
        // Stored a group of pages at a time, so a long document's progress moves page by page
        // ("page 7 of 31") rather than jumping at the end. Nothing is searched before the
        // document is `ready`, and a failure clears what was stored ([`Ingestor::fail`]),
        // so the groups need not be one transaction.
        let numbers: Vec<u32> = extracted.pages.iter().map(|p| p.number).collect();
        let step = numbers.len().div_ceil(PROGRESS_STEPS).max(1);
        let mut stored = 0;
        let mut pages_done = 0;
        for group in numbers.chunks(step) {
            pages_done += group.len();
            let end = if pages_done == numbers.len() {
                chunks.len()
            } else {
                let last = group.last().copied().unwrap_or(0);
                stored
                    + chunks[stored..]
                        .iter()
                        .take_while(|c| c.page.is_some_and(|p| p <= last))
                        .count()
            };
            self.store_chunks(doc, &chunks, stored, end).await?;
            stored = end;
            let done = u32::try_from(pages_done).unwrap_or(u32::MAX);
            self.store
                .set_kb_document_progress(&doc.id, &doc.user_id, done, Some(pages))
                .await
                .map_err(store)?;
            progress(done, Some(pages), "storing");
        }
        // A document without pages still has its chunks stored (none are, as a rule).
        self.store_chunks(doc, &chunks, stored, chunks.len())
            .await?;
        self.store
            .set_kb_document_progress(&doc.id, &doc.user_id, pages, Some(pages))
            .await
            .map_err(store)?;
        if let Some(embedder) = &self.embedder {
            progress(pages, Some(pages), "embedding");
            self.embed(doc, embedder.as_ref()).await;
        }
        progress(pages, Some(pages), "ready");
        Ok(())
    }

    /// Store `chunks[from..to]` (nothing when empty), within the KB's chunk limit: checked
    /// again where it is written, as another document of the KB may have been stored since
    /// the count before chunking.
    async fn store_chunks(
        &self,
        doc: &KbDocument,
        chunks: &[NewKbChunk],
        from: usize,
        to: usize,
    ) -> Result<(), IngestError> {
        let Some(batch) = chunks.get(from..to).filter(|b| !b.is_empty()) else {
            return Ok(());
        };
        let limit = self.limits.max_chunks_per_kb;
        let inserted = self
            .store
            .insert_kb_chunks_within(&doc.id, &doc.user_id, batch, limit)
            .await
            .map_err(IngestError::store(&doc.name))?;
        if let ChunkInsert::OverLimit { existing } = inserted {
            return Err(IngestError::TooManyChunks {
                name: doc.name.clone(),
                kb: self.kb_name(doc).await,
                chunks: chunks.len() as u64,
                // This document's own earlier groups are not what was there before it.
                existing: existing.saturating_sub(from as u64),
                limit,
            });
        }
        Ok(())
    }

    /// Extraction off the async threads (the PDF child is waited for there too, and killed
    /// when the budget ends).
    async fn extract(
        &self,
        name: &str,
        bytes: Vec<u8>,
        budget: &Budget,
    ) -> Result<Extracted, IngestError> {
        check_signature(name, &bytes)?;
        let mut limits = self.extract.clone();
        limits.pdf_timeout = limits.pdf_timeout.min(budget.remaining());
        limits.cancel = Some(budget.work.clone());
        let owned = name.to_string();
        tokio::task::spawn_blocking(move || {
            extract::extract(
                Input::Bytes {
                    name: &owned,
                    bytes: &bytes,
                },
                &limits,
            )
        })
        .await
        .map_err(|e| IngestError::Task {
            name: name.to_string(),
            reason: e.to_string(),
        })?
        .map_err(|e| match e {
            // The budget's own end, reported by `Budget::bound` with the stage and limit.
            ExtractError::Stopped { .. } => budget.stopped(name),
            ExtractError::PdfTimeout { .. } if budget.remaining().is_zero() => budget.stopped(name),
            other => IngestError::from(other),
        })
    }

    /// The document's chunks, within what its KB may still hold.
    async fn chunk(
        &self,
        doc: &KbDocument,
        extracted: &Extracted,
        budget: &Budget,
    ) -> Result<Vec<NewKbChunk>, IngestError> {
        let name = doc.name.clone();
        let options = self.chunking;
        let owned = extracted.clone();
        let work = budget.work.clone();
        let chunks = tokio::task::spawn_blocking(move || {
            chunk_until(&owned, &options, &|| work.is_cancelled())
        })
        .await
        .map_err(|e| IngestError::Task {
            name: name.clone(),
            reason: e.to_string(),
        })?
        .map_err(|e| match e {
            ChunkError::Stopped => budget.stopped(&name),
            other => IngestError::Chunk {
                name: name.clone(),
                reason: other.to_string(),
            },
        })?;
        let existing = self
            .store
            .kb_chunk_count(&doc.kb_id, &doc.user_id)
            .await
            .map_err(IngestError::store(&doc.name))?;
        let count = chunks.len() as u64;
        if existing.saturating_add(count) > self.limits.max_chunks_per_kb {
            let kb = self.kb_name(doc).await;
            return Err(IngestError::TooManyChunks {
                name,
                kb,
                chunks: count,
                existing,
                limit: self.limits.max_chunks_per_kb,
            });
        }
        let paged = is_paged(extracted);
        Ok(chunks
            .into_iter()
            .map(|c| NewKbChunk {
                ordinal: c.ordinal,
                page: paged.then_some(c.page),
                heading_path: c.heading_path,
                text: c.text,
            })
            .collect())
    }

    async fn kb_name(&self, doc: &KbDocument) -> String {
        match self.store.kb(&doc.kb_id, &doc.user_id).await {
            Ok(Some(kb)) => kb.name,
            _ => doc.kb_id.clone(),
        }
    }

    /// Embedding is best effort: a document whose vectors could not be made is still
    /// searched by BM25, and the next ingest (or search-time re-embedding) fills them in.
    async fn embed(&self, doc: &KbDocument, embedder: &dyn Embedder) {
        let kb = match self.store.kb(&doc.kb_id, &doc.user_id).await {
            Ok(Some(kb)) => kb,
            _ => return,
        };
        if let Err(e) = embed_missing(&self.store, &kb, embedder).await {
            tracing::warn!(document = %doc.name, "embedding failed, BM25 only for now: {e}");
        }
    }

    async fn finish(&self, doc: &KbDocument) -> Result<KbDocument, IngestError> {
        let store = IngestError::store(&doc.name);
        let result = self
            .store
            .set_kb_document_status(&doc.id, &doc.user_id, KbDocumentStatus::Ready, None)
            .await;
        if let Err(e) = result {
            let e = store(e);
            self.fail(doc, &e).await;
            return Err(e);
        }
        self.store
            .kb_document(&doc.id, &doc.user_id)
            .await
            .map_err(IngestError::store(&doc.name))?
            .ok_or_else(|| IngestError::UnknownDocument(doc.id.clone()))
    }

    /// Drop what was stored of a document whose ingest was stopped. Best effort: a deleted
    /// document has nothing left to drop.
    async fn clear(&self, doc: &KbDocument) {
        match self
            .store
            .clear_kb_document_content(&doc.id, &doc.user_id)
            .await
        {
            Ok(_) | Err(StoreError::NotFound(_)) => {}
            Err(e) => tracing::warn!(document = %doc.name, "cannot clear a stopped document: {e}"),
        }
    }

    /// Mark the document failed and drop what was stored of it. Best effort: the error the
    /// caller returns is the one that matters, and a store that fails here failed before.
    async fn fail(&self, doc: &KbDocument, error: &IngestError) {
        let message = error.to_string();
        if let Err(e) = self
            .store
            .clear_kb_document_content(&doc.id, &doc.user_id)
            .await
        {
            tracing::warn!(document = %doc.name, "cannot clear a failed document: {e}");
        }
        if let Err(e) = self
            .store
            .set_kb_document_status(
                &doc.id,
                &doc.user_id,
                KbDocumentStatus::Failed,
                Some(&message),
            )
            .await
        {
            tracing::warn!(document = %doc.name, "cannot mark a document failed ({message}): {e}");
        }
    }
}

/// One document's allowance: its caller's cancellation, its deadline, and the stage it is in
/// (for the error that names it).
struct Budget {
    cancel: CancellationToken,
    /// Cancelled with `cancel`, at the deadline and when the ingest ends: what work on
    /// blocking threads (the chunker, the PDF child's wait) stops on.
    work: CancellationToken,
    deadline: Instant,
    limit: Duration,
    stage: Mutex<&'static str>,
}

impl Budget {
    fn new(cancel: &CancellationToken, limit: Duration) -> Budget {
        let now = Instant::now();
        // A limit too large to add is no limit: a century will do.
        let deadline = now
            .checked_add(limit)
            .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600));
        Budget {
            cancel: cancel.clone(),
            work: cancel.child_token(),
            deadline,
            limit,
            stage: Mutex::new("extracting"),
        }
    }

    fn enter(&self, stage: &'static str) {
        if let Ok(mut current) = self.stage.lock() {
            *current = stage;
        }
    }

    fn stage(&self) -> &'static str {
        self.stage.lock().map_or("ingest", |s| *s)
    }

    fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// The error for work this budget stopped: cancelled, else past the deadline in the
    /// current stage.
    fn stopped(&self, name: &str) -> IngestError {
        if self.cancel.is_cancelled() {
            IngestError::Cancelled {
                name: name.to_string(),
            }
        } else {
            IngestError::TimedOut {
                name: name.to_string(),
                stage: self.stage(),
                limit: self.limit,
            }
        }
    }

    /// `work`, unless the caller cancels or the deadline passes first.
    async fn bound<T>(
        &self,
        name: &str,
        work: impl std::future::Future<Output = Result<T, IngestError>>,
    ) -> Result<T, IngestError> {
        tokio::select! {
            out = work => out,
            () = self.cancel.cancelled() => Err(self.stopped(name)),
            () = tokio::time::sleep_until(self.deadline) => {
                self.work.cancel();
                Err(self.stopped(name))
            }
        }
    }
}

/// The store's name of a kind.
pub fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Pdf => "pdf",
        Kind::Docx => "docx",
        Kind::Html => "html",
        Kind::Markdown => "markdown",
        Kind::Text => "text",
    }
}

/// The last path component of an uploaded name (either separator), without control
/// characters, at most [`NAME_CHARS`] characters (shortened in the middle: see
/// [`shorten_name`]); `document` when nothing is left.
pub fn base_name(name: &str) -> String {
    let last = name
        .rsplit(['/', '\\'])
        .find(|part| !part.trim().is_empty() && part.trim() != "." && part.trim() != "..")
        .unwrap_or("");
    let clean: String = last.chars().filter(|c| !c.is_control()).collect();
    let kept = shorten_name(clean.trim(), NAME_CHARS);
    if kept.is_empty() || Path::new(&kept).file_name().is_none() {
        "document".to_string()
    } else {
        kept
    }
}

/// `name` in at most `max` characters: whole when it fits, else its start, `…` and its end,
/// the end keeping the extension whole (`lecture-notes-….md`), so the kind it names survives.
/// An extension too long to keep whole is no extension: then the name is cut in the middle.
pub fn shorten_name(name: &str, max: usize) -> String {
    let count = name.chars().count();
    if count <= max {
        return name.to_string();
    }
    if max < 2 {
        return name.chars().take(max).collect();
    }
    let ext_chars = name
        .rfind('.')
        .filter(|&dot| dot > 0)
        .map_or(0, |dot| name[dot..].chars().count());
    // The end keeps the extension when it leaves room for a start; else half the room.
    let room = max - 1;
    let tail = if ext_chars > 0 && ext_chars < room / 2 {
        ext_chars.max(room / 4)
    } else {
        room / 2
    };
    let head = room - tail;
    let start: String = name.chars().take(head).collect();
    let end: String = name.chars().skip(count - tail).collect();
    format!("{start}…{end}")
}

/// A name that promises a format its first bytes deny is refused with the plain reason,
/// rather than the parser's.
fn check_signature(name: &str, bytes: &[u8]) -> Result<(), IngestError> {
    let ext = Path::new(name)
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    match ext.as_deref() {
        Some("pdf") if !bytes.starts_with(b"%PDF-") && !bytes.starts_with(b"PK\x03\x04") => {
            Err(IngestError::NotPdf {
                name: name.to_string(),
            })
        }
        Some("docx") if !bytes.starts_with(b"PK\x03\x04") && !bytes.starts_with(b"%PDF-") => {
            Err(IngestError::NotDocx {
                name: name.to_string(),
            })
        }
        _ => Ok(()),
    }
}

/// Whether the document's pages are worth citing: a PDF's always, another format's when
/// its author broke it into pages (a web page or a note is one page, never "p. 1").
fn is_paged(extracted: &Extracted) -> bool {
    extracted.kind == Kind::Pdf || extracted.pages.len() > 1
}

/// The pages as stored, trimmed: each but the last ends with a blank line, so the document's
/// text reads as its pages one after the other.
fn page_rows(extracted: &Extracted) -> Vec<NewKbPage> {
    let paged = is_paged(extracted);
    let last = extracted.pages.len().saturating_sub(1);
    extracted
        .pages
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut text = p.text.trim().to_string();
            if i < last {
                text.push_str("\n\n");
            }
            NewKbPage {
                page: paged.then_some(p.number),
                text,
            }
        })
        .collect()
}

/// `52 428 800` → `50 MiB`; small sizes in bytes.
pub fn human_bytes(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= MIB {
        format!("{:.1} MiB", bytes as f64 / MIB as f64)
    } else if bytes >= 1024 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_base_name_of_an_upload_is_kept() {
        assert_eq!(base_name("../../etc/passwd"), "passwd");
        assert_eq!(base_name("C:\\Users\\x\\notes.md"), "notes.md");
        assert_eq!(base_name("dir/.."), "dir");
        assert_eq!(base_name("a\u{0}b.txt"), "ab.txt");
        assert_eq!(base_name("../"), "document");
        assert_eq!(base_name(""), "document");
        let long = format!("{}.pdf", "x".repeat(300));
        let kept = base_name(&long);
        assert_eq!(kept.chars().count(), NAME_CHARS);
        assert!(kept.ends_with(".pdf"));
    }

    #[test]
    fn long_names_lose_their_middle_and_keep_start_and_extension() {
        let long = format!("chapter-one-{}-end.md", "y".repeat(5_000));
        let kept = shorten_name(&long, 200);
        assert_eq!(kept.chars().count(), 200);
        assert!(kept.starts_with("chapter-one-yyy"), "{kept}");
        assert!(kept.ends_with("yy-end.md") && kept.contains('…'), "{kept}");
        assert_eq!(extract::detect(&kept, b""), Some(Kind::Markdown));
        // Multi-byte names are cut at characters.
        let chinese = format!("{}.pdf", "讲义".repeat(300));
        let kept = shorten_name(&chinese, 200);
        assert_eq!(kept.chars().count(), 200);
        assert!(
            kept.starts_with("讲义") && kept.ends_with("讲义.pdf"),
            "{kept}"
        );
        // Short names are left alone; an "extension" as long as the name is no extension.
        assert_eq!(shorten_name("a.md", 200), "a.md");
        let dotted = format!("a.{}", "z".repeat(400));
        assert_eq!(shorten_name(&dotted, 9).chars().count(), 9);
        assert_eq!(shorten_name("abcdef", 1), "a");
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human_bytes(50 * 1024 * 1024), "50 MiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(12), "12 bytes");
    }
}
