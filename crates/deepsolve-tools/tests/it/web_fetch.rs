//! `web_fetch` in-process against the page fixtures, through the loopback test switch.

use std::sync::Arc;
use std::time::Duration;

use deepsolve_core::{Citations, Language, Tool, ToolContext, ToolOutput};
use deepsolve_kb::extract::ChildCommand;
use deepsolve_net::egress::EgressGuard;
use deepsolve_net::fetch::{FetchLimits, Fetcher, Url};
use deepsolve_testkit::web::FixtureServer;
use deepsolve_testkit::web::pages::{ARTICLE_BOILERPLATE, ARTICLE_PHRASE, pages_router};
use deepsolve_tools::web::fetch::WebFetchTool;
use serde_json::json;

fn tool_with(guard: EgressGuard, limits: FetchLimits) -> WebFetchTool {
    // PDFs: the deepsolve-kb-pdf binary when it was built next to these tests, else pdftotext.
    WebFetchTool::new(Fetcher::new(guard, limits), ChildCommand::sibling_binary())
}

fn tool() -> WebFetchTool {
    tool_with(
        EgressGuard::allowing_loopback_for_tests(),
        FetchLimits::default(),
    )
}

fn context(language: Language) -> ToolContext {
    ToolContext {
        turn_id: "turn_1".into(),
        language,
        citations: Arc::new(Citations::new(Vec::new())),
        ..ToolContext::default()
    }
}

async fn call(tool: &WebFetchTool, args: serde_json::Value) -> Result<ToolOutput, String> {
    call_in(tool, args, &context(Language::En)).await
}

async fn call_in(
    tool: &WebFetchTool,
    args: serde_json::Value,
    ctx: &ToolContext,
) -> Result<ToolOutput, String> {
    tool.run(args, ctx).await.map_err(|e| {
        assert!(e.is_actionable(), "{e:?}");
        e.message().to_string()
    })
}

/// `{base}/redirect?to=<to>`.
fn redirect_to(base: &str, to: &str) -> String {
    let mut url = Url::parse(&format!("{base}/redirect")).unwrap();
    url.query_pairs_mut().append_pair("to", to);
    url.to_string()
}

#[tokio::test]
async fn an_html_page_is_its_article_in_markdown_numbered_and_quoted_with_its_title() {
    let server = FixtureServer::start(pages_router()).unwrap();
    let url = format!("{}/article", server.url());
    let ctx = context(Language::En);
    let out = call_in(&tool(), json!({"url": url}), &ctx).await.unwrap();
    let first = out.content.lines().next().unwrap();
    assert!(first.starts_with("[1] Integration by Parts"), "{first}");
    assert!(first.ends_with(&format!(" — {url}")), "{first}");
    assert!(out.content.contains(ARTICLE_PHRASE), "{}", out.content);
    assert!(
        !out.content.contains(ARTICLE_BOILERPLATE),
        "{}",
        out.content
    );
    assert!(
        out.content.contains("> ## The formula"),
        "markdown headings, quoted: {}",
        out.content
    );
    assert!(!out.content.contains("redirected from"));
    assert_eq!(out.sources.len(), 1);
    let source = &out.sources[0];
    assert_eq!(source.n, 1);
    assert_eq!(source.url.as_deref(), Some(url.as_str()));
    assert!(source.title.contains("Integration by Parts"));
    assert!(source.excerpt.as_deref().unwrap().contains("product rule"));
    assert_eq!(out.metadata["final_url"], url);
    assert_eq!(out.metadata["content_type"], "text/html");
    assert!(out.metadata["bytes"].as_u64().unwrap() > 1000);
    assert_eq!(out.metadata["redirects"], json!([]));
    // The same page again keeps its number in the turn.
    let again = call_in(&tool(), json!({"url": url}), &ctx).await.unwrap();
    assert_eq!(again.sources[0].n, 1);
}

