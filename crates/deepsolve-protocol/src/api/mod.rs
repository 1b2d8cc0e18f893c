//! The HTTP API's requests, responses and errors (`/api/v1/…`, `/healthz`), and the OpenAI
//! facade's ([`openai`]).

pub mod kb;
pub mod openai;
pub mod settings;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::image::TurnImageView;
use crate::outcome::StopReason;
use crate::solve::{Language, SolveRecord};
use crate::tool::Source;
use crate::turn::TurnStatus;
use crate::usage::Usage;

pub use kb::{
    CreateKb, DocumentStatus, DocumentView, DocumentsAccepted, KbDetail, KbList, KbView,
    KnowledgeView, SearchHit, SearchKb, SearchResults, TurnAttachment,
};
pub use settings::{ClampedValue, PlaybookChange, PlaybookView, PromptOverrideView, PromptsView};

/// `POST /api/v1/turns`. Unknown fields are refused by name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTurn {
    pub problem: String,
    /// Continue this session: the turn sees the earlier answers and solve records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// `en` (the default) or `zh`; `english`, `chinese`, `zh-cn` and `中文` are understood.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// Work tools to offer, by name (the server's automatic tools are added).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Solve knob overrides; unknown keys are refused by name, values clamped.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub config: Map<String, Value>,
    /// Files for this turn only, ingested before it starts (one that cannot be read refuses
    /// the turn with 422 naming it). Larger files go as `multipart/form-data`: a part
    /// `request` with this JSON and parts `file`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<TurnAttachment>,
    /// The caller's knowledge bases the turn may search, by id or name (an unknown one is
    /// refused with 422 listing the caller's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub knowledge_bases: Vec<String>,
    /// Pictures of the problem or its figure (PNG, JPEG, WebP or GIF by their bytes, at most
    /// 10 MiB each and 8 per turn), base64 with a name; larger ones go as `multipart/form-data`
    /// parts `image`. One that is not a usable image refuses the turn naming it (422
    /// `invalid_image`, 413 over the size cap); a turn whose images nothing can see is refused
    /// with 422 `cannot_see_images`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<TurnAttachment>,
}

/// A started (or resumed) turn: follow `events_url`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TurnCreated {
    pub turn_id: String,
    pub session_id: String,
    pub status: TurnStatus,
    /// The turn's events over SSE.
    pub events_url: String,
}

/// A turn as clients see it (`GET /api/v1/turns/{id}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TurnView {
    pub id: String,
    pub session_id: String,
    pub status: TurnStatus,
    pub problem: String,
    pub answer: Option<String>,
    pub stop_reason: Option<StopReason>,
    pub usage: Option<Usage>,
    /// The plan with its steps and summaries (the solve record).
    pub solve: Option<SolveRecord>,
    pub rounds: u32,
    pub elapsed_ms: u64,
    pub error: Option<String>,
    pub language: Option<Language>,
    pub tools: Vec<String>,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    pub finished_at: Option<i64>,
    pub artifacts: Vec<ArtifactView>,
    /// The sources the answer cites (`[n]`), by `n`.
    #[serde(default)]
    pub sources: Vec<Source>,
    pub events_url: String,
    /// The images the turn was given, in order (shown above its problem).
    #[serde(default)]
    pub images: Vec<TurnImageView>,
}

/// A file a turn produced, downloadable from `url`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ArtifactView {
    pub id: String,
    pub name: String,
    pub mime: String,
    pub size: u64,
    pub url: String,
}

/// A session (`GET /api/v1/sessions/{id}` has its turns; the list has none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionView {
    pub id: String,
    pub title: String,
    pub created_at: i64,
    pub updated_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<Vec<TurnView>>,
}

/// `GET /api/v1/sessions`: most recent first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionList {
    pub sessions: Vec<SessionView>,
}

/// The query of `GET /api/v1/turns/{id}/events`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Resume after this `seq` (for clients that cannot set `Last-Event-ID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
}

/// The query of `GET /api/v1/sessions`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// 1 to 200; 50 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// What a cancel request answers (202).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CancelAccepted {
    pub turn_id: String,
    pub status: CancelState,
}

/// The turn was asked to stop; it ends with `turn_finished: cancelled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CancelState {
    Cancelling,
}

/// `GET|PUT /api/v1/capabilities/settings`: the solve knobs in force, with their ranges.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SettingsView {
    /// Every knob's value in force, by key.
    pub solve: Map<String, Value>,
    pub knobs: Vec<KnobView>,
    pub flags: Vec<FlagView>,
    /// The caller may change them (an admin, and the server has a settings file).
    pub writable: bool,
    /// The playbook in force per language, and the texts an operator replaced.
    pub prompts: PromptsView,
    /// After a change: the values that were clamped, and to what, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
    /// After a change: each value that was clamped (which key, asked, applied, the range);
    /// empty when every value was taken as asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clamped: Option<Vec<ClampedValue>>,
}

