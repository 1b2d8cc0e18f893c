//! The fetcher behind `web_fetch`: one GET of a model-chosen URL, every hop vetted.
//!
//! - The first URL and every redirect target pass [`EgressGuard::vet`] (scheme, userinfo,
//!   literal IP hosts: reqwest does not resolve those, so the resolver below never sees them).
//! - Names resolve through [`PinnedResolver`]: every address a name resolves to is checked and
//!   the name is refused if any one is not public (a name that resolves to a public and a
//!   private address is refused, not quietly narrowed). reqwest connects to exactly the
//!   addresses it returns; there is no second lookup to race.
//! - No proxy (a proxy would do the resolving), no automatic redirects (each is followed by
//!   hand, up to [`FetchLimits::max_redirects`]), a body cap read as a stream, and one deadline
//!   for the whole fetch.

use std::error::Error as StdError;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::lazy::LazyClient;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION, USER_AGENT};
use reqwest::{StatusCode, redirect};
pub use url::Url;

use crate::egress::{EgressGuard, NotPublic, UrlRefused, shorten};

/// The bounds of one fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchLimits {
    /// The most body bytes read; a longer body is refused ([`FetchError::TooLarge`]).
    pub max_bytes: u64,
    /// The whole fetch, every hop and the body included.
    pub timeout: Duration,
    /// The most redirects followed.
    pub max_redirects: usize,
}

impl Default for FetchLimits {
    fn default() -> Self {
        FetchLimits {
            max_bytes: 4 * 1024 * 1024,
            timeout: Duration::from_secs(15),
            max_redirects: 5,
        }
    }
}

/// What a fetched body is, as far as `web_fetch` reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageKind {
    Html,
    Pdf,
    Text,
    Markdown,
}

impl PageKind {
    /// The kind of a declared media type (`text/html; charset=utf-8` → HTML), if it is a page.
    pub fn of_media_type(content_type: &str) -> Option<PageKind> {
        match media_type(content_type).as_str() {
            "text/html" | "application/xhtml+xml" => Some(PageKind::Html),
            "application/pdf" | "application/x-pdf" => Some(PageKind::Pdf),
            "text/plain" => Some(PageKind::Text),
            "text/markdown" | "text/x-markdown" => Some(PageKind::Markdown),
            _ => None,
        }
    }

    /// The name a document extractor recognises the kind by (`page.html`, `page.pdf`, …).
    pub fn file_name(self) -> &'static str {
        match self {
            PageKind::Html => "page.html",
            PageKind::Pdf => "page.pdf",
            PageKind::Text => "page.txt",
            PageKind::Markdown => "page.md",
        }
    }

    /// Its usual media type.
    pub fn media_type(self) -> &'static str {
        match self {
            PageKind::Html => "text/html",
            PageKind::Pdf => "application/pdf",
            PageKind::Text => "text/plain",
            PageKind::Markdown => "text/markdown",
        }
    }
}

/// `Text/HTML; charset=utf-8` → `text/html`.
fn media_type(content_type: &str) -> String {
    let essence = content_type.split(';').next().unwrap_or_default();
    essence.trim().to_ascii_lowercase()
}

/// One fetched page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The URL that answered with the body (the first one unless redirected).
    pub final_url: Url,
    /// The URLs that answered with a redirect, in order (empty: not redirected).
    pub hops: Vec<Url>,
    /// The media type, without parameters (`text/html`), as declared or, when the server
    /// declared none (or `application/octet-stream`), as recognised from the body.
    pub content_type: String,
    pub kind: PageKind,
    pub body: Bytes,
}

