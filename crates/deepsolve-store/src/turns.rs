//! Turns: created before their engine task starts, finished when it ends, marked
//! `interrupted` when the process that ran them died.

use deepsolve_protocol::{PriorTurn, StopReason};
use serde::de::DeserializeOwned;
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Connection, Row};

use crate::error::StoreError;
use crate::events::notify_all;
use crate::model::{NewTurn, TurnFinish, TurnImageRow, TurnRecord, TurnStatus};
use crate::{Backend, Store, now_ms, to_i64, to_u64};

/// The `UPDATE` that records a turn's end (only a running turn's).
fn finish_query<'q>(
    id: &'q str,
    finish: &TurnFinish,
    now: i64,
) -> Result<sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>, StoreError> {
    let status = finish.status.unwrap_or(TurnStatus::Finished);
    Ok(sqlx::query(
        "UPDATE turns SET status = $1, answer = $2, stop_reason = $3, usage = $4, solve = $5, \
         rounds = $6, elapsed_ms = $7, error = $8, updated_at = $9, finished_at = $9 \
         WHERE id = $10 AND status = 'running'",
    )
    .bind(status.as_str())
    .bind(finish.answer.clone())
    .bind(finish.stop_reason.map(StopReason::as_str))
    .bind(
        finish
            .usage
            .as_ref()
            .map(|u| to_json("usage", u))
            .transpose()?,
    )
    .bind(
        finish
            .solve
            .as_ref()
            .map(|s| to_json("solve", s))
            .transpose()?,
    )
    .bind(i64::from(finish.rounds))
    .bind(to_i64(finish.elapsed_ms))
    .bind(finish.error.clone())
    .bind(now)
    .bind(id))
}

const TURN_COLUMNS: &str = "id, session_id, user_id, problem, spec, status, answer, stop_reason, \
     usage, solve, rounds, elapsed_ms, error, owner, created_at, updated_at, finished_at";

fn json_column<T: DeserializeOwned>(
    row: &AnyRow,
    column: &'static str,
) -> Result<Option<T>, StoreError> {
    let text: Option<String> = row.try_get(column)?;
    text.map(|t| serde_json::from_str(&t).map_err(|e| StoreError::corrupt(column, e)))
        .transpose()
}

/// The stop reason column, typed: an unknown name is a damaged row.
fn stop_reason_column(row: &AnyRow) -> Result<Option<StopReason>, StoreError> {
    let name: Option<String> = row.try_get("stop_reason")?;
    name.map(|n| StopReason::parse(&n).ok_or_else(|| StoreError::corrupt("stop reason", &n)))
        .transpose()
}

fn turn_from_row(row: &AnyRow) -> Result<TurnRecord, StoreError> {
    let status: String = row.try_get("status")?;
    Ok(TurnRecord {
        id: row.try_get("id")?,
        session_id: row.try_get("session_id")?,
        user_id: row.try_get("user_id")?,
        problem: row.try_get("problem")?,
        spec: json_column(row, "spec")?.ok_or_else(|| StoreError::corrupt("spec", "missing"))?,
        status: TurnStatus::parse(&status)
            .ok_or_else(|| StoreError::corrupt("turn status", &status))?,
        answer: row.try_get("answer")?,
        stop_reason: stop_reason_column(row)?,
        usage: json_column(row, "usage")?,
        solve: json_column(row, "solve")?,
        rounds: u32::try_from(row.try_get::<i64, _>("rounds")?).unwrap_or(0),
        elapsed_ms: to_u64(row.try_get("elapsed_ms")?),
        error: row.try_get("error")?,
        owner: row.try_get("owner")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        finished_at: row.try_get("finished_at")?,
    })
}

/// `text` with LIKE's wildcards taken literally (with `ESCAPE '\'`).
fn like_escaped(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}

fn to_json<T: serde::Serialize>(what: &'static str, value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::corrupt(what, e))
}

impl Store {
    /// Record a new running turn. Refused (`Conflict`) while another turn of the same session
    /// is running: a follow-up needs the previous answer. The check and the insert are one
    /// statement, so two racing requests cannot both get in.
    pub async fn create_turn(&self, turn: &NewTurn) -> Result<TurnRecord, StoreError> {
        self.create_turn_with_images(turn, &[]).await
    }