/// A numeric solve knob and its range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KnobView {
    pub key: String,
    pub default: f64,
    pub min: f64,
    pub max: f64,
    /// Values are rounded to whole numbers.
    pub integer: bool,
    pub help: String,
    /// The help in Chinese.
    #[serde(default)]
    pub help_zh: String,
}

/// A boolean solve knob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FlagView {
    pub key: String,
    pub default: bool,
    pub help: String,
    /// The help in Chinese.
    #[serde(default)]
    pub help_zh: String,
}

/// `PUT /api/v1/capabilities/settings`: knob values to change (admin only).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PutSettings {
    #[serde(default)]
    pub solve: Map<String, Value>,
    /// Playbook changes, applied in order, in the same atomic write.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub playbooks: Vec<PlaybookChange>,
}

/// `GET /api/v1/auth/session`: how this server authenticates, and who the caller is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AuthSessionView {
    pub mode: AuthMode,
    /// The signed-in user (in single-user mode, the local admin); `null` when not signed in.
    pub user: Option<UserView>,
    /// When the browser session ends, milliseconds since the Unix epoch; `null` without one
    /// (single-user mode, or a bearer token).
    pub expires_at: Option<i64>,
}

/// How a server authenticates its callers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    /// No users exist: loopback only, nobody signs in.
    SingleUser,
    /// Users sign in with a token (`deepsolve users add NAME` prints one).
    Tokens,
}

/// A user, as the user sees themself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UserView {
    pub id: String,
    pub name: String,
    pub role: UserRole,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UserRole {
    /// May change the server's settings.
    Admin,
    User,
}

/// `POST /api/v1/auth/login`: trade a bearer token for a browser session (an `HttpOnly`
/// cookie); the token itself is not kept by the browser.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginRequest {
    pub token: String,
}

/// `GET /api/v1/capabilities`: what this server offers a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CapabilitiesView {
    /// The main model's name.
    pub model: String,
    /// Every work tool the server knows, mounted or not.
    pub tools: Vec<ToolView>,
    pub limits: LimitsView,
    /// What the main model costs (`llm.price`); `null` when not configured.
    pub price: Option<PriceView>,
    pub sandbox: SandboxView,
    pub knowledge: KnowledgeView,
}

/// A work tool and whether a turn can have it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ToolView {
    pub name: String,
    pub description: String,
    /// Mounted: a turn may ask for it.
    pub available: bool,
    /// Why it cannot be mounted (e.g. "no sandbox: bubblewrap is missing"); `null` when it is.
    pub reason: Option<String>,
    /// Offered when a turn names no tools (automatic, or in `tools.enabled`).
    pub default: bool,
}

/// The request limits a client should check before sending.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LimitsView {
    /// The longest problem, in characters.
    pub max_problem_chars: u64,
    /// The largest request body, in bytes.
    pub max_body_bytes: u64,
    /// The largest image a turn may be given, in bytes.
    pub max_image_bytes: u64,
    /// The most images one turn may have.
    pub max_images: u64,
}

/// The main model's price per million tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PriceView {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    /// As configured, e.g. `USD`.
    pub currency: String,
}

/// The code tools' sandbox, as `deepsolve doctor` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SandboxView {
    /// Model code can run (isolated, or with the explicit `sandbox.backend: none`).
    pub available: bool,
    /// `bwrap` or `none`; `null` without a sandbox.
    pub backend: Option<String>,
    /// What isolates model code, or why nothing can run it.
    pub detail: String,
}

/// `GET /healthz` when the database answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Health {
    pub status: HealthStatus,
    /// This server instance (replica).
    pub instance: String,
    pub running_turns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HealthStatus {
    Ok,
}

/// Every error answer: `{"error": {"code", "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorDetail {
    pub code: ApiErrorCode,
    /// For people: what was wrong with the request (never the server's internals).
    pub message: String,
}

