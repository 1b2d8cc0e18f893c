//! The web UI's sign-in: `POST /api/v1/auth/login` trades a bearer token for a browser
//! session (an `HttpOnly`, `SameSite=Strict` cookie naming a server-side session stored
//! hashed), `POST /api/v1/auth/logout` ends it, `GET /api/v1/auth/session` says who is
//! signed in. The token itself never stays in the browser.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use deepsolve_protocol::api::{
    AuthMode as ModeView, AuthSessionView, LoginRequest, UserRole, UserView,
};
use deepsolve_store::Role;

use crate::auth::{
    AuthMode, Caller, Credential, SESSION_COOKIE, check_origin, forwarded_proto, identify,
    session_cookie,
};
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiJson;
use crate::state::AppState;

type AppStateRef = State<Arc<AppState>>;

/// `GET /api/v1/auth/session`: no authentication needed; `user` is `null` when the request
/// carries no live credential.
pub async fn session(
    State(state): AppStateRef,
    headers: HeaderMap,
) -> ApiResult<Json<AuthSessionView>> {
    let caller = match identify(&headers, &state).await {
        Ok(caller) => caller,
        Err(e) if e.status == StatusCode::UNAUTHORIZED => None,
        Err(e) => return Err(e),
    };
    Ok(Json(view(&state, caller.as_ref())))
}

/// `POST /api/v1/auth/login`.
pub async fn login(
    State(state): AppStateRef,
    headers: HeaderMap,
    ApiJson(req): ApiJson<LoginRequest>,
) -> ApiResult<Response> {
    if state.auth == AuthMode::SingleUser {
        return Err(ApiError::conflict(
            "this server runs in single-user mode: nobody needs to sign in",
        ));
    }
    // A browser always sends Origin on a POST; a foreign one is a page elsewhere trying to
    // sign the browser in under its own account.
    check_origin(&headers, &state, false)?;
    let user = state
        .store
        .authenticate(req.token.trim())
        .await?
        .ok_or_else(|| ApiError::unauthorized("unknown or revoked token"))?;
    let ttl = state.config.session_ttl;
    let issued = state.store.create_browser_session(&user.id, ttl).await?;
    let caller = Caller {
        user_id: user.id,
        name: user.name,
        role: user.role,
        credential: Credential::Cookie {
            expires_at: issued.expires_at,
        },
    };
    let cookie = format!(
        "{SESSION_COOKIE}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{}",
        issued.secret,
        ttl.as_secs(),
        secure_attribute(&headers, &state)
    );
    Ok(with_cookie(
        Json(view(&state, Some(&caller))).into_response(),
        &cookie,
    ))
}

/// `POST /api/v1/auth/logout`: the session is deleted and the cookie cleared (also when it
/// had already ended). With a cookie it is a cookie-authenticated change: same origin only.
pub async fn logout(State(state): AppStateRef, headers: HeaderMap) -> ApiResult<Response> {
    if let Some(secret) = session_cookie(&headers) {
        check_origin(&headers, &state, true)?;
        state.store.delete_browser_session(secret).await?;
    }
    let cookie = format!(
        "{SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{}",
        secure_attribute(&headers, &state)
    );
    Ok(with_cookie(StatusCode::NO_CONTENT.into_response(), &cookie))
}

/// `; Secure` when the browser reached us over https (a setting says so always, or a
/// trusted proxy says so for this request).
fn secure_attribute(headers: &HeaderMap, state: &AppState) -> &'static str {
    let https = state.config.secure_cookies || forwarded_proto(headers, state) == Some("https");
    if https { "; Secure" } else { "" }
}

fn with_cookie(mut response: Response, cookie: &str) -> Response {
    match HeaderValue::from_str(cookie) {
        Ok(value) => {
            let headers = response.headers_mut();
            headers.insert(header::SET_COOKIE, value);
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        // The secret is hex and the rest fixed text: a header value it always is.
        Err(_) => ApiError::internal().into_response(),
    }
}

fn view(state: &AppState, caller: Option<&Caller>) -> AuthSessionView {
    let mode = match state.auth {
        AuthMode::SingleUser => ModeView::SingleUser,
        AuthMode::Tokens => ModeView::Tokens,
    };
    AuthSessionView {
        mode,
        user: caller.map(user_view),
        expires_at: caller.and_then(|c| match c.credential {
            Credential::Cookie { expires_at } => Some(expires_at),
            Credential::Local | Credential::Bearer => None,
        }),
    }
}

pub fn user_view(caller: &Caller) -> UserView {
    UserView {
        id: caller.user_id.clone(),
        name: caller.name.clone(),
        role: match caller.role {
            Role::Admin => UserRole::Admin,
            Role::User => UserRole::User,
        },
    }
}
