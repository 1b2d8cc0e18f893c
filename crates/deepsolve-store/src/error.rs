//! The store's one error type.

/// Why a store operation failed. Database errors keep their source for logs; the server maps
/// them to a 500 without echoing the text to clients.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unsupported database URL '{0}': use sqlite://PATH or postgres://…")]
    UnsupportedUrl(String),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("a stored record is unreadable ({what}): {message}")]
    Corrupt { what: &'static str, message: String },
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Invalid(String),
    /// A write named a record that does not exist for this user (another user's reads as
    /// missing too).
    #[error("{0} not found")]
    NotFound(&'static str),
}

impl StoreError {
    pub(crate) fn corrupt(what: &'static str, err: impl std::fmt::Display) -> Self {
        StoreError::Corrupt {
            what,
            message: err.to_string(),
        }
    }
}