/// Why a fetch failed. Each reads as a sentence naming the URL (or host) and the reason.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(transparent)]
    Refused(#[from] UrlRefused),
    #[error("{from} redirected to a refused address: {reason}")]
    RedirectRefused { from: String, reason: UrlRefused },
    #[error("{from} redirected to '{location}', which is not a URL ({reason})")]
    BadLocation {
        from: String,
        location: String,
        reason: String,
    },
    #[error("{url} answered {status} without saying where to (no Location header)")]
    NoLocation { url: String, status: u16 },
    #[error("{url} redirected more than {limit} times; web_fetch stops there")]
    TooManyRedirects { url: String, limit: usize },
    #[error("{url} is refused: {host} resolves to {}, which is not a public address — {reason}", .reason.ip())]
    HostRefused {
        url: String,
        host: String,
        reason: NotPublic,
    },
    #[error("{url}: cannot resolve {host} ({reason})")]
    Unresolvable {
        url: String,
        host: String,
        reason: String,
    },
    #[error("{url}: cannot reach {host} ({reason})")]
    Connect {
        url: String,
        host: String,
        reason: String,
    },
    #[error("{url}: the request failed ({reason})")]
    Request { url: String, reason: String },
    #[error("{url} answered {status}")]
    Status { url: String, status: u16 },
    #[error("{url}: {content_type} is not a page: web_fetch reads HTML, text and PDF")]
    NotAPage { url: String, content_type: String },
    #[error("{url} is larger than {}; web_fetch stops reading there", human_size(*.limit))]
    TooLarge { url: String, limit: u64 },
    #[error("{url}: no complete answer within {} s", .timeout.as_secs_f64())]
    Timeout { url: String, timeout: Duration },
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

impl FetchError {
    /// The refusals of the egress guard (as opposed to a page that failed to arrive).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            FetchError::Refused(_)
                | FetchError::RedirectRefused { .. }
                | FetchError::HostRefused { .. }
                | FetchError::TooManyRedirects { .. }
        )
    }
}

/// A resolver that lets a name through only if every address it resolves to passes the guard,
/// and then hands reqwest exactly those addresses.
#[derive(Debug, Clone, Copy)]
pub struct PinnedResolver {
    guard: EgressGuard,
}

impl PinnedResolver {
    pub fn new(guard: EgressGuard) -> PinnedResolver {
        PinnedResolver { guard }
    }

    /// The addresses of `host` (port 0: the scheme's), if every one is allowed.
    pub async fn resolve_host(&self, host: &str) -> Result<Vec<SocketAddr>, ResolveFailure> {
        let lookup = tokio::net::lookup_host((host, 0)).await;
        let addrs: Vec<SocketAddr> = lookup
            .map_err(|e| ResolveFailure::Lookup {
                host: host.to_owned(),
                reason: e.to_string(),
            })?
            .collect();
        if addrs.is_empty() {
            return Err(ResolveFailure::Lookup {
                host: host.to_owned(),
                reason: "no addresses".into(),
            });
        }
        self.check_all(host, &addrs)?;
        Ok(addrs)
    }

    /// Whether every address `host` resolved to is allowed: one that is not refuses the
    /// name (none is dropped to let the rest through).
    pub fn check_all(&self, host: &str, addrs: &[SocketAddr]) -> Result<(), ResolveFailure> {
        for addr in addrs {
            self.guard
                .check_ip(addr.ip())
                .map_err(|reason| ResolveFailure::NotPublic {
                    host: host.to_owned(),
                    reason,
                })?;
        }
        Ok(())
    }
}

impl Resolve for PinnedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let resolver = *self;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs = resolver.resolve_host(&host).await?;
            let addrs: Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// Why [`PinnedResolver`] gave no addresses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveFailure {
    #[error("{host} resolves to {}, which is not a public address — {reason}", .reason.ip())]
    NotPublic { host: String, reason: NotPublic },
    #[error("cannot resolve {host}: {reason}")]
    Lookup { host: String, reason: String },
}

/// What `web_fetch` asks for, best first.
const ACCEPTED: &str = "text/html, application/xhtml+xml, text/markdown, text/plain;q=0.9, application/pdf;q=0.9, */*;q=0.1";

const AGENT: &str = concat!("deepsolve-web-fetch/", env!("CARGO_PKG_VERSION"));

