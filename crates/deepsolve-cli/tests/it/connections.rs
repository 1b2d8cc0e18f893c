//! The connection policy of `deepsolve serve`, through the real binary and raw sockets: slow
//! request heads, slow bodies, idle kept-alive connections, clients that stop reading and
//! connections beyond the cap are cut at their limits, while `/healthz` stays fast and a
//! live SSE stream is not cut. Every limit comes from the `server` section of a settings file
//! passed with `--config`, so the settings path is what is tested.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use deepsolve_testkit::{FnPolicy, MockServer, Policy, PolicyRequest, Reply, WellBehaved};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::support::{Isolated, listening_url};

/// The `server` limits a test runs with, in seconds.
#[derive(Clone, Copy)]
struct Limits {
    header: u64,
    body: u64,
    idle: u64,
    max_connections: u64,
}

/// The limits scaled down so each test takes seconds.
const SCALED: Limits = Limits {
    header: 1,
    body: 2,
    idle: 2,
    max_connections: 4096,
};

struct Server {
    child: Child,
    addr: SocketAddr,
    home: Isolated,
    settings: PathBuf,
}

impl Server {
    /// `deepsolve serve --config FILE`, where the file holds the model, the `server` section
    /// (address, database, `limits`, then `extra` lines) and nothing else.
    fn start(limits: Limits, model_url: &str, extra: &str) -> Server {
        let home = Isolated::new();
        let settings = home.path().join("server.yaml");
        let yaml = format!(
            "llm:\n  base_url: {model_url}\n  model: mock-model\nserver:\n  addr: 127.0.0.1:0\n  \
             database: sqlite://{db}\n  header_timeout_s: {header}\n  body_timeout_s: {body}\n  \
             idle_timeout_s: {idle}\n  max_connections: {max}\n{extra}",
            db = home.path().join("conn.db").display(),
            header = limits.header,
            body = limits.body,
            idle = limits.idle,
            max = limits.max_connections,
        );
        std::fs::write(&settings, yaml).expect("settings file");
        let log_path = home.path().join("serve.log");
        let log = std::fs::File::create(&log_path).expect("log file");
        let mut child = home
            .std_command()
            .arg("serve")
            .arg("--config")
            .arg(&settings)
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("spawn deepsolve serve");
        let url = listening_url(&mut child, &log_path);
        let addr = url
            .strip_prefix("http://")
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("not an http address: {url}"));
        Server {
            child,
            addr,
            home,
            settings,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn connect(addr: SocketAddr) -> TcpStream {
    TcpStream::connect(addr).await.expect("connect")
}

/// One response: its status and body (by `content-length`; the tests' responses have one).
async fn read_response(stream: &mut (impl AsyncRead + Unpin)) -> (u16, String) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        let n = stream.read(&mut chunk).await.expect("read a response");
        assert!(
            n > 0,
            "closed before a response: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status code");
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("content-length");
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).await.expect("read a body");
        assert!(n > 0, "closed inside a body");
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8_lossy(&buf[head_end..head_end + length]).into_owned();
    (status, body)
}

/// `GET path` on a kept-alive connection.
async fn get(stream: &mut TcpStream, path: &str) -> (u16, String) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: deepsolve\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    read_response(stream).await
}

/// Read (and drop) whatever comes until the server closes the connection: the bytes read, or
/// `None` if it is still open after `limit`.
async fn bytes_until_closed(
    stream: &mut (impl AsyncRead + Unpin),
    limit: Duration,
) -> Option<usize> {
    let drain = async {
        let mut total = 0;
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return total,
                Ok(n) => total += n,
            }
        }
    };
    tokio::time::timeout(limit, drain).await.ok()
}

