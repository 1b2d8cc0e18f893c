//! Knowledge bases: a user's documents, their chunks and the chunks' embeddings. Every read and
//! write is scoped by the owner in the SQL itself, so another user's knowledge base reads as
//! missing. Every change to what retrieval could see bumps the knowledge base's `generation`,
//! which is how each replica's full-text index knows it has fallen behind.

mod chunks;
mod documents;
mod pages;

use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};

pub use chunks::{ChunkInsert, KbChunk, KbEmbedding, NewKbChunk};
pub use documents::{KbDocument, KbDocumentStatus, NewKbDocument};
pub use pages::{KbPage, NewKbPage};

use crate::error::StoreError;
use crate::{Store, new_id, now_ms, to_u64};

/// Longest knowledge-base name kept (characters).
const NAME_CHARS: usize = 120;

/// The embedding model a knowledge base's vectors were made with. Vectors of another model
/// or dimension are not comparable, so a mismatch means re-embedding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddingSpec {
    pub model: String,
    pub dimension: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnowledgeBase {
    pub id: String,
    pub user_id: String,
    pub name: String,
    pub created_at: i64,
    pub updated_at: i64,
    /// Bumped by every change to its documents, chunks or embeddings.
    pub generation: u64,
    pub embedding: Option<EmbeddingSpec>,
    /// Set for a turn's own attachments: a hidden knowledge base that [`Store::list_kbs`]
    /// never shows.
    pub turn_id: Option<String>,
}

const KB_COLUMNS: &str = "id, user_id, name, created_at, updated_at, generation, \
                          embedding_model, embedding_dimension, turn_id";

fn kb_from_row(row: &AnyRow) -> Result<KnowledgeBase, StoreError> {
    let model: Option<String> = row.try_get("embedding_model")?;
    let dimension: Option<i64> = row.try_get("embedding_dimension")?;
    let embedding = match (model, dimension) {
        (Some(model), Some(dimension)) => Some(EmbeddingSpec {
            model,
            dimension: u32::try_from(dimension)
                .map_err(|e| StoreError::corrupt("embedding dimension", e))?,
        }),
        _ => None,
    };
    Ok(KnowledgeBase {
        id: row.try_get("id")?,
        user_id: row.try_get("user_id")?,
        name: row.try_get("name")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        generation: to_u64(row.try_get("generation")?),
        embedding,
        turn_id: row.try_get("turn_id")?,
    })
}

fn valid_kb_name(name: &str) -> Result<String, StoreError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > NAME_CHARS || name.chars().any(char::is_control) {
        return Err(StoreError::Invalid(format!(
            "invalid knowledge base name: 1-{NAME_CHARS} characters, no control characters"
        )));
    }
    Ok(name.to_string())
}

/// Bump a knowledge base's generation inside the caller's transaction; `NotFound` when it is
/// not this user's.
pub(crate) async fn bump_generation(
    conn: &mut AnyConnection,
    kb_id: &str,
    user_id: &str,
) -> Result<(), StoreError> {
    let done = sqlx::query(
        "UPDATE knowledge_bases SET generation = generation + 1, updated_at = $1 \
         WHERE id = $2 AND user_id = $3",
    )
    .bind(now_ms())
    .bind(kb_id)
    .bind(user_id)
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() == 0 {
        return Err(StoreError::NotFound("knowledge base"));
    }
    Ok(())
}

impl Store {
    /// A new, empty knowledge base; `Conflict` when the user already has one of that name.
    pub async fn create_kb(&self, user_id: &str, name: &str) -> Result<KnowledgeBase, StoreError> {
        let name = valid_kb_name(name)?;
        self.insert_kb(user_id, name, None).await
    }

    /// The hidden knowledge base holding a turn's own attachments: the existing one, or a new
    /// one. Its name is derived from the turn id, so it never takes a name the user chose.
    pub async fn turn_attachments_kb(
        &self,
        user_id: &str,
        turn_id: &str,
    ) -> Result<KnowledgeBase, StoreError> {
        if let Some(kb) = self.find_turn_kb(user_id, turn_id).await? {
            return Ok(kb);
        }
        let name = format!("attachments of {turn_id}");
        match self.insert_kb(user_id, name, Some(turn_id)).await {
            // Two callers raced to create it: the other one's is the turn's.
            Err(StoreError::Conflict(_)) => self
                .find_turn_kb(user_id, turn_id)
                .await?
                .ok_or(StoreError::NotFound("knowledge base")),
            other => other,
        }
    }

