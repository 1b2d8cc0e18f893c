//! The internet, for tests: a [`FixtureServer`] that serves an axum `Router` on an address of
//! the test's choosing (loopback by default) and records every request it receives, headers
//! included — so a test can prove which host saw which key. [`search`] holds each search
//! vendor's documented response shapes; [`pages`] the pages, PDFs, redirects and hostile
//! bodies `web_fetch` meets; [`downloads`] model files (ranges, cut bodies) and a package index.

pub mod downloads;
pub mod pages;
pub mod search;

use std::future::IntoFuture;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use tokio::sync::oneshot;

use crate::lock;

/// One request as the fixture received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub method: String,
    /// Path and query, as sent.
    pub uri: String,
    /// The `Host` header.
    pub host: String,
    /// Header names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    /// A header's value (name case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every header value, joined: what a "no key here" check searches.
    pub fn all_header_values(&self) -> String {
        self.headers
            .iter()
            .map(|(_, v)| v.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A router served on its own thread and runtime (so it serves plain `#[test]`s that spawn
/// the real binary as well as async tests), with a log of every request. Stopped on drop.
pub struct FixtureServer {
    addr: SocketAddr,
    log: Arc<Mutex<Vec<Recorded>>>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FixtureServer {
    /// Serves `router` on 127.0.0.1, on a free port.
    pub fn start(router: Router) -> io::Result<FixtureServer> {
        FixtureServer::start_on(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), router)
    }

    /// Serves `router` on `addr` (port 0: a free one).
    pub fn start_on(addr: SocketAddr, router: Router) -> io::Result<FixtureServer> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("deepsolve-fixture-worker")
            .enable_all()
            .build()?;
        let listener = {
            let _entered = runtime.enter();
            tokio::net::TcpListener::from_std(listener)?
        };
        let log = Arc::new(Mutex::new(Vec::new()));
        let recorder = log.clone();
        let app = router.layer(middleware::from_fn(move |request: Request, next: Next| {
            let log = recorder.clone();
            async move { record(log, request, next).await }
        }));
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("deepsolve-fixture".into())
            .spawn(move || {
                runtime.block_on(async move {
                    tokio::select! {
                        _ = axum::serve(listener, app).into_future() => {}
                        _ = stopped => {}
                    }
                });
                // Hard stop: a deliberately stalled response is dropped, not awaited.
                runtime.shutdown_timeout(Duration::from_millis(200));
            })?;
        Ok(FixtureServer {
            addr,
            log,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR` (no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.log).clone()
    }
}

impl Drop for FixtureServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The most of a request body the log keeps.
const BODY_LOG_LIMIT: usize = 64 * 1024;

async fn record(log: Arc<Mutex<Vec<Recorded>>>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, BODY_LOG_LIMIT)
        .await
        .unwrap_or_default();
    let headers = parts
        .headers
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_ascii_lowercase(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect::<Vec<_>>();
    lock(&log).push(Recorded {
        method: parts.method.to_string(),
        uri: parts.uri.to_string(),
        host: (parts.headers.get(axum::http::header::HOST))
            .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned())
            .unwrap_or_default(),
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    });
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}
