//! Each search vendor's endpoint in its documented shapes, for [`super::FixtureServer`]: a
//! [`VendorFixture`] is one vendor with one [`Behaviour`] (success, empty, 401, 429, 503,
//! malformed, a stall, a redirect), checking the request as the vendor would — method, path,
//! parameters, and (with [`VendorFixture::expect_key`]) the key in the vendor's own header —
//! and answering 400 with the reason when the request is wrong, 401 when the key is.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{FromRequest, Query, Request};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use serde_json::{Value, json};

use super::FixtureServer;

/// A search vendor, as its endpoint looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Vendor {
    Searxng,
    Brave,
    Tavily,
    Serper,
    Jina,
    Bocha,
    Zhipu,
    DuckDuckGo,
}

/// Where a vendor expects its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyHeader {
    /// `Authorization: Bearer KEY`.
    Bearer,
    /// The key as the whole value of this header.
    Named(&'static str),
    /// No key (SearXNG, DuckDuckGo).
    None,
}

impl Vendor {
    pub const ALL: [Vendor; 8] = [
        Vendor::Searxng,
        Vendor::Brave,
        Vendor::Tavily,
        Vendor::Serper,
        Vendor::Jina,
        Vendor::Bocha,
        Vendor::Zhipu,
        Vendor::DuckDuckGo,
    ];

    /// The name deepsolve's settings use for it.
    pub const fn name(self) -> &'static str {
        match self {
            Vendor::Searxng => "searxng",
            Vendor::Brave => "brave",
            Vendor::Tavily => "tavily",
            Vendor::Serper => "serper",
            Vendor::Jina => "jina",
            Vendor::Bocha => "bocha",
            Vendor::Zhipu => "zhipu",
            Vendor::DuckDuckGo => "duckduckgo",
        }
    }

    /// The path of its search endpoint (under the base URL).
    pub const fn path(self) -> &'static str {
        match self {
            Vendor::Searxng => "/search",
            Vendor::Brave => "/res/v1/web/search",
            Vendor::Tavily => "/search",
            Vendor::Serper => "/search",
            Vendor::Jina => "/",
            Vendor::Bocha => "/v1/web-search",
            Vendor::Zhipu => "/api/paas/v4/web_search",
            Vendor::DuckDuckGo => "/html/",
        }
    }

    pub fn method(self) -> Method {
        match self {
            Vendor::Searxng | Vendor::Brave | Vendor::Jina => Method::GET,
            _ => Method::POST,
        }
    }

    pub const fn key_header(self) -> KeyHeader {
        match self {
            Vendor::Brave => KeyHeader::Named("x-subscription-token"),
            Vendor::Serper => KeyHeader::Named("x-api-key"),
            Vendor::Tavily | Vendor::Jina | Vendor::Bocha | Vendor::Zhipu => KeyHeader::Bearer,
            Vendor::Searxng | Vendor::DuckDuckGo => KeyHeader::None,
        }
    }
}

/// How the fixture answers a well-formed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Behaviour {
    /// [`SUCCESS_COUNT`] results (fewer if the request asked for fewer), see [`expected`].
    Success,
    /// The vendor's shape of "nothing found".
    Empty,
    /// 401 with the vendor's error body.
    Unauthorized,
    /// 429.
    RateLimited,
    /// 503.
    Unavailable,
    /// 200 with a body of the wrong shape (wrong types; for DuckDuckGo a page of another
    /// layout).
    Malformed,
    /// Waits this long, then succeeds.
    Stall(Duration),
    /// 302 to this location.
    RedirectTo(String),
}

/// Results a successful answer holds at most.
pub const SUCCESS_COUNT: usize = 3;

/// One result as the fixture serves it, after markup is stripped: (title, url, snippet).
pub type Expected = (String, String, String);

/// The results a [`Behaviour::Success`] answer to `query` holds for `n` asked (or
/// [`SUCCESS_COUNT`] where the vendor takes no count), as plain text.
pub fn expected(vendor: Vendor, query: &str, n: usize) -> Vec<Expected> {
    (1..=n.min(SUCCESS_COUNT))
        .map(|i| {
            let name = vendor.name();
            (
                format!("{name} result {i}"),
                format!("https://{name}.example/result/{i}"),
                format!("{name} snippet {i} about {query}"),
            )
        })
        .collect()
}

