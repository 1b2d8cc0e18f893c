//! Brave: `GET /res/v1/web/search?q=Q&count=N`, `X-Subscription-Token: KEY` →
//! `{"web":{"results":[{"title","url","description"}]}}` (no `web` key: no results).

use reqwest::header::ACCEPT;
use serde::Deserialize;

use super::http::{Call, ProviderError};
use super::{SearchResult, text};

#[derive(Deserialize)]
struct Answer {
    web: Option<Web>,
}

#[derive(Deserialize)]
struct Web {
    results: Vec<Hit>,
}

#[derive(Deserialize)]
struct Hit {
    title: Option<String>,
    url: Option<String>,
    description: Option<String>,
}

pub(crate) async fn search(call: &Call<'_>) -> Result<Vec<SearchResult>, ProviderError> {
    let count = call.n.to_string();
    let url = call.url_with_query(&[("q", call.query), ("count", &count)]);
    let request = (call.client.get(url))
        .header(ACCEPT, "application/json")
        .header("X-Subscription-Token", call.key_header("")?);
    let body = call.send(request).await?;
    let answer: Answer = serde_json::from_slice(&body).map_err(|e| call.unreadable(e))?;
    let hits = answer.web.map(|w| w.results).unwrap_or_default();
    Ok((hits.into_iter())
        .filter_map(|h| text::result(h.title, h.url, h.description))
        .collect())
}
