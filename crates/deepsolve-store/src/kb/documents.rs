//! The documents of a knowledge base: what was uploaded and how far its ingest got.

use sqlx::Row;
use sqlx::any::AnyRow;

use super::bump_generation;
use crate::error::StoreError;
use crate::{Store, new_id, now_ms, to_i64, to_u64};

/// Where a document's ingest stands. Only `Ready` documents are searched, so a half-ingested
/// one never answers with half its chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KbDocumentStatus {
    Queued,
    Ingesting,
    Ready,
    Failed,
}

impl KbDocumentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            KbDocumentStatus::Queued => "queued",
            KbDocumentStatus::Ingesting => "ingesting",
            KbDocumentStatus::Ready => "ready",
            KbDocumentStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<KbDocumentStatus> {
        Some(match s {
            "queued" => KbDocumentStatus::Queued,
            "ingesting" => KbDocumentStatus::Ingesting,
            "ready" => KbDocumentStatus::Ready,
            "failed" => KbDocumentStatus::Failed,
            _ => return None,
        })
    }
}

/// A document as uploaded, before ingest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewKbDocument {
    pub name: String,
    /// The format (`pdf`, `docx`, `html`, `markdown`, `text`), as the ingest named it.
    pub kind: String,
    pub size: u64,
    pub pages: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KbDocument {
    pub id: String,
    pub kb_id: String,
    pub user_id: String,
    pub name: String,
    pub kind: String,
    pub size: u64,
    pub pages: Option<u32>,
    pub status: KbDocumentStatus,
    /// Why ingest failed (set with `Failed`).
    pub error: Option<String>,
    pub pages_done: u32,
    pub pages_total: Option<u32>,
    pub created_at: i64,
    /// When its ingest last made progress (every status and progress write touches it): how
    /// [`Store::fail_stale_kb_documents_unscoped`] tells a dead ingest from a live one.
    pub updated_at: i64,
}

const DOC_COLUMNS: &str = "id, kb_id, user_id, name, kind, size, pages, status, error, \
                           pages_done, pages_total, created_at, updated_at";

fn opt_u32(v: Option<i64>) -> Option<u32> {
    v.map(|v| u32::try_from(v).unwrap_or(u32::MAX))
}

