//! What every vendor module shares: the client (no redirects), the request's endpoint, the
//! key header, and one mapping from HTTP outcomes to [`ProviderError`] sentences.

use std::time::Duration;

use reqwest::header::{HeaderValue, InvalidHeaderValue};
use reqwest::{RequestBuilder, StatusCode, redirect};
use secrecy::{ExposeSecret, SecretString};
use url::Url;

/// The most of a response body read (a search answer is a few tens of KiB).
const MAX_BODY: usize = 2 * 1024 * 1024;
/// The most of a vendor's text (a serde error, an error body) an error quotes.
const MAX_QUOTED: usize = 200;

/// Why one provider gave no answer. The `Display` is the reason a [`super::ProviderFailure`]
/// carries (the provider's name is put in front by it): never a key, never a long body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    #[error("not configured ({0})")]
    NotConfigured(String),
    #[error("the key was refused ({status}): check {key_env}")]
    KeyRefused { status: u16, key_env: String },
    #[error("no key: set {0}")]
    NoKey(String),
    #[error("the key in {0} cannot be sent in a header (it has characters a header cannot carry)")]
    BadKey(String),
    #[error("rate limited ({0})")]
    RateLimited(u16),
    #[error("the service failed ({0})")]
    ServiceFailed(u16),
    #[error("it refused the request ({status}){detail}")]
    Refused { status: u16, detail: String },
    #[error("it answered with a redirect ({status}) to {location}, which is not followed")]
    Redirected { status: u16, location: String },
    #[error("unreadable response: {0}")]
    Unreadable(String),
    #[error("no answer within {0}")]
    Timeout(String),
    #[error("cannot reach {0}")]
    Unreachable(String),
    #[error("bad base URL {url}: {reason}")]
    BadBaseUrl { url: String, reason: String },
    #[error("no results")]
    NoResults,
    #[error("not asked: the call ran out of time")]
    OutOfTime,
}

