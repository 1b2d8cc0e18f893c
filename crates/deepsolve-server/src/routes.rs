//! The HTTP API. Every lookup is scoped by the caller: another user's turn,
//! session or artifact is answered exactly like a missing one (404).

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{FromRequest, Multipart, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use deepsolve_protocol::api::{
    ApiErrorCode, ArtifactView, CancelAccepted, CancelState, CreateTurn, EventsQuery, Health,
    HealthStatus, ListQuery, SessionList, SessionView, TurnView,
};
use deepsolve_protocol::{EventKind, Source};
use deepsolve_store::{ArtifactMeta, ArtifactOrigin, Session, Store, TurnRecord};

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiQuery};
use crate::runner::{Uploaded, start_turn_with_files};
use crate::sse::follow;
use crate::state::AppState;
use crate::upload::{UploadCaps, read_parts};

type AppStateRef = State<Arc<AppState>>;

/// `POST /api/v1/turns`: JSON (held to `max_body_bytes`), or `multipart/form-data` with a
/// part `request` (the JSON) and parts `file` (attachments, up to the upload caps).
pub async fn create_turn(
    State(state): AppStateRef,
    caller: Caller,
    request: Request,
) -> ApiResult<Response> {
    let (req, uploaded) = turn_request(&state, request).await?;
    let created = start_turn_with_files(&state, &caller, req, uploaded).await?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

fn is_multipart(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("multipart/form-data")
        })
}

