//! The images a turn was given: stored with the turn (one transaction, see
//! [`Store::create_turn_with_images`]), read back whole to resume it, one at a time to show it.
//! Reads a request can reach are scoped by the caller's user id.

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::Store;
use crate::error::StoreError;
use crate::model::{NewTurn, TurnImageRow};

fn row_image(row: &AnyRow) -> Result<TurnImageRow, StoreError> {
    let pixels = |column: &str| -> Result<u32, StoreError> {
        let value: i64 = row.try_get(column)?;
        u32::try_from(value).map_err(|e| StoreError::corrupt("turn image size", e))
    };
    Ok(TurnImageRow {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        mime: row.try_get("mime")?,
        width: pixels("width")?,
        height: pixels("height")?,
        content: row.try_get("content")?,
    })
}

/// Insert `images` of the new `turn`, in order, inside the transaction that records it.
pub(crate) async fn insert(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    turn: &NewTurn,
    images: &[TurnImageRow],
    now: i64,
) -> Result<(), StoreError> {
    for (position, image) in images.iter().enumerate() {
        sqlx::query(
            "INSERT INTO turn_images (turn_id, id, user_id, position, name, mime, width, height, \
             content, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(&turn.id)
        .bind(&image.id)
        .bind(&turn.user_id)
        .bind(position as i64)
        .bind(&image.name)
        .bind(&image.mime)
        .bind(i64::from(image.width))
        .bind(i64::from(image.height))
        .bind(image.content.clone())
        .bind(now)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

const COLUMNS: &str = "id, name, mime, width, height, content";

impl Store {
    /// Every image of a turn, in the order given (to run it again after a crash).
    pub async fn turn_images(&self, turn_id: &str) -> Result<Vec<TurnImageRow>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM turn_images WHERE turn_id = $1 ORDER BY position");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(turn_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(row_image).collect()
    }

    /// One image of a turn of this user (`None` for another user's, as for a missing one).
    pub async fn turn_image(
        &self,
        turn_id: &str,
        image_id: &str,
        user_id: &str,
    ) -> Result<Option<TurnImageRow>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM turn_images WHERE turn_id = $1 AND id = $2 AND user_id = $3"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(turn_id)
            .bind(image_id)
            .bind(user_id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(row_image).transpose()
    }
}