/// The search client: redirects are never followed (a custom key header would follow them to
/// any host), the operator's proxy is honoured, and every request has the per-provider limit.
pub(crate) fn client(timeout: Duration) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .redirect(redirect::Policy::none())
        .timeout(timeout)
        .connect_timeout(timeout)
        .user_agent(concat!("deepsolve/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// `{base}{path}` as a URL.
pub(crate) fn endpoint(base: &str, path: &str) -> Result<Url, ProviderError> {
    let joined = format!("{base}{path}");
    let url = Url::parse(&joined).map_err(|e| ProviderError::BadBaseUrl {
        url: base.to_string(),
        reason: e.to_string(),
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ProviderError::BadBaseUrl {
            url: base.to_string(),
            reason: "not http or https".to_string(),
        });
    }
    Ok(url)
}

/// One request to one provider.
pub(crate) struct Call<'a> {
    pub(crate) client: &'a reqwest::Client,
    /// The endpoint (base URL and the vendor's path), without a query.
    pub(crate) url: Url,
    pub(crate) key: Option<&'a SecretString>,
    /// Where the key came from, for "check BRAVE_API_KEY".
    pub(crate) key_env: &'a str,
    pub(crate) query: &'a str,
    pub(crate) n: usize,
    pub(crate) timeout: Duration,
    /// What a 401/403 from a keyless endpoint most likely means (`""`: nothing to add).
    pub(crate) keyless_refusal_hint: &'static str,
}

impl Call<'_> {
    /// The endpoint with `pairs` as its query string.
    pub(crate) fn url_with_query(&self, pairs: &[(&str, &str)]) -> Url {
        let mut url = self.url.clone();
        url.query_pairs_mut().extend_pairs(pairs);
        url
    }

    /// The key, or the error of a keyed vendor without one.
    fn key(&self) -> Result<&SecretString, ProviderError> {
        self.key
            .ok_or_else(|| ProviderError::NoKey(self.key_env.to_string()))
    }

    /// A header value carrying `prefix` + the key, marked sensitive (kept out of reqwest's
    /// `Debug` and HTTP/2 header compression tables).
    pub(crate) fn key_header(&self, prefix: &str) -> Result<HeaderValue, ProviderError> {
        let key = self.key()?;
        let value = format!("{prefix}{}", key.expose_secret());
        let mut header = HeaderValue::from_str(&value)
            .map_err(|_: InvalidHeaderValue| ProviderError::BadKey(self.key_env.to_string()))?;
        header.set_sensitive(true);
        Ok(header)
    }

    /// `Authorization: Bearer KEY`.
    pub(crate) fn bearer(&self) -> Result<HeaderValue, ProviderError> {
        self.key_header("Bearer ")
    }

    /// Sends `request` and returns the body of a 2xx answer; every other outcome is the
    /// matching [`ProviderError`].
    pub(crate) async fn send(&self, request: RequestBuilder) -> Result<Vec<u8>, ProviderError> {
        self.send_for_status(request).await.map(|(_, body)| body)
    }

    /// [`Call::send`], with the 2xx status it answered.
    pub(crate) async fn send_for_status(
        &self,
        request: RequestBuilder,
    ) -> Result<(StatusCode, Vec<u8>), ProviderError> {
        let response = request
            .timeout(self.timeout)
            .send()
            .await
            .map_err(|e| self.transport_error(&e))?;
        let status = response.status();
        if status.is_redirection() {
            let location = (response.headers().get(reqwest::header::LOCATION))
                .and_then(|l| l.to_str().ok())
                .map(|l| short(l, 100))
                .unwrap_or_else(|| "nowhere".to_string());
            return Err(ProviderError::Redirected {
                status: status.as_u16(),
                location,
            });
        }
        let body = self.read_body(response).await?;
        if status.is_success() {
            return Ok((status, body));
        }
        Err(self.status_error(status, &body))
    }

    /// Reads at most [`MAX_BODY`] bytes (a longer body is cut: it then fails to parse).
    async fn read_body(&self, mut response: reqwest::Response) -> Result<Vec<u8>, ProviderError> {
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| self.transport_error(&e))?
        {
            let room = MAX_BODY.saturating_sub(body.len());
            body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if body.len() >= MAX_BODY {
                break;
            }
        }
        Ok(body)
    }

    /// A non-2xx status in words.
    pub(crate) fn status_error(&self, status: StatusCode, body: &[u8]) -> ProviderError {
        let code = status.as_u16();
        match code {
            401 | 403 if !self.key_env.is_empty() => ProviderError::KeyRefused {
                status: code,
                key_env: self.key_env.to_string(),
            },
            // A keyless endpoint that refuses: a SearXNG without the JSON format enabled, or
            // behind an authenticating proxy.
            401 | 403 => ProviderError::Refused {
                status: code,
                detail: self.keyless_refusal_hint.to_string(),
            },
            429 => ProviderError::RateLimited(code),
            500..=599 => ProviderError::ServiceFailed(code),
            _ => {
                let text = self.scrub(&String::from_utf8_lossy(body));
                let text = short(text.trim(), MAX_QUOTED);
                ProviderError::Refused {
                    status: code,
                    detail: if text.is_empty() {
                        String::new()
                    } else {
                        format!(": {text}")
                    },
                }
            }
        }
    }

    /// A parse failure, its message shortened and scrubbed of the key.
    pub(crate) fn unreadable(&self, error: impl std::fmt::Display) -> ProviderError {
        ProviderError::Unreadable(short(&self.scrub(&error.to_string()), MAX_QUOTED))
    }

    /// `text` with every occurrence of the key replaced (a vendor may echo what it got).
    fn scrub(&self, text: &str) -> String {
        match self
            .key
            .map(|k| k.expose_secret())
            .filter(|k| !k.is_empty())
        {
            Some(key) => text.replace(key, "***"),
            None => text.to_string(),
        }
    }

    fn transport_error(&self, e: &reqwest::Error) -> ProviderError {
        if e.is_timeout() {
            ProviderError::Timeout(seconds(self.timeout))
        } else if e.is_connect() || e.is_request() {
            ProviderError::Unreachable(self.host())
        } else {
            ProviderError::Unreachable(format!("{} (the answer broke off)", self.host()))
        }
    }

    fn host(&self) -> String {
        match (self.url.host_str(), self.url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_string(),
            (None, _) => self.url.to_string(),
        }
    }
}

/// `20 s`, `0.3 s`.
fn seconds(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// At most `max` characters of `text`, with `…` when cut.
pub(crate) fn short(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_body_is_quoted_short_and_without_the_key() {
        let client = client(Duration::from_secs(1)).unwrap();
        let key = SecretString::from("sk-echoed-back");
        let call = Call {
            client: &client,
            url: Url::parse("https://api.example/search").unwrap(),
            key: Some(&key),
            key_env: "EXAMPLE_KEY",
            query: "q",
            n: 3,
            timeout: Duration::from_secs(1),
            keyless_refusal_hint: "",
        };
        let body = format!("bad request from key sk-echoed-back: {}", "x".repeat(500));
        let e = call.status_error(StatusCode::BAD_REQUEST, body.as_bytes());
        let text = e.to_string();
        assert!(
            text.starts_with("it refused the request (400): bad request from key ***: xxx"),
            "{text}"
        );
        assert!(!text.contains("sk-echoed-back"));
        assert!(text.chars().count() < 260, "{text}");
        assert_eq!(
            call.status_error(StatusCode::FORBIDDEN, b"").to_string(),
            "the key was refused (403): check EXAMPLE_KEY"
        );
        assert_eq!(
            call.unreadable("expected value at sk-echoed-back")
                .to_string(),
            "unreadable response: expected value at ***"
        );
    }

    #[test]
    fn durations_read_as_seconds() {
        assert_eq!(seconds(Duration::from_secs(20)), "20 s");
        assert_eq!(seconds(Duration::from_millis(300)), "0.3 s");
    }
}
