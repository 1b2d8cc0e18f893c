//! deepsolve-web: the web UI's built assets (`web/dist`), embedded in the binary.
//!
//! `build.rs` reads the build at compile time; every file becomes an [`Asset`] with its
//! content type, an ETag from its content hash, and a gzip copy when that is smaller. A binary
//! built without `web/dist` has one asset, a fallback `index.html` saying how to build the UI
//! ([`BUILT`] is then `false`). Serving them (headers, caching, routes) is the server's job.

/// One embedded file.
#[derive(Debug)]
pub struct Asset {
    /// Relative to `web/dist`, with `/`: `index.html`, `assets/index-3f2a.js`.
    pub path: &'static str,
    pub content_type: &'static str,
    pub bytes: &'static [u8],
    /// The same bytes gzipped at build time, when that saves enough to be worth it.
    pub gzip: Option<&'static [u8]>,
    /// A strong ETag (quoted) from the content hash.
    pub etag: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// The asset at `path` (relative to `web/dist`, no leading `/`).
pub fn asset(path: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.path == path)
}

/// The UI's page (the fallback page when the UI was not built).
pub fn index() -> &'static Asset {
    // The build script always writes an `index.html` row (the real one or the fallback).
    asset("index.html").unwrap_or(&FALLBACK_INDEX)
}

/// Only reached if the generated table were ever without its `index.html`.
static FALLBACK_INDEX: Asset = Asset {
    path: "index.html",
    content_type: "text/html; charset=utf-8",
    bytes: b"<!doctype html><title>deepsolve</title><p>The web UI was not built: run scripts/build-web.</p>",
    gzip: None,
    etag: "\"fallback\"",
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_is_always_an_index_page() {
        let index = index();
        assert_eq!(index.content_type, "text/html; charset=utf-8");
        assert!(!index.bytes.is_empty());
        assert!(index.etag.starts_with('"') && index.etag.ends_with('"'));
        if !BUILT {
            let page = String::from_utf8_lossy(index.bytes);
            assert!(page.contains("scripts/build-web"), "{page}");
        }
    }

    #[test]
    fn gzip_copies_unpack_to_the_asset() {
        for asset in ASSETS {
            if let Some(gz) = asset.gzip {
                assert!(gz.len() < asset.bytes.len(), "{}", asset.path);
                assert_eq!(&gz[..2], &[0x1f, 0x8b], "{} is not gzip", asset.path);
            }
        }
    }
}
