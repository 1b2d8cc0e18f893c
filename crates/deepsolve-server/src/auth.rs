//! Who is calling. With users configured, every API request needs `Authorization: Bearer
//! <token>` or the web UI's session cookie (`deepsolve_session`, set by `POST
//! /api/v1/auth/login`); without any, the server runs in single-user mode — and then refuses
//! to listen on anything but loopback (see [`check_bind`]).
//!
//! A browser sends its cookie with every request to this server, whichever page started it,
//! so a change (POST, PUT, PATCH, DELETE) authenticated by the cookie must come from the
//! server's own origin or a configured CORS origin (`Origin`); otherwise it is refused as
//! cross-origin. A bearer token is never sent by a browser on its own, so bearer requests
//! need no such check.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, header};
use deepsolve_store::Role;

use crate::error::ApiError;
use crate::state::AppState;
pub use crate::state::AuthMode;
/// The user id of single-user mode.
pub use deepsolve_app::LOCAL_USER;

/// The name of the web UI's session cookie.
pub const SESSION_COOKIE: &str = "deepsolve_session";

/// The authenticated caller of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub user_id: String,
    pub name: String,
    pub role: Role,
    pub credential: Credential,
}

/// How the caller proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    /// Single-user mode: nothing to prove.
    Local,
    Bearer,
    /// The session cookie; the session ends at `expires_at` (ms since the epoch).
    Cookie {
        expires_at: i64,
    },
}

impl Caller {
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }
}

#[derive(Debug, thiserror::Error)]
#[error(
    "refusing to listen on {addr}: no users are configured, so the server would be open to anyone who can reach it. Listen on 127.0.0.1 (single-user mode) or create a user first: deepsolve users add NAME"
)]
pub struct UnsafeBind {
    pub addr: SocketAddr,
}

/// Single-user mode may only listen on loopback.
pub fn check_bind(addr: SocketAddr, mode: AuthMode) -> Result<(), UnsafeBind> {
    if mode == AuthMode::SingleUser && !addr.ip().is_loopback() {
        return Err(UnsafeBind { addr });
    }
    Ok(())
}

impl FromRequestParts<Arc<AppState>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let caller = identify(&parts.headers, state).await?.ok_or_else(|| {
            ApiError::unauthorized(
                "sign in, or send 'Authorization: Bearer <token>' (deepsolve users token NAME)",
            )
        })?;
        if let Credential::Cookie { .. } = caller.credential
            && changes_state(&parts.method)
        {
            check_origin(&parts.headers, state, true)?;
        }
        Ok(caller)
    }
}

/// The local admin of single-user mode.
pub fn local_caller() -> Caller {
    Caller {
        user_id: LOCAL_USER.to_string(),
        name: LOCAL_USER.to_string(),
        role: Role::Admin,
        credential: Credential::Local,
    }
}

/// Who sent these headers: the bearer token if there is one (an unknown one is an error, not
/// anonymity), else the session cookie; `None`: neither (or an ended session).
pub async fn identify(headers: &HeaderMap, state: &AppState) -> Result<Option<Caller>, ApiError> {
    if state.auth == AuthMode::SingleUser {
        return Ok(Some(local_caller()));
    }
    if let Some(token) = bearer(headers) {
        let user = state
            .store
            .authenticate(token)
            .await?
            .ok_or_else(|| ApiError::unauthorized("unknown or revoked token"))?;
        return Ok(Some(Caller {
            user_id: user.id,
            name: user.name,
            role: user.role,
            credential: Credential::Bearer,
        }));
    }
    let Some(secret) = session_cookie(headers) else {
        return Ok(None);
    };
    let session = state.store.browser_session(secret).await?;
    Ok(session.map(|session| Caller {
        user_id: session.user.id,
        name: session.user.name,
        role: session.user.role,
        credential: Credential::Cookie {
            expires_at: session.expires_at,
        },
    }))
}

