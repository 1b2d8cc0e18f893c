//! What every handler shares.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use deepsolve_app::App;
use deepsolve_core::SolveConfig;
use deepsolve_store::Store;
use tokio_util::sync::CancellationToken;

use deepsolve_app::writer::EventWriter;

use crate::cors::CorsOrigins;
use crate::listener::ConnectionLimits;
use crate::metrics::Metrics;

/// The largest artifact copied into the store, unless configured otherwise (the CLI's too).
pub use deepsolve_app::DEFAULT_MAX_ARTIFACT_BYTES;

/// Who may call: decided at start from whether the store has users.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// No users exist: loopback only, no token needed, the caller is an admin.
    SingleUser,
    /// Bearer tokens required.
    Tokens,
}

/// Server options (the `server` settings and the flags of `deepsolve serve`).
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// This replica's name; crash recovery marks only its own turns `interrupted`, so it must
    /// be stable across restarts (the CLI defaults it to the listen address).
    pub instance_id: String,
    /// The solve knobs every turn starts from; a turn's `config` overrides them strictly.
    pub defaults: SolveConfig,
    pub context_window: u64,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Longest accepted problem, in characters.
    pub max_problem_chars: usize,
    /// Turns this replica runs at once; more are refused with 503.
    pub max_running_turns: usize,
    /// How often an SSE reader re-checks the log without a notification (a safety net for
    /// missed notifications; live events arrive without polling).
    pub sse_poll: Duration,
    /// Per-turn workspaces (`<root>/<turn_id>`) where tools write files; `None`: no workspace.
    pub workspace_root: Option<PathBuf>,
    /// How long a finished turn's workspace is kept after its last change
    /// (`sandbox.retention_days`; empty ones go at the next collection).
    pub workspace_retention: Duration,
    /// How often the workspace collector runs (`deepsolve_server::gc`), after its first pass
    /// at start.
    pub workspace_gc_interval: Duration,
    /// Largest artifact copied into the store.
    pub max_artifact_bytes: u64,
    /// The settings file `PUT /api/v1/capabilities/settings` writes (`None`: read-only).
    pub settings_path: Option<PathBuf>,
    /// Header, body and idle timeouts and the connection cap.
    pub limits: ConnectionLimits,
    /// Browser origins allowed to call the API (none: no CORS headers at all); a
    /// cookie-authenticated change may also come from them.
    pub cors_origins: CorsOrigins,
    /// How long a web UI sign-in (a browser session) lasts (`server.session_hours`).
    pub session_ttl: Duration,
    /// Mark the session cookie `Secure` always (`server.secure_cookies`).
    pub secure_cookies: bool,
    /// Believe `X-Forwarded-Proto` (`server.trust_forwarded_proto`): `https` there makes the
    /// cookie `Secure` and fixes the scheme of the server's own origin.
    pub trust_forwarded_proto: bool,
    /// The main model's price (`llm.price`), shown by the web UI.
    pub price: Option<deepsolve_protocol::api::PriceView>,
    /// Uploads and their ingest.
    pub kb: KbConfig,
    /// The server's public origin (`server.public_url`): absolute links it hands out (the
    /// facade's artifact links) start with it.
    pub public_url: Option<crate::links::PublicUrl>,
    /// Signs the facade's artifact links ([`crate::links`]).
    pub link_key: crate::links::LinkKey,
    /// How long an artifact link stays valid (`server.artifact_link_hours`).
    pub artifact_link_ttl: Duration,
    /// Evaluation runs: where they are kept, and their limits.
    pub evals: crate::evals::EvalConfig,
    /// The token Prometheus may send to `/metrics` (the variable `server.metrics_token_env`
    /// names); with users, `/metrics` otherwise needs an admin.
    pub metrics_token: Option<MetricsToken>,
    /// The prompt overrides loaded with the settings (`prompts`, and the `prompts/` directory
    /// beside the settings file); the settings endpoint shows and changes them.
    pub prompts: deepsolve_settings::prompts::PromptsSettings,
    /// What a turn's image may be (size, pixels; scaled to `max_side` for the model).
    pub images: deepsolve_app::images::ImageLimits,
    /// How long a stopping server waits for its cancelled turns and ingests to end
    /// (`server.shutdown_grace_s`).
    pub shutdown_grace: Duration,
}

