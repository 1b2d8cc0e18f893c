//! HTML: the article, as Markdown, without the site around it.
//!
//! dom_smoothie's readability finds the article (navigation, footers and sidebars dropped) and
//! writes it as Markdown, so its headings reach the chunker's heading path. A page it finds no
//! article in (a bare fragment, a list of links) falls back to html2text, which keeps all text.

use dom_smoothie::{Config, Readability, TextMode};

use super::text::{decode, first_heading};
use super::{ExtractError, Extracted, Kind, Markup, Page, stem_title};

/// html2text wraps lines at this width; wide, so wrapping does not cut sentences into lines.
const FALLBACK_WIDTH: usize = 10_000;

pub(super) fn extract(name: &str, bytes: &[u8]) -> Result<Extracted, ExtractError> {
    let html = decode(name, bytes)?;
    let (title, text) = match readable(&html) {
        Some(article) => article,
        None => (None, fallback(name, &html)?),
    };
    let title = title
        .filter(|t| !t.trim().is_empty())
        .or_else(|| first_heading(&text))
        .unwrap_or_else(|| stem_title(name));
    Ok(Extracted {
        kind: Kind::Html,
        title: title.trim().to_owned(),
        markup: Markup::Markdown,
        pages: vec![Page { number: 1, text }],
    })
}

/// The article's title and Markdown text, or `None` when readability finds no article.
fn readable(html: &str) -> Option<(Option<String>, String)> {
    let config = Config {
        text_mode: TextMode::Markdown,
        ..Config::default()
    };
    let mut readability = Readability::new(html, None, Some(config)).ok()?;
    let article = readability.parse().ok()?;
    let text = article.text_content.trim().to_owned();
    (!text.is_empty()).then_some((Some(article.title), text))
}

fn fallback(name: &str, html: &str) -> Result<String, ExtractError> {
    html2text::from_read(html.as_bytes(), FALLBACK_WIDTH).map_err(|e| ExtractError::Html {
        name: name.to_owned(),
        reason: e.to_string(),
    })
}
