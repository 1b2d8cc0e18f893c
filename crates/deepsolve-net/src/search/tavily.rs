//! Tavily: `POST /search` JSON `{"query","max_results"}`, `Authorization: Bearer KEY` →
//! `{"results":[{"title","url","content"}]}`.

use reqwest::header::{ACCEPT, AUTHORIZATION};
use serde::Deserialize;
use serde_json::json;

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
    let request = (call.client.post(call.url.clone()))
        .header(ACCEPT, "application/json")
        .header(AUTHORIZATION, call.bearer()?)
        .json(&json!({"query": call.query, "max_results": call.n}));
    let body = call.send(request).await?;
    let answer: Answer = serde_json::from_slice(&body).map_err(|e| call.unreadable(e))?;
    Ok((answer.results.into_iter())
        .filter_map(|h| text::result(h.title, h.url, h.content))
        .collect())
}