fn doc_from_row(row: &AnyRow) -> Result<KbDocument, StoreError> {
    let status: String = row.try_get("status")?;
    Ok(KbDocument {
        id: row.try_get("id")?,
        kb_id: row.try_get("kb_id")?,
        user_id: row.try_get("user_id")?,
        name: row.try_get("name")?,
        kind: row.try_get("kind")?,
        size: to_u64(row.try_get("size")?),
        pages: opt_u32(row.try_get("pages")?),
        status: KbDocumentStatus::parse(&status)
            .ok_or_else(|| StoreError::corrupt("document status", &status))?,
        error: row.try_get("error")?,
        pages_done: opt_u32(Some(row.try_get("pages_done")?)).unwrap_or(0),
        pages_total: opt_u32(row.try_get("pages_total")?),
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

/// An update of one document of this user: `NotFound` when it touched none (another user's,
/// or gone).
fn one_document(rows_affected: u64) -> Result<(), StoreError> {
    if rows_affected == 0 {
        return Err(StoreError::NotFound("document"));
    }
    Ok(())
}

/// The KB a document of this user belongs to, inside the caller's transaction.
pub(super) async fn document_kb(
    conn: &mut sqlx::AnyConnection,
    document_id: &str,
    user_id: &str,
) -> Result<String, StoreError> {
    sqlx::query_scalar("SELECT kb_id FROM kb_documents WHERE id = $1 AND user_id = $2")
        .bind(document_id)
        .bind(user_id)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or(StoreError::NotFound("document"))
}

impl Store {
    /// Add a document (status `queued`) to a KB of this user.
    pub async fn add_kb_document(
        &self,
        kb_id: &str,
        user_id: &str,
        new: NewKbDocument,
    ) -> Result<KbDocument, StoreError> {
        let _gate = self.write_gate().await;
        let mut tx = self.pool().begin().await?;
        bump_generation(&mut tx, kb_id, user_id).await?;
        let now = now_ms();
        let doc = KbDocument {
            id: new_id("kbd"),
            kb_id: kb_id.to_string(),
            user_id: user_id.to_string(),
            name: new.name,
            kind: new.kind,
            size: new.size,
            pages: new.pages,
            status: KbDocumentStatus::Queued,
            error: None,
            pages_done: 0,
            pages_total: new.pages,
            created_at: now,
            updated_at: now,
        };
        sqlx::query(
            "INSERT INTO kb_documents (id, kb_id, user_id, name, kind, size, pages, status, \
             error, pages_done, pages_total, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULL, 0, $9, $10, $10)",
        )
        .bind(&doc.id)
        .bind(&doc.kb_id)
        .bind(&doc.user_id)
        .bind(&doc.name)
        .bind(&doc.kind)
        .bind(to_i64(doc.size))
        .bind(doc.pages.map(i64::from))
        .bind(doc.status.as_str())
        .bind(doc.pages_total.map(i64::from))
        .bind(doc.created_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(doc)
    }

    /// The documents of a KB of this user, oldest first (empty for another user's KB).
    pub async fn kb_documents(
        &self,
        kb_id: &str,
        user_id: &str,
    ) -> Result<Vec<KbDocument>, StoreError> {
        let sql = format!(
            "SELECT {DOC_COLUMNS} FROM kb_documents WHERE kb_id = $1 AND user_id = $2 \
             ORDER BY created_at, id"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(kb_id)
            .bind(user_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(doc_from_row).collect()
    }

    pub async fn kb_document(
        &self,
        id: &str,
        user_id: &str,
    ) -> Result<Option<KbDocument>, StoreError> {
        let sql = format!("SELECT {DOC_COLUMNS} FROM kb_documents WHERE id = $1 AND user_id = $2");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .bind(user_id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(doc_from_row).transpose()
    }

    /// Move a document to `status`; `error` is kept only with `Failed` (a retried document
    /// sheds its old error). Bumps the KB's generation: readiness decides what is searched.
    pub async fn set_kb_document_status(
        &self,
        id: &str,
        user_id: &str,
        status: KbDocumentStatus,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        let _gate = self.write_gate().await;
        let mut tx = self.pool().begin().await?;
        let kb_id = document_kb(&mut tx, id, user_id).await?;
        let error = error.filter(|_| status == KbDocumentStatus::Failed);
        sqlx::query(
            "UPDATE kb_documents SET status = $1, error = $2, updated_at = $3 WHERE id = $4",
        )
        .bind(status.as_str())
        .bind(error)
        .bind(now_ms())
        .bind(id)
        .execute(&mut *tx)
        .await?;
        bump_generation(&mut tx, &kb_id, user_id).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Record ingest progress. Not a change to what is searched, so the generation stays:
    /// a progress tick per page must not invalidate every replica's index.
    pub async fn set_kb_document_progress(
        &self,
        id: &str,
        user_id: &str,
        pages_done: u32,
        pages_total: Option<u32>,
    ) -> Result<(), StoreError> {
        let _gate = self.write_gate().await;
        let done = sqlx::query(
            "UPDATE kb_documents SET pages_done = $1, pages_total = $2, updated_at = $3 \
             WHERE id = $4 AND user_id = $5",
        )
        .bind(i64::from(pages_done))
        .bind(pages_total.map(i64::from))
        .bind(now_ms())
        .bind(id)
        .bind(user_id)
        .execute(self.pool())
        .await?;
        one_document(done.rows_affected())
    }

    /// Record what extraction found: the document's format (by its bytes, which may differ
    /// from what its name said) and its page count. Not a change to what is searched.
    pub async fn set_kb_document_extracted(
        &self,
        id: &str,
        user_id: &str,
        kind: &str,
        pages: Option<u32>,
    ) -> Result<(), StoreError> {
        let _gate = self.write_gate().await;
        let done = sqlx::query(
            "UPDATE kb_documents SET kind = $1, pages = $2, pages_total = $2, updated_at = $3 \
             WHERE id = $4 AND user_id = $5",
        )
        .bind(kind)
        .bind(pages.map(i64::from))
        .bind(now_ms())
        .bind(id)
        .bind(user_id)
        .execute(self.pool())
        .await?;
        one_document(done.rows_affected())
    }

    /// Drop a document's chunks and pages (before a retried ingest, after a failed one),
    /// keeping the document itself. Bumps the KB's generation.
    pub async fn clear_kb_document_content(
        &self,
        id: &str,
        user_id: &str,
    ) -> Result<(), StoreError> {
        let _gate = self.write_gate().await;
        let mut tx = self.pool().begin().await?;
        let kb_id = document_kb(&mut tx, id, user_id).await?;
        for sql in [
            "DELETE FROM kb_chunks WHERE document_id = $1",
            "DELETE FROM kb_pages WHERE document_id = $1",
        ] {
            sqlx::query(sql).bind(id).execute(&mut *tx).await?;
        }
        bump_generation(&mut tx, &kb_id, user_id).await?;
        tx.commit().await?;
        Ok(())
    }

    /// How many chunks a KB of this user holds, of documents in any status (what the
    /// per-KB chunk cap counts).
    pub async fn kb_chunk_count(&self, kb_id: &str, user_id: &str) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM kb_chunks c JOIN kb_documents d ON d.id = c.document_id \
             WHERE c.kb_id = $1 AND d.user_id = $2",
        )
        .bind(kb_id)
        .bind(user_id)
        .fetch_one(self.pool())
        .await?;
        Ok(to_u64(n))
    }

    /// Record that a document's ingest is still alive (while it waits on a long step, such
    /// as the PDF child or an embedding call): only the progress time moves.
    pub async fn touch_kb_document(&self, id: &str, user_id: &str) -> Result<(), StoreError> {
        self.set_kb_document_updated_at(id, user_id, now_ms()).await
    }

    /// Set when a document's ingest last made progress. [`Store::touch_kb_document`] is what
    /// an ingest calls; an explicit time is for tests of the staleness rule.
    pub async fn set_kb_document_updated_at(
        &self,
        id: &str,
        user_id: &str,
        updated_at: i64,
    ) -> Result<(), StoreError> {
        let _gate = self.write_gate().await;
        let done =
            sqlx::query("UPDATE kb_documents SET updated_at = $1 WHERE id = $2 AND user_id = $3")
                .bind(updated_at)
                .bind(id)
                .bind(user_id)
                .execute(self.pool())
                .await?;
        one_document(done.rows_affected())
    }

    /// Mark every document still `queued` or `ingesting` whose ingest made no progress since
    /// `stale_before` (ms since the epoch) as `failed`, of every user, with the error
    /// "NAME: `reason`": their ingest died with its process. A live ingest, of this process
    /// or another replica's, touches its document far more often, so it is left alone; the
    /// check and the update are one statement, so a touch cannot slip between them. Returns
    /// how many were marked. Server bookkeeping only (unscoped).
    pub async fn fail_stale_kb_documents_unscoped(
        &self,
        reason: &str,
        stale_before: i64,
    ) -> Result<u64, StoreError> {
        let _gate = self.write_gate().await;
        let mut tx = self.pool().begin().await?;
        // Readiness decides what is searched, so their KBs move on a generation (a KB bumped
        // for a document touched meanwhile only costs a rebuild).
        sqlx::query(
            "UPDATE knowledge_bases SET generation = generation + 1, updated_at = $1 \
             WHERE id IN (SELECT kb_id FROM kb_documents \
             WHERE status IN ('queued', 'ingesting') AND updated_at < $2)",
        )
        .bind(now_ms())
        .bind(stale_before)
        .execute(&mut *tx)
        .await?;
        let done = sqlx::query(
            "UPDATE kb_documents SET status = 'failed', error = name || $1, updated_at = $2 \
             WHERE status IN ('queued', 'ingesting') AND updated_at < $3",
        )
        .bind(format!(": {reason}"))
        .bind(now_ms())
        .bind(stale_before)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected())
    }

    /// Delete a document with its chunks; `false`: no such document.
    pub async fn delete_kb_document(&self, id: &str, user_id: &str) -> Result<bool, StoreError> {
        let _gate = self.write_gate().await;
        let mut tx = self.pool().begin().await?;
        let kb_id = match document_kb(&mut tx, id, user_id).await {
            Ok(kb_id) => kb_id,
            Err(StoreError::NotFound(_)) => return Ok(false),
            Err(e) => return Err(e),
        };
        for sql in [
            "DELETE FROM kb_chunks WHERE document_id = $1",
            "DELETE FROM kb_pages WHERE document_id = $1",
            "DELETE FROM kb_documents WHERE id = $1",
        ] {
            sqlx::query(sql).bind(id).execute(&mut *tx).await?;
        }
        bump_generation(&mut tx, &kb_id, user_id).await?;
        tx.commit().await?;
        Ok(true)
    }
}
