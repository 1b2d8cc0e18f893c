//! What to do about a failed model call: a hint for the usual mistakes, from the model
//! client's typed error (a 404 from a base URL without `/v1`, a model the endpoint does not
//! serve, a refused key, an endpoint that is down).

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use deepsolve_core::{ChatModel, ChatRequest, Completion, DeltaSink, Honours, ModelError};

/// The main model, remembering its last error: the turn's events carry the error's kind and
/// text, this keeps the typed error (its HTTP status) for the hint.
pub(crate) struct Watched {
    inner: Arc<dyn ChatModel>,
    last_error: Mutex<Option<ModelError>>,
}

impl Watched {
    pub(crate) fn new(inner: Arc<dyn ChatModel>) -> Self {
        Watched {
            inner,
            last_error: Mutex::new(None),
        }
    }

    pub(crate) fn last_error(&self) -> Option<ModelError> {
        self.last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[async_trait]
impl ChatModel for Watched {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<Completion, ModelError> {
        let result = self.inner.complete(request, on_delta).await;
        if let Err(e) = &result {
            *self
                .last_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(e.clone());
        }
        result
    }

    // Forwarded: what the model honours decides how the turn holds the spine.
    fn honours(&self) -> Honours {
        self.inner.honours()
    }
}

/// A hint for `error` from the endpoint at `base_url` serving `model`, where one helps.
pub(crate) fn for_model_error(error: &ModelError, base_url: &str, model: &str) -> Option<String> {
    match error {
        ModelError::Auth { .. } => Some(
            "check the API key (DEEPSOLVE_API_KEY, OPENAI_API_KEY, or the variable llm.api_key_env names); `deepsolve doctor` checks the endpoint".into(),
        ),
        ModelError::BadRequest { status: 404, .. } => Some(not_found(base_url, model)),
        ModelError::Transport { .. } | ModelError::IdleTimeout { .. } => Some(format!(
            "is the endpoint {base_url} up? `deepsolve doctor` checks it"
        )),
        ModelError::RateLimited { .. } => {
            Some("the endpoint is rate-limiting: wait a little and run again".into())
        }
        _ => None,
    }
}

/// A 404 from the endpoint: a base URL without its API version, or a model it does not serve.
pub(crate) fn not_found(base_url: &str, model: &str) -> String {
    match with_api_version(base_url) {
        Some(url) => format!("did you mean {url}? (OpenAI-compatible endpoints end in /v1)"),
        None => format!(
            "is the model '{model}' served there? `deepsolve doctor` lists the endpoint's models"
        ),
    }
}

/// `base_url` with `/v1` added, when its path names no API version (`http://host:11434`).
fn with_api_version(base_url: &str) -> Option<String> {
    let trimmed = base_url.trim_end_matches('/');
    let path = trimmed
        .split_once("://")
        .map_or(trimmed, |(_, rest)| rest)
        .split_once('/')
        .map_or("", |(_, path)| path);
    let versioned = path.split('/').any(|segment| {
        segment.len() > 1
            && segment.starts_with('v')
            && segment[1..].starts_with(|c: char| c.is_ascii_digit())
    });
    (!versioned).then(|| format!("{trimmed}/v1"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_without_its_version_gets_v1_suggested() {
        assert_eq!(
            with_api_version("http://127.0.0.1:11434").as_deref(),
            Some("http://127.0.0.1:11434/v1")
        );
        assert_eq!(
            with_api_version("http://h:8000/").as_deref(),
            Some("http://h:8000/v1")
        );
        assert_eq!(with_api_version("http://h:8000/v1"), None);
        assert_eq!(with_api_version("https://api.deepseek.com/v1/"), None);
        assert_eq!(
            with_api_version("https://generativelanguage.googleapis.com/v1beta/openai"),
            None
        );
        assert!(not_found("http://h/v1", "qwen3").contains("deepsolve doctor"));
    }
}
