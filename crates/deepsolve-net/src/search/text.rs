//! Cleaning what vendors return: snippets with markup (`<strong>`, entities) become plain
//! text, and only `http(s)` URLs are kept (a result is cited as a link).

use super::SearchResult;

/// Whether `url` is an absolute `http(s)` URL.
pub(crate) fn is_web_url(url: &str) -> bool {
    url::Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
}

/// `text` without tags and the common entities, whitespace collapsed.
pub(crate) fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    let decoded = out
        .replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&amp;", "&");
    decoded.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A result from a vendor's fields; `None` without a URL. A missing title is the URL.
pub(crate) fn result(
    title: Option<String>,
    url: Option<String>,
    snippet: Option<String>,
) -> Option<SearchResult> {
    let url = url
        .map(|u| u.trim().to_string())
        .filter(|u| !u.is_empty())?;
    let title = title.map(|t| plain(&t)).filter(|t| !t.is_empty());
    Some(SearchResult {
        title: title.unwrap_or_else(|| url.clone()),
        url,
        snippet: snippet.map(|s| plain(&s)).unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_entities_become_plain_text() {
        assert_eq!(
            plain("The <strong>Rust</strong>  book &amp; more&nbsp;&lt;3"),
            "The Rust book & more <3"
        );
    }

    #[test]
    fn only_web_urls_are_kept() {
        assert!(is_web_url("https://example.com/a"));
        assert!(is_web_url("http://example.com"));
        assert!(!is_web_url("javascript:alert(1)"));
        assert!(!is_web_url("/relative"));
        assert!(!is_web_url("file:///etc/passwd"));
    }
}
