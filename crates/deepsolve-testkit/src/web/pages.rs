//! The pages `web_fetch` meets, as one axum [`Router`] ([`pages_router`]) to serve with
//! [`super::FixtureServer`]:
//!
//! | route | answer |
//! |---|---|
//! | `/article` | [`crate::documents::html_article`]: a title, navigation, sidebar and footer around the article |
//! | `/lecture.pdf` | [`crate::documents::text_pdf`] of [`PDF_PAGES`] pages, `application/pdf` |
//! | `/octet.pdf` | the same PDF as `application/octet-stream` |
//! | `/notes.txt` | [`NOTES_TEXT`], `text/plain` |
//! | `/notes.md` | [`crate::documents::notes_markdown`], `text/markdown` |
//! | `/untyped` | [`NOTES_TEXT`] with no `Content-Type` |
//! | `/image.png` | a PNG, `image/png` |
//! | `/huge` | [`HUGE_BYTES`] of HTML with a `Content-Length` |
//! | `/huge-stream` | the same, streamed in chunks without a length |
//! | `/slow` | `text/plain` that drips one byte every [`DRIP_INTERVAL`], for a minute |
//! | `/hops/{n}` | `302` to `/hops/{n-1}`; `/hops/0` is the article |
//! | `/redirect?to=X` | `302` with `Location: X`, exactly as given |
//! | `/redirect/{status}?to=X` | the same with another status (301, 303, 307, 308) |
//! | `/status/{code}` | an empty answer with that status |

use std::collections::HashMap;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;

use crate::documents::{html_article, notes_markdown, text_pdf};

/// The `<title>` of `/article`.
pub const ARTICLE_TITLE: &str = "Integration by Parts | Maths Site";
/// A phrase of `/article`'s main content.
pub const ARTICLE_PHRASE: &str = "choice of u and dv";
/// A phrase of `/article`'s boilerplate (the sidebar), which a reader should drop.
pub const ARTICLE_BOILERPLATE: &str = "Buy cheap calculators now!";
/// How many pages `/lecture.pdf` has.
pub const PDF_PAGES: usize = 2;
/// The body of `/notes.txt`.
pub const NOTES_TEXT: &str = "Notes on limits.\n\nA limit describes the value a function approaches as its input approaches a point.\n";
/// The size of `/huge` and `/huge-stream`: 5 MiB, over `web_fetch`'s 4 MiB cap.
pub const HUGE_BYTES: usize = 5 * 1024 * 1024;
/// How often `/slow` sends its next byte.
pub const DRIP_INTERVAL: Duration = Duration::from_millis(100);

/// The first bytes of a PNG (signature and IHDR chunk of a 1×1 image).
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89";

/// Every route in the table above.
pub fn pages_router() -> Router {
    Router::new()
        .route("/article", get(article))
        .route(
            "/lecture.pdf",
            get(|| async { typed("application/pdf", text_pdf(PDF_PAGES)) }),
        )
        .route(
            "/octet.pdf",
            get(|| async { typed("application/octet-stream", text_pdf(PDF_PAGES)) }),
        )
        .route(
            "/notes.txt",
            get(|| async { typed("text/plain; charset=utf-8", NOTES_TEXT) }),
        )
        .route(
            "/notes.md",
            get(|| async { typed("text/markdown", notes_markdown()) }),
        )
        .route(
            "/untyped",
            get(|| async { Response::new(Body::from(NOTES_TEXT)) }),
        )
        .route("/image.png", get(|| async { typed("image/png", PNG) }))
        .route("/huge", get(|| async { typed("text/html", huge_html()) }))
        .route("/huge-stream", get(huge_stream))
        .route("/slow", get(slow))
        .route("/hops/{n}", get(hops))
        .route("/redirect", get(|q| redirect_with(StatusCode::FOUND, q)))
        .route("/redirect/{status}", get(redirect_status))
        .route("/status/{code}", get(status))
}

async fn article() -> Response {
    typed("text/html; charset=utf-8", html_article())
}

/// A body with its `Content-Type`.
fn typed(content_type: &'static str, body: impl Into<Body>) -> Response {
    let mut response = Response::new(body.into());
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// [`HUGE_BYTES`] of valid HTML: a paragraph of filler.
fn huge_html() -> Vec<u8> {
    let mut body = b"<html><head><title>Huge</title></head><body><p>".to_vec();
    let tail = b"</p></body></html>";
    body.resize(HUGE_BYTES - tail.len(), b'x');
    body.extend_from_slice(tail);
    body
}

async fn huge_stream() -> Response {
    const CHUNK: usize = 64 * 1024;
    let chunks =
        (0..HUGE_BYTES / CHUNK).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![b'y'; CHUNK])));
    typed(
        "text/plain",
        Body::from_stream(futures::stream::iter(chunks)),
    )
}

async fn slow() -> Response {
    let drip = futures::stream::unfold(0u32, |sent| async move {
        if sent >= 600 {
            return None;
        }
        tokio::time::sleep(DRIP_INTERVAL).await;
        Some((Ok::<_, std::io::Error>(Bytes::from_static(b".")), sent + 1))
    });
    typed("text/plain", Body::from_stream(drip))
}

async fn hops(Path(n): Path<u32>) -> Response {
    if n == 0 {
        return article().await;
    }
    found(StatusCode::FOUND, &format!("/hops/{}", n - 1))
}

async fn redirect_status(Path(code): Path<u16>, query: Query<HashMap<String, String>>) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::FOUND);
    redirect_with(status, query).await
}

async fn redirect_with(
    status: StatusCode,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    match query.get("to") {
        Some(to) => found(status, to),
        None => (StatusCode::BAD_REQUEST, "say where to: /redirect?to=URL").into_response(),
    }
}

/// A redirect with `Location: location`, byte for byte.
fn found(status: StatusCode, location: &str) -> Response {
    match HeaderValue::from_str(location) {
        Ok(value) => {
            let mut response = Response::new(Body::empty());
            *response.status_mut() = status;
            response.headers_mut().insert(header::LOCATION, value);
            response
        }
        Err(_) => (
            StatusCode::BAD_REQUEST,
            "that Location is not a header value",
        )
            .into_response(),
    }
}

async fn status(Path(code): Path<u16>) -> Response {
    StatusCode::from_u16(code)
        .unwrap_or(StatusCode::BAD_REQUEST)
        .into_response()
}