/// The turn and its uploaded attachments and images (none for a JSON body: its attachments
/// and images are inline).
async fn turn_request(
    state: &Arc<AppState>,
    request: Request,
) -> ApiResult<(CreateTurn, Uploaded)> {
    if !is_multipart(request.headers()) {
        // The route allows upload-sized bodies for multipart; JSON keeps the usual limit.
        let limit = state.config.max_body_bytes;
        let request = request.map(|body| Body::new(http_body_util::Limited::new(body, limit)));
        let req = match ApiJson::<CreateTurn>::from_request(request, state).await {
            Ok(ApiJson(req)) => req,
            Err(mut e) if e.status == StatusCode::PAYLOAD_TOO_LARGE => {
                e.message = format!(
                    "the request body is over {limit} bytes: send attachments and images as \
                     multipart/form-data (a part 'request' with the JSON, parts 'file' and \
                     'image')"
                );
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        return Ok((req, Uploaded::default()));
    }
    let multipart = Multipart::from_request(request, state)
        .await
        .map_err(|e| ApiError::bad_request(e.body_text()))?;
    let images = UploadCaps {
        max_file_bytes: state.config.images.max_bytes,
        max_files: deepsolve_app::images::MAX_IMAGES,
    };
    let parts = read_parts(multipart, state.config.kb.caps(), Some(images)).await?;
    let Some(json) = parts.request else {
        return Err(ApiError::invalid(
            ApiErrorCode::InvalidRequest,
            "a multipart turn needs a part 'request' with the turn's JSON",
        ));
    };
    let req: CreateTurn = serde_json::from_slice(&json).map_err(|e| {
        ApiError::invalid(
            ApiErrorCode::InvalidRequest,
            format!("the part 'request': {e}"),
        )
    })?;
    let uploaded = Uploaded {
        files: parts.files,
        images: parts.images,
    };
    Ok((req, uploaded))
}

fn artifact_view(a: ArtifactMeta) -> ArtifactView {
    ArtifactView {
        url: format!("/api/v1/artifacts/{}", a.id),
        id: a.id,
        name: a.name,
        mime: a.mime,
        size: a.size,
    }
}

fn turn_view(turn: TurnRecord, artifacts: Vec<ArtifactMeta>, sources: Vec<Source>) -> TurnView {
    TurnView {
        images: crate::images::views(&turn.id, &turn.spec.images),
        sources,
        events_url: format!("/api/v1/turns/{}/events", turn.id),
        language: Some(turn.spec.language),
        tools: turn.spec.tools,
        id: turn.id,
        session_id: turn.session_id,
        status: turn.status,
        problem: turn.problem,
        answer: turn.answer,
        stop_reason: turn.stop_reason,
        usage: turn.usage,
        solve: turn.solve,
        rounds: turn.rounds,
        elapsed_ms: turn.elapsed_ms,
        error: turn.error,
        created_at: turn.created_at,
        finished_at: turn.finished_at,
        artifacts: artifacts.into_iter().map(artifact_view).collect(),
    }
}

/// The sources the turn's answer cites: those of its last `answer` event (a turn that has
/// not answered cites nothing).
async fn answer_sources(store: &Store, turn_id: &str) -> ApiResult<Vec<Source>> {
    let Some(stored) = store.last_event_of_kind(turn_id, "answer").await? else {
        return Ok(Vec::new());
    };
    match stored.decode()?.kind {
        EventKind::Answer { sources, .. } => Ok(sources),
        other => {
            tracing::error!(
                turn_id,
                kind = other.type_name(),
                "answer row holds another event"
            );
            Err(ApiError::internal())
        }
    }
}

async fn owned_turn(state: &AppState, caller: &Caller, id: &str) -> ApiResult<TurnRecord> {
    state
        .store
        .turn(id, &caller.user_id)
        .await?
        .ok_or_else(|| ApiError::not_found("turn"))
}

pub async fn get_turn(
    State(state): AppStateRef,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<TurnView>> {
    let turn = owned_turn(&state, &caller, &id).await?;
    let artifacts = state.store.turn_artifacts(&turn.id).await?;
    let sources = answer_sources(&state.store, &turn.id).await?;
    Ok(Json(turn_view(turn, artifacts, sources)))
}

pub async fn turn_events(
    State(state): AppStateRef,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<EventsQuery>,
) -> ApiResult<Response> {
    let turn = owned_turn(&state, &caller, &id).await?;
    let after = match headers.get("last-event-id") {
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    ApiError::bad_request("Last-Event-ID must be an event seq (a number)")
                })?,
        ),
        None => query.after,
    };
    let stream = follow(state.store.clone(), turn.id, after, state.config.sse_poll);
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response();
    // Proxies (nginx) must not buffer a live stream.
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

pub async fn cancel_turn(
    State(state): AppStateRef,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let turn = owned_turn(&state, &caller, &id).await?;
    if turn.status.is_terminal() {
        return Err(ApiError::conflict(format!(
            "the turn is already {}",
            turn.status.as_str()
        )));
    }
    // Running here: cancel it. Running on another replica: ask it (through PostgreSQL).
    if !state.cancel_turn(&turn.id) && !state.store.request_cancel(&turn.id).await? {
        return Err(ApiError::conflict(
            "the turn is not running on this server instance",
        ));
    }
    let body = CancelAccepted {
        turn_id: turn.id,
        status: CancelState::Cancelling,
    };
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}

/// Continue an interrupted turn from its last finished step (see [`crate::resume`]).
pub async fn resume_turn(
    State(state): AppStateRef,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let turn = owned_turn(&state, &caller, &id).await?;
    let resumed = crate::resume::resume_turn(&state, turn).await?;
    // 202 like a cancel: no new resource, the turn goes on in the background.
    Ok((StatusCode::ACCEPTED, Json(resumed)).into_response())
}

fn session_view(s: Session, turns: Option<Vec<TurnView>>) -> SessionView {
    SessionView {
        id: s.id,
        title: s.title,
        created_at: s.created_at,
        updated_at: s.updated_at,
        turns,
    }
}

pub async fn list_sessions(
    State(state): AppStateRef,
    caller: Caller,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> ApiResult<Json<SessionList>> {
    let limit = query.limit.unwrap_or(50).clamp(1, 200);
    let sessions = state.store.list_sessions(&caller.user_id, limit).await?;
    let sessions = sessions
        .into_iter()
        .map(|s| session_view(s, None))
        .collect();
    Ok(Json(SessionList { sessions }))
}

pub async fn get_session(
    State(state): AppStateRef,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<SessionView>> {
    let session = state
        .store
        .session(&id, &caller.user_id)
        .await?
        .ok_or_else(|| ApiError::not_found("session"))?;
    let mut turns = Vec::new();
    for turn in state.store.session_turns(&session.id).await? {
        let artifacts = state.store.turn_artifacts(&turn.id).await?;
        let sources = answer_sources(&state.store, &turn.id).await?;
        turns.push(turn_view(turn, artifacts, sources));
    }
    Ok(Json(session_view(session, Some(turns))))
}

pub async fn delete_session(
    State(state): AppStateRef,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    if state.store.delete_session(&id, &caller.user_id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("session"))
    }
}

/// The caller's artifact and its bytes; another user's is as missing as a deleted one.
async fn caller_artifact(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> ApiResult<(ArtifactMeta, Vec<u8>)> {
    state
        .store
        .artifact(id, &caller.user_id)
        .await?
        .ok_or_else(|| ApiError::not_found("artifact"))
}

/// Artifacts are model-influenced content: always a download, never rendered in our origin
/// (no stored XSS through an HTML or SVG file).
pub async fn get_artifact(
    State(state): AppStateRef,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let (meta, content) = caller_artifact(&state, &caller, &id).await?;
    Ok(download(&meta, content))
}

/// `GET /api/v1/artifacts/{id}/inline`: an artifact shown in the page (`<img src>`), only
/// when its bytes are a raster image by their magic number (whatever the tool called it), or
/// an SVG deepsolve drew itself ([`inline_type`]); with that type, no sniffing and a
/// sandboxing CSP. Anything else is a download (415).
pub async fn get_artifact_inline(
    State(state): AppStateRef,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let (meta, content) = caller_artifact(&state, &caller, &id).await?;
    let Some(mime) = inline_type(&meta, &content) else {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiErrorCode::UnsupportedMediaType,
            "not an inline image; download it",
        ));
    };
    Ok(shown_inline(&meta, mime, content))
}

/// `GET /api/v1/artifacts/{id}/signed?u=&exp=&sig=`: an artifact through a link the facade
/// signed ([`crate::links`]), without a token (a chat UI's `<img>` cannot send one). A raster
/// image is shown inline, anything else downloads, with the same headers as above. A link
/// that is forged, altered or expired is a 404 like a missing artifact, and says nothing more.
pub async fn get_artifact_signed(
    State(state): AppStateRef,
    Path(id): Path<String>,
    ApiQuery(link): ApiQuery<SignedLink>,
) -> ApiResult<Response> {
    let checked =
        crate::links::check_link(&state.config.link_key, &id, &link.u, link.exp, &link.sig);
    if let Err(refused) = checked {
        tracing::debug!(artifact = %id, ?refused, "signed artifact link refused");
        return Err(ApiError::not_found("artifact"));
    }
    let (meta, content) = state
        .store
        .artifact(&id, &link.u)
        .await?
        .ok_or_else(|| ApiError::not_found("artifact"))?;
    Ok(match raster_image_type(&content) {
        Some(mime) => shown_inline(&meta, mime, content),
        None => download(&meta, content),
    })
}

/// The query of a signed artifact link.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedLink {
    /// The owner's user id.
    u: String,
    /// Expiry, seconds since the Unix epoch.
    exp: u64,
    /// HMAC-SHA256 of (artifact, owner, expiry), hex.
    sig: String,
}

