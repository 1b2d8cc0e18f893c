//! `deepsolve-webfixture`: a small web for the web tools' end-to-end test — a Brave-shaped
//! search API and the pages its results point to — served on the addresses given (in the test,
//! public addresses on the loopback of a private network namespace, so the real binary's
//! egress guard lets them through). Every request is written to `--log` as JSON lines.
//!
//! ```text
//! deepsolve-webfixture --addr 93.184.216.34:80 --addr 151.101.2.1:80 --key brave-key --log requests.jsonl
//! ```
//!
//! The search's results, in order: `[1]` a page on the first address that redirects to the
//! cloud metadata address (refused by the guard), `[2]` a page on the first address that
//! redirects to the article on the second.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use axum::extract::Query;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use clap::Parser;
use serde_json::json;

use deepsolve_testkit::web::FixtureServer;

#[derive(Debug, Parser)]
#[command(
    name = "deepsolve-webfixture",
    about = "A small web for end-to-end tests"
)]
struct Args {
    /// An address to serve on (twice: the search and redirects, then the article).
    #[arg(long, required = true, num_args = 1)]
    addr: Vec<SocketAddr>,
    /// The search API's key (`X-Subscription-Token`); other keys get a 401.
    #[arg(long)]
    key: String,
    /// Where every request goes, one JSON object per line.
    #[arg(long)]
    log: PathBuf,
}

/// The article the search leads to: boilerplate around the content readability keeps.
const ARTICLE: &str = r#"<!doctype html>
<html><head><title>The squeeze theorem</title></head>
<body>
<nav><a href="/">Home</a> · <a href="/about">About</a> · Menu item</nav>
<article>
<h1>The squeeze theorem</h1>
<p>If a sequence lies between two sequences that converge to the same limit, it converges to that limit too.</p>
<p>For example, sin(n)/n lies between -1/n and 1/n, both of which tend to 0, so sin(n)/n tends to 0.</p>
<p>The theorem is also called the sandwich theorem, and it is a standard tool for limits that cannot be computed directly.</p>
</article>
<footer>Copyright, cookie banner and other chrome.</footer>
</body></html>"#;

/// The first address: the search API, whose results point back to this host (as the request
/// named it), and two redirects.
fn search_site(key: String, article: SocketAddr) -> Router {
    Router::new()
        .route(
            "/res/v1/web/search",
            get(
                move |headers: HeaderMap, query: Query<Vec<(String, String)>>| {
                    let key = key.clone();
                    async move { search(&key, &headers, &query) }
                },
            ),
        )
        .route(
            "/trap",
            get(|| async { redirect("http://169.254.169.254/latest/meta-data/") }),
        )
        .route(
            "/moved",
            get(move || async move { redirect(&format!("http://{}/squeeze", authority(article))) }),
        )
}

/// The second address: the article.
fn article_site() -> Router {
    Router::new().route("/squeeze", get(|| async { Html(ARTICLE) }))
}

/// `host` or `host:port` as a URL writes it (port 80 left out).
fn authority(addr: SocketAddr) -> String {
    if addr.port() == 80 {
        addr.ip().to_string()
    } else {
        addr.to_string()
    }
}

fn search(key: &str, headers: &HeaderMap, query: &[(String, String)]) -> Response {
    let sent = headers
        .get("x-subscription-token")
        .and_then(|v| v.to_str().ok());
    if sent != Some(key) {
        return (StatusCode::UNAUTHORIZED, "invalid subscription token").into_response();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("localhost");
    let q = query
        .iter()
        .find(|(k, _)| k == "q")
        .map(|(_, v)| v.as_str())
        .unwrap_or_default();
    axum::Json(json!({
        "query": {"original": q},
        "web": {"results": [
            {"title": "Squeeze theorem (mirror)", "url": format!("http://{host}/trap"),
             "description": "A copy of the article on squeezing sequences."},
            {"title": "The squeeze theorem", "url": format!("http://{host}/moved"),
             "description": "If a sequence lies between two sequences with the same limit…"}
        ]}
    }))
    .into_response()
}

fn redirect(to: &str) -> Response {
    (StatusCode::FOUND, [(header::LOCATION, to.to_string())]).into_response()
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let (Some(&first), Some(&second)) = (args.addr.first(), args.addr.get(1)) else {
        eprintln!("give two addresses: --addr A --addr B");
        return std::process::ExitCode::from(2);
    };
    // The article first: the search site's redirect names its bound address.
    let article = match FixtureServer::start_on(second, article_site()) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("cannot serve on {second}: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    let search = match FixtureServer::start_on(first, search_site(args.key.clone(), article.addr()))
    {
        Ok(server) => server,
        Err(e) => {
            eprintln!("cannot serve on {first}: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    println!("serving on {} {}", search.url(), article.url());
    let servers = [search, article];
    // Until killed: the log is rewritten as requests arrive.
    let mut written = 0;
    loop {
        let requests: Vec<_> = servers.iter().flat_map(FixtureServer::requests).collect();
        if requests.len() != written {
            if let Err(e) = std::fs::write(&args.log, log_lines(&requests)) {
                eprintln!("cannot write {}: {e}", args.log.display());
                return std::process::ExitCode::from(1);
            }
            written = requests.len();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One JSON object per request: method, host, uri, headers.
fn log_lines(requests: &[deepsolve_testkit::web::Recorded]) -> String {
    requests
        .iter()
        .map(|r| {
            let headers: serde_json::Map<_, _> = (r.headers.iter())
                .map(|(n, v)| (n.clone(), json!(v)))
                .collect();
            let line =
                json!({"method": r.method, "host": r.host, "uri": r.uri, "headers": headers});
            format!("{line}\n")
        })
        .collect()
}
