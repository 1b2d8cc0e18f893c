//! deepsolve-store: persistence for the deepsolve server.
//!
//! Users, bearer tokens and browser sessions (SHA-256 at rest), sessions, turns (spec, status, answer, stop reason,
//! usage, solve record), the append-only turn event log, artifacts, and knowledge bases (their
//! documents, chunks and embeddings).
//!
//! **One code path, two backends.** Every query goes through [`sqlx::Any`]: SQLite (WAL) is
//! the embedded default and PostgreSQL is a URL switch. `Any` was chosen over a trait with two
//! implementations because the schema only needs the types `Any` carries portably (TEXT,
//! BIGINT, BLOB/BYTEA): times are milliseconds since the epoch and JSON documents are TEXT, so
//! each query is written once and both backends run the very same statement (`$n`
//! placeholders work on both). What genuinely differs is kept small and explicit: the DDL type
//! name of blobs (two migration folders, otherwise identical), the SQLite pragmas, and
//! PostgreSQL's LISTEN/NOTIFY for readers on other replicas ([`Store::start_listener`]).
//!
//! Live tailing: [`Store::append_events`] publishes every committed event to in-process
//! readers through the [`Hub`]; see [`Store::subscribe`].

mod artifacts;
mod browser_sessions;
mod error;
mod events;
mod hub;
mod images;
mod kb;
mod listen;
mod model;
mod sessions;
pub mod testing;
mod turns;
mod users;

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sqlx::AnyPool;
use sqlx::any::AnyPoolOptions;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{Executor, SqlSafeStr};

pub use error::StoreError;
pub use hub::{Hub, HubMsg, Received, Subscription};
pub use kb::{
    ChunkInsert, EmbeddingSpec, KbChunk, KbDocument, KbDocumentStatus, KbEmbedding, KbPage,
    KnowledgeBase, NewKbChunk, NewKbDocument, NewKbPage,
};
pub use model::{
    AppendEvent, ArtifactMeta, ArtifactOrigin, BrowserSession, IssuedBrowserSession, IssuedToken,
    NewArtifact, NewTurn, Role, Session, StoredEvent, TurnFinish, TurnImageRow, TurnRecord,
    TurnStatus, User,
};
pub use sqlx::AnyConnection;
pub use users::hash_token;

/// The database behind a URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn from_url(url: &str) -> Result<Backend, StoreError> {
        if url.starts_with("sqlite:") {
            Ok(Backend::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Backend::Postgres)
        } else {
            Err(StoreError::UnsupportedUrl(redact_url(url)))
        }
    }
}

/// Pool and behaviour options.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub max_connections: u32,
    pub acquire_timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            max_connections: 8,
            acquire_timeout: Duration::from_secs(30),
        }
    }
}

/// A handle to the database; cheap to clone.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    pool: AnyPool,
    backend: Backend,
    url: String,
    hub: Arc<Hub>,
    /// SQLite allows one writer at a time; writers that collide wait in SQLite's busy
    /// handler, which sleeps in steps of up to 100 ms. Queueing writers here instead keeps
    /// event latency flat. (`None` on PostgreSQL, which has row locks.)
    write_gate: Option<WriteGates>,
    /// Cancellation requests for turns, from other replicas (see [`Store::request_cancel`]).
    cancels: tokio::sync::broadcast::Sender<String>,
    /// Distinguishes this process's NOTIFYs from other replicas' (it already delivered its own
    /// events in-process).
    process_tag: String,
}

