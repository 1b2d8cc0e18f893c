//! DuckDuckGo's HTML page, the keyless last resort: `POST /html/` with the form `q=Q` → HTML
//! whose `.result` blocks hold `a.result__a` (the title; its `href` is a
//! `//duckduckgo.com/l/?uddg=<encoded URL>&…` redirect or the URL itself) and
//! `.result__snippet`. Ads (`.result--ad`) are skipped. A page with neither results nor its
//! "no results" block is not one this parser knows (the layout changed, or a challenge page);
//! a 202 is how it throttles.

use dom_query::Document;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use url::Url;

use super::http::{Call, ProviderError};
use super::{SearchResult, text};

pub(crate) async fn search(call: &Call<'_>) -> Result<Vec<SearchResult>, ProviderError> {
    let form = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("q", call.query)
        .finish();
    let request = (call.client.post(call.url.clone()))
        .header(ACCEPT, "text/html")
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(form);
    let (status, body) = call.send_for_status(request).await?;
    // DuckDuckGo answers a client it throttles with 202 and a challenge page.
    if status == reqwest::StatusCode::ACCEPTED {
        return Err(ProviderError::RateLimited(status.as_u16()));
    }
    let html = String::from_utf8_lossy(&body);
    parse(&html, &call.url).map_err(|e| call.unreadable(e))
}

/// The organic results of a result page.
fn parse(html: &str, page: &Url) -> Result<Vec<SearchResult>, &'static str> {
    let doc = Document::from(html);
    let blocks = doc.select(".result");
    if blocks.is_empty() {
        if doc.select(".no-results").exists() {
            return Ok(Vec::new());
        }
        return Err("no result blocks in the page (its layout changed, or it is a challenge page)");
    }
    let mut results = Vec::new();
    for block in blocks.iter() {
        if block.has_class("result--ad") {
            continue;
        }
        let link = block.select("a.result__a");
        let Some(href) = link.attr("href") else {
            continue;
        };
        let Some(url) = target(&href, page) else {
            continue;
        };
        let title = link.text().to_string();
        let snippet = block.select(".result__snippet").text().to_string();
        if let Some(result) = text::result(Some(title), Some(url), Some(snippet)) {
            results.push(result);
        }
    }
    Ok(results)
}

/// Where a result link points: the `uddg` parameter of DuckDuckGo's redirect link, else the
/// link itself (resolved against the page).
fn target(href: &str, page: &Url) -> Option<String> {
    let link = page.join(href.trim()).ok()?;
    let is_redirect = link
        .host_str()
        .is_some_and(|h| h == "duckduckgo.com" || h.ends_with(".duckduckgo.com"))
        && link.path() == "/l/";
    if is_redirect {
        return link
            .query_pairs()
            .find(|(k, _)| k == "uddg")
            .map(|(_, v)| v.into_owned());
    }
    Some(link.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> Url {
        Url::parse("https://html.duckduckgo.com/html/").unwrap()
    }

    #[test]
    fn redirect_links_are_unwrapped_and_ads_skipped() {
        let html = r#"<div class="results">
          <div class="result result--ad"><a class="result__a" href="https://ads.example/x">Ad</a></div>
          <div class="result"><h2><a class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fwww.rust-lang.org%2Flearn%3Fa%3D1&amp;rut=abc">Learn <b>Rust</b></a></h2>
            <a class="result__snippet">The <b>book</b> &amp; more</a></div>
          <div class="result"><a class="result__a" href="https://doc.rust-lang.org/std/">std</a></div>
        </div>"#;
        let results = parse(html, &page()).unwrap();
        assert_eq!(results.len(), 2, "{results:?}");
        assert_eq!(results[0].url, "https://www.rust-lang.org/learn?a=1");
        assert_eq!(results[0].title, "Learn Rust");
        assert_eq!(results[0].snippet, "The book & more");
        assert_eq!(results[1].url, "https://doc.rust-lang.org/std/");
    }

    #[test]
    fn a_no_results_page_is_empty_and_an_unknown_page_unreadable() {
        let empty = r#"<div class="no-results">No results.</div>"#;
        assert_eq!(parse(empty, &page()).unwrap(), vec![]);
        assert!(
            parse(
                "<html><body>please solve this challenge</body></html>",
                &page()
            )
            .is_err()
        );
    }
}
