//! Artifacts (files a turn produced), stored in the database so every replica can serve them.
//! Reads are scoped by owner.

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::error::StoreError;
use crate::model::{ArtifactMeta, ArtifactOrigin, NewArtifact};
use crate::{Store, new_id, now_ms, to_i64, to_u64};

const META_COLUMNS: &str = "id, turn_id, user_id, name, mime, size, created_at, origin";

fn meta_from_row(row: &AnyRow) -> Result<ArtifactMeta, StoreError> {
    Ok(ArtifactMeta {
        id: row.try_get("id")?,
        turn_id: row.try_get("turn_id")?,
        user_id: row.try_get("user_id")?,
        name: row.try_get("name")?,
        mime: row.try_get("mime")?,
        size: to_u64(row.try_get("size")?),
        created_at: row.try_get("created_at")?,
        origin: ArtifactOrigin::parse(&row.try_get::<String, _>("origin")?),
    })
}

impl Store {
    pub async fn put_artifact(&self, new: NewArtifact) -> Result<ArtifactMeta, StoreError> {
        let _gate = self.write_gate().await;
        let meta = ArtifactMeta {
            id: new_id("art"),
            turn_id: new.turn_id,
            user_id: new.user_id,
            name: new.name,
            mime: new.mime,
            size: new.content.len() as u64,
            created_at: now_ms(),
            origin: new.origin,
        };
        sqlx::query(
            "INSERT INTO artifacts (id, turn_id, user_id, name, mime, size, content, created_at, origin) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&meta.id)
        .bind(&meta.turn_id)
        .bind(&meta.user_id)
        .bind(&meta.name)
        .bind(&meta.mime)
        .bind(to_i64(meta.size))
        .bind(new.content)
        .bind(meta.created_at)
        .bind(meta.origin.as_str())
        .execute(self.pool())
        .await?;
        Ok(meta)
    }

    /// An artifact with its content, if it belongs to this user.
    pub async fn artifact(
        &self,
        id: &str,
        user_id: &str,
    ) -> Result<Option<(ArtifactMeta, Vec<u8>)>, StoreError> {
        let sql =
            format!("SELECT {META_COLUMNS}, content FROM artifacts WHERE id = $1 AND user_id = $2");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .bind(user_id)
            .fetch_optional(self.pool())
            .await?;
        row.map(|r| Ok((meta_from_row(&r)?, r.try_get("content")?)))
            .transpose()
    }

    pub async fn turn_artifacts(&self, turn_id: &str) -> Result<Vec<ArtifactMeta>, StoreError> {
        let sql = format!(
            "SELECT {META_COLUMNS} FROM artifacts WHERE turn_id = $1 ORDER BY created_at, id"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(turn_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(meta_from_row).collect()
    }
}
