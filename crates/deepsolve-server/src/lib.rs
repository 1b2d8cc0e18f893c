//! deepsolve-server: the HTTP face of the engine.
//!
//! - `POST /api/v1/turns` starts a turn on its own task; every event is appended to the store
//!   as it happens (`deepsolve_app::writer`, through `deepsolve_app::life`, which owns a
//!   turn's life) and fanned out to live readers.
//! - `GET /api/v1/turns/{id}/events` follows a turn over SSE (`id: <seq>`, resumable with
//!   `Last-Event-ID`; a finished turn replays in full; any number of readers).
//! - `GET /api/v1/turns/{id}`, `POST …/cancel`, `POST …/resume`; sessions list/get/delete
//!   (a follow-up turn in a session sees the earlier answers and solve records); artifact
//!   downloads; `/healthz`.
//! - Knowledge bases ([`kb`]): CRUD, `multipart/form-data` uploads ([`upload`]) ingested in
//!   the background ([`ingest`]), search; a turn names knowledge bases or brings attachments,
//!   its answer's `sources` say which document and page each `[n]` is.
//! - Evaluations ([`evals`]): `POST /api/v1/evals` runs a problem set (shipped or uploaded)
//!   under the `plain` and `deepsolve` modes against the server's model; progress over SSE,
//!   results, report and plots through the API; kept under the data directory.
//! - Errors are `{"error": {"code", "message"}}`; another user's data is a 404.
//! - The web UI at `/` and its client-side routes, from assets embedded in the binary ([`ui`]).

pub mod auth;
pub mod body_timeout;
pub mod browser_auth;
pub mod capabilities;
pub mod cors;
pub mod error;
pub mod evals;
pub mod extract;
pub mod gc;
pub mod images;
pub mod ingest;
pub mod kb;
pub mod links;
mod listener;
mod memory;
pub mod metrics;
pub mod openai;
pub mod openapi;
pub mod resume;
pub mod routes;
pub mod runner;
pub mod settings_api;
pub mod sse;
pub mod state;
pub mod ui;
pub mod upload;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use deepsolve_app::App;
use deepsolve_store::{Store, StoreError};
use tokio::net::TcpListener;
use tower_http::catch_panic::CatchPanicLayer;

pub use auth::{AuthMode, Caller, Credential, LOCAL_USER, SESSION_COOKIE, UnsafeBind, check_bind};
pub use cors::{CorsOrigins, InvalidOrigin};
pub use error::ApiError;
pub use links::{LinkKey, PublicUrl};
pub use listener::ConnectionLimits;
pub use state::{AppState, DEFAULT_MAX_ARTIFACT_BYTES, KbConfig, MetricsToken, ServerConfig};

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    UnsafeBind(#[from] UnsafeBind),
    #[error("cannot listen on {addr}")]
    Listen {
        addr: String,
        #[source]
        source: std::io::Error,
    },
}

/// Prepare the shared state around `app` (engine, model, mounted tools: `deepsolve-app`):
/// pick the auth mode, mark turns this instance left running as interrupted and documents
/// whose ingest stopped making progress as failed ([`ingest::sweep_interrupted`], now and then
/// every minute), start the event writer and (on PostgreSQL) the notification listener.
pub async fn prepare(
    store: Store,
    app: Arc<App>,
    config: ServerConfig,
) -> Result<Arc<AppState>, ServerError> {
    let auth = if store.count_users().await? == 0 {
        AuthMode::SingleUser
    } else {
        AuthMode::Tokens
    };
    let interrupted = store.mark_interrupted(&config.instance_id).await?;
    if !interrupted.is_empty() {
        tracing::warn!(
            count = interrupted.len(),
            "turns left running by a previous run are now interrupted (resumable)"
        );
    }
    let swept = ingest::sweep_interrupted(&store).await?;
    if swept > 0 {
        tracing::warn!(
            count = swept,
            "documents whose ingest stopped making progress are now failed (upload them again)"
        );
    }
    if let Some(root) = &config.evals.root {
        let interrupted = evals::mark_interrupted(root);
        if interrupted > 0 {
            tracing::warn!(
                count = interrupted,
                "evaluations left running by a previous run are now interrupted (results kept)"
            );
        }
    }
    store.start_listener().await?;
    let metrics = Arc::new(metrics::Metrics::default());
    let writer = deepsolve_app::writer::EventWriter::spawn(store.clone(), metrics.clone());
    let state = Arc::new(AppState::new(store, app, config, auth, writer, metrics));
    tokio::spawn(relay_cancellations(Arc::downgrade(&state)));
    tokio::spawn(sweep_periodically(Arc::downgrade(&state)));
    Ok(state)
}