    /// [`Store::create_turn`] with the turn's images, stored with it in one transaction: a
    /// turn is never recorded without the images its spec lists.
    pub async fn create_turn_with_images(
        &self,
        turn: &NewTurn,
        images: &[TurnImageRow],
    ) -> Result<TurnRecord, StoreError> {
        // The connection first, so the gate is held only while writing (see `create_session`).
        let mut conn = self.pool().acquire().await?;
        let gate = self.write_gate().await;
        let mut tx = conn.begin().await?;
        let now = now_ms();
        let done = sqlx::query(
            "INSERT INTO turns (id, session_id, user_id, problem, spec, status, owner, created_at, updated_at) \
             SELECT $1, $2, $3, $4, $5, 'running', $6, $7, $7 \
             WHERE NOT EXISTS (SELECT 1 FROM turns WHERE session_id = $2 AND status = 'running')",
        )
            .bind(&turn.id)
            .bind(&turn.session_id)
            .bind(&turn.user_id)
            .bind(&turn.problem)
            .bind(to_json("spec", &turn.spec)?)
            .bind(&turn.owner)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Conflict(
                "another turn of this session is still running; wait for it or cancel it".into(),
            ));
        }
        sqlx::query("UPDATE sessions SET updated_at = $1 WHERE id = $2")
            .bind(now)
            .bind(&turn.session_id)
            .execute(&mut *tx)
            .await?;
        crate::images::insert(&mut tx, turn, images, now).await?;
        tx.commit().await?;
        drop(gate);
        drop(conn);
        self.turn_unscoped(&turn.id)
            .await?
            .ok_or_else(|| StoreError::corrupt("turn", "vanished right after insert"))
    }

    /// A turn of this user (`None` for another user's turn, exactly as for a missing one).
    pub async fn turn(&self, id: &str, user_id: &str) -> Result<Option<TurnRecord>, StoreError> {
        let sql = format!("SELECT {TURN_COLUMNS} FROM turns WHERE id = $1 AND user_id = $2");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .bind(user_id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(turn_from_row).transpose()
    }

    /// A turn by id regardless of owner: for the server's own bookkeeping, never for a
    /// client's request.
    pub async fn turn_unscoped(&self, id: &str) -> Result<Option<TurnRecord>, StoreError> {
        let sql = format!("SELECT {TURN_COLUMNS} FROM turns WHERE id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(turn_from_row).transpose()
    }

    /// The turns of a session, oldest first.
    pub async fn session_turns(&self, session_id: &str) -> Result<Vec<TurnRecord>, StoreError> {
        let sql = format!(
            "SELECT {TURN_COLUMNS} FROM turns WHERE session_id = $1 ORDER BY created_at, id"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(session_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(turn_from_row).collect()
    }

    /// What a follow-up turn of a session sees: each earlier turn that has an answer, with
    /// its solve record.
    pub async fn prior_turns(&self, session_id: &str) -> Result<Vec<PriorTurn>, StoreError> {
        Ok(self
            .session_turns(session_id)
            .await?
            .into_iter()
            .filter_map(|t| {
                Some(PriorTurn {
                    answer: t.answer.filter(|a| !a.trim().is_empty())?,
                    problem: t.problem,
                    solve: t.solve,
                })
            })
            .collect())
    }

    /// Record how a turn ended. Only a running turn is finished (a turn marked interrupted by
    /// a restart keeps that status).
    pub async fn finish_turn(&self, id: &str, finish: &TurnFinish) -> Result<(), StoreError> {
        // The connection first, so the gate is held only while writing (see `create_session`).
        let mut conn = self.pool().acquire().await?;
        let gate = self.write_gate().await;
        finish_query(id, finish, now_ms())?
            .execute(&mut *conn)
            .await?;
        drop(gate);
        drop(conn);
        self.announce_ends(&[id]).await
    }

    /// [`Store::finish_turn`] for many turns, with the last events of a batch, in **one**
    /// transaction, on a connection from [`Store::writer_connection`]. The event writer records
    /// the ends that arrived with a batch this way: under load hundreds of turns end at once
    /// (one write each kept the events of the turns still streaming waiting), and a reader that
    /// sees a turn's `turn_finished` and then asks for the turn finds it finished, on any
    /// replica, never still `running`. The ends take the event appends' lane through the write
    /// gate. Then the events go to this process's live readers and the ends' readers are poked.
    pub async fn append_and_finish_on<E: crate::AppendEvent>(
        &self,
        conn: &mut AnyConnection,
        events: &[E],
        ends: &[(&str, &TurnFinish)],
    ) -> Result<(), StoreError> {
        let now = now_ms();
        {
            let _gate = self.event_write_gate().await;
            let mut tx = conn.begin().await?;
            self.insert_events(&mut tx, events).await?;
            for (id, finish) in ends {
                finish_query(id, finish, now)?.execute(&mut *tx).await?;
            }
            // Other replicas hear of the ends from this transaction, as they hear of appends:
            // the appender's connection is its own, and may live on another runtime than the
            // pool's.
            if self.backend() == Backend::Postgres {
                let payloads: Vec<String> = ends
                    .iter()
                    .map(|(id, _)| self.notify_payload(id, "end"))
                    .collect();
                notify_all(&mut tx, &payloads).await?;
            }
            tx.commit().await?;
        }
        self.hub().publish_events(events);
        for (id, _) in ends {
            self.hub().publish(id, crate::HubMsg::Poke);
        }
        Ok(())
    }

    /// Readers end on `turn_finished`, but a failed turn has none: tell them to look.
    async fn announce_ends(&self, ids: &[&str]) -> Result<(), StoreError> {
        for id in ids {
            self.hub().publish(id, crate::HubMsg::Poke);
        }
        for id in ids {
            self.notify_other_replicas(id, "end").await?;
        }
        Ok(())
    }

    /// On start: every turn this instance left `running` died with it. Returns their ids.
    pub async fn mark_interrupted(&self, owner: &str) -> Result<Vec<String>, StoreError> {
        self.interrupt_owner(owner, "the server stopped while the turn was running")
            .await
    }

    /// Every turn `owner` left `running` is `interrupted`, with `why` as its error (the
    /// process that ran them is known to be gone). Returns their ids.
    pub async fn interrupt_owner(&self, owner: &str, why: &str) -> Result<Vec<String>, StoreError> {
        let _gate = self.write_gate().await;
        let mut tx = self.pool().begin().await?;
        let ids: Vec<String> =
            sqlx::query_scalar("SELECT id FROM turns WHERE status = 'running' AND owner = $1")
                .bind(owner)
                .fetch_all(&mut *tx)
                .await?;
        sqlx::query(
            "UPDATE turns SET status = 'interrupted', error = $1, updated_at = $2 \
             WHERE status = 'running' AND owner = $3",
        )
        .bind(why)
        .bind(now_ms())
        .bind(owner)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(ids)
    }

    /// The owners of running turns whose owner starts with `prefix` (e.g. the command-line
    /// processes running turns), each once.
    pub async fn running_owners(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let owners = sqlx::query_scalar(
            "SELECT DISTINCT owner FROM turns WHERE status = 'running' AND owner LIKE $1 ESCAPE '\\' \
             ORDER BY owner",
        )
        .bind(format!("{}%", like_escaped(prefix)))
        .fetch_all(self.pool())
        .await?;
        Ok(owners)
    }

    /// A user's turns, newest first (`deepsolve history`).
    pub async fn user_turns(
        &self,
        user_id: &str,
        limit: u32,
    ) -> Result<Vec<TurnRecord>, StoreError> {
        let sql = format!(
            "SELECT {TURN_COLUMNS} FROM turns WHERE user_id = $1 \
             ORDER BY created_at DESC, id DESC LIMIT $2"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(user_id)
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(turn_from_row).collect()
    }

    /// Put an interrupted turn back to `running` under `owner` (resume). `false`: the turn is
    /// not interrupted (someone else resumed it first, or it finished).
    pub async fn reclaim_interrupted(&self, id: &str, owner: &str) -> Result<bool, StoreError> {
        let _gate = self.write_gate().await;
        let done = sqlx::query(
            "UPDATE turns SET status = 'running', owner = $1, error = NULL, updated_at = $2 \
             WHERE id = $3 AND status = 'interrupted'",
        )
        .bind(owner)
        .bind(now_ms())
        .bind(id)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// The turns a server may still run or resume: `running` (here or on another replica) and
    /// `interrupted`. Their workspaces are kept whatever their age (the workspace collector's
    /// bookkeeping, never a client's request).
    pub async fn resumable_turn_ids_unscoped(&self) -> Result<Vec<String>, StoreError> {
        let ids = sqlx::query_scalar("SELECT id FROM turns WHERE status IN ($1, $2) ORDER BY id")
            .bind(TurnStatus::Running.as_str())
            .bind(TurnStatus::Interrupted.as_str())
            .fetch_all(self.pool())
            .await?;
        Ok(ids)
    }

    /// How many turns are in each status (metrics, health).
    pub async fn count_turns(&self, status: TurnStatus) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM turns WHERE status = $1")
            .bind(status.as_str())
            .fetch_one(self.pool())
            .await?;
        Ok(to_u64(n))
    }
}
