//! [`MockServer`]: an OpenAI-compatible endpoint on 127.0.0.1 for tests.
//!
//! It runs on its own thread with its own tokio runtime, so it serves plain `#[test]`
//! functions that spawn the real binary as well as async tests (whose runtime it never
//! touches). Every chat request is captured and checked against the request invariants;
//! problems are recorded as [`Violation`]s, never answered with a crash.

use std::future::IntoFuture;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use bytes::Bytes;
use futures::{Stream, StreamExt, stream};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::invariants::{InvariantConfig, check_request};
use crate::policy::{Policy, Script, Source};
use crate::reply::Reply;
use crate::request::PolicyRequest;
use crate::sse::{self, StreamMeta};
use crate::stamp::{stamp, unix_micros};
use crate::wire::WireError;
use crate::{Violation, lock, problems_report};

/// One chat request as it arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct CapturedRequest {
    /// Position in `requests()`.
    pub index: usize,
    pub path: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The JSON body (a JSON string holding the raw text if the body was not JSON).
    pub body: Value,
}

impl CapturedRequest {
    /// A header's value (name case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as a policy would see it.
    pub fn policy_request(&self) -> Result<PolicyRequest, WireError> {
        PolicyRequest::from_wire(&self.body)
    }

    /// The images of each message, in order (empty for a message without any), read from
    /// their `image_url` parts; an unreadable body has none.
    pub fn images(&self) -> Vec<Vec<deepsolve_core::TurnImage>> {
        crate::wire::messages_from_wire(&self.body)
            .map(|messages| messages.iter().map(|m| m.images.to_vec()).collect())
            .unwrap_or_default()
    }

    /// The request offered tools natively (a turn's request, not a tool-less probe or sub-call).
    pub fn offers_tools(&self) -> bool {
        self.body.get("tools").is_some()
    }
}

/// Why a mock server could not start.
#[derive(Debug, thiserror::Error)]
pub enum MockError {
    #[error("cannot bind the mock server on 127.0.0.1: {0}")]
    Bind(#[source] io::Error),
    #[error("cannot start the mock server's runtime: {0}")]
    Runtime(#[source] io::Error),
}

/// Options of a [`MockServer`].
#[derive(Debug, Clone)]
pub struct MockServerBuilder {
    port: u16,
    models: Vec<String>,
    invariants: InvariantConfig,
    log: bool,
    capture: bool,
    stream: StreamOptions,
    props: Option<Value>,
}

/// How streamed replies are timed and marked: for benchmarks (the default streams at once,
/// unmarked).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamOptions {
    /// Wait before the first delta of a streamed reply (time to first token).
    pub ttft: Duration,
    /// Wait between deltas (one delta stands for one token).
    pub per_delta: Duration,
    /// Prefix each non-empty text and reasoning delta with its emission time
    /// ([`crate::stamp`]).
    pub stamp: bool,
}

impl StreamOptions {
    fn paced(&self) -> bool {
        !self.ttft.is_zero() || !self.per_delta.is_zero()
    }
}

impl Default for MockServerBuilder {
    fn default() -> Self {
        MockServerBuilder {
            port: 0,
            models: vec!["mock-model".into()],
            invariants: InvariantConfig::default(),
            log: false,
            capture: true,
            stream: StreamOptions::default(),
            props: None,
        }
    }
}

impl MockServerBuilder {
    /// The port to bind (0, the default, picks a free one).
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// The ids `GET /v1/models` lists (default `["mock-model"]`).
    pub fn models<S: Into<String>>(mut self, models: Vec<S>) -> Self {
        self.models = models.into_iter().map(Into::into).collect();
        self
    }

    pub fn invariants(mut self, invariants: InvariantConfig) -> Self {
        self.invariants = invariants;
        self
    }

    /// Print one line per call (and each violation) to stderr: for manual demos.
    pub fn log_to_stderr(mut self, log: bool) -> Self {
        self.log = log;
        self
    }

    /// Keep every request and check it against the invariants (the default). Off, the mock
    /// only counts calls and its memory stays flat over any number of requests: for
    /// benchmarks, where `requests()` and `violations()` stay empty.
    pub fn capture(mut self, capture: bool) -> Self {
        self.capture = capture;
        self
    }

    /// Pace and stamp streamed replies (see [`StreamOptions`]).
    pub fn stream_options(mut self, stream: StreamOptions) -> Self {
        self.stream = stream;
        self
    }

    /// What `GET /props` answers, as llama.cpp's server does (e.g.
    /// `{"default_generation_settings": {"n_ctx": 4096}}`); without it, a 404. Either way
    /// the request is expected (the endpoint probe asks), never a violation.
    pub fn props(mut self, props: Value) -> Self {
        self.props = Some(props);
        self
    }

