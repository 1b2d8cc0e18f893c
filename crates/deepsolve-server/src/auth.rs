//! Who is calling. With users configured, every API request needs `Authorization: Bearer
//! <token>`; without any, the server runs in single-user mode — and then refuses to listen on
//! anything but loopback (see [`check_bind`]).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;
use deepsolve_store::Role;

use crate::error::ApiError;
use crate::state::AppState;

/// The user id of single-user mode.
pub const LOCAL_USER: &str = "local";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// No users exist: loopback only, no token needed, the caller is an admin.
    SingleUser,
    /// Bearer tokens required.
    Tokens,
}

/// The authenticated caller of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub user_id: String,
    pub role: Role,
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
        if state.auth == AuthMode::SingleUser {
            return Ok(Caller {
                user_id: LOCAL_USER.to_string(),
                role: Role::Admin,
            });
        }
        let token = bearer(parts).ok_or_else(|| {
            ApiError::unauthorized(
                "send 'Authorization: Bearer <token>' (deepsolve users token NAME)",
            )
        })?;
        let user = state
            .store
            .authenticate(token)
            .await?
            .ok_or_else(|| ApiError::unauthorized("unknown or revoked token"))?;
        Ok(Caller {
            user_id: user.id,
            role: user.role,
        })
    }
}

fn bearer(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(header::AUTHORIZATION)?.to_str().ok()?;
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
}