/// A secret bearer token for `/metrics`. `Debug` does not show it.
#[derive(Clone)]
pub struct MetricsToken(String);

impl std::fmt::Debug for MetricsToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MetricsToken(***)")
    }
}

impl MetricsToken {
    /// `None` for a blank token (an unset variable must not open `/metrics` to a blank bearer).
    pub fn new(token: &str) -> Option<Self> {
        let token = token.trim();
        (!token.is_empty()).then(|| MetricsToken(token.to_string()))
    }

    /// `presented` is this token. Both sides are hashed first, so the comparison's time says
    /// nothing about how much of the token a guess got right.
    pub fn matches(&self, presented: &str) -> bool {
        use sha2::Digest;
        sha2::Sha256::digest(self.0.as_bytes()) == sha2::Sha256::digest(presented.as_bytes())
    }
}

/// Uploads to knowledge bases (and a turn's attachments) and their ingest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KbConfig {
    /// The largest file (`kb.max_file_mb`); the ingestor checks it again.
    pub max_file_bytes: u64,
    /// Most files per request.
    pub max_files: usize,
    /// Ingests this replica runs at once; more wait their turn (`queued`).
    pub ingest_concurrency: usize,
}

impl Default for KbConfig {
    fn default() -> Self {
        KbConfig {
            max_file_bytes: 50 * 1024 * 1024,
            max_files: crate::upload::MAX_FILES,
            ingest_concurrency: crate::ingest::DEFAULT_CONCURRENCY,
        }
    }
}

impl ServerConfig {
    /// The largest facade request (`/v1/chat/completions`): its images come inline, as
    /// base64 data URLs, so it may carry a few at the image cap (4/3 for base64) with the
    /// conversation.
    pub fn max_facade_body_bytes(&self) -> usize {
        let images = self.images.max_bytes.saturating_mul(4 * 4) / 3;
        let bytes = images.saturating_add(self.max_body_bytes as u64);
        usize::try_from(bytes).unwrap_or(usize::MAX)
    }
}

impl KbConfig {
    /// The largest upload request: a few files at the cap (with room for the multipart
    /// framing). Past it: 413, send fewer files per request.
    pub fn max_request_bytes(&self) -> usize {
        let bytes = self
            .max_file_bytes
            .saturating_mul(4)
            .saturating_add(1024 * 1024);
        usize::try_from(bytes).unwrap_or(usize::MAX)
    }

    pub fn caps(&self) -> crate::upload::UploadCaps {
        crate::upload::UploadCaps {
            max_file_bytes: self.max_file_bytes,
            max_files: self.max_files,
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            instance_id: "default".into(),
            defaults: SolveConfig::default(),
            context_window: deepsolve_core::DEFAULT_CONTEXT_WINDOW,
            max_body_bytes: 1024 * 1024,
            max_problem_chars: 100_000,
            max_running_turns: 4096,
            sse_poll: Duration::from_secs(5),
            workspace_root: None,
            workspace_retention: Duration::from_secs(7 * 24 * 60 * 60),
            workspace_gc_interval: Duration::from_secs(60 * 60),
            max_artifact_bytes: DEFAULT_MAX_ARTIFACT_BYTES,
            settings_path: None,
            limits: ConnectionLimits::default(),
            cors_origins: CorsOrigins::default(),
            session_ttl: Duration::from_secs(12 * 60 * 60),
            secure_cookies: false,
            trust_forwarded_proto: false,
            price: None,
            kb: KbConfig::default(),
            public_url: None,
            link_key: crate::links::LinkKey::random(),
            artifact_link_ttl: Duration::from_secs(7 * 24 * 60 * 60),
            metrics_token: None,
            prompts: Default::default(),
            images: deepsolve_app::images::ImageLimits::default(),
            shutdown_grace: Duration::from_secs(10),
            evals: crate::evals::EvalConfig::default(),
        }
    }
}

/// Why [`AppState::register_turn`] gave no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotRefused {
    /// This replica runs as many turns as it may.
    Busy,
    /// The turn is already running on this replica.
    AlreadyRunning,
}

