//! A document's whole extracted text, page by page: what a reader pages through. Chunks
//! overlap, so they cannot give the text back; these rows can, in any window.

use sqlx::Row;
use sqlx::any::AnyRow;

use super::documents::document_kb;
use crate::error::StoreError;
use crate::{Store, to_i64};

/// Rows per INSERT (5 parameters each).
const INSERT_BATCH: usize = 100;

/// A page of a document's text as the ingest made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewKbPage {
    /// The page number (1-based) where the format has pages.
    pub page: Option<u32>,
    pub text: String,
}

/// A stored page: where it starts in the document's text, in characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KbPage {
    pub ordinal: u32,
    pub page: Option<u32>,
    pub start_char: u64,
    pub text: String,
}

fn page_from_row(row: &AnyRow) -> Result<KbPage, StoreError> {
    let ordinal: i64 = row.try_get("ordinal")?;
    let page: Option<i64> = row.try_get("page")?;
    let start: i64 = row.try_get("start_char")?;
    Ok(KbPage {
        ordinal: u32::try_from(ordinal).map_err(|e| StoreError::corrupt("page ordinal", e))?,
        page: page
            .map(u32::try_from)
            .transpose()
            .map_err(|e| StoreError::corrupt("page number", e))?,
        start_char: u64::try_from(start).map_err(|e| StoreError::corrupt("page start", e))?,
        text: row.try_get("text")?,
    })
}

impl Store {
    /// Replace the pages of a document of this user with `pages`, in reading order; each
    /// starts where the one before it ends. Returns the text's length in characters.
    pub async fn set_kb_pages(
        &self,
        document_id: &str,
        user_id: &str,
        pages: &[NewKbPage],
    ) -> Result<u64, StoreError> {
        let _gate = self.write_gate().await;
        let mut tx = self.pool().begin().await?;
        document_kb(&mut tx, document_id, user_id).await?;
        sqlx::query("DELETE FROM kb_pages WHERE document_id = $1")
            .bind(document_id)
            .execute(&mut *tx)
            .await?;
        let mut start = 0u64;
        for (b, batch) in pages.chunks(INSERT_BATCH).enumerate() {
            let marks: Vec<String> = (0..batch.len())
                .map(|i| {
                    let p = i * 5;
                    format!(
                        "(${}, ${}, ${}, ${}, ${})",
                        p + 1,
                        p + 2,
                        p + 3,
                        p + 4,
                        p + 5
                    )
                })
                .collect();
            let sql = format!(
                "INSERT INTO kb_pages (document_id, ordinal, page, start_char, text) VALUES {}",
                marks.join(", ")
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (i, page) in batch.iter().enumerate() {
                let ordinal = b * INSERT_BATCH + i;
                query = query
                    .bind(document_id.to_string())
                    .bind(to_i64(ordinal as u64))
                    .bind(page.page.map(i64::from))
                    .bind(to_i64(start))
                    .bind(page.text.clone());
                start += page.text.chars().count() as u64;
            }
            query.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(start)
    }

    /// The pages of a document of this user that overlap the characters `start..end` of its
    /// text, in order (empty for another user's document).
    pub async fn kb_pages_between(
        &self,
        document_id: &str,
        user_id: &str,
        start: u64,
        end: u64,
    ) -> Result<Vec<KbPage>, StoreError> {
        let rows = sqlx::query(
            "SELECT p.ordinal, p.page, p.start_char, p.text FROM kb_pages p \
             JOIN kb_documents d ON d.id = p.document_id \
             WHERE p.document_id = $1 AND d.user_id = $2 \
             AND p.start_char < $3 AND p.start_char + LENGTH(p.text) > $4 \
             ORDER BY p.ordinal",
        )
        .bind(document_id)
        .bind(user_id)
        .bind(to_i64(end))
        .bind(to_i64(start))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(page_from_row).collect()
    }

    /// The length of a document's text in characters (0 without pages, or for another
    /// user's document).
    pub async fn kb_text_chars(&self, document_id: &str, user_id: &str) -> Result<u64, StoreError> {
        let total: Option<i64> = sqlx::query_scalar(
            "SELECT MAX(p.start_char + LENGTH(p.text)) FROM kb_pages p \
             JOIN kb_documents d ON d.id = p.document_id \
             WHERE p.document_id = $1 AND d.user_id = $2",
        )
        .bind(document_id)
        .bind(user_id)
        .fetch_one(self.pool())
        .await?;
        Ok(total.map_or(0, |t| u64::try_from(t).unwrap_or(0)))
    }
}
