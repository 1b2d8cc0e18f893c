//! Browser sessions: what the web UI's `HttpOnly` cookie names once a user signed in with a
//! token. Like tokens, a session's secret is 256 random bits of which only the SHA-256 is
//! stored; a session ends at its expiry, at logout, or when its user is revoked.

use std::time::Duration;

use rand::RngCore;
use sqlx::Row;

use crate::error::StoreError;
use crate::model::{BrowserSession, IssuedBrowserSession};
use crate::users::{hash_token, user_from_row};
use crate::{Store, now_ms};

/// The visible prefix of every session secret (tokens have `dst_`).
const SECRET_PREFIX: &str = "dss_";

impl Store {
    /// Start a browser session for a user, valid for `ttl`; its secret is returned once.
    /// Expired sessions (anyone's) are deleted on the way, so the table holds live ones.
    pub async fn create_browser_session(
        &self,
        user_id: &str,
        ttl: Duration,
    ) -> Result<IssuedBrowserSession, StoreError> {
        let _gate = self.write_gate().await;
        let now = now_ms();
        sqlx::query("DELETE FROM browser_sessions WHERE expires_at <= $1")
            .bind(now)
            .execute(self.pool())
            .await?;
        let mut secret = [0u8; 32];
        rand::rng().fill_bytes(&mut secret);
        let issued = IssuedBrowserSession {
            secret: format!("{SECRET_PREFIX}{}", hex::encode(secret)),
            user_id: user_id.to_string(),
            expires_at: now.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)),
        };
        sqlx::query(
            "INSERT INTO browser_sessions (secret_hash, user_id, created_at, expires_at) \
             VALUES ($1, $2, $3, $4)",
        )
        .bind(hash_token(&issued.secret))
        .bind(user_id)
        .bind(now)
        .bind(issued.expires_at)
        .execute(self.pool())
        .await?;
        Ok(issued)
    }

    /// The live session a secret names, with its user (`None`: unknown, expired or ended).
    pub async fn browser_session(
        &self,
        secret: &str,
    ) -> Result<Option<BrowserSession>, StoreError> {
        if !secret.starts_with(SECRET_PREFIX) || secret.len() > 256 {
            return Ok(None);
        }
        let row = sqlx::query(
            "SELECT u.id, u.name, u.role, u.created_at, s.expires_at FROM browser_sessions s \
             JOIN users u ON u.id = s.user_id WHERE s.secret_hash = $1 AND s.expires_at > $2",
        )
        .bind(hash_token(secret))
        .bind(now_ms())
        .fetch_optional(self.pool())
        .await?;
        row.map(|row| {
            Ok(BrowserSession {
                user: user_from_row(&row)?,
                expires_at: row.try_get("expires_at")?,
            })
        })
        .transpose()
    }

    /// End one session (logout); `false` if it was not live.
    pub async fn delete_browser_session(&self, secret: &str) -> Result<bool, StoreError> {
        let _gate = self.write_gate().await;
        let done = sqlx::query("DELETE FROM browser_sessions WHERE secret_hash = $1")
            .bind(hash_token(secret))
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// End every session of a user; returns how many there were.
    pub async fn revoke_browser_sessions(&self, user_id: &str) -> Result<u64, StoreError> {
        let _gate = self.write_gate().await;
        let done = sqlx::query("DELETE FROM browser_sessions WHERE user_id = $1")
            .bind(user_id)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected())
    }
}
