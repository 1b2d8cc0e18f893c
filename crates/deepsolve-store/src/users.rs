//! Users and bearer tokens. Tokens are 256 random bits; only their SHA-256 is stored, so a
//! leaked database does not leak usable credentials. (A slow hash buys nothing for secrets of
//! full entropy, and would cost on every request.)

use rand::RngCore;
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::error::StoreError;
use crate::model::{IssuedToken, Role, User};
use crate::{Store, new_id, now_ms};

/// The visible prefix of every token, so leaked ones are easy to recognise in logs and scans.
pub(crate) const TOKEN_PREFIX: &str = "dst_";

/// The stored form of a token.
pub fn hash_token(token: &str) -> String {
    deepsolve_protocol::sha256_hex(token.as_bytes())
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '@'))
}

pub(crate) fn user_from_row(row: &AnyRow) -> Result<User, StoreError> {
    let role: String = row.try_get("role")?;
    Ok(User {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        role: Role::parse(&role).ok_or_else(|| StoreError::corrupt("user role", &role))?,
        created_at: row.try_get("created_at")?,
    })
}

impl Store {
    pub async fn create_user(&self, name: &str, role: Role) -> Result<User, StoreError> {
        if !valid_name(name) {
            return Err(StoreError::Invalid(format!(
                "invalid user name '{}': 1-64 characters of letters, digits, '_', '-', '.', '@'",
                name.chars().take(64).collect::<String>()
            )));
        }
        let _gate = self.write_gate().await;
        if self.user_by_name(name).await?.is_some() {
            return Err(StoreError::Conflict(format!(
                "user '{name}' already exists"
            )));
        }
        let user = User {
            id: new_id("usr"),
            name: name.to_string(),
            role,
            created_at: now_ms(),
        };
        sqlx::query("INSERT INTO users (id, name, role, created_at) VALUES ($1, $2, $3, $4)")
            .bind(&user.id)
            .bind(&user.name)
            .bind(user.role.as_str())
            .bind(user.created_at)
            .execute(self.pool())
            .await?;
        Ok(user)
    }

    pub async fn user_by_name(&self, name: &str) -> Result<Option<User>, StoreError> {
        let row = sqlx::query("SELECT id, name, role, created_at FROM users WHERE name = $1")
            .bind(name)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(user_from_row).transpose()
    }

    pub async fn list_users(&self) -> Result<Vec<User>, StoreError> {
        let rows = sqlx::query("SELECT id, name, role, created_at FROM users ORDER BY name")
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(user_from_row).collect()
    }

    pub async fn count_users(&self) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users")
            .fetch_one(self.pool())
            .await?;
        Ok(crate::to_u64(n))
    }

    /// Issue a new token for a user; its clear text is returned once and never stored.
    pub async fn issue_token(&self, user_id: &str, label: &str) -> Result<IssuedToken, StoreError> {
        let _gate = self.write_gate().await;
        let mut secret = [0u8; 32];
        rand::rng().fill_bytes(&mut secret);
        let token = format!("{TOKEN_PREFIX}{}", hex::encode(secret));
        let issued = IssuedToken {
            id: new_id("tok"),
            user_id: user_id.to_string(),
            token,
        };
        sqlx::query(
            "INSERT INTO tokens (id, user_id, token_hash, label, created_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&issued.id)
        .bind(user_id)
        .bind(hash_token(&issued.token))
        .bind(label)
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        Ok(issued)
    }

    /// The user a token belongs to, if it is known and not revoked.
    pub async fn authenticate(&self, token: &str) -> Result<Option<User>, StoreError> {
        if !token.starts_with(TOKEN_PREFIX) || token.len() > 256 {
            return Ok(None);
        }
        let row = sqlx::query(
            "SELECT u.id, u.name, u.role, u.created_at FROM tokens t JOIN users u ON u.id = t.user_id \
             WHERE t.token_hash = $1 AND t.revoked_at IS NULL",
        )
        .bind(hash_token(token))
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(user_from_row).transpose()
    }

    /// Revoke every token of a user; returns how many were live.
    pub async fn revoke_tokens(&self, user_id: &str) -> Result<u64, StoreError> {
        let _gate = self.write_gate().await;
        let done = sqlx::query(
            "UPDATE tokens SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL",
        )
        .bind(now_ms())
        .bind(user_id)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }
}