/// One vendor endpoint with one behaviour.
#[derive(Debug, Clone)]
pub struct VendorFixture {
    vendor: Vendor,
    behaviour: Behaviour,
    key: Option<String>,
}

impl VendorFixture {
    pub fn new(vendor: Vendor, behaviour: Behaviour) -> VendorFixture {
        VendorFixture {
            vendor,
            behaviour,
            key: None,
        }
    }

    /// Refuses (401) a request without exactly this key in the vendor's key header.
    pub fn expect_key(mut self, key: impl Into<String>) -> VendorFixture {
        self.key = Some(key.into());
        self
    }

    /// The endpoint as a router (every other path is axum's 404).
    pub fn router(self) -> Router {
        let path = self.vendor.path();
        let fixture = Arc::new(self);
        Router::new().route(
            path,
            any(move |request: Request| {
                let fixture = fixture.clone();
                async move { fixture.respond(request).await }
            }),
        )
    }

    /// The endpoint served on loopback.
    pub fn start(self) -> std::io::Result<FixtureServer> {
        FixtureServer::start(self.router())
    }

    async fn respond(&self, request: Request) -> Response {
        if request.method() != self.vendor.method() {
            return (StatusCode::METHOD_NOT_ALLOWED, "wrong method").into_response();
        }
        if let Err(why) = self.check_key(request.headers()) {
            return self.unauthorized(why);
        }
        let asked = match self.read_request(request).await {
            Ok(asked) => asked,
            Err(why) => return (StatusCode::BAD_REQUEST, why).into_response(),
        };
        match &self.behaviour {
            Behaviour::Success => self.success(&asked),
            Behaviour::Stall(wait) => {
                tokio::time::sleep(*wait).await;
                self.success(&asked)
            }
            Behaviour::Empty => self.empty(),
            Behaviour::Unauthorized => self.unauthorized("invalid key".into()),
            Behaviour::RateLimited => (
                StatusCode::TOO_MANY_REQUESTS,
                json_body(json!({"error": "rate limit exceeded"})),
            )
                .into_response(),
            Behaviour::Unavailable => {
                (StatusCode::SERVICE_UNAVAILABLE, "upstream unavailable").into_response()
            }
            Behaviour::Malformed => self.malformed(),
            Behaviour::RedirectTo(location) => Response::builder()
                .status(StatusCode::FOUND)
                .header(header::LOCATION, location.as_str())
                .body(Body::empty())
                .unwrap_or_default(),
        }
    }

    /// The key, where this vendor expects it.
    fn check_key(&self, headers: &HeaderMap) -> Result<(), String> {
        let Some(key) = &self.key else {
            return Ok(());
        };
        let (name, wanted) = match self.vendor.key_header() {
            KeyHeader::Bearer => ("authorization", format!("Bearer {key}")),
            KeyHeader::Named(name) => (name, key.clone()),
            KeyHeader::None => return Ok(()),
        };
        match headers.get(name).and_then(|v| v.to_str().ok()) {
            Some(got) if got == wanted => Ok(()),
            Some(_) => Err(format!("wrong key in {name}")),
            None => Err(format!("no {name} header")),
        }
    }

