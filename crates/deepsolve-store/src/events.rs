//! The append-only turn event log (appended as they happen, never only at the end).

use sqlx::AnyConnection;
use sqlx::any::AnyRow;
use sqlx::{Connection, Row};

use crate::error::StoreError;
use crate::model::{AppendEvent, StoredEvent};
use crate::{Backend, Store, to_i64, to_u64};

/// The PostgreSQL channel that announces appends to other replicas.
pub(crate) const NOTIFY_CHANNEL: &str = "deepsolve_events";

fn event_from_row(row: &AnyRow) -> Result<StoredEvent, StoreError> {
    Ok(StoredEvent {
        turn_id: row.try_get("turn_id")?,
        seq: to_u64(row.try_get("seq")?),
        kind: row.try_get("kind")?,
        ts: to_u64(row.try_get("ts")?),
        data: row.try_get("data")?,
    })
}

impl Store {
    /// Append events (of one or many turns) in one transaction, then deliver them to this
    /// process's live readers. On PostgreSQL the same transaction NOTIFYs other replicas once
    /// per turn. A duplicate `(turn_id, seq)` is an error: the log never rewrites history.
    pub async fn append_events<E: AppendEvent>(&self, events: &[E]) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        let mut conn = self.pool().acquire().await?;
        let _gate = self.event_write_gate().await;
        self.append_locked(&mut conn, events).await
    }

    /// A connection of its own, outside the pool's count, for a busy appender such as the
    /// server's event writer: it never queues behind readers for a pool slot, and it can live
    /// on the appender's own thread. Use it with [`Store::append_events_on`].
    pub async fn writer_connection(&self) -> Result<AnyConnection, StoreError> {
        match self.backend() {
            // A PostgreSQL socket is driven by the runtime that opened it: a fresh connection
            // opened here belongs to the caller's runtime (the writer's own thread), where one
            // from the pool would wait for the busy shared runtime to poll its socket.
            Backend::Postgres => Ok(AnyConnection::connect(self.url()).await?),
            // SQLite connections run on worker threads of their own; the pool's come with
            // the per-connection pragmas, and the appender's gets a larger page cache.
            Backend::Sqlite => {
                let mut conn = self.pool().acquire().await?.detach();
                sqlx::Executor::execute(&mut conn, crate::APPENDER_CACHE).await?;
                Ok(conn)
            }
        }
    }

    /// [`Store::append_events`] on a connection from [`Store::writer_connection`]. After an
    /// error the connection may be broken: open another one.
    pub async fn append_events_on<E: AppendEvent>(
        &self,
        conn: &mut AnyConnection,
        events: &[E],
    ) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        let _gate = self.event_write_gate().await;
        self.append_locked(conn, events).await
    }

    /// The append itself; the caller holds the write gate.
    async fn append_locked<E: AppendEvent>(
        &self,
        conn: &mut AnyConnection,
        events: &[E],
    ) -> Result<(), StoreError> {
        let mut tx = conn.begin().await?;
        self.insert_events(&mut tx, events).await?;
        tx.commit().await?;
        self.hub().publish_events(events);
        Ok(())
    }

    /// The rows of `events` in `tx` (and, on PostgreSQL, one NOTIFY per turn).
    pub(crate) async fn insert_events<E: AppendEvent>(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        events: &[E],
    ) -> Result<(), StoreError> {
        // Multi-row INSERTs: one statement per row costs a round trip to the database each,
        // which caps a busy server at a few thousand events per second.
        let mut rest = events;
        while !rest.is_empty() {
            let rows = chunk_len(rest.len());
            let (chunk, tail) = rest.split_at(rows);
            let mut query = sqlx::query(insert_sql(self.backend(), rows));
            for e in chunk {
                let e = e.event();
                query = query
                    .bind(&e.turn_id)
                    .bind(to_i64(e.seq))
                    .bind(&e.kind)
                    .bind(to_i64(e.ts))
                    .bind(&e.data);
            }
            query.execute(&mut **tx).await?;
            rest = tail;
        }
        if self.backend() == Backend::Postgres {
            let payloads: Vec<String> = last_seq_per_turn(events.iter().map(AppendEvent::event))
                .into_iter()
                .map(|(turn_id, seq)| self.notify_payload(turn_id, &seq.to_string()))
                .collect();
            notify_all(tx, &payloads).await?;
        }
        Ok(())
    }

    /// `<process tag> <turn id> <what>`: the listener skips its own process's notifications.
    pub(crate) fn notify_payload(&self, turn_id: &str, what: &str) -> String {
        format!("{} {turn_id} {what}", self.inner.process_tag)
    }

    /// Tell readers on other replicas that a turn changed (PostgreSQL; a no-op on SQLite).
    pub(crate) async fn notify_other_replicas(
        &self,
        turn_id: &str,
        what: &str,
    ) -> Result<(), StoreError> {
        if self.backend() == Backend::Postgres {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(NOTIFY_CHANNEL)
                .bind(self.notify_payload(turn_id, what))
                .execute(self.pool())
                .await?;
        }
        Ok(())
    }

    /// Up to `limit` events of a turn with `seq > after` (all from the start when `after` is
    /// `None`), in `seq` order.
    pub async fn events_after(
        &self,
        turn_id: &str,
        after: Option<u64>,
        limit: u32,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let after = after.map(to_i64).unwrap_or(-1);
        let rows = sqlx::query(
            "SELECT turn_id, seq, kind, ts, data FROM turn_events WHERE turn_id = $1 AND seq > $2 \
             ORDER BY seq LIMIT $3",
        )
        .bind(turn_id)
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(event_from_row).collect()
    }

    /// The latest event of one kind in a turn's log (say, its last `checkpoint`), without
    /// reading the events around it.
    pub async fn last_event_of_kind(
        &self,
        turn_id: &str,
        kind: &str,
    ) -> Result<Option<StoredEvent>, StoreError> {
        let row = sqlx::query(
            "SELECT turn_id, seq, kind, ts, data FROM turn_events WHERE turn_id = $1 AND kind = $2 \
             ORDER BY seq DESC LIMIT 1",
        )
        .bind(turn_id)
        .bind(kind)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(event_from_row).transpose()
    }

    /// The highest `seq` logged for a turn.
    pub async fn last_seq(&self, turn_id: &str) -> Result<Option<u64>, StoreError> {
        let seq: Option<i64> =
            sqlx::query_scalar("SELECT MAX(seq) FROM turn_events WHERE turn_id = $1")
                .bind(turn_id)
                .fetch_one(self.pool())
                .await?;
        Ok(seq.map(to_u64))
    }
}