#[tokio::test]
async fn a_pdf_is_its_text() {
    let server = FixtureServer::start(pages_router()).unwrap();
    let out = call(
        &tool(),
        json!({"url": format!("{}/lecture.pdf", server.url())}),
    )
    .await
    .unwrap();
    assert!(
        out.content.contains("Page 1 of the lecture notes."),
        "{}",
        out.content
    );
    assert!(
        out.content.contains("Page 2 of the lecture notes."),
        "{}",
        out.content
    );
    assert_eq!(out.metadata["content_type"], "application/pdf");
    // The PDF's own title where the parser reads it (the PDF child), else its file name
    // (`pdftotext` alone, when no child is built beside the tests).
    assert!(
        out.content
            .starts_with("[1] Lecture 3: Integration by Parts — ")
            || out.content.starts_with("[1] lecture.pdf — "),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn plain_text_is_quoted_as_it_is() {
    let server = FixtureServer::start(pages_router()).unwrap();
    let out = call(
        &tool(),
        json!({"url": format!("{}/notes.txt", server.url())}),
    )
    .await
    .unwrap();
    assert!(
        out.content.contains("> Notes on limits."),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn an_image_is_refused_by_its_type() {
    let server = FixtureServer::start(pages_router()).unwrap();
    let err = call(
        &tool(),
        json!({"url": format!("{}/image.png", server.url())}),
    )
    .await
    .unwrap_err();
    assert!(
        err.ends_with("image/png is not a page: web_fetch reads HTML, text and PDF"),
        "{err}"
    );
}

#[tokio::test]
async fn a_five_mib_body_is_refused_at_the_four_mib_cap() {
    let server = FixtureServer::start(pages_router()).unwrap();
    for path in ["/huge", "/huge-stream"] {
        let err = call(&tool(), json!({"url": format!("{}{path}", server.url())}))
            .await
            .unwrap_err();
        assert!(err.contains("is larger than 4 MiB"), "{path}: {err}");
    }
}

#[tokio::test]
async fn a_slow_drip_runs_out_of_time() {
    let server = FixtureServer::start(pages_router()).unwrap();
    let limits = FetchLimits {
        timeout: Duration::from_millis(500),
        ..FetchLimits::default()
    };
    let slow = tool_with(EgressGuard::allowing_loopback_for_tests(), limits);
    let err = call(&slow, json!({"url": format!("{}/slow", server.url())}))
        .await
        .unwrap_err();
    assert!(err.contains("no complete answer within 0.5 s"), "{err}");
}

#[tokio::test]
async fn a_redirect_to_loopback_is_followed_only_under_the_switch() {
    let server = FixtureServer::start(pages_router()).unwrap();
    let target = format!("http://127.0.0.1:{}/article", server.addr().port());
    let start = redirect_to(&server.url(), &target);
    let out = call(&tool(), json!({"url": start})).await.unwrap();
    assert!(
        out.content
            .contains(&format!("— {target}\nredirected from {start}\n")),
        "{}",
        out.content
    );
    assert_eq!(out.sources[0].url.as_deref(), Some(target.as_str()));
    assert_eq!(out.metadata["redirects"], json!([start]));

    let before = server.requests().len();
    let public = tool_with(EgressGuard::public_only(), FetchLimits::default());
    let err = call(&public, json!({"url": start})).await.unwrap_err();
    assert!(err.contains("is not a public address — loopback"), "{err}");
    assert_eq!(
        server.requests().len(),
        before,
        "nothing reached the fixture"
    );
}

#[tokio::test]
async fn a_redirect_to_a_private_address_is_refused() {
    let server = FixtureServer::start(pages_router()).unwrap();
    let start = redirect_to(&server.url(), "http://10.0.0.1/");
    let err = call(&tool(), json!({"url": start})).await.unwrap_err();
    assert!(
        err.starts_with(&format!("{start} redirected to a refused address: ")),
        "{err}"
    );
    assert!(
        err.contains("10.0.0.1 is not a public address — private (10.0.0.0/8)"),
        "{err}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn six_redirects_are_refused() {
    let server = FixtureServer::start(pages_router()).unwrap();
    let err = call(&tool(), json!({"url": format!("{}/hops/6", server.url())}))
        .await
        .unwrap_err();
    assert!(err.contains("redirected more than 5 times"), "{err}");
    let five = call(&tool(), json!({"url": format!("{}/hops/5", server.url())}))
        .await
        .unwrap();
    assert!(
        five.content.contains("redirected from "),
        "{}",
        five.content
    );
    assert_eq!(five.metadata["redirects"].as_array().unwrap().len(), 5);
}

#[tokio::test]
async fn max_chars_truncates_and_says_how_much_was_shown() {
    let server = FixtureServer::start(pages_router()).unwrap();
    let url = format!("{}/article", server.url());
    let full = call(&tool(), json!({"url": url})).await.unwrap();
    let out = call(&tool(), json!({"url": url, "max_chars": 500}))
        .await
        .unwrap();
    let note = out.content.lines().last().unwrap();
    assert!(note.starts_with("… (shown 500 of "), "{note}");
    assert!(note.ends_with(" characters; the page continues)"), "{note}");
    assert!(out.content.len() < full.content.len());
    assert!(!full.content.contains("the page continues"));
    // Below the minimum: clamped up to 500.
    let tiny = call(&tool(), json!({"url": url, "max_chars": 3}))
        .await
        .unwrap();
    assert!(tiny.content.contains("(shown 500 of "), "{}", tiny.content);
    // In Chinese.
    let zh = call_in(
        &tool(),
        json!({"url": url, "max_chars": 500}),
        &context(Language::Zh),
    )
    .await
    .unwrap();
    assert!(
        zh.content.contains("显示了 500 个；页面未完"),
        "{}",
        zh.content
    );
}

#[tokio::test]
async fn a_missing_url_or_a_refused_scheme_is_actionable() {
    let err = call(&tool(), json!({})).await.unwrap_err();
    assert!(err.starts_with("url: "), "{err}");
    let err = call(&tool(), json!({"url": "file:///etc/passwd"}))
        .await
        .unwrap_err();
    assert!(err.contains("http and https URLs only, not file:"), "{err}");
}

#[test]
fn the_catalog_builds_it_with_its_playbook_line() {
    let entry = deepsolve_tools::CATALOG
        .iter()
        .find(|e| e.name == deepsolve_tools::web::WEB_FETCH)
        .unwrap();
    assert_eq!(
        entry.policy,
        deepsolve_tools::Policy::WithTool(deepsolve_tools::web::WEB_SEARCH)
    );
    let built = entry
        .mount(&crate::catalog::deps(crate::catalog::no_sandbox()))
        .unwrap();
    assert_eq!(built.spec().name, "web_fetch");
    let spec = tool();
    assert_eq!(spec.spec().name, "web_fetch");
    assert_eq!(
        spec.spec().parameters["properties"]["max_chars"]["maximum"],
        200_000
    );
    assert!(
        built
            .playbook_line(Language::Zh)
            .unwrap()
            .contains("web_fetch")
    );
}
