//! Zhipu: `POST /api/paas/v4/web_search` JSON `{"search_query","search_engine":"search_std",
//! "count"}`, Bearer → `{"search_result":[{"title","link","content"}]}`.

use reqwest::header::{ACCEPT, AUTHORIZATION};
use serde::Deserialize;
use serde_json::json;

use super::http::{Call, ProviderError};
use super::{SearchResult, text};

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    search_result: Option<Vec<Hit>>,
}

#[derive(Deserialize)]
struct Hit {
    title: Option<String>,
    link: Option<String>,
    content: Option<String>,
}

pub(crate) async fn search(call: &Call<'_>) -> Result<Vec<SearchResult>, ProviderError> {
    let request = (call.client.post(call.url.clone()))
        .header(ACCEPT, "application/json")
        .header(AUTHORIZATION, call.bearer()?)
        .json(&json!({
            "search_query": call.query,
            "search_engine": "search_std",
            "count": call.n,
        }));
    let body = call.send(request).await?;
    let answer: Answer = serde_json::from_slice(&body).map_err(|e| call.unreadable(e))?;
    Ok((answer.search_result.unwrap_or_default().into_iter())
        .filter_map(|h| text::result(h.title, h.link, h.content))
        .collect())
}
