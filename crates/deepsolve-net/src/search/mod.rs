//! `web_search`'s provider chain: the operator's preferred provider, then every other
//! configured one in a fixed order, then DuckDuckGo's HTML page (keyless, the last resort).
//! Each failure is recorded — in the outcome when a later provider answers, in the error when
//! none does.
//!
//! These hosts are the operator's choice, not the model's (the model only supplies the query),
//! so this client does not go through the egress guard; it may use the operator's proxy. It
//! never follows a redirect: a vendor's key travels in custom headers (`X-Subscription-Token`,
//! `X-API-KEY`) that reqwest would carry to any host a redirect names. A key is a
//! [`SecretString`], sent only in its own vendor's request, marked sensitive, and never part of
//! an error, a `Debug` or the outcome.

mod bocha;
mod brave;
mod duckduckgo;
mod http;
mod jina;
mod searxng;
mod serper;
mod tavily;
mod text;
mod zhipu;

use crate::lazy::LazyClient;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use secrecy::SecretString;
use tokio::time::Instant;

pub use http::ProviderError;

/// How long one provider may take to answer (connect, request, whole body).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);
/// Results a search returns when nobody says otherwise.
pub const DEFAULT_MAX_RESULTS: usize = 5;
/// The most results one search returns.
pub const MAX_RESULTS: usize = 10;
/// Less time than this left before the call's deadline: the rest of the chain is not asked.
const MIN_TIME_LEFT: Duration = Duration::from_millis(500);

/// A search provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    Searxng,
    Brave,
    Tavily,
    Serper,
    Jina,
    Bocha,
    Zhipu,
    DuckDuckGo,
}

impl Provider {
    /// Every provider, in the chain's fixed order (DuckDuckGo, the last resort, last).
    pub const ALL: [Provider; 8] = [
        Provider::Searxng,
        Provider::Brave,
        Provider::Tavily,
        Provider::Serper,
        Provider::Jina,
        Provider::Bocha,
        Provider::Zhipu,
        Provider::DuckDuckGo,
    ];

    /// The names of [`Provider::ALL`], in the same order (what settings accept).
    pub const NAMES: [&'static str; 8] = {
        let mut names = [""; 8];
        let mut i = 0;
        while i < names.len() {
            names[i] = Provider::ALL[i].as_str();
            i += 1;
        }
        names
    };

