//! The records the store reads and writes.

use std::sync::Arc;

use deepsolve_protocol::{SolveRecord, StopReason, StoredTurnSpec, TurnEvent, Usage};
use serde::{Deserialize, Serialize};

pub use deepsolve_protocol::TurnStatus;

use crate::error::StoreError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Admin,
    User,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::User => "user",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "admin" => Some(Role::Admin),
            "user" => Some(Role::User),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub id: String,
    pub name: String,
    pub role: Role,
    pub created_at: i64,
}

/// A freshly issued bearer token: the only time its clear text exists outside the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedToken {
    pub id: String,
    pub user_id: String,
    pub token: String,
}

/// A browser session just created: `secret` goes into the cookie and is never stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedBrowserSession {
    pub secret: String,
    pub user_id: String,
    /// Milliseconds since the Unix epoch.
    pub expires_at: i64,
}

/// A live browser session and its user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowserSession {
    pub user: User,
    /// Milliseconds since the Unix epoch.
    pub expires_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub id: String,
    pub user_id: String,
    pub title: String,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A new turn, recorded before its engine task starts.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTurn {
    pub id: String,
    pub session_id: String,
    pub user_id: String,
    pub problem: String,
    /// The resolved request (language, tools, effective config, history): enough to resume
    /// the turn.
    pub spec: StoredTurnSpec,
    /// The server instance that runs it (crash recovery marks only its own turns).
    pub owner: String,
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TurnFinish {
    pub status: Option<TurnStatus>,
    pub answer: Option<String>,
    pub stop_reason: Option<StopReason>,
    pub usage: Option<Usage>,
    pub solve: Option<SolveRecord>,
    pub rounds: u32,
    pub elapsed_ms: u64,
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    pub id: String,
    pub session_id: String,
    pub user_id: String,
    pub problem: String,
    pub spec: StoredTurnSpec,
    pub status: TurnStatus,
    pub answer: Option<String>,
    pub stop_reason: Option<StopReason>,
    pub usage: Option<Usage>,
    pub solve: Option<SolveRecord>,
    pub rounds: u32,
    pub elapsed_ms: u64,
    pub error: Option<String>,
    pub owner: String,
    pub created_at: i64,
    pub updated_at: i64,
    pub finished_at: Option<i64>,
}

/// One event of a turn's log, as stored: `data` is the event's full JSON, so it can be sent
/// to clients verbatim without a decode/encode round trip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    pub turn_id: String,
    pub seq: u64,
    pub kind: String,
    pub ts: u64,
    pub data: String,
}

impl StoredEvent {
    pub fn from_event(event: &TurnEvent) -> Result<Self, StoreError> {
        let data =
            serde_json::to_string(event).map_err(|e| StoreError::corrupt("turn event", e))?;
        Ok(StoredEvent {
            turn_id: event.turn_id.clone(),
            seq: event.seq,
            kind: event.kind.type_name().to_string(),
            ts: event.ts,
            data,
        })
    }

    pub fn decode(&self) -> Result<TurnEvent, StoreError> {
        serde_json::from_str(&self.data).map_err(|e| StoreError::corrupt("turn event", e))
    }

    pub fn is_turn_finished(&self) -> bool {
        self.kind == "turn_finished"
    }
}

/// An event the store can append and then hand to live readers: an owned one is copied once
/// into an allocation the readers share; a shared one (the event writer's) is handed on as it
/// is, so a busy server encodes each event once and never copies it per reader.
pub trait AppendEvent: Sync {
    fn event(&self) -> &StoredEvent;
    fn shared(&self) -> Arc<StoredEvent>;
}

impl AppendEvent for StoredEvent {
    fn event(&self) -> &StoredEvent {
        self
    }

    fn shared(&self) -> Arc<StoredEvent> {
        Arc::new(self.clone())
    }
}

impl AppendEvent for Arc<StoredEvent> {
    fn event(&self) -> &StoredEvent {
        self
    }

    fn shared(&self) -> Arc<StoredEvent> {
        self.clone()
    }
}

/// One image of a turn with its bytes: what the model was sent.
#[derive(Clone, PartialEq, Eq)]
pub struct TurnImageRow {
    /// The turn's own id of it (`image_1`, …).
    pub id: String,
    pub name: String,
    pub mime: String,
    pub width: u32,
    pub height: u32,
    pub content: Vec<u8>,
}

impl std::fmt::Debug for TurnImageRow {
    // The bytes would flood a log or a failed assertion; their length says enough.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnImageRow")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("mime", &self.mime)
            .field("width", &self.width)
            .field("height", &self.height)
            .field("content", &self.content.len())
            .finish()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactMeta {
    pub id: String,
    pub turn_id: String,
    pub user_id: String,
    pub name: String,
    pub mime: String,
    pub size: u64,
    pub created_at: i64,
    #[serde(default)]
    pub origin: ArtifactOrigin,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewArtifact {
    pub turn_id: String,
    pub user_id: String,
    pub name: String,
    pub mime: String,
    pub content: Vec<u8>,
    pub origin: ArtifactOrigin,
}

/// Where an artifact's bytes came from, which decides whether a page may show them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArtifactOrigin {
    /// A file found in the turn's workspace: model code may have written any bytes there.
    #[default]
    Workspace,
    /// A figure deepsolve drew itself, stored with the bytes it wrote (their hash checked).
    Rendered,
}

impl ArtifactOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            ArtifactOrigin::Workspace => "workspace",
            ArtifactOrigin::Rendered => "rendered",
        }
    }

    /// Its stored spelling; anything unknown is the cautious `Workspace`.
    pub fn parse(stored: &str) -> Self {
        match stored {
            "rendered" => ArtifactOrigin::Rendered,
            _ => ArtifactOrigin::Workspace,
        }
    }
}
