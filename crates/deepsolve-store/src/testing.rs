//! Support for tests in this and other crates: scratch PostgreSQL databases.

use sqlx::{AnyConnection, Connection, Executor};

use crate::error::StoreError;

/// The env var that points tests at a PostgreSQL server (`scripts/start-postgres` sets it).
pub const TEST_POSTGRES_ENV: &str = "DEEPSOLVE_TEST_POSTGRES_URL";

/// Create an empty database `ds_test_<uuid>` on the server of `base_url` and return its URL,
/// so tests never see each other's rows.
pub async fn scratch_postgres_database(base_url: &str) -> Result<String, StoreError> {
    sqlx::any::install_default_drivers();
    let name = format!("ds_test_{}", uuid::Uuid::now_v7().simple());
    let mut conn = AnyConnection::connect(base_url).await?;
    conn.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .await?;
    conn.close().await?;
    let (prefix, _) = base_url
        .rsplit_once('/')
        .ok_or_else(|| StoreError::UnsupportedUrl(crate::redact_url(base_url)))?;
    Ok(format!("{prefix}/{name}"))
}

/// A scratch database when `DEEPSOLVE_TEST_POSTGRES_URL` is set, else `Ok(None)` (skip).
pub async fn scratch_postgres_from_env() -> Result<Option<String>, StoreError> {
    match std::env::var(TEST_POSTGRES_ENV) {
        Ok(base) => scratch_postgres_database(&base).await.map(Some),
        Err(_) => Ok(None),
    }
}