/// Fetches pages through the guard. Cheap to clone (the client is shared).
#[derive(Debug, Clone)]
pub struct Fetcher {
    guard: EgressGuard,
    limits: FetchLimits,
    client: LazyClient,
}

impl Fetcher {
    pub fn new(guard: EgressGuard, limits: FetchLimits) -> Fetcher {
        Fetcher {
            guard,
            limits,
            client: LazyClient::default(),
        }
    }

    /// The client, made on first use.
    fn client(&self) -> Result<&reqwest::Client, FetchError> {
        self.client
            .get(|| {
                reqwest::Client::builder()
                    .no_proxy()
                    .redirect(redirect::Policy::none())
                    .dns_resolver(Arc::new(PinnedResolver::new(self.guard)))
                    .timeout(self.limits.timeout)
                    .connect_timeout(self.limits.timeout)
                    .build()
            })
            .map_err(FetchError::Client)
    }

    pub fn limits(&self) -> FetchLimits {
        self.limits
    }

    pub fn guard(&self) -> EgressGuard {
        self.guard
    }

    /// GET `input`, following redirects, within the limits.
    pub async fn fetch(&self, input: &str) -> Result<Fetched, FetchError> {
        let first = self.guard.vet_url(input)?;
        let timeout = self.limits.timeout;
        match tokio::time::timeout(timeout, self.follow(first.clone())).await {
            Ok(done) => done,
            Err(_) => Err(FetchError::Timeout {
                url: first.into(),
                timeout,
            }),
        }
    }

    /// Request `current`; on a redirect vet the target and go on, else read the page.
    async fn follow(&self, first: Url) -> Result<Fetched, FetchError> {
        let mut current = first.clone();
        let mut hops = Vec::new();
        loop {
            let response = (self.client()?.get(current.clone()))
                .header(ACCEPT, ACCEPTED)
                .header(USER_AGENT, AGENT)
                .send()
                .await
                .map_err(|e| request_error(&current, &e, self.limits.timeout))?;
            let status = response.status();
            if is_followed_redirect(status) {
                let next = self.next_hop(&current, &response)?;
                hops.push(current);
                if hops.len() > self.limits.max_redirects {
                    return Err(FetchError::TooManyRedirects {
                        url: first.into(),
                        limit: self.limits.max_redirects,
                    });
                }
                current = next;
                continue;
            }
            if !status.is_success() {
                return Err(FetchError::Status {
                    url: current.into(),
                    status: status.as_u16(),
                });
            }
            return self.read_page(current, hops, response).await;
        }
    }

    /// Where a redirect points, resolved against the URL that sent it and vetted.
    fn next_hop(&self, current: &Url, response: &reqwest::Response) -> Result<Url, FetchError> {
        let location = response
            .headers()
            .get(LOCATION)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .ok_or_else(|| FetchError::NoLocation {
                url: current.to_string(),
                status: response.status().as_u16(),
            })?;
        let next = current
            .join(location.trim())
            .map_err(|e| FetchError::BadLocation {
                from: current.to_string(),
                location: shorten(&location, 200),
                reason: e.to_string(),
            })?;
        self.guard
            .vet(&next)
            .map_err(|reason| FetchError::RedirectRefused {
                from: current.to_string(),
                reason,
            })?;
        Ok(next)
    }

    /// The body of a final answer, if it is a page and within the cap.
    async fn read_page(
        &self,
        url: Url,
        hops: Vec<Url>,
        response: reqwest::Response,
    ) -> Result<Fetched, FetchError> {
        let declared = (response.headers().get(CONTENT_TYPE))
            .map(|v| media_type(&String::from_utf8_lossy(v.as_bytes())))
            .filter(|t| !t.is_empty());
        let known = declared.as_deref().and_then(PageKind::of_media_type);
        let sniffable = matches!(declared.as_deref(), None | Some("application/octet-stream"));
        if known.is_none() && !sniffable {
            return Err(FetchError::NotAPage {
                url: url.into(),
                content_type: declared.unwrap_or_default(),
            });
        }
        let body = self.read_capped(&url, response).await?;
        let (kind, content_type) = match (known, declared) {
            (Some(kind), Some(declared)) => (kind, declared),
            (_, declared) => match sniff(&body, declared.is_none()) {
                Some(kind) => (kind, kind.media_type().to_owned()),
                None => {
                    return Err(FetchError::NotAPage {
                        url: url.into(),
                        content_type: declared.unwrap_or_else(|| "an undeclared type".into()),
                    });
                }
            },
        };
        Ok(Fetched {
            final_url: url,
            hops,
            content_type,
            kind,
            body,
        })
    }

