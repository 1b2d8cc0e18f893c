//! The per-reply cap: content, reasoning and tool-call arguments of one reply together. A reply
//! past it ends the call with `ReplyTooLarge`, is not retried, and its connection is dropped
//! there, not read to the end.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::response::Response;
use deepsolve_core::{ChatModel, ChatRequest, Message, ModelError, StreamDelta, ToolChoice};
use deepsolve_llm::wire::ChatChunk;
use deepsolve_llm::{ClientConfig, OpenAiClient, ReplyTooLarge, StreamAccumulator};
use serde_json::{Value, json};

use crate::support::{Reply, TestServer, delta_chunk, event, finish_chunk, text_chunk};

const CAP: usize = 64 * 1024;

fn capped(base_url: String) -> OpenAiClient {
    let config = ClientConfig {
        stream_idle_timeout: Duration::from_secs(5),
        backoff_base: Duration::from_millis(5),
        max_reply_bytes: CAP,
        ..ClientConfig::new(base_url, "test-model")
    };
    OpenAiClient::new(config).expect("valid config")
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user("Write a lot.")],
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        max_tokens: 256,
        temperature: 0.0,
        stop: Vec::new(),
        response_format: None,
    }
}

fn chunk(value: Value) -> ChatChunk {
    serde_json::from_value(value).expect("a chunk")
}

#[test]
fn a_chunk_past_the_cap_is_refused_whole_and_nothing_of_it_is_kept() {
    let mut acc = StreamAccumulator::with_max_reply_bytes(10);
    let first = acc.apply(&chunk(text_chunk("12345"))).expect("fits");
    assert_eq!(first, [StreamDelta::Text("12345".into())]);
    let reasoning = delta_chunk(json!({"reasoning_content": "abc"}));
    acc.apply(&chunk(reasoning)).expect("8 bytes so far");
    // Arguments count too: 8 + 3 = 11 > 10.
    let call = delta_chunk(
        json!({"tool_calls": [{"index": 0, "id": "c", "type": "function",
        "function": {"name": "f", "arguments": "{}x"}}]}),
    );
    assert_eq!(acc.apply(&chunk(call)), Err(ReplyTooLarge { limit: 10 }));
    assert_eq!(acc.reply_bytes(), 8);
    let completion = acc.finish(&request());
    assert_eq!(completion.text, "12345");
    assert!(
        completion.tool_calls.is_empty(),
        "nothing of the refused chunk"
    );
    // Exactly at the cap is within it.
    let mut acc = StreamAccumulator::with_max_reply_bytes(5);
    assert!(acc.apply(&chunk(text_chunk("12345"))).is_ok());
}

/// An endless stream of text deltas; `dropped` turns true when the server side lets go of
/// the body, which is when the client has closed the connection.
async fn endless_stream(dropped: Arc<AtomicBool>, requests: Arc<AtomicUsize>) -> String {
    struct OnDrop(Arc<AtomicBool>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let app = Router::new().fallback(move || {
        let guard = OnDrop(dropped.clone());
        requests.fetch_add(1, Ordering::SeqCst);
        async move {
            let frame = Bytes::from(event(&text_chunk(&"x".repeat(1000))));
            let body = futures::stream::unfold(guard, move |guard| {
                let frame = frame.clone();
                async move { Some((Ok::<_, std::io::Error>(frame), guard)) }
            });
            let mut response = Response::new(Body::from_stream(body));
            response.headers_mut().insert(
                "content-type",
                axum::http::HeaderValue::from_static("text/event-stream"),
            );
            response
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/v1")
}

#[tokio::test]
async fn a_stream_past_the_cap_is_reply_too_large_and_its_connection_is_dropped() {
    let dropped = Arc::new(AtomicBool::new(false));
    let requests = Arc::new(AtomicUsize::new(0));
    let url = endless_stream(dropped.clone(), requests.clone()).await;
    let client = capped(url);
    let mut shown = 0usize;
    let result = tokio::time::timeout(
        Duration::from_secs(30),
        client.complete(&request(), &mut |d| {
            if let StreamDelta::Text(t) = d {
                shown += t.len();
            }
        }),
    )
    .await
    .expect("the client stops reading at the cap");
    assert_eq!(
        result,
        Err(ModelError::ReplyTooLarge {
            limit_bytes: CAP as u64
        })
    );
    assert!(shown <= CAP, "{shown} bytes shown past the cap");
    assert!(shown > CAP - 1000, "everything up to the cap was shown");
    for _ in 0..100 {
        if dropped.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(dropped.load(Ordering::SeqCst), "the connection was dropped");
    assert_eq!(requests.load(Ordering::SeqCst), 1, "not retried");
}

#[tokio::test]
async fn a_reply_past_the_cap_is_not_retried_even_before_visible_output() {
    // All in arguments: nothing visible was shown, and still no second attempt.
    let args = "y".repeat(CAP + 1);
    let call = delta_chunk(
        json!({"tool_calls": [{"index": 0, "id": "c", "type": "function",
        "function": {"name": "f", "arguments": args}}]}),
    );
    let server = TestServer::start(vec![
        Reply::chunks(&[call.clone(), finish_chunk("tool_calls")]),
        Reply::chunks(&[call, finish_chunk("tool_calls")]),
    ])
    .await;
    let result = capped(server.base_url())
        .complete(&request(), &mut |_| {})
        .await;
    assert!(
        matches!(result, Err(ModelError::ReplyTooLarge { .. })),
        "{result:?}"
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn one_stream_event_far_past_the_cap_is_not_buffered_whole() {
    // One delta of 2 MiB: past twice the cap and a megabyte, so the parser stops reading it
    // before its end, and the failure is the cap's.
    let huge = text_chunk(&"w".repeat(2 * 1024 * 1024));
    let server = TestServer::start(vec![Reply::chunks(&[huge])]).await;
    let result = capped(server.base_url())
        .complete(&request(), &mut |_| {})
        .await;
    assert_eq!(
        result,
        Err(ModelError::ReplyTooLarge {
            limit_bytes: CAP as u64
        })
    );
}

#[tokio::test]
async fn a_json_reply_past_the_cap_is_reply_too_large() {
    let content = "z".repeat(CAP + 1);
    let within_body = Reply::json(json!({
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": content}}]
    }));
    // Far past the body limit (twice the cap and a megabyte): not even read to the end.
    let huge = "z".repeat(2 * CAP + 2 * 1024 * 1024);
    let past_body = Reply::json(json!({
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": huge}}]
    }));
    let server = TestServer::start(vec![within_body, past_body]).await;
    let client = capped(server.base_url());
    for _ in 0..2 {
        let result = client.complete(&request(), &mut |_| {}).await;
        assert_eq!(
            result,
            Err(ModelError::ReplyTooLarge {
                limit_bytes: CAP as u64
            })
        );
    }
    assert_eq!(server.request_count(), 2);
}

#[test]
fn the_error_names_the_setting_and_its_kind() {
    let e = ModelError::from(ReplyTooLarge { limit: 4 << 20 });
    assert_eq!(e.kind(), "reply_too_large");
    assert!(e.to_string().contains("llm.max_reply_mb"), "{e}");
}
