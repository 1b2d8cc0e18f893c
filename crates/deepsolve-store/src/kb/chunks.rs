//! The chunks of a knowledge base's documents, and their embeddings.

use sqlx::Row;
use sqlx::any::AnyRow;

use super::bump_generation;
use super::documents::document_kb;
use crate::error::StoreError;
use crate::{Store, new_id};

/// Rows per INSERT: 7 parameters each stays far below every backend's parameter limit, and
/// one statement per hundred chunks keeps a 200 000-chunk ingest to 2 000 round trips.
const INSERT_BATCH: usize = 100;

/// A chunk as the ingest made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewKbChunk {
    /// Its position in the document (0-based).
    pub ordinal: u32,
    /// The page it starts on (1-based), when the format has pages.
    pub page: Option<u32>,
    /// The headings it sits under, outermost first.
    pub heading_path: Vec<String>,
    pub text: String,
}

/// A stored chunk, with the name of its document (what a citation shows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KbChunk {
    pub id: String,
    pub document_id: String,
    pub kb_id: String,
    pub document_name: String,
    pub ordinal: u32,
    pub page: Option<u32>,
    pub heading_path: Vec<String>,
    pub text: String,
}

/// What [`Store::insert_kb_chunks_within`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkInsert {
    /// The new chunks' ids, in the order given.
    Inserted(Vec<String>),
    /// Nothing: the KB already holds `existing` chunks and these would take it over the limit.
    OverLimit { existing: u64 },
}

/// A chunk's vector.
#[derive(Debug, Clone, PartialEq)]
pub struct KbEmbedding {
    pub chunk_id: String,
    pub vector: Vec<f32>,
}

const CHUNK_SELECT: &str = "SELECT c.id, c.document_id, c.kb_id, d.name AS document_name, \
     c.ordinal, c.page, c.heading_path, c.text FROM kb_chunks c \
     JOIN kb_documents d ON d.id = c.document_id";

fn chunk_from_row(row: &AnyRow) -> Result<KbChunk, StoreError> {
    let heading_path: String = row.try_get("heading_path")?;
    let ordinal: i64 = row.try_get("ordinal")?;
    let page: Option<i64> = row.try_get("page")?;
    Ok(KbChunk {
        id: row.try_get("id")?,
        document_id: row.try_get("document_id")?,
        kb_id: row.try_get("kb_id")?,
        document_name: row.try_get("document_name")?,
        ordinal: u32::try_from(ordinal).map_err(|e| StoreError::corrupt("chunk ordinal", e))?,
        page: page
            .map(u32::try_from)
            .transpose()
            .map_err(|e| StoreError::corrupt("chunk page", e))?,
        heading_path: serde_json::from_str(&heading_path)
            .map_err(|e| StoreError::corrupt("chunk heading path", e))?,
        text: row.try_get("text")?,
    })
}