    /// The body, read as a stream and given up on as soon as it passes the cap.
    async fn read_capped(
        &self,
        url: &Url,
        mut response: reqwest::Response,
    ) -> Result<Bytes, FetchError> {
        let limit = self.limits.max_bytes;
        let too_large = || FetchError::TooLarge {
            url: url.to_string(),
            limit,
        };
        if response.content_length().is_some_and(|n| n > limit) {
            return Err(too_large());
        }
        let mut body = BytesMut::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| request_error(url, &e, self.limits.timeout))?
        {
            if (body.len() + chunk.len()) as u64 > limit {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body.freeze())
    }
}

/// The redirects followed by hand (all of them GET again: `web_fetch` only reads).
fn is_followed_redirect(status: StatusCode) -> bool {
    matches!(
        status,
        StatusCode::MOVED_PERMANENTLY
            | StatusCode::FOUND
            | StatusCode::SEE_OTHER
            | StatusCode::TEMPORARY_REDIRECT
            | StatusCode::PERMANENT_REDIRECT
    )
}

/// A body whose server did not say what it is: a PDF by its signature; without any declared
/// type, also HTML (it opens with markup) or UTF-8 text.
fn sniff(body: &[u8], undeclared: bool) -> Option<PageKind> {
    if body.starts_with(b"%PDF-") {
        return Some(PageKind::Pdf);
    }
    if !undeclared {
        return None;
    }
    let text = std::str::from_utf8(body).ok()?;
    if text.trim_start().starts_with('<') {
        Some(PageKind::Html)
    } else {
        Some(PageKind::Text)
    }
}

/// A reqwest error as the fetch error it stands for: the resolver's refusal found in its
/// sources, else a timeout, a connection failure or another failed request.
fn request_error(url: &Url, error: &reqwest::Error, timeout: Duration) -> FetchError {
    let host = url.host_str().unwrap_or_default().to_owned();
    if let Some(failure) = find_source::<ResolveFailure>(error) {
        return match failure {
            ResolveFailure::NotPublic { host, reason } => FetchError::HostRefused {
                url: url.to_string(),
                host: host.clone(),
                reason: reason.clone(),
            },
            ResolveFailure::Lookup { host, reason } => FetchError::Unresolvable {
                url: url.to_string(),
                host: host.clone(),
                reason: reason.clone(),
            },
        };
    }
    if error.is_timeout() {
        return FetchError::Timeout {
            url: url.to_string(),
            timeout,
        };
    }
    let reason = shorten(&error_chain(error), 200);
    if error.is_connect() {
        FetchError::Connect {
            url: url.to_string(),
            host,
            reason,
        }
    } else {
        FetchError::Request {
            url: url.to_string(),
            reason,
        }
    }
}

/// The first error of type `T` in `error`'s chain of sources.
fn find_source<'a, T: StdError + 'static>(error: &'a (dyn StdError + 'static)) -> Option<&'a T> {
    let mut next: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(e) = next {
        if let Some(found) = e.downcast_ref::<T>() {
            return Some(found);
        }
        next = e.source();
    }
    None
}

/// The innermost cause of an error: reqwest's own message ("error sending request for url")
/// says less than what it wraps ("Connection refused").
pub(crate) fn error_chain(error: &(dyn StdError + 'static)) -> String {
    let mut innermost = error;
    while let Some(source) = innermost.source() {
        innermost = source;
    }
    innermost.to_string()
}

/// `4 MiB`, `1000 bytes`.
fn human_size(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}