    /// The query and count asked, checked against the vendor's documented parameters.
    async fn read_request(&self, request: Request) -> Result<Asked, String> {
        let params: HashMap<String, String> = Query::try_from_uri(request.uri())
            .map(|Query(p)| p)
            .unwrap_or_default();
        let accept = (request.headers().get(header::ACCEPT))
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let wants_json = || {
            accept
                .contains("application/json")
                .then_some(())
                .ok_or_else(|| format!("Accept: application/json expected, got {accept:?}"))
        };
        match self.vendor {
            Vendor::Searxng => {
                if params.get("format").map(String::as_str) != Some("json") {
                    return Err("format=json expected".into());
                }
                Ok(Asked::new(required(&params, "q")?, None))
            }
            Vendor::Brave => {
                wants_json()?;
                let count = required(&params, "count")?;
                Ok(Asked::new(
                    required(&params, "q")?,
                    Some(parse_count(&count)?),
                ))
            }
            Vendor::Jina => {
                wants_json()?;
                Ok(Asked::new(required(&params, "q")?, None))
            }
            Vendor::DuckDuckGo => {
                let axum::Form(form) =
                    axum::Form::<HashMap<String, String>>::from_request(request, &())
                        .await
                        .map_err(|e| format!("a form body expected: {e}"))?;
                Ok(Asked::new(required(&form, "q")?, None))
            }
            Vendor::Tavily => {
                let body = json_of(request).await?;
                Ok(Asked::new(
                    text_field(&body, "query")?,
                    Some(count_field(&body, "max_results")?),
                ))
            }
            Vendor::Serper => {
                let body = json_of(request).await?;
                Ok(Asked::new(
                    text_field(&body, "q")?,
                    Some(count_field(&body, "num")?),
                ))
            }
            Vendor::Bocha => {
                let body = json_of(request).await?;
                if body["summary"] != json!(true) {
                    return Err("\"summary\": true expected".into());
                }
                Ok(Asked::new(
                    text_field(&body, "query")?,
                    Some(count_field(&body, "count")?),
                ))
            }
            Vendor::Zhipu => {
                let body = json_of(request).await?;
                if body["search_engine"] != json!("search_std") {
                    return Err("\"search_engine\": \"search_std\" expected".into());
                }
                Ok(Asked::new(
                    text_field(&body, "search_query")?,
                    Some(count_field(&body, "count")?),
                ))
            }
        }
    }

    fn success(&self, asked: &Asked) -> Response {
        let hits = expected(
            self.vendor,
            &asked.query,
            asked.count.unwrap_or(SUCCESS_COUNT),
        );
        let list = |title: &str, url: &str, snippet: &str| -> Vec<Value> {
            hits.iter()
                .map(|(t, u, s)| json!({title: t, url: u, snippet: s}))
                .collect()
        };
        let body = match self.vendor {
            Vendor::Searxng => {
                json!({"query": asked.query, "results": list("title", "url", "content")})
            }
            Vendor::Brave => {
                // Brave marks the query words up in its descriptions.
                let results: Vec<Value> = hits
                    .iter()
                    .map(|(t, u, s)| {
                        let marked = s.replace(&asked.query, &format!("<strong>{}</strong>", asked.query));
                        json!({"title": t, "url": u, "description": marked, "type": "search_result"})
                    })
                    .collect();
                json!({"type": "search", "web": {"type": "search", "results": results}})
            }
            Vendor::Tavily => {
                json!({"query": asked.query, "results": list("title", "url", "content")})
            }
            Vendor::Serper => {
                json!({"searchParameters": {"q": asked.query}, "organic": list("title", "link", "snippet")})
            }
            Vendor::Jina => {
                json!({"code": 200, "status": 20000, "data": list("title", "url", "description")})
            }
            Vendor::Bocha => {
                let value: Vec<Value> = hits
                    .iter()
                    .map(|(t, u, s)| json!({"name": t, "url": u, "snippet": "short", "summary": s}))
                    .collect();
                json!({"code": 200, "msg": null, "data": {"_type": "SearchResponse", "webPages": {"value": value}}})
            }
            Vendor::Zhipu => json!({"id": "x", "search_result": list("title", "link", "content")}),
            Vendor::DuckDuckGo => return html(duckduckgo_page(&hits)),
        };
        json_body(body).into_response()
    }

    fn empty(&self) -> Response {
        let body = match self.vendor {
            Vendor::Searxng | Vendor::Tavily => json!({"results": []}),
            Vendor::Brave => json!({"type": "search", "query": {"original": "q"}}),
            Vendor::Serper => json!({"searchParameters": {"q": "q"}}),
            Vendor::Jina => json!({"code": 200, "data": []}),
            Vendor::Bocha => json!({"code": 200, "data": {"webPages": {"value": []}}}),
            Vendor::Zhipu => json!({"id": "x", "search_result": []}),
            Vendor::DuckDuckGo => {
                return html(
                    r#"<html><body><div class="no-results">No results.</div></body></html>"#
                        .to_string(),
                );
            }
        };
        json_body(body).into_response()
    }