/// Rows per INSERT: the largest power of two up to `MAX_ROWS`, so only a handful of distinct
/// statements exist (each is prepared once per connection and cached).
const MAX_ROWS: usize = 128;

fn chunk_len(remaining: usize) -> usize {
    let mut rows = MAX_ROWS;
    while rows > remaining {
        rows /= 2;
    }
    rows.max(1)
}

/// `INSERT … VALUES (…), (…)` for `rows` rows (a power of two ≤ `MAX_ROWS`). SQLite gets
/// anonymous `?` placeholders: for numbered ones it looks each parameter's name up by
/// position, which costs quadratic time in a 640-parameter statement. PostgreSQL only
/// understands `$n`.
fn insert_sql(backend: Backend, rows: usize) -> &'static str {
    static SQLITE: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    static POSTGRES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let (cache, numbered) = match backend {
        Backend::Sqlite => (&SQLITE, false),
        Backend::Postgres => (&POSTGRES, true),
    };
    let all = cache.get_or_init(|| {
        (0..=MAX_ROWS.trailing_zeros())
            .map(|p| insert_statement(1usize << p, numbered))
            .collect()
    });
    all.get(rows.trailing_zeros() as usize)
        .map(String::as_str)
        .unwrap_or(
            "INSERT INTO turn_events (turn_id, seq, kind, ts, data) VALUES ($1, $2, $3, $4, $5)",
        )
}

