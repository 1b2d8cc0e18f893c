//! The fetcher against the page fixtures (through the test switch): kinds of page, the body
//! cap, the deadline, the redirect limit, statuses.

#![cfg(feature = "test-loopback")]

use std::time::{Duration, Instant};

use deepsolve_net::egress::EgressGuard;
use deepsolve_net::fetch::{FetchError, FetchLimits, Fetcher, PageKind};
use deepsolve_testkit::web::FixtureServer;
use deepsolve_testkit::web::pages::{ARTICLE_PHRASE, NOTES_TEXT, pages_router};

fn fixture() -> FixtureServer {
    FixtureServer::start(pages_router()).unwrap()
}

fn fetcher(limits: FetchLimits) -> Fetcher {
    Fetcher::new(EgressGuard::allowing_loopback_for_tests(), limits)
}

fn default_fetcher() -> Fetcher {
    fetcher(FetchLimits::default())
}

#[test]
fn the_default_limits_are_the_contracts() {
    let limits = FetchLimits::default();
    assert_eq!(limits.max_bytes, 4 * 1024 * 1024);
    assert_eq!(limits.timeout, Duration::from_secs(15));
    assert_eq!(limits.max_redirects, 5);
}

#[tokio::test]
async fn a_page_arrives_with_its_kind_and_type() {
    let server = fixture();
    let base = server.url();
    let cases = [
        ("/article", PageKind::Html, "text/html"),
        ("/lecture.pdf", PageKind::Pdf, "application/pdf"),
        ("/octet.pdf", PageKind::Pdf, "application/pdf"),
        ("/notes.txt", PageKind::Text, "text/plain"),
        ("/notes.md", PageKind::Markdown, "text/markdown"),
        ("/untyped", PageKind::Text, "text/plain"),
    ];
    for (path, kind, content_type) in cases {
        let page = default_fetcher()
            .fetch(&format!("{base}{path}"))
            .await
            .unwrap();
        assert_eq!(page.kind, kind, "{path}");
        assert_eq!(page.content_type, content_type, "{path}");
        assert_eq!(page.final_url.path(), path);
        assert!(page.hops.is_empty());
        assert!(!page.body.is_empty());
    }
    let notes = default_fetcher()
        .fetch(&format!("{base}/notes.txt"))
        .await
        .unwrap();
    assert_eq!(&notes.body[..], NOTES_TEXT.as_bytes());
    let sent = &server.requests()[0];
    assert!(
        sent.header("accept")
            .unwrap_or_default()
            .contains("text/html")
    );
    assert!(
        sent.header("user-agent")
            .unwrap_or_default()
            .starts_with("deepsolve-web-fetch/")
    );
}

#[tokio::test]
async fn an_image_is_refused_by_its_type_before_its_body_is_read() {
    let server = fixture();
    let url = format!("{}/image.png", server.url());
    let err = default_fetcher().fetch(&url).await.unwrap_err();
    assert!(matches!(err, FetchError::NotAPage { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!("{url}: image/png is not a page: web_fetch reads HTML, text and PDF")
    );
}

#[tokio::test]
async fn a_body_over_the_cap_is_refused_whether_or_not_its_length_is_declared() {
    let server = fixture();
    for path in ["/huge", "/huge-stream"] {
        let err = default_fetcher()
            .fetch(&format!("{}{path}", server.url()))
            .await
            .unwrap_err();
        assert!(
            matches!(err, FetchError::TooLarge { .. }),
            "{path}: {err:?}"
        );
        assert!(err.to_string().contains("larger than 4 MiB"), "{err}");
    }
    let small = FetchLimits {
        max_bytes: 100,
        ..FetchLimits::default()
    };
    let err = fetcher(small)
        .fetch(&format!("{}/article", server.url()))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("larger than 100 bytes"), "{err}");
}

#[tokio::test]
async fn a_slow_drip_is_cut_off_at_the_deadline() {
    let server = fixture();
    let limits = FetchLimits {
        timeout: Duration::from_millis(600),
        ..FetchLimits::default()
    };
    let started = Instant::now();
    let err = fetcher(limits)
        .fetch(&format!("{}/slow", server.url()))
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::Timeout { .. }), "{err:?}");
    assert!(
        err.to_string().contains("no complete answer within 0.6 s"),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn five_redirects_are_followed_and_a_sixth_is_refused() {
    let server = fixture();
    let page = default_fetcher()
        .fetch(&format!("{}/hops/5", server.url()))
        .await
        .unwrap();
    assert_eq!(page.final_url.path(), "/hops/0");
    let hops: Vec<&str> = page.hops.iter().map(|u| u.path()).collect();
    assert_eq!(
        hops,
        ["/hops/5", "/hops/4", "/hops/3", "/hops/2", "/hops/1"]
    );
    assert!(String::from_utf8_lossy(&page.body).contains(ARTICLE_PHRASE));

    let before = server.requests().len();
    let err = default_fetcher()
        .fetch(&format!("{}/hops/6", server.url()))
        .await
        .unwrap_err();
    assert!(
        matches!(err, FetchError::TooManyRedirects { limit: 5, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("redirected more than 5 times"),
        "{err}"
    );
    // /hops/6 … /hops/1 answered; /hops/0 was never asked for.
    let asked: Vec<String> = server.requests()[before..]
        .iter()
        .map(|r| r.uri.clone())
        .collect();
    assert_eq!(asked.len(), 6, "{asked:?}");
    assert!(!asked.contains(&"/hops/0".to_string()), "{asked:?}");
}

#[tokio::test]
async fn every_redirect_status_is_followed_and_a_relative_location_resolved() {
    let server = fixture();
    for status in [301, 302, 303, 307, 308] {
        let page = default_fetcher()
            .fetch(&format!(
                "{}/redirect/{status}?to=../notes.txt",
                server.url()
            ))
            .await
            .unwrap();
        assert_eq!(page.final_url.path(), "/notes.txt", "{status}");
        assert_eq!(page.hops.len(), 1);
    }
}

#[tokio::test]
async fn an_error_status_and_a_broken_location_are_named() {
    let server = fixture();
    let url = format!("{}/status/404", server.url());
    let err = default_fetcher().fetch(&url).await.unwrap_err();
    assert_eq!(err.to_string(), format!("{url} answered 404"));
    let err = default_fetcher()
        .fetch(&format!("{}/redirect?to=http://[::1", server.url()))
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::BadLocation { .. }), "{err:?}");
    let err = default_fetcher()
        .fetch(&format!("{}/status/302", server.url()))
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::NoLocation { .. }), "{err:?}");
}

#[tokio::test]
async fn a_closed_port_is_a_connection_failure_naming_the_host() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let err = default_fetcher()
        .fetch(&format!("http://127.0.0.1:{port}/"))
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::Connect { .. }), "{err:?}");
    assert!(err.to_string().contains("cannot reach 127.0.0.1"), "{err}");
}
