//! A recorded turn as the engine runs it, for the server and the CLI alike: the engine's spec
//! from a turn's stored record, and the continuation of an interrupted one from the last
//! `checkpoint` in its log (finished steps stay done and are not re-run; a turn that died
//! before finishing a step has no checkpoint and starts over from its spec).

use std::sync::Arc;

use deepsolve_core::{SolveConfig, TurnImage, TurnSpec};
use deepsolve_protocol::{Checkpoint, EventKind, StoredImage, StoredTurnSpec, TurnStatus};
use deepsolve_store::{NewTurn, Store, StoreError, TurnImageRow, TurnRecord};
use serde_json::{Map, Value};

/// Who a turn is and what it asks, whether just recorded or read back.
#[derive(Debug, Clone, Copy)]
pub struct TurnKeys<'a> {
    pub id: &'a str,
    pub session_id: &'a str,
    pub user_id: &'a str,
    pub problem: &'a str,
}

impl<'a> From<&'a NewTurn> for TurnKeys<'a> {
    fn from(t: &'a NewTurn) -> Self {
        TurnKeys {
            id: &t.id,
            session_id: &t.session_id,
            user_id: &t.user_id,
            problem: &t.problem,
        }
    }
}

impl<'a> From<&'a TurnRecord> for TurnKeys<'a> {
    fn from(t: &'a TurnRecord) -> Self {
        TurnKeys {
            id: &t.id,
            session_id: &t.session_id,
            user_id: &t.user_id,
            problem: &t.problem,
        }
    }
}

/// The engine's spec for a recorded turn (a fresh run: `first_seq` 0, no checkpoint).
pub fn engine_spec(stored: StoredTurnSpec, config: SolveConfig, turn: TurnKeys<'_>) -> TurnSpec {
    let mut spec = TurnSpec::new(turn.id, turn.problem);
    spec.session_id = Some(turn.session_id.to_string());
    spec.user_id = Some(turn.user_id.to_string());
    spec.history = stored.history;
    spec.language = stored.language;
    spec.config = config;
    spec.context_window = stored.context_window;
    spec.tools = stored.tools;
    spec.material = stored.material.map(Arc::new);
    spec
}

/// A turn's images, ready for the engine, and whether its main model sees them.
#[derive(Debug, Clone, Default)]
pub struct TurnImages {
    pub images: Vec<TurnImage>,
    /// `TurnSpec::sees_images`: they go with the problem.
    pub sees: bool,
}

impl TurnImages {
    /// As the stored spec lists them.
    pub fn stored(&self) -> Vec<StoredImage> {
        self.images
            .iter()
            .map(|i| StoredImage {
                id: i.id.clone(),
                name: i.name.clone(),
                mime: i.mime.clone(),
                width: i.width,
                height: i.height,
                size: i.bytes.len() as u64,
            })
            .collect()
    }

    /// As the store keeps their bytes (`Store::create_turn_with_images`).
    pub fn rows(&self) -> Vec<TurnImageRow> {
        self.images
            .iter()
            .map(|i| TurnImageRow {
                id: i.id.clone(),
                name: i.name.clone(),
                mime: i.mime.clone(),
                width: i.width,
                height: i.height,
                content: i.bytes.to_vec(),
            })
            .collect()
    }

    /// Hand them to the engine's spec of the turn.
    pub fn put_on(self, spec: &mut TurnSpec) {
        spec.images = self.images.into();
        spec.sees_images = self.sees;
    }
}

/// The images stored with `turn_id` (the bytes it ran with), to run it again.
pub async fn stored_images(store: &Store, turn_id: &str) -> Result<Vec<TurnImage>, StoreError> {
    let rows = store.turn_images(turn_id).await?;
    Ok(rows
        .into_iter()
        .map(|row| TurnImage {
            id: row.id,
            name: row.name,
            mime: row.mime,
            width: row.width,
            height: row.height,
            bytes: Arc::from(row.content),
        })
        .collect())
}

