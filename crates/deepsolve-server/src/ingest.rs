//! Ingest jobs: an uploaded document is recorded `queued` at once and ingested on a background
//! task, a few at a time (extraction runs a child process per PDF; more at once would only
//! contend for the same cores). The ingestor records progress in the store as it goes, so
//! any replica can answer `GET …/documents/{doc}`; a failure leaves the document `failed` with a message
//! naming it and the problem (the ingestor's), and the server goes on.
//!
//! Each ingest can be stopped: deleting its document or knowledge base stops it
//! ([`IngestJobs::cancel_document`], [`IngestJobs::cancel_kb`]) — the chunker and the PDF
//! child stop within a poll, not when they are done — and a stopping server stops them all
//! ([`IngestJobs::shut_down`]), marking each document it interrupted `failed` with
//! [`SHUT_DOWN`] so the next start shows it plainly.
//!
//! At start and then every minute, documents left `queued` or `ingesting` by a process that
//! died are marked `failed` ([`sweep_interrupted`]): their bytes were only in that process's
//! memory. A document counts as left behind when its ingest has not touched it for
//! [`STALE_AFTER`], so other live processes' ingests on the same store are spared.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deepsolve_kb::{IngestError, IngestProgress, Knowledge};
use deepsolve_store::{KbDocumentStatus, Store, StoreError};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Ingests at once per replica.
pub const DEFAULT_CONCURRENCY: usize = 2;

/// What an interrupted document's error says.
pub const INTERRUPTED: &str = "interrupted by a restart: upload it again";

/// What a document's error says when a shutdown stopped its ingest.
pub const SHUT_DOWN: &str = "the server stopped before it was read: upload it again";

/// The background ingests of this replica.
pub struct IngestJobs {
    permits: Arc<Semaphore>,
    /// Every job not yet ended (waiting for a slot or running), by document id.
    jobs: Arc<Mutex<HashMap<String, Running>>>,
    /// Cancelled when the server stops: the parent of every job's token.
    stopping: CancellationToken,
}

/// A job's document and how to stop it.
struct Running {
    kb_id: String,
    cancel: CancellationToken,
}

/// What to ingest: the (already queued) document `document_id` of `user_id` in `kb_id`.
pub struct IngestRequest {
    pub user_id: String,
    pub kb_id: String,
    pub document_id: String,
    pub bytes: Vec<u8>,
}

impl IngestJobs {
    pub fn new(concurrency: usize) -> Self {
        IngestJobs {
            permits: Arc::new(Semaphore::new(concurrency.max(1))),
            jobs: Arc::new(Mutex::new(HashMap::new())),
            stopping: CancellationToken::new(),
        }
    }

    /// Ingest the request's document in the background.
    pub fn spawn(&self, knowledge: Knowledge, store: Store, request: IngestRequest) {
        let IngestRequest {
            user_id,
            kb_id,
            document_id,
            bytes,
        } = request;
        let cancel = self.stopping.child_token();
        self.register(&document_id, &kb_id, &cancel);
        let permits = self.permits.clone();
        let jobs = self.jobs.clone();
        let stopping = self.stopping.clone();
        tokio::spawn(async move {
            let job = Job {
                knowledge,
                store,
                user_id,
                document_id,
                cancel,
                stopping,
            };
            tokio::select! {
                // A closed semaphore never happens (it is never closed); run anyway if it did.
                permit = permits.acquire_owned() => {
                    let _permit = permit.ok();
                    job.run_guarded(bytes).await;
                }
                () = job.cancel.cancelled() => job.stopped().await,
            }
            lock(&jobs).remove(&job.document_id);
        });
    }

    fn register(&self, document_id: &str, kb_id: &str, cancel: &CancellationToken) {
        let running = Running {
            kb_id: kb_id.to_string(),
            cancel: cancel.clone(),
        };
        lock(&self.jobs).insert(document_id.to_string(), running);
    }

    /// Stop the ingest of the document `document_id`, if it has one here (before the document
    /// is deleted: its work stops within a poll, and writes nothing more).
    pub fn cancel_document(&self, document_id: &str) {
        if let Some(job) = lock(&self.jobs).get(document_id) {
            job.cancel.cancel();
        }
    }

    /// Stop the ingests of every document of the knowledge base `kb_id`.
    pub fn cancel_kb(&self, kb_id: &str) {
        for job in lock(&self.jobs).values().filter(|j| j.kb_id == kb_id) {
            job.cancel.cancel();
        }
    }

