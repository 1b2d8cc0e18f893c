//! SearXNG: `GET {base}/search?q=Q&format=json` → `{"results":[{"title","url","content"}]}`.

use reqwest::header::ACCEPT;
use serde::Deserialize;

use super::http::{Call, ProviderError};
use super::{SearchResult, text};

#[derive(Deserialize)]
struct Answer {
    results: Vec<Hit>,
}

#[derive(Deserialize)]
struct Hit {
    title: Option<String>,
    url: Option<String>,
    content: Option<String>,
}

pub(crate) async fn search(call: &Call<'_>) -> Result<Vec<SearchResult>, ProviderError> {
    let url = call.url_with_query(&[("q", call.query), ("format", "json")]);
    let request = call.client.get(url).header(ACCEPT, "application/json");
    let body = call.send(request).await?;
    let answer: Answer = serde_json::from_slice(&body).map_err(|e| call.unreadable(e))?;
    Ok((answer.results.into_iter())
        .filter_map(|h| text::result(h.title, h.url, h.content))
        .collect())
}