    /// Its name in settings and messages.
    pub const fn as_str(self) -> &'static str {
        match self {
            Provider::Searxng => "searxng",
            Provider::Brave => "brave",
            Provider::Tavily => "tavily",
            Provider::Serper => "serper",
            Provider::Jina => "jina",
            Provider::Bocha => "bocha",
            Provider::Zhipu => "zhipu",
            Provider::DuckDuckGo => "duckduckgo",
        }
    }

    /// The environment variable its key is read from unless `api_key_env` names another;
    /// `None` for the keyless ones (SearXNG, DuckDuckGo).
    pub const fn default_key_env(self) -> Option<&'static str> {
        match self {
            Provider::Brave => Some("BRAVE_API_KEY"),
            Provider::Tavily => Some("TAVILY_API_KEY"),
            Provider::Serper => Some("SERPER_API_KEY"),
            Provider::Jina => Some("JINA_API_KEY"),
            Provider::Bocha => Some("BOCHA_API_KEY"),
            Provider::Zhipu => Some("ZHIPU_API_KEY"),
            Provider::Searxng | Provider::DuckDuckGo => None,
        }
    }

    /// Whether it needs a key to be configured.
    pub const fn is_keyed(self) -> bool {
        self.default_key_env().is_some()
    }

    /// The origin (and path prefix) a `base_url` replaces; `None` for SearXNG, which is
    /// always self-hosted. The vendor's own path is appended to either ([`Provider::path`]).
    pub const fn default_base_url(self) -> Option<&'static str> {
        match self {
            Provider::Searxng => None,
            Provider::Brave => Some("https://api.search.brave.com"),
            Provider::Tavily => Some("https://api.tavily.com"),
            Provider::Serper => Some("https://google.serper.dev"),
            Provider::Jina => Some("https://s.jina.ai"),
            Provider::Bocha => Some("https://api.bochaai.com"),
            Provider::Zhipu => Some("https://open.bigmodel.cn"),
            Provider::DuckDuckGo => Some("https://html.duckduckgo.com"),
        }
    }

    /// The vendor's path under the base URL.
    pub const fn path(self) -> &'static str {
        match self {
            Provider::Searxng => "/search",
            Provider::Brave => "/res/v1/web/search",
            Provider::Tavily => "/search",
            Provider::Serper => "/search",
            Provider::Jina => "/",
            Provider::Bocha => "/v1/web-search",
            Provider::Zhipu => "/api/paas/v4/web_search",
            Provider::DuckDuckGo => "/html/",
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A provider name that is not one of [`Provider::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown search provider '{0}' (known: searxng, brave, tavily, serper, jina, bocha, zhipu, duckduckgo)"
)]
pub struct UnknownProvider(pub String);

impl FromStr for Provider {
    type Err = UnknownProvider;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim();
        Provider::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(name))
            .ok_or_else(|| UnknownProvider(name.to_string()))
    }
}

/// One provider as the operator configured it.
#[derive(Clone)]
pub struct ProviderConfig {
    pub provider: Provider,
    /// Replaces [`Provider::default_base_url`] (trailing `/` ignored); SearXNG needs one.
    pub base_url: Option<String>,
    /// The environment variable the key came from (or would have): named in messages.
    pub key_env: Option<String>,
    /// The key, read once when the tool is built.
    pub key: Option<SecretString>,
}

impl ProviderConfig {
    /// `provider` with its defaults: no base URL override, its default key variable, no key.
    pub fn new(provider: Provider) -> ProviderConfig {
        ProviderConfig {
            provider,
            base_url: None,
            key_env: provider.default_key_env().map(str::to_string),
            key: None,
        }
    }

    pub fn with_base_url(mut self, base_url: impl Into<String>) -> ProviderConfig {
        let base_url = base_url.into();
        self.base_url = (!base_url.trim().is_empty()).then(|| base_url.trim().to_string());
        self
    }

    /// Takes the key from `value` (what the variable `env` holds); blank is no key.
    pub fn with_key(mut self, env: impl Into<String>, value: Option<String>) -> ProviderConfig {
        self.key_env = Some(env.into());
        self.key = value
            .filter(|v| !v.trim().is_empty())
            .map(|v| SecretString::from(v.trim().to_string()));
        self
    }

    /// Whether the chain may ask it: SearXNG with a base URL, a keyed vendor with its key,
    /// DuckDuckGo always.
    pub fn is_configured(&self) -> bool {
        match self.provider {
            Provider::Searxng => self.base_url.is_some(),
            Provider::DuckDuckGo => true,
            _ => self.key.is_some(),
        }
    }

    /// Why it is (or is not) configured, in words for `doctor`.
    fn why(&self) -> String {
        let key_env = self.key_env.as_deref().unwrap_or("its key variable");
        match (self.provider, &self.base_url, &self.key) {
            (Provider::Searxng, Some(base), _) => format!("instance at {base}"),
            (Provider::Searxng, None, _) => {
                "tools.web_search.searxng.base_url is not set".to_string()
            }
            (Provider::DuckDuckGo, _, _) => {
                "keyless HTML search, always the last resort".to_string()
            }
            (_, _, Some(_)) => match &self.base_url {
                Some(base) => format!("key from {key_env}, at {base}"),
                None => format!("key from {key_env}"),
            },
            (_, _, None) => format!("{key_env} is not set"),
        }
    }

    /// The base URL requests go to, without a trailing `/`.
    fn base(&self) -> Option<&str> {
        self.base_url
            .as_deref()
            .or(self.provider.default_base_url())
            .map(|b| b.trim_end_matches('/'))
    }
}

impl fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("key_env", &self.key_env)
            .field("key", &self.key.as_ref().map(|_| "[REDACTED]"))
            .finish()
    }
}

/// Every provider's configuration and the chain's knobs.
#[derive(Debug, Clone)]
pub struct SearchConfig {
    /// `tools.web_search.provider`: asked first (if configured).
    pub preferred: Option<Provider>,
    /// One entry per provider (a missing one counts as its defaults: unconfigured, except
    /// DuckDuckGo).
    pub providers: Vec<ProviderConfig>,
    /// Results when a call does not say (1..=10).
    pub max_results: usize,
    /// Per provider.
    pub timeout: Duration,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            preferred: None,
            providers: Provider::ALL.into_iter().map(ProviderConfig::new).collect(),
            max_results: DEFAULT_MAX_RESULTS,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// One provider's state, for `doctor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderStatus {
    pub provider: Provider,
    pub configured: bool,
    /// `tools.web_search.provider` names it.
    pub preferred: bool,
    /// Where it searches or why it cannot ("BRAVE_API_KEY is not set").
    pub why: String,
}

impl SearchConfig {
    /// Replaces (or adds) one provider's configuration.
    pub fn with_provider(mut self, config: ProviderConfig) -> SearchConfig {
        self.providers.retain(|p| p.provider != config.provider);
        self.providers.push(config);
        self
    }

    /// `provider`'s configuration (its defaults when none was given).
    pub fn provider(&self, provider: Provider) -> ProviderConfig {
        self.providers
            .iter()
            .find(|p| p.provider == provider)
            .cloned()
            .unwrap_or_else(|| ProviderConfig::new(provider))
    }

    /// The providers a search asks, in order: the preferred one (if configured), the other
    /// configured ones in [`Provider::ALL`]'s order, DuckDuckGo last (unless preferred).
    pub fn order(&self) -> Vec<Provider> {
        let configured = |p: &Provider| self.provider(*p).is_configured();
        let mut order: Vec<Provider> = self.preferred.into_iter().filter(configured).collect();
        order.extend(
            Provider::ALL
                .into_iter()
                .filter(configured)
                .filter(|p| Some(*p) != self.preferred),
        );
        order
    }

    /// Every provider, configured or not and why, in [`Provider::ALL`]'s order.
    pub fn status(&self) -> Vec<ProviderStatus> {
        Provider::ALL
            .into_iter()
            .map(|p| {
                let config = self.provider(p);
                ProviderStatus {
                    provider: p,
                    configured: config.is_configured(),
                    preferred: self.preferred == Some(p),
                    why: config.why(),
                }
            })
            .collect()
    }
}

/// One hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchResult {
    pub title: String,
    /// An `http(s)` URL (results with anything else are dropped).
    pub url: String,
    /// Plain text (markup stripped); may be empty.
    pub snippet: String,
}

/// A provider that did not answer, and why (no key, no long body in `reason`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderFailure {
    pub provider: Provider,
    pub reason: String,
}

