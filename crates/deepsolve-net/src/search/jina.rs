//! Jina: `GET /?q=Q`, `Authorization: Bearer KEY`, `Accept: application/json` →
//! `{"data":[{"title","url","description"}]}` (`data: null`: no results);
//! `X-Respond-With: no-content` keeps it from reading every hit's page.

use reqwest::header::{ACCEPT, AUTHORIZATION};
use serde::Deserialize;

use super::http::{Call, ProviderError};
use super::{SearchResult, text};

#[derive(Deserialize)]
struct Answer {
    data: Option<Vec<Hit>>,
}

#[derive(Deserialize)]
struct Hit {
    title: Option<String>,
    url: Option<String>,
    description: Option<String>,
}

pub(crate) async fn search(call: &Call<'_>) -> Result<Vec<SearchResult>, ProviderError> {
    let url = call.url_with_query(&[("q", call.query)]);
    let request = (call.client.get(url))
        .header(ACCEPT, "application/json")
        .header(AUTHORIZATION, call.bearer()?)
        // Titles, URLs and descriptions only: not every hit's whole page.
        .header("X-Respond-With", "no-content");
    let body = call.send(request).await?;
    let answer: Answer = serde_json::from_slice(&body).map_err(|e| call.unreadable(e))?;
    Ok((answer.data.unwrap_or_default().into_iter())
        .filter_map(|h| text::result(h.title, h.url, h.description))
        .collect())
}
