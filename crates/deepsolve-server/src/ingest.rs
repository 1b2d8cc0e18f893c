//! Ingest jobs: an uploaded document is recorded `queued` at once and ingested on a background
//! task, a few at a time (extraction runs a child process per PDF; more at once would only
//! contend for the same cores). The ingestor records progress in the store as it goes, so
//! any replica can answer `GET …/documents/{doc}`; a failure leaves the document `failed` with a message
//! naming it and the problem (the ingestor's), and the server goes on.
//!
//! At start, documents left `queued` or `ingesting` by a process that died are marked
//! `failed` ([`sweep_interrupted`]): their bytes were only in that process's memory.

use std::sync::Arc;

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

/// Mark every document still `queued` or `ingesting` as `failed` ([`INTERRUPTED`]): called
/// once at start, before this process queues anything. Returns how many.
pub async fn sweep_interrupted(store: &Store) -> Result<usize, StoreError> {
    let mut users: Vec<String> = store
        .list_users()
        .await?
        .into_iter()
        .map(|u| u.id)
        .collect();
    users.push(crate::auth::LOCAL_USER.to_string());
    let mut swept = 0;
    for user_id in &users {
        for kb in store.list_kbs(user_id).await? {
            for doc in store.kb_documents(&kb.id, user_id).await? {
                if matches!(
                    doc.status,
                    KbDocumentStatus::Queued | KbDocumentStatus::Ingesting
                ) {
                    let message = format!("{}: {INTERRUPTED}", doc.name);
                    store
                        .set_kb_document_status(
                            &doc.id,
                            user_id,
                            KbDocumentStatus::Failed,
                            Some(&message),
                        )
                        .await?;
                    swept += 1;
                }
            }
        }
    }
    Ok(swept)
}