    fn malformed(&self) -> Response {
        let body = match self.vendor {
            Vendor::Searxng | Vendor::Tavily => json!({"results": "not a list"}),
            Vendor::Brave => json!({"web": {"results": 42}}),
            Vendor::Serper => json!({"organic": {"title": "not a list"}}),
            Vendor::Jina => json!({"data": "not a list"}),
            Vendor::Bocha => json!({"code": "two hundred", "data": []}),
            Vendor::Zhipu => json!({"search_result": 7}),
            Vendor::DuckDuckGo => {
                return html(
                    "<html><body><p>A page of another layout</p></body></html>".to_string(),
                );
            }
        };
        json_body(body).into_response()
    }

    fn unauthorized(&self, why: String) -> Response {
        (
            StatusCode::UNAUTHORIZED,
            json_body(json!({"error": {"code": 401, "message": why}})),
        )
            .into_response()
    }
}

/// What a request asked for.
struct Asked {
    query: String,
    count: Option<usize>,
}

impl Asked {
    fn new(query: String, count: Option<usize>) -> Asked {
        Asked { query, count }
    }
}

fn required(params: &HashMap<String, String>, name: &str) -> Result<String, String> {
    params
        .get(name)
        .filter(|v| !v.trim().is_empty())
        .cloned()
        .ok_or_else(|| format!("parameter {name} missing"))
}

fn parse_count(raw: &str) -> Result<usize, String> {
    raw.parse::<usize>()
        .ok()
        .filter(|n| (1..=50).contains(n))
        .ok_or_else(|| format!("count {raw:?} is not 1..50"))
}

async fn json_of(request: Request) -> Result<Value, String> {
    let is_json = (request.headers().get(header::CONTENT_TYPE))
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !is_json {
        return Err("Content-Type: application/json expected".into());
    }
    let bytes = axum::body::to_bytes(request.into_body(), 64 * 1024)
        .await
        .map_err(|e| format!("body: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("a JSON body expected: {e}"))
}

fn text_field(body: &Value, name: &str) -> Result<String, String> {
    body[name]
        .as_str()
        .filter(|v| !v.trim().is_empty())
        .map(str::to_string)
        .ok_or_else(|| format!("\"{name}\" (a string) missing"))
}

fn count_field(body: &Value, name: &str) -> Result<usize, String> {
    let n = body[name]
        .as_u64()
        .ok_or_else(|| format!("\"{name}\" (a number) missing"))?;
    parse_count(&n.to_string())
}

fn json_body(value: Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

fn html(page: String) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response()
}

/// DuckDuckGo's HTML result page: an ad first, then the results — the odd ones through its
/// `/l/?uddg=` redirect link, the even ones direct — with `<b>` in titles and snippets.
fn duckduckgo_page(hits: &[Expected]) -> String {
    let mut page = String::from(
        r#"<!DOCTYPE html><html><head><title>DuckDuckGo</title></head><body><div id="links" class="results">
<div class="result results_links result--ad"><div class="links_main"><h2 class="result__title"><a class="result__a" href="https://duckduckgo.com/y.js?ad_provider=x">An advertisement</a></h2><a class="result__snippet" href="https://ads.example/">Buy now</a></div></div>
"#,
    );
    for (i, (title, url, snippet)) in hits.iter().enumerate() {
        let href = if i % 2 == 0 {
            format!(
                "//duckduckgo.com/l/?uddg={}&amp;rut=0123abcd",
                percent_encode(url)
            )
        } else {
            escape(url)
        };
        page.push_str(&format!(
            r#"<div class="result results_links results_links_deep web-result"><div class="links_main links_deep result__body"><h2 class="result__title"><a rel="nofollow" class="result__a" href="{href}">{}</a></h2><a class="result__snippet" href="{href}">{}</a></div></div>
"#,
            bold_first_word(&escape(title)),
            escape(snippet),
        ));
    }
    page.push_str("</div></body></html>");
    page
}

fn bold_first_word(text: &str) -> String {
    match text.split_once(' ') {
        Some((first, rest)) => format!("<b>{first}</b> {rest}"),
        None => text.to_string(),
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Every byte but the unreserved ones as `%XX` (what `encodeURIComponent` does).
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
