//! A resumable download into a `.part` file: a file that already holds bytes is continued with
//! `Range: bytes=N-` (a server that answers 200 instead starts it over), every chunk is
//! written as it arrives (so an interruption keeps what came), and the total is held to a
//! limit and, when known, to the expected size.

use std::io::Write;
use std::path::Path;

use futures::StreamExt;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_RANGE, RANGE};

use crate::ModelsError;

/// What a download may take.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// The most bytes a file may have.
    pub(crate) max_bytes: u64,
    /// The size the file must have, when known.
    pub(crate) expected: Option<u64>,
}

/// Callbacks of a download: `started(total, resumed_from)` once the answer's headers are in,
/// `chunk(bytes)` per chunk written.
pub(crate) trait Watch {
    fn started(&mut self, total: Option<u64>, resumed_from: u64);
    fn chunk(&mut self, bytes: u64);
}

/// Downloads `url` into `part`, continuing what `part` already holds; its final length.
pub(crate) async fn download(
    client: &reqwest::Client,
    url: &str,
    part: &Path,
    bounds: Bounds,
    watch: &mut dyn Watch,
) -> Result<u64, ModelsError> {
    let mut have = std::fs::metadata(part).map(|m| m.len()).unwrap_or(0);
    if bounds.expected.is_some_and(|size| have > size) || have > bounds.max_bytes {
        have = 0;
    }
    if have > 0 && bounds.expected == Some(have) {
        watch.started(Some(have), have);
        return Ok(have);
    }
    let mut request = client.get(url);
    if have > 0 {
        request = request.header(RANGE, format!("bytes={have}-"));
    }
    let response = request.send().await.map_err(|e| http_error(url, &e))?;
    let status = response.status();
    let resumed = match status {
        StatusCode::PARTIAL_CONTENT if range_start(&response) == Some(have) => true,
        StatusCode::OK => false,
        StatusCode::RANGE_NOT_SATISFIABLE | StatusCode::PARTIAL_CONTENT => {
            // A range the server will not (or did not correctly) serve: start over, once.
            std::fs::remove_file(part).map_err(ModelsError::io("cannot restart", part))?;
            return Box::pin(download(client, url, part, bounds, watch)).await;
        }
        _ => {
            return Err(ModelsError::Status {
                url: url.to_string(),
                status: status.as_u16(),
            });
        }
    };
    let start = if resumed { have } else { 0 };
    let total = response.content_length().map(|len| start + len);
    if let Some(total) = total {
        if total > bounds.max_bytes {
            return Err(ModelsError::TooLarge {
                url: url.to_string(),
                limit: bounds.max_bytes,
            });
        }
        if let Some(expected) = bounds.expected.filter(|e| *e != total) {
            return Err(ModelsError::SizeMismatch {
                what: url.to_string(),
                expected,
                actual: total,
            });
        }
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(resumed)
        .write(true)
        .truncate(!resumed)
        .open(part)
        .map_err(ModelsError::io("cannot write", part))?;
    watch.started(total.or(bounds.expected), start);
    let limit = bounds
        .expected
        .unwrap_or(bounds.max_bytes)
        .min(bounds.max_bytes);
    let mut written = start;
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| http_error(url, &e))?;
        let len = chunk.len() as u64;
        if written + len > limit {
            return Err(ModelsError::TooLarge {
                url: url.to_string(),
                limit,
            });
        }
        file.write_all(&chunk)
            .map_err(ModelsError::io("cannot write", part))?;
        written += len;
        watch.chunk(len);
    }
    file.flush()
        .map_err(ModelsError::io("cannot write", part))?;
    Ok(written)
}

/// The first byte of a `Content-Range: bytes A-B/T` answer.
fn range_start(response: &reqwest::Response) -> Option<u64> {
    let value = response.headers().get(CONTENT_RANGE)?.to_str().ok()?;
    let range = value.strip_prefix("bytes ")?;
    range.split('-').next()?.trim().parse().ok()
}

/// A transport error, its causes included (reqwest's top line alone says little).
pub(crate) fn http_error(url: &str, error: &reqwest::Error) -> ModelsError {
    let mut reason = error.to_string();
    let mut cause = std::error::Error::source(error);
    while let Some(inner) = cause {
        reason.push_str(": ");
        reason.push_str(&inner.to_string());
        cause = inner.source();
    }
    ModelsError::Http {
        url: url.to_string(),
        reason,
    }
}