impl Store {
    /// Open (creating an SQLite file if needed) and migrate.
    pub async fn open(url: &str, options: StoreOptions) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        let backend = Backend::from_url(url)?;
        let url = match backend {
            Backend::Sqlite => sqlite_url_with_create(url),
            Backend::Postgres => url.to_string(),
        };
        let pool = pool_options(backend, &options).connect(&url).await?;
        if backend == Backend::Sqlite {
            // WAL is a property of the file: set it once, before concurrent use. Readers then
            // never block the writer, which is what live SSE tails need.
            pool.execute("PRAGMA journal_mode = WAL").await?;
        }
        migrator(backend).run(&pool).await?;
        let store = Store {
            inner: Arc::new(Inner {
                pool,
                backend,
                url,
                hub: Arc::new(Hub::default()),
                write_gate: (backend == Backend::Sqlite).then(WriteGates::default),
                cancels: tokio::sync::broadcast::channel(256).0,
                process_tag: uuid::Uuid::now_v7().simple().to_string(),
            }),
        };
        if backend == Backend::Sqlite {
            spawn_checkpointer(Arc::downgrade(&store.inner));
        }
        Ok(store)
    }

    /// Open an SQLite file by path.
    pub async fn open_sqlite(path: &Path, options: StoreOptions) -> Result<Store, StoreError> {
        Store::open(&format!("sqlite://{}", path.display()), options).await
    }

    pub fn backend(&self) -> Backend {
        self.inner.backend
    }

    pub fn hub(&self) -> &Arc<Hub> {
        &self.inner.hub
    }

    /// Attach a live reader to a turn. Subscribe *before* reading the log, then de-duplicate
    /// by `seq`: events committed in between arrive through the subscription.
    pub fn subscribe(&self, turn_id: &str) -> Subscription {
        self.inner.hub.subscribe(turn_id)
    }

    /// Is the database reachable? (health checks)
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.inner.pool).await?;
        Ok(())
    }

    pub async fn close(&self) {
        self.inner.pool.close().await;
    }

    pub(crate) fn url(&self) -> &str {
        &self.inner.url
    }

    pub(crate) fn pool(&self) -> &AnyPool {
        &self.inner.pool
    }

    /// Held for the length of a write (see `Inner::write_gate`).
    pub(crate) async fn write_gate(&self) -> Option<WriteGuard<'_>> {
        match &self.inner.write_gate {
            Some(gates) => {
                let queue = gates.queue.lock().await;
                let db = gates.db.lock().await;
                Some(WriteGuard {
                    _db: db,
                    _queue: queue,
                })
            }
            None => None,
        }
    }

    /// The write gate for event appends, which skip the queue of other writers (see
    /// [`WriteGates`]).
    pub(crate) async fn event_write_gate(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match &self.inner.write_gate {
            Some(gates) => Some(gates.db.lock().await),
            None => None,
        }
    }
}

/// SQLite's single writer slot, with a priority lane for event appends. Other writers (new
/// turns and sessions, turn ends) queue on `queue` and then take `db`; event appends take
/// `db` directly, so they wait for at most one other write, never for the whole queue: when
/// 2 000 turns start at once, 4 000 session and turn inserts queue up, and events streaming
/// meanwhile waited up to a second behind them in one FIFO.
#[derive(Default)]
pub(crate) struct WriteGates {
    queue: tokio::sync::Mutex<()>,
    db: tokio::sync::Mutex<()>,
}

/// Both gates of an ordinary write (released in field order: `db` first).
pub(crate) struct WriteGuard<'a> {
    _db: tokio::sync::MutexGuard<'a, ()>,
    _queue: tokio::sync::MutexGuard<'a, ()>,
}

/// How often the SQLite WAL is copied back into the database file in the background.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);

/// Checkpoint the WAL mostly off the writers' path. A checkpoint run by a committing
/// connection (SQLite's automatic one) stalls that commit for the copy and an fsync, 30–60 ms
/// under load, with every event waiting behind it; a PASSIVE checkpoint from here copies the
/// pages beside the writer instead. It cannot restart the WAL while appends keep coming (the
/// log is only rewound after a checkpoint that caught up with the last commit), so the
/// automatic checkpoint stays on as well: when it fires, most pages are already copied, and
/// it rewinds the WAL, which keeps the file bounded. The task ends with the store.
fn spawn_checkpointer(inner: std::sync::Weak<Inner>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let mut tick = tokio::time::interval(CHECKPOINT_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(inner) = inner.upgrade() else {
                return;
            };
            if inner.pool.is_closed() {
                return;
            }
            if let Err(e) = inner.pool.execute("PRAGMA wal_checkpoint(PASSIVE)").await {
                tracing::debug!(error = %e, "background WAL checkpoint failed");
            }
        }
    });
}

fn pool_options(backend: Backend, options: &StoreOptions) -> AnyPoolOptions {
    let pool = AnyPoolOptions::new()
        .max_connections(options.max_connections.max(1))
        .acquire_timeout(options.acquire_timeout);
    match backend {
        Backend::Postgres => pool,
        // Per-connection pragmas: NORMAL sync is durable across process crashes in WAL mode
        // (only an OS crash can lose the last transactions); foreign keys and the busy timeout
        // are sqlx's defaults already.
        Backend::Sqlite => pool.after_connect(|conn, _meta| {
            Box::pin(async move {
                conn.execute("PRAGMA synchronous = NORMAL").await?;
                // Under load every event batch dirties one index page per streaming turn
                // (events are keyed by turn, and thousands of turns interleave), so a batch
                // writes ~1 000 pages to the WAL and the default checkpoint threshold (1 000
                // pages) made nearly every commit also run a checkpoint with an fsync. With
                // this threshold a commit checkpoints about once per 40 MiB of WAL, and the
                // background checkpointer (`spawn_checkpointer`) has copied most of it by then.
                conn.execute("PRAGMA wal_autocheckpoint = 10000").await?;
                conn.execute(READER_CACHE).await?;
                Ok(())
            })
        }),
    }
}

