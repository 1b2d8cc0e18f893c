//! The append-only turn event log (DESIGN R9: appended as they happen, never only at the end).

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::error::StoreError;
use crate::model::StoredEvent;
use crate::{Backend, Store, to_i64, to_u64};

/// The PostgreSQL channel that announces appends to other replicas.
pub const NOTIFY_CHANNEL: &str = "deepsolve_events";

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
    pub async fn append_events(&self, events: &[StoredEvent]) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        let _gate = self.write_gate().await;
        let mut tx = self.pool().begin().await?;
        // Multi-row INSERTs: one statement per row costs a round trip to the database each,
        // which caps a busy server at a few thousand events per second.
        let mut rest = events;
        while !rest.is_empty() {
            let rows = chunk_len(rest.len());
            let (chunk, tail) = rest.split_at(rows);
            let mut query = sqlx::query(insert_sql(self.backend(), rows));
            for e in chunk {
                query = query
                    .bind(&e.turn_id)
                    .bind(to_i64(e.seq))
                    .bind(&e.kind)
                    .bind(to_i64(e.ts))
                    .bind(&e.data);
            }
            query.execute(&mut *tx).await?;
            rest = tail;
        }
        if self.backend() == Backend::Postgres {
            for (turn_id, seq) in last_seq_per_turn(events) {
                sqlx::query("SELECT pg_notify($1, $2)")
                    .bind(NOTIFY_CHANNEL)
                    .bind(self.notify_payload(turn_id, &seq.to_string()))
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        self.hub().publish_events(events);
        Ok(())
    }

    /// `<process tag> <turn id> <what>`: the listener skips its own process's notifications.
    fn notify_payload(&self, turn_id: &str, what: &str) -> String {
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

/// `(turn_id, highest seq)` for each turn in a batch, in first-seen order.
fn last_seq_per_turn(events: &[StoredEvent]) -> Vec<(&str, u64)> {
    let mut out: Vec<(&str, u64)> = Vec::new();
    for e in events {
        match out.iter_mut().find(|(t, _)| *t == e.turn_id) {
            Some(entry) => entry.1 = entry.1.max(e.seq),
            None => out.push((&e.turn_id, e.seq)),
        }
    }
    out
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
    }
}
