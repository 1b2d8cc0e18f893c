//! The web UI, served from the assets embedded in the binary (`deepsolve-web`): its page at
//! `/` and at every other GET outside the API that asks for HTML (the UI's client-side routes:
//! `/history`, `/sessions/{id}`, …), and its hashed files under `/assets/`. Unknown API paths
//! stay JSON 404s.
//!
//! The page's CSP allows only this origin (no inline script or style, no framing); assets are
//! immutable (their names carry their hash), gzipped when the client accepts it (compressed at
//! build time), and revalidated by ETag.

use axum::body::Body;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use deepsolve_web::Asset;

use crate::error::ApiError;

/// The page's Content-Security-Policy.
pub const PAGE_CSP: &str = "default-src 'self'; img-src 'self' data: blob:; object-src 'none'; \
                            frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// Hashed file names never change content: a year, no revalidation.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// Paths that belong to the API and the server's own endpoints, never to the UI.
const NOT_UI: &[&str] = &[
    "/api",
    "/v1",
    "/healthz",
    "/metrics",
    "/openapi.json",
    "/assets",
];

/// Whether this binary has the web UI (else `/` says how to build it).
pub fn built() -> bool {
    deepsolve_web::BUILT
}

/// `GET /`: the page.
pub async fn page(headers: HeaderMap) -> Response {
    page_response(&headers)
}

/// `GET /assets/{*path}`: one embedded file.
pub async fn asset(Path(path): Path<String>, headers: HeaderMap) -> Response {
    match deepsolve_web::asset(&format!("assets/{path}")) {
        Some(asset) => asset_response(asset, &headers, IMMUTABLE),
        None => ApiError::not_found("asset").into_response(),
    }
}

/// Everything no route matched: a file at the build's top level (`/favicon.svg`: not hashed,
/// so revalidated), the page for a browser navigating to one of the UI's routes, a JSON 404
/// for the rest.
pub async fn fallback(method: Method, uri: Uri, headers: HeaderMap) -> Response {
    let path = uri.path();
    if !(method == Method::GET || method == Method::HEAD) || is_server_path(path) {
        return ApiError::not_found("route").into_response();
    }
    match deepsolve_web::asset(path.trim_start_matches('/')) {
        Some(asset) if asset.path != "index.html" => {
            let response = asset_response(asset, &headers, "no-cache");
            // Any other page of the build is held to the same policy as the UI's.
            if asset.content_type.starts_with("text/html") {
                with_page_headers(response)
            } else {
                response
            }
        }
        _ if accepts_html(&headers) => page_response(&headers),
        _ => ApiError::not_found("route").into_response(),
    }
}

fn page_response(headers: &HeaderMap) -> Response {
    with_page_headers(asset_response(deepsolve_web::index(), headers, "no-cache"))
}

fn with_page_headers(mut response: Response) -> Response {
    let page_headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, PAGE_CSP),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
    ] {
        page_headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

fn is_server_path(path: &str) -> bool {
    NOT_UI.iter().any(|prefix| {
        path.strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

fn accepts_html(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| accepted(item, "text/html"))
}

/// `item` (one entry of an Accept-style list, maybe with `;q=`) names `token` with q > 0.
fn accepted(item: &str, token: &str) -> bool {
    let mut parts = item.split(';');
    let name = parts.next().unwrap_or("").trim();
    if !name.eq_ignore_ascii_case(token) {
        return false;
    }
    let q = parts
        .filter_map(|p| p.trim().strip_prefix("q="))
        .find_map(|q| q.trim().parse::<f32>().ok());
    q.is_none_or(|q| q > 0.0)
}

fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| accepted(item, "gzip"))
}

/// `If-None-Match` names this ETag (or `*`): the client's copy is current.
fn not_modified(asset: &Asset, headers: &HeaderMap) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|tag| tag.trim().trim_start_matches("W/"))
        .any(|tag| tag == "*" || tag == asset.etag)
}

fn asset_response(asset: &'static Asset, headers: &HeaderMap, cache: &'static str) -> Response {
    let mut builder = Response::builder()
        .header(header::ETAG, asset.etag)
        .header(header::CACHE_CONTROL, cache)
        .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    if asset.gzip.is_some() {
        builder = builder.header(header::VARY, "accept-encoding");
    }
    if not_modified(asset, headers) {
        return builder
            .status(StatusCode::NOT_MODIFIED)
            .body(Body::empty())
            .unwrap_or_else(|_| ApiError::internal().into_response());
    }
    builder = builder.header(header::CONTENT_TYPE, asset.content_type);
    let body = match asset.gzip {
        Some(gz) if accepts_gzip(headers) => {
            builder = builder.header(header::CONTENT_ENCODING, "gzip");
            gz
        }
        _ => asset.bytes,
    };
    builder
        .status(StatusCode::OK)
        .body(Body::from(body))
        .unwrap_or_else(|_| ApiError::internal().into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_paths_are_never_the_ui() {
        for path in [
            "/api",
            "/api/v1/nope",
            "/v1/models",
            "/healthz",
            "/assets/x.js",
        ] {
            assert!(is_server_path(path), "{path}");
        }
        for path in [
            "/",
            "/history",
            "/sessions/ses_1",
            "/apis",
            "/v1x",
            "/login",
        ] {
            assert!(!is_server_path(path), "{path}");
        }
    }

    #[test]
    fn accept_lists_are_read_with_their_q_values() {
        assert!(accepted(" text/html", "text/html"));
        assert!(accepted("text/html;q=0.9", "text/html"));
        assert!(!accepted("text/html;q=0", "text/html"));
        assert!(!accepted("application/json", "text/html"));
        assert!(accepted("GZIP", "gzip"));
    }
}