/// An artifact as a download, with a sandboxing CSP and no sniffing.
fn download(meta: &ArtifactMeta, content: Vec<u8>) -> Response {
    let headers = [
        (header::CONTENT_TYPE, safe_mime(&meta.mime)),
        (header::CONTENT_DISPOSITION, attachment(&meta.name)),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_string()),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; sandbox".to_string(),
        ),
        (header::CACHE_CONTROL, "private, no-store".to_string()),
    ];
    (headers, content).into_response()
}

/// A verified raster image (`mime` from its magic number), shown inline.
fn shown_inline(meta: &ArtifactMeta, mime: &str, content: Vec<u8>) -> Response {
    let headers = [
        (header::CONTENT_TYPE, mime.to_string()),
        (header::CONTENT_DISPOSITION, inline(&meta.name)),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_string()),
        (
            header::CONTENT_SECURITY_POLICY,
            "sandbox; default-src 'none'".to_string(),
        ),
        (header::CACHE_CONTROL, "private, no-store".to_string()),
    ];
    (headers, content).into_response()
}

/// The type a page may show an artifact as: a raster image by its magic bytes, or SVG when
/// the artifact is a figure we drew — its origin recorded as the tool reported it, with the
/// hash of the bytes it wrote checked — never an SVG found in the workspace (code in the
/// sandbox can write any SVG, and SVG can script).
fn inline_type(meta: &ArtifactMeta, content: &[u8]) -> Option<&'static str> {
    const SVG: &str = "image/svg+xml";
    raster_image_type(content).or_else(|| {
        let ours = meta.origin == ArtifactOrigin::Rendered && meta.mime == SVG;
        (ours && content.starts_with(b"<svg ")).then_some(SVG)
    })
}

/// The image type the bytes start with: PNG, JPEG, GIF or WebP (the one sniffer that also
/// admits a turn's images).
pub(crate) fn raster_image_type(bytes: &[u8]) -> Option<&'static str> {
    deepsolve_app::images::ImageType::sniff(bytes).map(|kind| kind.mime())
}