impl fmt::Display for ProviderFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.provider, self.reason)
    }
}

/// What a search found, who found it, and who failed before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchOutcome {
    pub provider: Provider,
    pub results: Vec<SearchResult>,
    pub failures: Vec<ProviderFailure>,
}

/// Why a search returned nothing at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    #[error("the search query is empty")]
    EmptyQuery,
    #[error("the search client cannot be built: {0}")]
    Client(String),
    #[error("every search provider failed: {}", join_failures(.0))]
    AllFailed(Vec<ProviderFailure>),
}

fn join_failures(failures: &[ProviderFailure]) -> String {
    let parts: Vec<String> = failures.iter().map(ToString::to_string).collect();
    parts.join("; ")
}

/// The chain, with one HTTP client (no redirects; the system proxy allowed).
#[derive(Debug, Clone)]
pub struct SearchChain {
    config: SearchConfig,
    client: LazyClient,
}

impl SearchChain {
    pub fn new(config: SearchConfig) -> SearchChain {
        SearchChain {
            config,
            client: LazyClient::default(),
        }
    }

    /// The client, made on first use.
    fn client(&self) -> Result<&reqwest::Client, SearchError> {
        (self.client)
            .get(|| http::client(self.config.timeout))
            .map_err(SearchError::Client)
    }

    pub fn config(&self) -> &SearchConfig {
        &self.config
    }

    /// Searches `query` for `n` results (clamped to 1..=10) down the chain: the first
    /// provider with results wins. One that answers with no results is noted and the next is
    /// asked; if nobody has results but someone answered, the outcome is that empty answer.
    pub async fn search(&self, query: &str, n: usize) -> Result<SearchOutcome, SearchError> {
        self.search_before(query, n, None).await
    }