/// Vectors are stored as little-endian f32s: compact, and the same bytes on every backend.
pub(crate) fn encode_vector(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(crate) fn decode_vector(bytes: &[u8]) -> Result<Vec<f32>, StoreError> {
    if !bytes.len().is_multiple_of(4) {
        return Err(StoreError::corrupt(
            "chunk embedding",
            format!("{} bytes is not a whole number of f32s", bytes.len()),
        ));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

/// One multi-row INSERT of chunks into `tx`.
async fn insert_batch(
    tx: &mut sqlx::AnyConnection,
    document_id: &str,
    kb_id: &str,
    chunks: &[NewKbChunk],
    ids: &mut Vec<String>,
) -> Result<(), StoreError> {
    let rows: Vec<String> = (0..chunks.len())
        .map(|i| {
            let b = i * 7;
            format!(
                "(${}, ${}, ${}, ${}, ${}, ${}, ${})",
                b + 1,
                b + 2,
                b + 3,
                b + 4,
                b + 5,
                b + 6,
                b + 7
            )
        })
        .collect();
    let sql = format!(
        "INSERT INTO kb_chunks (id, document_id, kb_id, ordinal, page, heading_path, text) VALUES {}",
        rows.join(", ")
    );
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for chunk in chunks {
        let id = new_id("kbc");
        let heading_path = serde_json::to_string(&chunk.heading_path)
            .map_err(|e| StoreError::Invalid(format!("heading path: {e}")))?;
        query = query
            .bind(id.clone())
            .bind(document_id.to_string())
            .bind(kb_id.to_string())
            .bind(i64::from(chunk.ordinal))
            .bind(chunk.page.map(i64::from))
            .bind(heading_path)
            .bind(chunk.text.clone());
        ids.push(id);
    }
    query.execute(&mut *tx).await?;
    Ok(())
}

impl Store {
    /// Add chunks to a document of this user, in batches inside one transaction (all or
    /// none). Returns their ids in the order given.
    pub async fn insert_kb_chunks(
        &self,
        document_id: &str,
        user_id: &str,
        chunks: &[NewKbChunk],
    ) -> Result<Vec<String>, StoreError> {
        let _gate = self.write_gate().await;
        let mut tx = self.pool().begin().await?;
        let kb_id = document_kb(&mut tx, document_id, user_id).await?;
        let mut ids = Vec::with_capacity(chunks.len());
        for batch in chunks.chunks(INSERT_BATCH) {
            insert_batch(&mut tx, document_id, &kb_id, batch, &mut ids).await?;
        }
        bump_generation(&mut tx, &kb_id, user_id).await?;
        tx.commit().await?;
        Ok(ids)
    }

    /// [`Store::insert_kb_chunks`] unless the KB would then hold more than `limit` chunks
    /// (its documents in any status): counted and inserted in one transaction that holds the
    /// KB's row (its generation is bumped first), so two documents ingested at once cannot
    /// both slip under the limit.
    pub async fn insert_kb_chunks_within(
        &self,
        document_id: &str,
        user_id: &str,
        chunks: &[NewKbChunk],
        limit: u64,
    ) -> Result<ChunkInsert, StoreError> {
        let _gate = self.write_gate().await;
        let mut tx = self.pool().begin().await?;
        let kb_id = document_kb(&mut tx, document_id, user_id).await?;
        bump_generation(&mut tx, &kb_id, user_id).await?;
        let existing: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM kb_chunks WHERE kb_id = $1")
            .bind(&kb_id)
            .fetch_one(&mut *tx)
            .await?;
        let existing = u64::try_from(existing).unwrap_or(0);
        if existing.saturating_add(chunks.len() as u64) > limit {
            // Nothing was written but the bump. Rolled back here, while the write gate is
            // held: a dropped transaction rolls back later, on its connection's next use, and
            // the next writer on another connection would find the database locked meanwhile.
            tx.rollback().await?;
            return Ok(ChunkInsert::OverLimit { existing });
        }
        let mut ids = Vec::with_capacity(chunks.len());
        for batch in chunks.chunks(INSERT_BATCH) {
            insert_batch(&mut tx, document_id, &kb_id, batch, &mut ids).await?;
        }
        tx.commit().await?;
        Ok(ChunkInsert::Inserted(ids))
    }

    /// The searchable chunks (of `ready` documents) of a KB of this user, in id order (the
    /// order they were added), `limit` at a time after the chunk id `after`: what an index
    /// rebuild reads.
    pub async fn kb_chunks_page(
        &self,
        kb_id: &str,
        user_id: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<KbChunk>, StoreError> {
        let sql = format!(
            "{CHUNK_SELECT} WHERE c.kb_id = $1 AND d.user_id = $2 AND d.status = 'ready' \
             AND c.id > $3 ORDER BY c.id LIMIT $4"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(kb_id)
            .bind(user_id)
            .bind(after.unwrap_or(""))
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(chunk_from_row).collect()
    }

    /// The chunks of a document of this user, by ordinal (any status).
    pub async fn kb_document_chunks(
        &self,
        document_id: &str,
        user_id: &str,
    ) -> Result<Vec<KbChunk>, StoreError> {
        let sql = format!(
            "{CHUNK_SELECT} WHERE c.document_id = $1 AND d.user_id = $2 ORDER BY c.ordinal, c.id"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(document_id)
            .bind(user_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(chunk_from_row).collect()
    }

    /// Chunks of a KB of this user by id (searchable ones only; unknown ids are left out).
    pub async fn kb_chunks_by_ids(
        &self,
        kb_id: &str,
        user_id: &str,
        ids: &[String],
    ) -> Result<Vec<KbChunk>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let marks: Vec<String> = (0..ids.len()).map(|i| format!("${}", i + 3)).collect();
        let sql = format!(
            "{CHUNK_SELECT} WHERE c.kb_id = $1 AND d.user_id = $2 AND d.status = 'ready' \
             AND c.id IN ({})",
            marks.join(", ")
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(kb_id)
            .bind(user_id);
        for id in ids {
            query = query.bind(id.clone());
        }
        let rows = query.fetch_all(self.pool()).await?;
        rows.iter().map(chunk_from_row).collect()
    }

    /// Store vectors for chunks of a KB of this user. The KB's embedding model must be
    /// recorded first ([`Store::set_kb_embedding_model`]) and every vector must have its
    /// dimension, so one KB never mixes incomparable vectors.
    pub async fn set_kb_chunk_embeddings(
        &self,
        kb_id: &str,
        user_id: &str,
        embeddings: &[KbEmbedding],
    ) -> Result<(), StoreError> {
        let _gate = self.write_gate().await;
        let mut tx = self.pool().begin().await?;
        let dimension: Option<Option<i64>> = sqlx::query_scalar(
            "SELECT embedding_dimension FROM knowledge_bases WHERE id = $1 AND user_id = $2",
        )
        .bind(kb_id)
        .bind(user_id)
        .fetch_optional(&mut *tx)
        .await?;
        let dimension = dimension
            .ok_or(StoreError::NotFound("knowledge base"))?
            .ok_or_else(|| {
                StoreError::Invalid("record the knowledge base's embedding model first".into())
            })?;
        for e in embeddings {
            if i64::try_from(e.vector.len()).ok() != Some(dimension) {
                return Err(StoreError::Invalid(format!(
                    "an embedding of dimension {} for a knowledge base of dimension {dimension}",
                    e.vector.len()
                )));
            }
            sqlx::query("UPDATE kb_chunks SET embedding = $1 WHERE id = $2 AND kb_id = $3")
                .bind(encode_vector(&e.vector))
                .bind(&e.chunk_id)
                .bind(kb_id)
                .execute(&mut *tx)
                .await?;
        }
        bump_generation(&mut tx, kb_id, user_id).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The vectors of searchable chunks of a KB of this user, in id order, `limit` at a time
    /// after `after`: what brute-force vector search scans.
    pub async fn kb_embeddings_page(
        &self,
        kb_id: &str,
        user_id: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<KbEmbedding>, StoreError> {
        let rows = sqlx::query(
            "SELECT c.id, c.embedding FROM kb_chunks c JOIN kb_documents d ON d.id = c.document_id \
             WHERE c.kb_id = $1 AND d.user_id = $2 AND d.status = 'ready' \
             AND c.embedding IS NOT NULL AND c.id > $3 ORDER BY c.id LIMIT $4",
        )
        .bind(kb_id)
        .bind(user_id)
        .bind(after.unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let bytes: Vec<u8> = row.try_get("embedding")?;
                Ok(KbEmbedding {
                    chunk_id: row.try_get("id")?,
                    vector: decode_vector(&bytes)?,
                })
            })
            .collect()
    }

    /// Chunks of a KB of this user that have no vector yet (any document status), in id
    /// order, `limit` at a time: what embedding (or re-embedding) works through.
    pub async fn kb_chunks_missing_embedding(
        &self,
        kb_id: &str,
        user_id: &str,
        limit: u32,
    ) -> Result<Vec<KbChunk>, StoreError> {
        let sql = format!(
            "{CHUNK_SELECT} WHERE c.kb_id = $1 AND d.user_id = $2 AND c.embedding IS NULL \
             ORDER BY c.id LIMIT $3"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(kb_id)
            .bind(user_id)
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(chunk_from_row).collect()
    }
}
