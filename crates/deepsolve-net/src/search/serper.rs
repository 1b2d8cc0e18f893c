//! Serper: `POST /search` JSON `{"q","num"}`, `X-API-KEY: KEY` →
//! `{"organic":[{"title","link","snippet"}]}` (no `organic` key: no results).

use reqwest::header::ACCEPT;
use serde::Deserialize;
use serde_json::json;

use super::http::{Call, ProviderError};
use super::{SearchResult, text};

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    organic: Vec<Hit>,
}

#[derive(Deserialize)]
struct Hit {
    title: Option<String>,
    link: Option<String>,
    snippet: Option<String>,
}

pub(crate) async fn search(call: &Call<'_>) -> Result<Vec<SearchResult>, ProviderError> {
    let request = (call.client.post(call.url.clone()))
        .header(ACCEPT, "application/json")
        .header("X-API-KEY", call.key_header("")?)
        .json(&json!({"q": call.query, "num": call.n}));
    let body = call.send(request).await?;
    let answer: Answer = serde_json::from_slice(&body).map_err(|e| call.unreadable(e))?;
    Ok((answer.organic.into_iter())
        .filter_map(|h| text::result(h.title, h.link, h.snippet))
        .collect())
}
