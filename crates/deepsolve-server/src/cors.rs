//! CORS for exactly the origins in `server.cors_origins` (none by default: browsers then let
//! only pages served from the server's own origin call it).

use axum::http::{HeaderName, HeaderValue, Method, header};
use tower_http::cors::{AllowOrigin, CorsLayer};

/// Browser origins whose pages may call the API, as browsers send them
/// (`scheme://host[:port]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CorsOrigins(Vec<HeaderValue>);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{origin}` is not an origin: write scheme://host[:port] (http or https, nothing after \
     the host or port; `*` is not accepted)"
)]
pub struct InvalidOrigin {
    pub origin: String,
}

impl CorsOrigins {
    /// Check and normalise (lower case, as browsers send them) the configured origins.
    pub fn parse<S: AsRef<str>>(origins: &[S]) -> Result<Self, InvalidOrigin> {
        origins
            .iter()
            .map(|origin| parse_origin(origin.as_ref()))
            .collect::<Result<Vec<_>, _>>()
            .map(CorsOrigins)
    }

    /// `origin` (as a browser sends it) is one of them.
    pub fn allows(&self, origin: &str) -> bool {
        self.0
            .iter()
            .any(|allowed| allowed.as_bytes().eq_ignore_ascii_case(origin.as_bytes()))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The layer answering preflights and adding CORS headers; `None` without origins.
    pub(crate) fn layer(&self) -> Option<CorsLayer> {
        if self.0.is_empty() {
            return None;
        }
        let layer = CorsLayer::new()
            .allow_origin(AllowOrigin::list(self.0.clone()))
            .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                HeaderName::from_static("last-event-id"),
            ])
            .max_age(std::time::Duration::from_secs(600));
        Some(layer)
    }
}

fn parse_origin(origin: &str) -> Result<HeaderValue, InvalidOrigin> {
    let invalid = || InvalidOrigin {
        origin: origin.to_string(),
    };
    let lower = origin.trim().to_ascii_lowercase();
    let authority = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"))
        .ok_or_else(invalid)?;
    let well_formed = !authority.is_empty()
        && authority
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    if !well_formed {
        return Err(invalid());
    }
    HeaderValue::from_str(&lower).map_err(|_| invalid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_checked_and_lower_cased() {
        let origins = CorsOrigins::parse(&["https://App.example.com", "http://[::1]:5173"])
            .expect("valid origins");
        assert_eq!(
            origins.0,
            [
                HeaderValue::from_static("https://app.example.com"),
                HeaderValue::from_static("http://[::1]:5173"),
            ]
        );
        for bad in [
            "*",
            "app.example.com",
            "https://",
            "https://app.example.com/",
            "https://app.example.com/path",
            "ftp://app.example.com",
            "https://a b",
        ] {
            assert!(CorsOrigins::parse(&[bad]).is_err(), "{bad} accepted");
        }
    }
}
