//! The embeddings client against a loopback `/v1/embeddings` that plays a script.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use deepsolve_kb::retrieve::{EmbedError, Embedder, OpenAiEmbedder, OpenAiEmbedderConfig};
use serde_json::{Value, json};

/// What the fixture answers, one entry per request; past the end it echoes.
#[derive(Clone)]
pub(crate) enum Reply {
    /// Vectors `[text length, position]`, listed in reverse order with their `index`, so
    /// the client must put them back in input order.
    Echo,
    Status(u16, &'static str),
}

#[derive(Default)]
pub(crate) struct Fixture {
    script: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<(Value, Option<String>)>>,
}

impl Fixture {
    fn requests(&self) -> Vec<(Value, Option<String>)> {
        self.requests.lock().unwrap().clone()
    }
}

async fn embeddings(
    State(fx): State<Arc<Fixture>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    fx.requests.lock().unwrap().push((body.clone(), auth));
    let reply = fx.script.lock().unwrap().pop_front().unwrap_or(Reply::Echo);
    match reply {
        Reply::Status(status, text) => {
            (StatusCode::from_u16(status).unwrap(), text.to_string()).into_response()
        }
        Reply::Echo => {
            let inputs = body["input"].as_array().cloned().unwrap_or_default();
            let data: Vec<Value> = inputs
                .iter()
                .enumerate()
                .rev()
                .map(|(i, t)| {
                    let len = t.as_str().map_or(0, str::len);
                    json!({"object": "embedding", "index": i, "embedding": [len as f32, i as f32]})
                })
                .collect();
            Json(json!({"object": "list", "data": data, "model": body["model"]})).into_response()
        }
    }
}

/// A fixture server on a loopback port, and a client config pointing at it.
pub(crate) async fn serve(script: Vec<Reply>) -> (Arc<Fixture>, OpenAiEmbedderConfig) {
    let fx = Arc::new(Fixture {
        script: Mutex::new(script.into()),
        ..Fixture::default()
    });
    let app = axum::Router::new()
        .route("/v1/embeddings", post(embeddings))
        .with_state(fx.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let mut config = OpenAiEmbedderConfig::new(format!("http://{addr}/v1/"), "embed-test");
    config.batch_size = 2;
    config.backoff = Duration::from_millis(1);
    (fx, config)
}

fn texts(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn batches_come_back_in_input_order_with_the_key_from_the_named_variable() {
    let (fx, mut config) = serve(Vec::new()).await;
    // A variable every test process has: setting one would race the test threads.
    config.api_key_env = Some("PATH".into());
    let client = OpenAiEmbedder::new(config).unwrap();
    assert_eq!(client.model(), "embed-test");
    let vectors = client.embed(&texts(&["a", "bbb", "cc"])).await.unwrap();
    assert_eq!(vectors, [vec![1.0, 0.0], vec![3.0, 1.0], vec![2.0, 0.0]]);
    let requests = fx.requests();
    assert_eq!(requests.len(), 2, "two batches of at most two");
    assert_eq!(requests[0].0["input"], json!(["a", "bbb"]));
    assert_eq!(requests[0].0["model"], "embed-test");
    let path = std::env::var("PATH").unwrap();
    assert_eq!(requests[1].1, Some(format!("Bearer {path}")));
}

#[tokio::test]
async fn a_429_is_retried_and_then_succeeds() {
    let (fx, config) = serve(vec![Reply::Status(429, "slow down")]).await;
    let client = OpenAiEmbedder::new(config).unwrap();
    let vectors = client.embed(&texts(&["xy"])).await.unwrap();
    assert_eq!(vectors, [vec![2.0, 0.0]]);
    assert_eq!(fx.requests().len(), 2);
}

#[tokio::test]
async fn server_errors_are_retried_until_the_retries_run_out() {
    let (fx, config) = serve(vec![Reply::Status(500, "boom"); 5]).await;
    let client = OpenAiEmbedder::new(config).unwrap();
    let err = client.embed(&texts(&["x"])).await.unwrap_err();
    match err {
        EmbedError::Exhausted {
            status,
            attempts,
            message,
        } => {
            assert_eq!((status, attempts), (500, 3));
            assert_eq!(message, "boom");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(fx.requests().len(), 3, "one attempt and two retries");
}

#[tokio::test]
async fn malformed_answers_and_refusals_are_not_retried() {
    let (fx, config) = serve(vec![
        Reply::Status(200, r#"{"data": "not a list"}"#),
        Reply::Status(200, r#"{"data": []}"#),
        Reply::Status(400, "bad input"),
    ])
    .await;
    let client = OpenAiEmbedder::new(config).unwrap();
    for _ in 0..2 {
        let err = client.embed(&texts(&["x"])).await.unwrap_err();
        assert!(matches!(err, EmbedError::Malformed(_)), "{err:?}");
    }
    let err = client.embed(&texts(&["x"])).await.unwrap_err();
    assert!(
        matches!(err, EmbedError::Rejected { status: 400, .. }),
        "{err:?}"
    );
    assert_eq!(fx.requests().len(), 3);
}

#[tokio::test]
async fn a_named_but_unset_key_variable_and_a_bad_url_are_refused_up_front() {
    let mut config = OpenAiEmbedderConfig::new("http://127.0.0.1:9/v1", "m");
    config.api_key_env = Some("DEEPSOLVE_TEST_SURELY_UNSET_EMBED_KEY".into());
    assert!(matches!(
        OpenAiEmbedder::new(config),
        Err(EmbedError::MissingKey(v)) if v == "DEEPSOLVE_TEST_SURELY_UNSET_EMBED_KEY"
    ));
    assert!(matches!(
        OpenAiEmbedder::new(OpenAiEmbedderConfig::new("ftp://x", "m")),
        Err(EmbedError::InvalidUrl(_))
    ));
}