    /// Ingests not yet ended (waiting or running).
    pub fn pending(&self) -> usize {
        lock(&self.jobs).len()
    }

    /// Stop every ingest, now: the server is stopping. Each marks its document failed
    /// ([`SHUT_DOWN`]) as it ends.
    pub fn stop_all(&self) {
        self.stopping.cancel();
    }

    /// [`IngestJobs::stop_all`], then wait until every job has ended or `deadline` passes.
    pub async fn shut_down(&self, deadline: tokio::time::Instant) {
        self.stop_all();
        while self.pending() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The job table, even after a panic while it was held (its entries stay valid).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Clone)]
struct Job {
    knowledge: Knowledge,
    store: Store,
    user_id: String,
    document_id: String,
    cancel: CancellationToken,
    /// The server's: cancelled means a shutdown stopped the job, not a deletion.
    stopping: CancellationToken,
}

impl Job {
    /// Run on its own task: a panic inside the ingest must still leave the document failed.
    async fn run_guarded(&self, bytes: Vec<u8>) {
        let job = self.clone();
        let outcome = tokio::spawn(async move { job.run(bytes).await }).await;
        if let Err(join) = outcome {
            tracing::error!(document_id = self.document_id, error = %join, "the ingest task failed");
            self.mark_failed("the ingest failed inside the server; upload it again")
                .await;
        }
    }

    async fn run(&self, bytes: Vec<u8>) {
        // The ingestor records the progress in the store itself (any replica reads it); here
        // it is only traced.
        let on_progress = |p: IngestProgress| {
            tracing::debug!(
                document_id = p.document_id,
                stage = p.stage,
                pages_done = p.pages_done,
                "ingest progress"
            );
        };
        let result = self
            .knowledge
            .ingestor()
            .run_until(
                &self.user_id,
                &self.document_id,
                bytes,
                &on_progress,
                &self.cancel,
            )
            .await;
        match result {
            Ok(doc) => tracing::info!(document_id = doc.id, name = doc.name, "document ready"),
            Err(IngestError::Cancelled { .. }) => self.stopped().await,
            // The ingestor has marked it failed with this message.
            Err(e) => tracing::warn!(document_id = self.document_id, error = %e, "ingest failed"),
        }
    }

    /// The job was stopped: by a shutdown, its document is marked failed ([`SHUT_DOWN`]); by
    /// a deletion, there is nothing left to mark.
    async fn stopped(&self) {
        if self.stopping.is_cancelled() {
            self.mark_failed(SHUT_DOWN).await;
        } else {
            tracing::info!(
                document_id = self.document_id,
                "ingest stopped: document deleted"
            );
        }
    }

    /// Mark the document failed with "NAME: `reason`" (nothing when it is gone).
    async fn mark_failed(&self, reason: &str) {
        let (id, user) = (&self.document_id, &self.user_id);
        let name = match self.store.kb_document(id, user).await {
            Ok(Some(doc)) => doc.name,
            Ok(None) => return,
            Err(_) => id.clone(),
        };
        let message = format!("{name}: {reason}");
        let marked = self
            .store
            .set_kb_document_status(id, user, KbDocumentStatus::Failed, Some(&message))
            .await;
        match marked {
            Ok(_) | Err(StoreError::NotFound(_)) => {}
            Err(e) => {
                tracing::error!(document_id = id, error = %e, "cannot mark the document failed")
            }
        }
    }
}

/// How long a document may sit `queued` or `ingesting` without its ingest touching it before
/// it counts as interrupted. A live ingest touches it at every step and at least every
/// [`deepsolve_kb::INGEST_HEARTBEAT`] while it waits (on the PDF child, on the embedder), far
/// more often than this.
pub const STALE_AFTER: Duration = Duration::from_secs(10 * 60);

/// How often a server looks for interrupted ingests after its start.
pub const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Mark every document still `queued` or `ingesting` whose ingest has not touched it for
/// [`STALE_AFTER`] as `failed` ("NAME: [`INTERRUPTED`]"): their ingest died with its process
/// (the bytes were only in its memory). Another replica's live ingest, or a `deepsolve kb add`
/// running beside the server, keeps touching its document and is left alone. Returns how many.
pub async fn sweep_interrupted(store: &Store) -> Result<u64, StoreError> {
    let stale_before =
        now_ms().saturating_sub(i64::try_from(STALE_AFTER.as_millis()).unwrap_or(i64::MAX));
    store
        .fail_stale_kb_documents_unscoped(INTERRUPTED, stale_before)
        .await
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
