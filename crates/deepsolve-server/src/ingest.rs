//! Ingest jobs: an uploaded document is recorded `queued` at once and ingested on a background
//! task, a few at a time (extraction runs a child process per PDF; more at once would only
//! contend for the same cores). The ingestor records progress in the store as it goes, so
//! any replica can answer `GET …/documents/{doc}`; a failure leaves the document `failed` with a message
//! naming it and the problem (the ingestor's), and the server goes on.
//!
//! At start and then every minute, documents left `queued` or `ingesting` by a process that
//! died are marked `failed` ([`sweep_interrupted`]): their bytes were only in that process's
//! memory. A document counts as left behind when its ingest has not touched it for
//! [`STALE_AFTER`], so other live processes' ingests on the same store are spared.

use std::sync::Arc;
use std::time::Duration;

use deepsolve_kb::{IngestProgress, Knowledge};
use deepsolve_store::{KbDocumentStatus, Store, StoreError};
use tokio::sync::Semaphore;

/// Ingests at once per replica.
pub const DEFAULT_CONCURRENCY: usize = 2;

/// What an interrupted document's error says.
pub const INTERRUPTED: &str = "interrupted by a restart: upload it again";

/// The background ingests of this replica.
pub struct IngestJobs {
    permits: Arc<Semaphore>,
}

impl IngestJobs {
    pub fn new(concurrency: usize) -> Self {
        IngestJobs {
            permits: Arc::new(Semaphore::new(concurrency.max(1))),
        }
    }

    /// Ingest `bytes` as the (already queued) document `document_id` of `user_id`, in the
    /// background.
    pub fn spawn(
        &self,
        knowledge: Knowledge,
        store: Store,
        user_id: String,
        document_id: String,
        bytes: Vec<u8>,
    ) {
        let permits = self.permits.clone();
        tokio::spawn(async move {
            // A closed semaphore never happens (it is never closed); run anyway if it did.
            let _permit = permits.acquire_owned().await.ok();
            let job = Job {
                knowledge,
                user_id: user_id.clone(),
                document_id: document_id.clone(),
            };
            // On its own task: a panic inside the ingest must still leave the document failed.
            let outcome = tokio::spawn(job.run(bytes)).await;
            if let Err(join) = outcome {
                tracing::error!(document_id, error = %join, "the ingest task failed");
                let name = match store.kb_document(&document_id, &user_id).await {
                    Ok(Some(doc)) => doc.name,
                    _ => document_id.clone(),
                };
                let message =
                    format!("{name}: the ingest failed inside the server; upload it again");
                if let Err(e) = store
                    .set_kb_document_status(
                        &document_id,
                        &user_id,
                        KbDocumentStatus::Failed,
                        Some(&message),
                    )
                    .await
                {
                    tracing::error!(document_id, error = %e, "cannot mark the document failed");
                }
            }
        });
    }
}

struct Job {
    knowledge: Knowledge,
    user_id: String,
    document_id: String,
}

impl Job {
    async fn run(self, bytes: Vec<u8>) {
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
            .run(&self.user_id, &self.document_id, bytes, &on_progress)
            .await;
        match result {
            Ok(doc) => tracing::info!(document_id = doc.id, name = doc.name, "document ready"),
            // The ingestor has marked it failed with this message.
            Err(e) => tracing::warn!(document_id = self.document_id, error = %e, "ingest failed"),
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
