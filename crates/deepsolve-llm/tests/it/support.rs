//! A tiny scripted OpenAI-compatible server for the client tests: each request takes the next
//! scripted reply (status, headers, body parts with delays and connection cuts) and is recorded.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::{Value, json};

/// One piece of a scripted response body.
#[derive(Debug, Clone)]
pub(crate) enum Part {
    Bytes(Vec<u8>),
    Delay(Duration),
    /// Abort the connection without finishing the body.
    Cut,
}

#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub parts: Vec<Part>,
}

impl Reply {
    /// A 200 event stream made of `parts`.
    pub(crate) fn sse(parts: Vec<Part>) -> Self {
        Reply {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            parts,
        }
    }

    /// A 200 event stream of these chunks followed by `[DONE]`, one network write each.
    pub(crate) fn chunks(chunks: &[Value]) -> Self {
        let mut parts: Vec<Part> = chunks.iter().map(|c| Part::Bytes(event(c))).collect();
        parts.push(Part::Bytes(b"data: [DONE]\n\n".to_vec()));
        Self::sse(parts)
    }

    /// A JSON error reply.
    pub(crate) fn error(status: u16, body: Value) -> Self {
        Reply {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            parts: vec![Part::Bytes(body.to_string().into_bytes())],
        }
    }

    pub(crate) fn json(body: Value) -> Self {
        Self::error(200, body)
    }

    pub(crate) fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// `data: <json>\n\n`
pub(crate) fn event(chunk: &Value) -> Vec<u8> {
    format!("data: {chunk}\n\n").into_bytes()
}

pub(crate) fn text_chunk(text: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
}

pub(crate) fn delta_chunk(delta: Value) -> Value {
    json!({"choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
}

pub(crate) fn finish_chunk(reason: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

pub(crate) fn usage_chunk(prompt: u64, completion: u64) -> Value {
    json!({"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
        "total_tokens": prompt + completion}})
}

#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
    pub body: Value,
}

#[derive(Clone, Default)]
struct State {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

pub(crate) struct TestServer {
    pub addr: SocketAddr,
    state: State,
}

impl TestServer {
    /// Starts a server on 127.0.0.1:0 that answers with `replies` in order (then 599).
    pub(crate) async fn start(replies: Vec<Reply>) -> TestServer {
        let state = State::default();
        state.replies.lock().unwrap().extend(replies);
        let handler_state = state.clone();
        let app = Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let state = handler_state.clone();
                async move { handle(state, method, uri, headers, body) }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        TestServer { addr, state }
    }

    pub(crate) fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    pub(crate) fn request_count(&self) -> usize {
        self.state.requests.lock().unwrap().len()
    }
}

fn handle(state: State, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let authorization = headers
        .get("authorization")
        .map(|v| v.to_str().unwrap().to_string());
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    state.requests.lock().unwrap().push(Recorded {
        method: method.to_string(),
        path: uri.path().to_string(),
        authorization,
        body,
    });
    let reply = state.replies.lock().unwrap().pop_front().unwrap_or(Reply {
        status: 599,
        headers: Vec::new(),
        parts: vec![Part::Bytes(b"no scripted reply left".to_vec())],
    });
    let mut response = Response::new(Body::from_stream(body_stream(reply.parts)));
    *response.status_mut() = StatusCode::from_u16(reply.status).unwrap();
    for (name, value) in reply.headers {
        response.headers_mut().insert(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(&value).unwrap(),
        );
    }
    response
}

fn body_stream(
    parts: Vec<Part>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    futures::stream::unfold(VecDeque::from(parts), |mut parts| async move {
        loop {
            match parts.pop_front()? {
                Part::Delay(d) => tokio::time::sleep(d).await,
                Part::Bytes(b) => return Some((Ok(Bytes::from(b)), parts)),
                Part::Cut => {
                    let cut = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "cut");
                    return Some((Err(cut), VecDeque::new()));
                }
            }
        }
    })
}