/// Who may read `/metrics`: anyone in single-user mode (loopback only); with users, a bearer
/// of the scrape token (`server.metrics_token_env`) or an admin (token or signed-in browser).
/// The numbers are aggregates, but tool names, stop reasons and load are an operator's.
pub async fn check_metrics_access(headers: &HeaderMap, state: &AppState) -> Result<(), ApiError> {
    if state.auth == AuthMode::SingleUser {
        return Ok(());
    }
    if let (Some(expected), Some(token)) = (&state.config.metrics_token, bearer(headers))
        && expected.matches(token)
    {
        return Ok(());
    }
    let caller = identify(headers, state).await?.ok_or_else(|| {
        ApiError::unauthorized(
            "/metrics needs 'Authorization: Bearer <token>': the scrape token (server.metrics_token_env) or an admin's",
        )
    })?;
    if caller.is_admin() {
        Ok(())
    } else {
        Err(ApiError::forbidden(
            "/metrics needs the scrape token (server.metrics_token_env) or an admin",
        ))
    }
}

fn changes_state(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

/// The request's `Origin` is this server's own (or a configured CORS origin). `required`:
/// a request without one is refused too (browsers send it on every cross-origin request and
/// on same-origin POSTs, so only a non-browser client omits it).
pub fn check_origin(headers: &HeaderMap, state: &AppState, required: bool) -> Result<(), ApiError> {
    let refused = || ApiError::forbidden("cross-origin request refused");
    let Some(origin) = headers.get(header::ORIGIN) else {
        return if required { Err(refused()) } else { Ok(()) };
    };
    let origin = origin.to_str().map_err(|_| refused())?.trim();
    if state.config.cors_origins.allows(origin) || is_own_origin(origin, headers, state) {
        Ok(())
    } else {
        Err(refused())
    }
}

/// `origin` is `scheme://<Host header>`. The scheme is the forwarded one when
/// `X-Forwarded-Proto` is trusted, else either (a TLS proxy in front of the server changes
/// it, and the host is what tells origins apart).
fn is_own_origin(origin: &str, headers: &HeaderMap, state: &AppState) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    let scheme_ok = match forwarded_proto(headers, state) {
        Some(proto) => scheme.eq_ignore_ascii_case(proto),
        None => scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https"),
    };
    scheme_ok && authority.eq_ignore_ascii_case(host.trim())
}

/// The scheme a trusted proxy says the request came over (`http` or `https`).
pub fn forwarded_proto<'a>(headers: &'a HeaderMap, state: &AppState) -> Option<&'a str> {
    if !state.config.trust_forwarded_proto {
        return None;
    }
    let value = headers.get("x-forwarded-proto")?.to_str().ok()?;
    // A chain of proxies appends: the first one is the client's.
    let first = value.split(',').next()?.trim();
    ["http", "https"]
        .into_iter()
        .find(|s| first.eq_ignore_ascii_case(s))
}

/// The value of the session cookie, if the request has one.
pub fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value.trim())
        .filter(|value| !value.is_empty())
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_user_mode_binds_loopback_only() {
        let lo: SocketAddr = "127.0.0.1:8080".parse().expect("addr");
        let lo6: SocketAddr = "[::1]:8080".parse().expect("addr");
        let any: SocketAddr = "0.0.0.0:8080".parse().expect("addr");
        assert!(check_bind(lo, AuthMode::SingleUser).is_ok());
        assert!(check_bind(lo6, AuthMode::SingleUser).is_ok());
        assert!(check_bind(any, AuthMode::SingleUser).is_err());
        assert!(check_bind(any, AuthMode::Tokens).is_ok());
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            "theme=dark; deepsolve_session=dss_abc ; x=1"
                .parse()
                .expect("header"),
        );
        assert_eq!(session_cookie(&headers), Some("dss_abc"));
        headers.insert(
            header::COOKIE,
            "deepsolve_sessionx=1".parse().expect("header"),
        );
        assert_eq!(session_cookie(&headers), None);
    }
}