fn insert_statement(rows: usize, numbered: bool) -> String {
    let values: Vec<String> = (0..rows)
        .map(|r| {
            if numbered {
                let b = r * 5;
                format!(
                    "(${}, ${}, ${}, ${}, ${})",
                    b + 1,
                    b + 2,
                    b + 3,
                    b + 4,
                    b + 5
                )
            } else {
                "(?, ?, ?, ?, ?)".to_string()
            }
        })
        .collect();
    format!(
        "INSERT INTO turn_events (turn_id, seq, kind, ts, data) VALUES {}",
        values.join(", ")
    )
}

/// `(turn_id, highest seq)` for each turn in a batch, in first-seen order. (Indexed: a batch
/// under load holds a thousand turns, and a linear search per event was quadratic.)
fn last_seq_per_turn<'e>(events: impl Iterator<Item = &'e StoredEvent>) -> Vec<(&'e str, u64)> {
    let mut out: Vec<(&str, u64)> = Vec::new();
    let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for e in events {
        match index.get(e.turn_id.as_str()) {
            Some(&i) => {
                if let Some(entry) = out.get_mut(i) {
                    entry.1 = entry.1.max(e.seq);
                }
            }
            None => {
                index.insert(&e.turn_id, out.len());
                out.push((&e.turn_id, e.seq));
            }
        }
    }
    out
}

/// NOTIFY `payloads` on the events channel (PostgreSQL), many per statement: a batch under
/// load announces a thousand turns, and one statement each was a thousand round trips
/// inside the writer's transaction.
pub(crate) async fn notify_all(
    conn: &mut AnyConnection,
    payloads: &[String],
) -> Result<(), StoreError> {
    let mut rest = payloads;
    while !rest.is_empty() {
        let n = chunk_len(rest.len());
        let (chunk, tail) = rest.split_at(n);
        let mut query = sqlx::query(notify_sql(n)).bind(NOTIFY_CHANNEL);
        for payload in chunk {
            query = query.bind(payload.as_str());
        }
        query.execute(&mut *conn).await?;
        rest = tail;
    }
    Ok(())
}

/// `SELECT pg_notify($1, $2), pg_notify($1, $3), …` for `n` payloads (a power of two ≤
/// `MAX_ROWS`, so only a few statements exist, each prepared once per connection).
fn notify_sql(n: usize) -> &'static str {
    static ALL: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let all = ALL.get_or_init(|| {
        (0..=MAX_ROWS.trailing_zeros())
            .map(|p| {
                let calls: Vec<String> = (0..1usize << p)
                    .map(|i| format!("pg_notify($1, ${})", i + 2))
                    .collect();
                format!("SELECT {}", calls.join(", "))
            })
            .collect()
    });
    all.get(n.trailing_zeros() as usize)
        .map(String::as_str)
        .unwrap_or("SELECT pg_notify($1, $2)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_split_into_few_statement_shapes() {
        let mut sizes = Vec::new();
        let mut left = 300;
        while left > 0 {
            let n = chunk_len(left);
            sizes.push(n);
            left -= n;
        }
        assert_eq!(sizes, vec![128, 128, 32, 8, 4]);
        assert!(insert_sql(Backend::Postgres, 4).ends_with("($16, $17, $18, $19, $20)"));
        assert!(
            insert_sql(Backend::Sqlite, 2).ends_with("VALUES (?, ?, ?, ?, ?), (?, ?, ?, ?, ?)")
        );
        assert_eq!(insert_sql(Backend::Sqlite, 1).matches('(').count(), 2);
        assert_eq!(notify_sql(1), "SELECT pg_notify($1, $2)");
        assert!(notify_sql(4).ends_with("pg_notify($1, $4), pg_notify($1, $5)"));
    }

    #[test]
    fn the_last_seq_of_each_turn_in_first_seen_order() {
        let e = |turn: &str, seq| StoredEvent {
            turn_id: turn.into(),
            seq,
            kind: "text_delta".into(),
            ts: 0,
            data: String::new(),
        };
        let batch = [e("b", 3), e("a", 7), e("b", 4), e("a", 8), e("c", 0)];
        assert_eq!(
            last_seq_per_turn(batch.iter()),
            vec![("b", 4), ("a", 8), ("c", 0)]
        );
    }
}
