//! The web UI as a browser gets it from the real server: the page (and its client-side
//! routes) with the page headers, the hashed assets with gzip, immutable caching and ETags,
//! and JSON 404s for everything of the API's.

use std::io::Read;

use deepsolve_server::ui::PAGE_CSP;
use deepsolve_testkit::WellBehaved;
use serde_json::Value;

use crate::support::{Options, TestServer, start};

const HTML: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

async fn navigate(s: &TestServer, path: &str) -> reqwest::Response {
    s.http
        .get(s.url(path))
        .header("accept", HTML)
        .send()
        .await
        .expect("request")
}

fn header<'a>(resp: &'a reqwest::Response, name: &str) -> &'a str {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("no {name} header"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_its_client_side_routes_get_index_html_with_the_page_headers() {
    let s = start(WellBehaved::new(1), Options::default()).await.server;
    let index = deepsolve_web::index();
    for path in ["/", "/history", "/settings", "/sessions/ses_123", "/login"] {
        let resp = navigate(&s, path).await;
        assert_eq!(resp.status().as_u16(), 200, "{path}");
        assert_eq!(header(&resp, "content-security-policy"), PAGE_CSP, "{path}");
        assert_eq!(
            PAGE_CSP,
            "default-src 'self'; img-src 'self' data: blob:; object-src 'none'; \
             frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
        );
        assert_eq!(header(&resp, "x-frame-options"), "DENY");
        assert_eq!(header(&resp, "x-content-type-options"), "nosniff");
        assert_eq!(header(&resp, "referrer-policy"), "no-referrer");
        assert_eq!(header(&resp, "cache-control"), "no-cache");
        assert_eq!(header(&resp, "content-type"), "text/html; charset=utf-8");
        assert!(resp.headers().get("content-encoding").is_none());
        let body = resp.bytes().await.expect("body");
        assert_eq!(&body[..], index.bytes, "{path}");
    }
    if !deepsolve_web::BUILT {
        let page = String::from_utf8_lossy(index.bytes);
        assert!(page.contains("scripts/build-web"), "{page}");
    }
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_paths_stay_json_404s_even_for_a_browser() {
    let s = start(WellBehaved::new(1), Options::default()).await.server;
    for path in [
        "/api/v1/nope",
        "/api",
        "/v1/nope",
        "/assets/nope-123.js",
        "/healthz/x",
    ] {
        let resp = navigate(&s, path).await;
        assert_eq!(resp.status().as_u16(), 404, "{path}");
        assert!(header(&resp, "content-type").starts_with("application/json"));
        let body: Value = resp.json().await.expect("json");
        assert_eq!(body["error"]["code"], "not_found", "{path}: {body}");
    }
    // Not a navigation (a script asking for JSON): a JSON 404, not the page.
    let (status, body) = s.get("/history", None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    let resp = s
        .http
        .post(s.url("/history"))
        .header("accept", HTML)
        .send()
        .await
        .expect("post");
    assert_eq!(resp.status().as_u16(), 404);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assets_are_immutable_gzipped_when_accepted_and_revalidated_by_etag() {
    let s = start(WellBehaved::new(1), Options::default()).await.server;
    let asset = deepsolve_web::ASSETS
        .iter()
        .find(|a| a.path.starts_with("assets/") && a.gzip.is_some())
        .expect("a compressible asset (the fallback page has its stylesheet)");
    let url = s.url(&format!("/{}", asset.path));

    let resp = s
        .http
        .get(&url)
        .header("accept-encoding", "gzip, deflate, br")
        .send()
        .await
        .expect("get");
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(header(&resp, "content-encoding"), "gzip");
    assert_eq!(header(&resp, "content-type"), asset.content_type);
    assert_eq!(
        header(&resp, "cache-control"),
        "public, max-age=31536000, immutable"
    );
    assert_eq!(header(&resp, "x-content-type-options"), "nosniff");
    assert_eq!(header(&resp, "vary"), "accept-encoding");
    let etag = header(&resp, "etag").to_string();
    assert_eq!(etag, asset.etag);
    let packed = resp.bytes().await.expect("body");
    let mut unpacked = Vec::new();
    flate2::read::GzDecoder::new(&packed[..])
        .read_to_end(&mut unpacked)
        .expect("gunzip");
    assert_eq!(unpacked, asset.bytes);

    for refused in [None, Some("gzip;q=0"), Some("br")] {
        let mut req = s.http.get(&url);
        if let Some(encoding) = refused {
            req = req.header("accept-encoding", encoding);
        }
        let resp = req.send().await.expect("get");
        assert!(
            resp.headers().get("content-encoding").is_none(),
            "{refused:?}"
        );
        assert_eq!(&resp.bytes().await.expect("body")[..], asset.bytes);
    }

    let resp = s
        .http
        .get(&url)
        .header("if-none-match", &etag)
        .header("accept-encoding", "gzip")
        .send()
        .await
        .expect("revalidate");
    assert_eq!(resp.status().as_u16(), 304);
    assert_eq!(header(&resp, "etag"), etag);
    assert!(resp.bytes().await.expect("body").is_empty());
    let resp = s
        .http
        .get(&url)
        .header("if-none-match", "\"stale\"")
        .send()
        .await
        .expect("stale");
    assert_eq!(resp.status().as_u16(), 200);
    s.shutdown().await;
}