/// Why a stored turn cannot run (again).
#[derive(Debug, thiserror::Error)]
pub enum StoredTurnError {
    #[error("only an interrupted turn can be resumed; this one is {}", .0.as_str())]
    NotInterrupted(TurnStatus),
    #[error("another turn of this session is running; wait for it or cancel it")]
    SessionBusy,
    #[error("the turn used tools that are not offered now: {}", .0.join(", "))]
    ToolsMissing(Vec<String>),
    /// A knob of the stored config has a value of the wrong type: the row is damaged.
    #[error("the turn's stored config is unreadable: {0}")]
    DamagedConfig(String),
    /// The kind column of the last checkpoint row and its JSON disagree.
    #[error("the turn's last checkpoint row holds a `{0}` event")]
    DamagedCheckpoint(&'static str),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The config a stored turn ran with. Knobs this build no longer knows are dropped (the turn
/// goes on without them, logged) and new ones take their defaults; a value of the wrong type
/// means the row is damaged.
pub fn stored_config(
    stored: &StoredTurnSpec,
    turn_id: &str,
) -> Result<SolveConfig, StoredTurnError> {
    let (known, dropped): (Map<String, Value>, Map<String, Value>) = stored
        .config
        .clone()
        .into_iter()
        .partition(|(k, _)| SolveConfig::knob(k).is_some());
    if !dropped.is_empty() {
        let keys: Vec<&str> = dropped.keys().map(String::as_str).collect();
        tracing::warn!(turn_id, dropped = ?keys, "stored config keys no longer known");
    }
    SolveConfig::from_map(&known)
        .map(|(config, _)| config)
        .map_err(|e| StoredTurnError::DamagedConfig(e.to_string()))
}

/// The spec that continues interrupted `turn`: its stored spec, its log's next seq and its
/// last checkpoint. Everything that can refuse is checked here, before the caller claims the
/// turn (`Store::reclaim_interrupted`), so a refused resume leaves it resumable: it must be
/// interrupted, no other turn of its session may be running (as for a new turn), and the
/// tools it was offered must all be in `available` (the sandbox may be gone since).
pub async fn resume_spec(
    store: &Store,
    turn: &TurnRecord,
    available: &[String],
) -> Result<TurnSpec, StoredTurnError> {
    if turn.status != TurnStatus::Interrupted {
        return Err(StoredTurnError::NotInterrupted(turn.status));
    }
    let busy = store
        .session_turns(&turn.session_id)
        .await?
        .iter()
        .any(|t| t.id != turn.id && t.status == TurnStatus::Running);
    if busy {
        return Err(StoredTurnError::SessionBusy);
    }
    let config = stored_config(&turn.spec, &turn.id)?;
    let missing: Vec<String> = (turn.spec.tools.iter())
        .filter(|t| !available.contains(t))
        .cloned()
        .collect();
    if !missing.is_empty() {
        return Err(StoredTurnError::ToolsMissing(missing));
    }
    let mut spec = engine_spec(turn.spec.clone(), config, TurnKeys::from(turn));
    spec.first_seq = store.last_seq(&turn.id).await?.map_or(0, |seq| seq + 1);
    spec.resume = last_checkpoint(store, &turn.id).await?;
    Ok(spec)
}

async fn last_checkpoint(
    store: &Store,
    turn_id: &str,
) -> Result<Option<Checkpoint>, StoredTurnError> {
    let Some(stored) = store.last_event_of_kind(turn_id, "checkpoint").await? else {
        return Ok(None);
    };
    match stored.decode()?.kind {
        EventKind::Checkpoint { checkpoint } => Ok(Some(checkpoint)),
        other => Err(StoredTurnError::DamagedCheckpoint(other.type_name())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored(config: Value) -> StoredTurnSpec {
        serde_json::from_value(json!({
            "language": "en", "tools": [], "config": config, "context_window": 32000
        }))
        .expect("a stored spec")
    }

    #[test]
    fn a_stored_config_survives_renamed_knobs_but_not_damage() {
        let config = stored_config(&stored(json!({"max_rounds": 5, "retired_knob": 1})), "t")
            .expect("an unknown stored knob is dropped, not fatal");
        assert_eq!(config.max_rounds, 5);
        assert_eq!(config.max_replans, SolveConfig::default().max_replans);
        let damaged = stored_config(&stored(json!({"max_rounds": "many"})), "t");
        assert!(matches!(damaged, Err(StoredTurnError::DamagedConfig(_))));
        // What a recorder writes reads back as the same config.
        let tuned = SolveConfig {
            temperature: 0.7,
            fold: false,
            ..SolveConfig::default()
        };
        let back = stored_config(&stored(Value::Object(tuned.to_map())), "t").expect("read");
        assert_eq!(back, tuned);
    }
}
