//! Embeddings: the [`Embedder`] trait and a client of OpenAI-compatible `/embeddings`
//! endpoints (batched, retried on 429 and 5xx, typed errors).

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;

/// Turns texts into vectors with one model.
#[async_trait]
pub trait Embedder: Send + Sync {
    /// The model name recorded with a KB's vectors.
    fn model(&self) -> &str;

    /// One vector per text, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// Why texts could not be embedded.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("the embedding API key variable {0} is not set")]
    MissingKey(String),
    #[error("invalid embedding endpoint '{0}': use an http:// or https:// URL")]
    InvalidUrl(String),
    #[error("embedding request failed: {0}")]
    Transport(String),
    #[error("embedding endpoint answered {status} after {attempts} attempts: {message}")]
    Exhausted {
        status: u16,
        attempts: u32,
        message: String,
    },
    #[error("embedding endpoint refused the request ({status}): {message}")]
    Rejected { status: u16, message: String },
    #[error("malformed embedding response: {0}")]
    Malformed(String),
}

/// Where and how to reach an OpenAI-compatible embeddings endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiEmbedderConfig {
    /// The API root, e.g. `https://api.openai.com/v1`; `/embeddings` is appended.
    pub base_url: String,
    pub model: String,
    /// The name of the environment variable holding the key (none for local servers), so
    /// the key itself never sits in a settings file.
    pub api_key_env: Option<String>,
    /// Texts per request.
    pub batch_size: usize,
    /// Retries after the first attempt, on 429, 5xx and transport errors.
    pub max_retries: u32,
    /// First retry delay, doubled each retry (a `Retry-After` in seconds wins, capped).
    pub backoff: Duration,
    pub timeout: Duration,
}

impl OpenAiEmbedderConfig {
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiEmbedderConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: None,
            batch_size: 64,
            max_retries: 2,
            backoff: Duration::from_millis(500),
            timeout: Duration::from_secs(60),
        }
    }
}

/// The longest wait a `Retry-After` can impose.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// How much of an error body goes into a message.
const MESSAGE_CHARS: usize = 300;

pub struct OpenAiEmbedder {
    http: reqwest::Client,
    url: String,
    key: Option<String>,
    config: OpenAiEmbedderConfig,
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f32>,
}

/// One attempt's failure: retry it or give up.
enum Attempt {
    Retry {
        status: u16,
        message: String,
        wait: Option<Duration>,
    },
    Fail(EmbedError),
}

impl OpenAiEmbedder {
    /// A client; fails when the key variable is named but unset, or the URL is not http(s).
    pub fn new(config: OpenAiEmbedderConfig) -> Result<OpenAiEmbedder, EmbedError> {
        let base = config.base_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(EmbedError::InvalidUrl(config.base_url.clone()));
        }
        let key = match &config.api_key_env {
            Some(var) => Some(
                std::env::var(var)
                    .ok()
                    .filter(|k| !k.is_empty())
                    .ok_or_else(|| EmbedError::MissingKey(var.clone()))?,
            ),
            None => None,
        };
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            .build()
            .map_err(|e| EmbedError::Transport(e.to_string()))?;
        Ok(OpenAiEmbedder {
            http,
            url: format!("{base}/embeddings"),
            key,
            config,
        })
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut retry = 0;
        loop {
            let (status, message, wait) = match self.attempt(texts).await {
                Ok(vectors) => return Ok(vectors),
                Err(Attempt::Fail(e)) => return Err(e),
                Err(Attempt::Retry {
                    status,
                    message,
                    wait,
                }) => (status, message, wait),
            };
            if retry >= self.config.max_retries {
                return Err(EmbedError::Exhausted {
                    status,
                    attempts: retry + 1,
                    message,
                });
            }
            let backoff = self
                .config
                .backoff
                .saturating_mul(2u32.saturating_pow(retry));
            tokio::time::sleep(wait.unwrap_or(backoff).min(MAX_RETRY_AFTER)).await;
            retry += 1;
        }
    }

    async fn attempt(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, Attempt> {
        let body = serde_json::json!({
            "model": self.config.model,
            "input": texts,
            "encoding_format": "float",
        });
        let mut request = self.http.post(&self.url).json(&body);
        if let Some(key) = &self.key {
            request = request.bearer_auth(key);
        }
        let response = match request.send().await {
            Ok(r) => r,
            // A connection that failed or timed out may well work the next time; status 0
            // marks "no answer" in the final error.
            Err(e) => {
                return Err(Attempt::Retry {
                    status: 0,
                    message: e.to_string(),
                    wait: None,
                });
            }
        };
        let status = response.status();
        let wait = retry_after(&response);
        let text = response.text().await.map_err(|e| Attempt::Retry {
            status: status.as_u16(),
            message: e.to_string(),
            wait: None,
        })?;
        if status.as_u16() == 429 || status.is_server_error() {
            return Err(Attempt::Retry {
                status: status.as_u16(),
                message: snippet(&text),
                wait,
            });
        }
        if !status.is_success() {
            return Err(Attempt::Fail(EmbedError::Rejected {
                status: status.as_u16(),
                message: snippet(&text),
            }));
        }
        parse_vectors(&text, texts.len()).map_err(Attempt::Fail)
    }
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn model(&self) -> &str {
        &self.config.model
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.config.batch_size.max(1)) {
            out.extend(self.embed_batch(batch).await?);
        }
        Ok(out)
    }
}

/// The vectors of a response, put in input order by their `index` (servers may reorder),
/// checked for count and a common non-zero dimension.
fn parse_vectors(body: &str, expected: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
    let parsed: EmbeddingsResponse =
        serde_json::from_str(body).map_err(|e| EmbedError::Malformed(e.to_string()))?;
    if parsed.data.len() != expected {
        return Err(EmbedError::Malformed(format!(
            "{} vectors for {expected} inputs",
            parsed.data.len()
        )));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (position, item) in parsed.data.into_iter().enumerate() {
        let at = item.index.unwrap_or(position);
        match slots.get_mut(at) {
            Some(slot @ None) => *slot = Some(item.embedding),
            _ => return Err(EmbedError::Malformed(format!("bad or repeated index {at}"))),
        }
    }
    let vectors: Vec<Vec<f32>> = slots.into_iter().flatten().collect();
    let dimension = vectors.first().map_or(0, Vec::len);
    if dimension == 0 || vectors.iter().any(|v| v.len() != dimension) {
        return Err(EmbedError::Malformed(
            "vectors are empty or of different dimensions".into(),
        ));
    }
    Ok(vectors)
}

/// A `Retry-After` given in seconds (the form rate limiters send).
fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let value = response.headers().get(reqwest::header::RETRY_AFTER)?;
    let secs: f64 = value.to_str().ok()?.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(30.0)))
}

fn snippet(text: &str) -> String {
    text.chars().take(MESSAGE_CHARS).collect()
}
