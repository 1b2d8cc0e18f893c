//! Sessions (conversations). Every read is scoped by the owner: a session of another user is
//! indistinguishable from one that does not exist.

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::error::StoreError;
use crate::model::Session;
use crate::{Store, new_id, now_ms};

/// Longest title kept (characters); titles come from the first problem.
const TITLE_CHARS: usize = 80;

fn session_from_row(row: &AnyRow) -> Result<Session, StoreError> {
    Ok(Session {
        id: row.try_get("id")?,
        user_id: row.try_get("user_id")?,
        title: row.try_get("title")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

/// A one-line title from a problem.
pub(crate) fn title_from(problem: &str) -> String {
    let line = problem.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= TITLE_CHARS {
        line
    } else {
        let cut: String = line.chars().take(TITLE_CHARS - 1).collect();
        format!("{cut}…")
    }
}

impl Store {
    pub async fn create_session(&self, user_id: &str, title: &str) -> Result<Session, StoreError> {
        // The connection first: the gate is then held only for the write itself, not while
        // waiting for a pool slot behind readers.
        let mut conn = self.pool().acquire().await?;
        let _gate = self.write_gate().await;
        let now = now_ms();
        let session = Session {
            id: new_id("ses"),
            user_id: user_id.to_string(),
            title: title_from(title),
            created_at: now,
            updated_at: now,
        };
        sqlx::query(
            "INSERT INTO sessions (id, user_id, title, created_at, updated_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&session.id)
        .bind(&session.user_id)
        .bind(&session.title)
        .bind(now)
        .bind(now)
        .execute(&mut *conn)
        .await?;
        Ok(session)
    }

    pub async fn session(&self, id: &str, user_id: &str) -> Result<Option<Session>, StoreError> {
        let row = sqlx::query(
            "SELECT id, user_id, title, created_at, updated_at FROM sessions WHERE id = $1 AND user_id = $2",
        )
        .bind(id)
        .bind(user_id)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(session_from_row).transpose()
    }

    /// A user's sessions, most recently active first.
    pub async fn list_sessions(
        &self,
        user_id: &str,
        limit: u32,
    ) -> Result<Vec<Session>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, user_id, title, created_at, updated_at FROM sessions WHERE user_id = $1 \
             ORDER BY updated_at DESC, id DESC LIMIT $2",
        )
        .bind(user_id)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(session_from_row).collect()
    }

    /// Delete a session with its turns, events and artifacts. Refused while one of its turns
    /// is running (its events would have nowhere to go). `Ok(false)`: no such session.
    pub async fn delete_session(&self, id: &str, user_id: &str) -> Result<bool, StoreError> {
        let _gate = self.write_gate().await;
        let mut tx = self.pool().begin().await?;
        let running: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM turns WHERE session_id = $1 AND user_id = $2 AND status = 'running'",
        )
        .bind(id)
        .bind(user_id)
        .fetch_one(&mut *tx)
        .await?;
        if running > 0 {
            return Err(StoreError::Conflict(
                "a turn of this session is still running; cancel it first".into(),
            ));
        }
        // Children first: correct even where foreign keys are not enforced.
        for sql in [
            "DELETE FROM turn_events WHERE turn_id IN (SELECT id FROM turns WHERE session_id = $1 AND user_id = $2)",
            "DELETE FROM artifacts WHERE turn_id IN (SELECT id FROM turns WHERE session_id = $1 AND user_id = $2)",
            "DELETE FROM turn_images WHERE turn_id IN (SELECT id FROM turns WHERE session_id = $1 AND user_id = $2)",
            "DELETE FROM turns WHERE session_id = $1 AND user_id = $2",
        ] {
            sqlx::query(sql)
                .bind(id)
                .bind(user_id)
                .execute(&mut *tx)
                .await?;
        }
        let done = sqlx::query("DELETE FROM sessions WHERE id = $1 AND user_id = $2")
            .bind(id)
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected() > 0)
    }
}