    /// Start in sequence mode: exactly these replies, in order.
    pub fn sequence(self, replies: Vec<Reply>) -> Result<MockServer, MockError> {
        MockServer::start(self, Source::Script(Script::new(replies)))
    }

    /// Start in policy mode.
    pub fn policy(self, policy: impl Policy + 'static) -> Result<MockServer, MockError> {
        MockServer::start(self, Source::Policy(Box::new(policy)))
    }
}

struct ServerState {
    source: Source,
    invariants: InvariantConfig,
    models: Vec<String>,
    log: bool,
    capture: bool,
    stream: StreamOptions,
    props: Option<Value>,
    /// Chat requests received; the index of the next one.
    calls: AtomicUsize,
    journal: Mutex<Journal>,
}

#[derive(Default)]
struct Journal {
    requests: Vec<CapturedRequest>,
    violations: Vec<Violation>,
}

/// A running mock endpoint; stops when dropped.
pub struct MockServer {
    addr: SocketAddr,
    state: Arc<ServerState>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for MockServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockServer")
            .field("addr", &self.addr)
            .field("calls", &self.call_count())
            .finish()
    }
}

impl MockServer {
    pub fn builder() -> MockServerBuilder {
        MockServerBuilder::default()
    }

    /// Sequence mode with default options.
    ///
    /// # Panics
    /// If no loopback port can be bound (a broken test machine, not a test failure mode).
    pub fn sequence(replies: Vec<Reply>) -> Self {
        Self::builder()
            .sequence(replies)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Policy mode with default options.
    ///
    /// # Panics
    /// If no loopback port can be bound.
    pub fn policy(policy: impl Policy + 'static) -> Self {
        Self::builder()
            .policy(policy)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn start(options: MockServerBuilder, source: Source) -> Result<Self, MockError> {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, options.port))
            .map_err(MockError::Bind)?;
        listener.set_nonblocking(true).map_err(MockError::Bind)?;
        let addr = listener.local_addr().map_err(MockError::Bind)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("deepsolve-mock-worker")
            .enable_all()
            .build()
            .map_err(MockError::Runtime)?;
        let listener = {
            let _entered = runtime.enter();
            tokio::net::TcpListener::from_std(listener).map_err(MockError::Bind)?
        };
        let state = Arc::new(ServerState {
            source,
            invariants: options.invariants,
            models: options.models,
            log: options.log,
            capture: options.capture,
            stream: options.stream,
            props: options.props,
            calls: AtomicUsize::new(0),
            journal: Mutex::new(Journal::default()),
        });
        let app = router(state.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("deepsolve-mock".into())
            .spawn(move || {
                runtime.block_on(async move {
                    // No Nagle: SSE frames are small writes, and delayed ACKs would add ~40 ms
                    // to every streamed reply.
                    let listener = listener.tap_io(|tcp| {
                        let _ = tcp.set_nodelay(true);
                    });
                    tokio::select! {
                        _ = axum::serve(listener, app).into_future() => {}
                        _ = stopped => {}
                    }
                });
                // Hard stop: in-flight delayed or stalled replies are dropped, not awaited.
                runtime.shutdown_timeout(Duration::from_millis(200));
            })
            .map_err(MockError::Runtime)?;
        Ok(MockServer {
            addr,
            state,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The base URL an OpenAI client takes: `http://127.0.0.1:PORT/v1`.
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every chat request received so far, in arrival order.
    pub fn requests(&self) -> Vec<CapturedRequest> {
        lock(&self.state.journal).requests.clone()
    }

    /// The chat requests as policies saw them (unreadable ones skipped).
    pub fn policy_requests(&self) -> Vec<PolicyRequest> {
        self.requests()
            .iter()
            .filter_map(|r| r.policy_request().ok())
            .collect()
    }

    /// Number of chat requests received.
    pub fn call_count(&self) -> usize {
        self.state.calls.load(Ordering::SeqCst)
    }

    pub fn violations(&self) -> Vec<Violation> {
        lock(&self.state.journal).violations.clone()
    }

    /// Every problem: violations, plus missing calls in sequence mode.
    pub fn verify(&self) -> Result<(), Vec<String>> {
        let mut problems: Vec<String> =
            self.violations().iter().map(Violation::to_string).collect();
        problems.extend(self.state.source.shortfall());
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// Panics listing every problem (see [`MockServer::verify`]).
    pub fn assert_clean(&self) {
        if let Err(problems) = self.verify()
            && let Some(report) = problems_report("mock server", &problems)
        {
            panic!("{report}");
        }
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn router(state: Arc<ServerState>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/models", get(models))
        // The endpoint probe looks for the context window here (llama.cpp, Ollama).
        .route("/props", get(props))
        .route("/api/show", post(not_here))
        .fallback(unexpected)
        .with_state(state)
}

async fn models(State(state): State<Arc<ServerState>>) -> Response {
    let data: Vec<Value> = state
        .models
        .iter()
        .map(|id| json!({"id": id, "object": "model", "created": 0, "owned_by": "deepsolve-testkit"}))
        .collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}

async fn props(State(state): State<Arc<ServerState>>) -> Response {
    match &state.props {
        Some(props) => axum::Json(props.clone()).into_response(),
        None => not_here().await,
    }
}

/// A route of another kind of server: asked for, answered 404, not a violation.
async fn not_here() -> Response {
    (StatusCode::NOT_FOUND, axum::Json(json!({"error": {"message": "not found", "type": "invalid_request_error", "code": null}}))).into_response()
}

async fn unexpected(State(state): State<Arc<ServerState>>, method: Method, uri: Uri) -> Response {
    state.violation(None, format!("unexpected request: {method} {uri}"));
    (StatusCode::NOT_FOUND, axum::Json(json!({"error": {"message": "not found", "type": "invalid_request_error", "code": null}}))).into_response()
}

async fn chat(State(state): State<Arc<ServerState>>, headers: HeaderMap, body: Bytes) -> Response {
    let (index, body) = state.capture(&headers, &body);
    let reply = match state
        .source
        .reply(|| PolicyRequest::from_wire(&body).map_err(|e| format!("unreadable request: {e}")))
    {
        Ok(reply) => reply,
        Err(problem) => {
            state.violation(Some(index), problem.clone());
            Reply::status(500, problem)
        }
    };
    if state.log {
        eprintln!("deepsolve-mock: call #{} -> {}", index + 1, reply.kind());
    }
    let streaming = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("mock-model");
    let meta = StreamMeta::numbered(index as u64 + 1, model);
    play(reply, streaming, &meta, state.stream).await
}

impl ServerState {
    /// Record the request and its invariant violations; returns its index and JSON body.
    fn capture(&self, headers: &HeaderMap, raw: &Bytes) -> (usize, Value) {
        let parsed: Result<Value, _> = serde_json::from_slice(raw);
        if !self.capture {
            let index = self.calls.fetch_add(1, Ordering::SeqCst);
            let body =
                parsed.unwrap_or_else(|_| Value::String(String::from_utf8_lossy(raw).into_owned()));
            return (index, body);
        }
        let mut problems = Vec::new();
        let body = match parsed {
            Ok(body) => {
                problems.extend(check_request(&body, &self.invariants));
                body
            }
            Err(e) => {
                problems.push(format!("the body is not JSON: {e}"));
                Value::String(String::from_utf8_lossy(raw).into_owned())
            }
        };
        let headers = headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_ascii_lowercase(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let mut journal = lock(&self.journal);
        let index = journal.requests.len();
        self.calls.fetch_add(1, Ordering::SeqCst);
        journal.requests.push(CapturedRequest {
            index,
            path: "/v1/chat/completions".into(),
            headers,
            body: body.clone(),
        });
        for message in problems {
            if self.log {
                eprintln!("deepsolve-mock: request[{index}] violation: {message}");
            }
            journal.violations.push(Violation {
                request: Some(index),
                message,
            });
        }
        (index, body)
    }

    fn violation(&self, request: Option<usize>, message: String) {
        if self.log {
            eprintln!("deepsolve-mock: violation: {message}");
        }
        lock(&self.journal)
            .violations
            .push(Violation { request, message });
    }
}

/// The total delay of nested `Delayed` replies, and the reply inside.
fn undelay(mut reply: Reply) -> (Duration, Reply) {
    let mut total = Duration::ZERO;
    while let Reply::Delayed(delay, inner) = reply {
        total += delay;
        reply = *inner;
    }
    (total, reply)
}

/// How long a cut stream waits before closing, so the status line and headers (and any text
/// before the cut) are flushed to the client first.
const CUT_AFTER: Duration = Duration::from_millis(30);

async fn play(
    reply: Reply,
    streaming: bool,
    meta: &StreamMeta,
    options: StreamOptions,
) -> Response {
    let (delay, reply) = undelay(reply);
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let text_frames = |text: &str| -> Vec<String> {
        sse::text_chunks(text, meta, 16)
            .iter()
            .map(|c| sse::data_frame(&c.to_string()))
            .collect()
    };
    match reply {
        Reply::Turn(turn) if streaming && options.paced() => {
            sse_response(paced(sse::ChunkIter::new(turn, meta.clone()), options))
        }
        Reply::Turn(turn) if streaming && options.stamp => {
            let frames = sse::ChunkIter::new(turn, meta.clone())
                .map(|chunk| sse::data_frame(&stamped(chunk).to_string()))
                .chain(std::iter::once(sse::DONE_FRAME.to_string()));
            sse_response(lazy(frames))
        }
        Reply::Turn(turn) if streaming => {
            sse_response(lazy(sse::FrameIter::new(turn, meta.clone())))
        }
        Reply::Turn(turn) => json_response(200, &sse::completion_json(&turn, meta), &[]),
        Reply::Status {
            status,
            body,
            headers,
        } => json_response(status, &body, &headers),
        Reply::CutBeforeOutput => sse_response(cut(Vec::new(), CUT_AFTER)),
        Reply::CutAfterText(text) => sse_response(cut(text_frames(&text), CUT_AFTER)),
        Reply::StallAfterText(text, stall) => {
            sse_response(cut(text_frames(&text), stall.max(CUT_AFTER)))
        }
        Reply::Raw(payloads) => {
            sse_response(whole(payloads.iter().map(|p| sse::data_frame(p)).collect()))
        }
        // `undelay` removed every `Delayed`; answer something sane rather than panic.
        Reply::Delayed(..) => {
            json_response(500, &json!({"error": {"message": "nested delay"}}), &[])
        }
    }
}

/// Bytes per network write of a lazily streamed reply: several frames at a time, as a
/// provider's server flushes them, so a reply of many megabytes is quick to play.
const WRITE_BYTES: usize = 16 * 1024;

/// `frames` built as they are sent, never all at once: a reply of many megabytes costs the
/// mock a few kilobytes at a time.
fn lazy(
    frames: impl Iterator<Item = String> + Send + 'static,
) -> impl Stream<Item = Result<Bytes, io::Error>> + Send {
    let mut frames = frames.peekable();
    stream::iter(std::iter::from_fn(move || {
        frames.peek()?;
        let mut write = String::new();
        while write.len() < WRITE_BYTES
            && let Some(frame) = frames.next()
        {
            write.push_str(&frame);
        }
        Some(Ok(Bytes::from(write)))
    }))
}

/// `chunks` one frame per write: the first delta after `ttft`, each later one `per_delta`
/// after the one before (the role, finish and usage chunks go out without waiting).
fn paced(
    chunks: sse::ChunkIter,
    options: StreamOptions,
) -> impl Stream<Item = Result<Bytes, io::Error>> + Send {
    let start = tokio::time::Instant::now();
    let frames = stream::unfold(
        (chunks, start + options.ttft),
        move |(mut chunks, due)| async move {
            let chunk = chunks.next()?;
            let due = if carries_output(&chunk) {
                tokio::time::sleep_until(due).await;
                due + options.per_delta
            } else {
                due
            };
            let chunk = if options.stamp { stamped(chunk) } else { chunk };
            let frame = Bytes::from(sse::data_frame(&chunk.to_string()));
            Some((Ok(frame), (chunks, due)))
        },
    );
    frames.chain(stream::once(async { Ok(Bytes::from(sse::DONE_FRAME)) }))
}

/// The streamed delta of a chunk, if it has one.
fn delta_mut(chunk: &mut Value) -> Option<&mut serde_json::Map<String, Value>> {
    chunk
        .get_mut("choices")?
        .get_mut(0)?
        .get_mut("delta")?
        .as_object_mut()
}

/// Does the chunk carry model output (text, reasoning, call arguments), as a token would?
fn carries_output(chunk: &Value) -> bool {
    let Some(delta) = chunk.pointer("/choices/0/delta") else {
        return false;
    };
    let text = |key: &str| {
        delta
            .get(key)
            .and_then(Value::as_str)
            .is_some_and(|t| !t.is_empty())
    };
    text("content") || text("reasoning_content") || delta.get("tool_calls").is_some()
}

/// `chunk` with its non-empty text and reasoning prefixed by the time of now.
fn stamped(mut chunk: Value) -> Value {
    if let Some(delta) = delta_mut(&mut chunk) {
        for key in ["content", "reasoning_content"] {
            if let Some(Value::String(text)) = delta.get_mut(key)
                && !text.is_empty()
            {
                text.insert_str(0, &stamp(unix_micros()));
            }
        }
    }
    chunk
}

fn whole(frames: Vec<String>) -> impl Stream<Item = Result<Bytes, io::Error>> + Send {
    stream::iter(frames.into_iter().map(|f| Ok(Bytes::from(f))))
}

/// `frames`, then silence for `after`, then an error that makes hyper drop the connection
/// without the terminating chunk: the client sees a stream cut.
fn cut(
    frames: Vec<String>,
    after: Duration,
) -> impl Stream<Item = Result<Bytes, io::Error>> + Send {
    whole(frames).chain(stream::once(async move {
        tokio::time::sleep(after).await;
        Err(io::Error::other("scripted cut"))
    }))
}

fn sse_response(body: impl Stream<Item = Result<Bytes, io::Error>> + Send + 'static) -> Response {
    let mut response = Response::new(Body::from_stream(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn json_response(status: u16, body: &Value, extra: &[(String, String)]) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, axum::Json(body.clone())).into_response();
    for (name, value) in extra {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}