/// The page cache of each pooled SQLite connection: SQLite's own default (2 MiB). Each
/// connection keeps its cache until it closes, and the pool's connections are long-lived, so
/// this is memory held for good: eight connections at the 32 MiB they once had held a quarter
/// of a gigabyte after one busy hour. Readers mostly read the pages just written, which a miss
/// fetches from the operating system's file cache (a copy, not a disk read).
const READER_CACHE: &str = "PRAGMA cache_size = -2048";

/// The page cache of the event appender's connection ([`Store::writer_connection`]): the
/// pages an append batch touches are one index leaf per streaming turn (events are keyed by
/// turn, and the turns interleave) plus the table's tail, so 16 MiB keeps the working set of
/// about 4 000 streaming turns in memory, and an append does not re-read the index.
/// (At 4 MiB the resident set a minute after 1 000 turns was ~20 MiB lower, but the appender
/// re-read index pages from the file cache and model delta → SSE client at 1 000 streaming
/// turns went from 114 to 522 ms at p99.)
pub(crate) const APPENDER_CACHE: &str = "PRAGMA cache_size = -16384";

/// `sqlite://path` → `sqlite://path?mode=rwc` so a fresh machine gets its database file.
fn sqlite_url_with_create(url: &str) -> String {
    if url.contains("mode=") || url.contains(":memory:") {
        url.to_string()
    } else if url.contains('?') {
        format!("{url}&mode=rwc")
    } else {
        format!("{url}?mode=rwc")
    }
}

/// A URL without its password, for messages.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &url[scheme_end + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}://{user}:***@{}", &url[..scheme_end], &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

/// The embedded migrations of a backend (no macros, no files at run time), in order.
fn migrator(backend: Backend) -> Migrator {
    let scripts: [(i64, &'static str, &'static str); 6] = match backend {
        Backend::Sqlite => [
            (
                1,
                "init",
                include_str!("../migrations/sqlite/0001_init.sql"),
            ),
            (
                2,
                "browser_sessions",
                include_str!("../migrations/sqlite/0002_browser_sessions.sql"),
            ),
            (
                3,
                "knowledge_bases",
                include_str!("../migrations/sqlite/0003_knowledge_bases.sql"),
            ),
            (
                4,
                "kb_pages",
                include_str!("../migrations/sqlite/0004_kb_pages.sql"),
            ),
            (
                5,
                "artifact_origin",
                include_str!("../migrations/sqlite/0005_artifact_origin.sql"),
            ),
            (
                6,
                "turn_images",
                include_str!("../migrations/sqlite/0006_turn_images.sql"),
            ),
        ],
        Backend::Postgres => [
            (
                1,
                "init",
                include_str!("../migrations/postgres/0001_init.sql"),
            ),
            (
                2,
                "browser_sessions",
                include_str!("../migrations/postgres/0002_browser_sessions.sql"),
            ),
            (
                3,
                "knowledge_bases",
                include_str!("../migrations/postgres/0003_knowledge_bases.sql"),
            ),
            (
                4,
                "kb_pages",
                include_str!("../migrations/postgres/0004_kb_pages.sql"),
            ),
            (
                5,
                "artifact_origin",
                include_str!("../migrations/postgres/0005_artifact_origin.sql"),
            ),
            (
                6,
                "turn_images",
                include_str!("../migrations/postgres/0006_turn_images.sql"),
            ),
        ],
    };
    let migrations = scripts
        .into_iter()
        .map(|(version, name, sql)| {
            Migration::new(
                version,
                Cow::Borrowed(name),
                MigrationType::Simple,
                sql.into_sql_str(),
                false,
            )
        })
        .collect();
    Migrator::with_migrations(migrations)
}

/// Milliseconds since the Unix epoch, as stored.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A fresh time-ordered id with a readable prefix.
pub(crate) fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

/// u64 → BIGINT: values past i64::MAX cannot come from this program (seqs, sizes, millis).
pub(crate) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

pub(crate) fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_pick_a_backend_and_passwords_are_redacted() {
        assert_eq!(
            Backend::from_url("sqlite://a.db").ok(),
            Some(Backend::Sqlite)
        );
        assert_eq!(
            Backend::from_url("postgres://u:p@h/db").ok(),
            Some(Backend::Postgres)
        );
        let err = Backend::from_url("mysql://u:secret@h/db")
            .err()
            .map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| !e.contains("secret")),
            "{err:?}"
        );
        assert_eq!(
            redact_url("postgres://u:pw@h:5432/d"),
            "postgres://u:***@h:5432/d"
        );
        assert_eq!(
            sqlite_url_with_create("sqlite:///x.db"),
            "sqlite:///x.db?mode=rwc"
        );
    }
}