    async fn find_turn_kb(
        &self,
        user_id: &str,
        turn_id: &str,
    ) -> Result<Option<KnowledgeBase>, StoreError> {
        let sql = format!(
            "SELECT {KB_COLUMNS} FROM knowledge_bases WHERE user_id = $1 AND turn_id = $2 \
             ORDER BY id LIMIT 1"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(user_id)
            .bind(turn_id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(kb_from_row).transpose()
    }

    async fn insert_kb(
        &self,
        user_id: &str,
        name: String,
        turn_id: Option<&str>,
    ) -> Result<KnowledgeBase, StoreError> {
        let _gate = self.write_gate().await;
        let mut tx = self.pool().begin().await?;
        let taken: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM knowledge_bases WHERE user_id = $1 AND name = $2",
        )
        .bind(user_id)
        .bind(&name)
        .fetch_one(&mut *tx)
        .await?;
        if taken > 0 {
            return Err(StoreError::Conflict(format!(
                "a knowledge base named '{name}' already exists"
            )));
        }
        let now = now_ms();
        let kb = KnowledgeBase {
            id: new_id("kb"),
            user_id: user_id.to_string(),
            name,
            created_at: now,
            updated_at: now,
            generation: 0,
            embedding: None,
            turn_id: turn_id.map(str::to_string),
        };
        sqlx::query(
            "INSERT INTO knowledge_bases (id, user_id, name, created_at, updated_at, generation, \
             turn_id) VALUES ($1, $2, $3, $4, $5, 0, $6)",
        )
        .bind(&kb.id)
        .bind(&kb.user_id)
        .bind(&kb.name)
        .bind(now)
        .bind(now)
        .bind(kb.turn_id.clone())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(kb)
    }

    /// A user's knowledge bases, by name (not the hidden ones of turns' attachments).
    pub async fn list_kbs(&self, user_id: &str) -> Result<Vec<KnowledgeBase>, StoreError> {
        let sql = format!(
            "SELECT {KB_COLUMNS} FROM knowledge_bases WHERE user_id = $1 AND turn_id IS NULL \
             ORDER BY name, id"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(user_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(kb_from_row).collect()
    }

    pub async fn kb(&self, id: &str, user_id: &str) -> Result<Option<KnowledgeBase>, StoreError> {
        let sql =
            format!("SELECT {KB_COLUMNS} FROM knowledge_bases WHERE id = $1 AND user_id = $2");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .bind(user_id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(kb_from_row).transpose()
    }

    /// Delete a knowledge base with its documents and chunks; `false`: no such KB.
    pub async fn delete_kb(&self, id: &str, user_id: &str) -> Result<bool, StoreError> {
        let _gate = self.write_gate().await;
        let mut tx = self.pool().begin().await?;
        let found: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM knowledge_bases WHERE id = $1 AND user_id = $2",
        )
        .bind(id)
        .bind(user_id)
        .fetch_one(&mut *tx)
        .await?;
        if found == 0 {
            return Ok(false);
        }
        // Children first and explicitly: the cascade would do it, but not every SQLite
        // connection is guaranteed to run with foreign keys on.
        for sql in [
            "DELETE FROM kb_chunks WHERE kb_id = $1",
            "DELETE FROM kb_pages WHERE document_id IN \
             (SELECT id FROM kb_documents WHERE kb_id = $1)",
            "DELETE FROM kb_documents WHERE kb_id = $1",
            "DELETE FROM knowledge_bases WHERE id = $1",
        ] {
            sqlx::query(sql).bind(id).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Record the embedding model of a KB's vectors. A different model or dimension than the
    /// recorded one makes every stored vector incomparable, so they are cleared with it
    /// (`None` clears them too).
    pub async fn set_kb_embedding_model(
        &self,
        kb_id: &str,
        user_id: &str,
        spec: Option<&EmbeddingSpec>,
    ) -> Result<(), StoreError> {
        let _gate = self.write_gate().await;
        let mut tx = self.pool().begin().await?;
        bump_generation(&mut tx, kb_id, user_id).await?;
        let current: Option<(Option<String>, Option<i64>)> = sqlx::query_as(
            "SELECT embedding_model, embedding_dimension FROM knowledge_bases WHERE id = $1",
        )
        .bind(kb_id)
        .fetch_optional(&mut *tx)
        .await?;
        let unchanged = match (&current, spec) {
            (Some((Some(model), Some(dim))), Some(spec)) => {
                *model == spec.model && *dim == i64::from(spec.dimension)
            }
            _ => false,
        };
        if !unchanged {
            sqlx::query("UPDATE kb_chunks SET embedding = NULL WHERE kb_id = $1")
                .bind(kb_id)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query(
            "UPDATE knowledge_bases SET embedding_model = $1, embedding_dimension = $2 WHERE id = $3",
        )
        .bind(spec.map(|s| s.model.clone()))
        .bind(spec.map(|s| i64::from(s.dimension)))
        .bind(kb_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }
}
