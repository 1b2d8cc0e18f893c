//! Client configuration and construction errors.

use std::time::Duration;

use secrecy::SecretString;
use serde_json::{Map, Value};

/// Everything an [`crate::OpenAiClient`] needs to reach one model on one endpoint.
///
/// `Debug` is safe to log: [`SecretString`] prints as redacted.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The API root, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:11434/v1`.
    /// `/chat/completions` and `/models` are appended to it.
    pub base_url: String,
    /// The model name sent as `model` in every request.
    pub model: String,
    /// Sent as `Authorization: Bearer <key>` when set; local servers usually need none.
    pub api_key: Option<SecretString>,
    /// Provider-specific top-level request fields (e.g. `{"enable_thinking": false}`), merged
    /// over the standard ones. They cannot replace `model`, `messages` or `stream`; a `null`
    /// value removes the standard field of that name (for servers that reject, say,
    /// `stream_options`).
    pub extra_body: Map<String, Value>,
    /// No byte from the server for this long (while waiting for headers or between chunks) is
    /// an idle timeout. default 120 s.
    pub stream_idle_timeout: Duration,
    /// Attempts in total, the first included (4). Zero is treated as one.
    pub max_attempts: u32,
    /// TCP/TLS connect timeout.
    pub connect_timeout: Duration,
    /// First retry delay; each further retry doubles it (±10 %, capped at 30 s).
    pub backoff_base: Duration,
    /// Cap on one reply: its content, reasoning and tool-call arguments together (4 MiB).
    /// Crossing it ends the call with `ModelError::ReplyTooLarge` and drops the connection.
    pub max_reply_bytes: usize,
}

impl ClientConfig {
    /// A configuration with the documented defaults and no API key or extra body.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        ClientConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            extra_body: Map::new(),
            stream_idle_timeout: Duration::from_secs(120),
            max_attempts: 4,
            connect_timeout: Duration::from_secs(10),
            backoff_base: Duration::from_millis(500),
            max_reply_bytes: crate::accumulate::DEFAULT_MAX_REPLY_BYTES,
        }
    }
}

/// Why an [`crate::OpenAiClient`] could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    #[error(
        "invalid base_url {url:?}: {reason}; it must be an http:// or https:// URL such as \
         https://api.openai.com/v1"
    )]
    InvalidBaseUrl { url: String, reason: String },
    #[error("could not build the HTTP client: {message}")]
    Http { message: String },
}

/// Checks that `base_url` is an absolute http(s) URL with a host and returns it without
/// trailing slashes, so endpoint paths can be appended with a single `/`.
pub(crate) fn normalize_base_url(base_url: &str) -> Result<String, ClientError> {
    let invalid = |reason: &str| ClientError::InvalidBaseUrl {
        url: base_url.to_string(),
        reason: reason.to_string(),
    };
    let trimmed = base_url.trim();
    let url = reqwest::Url::parse(trimmed).map_err(|e| invalid(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid(&format!("unsupported scheme {:?}", url.scheme())));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("no host"));
    }
    Ok(trimmed.trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_http_and_https_and_strips_trailing_slashes() {
        assert_eq!(
            normalize_base_url("https://api.openai.com/v1/").as_deref(),
            Ok("https://api.openai.com/v1")
        );
        assert_eq!(
            normalize_base_url("http://127.0.0.1:11434/v1").as_deref(),
            Ok("http://127.0.0.1:11434/v1")
        );
    }

    #[test]
    fn rejects_other_schemes_and_garbage_naming_the_rule() {
        for bad in [
            "ftp://example.com",
            "localhost:8080/v1",
            "",
            "file:///tmp/x",
        ] {
            let err = normalize_base_url(bad).expect_err(bad);
            let text = err.to_string();
            assert!(text.contains("http:// or https://"), "{text}");
            assert!(matches!(err, ClientError::InvalidBaseUrl { .. }));
        }
    }
}