impl From<SlotRefused> for crate::error::ApiError {
    fn from(refused: SlotRefused) -> Self {
        match refused {
            SlotRefused::Busy => crate::error::ApiError::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                deepsolve_protocol::api::ApiErrorCode::Busy,
                "this server is running as many turns as it may; retry shortly",
            ),
            SlotRefused::AlreadyRunning => {
                crate::error::ApiError::conflict("the turn is already running")
            }
        }
    }
}

pub struct AppState {
    pub store: Store,
    /// The engine, the main model and the mounted tools (which a turn gets by the catalog's
    /// rule: `App::tools_for_turn`).
    pub app: Arc<App>,
    pub config: ServerConfig,
    pub auth: AuthMode,
    pub writer: EventWriter,
    pub metrics: Arc<Metrics>,
    /// This replica's background ingests.
    pub ingest: crate::ingest::IngestJobs,
    /// The solve defaults in force (the settings endpoint changes them without a restart).
    solve_defaults: RwLock<deepsolve_core::SolveConfig>,
    /// The prompt overrides in force (likewise; the engine holds their texts).
    prompts: RwLock<deepsolve_settings::prompts::PromptsSettings>,
    /// Serialises settings writes (read-modify-write of one file).
    pub settings_write: tokio::sync::Mutex<()>,
    running: Mutex<HashMap<String, CancellationToken>>,
    /// This replica's running evaluations.
    pub evals: crate::evals::EvalRuns,
    /// Set once the server is stopping: a run cancelled then is interrupted, not cancelled.
    stopping: std::sync::atomic::AtomicBool,
}

impl AppState {
    pub fn new(
        store: Store,
        app: Arc<App>,
        config: ServerConfig,
        auth: AuthMode,
        writer: EventWriter,
        metrics: Arc<Metrics>,
    ) -> Self {
        AppState {
            ingest: crate::ingest::IngestJobs::new(config.kb.ingest_concurrency),
            solve_defaults: RwLock::new(config.defaults.clone()),
            prompts: RwLock::new(config.prompts.clone()),
            settings_write: tokio::sync::Mutex::new(()),
            store,
            app,
            config,
            auth,
            writer,
            metrics,
            running: Mutex::new(HashMap::new()),
            evals: crate::evals::EvalRuns::default(),
            stopping: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub fn solve_defaults(&self) -> deepsolve_core::SolveConfig {
        self.solve_defaults
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn set_solve_defaults(&self, config: deepsolve_core::SolveConfig) {
        *self
            .solve_defaults
            .write()
            .unwrap_or_else(PoisonError::into_inner) = config;
    }

    pub fn prompts(&self) -> deepsolve_settings::prompts::PromptsSettings {
        self.prompts
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn set_prompts(&self, prompts: deepsolve_settings::prompts::PromptsSettings) {
        *self.prompts.write().unwrap_or_else(PoisonError::into_inner) = prompts;
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reserve a slot for a turn on this replica. Refused when all slots are taken, or when
    /// the turn already runs here (two racing resumes must not share, or steal, one slot).
    pub fn register_turn(&self, turn_id: &str) -> Result<CancellationToken, SlotRefused> {
        let mut running = self.running();
        if running.contains_key(turn_id) {
            return Err(SlotRefused::AlreadyRunning);
        }
        if running.len() >= self.config.max_running_turns {
            return Err(SlotRefused::Busy);
        }
        let token = CancellationToken::new();
        running.insert(turn_id.to_string(), token.clone());
        Ok(token)
    }

    pub fn unregister_turn(&self, turn_id: &str) {
        self.running().remove(turn_id);
    }

    /// Cancel a turn running on this replica; `false` if it is not running here.
    pub fn cancel_turn(&self, turn_id: &str) -> bool {
        match self.running().get(turn_id) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    pub fn running_turns(&self) -> usize {
        self.running().len()
    }

    /// Cancel every running turn (shutdown).
    pub fn cancel_all(&self) {
        for token in self.running().values() {
            token.cancel();
        }
    }

    /// Stop every evaluation (shutdown): their runs end `interrupted`, finished results kept.
    pub fn stop_evals(&self) {
        self.stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.evals.cancel_all();
    }

    /// Whether the server is stopping (see [`AppState::stop_evals`]).
    pub fn evals_stopping(&self) -> bool {
        self.stopping.load(std::sync::atomic::Ordering::SeqCst)
    }
}