/// A syntactically plain MIME type, or `application/octet-stream`.
fn safe_mime(mime: &str) -> String {
    let ok = mime.len() <= 100
        && mime.split_once('/').is_some_and(|(a, b)| {
            !a.is_empty()
                && !b.is_empty()
                && mime
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "/+-.".contains(c))
        });
    if ok {
        mime.to_string()
    } else {
        "application/octet-stream".to_string()
    }
}

/// `attachment; filename="…"` with the name reduced to safe characters (no quote or CRLF
/// injection into the header).
fn attachment(name: &str) -> String {
    format!("attachment; filename=\"{}\"", safe_file_name(name))
}

/// `inline; filename="…"` (what a "save image" offers), the name as safe as for a download.
pub(crate) fn inline(name: &str) -> String {
    format!("inline; filename=\"{}\"", safe_file_name(name))
}

pub(crate) fn safe_file_name(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(120)
        .collect();
    if clean.trim_matches('.').is_empty() {
        "artifact".to_string()
    } else {
        clean
    }
}

pub async fn healthz(State(state): AppStateRef) -> Response {
    match state.store.ping().await {
        Ok(()) => Json(Health {
            status: HealthStatus::Ok,
            instance: state.config.instance_id.clone(),
            running_turns: state.running_turns() as u64,
        })
        .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "health check: database unreachable");
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ApiErrorCode::Unavailable,
                "the database is unreachable",
            )
            .into_response()
        }
    }
}

/// Prometheus text format. Aggregates only: no user's data is in it; still, with users, only
/// the scrape token or an admin reads it ([`crate::auth::check_metrics_access`]).
pub async fn metrics(State(state): AppStateRef, headers: HeaderMap) -> ApiResult<Response> {
    crate::auth::check_metrics_access(&headers, &state).await?;
    let body = state
        .metrics
        .render(state.running_turns(), state.store.hub().watched_turns());
    Ok(([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], body).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn download_headers_cannot_be_injected() {
        assert_eq!(safe_mime("image/svg+xml"), "image/svg+xml");
        assert_eq!(safe_mime("text/html\r\nX: y"), "application/octet-stream");
        assert_eq!(safe_mime("nonsense"), "application/octet-stream");
        assert_eq!(
            attachment("a\"b\r\n.html"),
            "attachment; filename=\"a_b__.html\""
        );
        assert_eq!(attachment(".."), "attachment; filename=\"artifact\"");
        assert_eq!(inline("plot 1.png"), "inline; filename=\"plot_1.png\"");
    }

    #[test]
    fn only_svg_we_drew_is_shown_inline_as_svg() {
        let meta = |origin, mime: &str| ArtifactMeta {
            id: "art_1".into(),
            turn_id: "t".into(),
            user_id: "u".into(),
            name: "figure.svg".into(),
            mime: mime.into(),
            size: 1,
            created_at: 0,
            origin,
        };
        let svg = b"<svg xmlns=\"http://www.w3.org/2000/svg\"/>";
        let ours = meta(ArtifactOrigin::Rendered, "image/svg+xml");
        assert_eq!(inline_type(&ours, svg), Some("image/svg+xml"));
        assert_eq!(inline_type(&ours, b"<html><script>"), None);
        let found = meta(ArtifactOrigin::Workspace, "image/svg+xml");
        assert_eq!(inline_type(&found, svg), None);
        let renamed = meta(ArtifactOrigin::Rendered, "text/html");
        assert_eq!(inline_type(&renamed, svg), None);
        assert_eq!(
            inline_type(&found, b"\x89PNG\r\n\x1a\n...."),
            Some("image/png")
        );
    }

    #[test]
    fn only_raster_images_are_shown_inline() {
        assert_eq!(
            raster_image_type(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"),
            Some("image/png")
        );
        assert_eq!(
            raster_image_type(&[0xff, 0xd8, 0xff, 0xe0]),
            Some("image/jpeg")
        );
        assert_eq!(raster_image_type(b"GIF89a..."), Some("image/gif"));
        assert_eq!(
            raster_image_type(b"RIFF\x10\0\0\0WEBPVP8 "),
            Some("image/webp")
        );
        for other in [
            &b"<svg xmlns='http://www.w3.org/2000/svg'/>"[..],
            b"<html><script>alert(1)</script>",
            b"RIFF\x10\0\0\0WAVE",
            b"\x89PNG",
            b"",
        ] {
            assert_eq!(raster_image_type(other), None, "{other:?}");
        }
    }
}