/// Send a request head one byte every 300 ms on `stream`, never finishing it, until the
/// server closes the connection; how long that took from `since`.
async fn trickle_head(stream: TcpStream, since: Instant) -> Duration {
    let (mut reader, mut writer) = stream.into_split();
    let head = b"GET /healthz HTTP/1.1\r\nHost: deepsolve\r\nX-Slow: ";
    let trickle = async {
        for byte in head.iter().chain(std::iter::repeat(&b'a')) {
            if writer.write_all(&[*byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    };
    tokio::select! {
        closed = bytes_until_closed(&mut reader, Duration::from_secs(20)) => {
            assert!(closed.is_some(), "a trickling head is still open after 20 s");
        }
        () = trickle => {}
    }
    since.elapsed()
}

/// Hold `lived` to at least `limit` (the server never closes early) and at most a generous
/// bound past it (a loaded machine is slow, not 6 s slow).
fn assert_closed_at(what: &str, lived: Duration, limit: u64) {
    let limit = Duration::from_secs(limit);
    assert!(
        lived >= limit && lived < limit + Duration::from_secs(6),
        "{what}: closed after {lived:?}, the limit is {limit:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_heads_are_cut_at_the_header_timeout_while_healthz_stays_fast() {
    let mock = MockServer::policy(WellBehaved::new(1));
    let server = Server::start(SCALED, &mock.url(), "");
    let addr = server.addr;
    let slow: Vec<_> = (0..50)
        .map(|_| {
            tokio::spawn(async move {
                let since = Instant::now();
                trickle_head(connect(addr).await, since).await
            })
        })
        .collect();
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        let asked = Instant::now();
        let mut fresh = connect(addr).await;
        assert_eq!(get(&mut fresh, "/healthz").await.0, 200);
        slowest = slowest.max(asked.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("slowest /healthz beside 50 trickling heads: {slowest:?}");
    assert!(
        slowest < Duration::from_secs(2),
        "/healthz took {slowest:?} beside slow heads"
    );
    for task in slow {
        let lived = task.await.expect("trickle task");
        assert_closed_at("a trickling head", lived, SCALED.header);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_sent_at_one_byte_a_second_gets_408_at_the_body_timeout() {
    let mock = MockServer::policy(WellBehaved::new(1));
    let server = Server::start(SCALED, &mock.url(), "");
    let body = br#"{"problem": "a very slow upload"}"#;
    let head = format!(
        "POST /api/v1/turns HTTP/1.1\r\nHost: deepsolve\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    let (mut reader, mut writer) = connect(server.addr).await.into_split();
    let since = Instant::now();
    writer.write_all(head.as_bytes()).await.expect("head");
    let trickle = async {
        for byte in body {
            if writer.write_all(&[*byte]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        std::future::pending::<()>().await
    };
    let (status, answer) = tokio::select! {
        response = read_response(&mut reader) => response,
        () = trickle => unreachable!("the trickle never ends by itself"),
    };
    assert_closed_at("a slow body", since.elapsed(), SCALED.body);
    assert_eq!(status, 408, "{answer}");
    let answer: Value = serde_json::from_str(&answer).expect("JSON error");
    assert_eq!(answer["error"]["code"], "request_timeout", "{answer}");
    assert!(
        bytes_until_closed(&mut reader, Duration::from_secs(5))
            .await
            .is_some(),
        "the connection is closed after the 408"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_kept_alive_connection_is_closed_at_the_idle_timeout() {
    let mock = MockServer::policy(WellBehaved::new(1));
    let server = Server::start(SCALED, &mock.url(), "");
    let mut stream = connect(server.addr).await;
    assert_eq!(get(&mut stream, "/healthz").await.0, 200);
    // Past the header timeout, within the idle one: a waiting connection is not a slow head.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let asked = Instant::now();
    assert_eq!(get(&mut stream, "/healthz").await.0, 200);
    let read = bytes_until_closed(&mut stream, Duration::from_secs(20)).await;
    assert_eq!(read, Some(0), "closed without sending anything more");
    assert_closed_at("an idle connection", asked.elapsed(), SCALED.idle);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_request_on_a_kept_alive_connection_has_the_header_timeout() {
    let mock = MockServer::policy(WellBehaved::new(1));
    let limits = Limits { idle: 60, ..SCALED };
    let server = Server::start(limits, &mock.url(), "");
    let mut stream = connect(server.addr).await;
    assert_eq!(get(&mut stream, "/healthz").await.0, 200);
    let lived = trickle_head(stream, Instant::now()).await;
    assert_closed_at("a trickling second head", lived, limits.header);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_pipelined_responses_is_cut_at_the_idle_timeout() {
    let mock = MockServer::policy(WellBehaved::new(1));
    let server = Server::start(SCALED, &mock.url(), "");
    let one_response = {
        let mut stream = connect(server.addr).await;
        get(&mut stream, "/openapi.json").await.1.len()
    };
    // A tiny receive window, and more pipelined responses than any socket buffers hold.
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
    let mut stream = socket.connect(server.addr).await.expect("connect");
    let requests = 1000;
    let pipelined = "GET /openapi.json HTTP/1.1\r\nHost: deepsolve\r\n\r\n".repeat(requests);
    stream.write_all(pipelined.as_bytes()).await.expect("send");
    // Read nothing. The server writes until its socket buffer is full (how long that takes
    // depends on the machine's load), then its idle clock runs; it closes with requests
    // unread, which reaches this socket as a reset that needs no reading to be seen.
    let since = Instant::now();
    loop {
        if let Some(error) = stream.take_error().expect("SO_ERROR") {
            eprintln!(
                "a stalled reader was cut after {:?}: {error}",
                since.elapsed()
            );
            break;
        }
        assert!(
            since.elapsed() < Duration::from_secs(60),
            "the server still holds a connection whose client stopped reading"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let read = bytes_until_closed(&mut stream, Duration::from_secs(60))
        .await
        .expect("closed");
    let all = requests * one_response;
    assert!(read < all / 2, "got {read} of {all} bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_max_connections_a_connection_is_refused_while_the_open_ones_still_work() {
    let mock = MockServer::policy(WellBehaved::new(1));
    let limits = Limits {
        header: 10,
        body: 10,
        idle: 60,
        max_connections: 3,
    };
    let server = Server::start(limits, &mock.url(), "");
    let mut open = Vec::new();
    for _ in 0..3 {
        let mut stream = connect(server.addr).await;
        assert_eq!(get(&mut stream, "/healthz").await.0, 200);
        open.push(stream);
    }
    let mut fourth = connect(server.addr).await;
    let mut refusal = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), fourth.read_to_end(&mut refusal))
        .await
        .expect("the fourth connection is closed at once");
    if read.is_ok() && !refusal.is_empty() {
        let refusal = String::from_utf8_lossy(&refusal);
        assert!(refusal.starts_with("HTTP/1.1 503"), "{refusal}");
        assert!(refusal.contains(r#""code":"busy""#), "{refusal}");
    }
    for stream in &mut open {
        assert_eq!(
            get(stream, "/healthz").await.0,
            200,
            "an open one still works"
        );
    }
    // A closed connection frees its slot (the server sees the close a moment later).
    drop(open.pop());
    let mut served = false;
    for _ in 0..50 {
        let mut stream = connect(server.addr).await;
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: deepsolve\r\n\r\n")
            .await
            .expect("send");
        let mut first = [0u8; 12];
        if stream.read_exact(&mut first).await.is_ok() && first.starts_with(b"HTTP/1.1 200") {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served, "a slot freed by a closed connection is used again");
}

fn slow(delay: Duration, inner: WellBehaved) -> impl Policy {
    FnPolicy(move |req: &PolicyRequest| Reply::delayed(delay, inner.reply(req)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_sse_stream_outlasting_the_idle_timeout_is_not_cut() {
    // Every model reply takes longer than the idle timeout: the stream has silent gaps
    // longer than it.
    let mock = MockServer::policy(slow(Duration::from_millis(1500), WellBehaved::new(2)));
    let limits = Limits { idle: 1, ..SCALED };
    let server = Server::start(limits, &mock.url(), "");
    // Fresh connections: a pooled one may be closed by the idle timeout as it is reused.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("client");
    let created: Value = http
        .post(server.url("/api/v1/turns"))
        .json(&json!({"problem": "Solve x^2 - 5x + 6 = 0"}))
        .send()
        .await
        .expect("post")
        .json()
        .await
        .expect("json");
    let turn = created["turn_id"].as_str().expect("turn id");
    let started = Instant::now();
    let events = http
        .get(server.url(&format!("/api/v1/turns/{turn}/events")))
        .send()
        .await
        .expect("sse");
    assert_eq!(events.status().as_u16(), 200);
    let mut stream = events.bytes_stream();
    let mut text = String::new();
    let last = loop {
        let chunk = tokio::time::timeout(Duration::from_secs(60), stream.next())
            .await
            .expect("events keep coming")
            .expect("the stream ended before turn_finished")
            .expect("a chunk, not a cut connection");
        text.push_str(&String::from_utf8_lossy(&chunk));
        let finished = text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
            .find(|event| event["type"] == "turn_finished");
        if let Some(event) = finished {
            break event;
        }
    };
    let lasted = started.elapsed();
    assert_eq!(last["stop_reason"], "answered", "{last}");
    assert!(
        lasted > Duration::from_secs(3 * limits.idle),
        "the stream lasted {lasted:?}: too short to test the idle timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_section_sets_address_database_instance_and_cors_and_flags_win() {
    let mock = MockServer::policy(WellBehaved::new(1));
    let extra = "  instance_id: from-the-file\n  cors_origins: [\"https://App.example\"]\n";
    let server = Server::start(SCALED, &mock.url(), extra);
    assert_ne!(server.addr.port(), 8080, "server.addr (port 0) was used");
    assert!(
        server.home.path().join("conn.db").exists(),
        "server.database was used"
    );
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("client");
    let health = http
        .get(server.url("/healthz"))
        .header("Origin", "https://app.example")
        .send()
        .await
        .expect("healthz");
    assert_eq!(
        health.headers()["access-control-allow-origin"],
        "https://app.example"
    );
    let health: Value = health.json().await.expect("json");
    assert_eq!(health["instance"], "from-the-file");
    let other = http
        .get(server.url("/healthz"))
        .header("Origin", "https://other.example")
        .send()
        .await
        .expect("healthz");
    assert!(other.headers().get("access-control-allow-origin").is_none());
    let preflight = http
        .request(reqwest::Method::OPTIONS, server.url("/api/v1/turns"))
        .header("Origin", "https://app.example")
        .header("Access-Control-Request-Method", "POST")
        .header(
            "Access-Control-Request-Headers",
            "authorization, content-type",
        )
        .send()
        .await
        .expect("preflight");
    assert!(preflight.status().is_success(), "{}", preflight.status());
    let allowed = preflight.headers()["access-control-allow-headers"]
        .to_str()
        .expect("ascii");
    assert!(allowed.contains("authorization"), "{allowed}");

    // `users` reads server.database too, and --database wins over it.
    let users = |args: &[&str]| {
        let out = server
            .home
            .command()
            .arg("users")
            .args(args)
            .arg("--config")
            .arg(&server.settings)
            .output()
            .expect("users");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    users(&["add", "alice"]);
    assert_eq!(users(&["list"]), "alice\tuser\n");
    let elsewhere = format!(
        "sqlite://{}",
        server.home.path().join("elsewhere.db").display()
    );
    assert_eq!(users(&["list", "--database", &elsewhere]), "");
}

#[test]
fn a_bad_cors_origin_or_address_in_the_server_section_stops_serve_with_its_key() {
    let home = Isolated::new();
    for (section, key) in [
        ("server:\n  cors_origins: [\"*\"]\n", "server.cors_origins"),
        ("server:\n  addr: localhost\n", "server.addr"),
    ] {
        let settings = home.path().join("bad.yaml");
        std::fs::write(&settings, section).expect("settings");
        let out = home
            .command()
            .arg("serve")
            .arg("--config")
            .arg(&settings)
            .output()
            .expect("serve");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{section}: {stderr}");
        assert!(stderr.contains(key), "{section}: {stderr}");
    }
}