    /// [`SearchChain::search`], done by `deadline` (the tool call's): a provider is given at
    /// most the time left, and the ones left when it is (nearly) gone are recorded as not asked.
    pub async fn search_before(
        &self,
        query: &str,
        n: usize,
        deadline: Option<Instant>,
    ) -> Result<SearchOutcome, SearchError> {
        let query = query.trim();
        if query.is_empty() {
            return Err(SearchError::EmptyQuery);
        }
        let n = n.clamp(1, MAX_RESULTS);
        let client = self.client()?;
        let mut failures = Vec::new();
        if let Some(preferred) = self.config.preferred
            && !self.config.provider(preferred).is_configured()
        {
            failures.push(ProviderFailure {
                provider: preferred,
                reason: ProviderError::NotConfigured(self.config.provider(preferred).why())
                    .to_string(),
            });
        }
        let mut first_empty = None;
        for provider in self.config.order() {
            let timeout = match deadline.map(|d| d.saturating_duration_since(Instant::now())) {
                Some(left) if left < MIN_TIME_LEFT => {
                    failures.push(ProviderFailure {
                        provider,
                        reason: ProviderError::OutOfTime.to_string(),
                    });
                    continue;
                }
                Some(left) => left.min(self.config.timeout),
                None => self.config.timeout,
            };
            match self.ask(client, provider, query, n, timeout).await {
                Ok(results) if !results.is_empty() => {
                    return Ok(SearchOutcome {
                        provider,
                        results,
                        failures,
                    });
                }
                Ok(_) => {
                    first_empty.get_or_insert(provider);
                    failures.push(ProviderFailure {
                        provider,
                        reason: ProviderError::NoResults.to_string(),
                    });
                }
                Err(e) => {
                    // The reason never holds a key (see `ProviderError`).
                    tracing::info!(provider = provider.as_str(), reason = %e, "search provider failed");
                    failures.push(ProviderFailure {
                        provider,
                        reason: e.to_string(),
                    });
                }
            }
        }
        match first_empty {
            Some(provider) => Ok(SearchOutcome {
                provider,
                results: Vec::new(),
                failures,
            }),
            None => Err(SearchError::AllFailed(failures)),
        }
    }

    /// Asks one provider only (configured or not), for `n` results (clamped to 1..=10).
    pub async fn search_with(
        &self,
        provider: Provider,
        query: &str,
        n: usize,
    ) -> Result<Vec<SearchResult>, ProviderError> {
        let client = (self.client()).map_err(|e| ProviderError::Unreachable(e.to_string()))?;
        self.ask(client, provider, query, n, self.config.timeout)
            .await
    }

    async fn ask(
        &self,
        client: &reqwest::Client,
        provider: Provider,
        query: &str,
        n: usize,
        timeout: Duration,
    ) -> Result<Vec<SearchResult>, ProviderError> {
        let config = self.config.provider(provider);
        let n = n.clamp(1, MAX_RESULTS);
        let base = config
            .base()
            .ok_or_else(|| ProviderError::NotConfigured(config.why()))?;
        let url = http::endpoint(base, provider.path())?;
        let call = http::Call {
            client,
            url,
            key: config.key.as_ref(),
            key_env: config.key_env.as_deref().unwrap_or(""),
            query,
            n,
            timeout,
            keyless_refusal_hint: match provider {
                Provider::Searxng => {
                    ": is json in the instance's search.formats (settings.yml), and may this host use it?"
                }
                _ => "",
            },
        };
        let mut results = match provider {
            Provider::Searxng => searxng::search(&call).await,
            Provider::Brave => brave::search(&call).await,
            Provider::Tavily => tavily::search(&call).await,
            Provider::Serper => serper::search(&call).await,
            Provider::Jina => jina::search(&call).await,
            Provider::Bocha => bocha::search(&call).await,
            Provider::Zhipu => zhipu::search(&call).await,
            Provider::DuckDuckGo => duckduckgo::search(&call).await,
        }?;
        // Only links a reader can follow, each once (one number per page).
        let mut seen = std::collections::HashSet::new();
        results.retain(|r| text::is_web_url(&r.url) && seen.insert(r.url.clone()));
        results.truncate(n);
        Ok(results)
    }
}
