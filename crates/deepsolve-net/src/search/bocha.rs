//! Bocha: `POST /v1/web-search` JSON `{"query","count","summary":true}`, Bearer →
//! `{"code":200,"data":{"webPages":{"value":[{"name","url","snippet","summary"}]}}}`. Its
//! errors may come with HTTP 200 and the status in `code`.

use reqwest::StatusCode;
use reqwest::header::{ACCEPT, AUTHORIZATION};
use serde::Deserialize;
use serde_json::json;

use super::http::{Call, ProviderError};
use super::{SearchResult, text};

#[derive(Deserialize)]
struct Answer {
    code: Option<u16>,
    data: Option<Data>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "webPages")]
    web_pages: Option<WebPages>,
}

#[derive(Deserialize)]
struct WebPages {
    #[serde(default)]
    value: Vec<Hit>,
}

#[derive(Deserialize)]
struct Hit {
    name: Option<String>,
    url: Option<String>,
    snippet: Option<String>,
    summary: Option<String>,
}

pub(crate) async fn search(call: &Call<'_>) -> Result<Vec<SearchResult>, ProviderError> {
    let request = (call.client.post(call.url.clone()))
        .header(ACCEPT, "application/json")
        .header(AUTHORIZATION, call.bearer()?)
        .json(&json!({"query": call.query, "count": call.n, "summary": true}));
    let body = call.send(request).await?;
    let answer: Answer = serde_json::from_slice(&body).map_err(|e| call.unreadable(e))?;
    if let Some(code) = answer.code.filter(|c| *c != 200) {
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_GATEWAY);
        return Err(call.status_error(status, b""));
    }
    let hits = (answer.data.and_then(|d| d.web_pages))
        .map(|w| w.value)
        .unwrap_or_default();
    Ok((hits.into_iter())
        // The summary is the longer, better snippet when asked for; the snippet otherwise.
        .filter_map(|h| {
            text::result(
                h.name,
                h.url,
                h.summary.filter(|s| !s.trim().is_empty()).or(h.snippet),
            )
        })
        .collect())
}