/// The machine-readable `code` of an API error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApiErrorCode {
    /// Missing, or not yours (the same answer, so ids of other users cannot be probed).
    NotFound,
    /// Malformed request (e.g. a `Last-Event-ID` that is not a number).
    BadRequest,
    /// The body is not JSON.
    BadJson,
    PayloadTooLarge,
    UnsupportedMediaType,
    /// The request body did not arrive within the server's body timeout (408).
    RequestTimeout,
    /// Well-formed JSON of the wrong shape, or a value out of place.
    InvalidRequest,
    /// Refused by the store's own checks.
    Invalid,
    /// A feature this server does not offer yet.
    Unsupported,
    UnknownTool,
    UnknownConfigKey,
    InvalidConfig,
    SettingsNotWritten,
    /// The request contradicts the resource's state (e.g. a turn already running).
    Conflict,
    Unauthorized,
    Forbidden,
    /// Too many running turns on this server; retry shortly.
    Busy,
    /// The database is unreachable.
    Unavailable,
    /// The OpenAI facade serves one model, `deepsolve`.
    ModelNotFound,
    /// The facade's turn ended without an answer.
    NoAnswer,
    /// An image of the turn is not a usable PNG, JPEG, WebP or GIF (the message names it).
    InvalidImage,
    /// The turn has images, but neither the model nor a tool of the turn can see them.
    CannotSeeImages,
    /// The server's fault; its log has the details.
    Internal,
}

impl ApiErrorCode {
    pub const ALL: [ApiErrorCode; 23] = [
        ApiErrorCode::NotFound,
        ApiErrorCode::BadRequest,
        ApiErrorCode::BadJson,
        ApiErrorCode::PayloadTooLarge,
        ApiErrorCode::UnsupportedMediaType,
        ApiErrorCode::RequestTimeout,
        ApiErrorCode::InvalidRequest,
        ApiErrorCode::Invalid,
        ApiErrorCode::Unsupported,
        ApiErrorCode::UnknownTool,
        ApiErrorCode::UnknownConfigKey,
        ApiErrorCode::InvalidConfig,
        ApiErrorCode::SettingsNotWritten,
        ApiErrorCode::Conflict,
        ApiErrorCode::Unauthorized,
        ApiErrorCode::Forbidden,
        ApiErrorCode::Busy,
        ApiErrorCode::Unavailable,
        ApiErrorCode::ModelNotFound,
        ApiErrorCode::NoAnswer,
        ApiErrorCode::InvalidImage,
        ApiErrorCode::CannotSeeImages,
        ApiErrorCode::Internal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ApiErrorCode::NotFound => "not_found",
            ApiErrorCode::BadRequest => "bad_request",
            ApiErrorCode::BadJson => "bad_json",
            ApiErrorCode::PayloadTooLarge => "payload_too_large",
            ApiErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ApiErrorCode::RequestTimeout => "request_timeout",
            ApiErrorCode::InvalidRequest => "invalid_request",
            ApiErrorCode::Invalid => "invalid",
            ApiErrorCode::Unsupported => "unsupported",
            ApiErrorCode::UnknownTool => "unknown_tool",
            ApiErrorCode::UnknownConfigKey => "unknown_config_key",
            ApiErrorCode::InvalidConfig => "invalid_config",
            ApiErrorCode::SettingsNotWritten => "settings_not_written",
            ApiErrorCode::Conflict => "conflict",
            ApiErrorCode::Unauthorized => "unauthorized",
            ApiErrorCode::Forbidden => "forbidden",
            ApiErrorCode::Busy => "busy",
            ApiErrorCode::Unavailable => "unavailable",
            ApiErrorCode::ModelNotFound => "model_not_found",
            ApiErrorCode::NoAnswer => "no_answer",
            ApiErrorCode::InvalidImage => "invalid_image",
            ApiErrorCode::CannotSeeImages => "cannot_see_images",
            ApiErrorCode::Internal => "internal",
        }
    }
}

impl std::fmt::Display for ApiErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn error_codes_serialise_as_their_names() {
        for code in ApiErrorCode::ALL {
            assert_eq!(serde_json::to_value(code).expect("json"), code.as_str());
        }
        let body = ErrorBody {
            error: ErrorDetail {
                code: ApiErrorCode::UnknownConfigKey,
                message: "unknown config keys: bogus".into(),
            },
        };
        assert_eq!(
            serde_json::to_value(&body).expect("json"),
            json!({"error": {"code": "unknown_config_key", "message": "unknown config keys: bogus"}})
        );
    }

    #[test]
    fn a_create_turn_refuses_unknown_fields_and_writes_only_what_is_set() {
        let err = serde_json::from_value::<CreateTurn>(json!({"problem": "p", "problme": "q"}));
        assert!(err.is_err_and(|e| e.to_string().contains("problme")));
        let minimal = CreateTurn {
            problem: "p".into(),
            ..CreateTurn::default()
        };
        assert_eq!(
            serde_json::to_value(&minimal).expect("json"),
            json!({"problem": "p"})
        );
    }
}