/// [`ingest::sweep_interrupted`] every [`ingest::SWEEP_EVERY`] until the server's state is
/// dropped: an ingest that died on another replica (or in this one's previous run, started
/// within the staleness limit) is failed within about [`ingest::STALE_AFTER`], not only at the
/// next restart.
async fn sweep_periodically(state: std::sync::Weak<AppState>) {
    loop {
        tokio::time::sleep(ingest::SWEEP_EVERY).await;
        let Some(current) = state.upgrade() else {
            return;
        };
        match ingest::sweep_interrupted(&current.store).await {
            Ok(0) => {}
            Ok(count) => tracing::warn!(
                count,
                "documents whose ingest stopped making progress are now failed (upload them again)"
            ),
            Err(e) => tracing::warn!(error = %e, "the interrupted-ingest sweep failed"),
        }
    }
}

/// Cancel the turns other replicas ask us to (a cancel request may reach any replica).
async fn relay_cancellations(state: std::sync::Weak<AppState>) {
    let Some(mut requests) = state.upgrade().map(|s| s.store.cancel_requests()) else {
        return;
    };
    loop {
        match requests.recv().await {
            Ok(turn_id) => match state.upgrade() {
                Some(state) => {
                    state.cancel_turn(&turn_id);
                }
                None => return,
            },
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// The routes, with the body size and time limits, panic catching and CORS (for the
/// configured origins only).
pub fn router(state: Arc<AppState>) -> Router {
    let max_body = state.config.max_body_bytes;
    let body_timeout = state.config.limits.body_timeout;
    let cors = state.config.cors_origins.layer();
    // Uploads (and turns with attachments) may be larger than any other body; a JSON body
    // is still held to `max_body` (see `routes::create_turn`).
    let uploads = DefaultBodyLimit::max(state.config.kb.max_request_bytes());
    // The facade's images come inline (data URLs): its body may hold a few.
    let facade_body = DefaultBodyLimit::max(state.config.max_facade_body_bytes());
    // An evaluation may upload its problem set inline.
    let eval_body = DefaultBodyLimit::max(state.config.evals.max_request_bytes());
    let routes = Router::new()
        .route("/api/v1/turns", post(routes::create_turn).layer(uploads))
        .route("/api/v1/turns/{id}", get(routes::get_turn))
        .route("/api/v1/turns/{id}/events", get(routes::turn_events))
        .route("/api/v1/turns/{id}/cancel", post(routes::cancel_turn))
        .route("/api/v1/turns/{id}/resume", post(routes::resume_turn))
        .route(
            "/api/v1/turns/{id}/images/{image}",
            get(images::get_turn_image),
        )
        .route(
            "/api/v1/evals",
            get(evals::list_evals)
                .post(evals::create_eval)
                .layer(eval_body),
        )
        .route(
            "/api/v1/evals/{id}",
            get(evals::get_eval).delete(evals::delete_eval),
        )
        .route("/api/v1/evals/{id}/events", get(evals::eval_events))
        .route("/api/v1/evals/{id}/plots/{file}", get(evals::get_plot))
        .route("/api/v1/sessions", get(routes::list_sessions))
        .route(
            "/api/v1/sessions/{id}",
            get(routes::get_session).delete(routes::delete_session),
        )
        .route("/api/v1/artifacts/{id}", get(routes::get_artifact))
        .route(
            "/api/v1/artifacts/{id}/inline",
            get(routes::get_artifact_inline),
        )
        .route(
            "/api/v1/artifacts/{id}/signed",
            get(routes::get_artifact_signed),
        )
        .route(
            "/api/v1/knowledge-bases",
            get(kb::list_kbs).post(kb::create_kb),
        )
        .route(
            "/api/v1/knowledge-bases/{kb}",
            get(kb::get_kb).delete(kb::delete_kb),
        )
        .route(
            "/api/v1/knowledge-bases/{kb}/documents",
            post(kb::upload_documents).layer(uploads),
        )
        .route(
            "/api/v1/knowledge-bases/{kb}/documents/{doc}",
            get(kb::get_document).delete(kb::delete_document),
        )
        .route("/api/v1/knowledge-bases/{kb}/search", post(kb::search_kb))
        .route("/api/v1/auth/session", get(browser_auth::session))
        .route("/api/v1/auth/login", post(browser_auth::login))
        .route("/api/v1/auth/logout", post(browser_auth::logout))
        .route("/api/v1/capabilities", get(capabilities::capabilities))
        .route(
            "/api/v1/capabilities/settings",
            get(settings_api::get_settings).put(settings_api::put_settings),
        )
        .route("/healthz", get(routes::healthz))
        .route("/metrics", get(routes::metrics))
        .route("/openapi.json", get(openapi::openapi_json))
        .route(
            "/v1/chat/completions",
            post(openai::chat_completions).layer(facade_body),
        )
        .route("/v1/models", get(openai::list_models))
        .route("/", get(ui::page))
        .route("/assets/{*path}", get(ui::asset))
        .fallback(ui::fallback)
        .layer(DefaultBodyLimit::max(max_body))
        .layer(axum::middleware::from_fn_with_state(
            body_timeout,
            body_timeout::limit_body_time,
        ))
        .layer(CatchPanicLayer::custom(
            |_panic: Box<dyn std::any::Any + Send>| {
                axum::response::IntoResponse::into_response(ApiError::internal())
            },
        ))
        .with_state(state);
    match cors {
        Some(cors) => routes.layer(cors),
        None => routes,
    }
}

/// Serve on a bound listener until `shutdown` resolves, with the connection limits of
/// `state.config.limits` (header, body and idle timeouts, the connection cap: see
/// [`ConnectionLimits`]). Running turns are then cancelled (their SSE streams end with
/// `turn_finished: cancelled`, which also lets the graceful shutdown finish: it waits for
/// open streams) and their ends are recorded before this returns — a clean stop leaves no
/// turn `running` for the next start to call interrupted.
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    if let Ok(local) = listener.local_addr() {
        check_bind(local, state.auth)?;
    }
    let app = router(state.clone());
    memory::spawn_trimmer(&state);
    let stopping = state.clone();
    listener::serve_connections(listener, app, state.config.limits, async move {
        shutdown.await;
        stopping.cancel_all();
        stopping.stop_evals();
        stopping.ingest.stop_all();
    })
    .await;
    state.cancel_all();
    // Turns and ingests stop together, within one grace period.
    let deadline = tokio::time::Instant::now() + state.config.shutdown_grace;
    tokio::join!(
        wait_for_turns(&state, deadline),
        state.ingest.shut_down(deadline)
    );
    Ok(())
}

async fn wait_for_turns(state: &AppState, deadline: tokio::time::Instant) {
    while state.running_turns() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Bind `addr` after checking it is allowed in the current auth mode.
pub async fn bind(addr: SocketAddr, mode: AuthMode) -> Result<TcpListener, ServerError> {
    check_bind(addr, mode)?;
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Listen {
            addr: addr.to_string(),
            source,
        })
}
