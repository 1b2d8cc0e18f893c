//! End-to-end tests of `OpenAiClient` against an in-process scripted server: one test per
//! branch of the streaming, accumulation, retry and error-classification logic.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::support::{
    Part, Reply, TestServer, delta_chunk, event, finish_chunk, text_chunk, usage_chunk,
};
use deepsolve_core::{
    ChatModel, ChatRequest, Completion, FinishReason, Message, ModelError, StreamDelta, ToolCall,
    ToolChoice, ToolSpec, Usage,
};
use deepsolve_llm::{ClientConfig, ClientError, OpenAiClient};
use secrecy::SecretString;
use serde_json::{Value, json};

const KEY: &str = "sk-test-SECRET-0123456789";

fn config(server: &TestServer) -> ClientConfig {
    ClientConfig {
        api_key: Some(SecretString::from(KEY)),
        stream_idle_timeout: Duration::from_secs(5),
        backoff_base: Duration::from_millis(5),
        connect_timeout: Duration::from_secs(2),
        ..ClientConfig::new(server.base_url(), "test-model")
    }
}

fn client(server: &TestServer) -> OpenAiClient {
    OpenAiClient::new(config(server)).expect("valid config")
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![
            Message::system("You solve problems."),
            Message::user("What is 2+2?"),
        ],
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        max_tokens: 256,
        temperature: 0.3,
        stop: Vec::new(),
        response_format: None,
    }
}

fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("The {name} tool."),
        parameters: json!({"type": "object", "properties": {"q": {"type": "string"}},
            "additionalProperties": false}),
    }
}

/// Runs one completion, collecting the live deltas.
async fn run(
    client: &OpenAiClient,
    request: &ChatRequest,
) -> (Result<Completion, ModelError>, Vec<StreamDelta>) {
    let mut deltas = Vec::new();
    let result = client.complete(request, &mut |d| deltas.push(d)).await;
    (result, deltas)
}

fn retries(deltas: &[StreamDelta]) -> Vec<&StreamDelta> {
    deltas
        .iter()
        .filter(|d| matches!(d, StreamDelta::Retrying { .. }))
        .collect()
}

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

/// A client that makes one attempt per request (no retries).
fn one_attempt_client(server: &TestServer) -> OpenAiClient {
    let config = ClientConfig {
        max_attempts: 1,
        ..config(server)
    };
    OpenAiClient::new(config).expect("client")
}

fn tool_delta(index: Option<u64>, id: Option<&str>, name: Option<&str>, args: &str) -> Value {
    let mut function = json!({"arguments": args});
    if let Some(name) = name {
        function["name"] = json!(name);
    }
    let mut entry = json!({"type": "function", "function": function});
    if let Some(index) = index {
        entry["index"] = json!(index);
    }
    if let Some(id) = id {
        entry["id"] = json!(id);
    }
    delta_chunk(json!({"tool_calls": [entry]}))
}

// ---------------------------------------------------------------------------------------------
// Streaming and accumulation

#[tokio::test]
async fn streams_text_and_records_reported_usage() {
    let server = TestServer::start(vec![Reply::chunks(&[
        delta_chunk(json!({"role": "assistant", "content": ""})),
        text_chunk("Hel"),
        text_chunk("lo, 世界"),
        finish_chunk("stop"),
        usage_chunk(12, 3),
    ])])
    .await;
    let (result, deltas) = run(&client(&server), &request()).await;
    let completion = result.expect("completion");
    assert_eq!(
        deltas,
        [
            StreamDelta::Text("Hel".into()),
            StreamDelta::Text("lo, 世界".into())
        ]
    );
    assert_eq!(completion.text, "Hello, 世界");
    assert_eq!(completion.finish_reason, FinishReason::Stop);
    assert_eq!(
        completion.usage,
        Usage {
            prompt_tokens: 12,
            completion_tokens: 3,
            estimated: false,
            cached_tokens: None,
        }
    );
    let recorded = server.requests();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].method, "POST");
    assert_eq!(recorded[0].path, "/v1/chat/completions");
    assert_eq!(
        recorded[0].authorization.as_deref(),
        Some(&*format!("Bearer {KEY}"))
    );
}

#[tokio::test]
async fn sse_split_at_awkward_byte_boundaries_with_crlf_and_comments() {
    let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"é🦀\"}}]}\r\n\r\n\
                : keep-alive\r\n\r\n\
                data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\r\n\r\n\
                data: [DONE]\r\n\r\n"
        .as_bytes();
    // Split inside the two-byte é, inside the four-byte crab and between \r and \n.
    let crab = body.windows(4).position(|w| w == "🦀".as_bytes()).unwrap();
    let cr = body.iter().position(|b| *b == b'\r').unwrap();
    let cuts = [crab - 1, crab + 2, cr + 1];
    let mut parts = Vec::new();
    let mut start = 0;
    for cut in cuts {
        parts.push(Part::Bytes(body[start..cut].to_vec()));
        parts.push(Part::Delay(Duration::from_millis(5)));
        start = cut;
    }
    parts.push(Part::Bytes(body[start..].to_vec()));
    let server = TestServer::start(vec![Reply::sse(parts)]).await;
    let (result, _) = run(&client(&server), &request()).await;
    assert_eq!(result.expect("completion").text, "é🦀");
}

#[tokio::test]
async fn reasoning_content_is_streamed_and_accumulated() {
    let server = TestServer::start(vec![Reply::chunks(&[
        delta_chunk(json!({"reasoning_content": "Two plus "})),
        delta_chunk(json!({"reasoning_content": "two is four."})),
        text_chunk("4"),
        finish_chunk("stop"),
    ])])
    .await;
    let (result, deltas) = run(&client(&server), &request()).await;
    let completion = result.expect("completion");
    assert_eq!(completion.reasoning, "Two plus two is four.");
    assert_eq!(completion.text, "4");
    assert_eq!(deltas[0], StreamDelta::Reasoning("Two plus ".into()));
    assert_eq!(deltas[2], StreamDelta::Text("4".into()));
}

#[tokio::test]
async fn reasoning_field_is_accepted_and_not_doubled_when_both_are_sent() {
    let server = TestServer::start(vec![Reply::chunks(&[
        delta_chunk(json!({"reasoning": "Think"})),
        delta_chunk(json!({"reasoning": "ing.", "reasoning_content": "ing."})),
        text_chunk("done"),
        finish_chunk("stop"),
    ])])
    .await;
    let (result, deltas) = run(&client(&server), &request()).await;
    let completion = result.expect("completion");
    assert_eq!(completion.reasoning, "Thinking.");
    assert_eq!(
        deltas,
        [
            StreamDelta::Reasoning("Think".into()),
            StreamDelta::Reasoning("ing.".into()),
            StreamDelta::Text("done".into())
        ]
    );
}

#[tokio::test]
async fn tool_call_deltas_split_across_chunks_are_joined_by_index() {
    let server = TestServer::start(vec![Reply::chunks(&[
        tool_delta(Some(0), Some("call_a"), Some("python"), ""),
        tool_delta(Some(0), None, None, "{\"code\":"),
        tool_delta(Some(1), Some("call_b"), Some("web_search"), "{\"q\""),
        tool_delta(Some(0), None, None, "\"print(1)\"}"),
        tool_delta(Some(1), None, None, ":\"rust\"}"),
        finish_chunk("tool_calls"),
    ])])
    .await;
    let (result, deltas) = run(&client(&server), &request()).await;
    let completion = result.expect("completion");
    // Each call's start is announced by name; nothing of them is streamed as text.
    assert_eq!(
        deltas,
        [
            StreamDelta::ToolCallStarted {
                name: "python".into()
            },
            StreamDelta::ToolCallStarted {
                name: "web_search".into()
            },
        ],
    );
    assert_eq!(
        completion.tool_calls,
        [
            call("call_a", "python", "{\"code\":\"print(1)\"}"),
            call("call_b", "web_search", "{\"q\":\"rust\"}")
        ]
    );
    assert_eq!(completion.finish_reason, FinishReason::ToolCalls);
}

#[tokio::test]
async fn ids_and_names_repeated_in_every_chunk_are_not_concatenated() {
    let server = TestServer::start(vec![Reply::chunks(&[
        tool_delta(Some(0), Some("call_x"), Some("rag"), "{\"query\":"),
        tool_delta(Some(0), Some("call_x"), Some("rag"), "\"limits\""),
        tool_delta(Some(0), Some("call_x"), Some("rag"), "}"),
        finish_chunk("tool_calls"),
    ])])
    .await;
    let (result, _) = run(&client(&server), &request()).await;
    assert_eq!(
        result.expect("completion").tool_calls,
        [call("call_x", "rag", "{\"query\":\"limits\"}")]
    );
}

#[tokio::test]
async fn ollama_whole_calls_without_index_are_separate_calls() {
    let server = TestServer::start(vec![Reply::chunks(&[
        tool_delta(None, Some("call_1"), Some("python"), "{\"code\":\"1\"}"),
        tool_delta(None, Some("call_2"), Some("python"), "{\"code\":\"2\"}"),
        tool_delta(None, None, Some("rag"), "{\"query\":\"q\"}"),
        finish_chunk("tool_calls"),
    ])])
    .await;
    let (result, _) = run(&client(&server), &request()).await;
    let calls = result.expect("completion").tool_calls;
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[0], call("call_1", "python", "{\"code\":\"1\"}"));
    assert_eq!(calls[1], call("call_2", "python", "{\"code\":\"2\"}"));
    assert_eq!(
        (calls[2].name.as_str(), calls[2].arguments.as_str()),
        ("rag", "{\"query\":\"q\"}")
    );
    assert!(calls[2].id.starts_with("call_ds_"), "{}", calls[2].id);
}

#[tokio::test]
async fn missing_ids_are_synthesised_unique_across_calls_and_requests() {
    let reply = || {
        Reply::chunks(&[
            tool_delta(Some(0), None, Some("python"), "{}"),
            tool_delta(Some(1), None, Some("python"), "{}"),
            finish_chunk("tool_calls"),
        ])
    };
    let server = TestServer::start(vec![reply(), reply()]).await;
    let client = client(&server);
    let first = run(&client, &request()).await.0.expect("first").tool_calls;
    let second = run(&client, &request()).await.0.expect("second").tool_calls;
    let mut ids: Vec<_> = first.iter().chain(&second).map(|c| c.id.clone()).collect();
    assert!(ids.iter().all(|id| id.starts_with("call_ds_")), "{ids:?}");
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 4);
}

#[tokio::test]
async fn usage_is_estimated_and_marked_when_the_provider_sends_none() {
    let server = TestServer::start(vec![Reply::chunks(&[
        text_chunk("The answer is four."),
        finish_chunk("stop"),
    ])])
    .await;
    let (result, _) = run(&client(&server), &request()).await;
    let usage = result.expect("completion").usage;
    assert!(usage.estimated);
    assert!(usage.prompt_tokens >= 10, "{usage:?}");
    assert!((3..=8).contains(&usage.completion_tokens), "{usage:?}");
}

#[tokio::test]
async fn finish_reason_length_is_returned_as_length_without_retry() {
    let server = TestServer::start(vec![
        Reply::chunks(&[text_chunk("Partial ans"), finish_chunk("length")]),
        // All reasoning, nothing visible: still returned (the loop retries with a bigger budget).
        Reply::chunks(&[
            delta_chunk(json!({"reasoning_content": "hmm"})),
            finish_chunk("length"),
        ]),
    ])
    .await;
    let client = client(&server);
    let first = run(&client, &request()).await.0.expect("first");
    assert_eq!(first.finish_reason, FinishReason::Length);
    assert_eq!(first.text, "Partial ans");
    let second = run(&client, &request()).await.0.expect("second");
    assert_eq!(second.finish_reason, FinishReason::Length);
    assert_eq!(second.text, "");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn a_stream_with_finish_reason_but_no_done_is_complete() {
    let server = TestServer::start(vec![Reply::sse(vec![
        Part::Bytes(event(&text_chunk("ok"))),
        Part::Bytes(event(&finish_chunk("stop"))),
    ])])
    .await;
    let (result, _) = run(&client(&server), &request()).await;
    assert_eq!(result.expect("completion").text, "ok");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn a_non_streaming_json_reply_is_read_as_one_chunk() {
    let server = TestServer::start(vec![Reply::json(json!({
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "python", "arguments": "{}"}}]}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 7}
    }))])
    .await;
    let completion = run(&client(&server), &request())
        .await
        .0
        .expect("completion");
    assert_eq!(completion.tool_calls, [call("c1", "python", "{}")]);
    assert_eq!(completion.usage.total(), 12);
}

// ---------------------------------------------------------------------------------------------
// Retries

#[tokio::test]
async fn rate_limit_with_retry_after_waits_that_long_then_succeeds() {
    let server = TestServer::start(vec![
        Reply::error(
            429,
            json!({"error": {"message": "slow down", "type": "rate_limit"}}),
        )
        .header("retry-after", "1"),
        Reply::chunks(&[text_chunk("ok"), finish_chunk("stop")]),
    ])
    .await;
    let started = std::time::Instant::now();
    let (result, deltas) = run(&client(&server), &request()).await;
    assert_eq!(result.expect("completion").text, "ok");
    assert!(started.elapsed() >= Duration::from_millis(950));
    match retries(&deltas)[..] {
        [
            StreamDelta::Retrying {
                attempt,
                max,
                reason,
                delay_ms,
            },
        ] => {
            assert_eq!((*attempt, *max), (2, 4));
            assert!((950..=1050).contains(delay_ms), "{delay_ms}");
            assert!(reason.contains("429"), "{reason}");
        }
        ref other => panic!("expected one retry, got {other:?}"),
    }
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn server_error_is_retried_with_backoff_then_succeeds() {
    let server = TestServer::start(vec![
        Reply::error(500, json!({"error": {"message": "overloaded"}})),
        Reply::chunks(&[text_chunk("ok"), finish_chunk("stop")]),
    ])
    .await;
    let (result, deltas) = run(&client(&server), &request()).await;
    assert_eq!(result.expect("completion").text, "ok");
    match retries(&deltas)[..] {
        [
            StreamDelta::Retrying {
                attempt: 2,
                delay_ms,
                reason,
                ..
            },
        ] => {
            assert!(*delay_ms <= 6, "backoff_base 5 ms ±10 %: {delay_ms}");
            assert!(reason.contains("overloaded"), "{reason}");
        }
        ref other => panic!("expected one retry, got {other:?}"),
    }
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn server_errors_exhaust_attempts_with_the_count() {
    let error = || Reply::error(503, json!({"error": {"message": "down"}}));
    let server = TestServer::start(vec![error(), error(), error(), error()]).await;
    let (result, deltas) = run(&client(&server), &request()).await;
    match result {
        Err(ModelError::Server {
            status: 503,
            attempts: 4,
            message,
        }) => {
            assert!(message.contains("down"))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(retries(&deltas).len(), 3);
    assert_eq!(server.request_count(), 4);
}

#[tokio::test]
async fn a_cut_before_any_output_is_retried() {
    let server = TestServer::start(vec![
        Reply::sse(vec![
            Part::Bytes(event(&delta_chunk(json!({"role": "assistant"})))),
            Part::Delay(Duration::from_millis(50)),
            Part::Cut,
        ]),
        Reply::chunks(&[text_chunk("ok"), finish_chunk("stop")]),
    ])
    .await;
    let (result, deltas) = run(&client(&server), &request()).await;
    assert_eq!(result.expect("completion").text, "ok");
    assert_eq!(retries(&deltas).len(), 1);
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn a_clean_close_without_done_or_finish_is_a_cut() {
    let server = TestServer::start(vec![
        Reply::sse(vec![Part::Bytes(event(&delta_chunk(
            json!({"role": "assistant"}),
        )))]),
        Reply::chunks(&[text_chunk("ok"), finish_chunk("stop")]),
    ])
    .await;
    let (result, _) = run(&client(&server), &request()).await;
    assert_eq!(result.expect("completion").text, "ok");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn a_cut_after_visible_text_is_stream_cut_without_retry() {
    let server = TestServer::start(vec![
        // The delay lets the text reach the client before the cut (hyper coalesces writes).
        Reply::sse(vec![
            Part::Bytes(event(&text_chunk("The answer"))),
            Part::Delay(Duration::from_millis(100)),
            Part::Cut,
        ]),
        Reply::chunks(&[text_chunk("never"), finish_chunk("stop")]),
    ])
    .await;
    let (result, deltas) = run(&client(&server), &request()).await;
    assert!(
        matches!(result, Err(ModelError::StreamCut { .. })),
        "{result:?}"
    );
    assert_eq!(deltas, [StreamDelta::Text("The answer".into())]);
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn idle_timeout_is_retried_and_then_reported() {
    let stall = || {
        Reply::sse(vec![
            Part::Bytes(event(&delta_chunk(json!({"role": "assistant"})))),
            Part::Delay(Duration::from_secs(5)),
        ])
    };
    let server = TestServer::start(vec![stall(), stall()]).await;
    let config = ClientConfig {
        stream_idle_timeout: Duration::from_millis(200),
        max_attempts: 2,
        ..config(&server)
    };
    let client = OpenAiClient::new(config).expect("client");
    let (result, deltas) = run(&client, &request()).await;
    assert_eq!(
        result,
        Err(ModelError::IdleTimeout {
            after: Duration::from_millis(200)
        })
    );
    match retries(&deltas)[..] {
        [StreamDelta::Retrying { reason, .. }] => assert!(reason.contains("no data"), "{reason}"),
        ref other => panic!("{other:?}"),
    }
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn idle_after_visible_text_is_stream_cut() {
    let server = TestServer::start(vec![Reply::sse(vec![
        Part::Bytes(event(&text_chunk("Partial"))),
        Part::Delay(Duration::from_secs(5)),
    ])])
    .await;
    let config = ClientConfig {
        stream_idle_timeout: Duration::from_millis(200),
        ..config(&server)
    };
    let client = OpenAiClient::new(config).expect("client");
    let (result, _) = run(&client, &request()).await;
    assert!(
        matches!(result, Err(ModelError::StreamCut { .. })),
        "{result:?}"
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn an_empty_reply_is_retried() {
    let server = TestServer::start(vec![
        Reply::chunks(&[
            delta_chunk(json!({"role": "assistant", "content": ""})),
            finish_chunk("stop"),
        ]),
        Reply::chunks(&[text_chunk("ok"), finish_chunk("stop")]),
    ])
    .await;
    let (result, deltas) = run(&client(&server), &request()).await;
    assert_eq!(result.expect("completion").text, "ok");
    match retries(&deltas)[..] {
        [StreamDelta::Retrying { reason, .. }] => assert!(reason.contains("empty"), "{reason}"),
        ref other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_error_chunk_mid_stream_is_typed() {
    let server = TestServer::start(vec![
        Reply::chunks(&[json!({"error": {"message": "backend crashed", "type": "server_error"}})]),
        Reply::chunks(&[
            json!({"error": {"message": "too long", "code": "context_length_exceeded"}}),
        ]),
    ])
    .await;
    let client = one_attempt_client(&server);
    let (first, _) = run(&client, &request()).await;
    assert!(
        matches!(&first, Err(ModelError::Server { attempts: 1, message, .. }) if message.contains("backend crashed")),
        "{first:?}"
    );
    let (second, _) = run(&client, &request()).await;
    assert!(
        matches!(second, Err(ModelError::ContextLength { .. })),
        "{second:?}"
    );
}

#[tokio::test]
async fn a_server_error_once_a_call_has_begun_is_the_call_cut_by_the_output_limit() {
    // llama.cpp's server, its forced call cut by `max_tokens`: the call's opening, then an
    // error in place of `finish_reason: "length"`. The same request again would be cut again.
    let cut = json!({"error": {"code": 500, "message": "Invalid diff: now finding less tool calls!", "type": "server_error"}});
    let server = TestServer::start(vec![
        Reply::chunks(&[
            tool_delta(Some(0), Some("call_a"), Some("solve_plan"), ""),
            tool_delta(Some(0), None, None, "{\"analysis\": \"split"),
            cut.clone(),
        ]),
        // Before any call began, the same error is the server failing.
        Reply::chunks(&[delta_chunk(json!({"content": ""})), cut]),
    ])
    .await;
    let client = one_attempt_client(&server);
    let (first, _) = run(&client, &request()).await;
    let completion = first.expect("the reply so far");
    assert_eq!(completion.finish_reason, FinishReason::Length);
    assert_eq!(
        completion.tool_calls,
        [call("call_a", "solve_plan", "{\"analysis\": \"split")]
    );
    let (second, _) = run(&client, &request()).await;
    assert!(
        matches!(&second, Err(ModelError::Server { message, .. }) if message.contains("Invalid diff")),
        "{second:?}"
    );
}

#[tokio::test]
async fn connection_refused_is_a_transport_error_after_all_attempts() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let config = ClientConfig {
        max_attempts: 2,
        backoff_base: Duration::from_millis(5),
        ..ClientConfig::new(format!("http://127.0.0.1:{port}/v1"), "m")
    };
    let client = OpenAiClient::new(config).expect("client");
    let (result, deltas) = run(&client, &request()).await;
    assert!(
        matches!(result, Err(ModelError::Transport { attempts: 2, .. })),
        "{result:?}"
    );
    assert_eq!(retries(&deltas).len(), 1);
}

/// A server that, like llama.cpp's, keeps no connection after a streamed reply and does not
/// say so (no `Connection: close`): each connection answers its first request, then reads the
/// next one and closes without a reply. Returns its base URL, and how many connections it
/// accepted and requests it left unanswered.
async fn closing_after_each_reply() -> (String, Arc<[AtomicUsize; 2]>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let counts = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let seen_by_server = counts.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            seen_by_server[0].fetch_add(1, Ordering::SeqCst);
            let counts = seen_by_server.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                // The whole request: its head, then as many body bytes as it says.
                let complete = |seen: &[u8]| {
                    let text = String::from_utf8_lossy(seen);
                    let Some(end) = text.find("\r\n\r\n") else {
                        return false;
                    };
                    let length = text[..end]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap())
                        })
                        .unwrap_or(0);
                    seen.len() >= end + 4 + length
                };
                while !complete(&seen) {
                    let n = socket.read(&mut buf).await.unwrap();
                    assert!(n > 0, "the client closed before its request was whole");
                    seen.extend_from_slice(&buf[..n]);
                }
                let mut body = event(&text_chunk("4"));
                body.extend(event(&finish_chunk("stop")));
                body.extend(b"data: [DONE]\n\n");
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
                    body.len()
                );
                socket.write_all(head.as_bytes()).await.unwrap();
                socket.write_all(&body).await.unwrap();
                // The next request on this connection is read and left without a reply.
                if socket.read(&mut buf).await.is_ok_and(|n| n > 0) {
                    counts[1].fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
    (url, counts)
}

#[tokio::test]
async fn a_pooled_connection_the_server_closed_is_replaced_without_a_retry() {
    let (url, counts) = closing_after_each_reply().await;
    let config = ClientConfig {
        max_attempts: 1,
        ..ClientConfig::new(url, "test-model")
    };
    let client = OpenAiClient::new(config).expect("client");
    for turn in 1..=3 {
        let (result, deltas) = run(&client, &request()).await;
        assert_eq!(
            result.expect("a healthy server answers").text,
            "4",
            "request {turn}"
        );
        assert!(retries(&deltas).is_empty(), "{deltas:?}");
    }
    // Requests 2 and 3 were each sent on the connection the last reply came on, which the
    // server then closed, and sent again on a new one.
    let [accepted, unanswered] = counts.as_ref().each_ref().map(|n| n.load(Ordering::SeqCst));
    assert_eq!((accepted, unanswered), (3, 2));
}

// ---------------------------------------------------------------------------------------------
// Fatal errors

#[tokio::test]
async fn unauthorized_is_auth_and_never_shows_the_key() {
    let server = TestServer::start(vec![Reply::error(
        401,
        json!({"error": {"message": format!("Incorrect API key provided: {KEY}"),
            "type": "invalid_request_error", "code": "invalid_api_key"}}),
    )])
    .await;
    let (result, deltas) = run(&client(&server), &request()).await;
    let error = result.expect_err("auth error");
    assert!(
        matches!(error, ModelError::Auth { status: 401, .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(text.contains("check the API key"), "{text}");
    assert!(
        !text.contains(KEY) && !format!("{error:?}").contains(KEY),
        "{text}"
    );
    assert!(deltas.is_empty());
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn context_length_is_not_retried() {
    let server = TestServer::start(vec![Reply::error(
        400,
        json!({"error": {"message": "This model's maximum context length is 8192 tokens.",
            "type": "invalid_request_error", "param": "messages",
            "code": "context_length_exceeded"}}),
    )])
    .await;
    let (result, _) = run(&client(&server), &request()).await;
    assert!(
        matches!(result, Err(ModelError::ContextLength { .. })),
        "{result:?}"
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn tools_unsupported_is_typed_and_probe_reports_false() {
    let unsupported = || {
        Reply::error(
            400,
            json!({"error": {"message": "registry.ollama.ai/library/gemma:2b does not support tools",
                "type": "api_error", "param": null, "code": null}}),
        )
    };
    let server = TestServer::start(vec![unsupported(), unsupported()]).await;
    let client = client(&server);
    let request = ChatRequest {
        tools: vec![tool("python")],
        ..request()
    };
    let (result, _) = run(&client, &request).await;
    assert!(
        matches!(result, Err(ModelError::ToolsUnsupported { .. })),
        "{result:?}"
    );
    assert_eq!(client.probe_native_tools().await, Ok(false));
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn other_client_errors_are_bad_requests() {
    let server = TestServer::start(vec![Reply::error(
        404,
        json!({"error": {"message": "model 'nope' not found", "type": "not_found_error"}}),
    )])
    .await;
    let (result, _) = run(&client(&server), &request()).await;
    assert_eq!(
        result,
        Err(ModelError::BadRequest {
            status: 404,
            message: "model 'nope' not found".into()
        })
    );
}

#[test]
fn a_bad_base_url_is_a_typed_error() {
    let error = OpenAiClient::new(ClientConfig::new("ftp://example.com/v1", "m"))
        .expect_err("ftp is not http");
    assert!(matches!(error, ClientError::InvalidBaseUrl { .. }));
    assert!(error.to_string().contains("ftp://example.com/v1"));
}

// ---------------------------------------------------------------------------------------------
// Request shape and extras

#[tokio::test]
async fn the_request_body_has_the_openai_shape() {
    let server = TestServer::start(vec![Reply::chunks(&[
        text_chunk("ok"),
        finish_chunk("stop"),
    ])])
    .await;
    let mut extra = serde_json::Map::new();
    extra.insert("enable_thinking".into(), json!(false));
    extra.insert("model".into(), json!("evil-model"));
    extra.insert("messages".into(), json!([]));
    extra.insert("stream".into(), json!(false));
    extra.insert("temperature".into(), json!(0.9));
    let config = ClientConfig {
        extra_body: extra,
        ..config(&server)
    };
    let client = OpenAiClient::new(config).expect("client");
    let calls = vec![call("call_1", "python", "{\"code\":\"1+1\"}")];
    let request = ChatRequest {
        messages: vec![
            Message::system("sys"),
            Message::user("hi"),
            Message::assistant_with_calls("", calls.clone(), Some("I should compute.".into())),
            Message::tool_result(&calls[0], "2"),
            Message::assistant("It is 2."),
        ],
        tools: vec![tool("python")],
        tool_choice: ToolChoice::None,
        max_tokens: 100,
        temperature: 0.3,
        stop: vec!["<tool_response>".into()],
        response_format: None,
    };
    run(&client, &request).await.0.expect("completion");
    let body = &server.requests()[0].body;
    let expected = json!({
        "model": "test-model",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "reasoning_content": "I should compute.",
             "tool_calls": [{"id": "call_1", "type": "function",
                 "function": {"name": "python", "arguments": "{\"code\":\"1+1\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "2"},
            {"role": "assistant", "content": "It is 2."}
        ],
        "tools": [{"type": "function", "function": {"name": "python",
            "description": "The python tool.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
                "additionalProperties": false}}}],
        "tool_choice": "none",
        "max_tokens": 100,
        "temperature": 0.9,
        "stop": ["<tool_response>"],
        "stream": true,
        "stream_options": {"include_usage": true},
        "enable_thinking": false
    });
    assert_eq!(body, &expected);
}

#[tokio::test]
async fn without_tools_there_is_no_tools_or_tool_choice_and_null_extra_removes_a_field() {
    let server = TestServer::start(vec![Reply::chunks(&[
        text_chunk("ok"),
        finish_chunk("stop"),
    ])])
    .await;
    let mut extra = serde_json::Map::new();
    extra.insert("stream_options".into(), Value::Null);
    let client = OpenAiClient::new(ClientConfig {
        extra_body: extra,
        api_key: None,
        ..config(&server)
    })
    .expect("client");
    run(&client, &request()).await.0.expect("completion");
    let recorded = &server.requests()[0];
    let body = recorded.body.as_object().expect("object");
    for absent in ["tools", "tool_choice", "stop", "stream_options"] {
        assert!(!body.contains_key(absent), "{absent} in {body:?}");
    }
    assert_eq!(body["temperature"], json!(0.3));
    assert_eq!(recorded.authorization, None);
}

#[tokio::test]
async fn list_models_reads_data_ids() {
    let server = TestServer::start(vec![Reply::json(json!({
        "object": "list",
        "data": [{"id": "qwen3:8b", "object": "model"}, {"id": "llama3.1", "object": "model"}]
    }))])
    .await;
    let models = client(&server).list_models().await.expect("models");
    assert_eq!(models, ["qwen3:8b", "llama3.1"]);
    let recorded = &server.requests()[0];
    assert_eq!(
        (recorded.method.as_str(), recorded.path.as_str()),
        ("GET", "/v1/models")
    );
}

#[tokio::test]
async fn probe_reports_true_when_a_tool_call_comes_back() {
    let server = TestServer::start(vec![Reply::chunks(&[
        tool_delta(Some(0), Some("c"), Some("deepsolve_probe"), "{\"ok\":true}"),
        finish_chunk("tool_calls"),
    ])])
    .await;
    assert_eq!(client(&server).probe_native_tools().await, Ok(true));
    let body = &server.requests()[0].body;
    assert_eq!(
        body["tools"][0]["function"]["name"],
        json!("deepsolve_probe")
    );
    assert_eq!(body["tool_choice"], json!("auto"));
}

#[tokio::test]
async fn probe_makes_a_single_attempt() {
    let server = TestServer::start(vec![Reply::error(
        502,
        json!({"error": {"message": "bad gateway"}}),
    )])
    .await;
    let result = client(&server).probe_native_tools().await;
    assert!(
        matches!(
            result,
            Err(ModelError::Server {
                status: 502,
                attempts: 1,
                ..
            })
        ),
        "{result:?}"
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn stop_probe_reports_true_when_the_reply_stops_before_the_marker() {
    let server = TestServer::start(vec![Reply::chunks(&[
        text_chunk("deepsolve-canary-"),
        text_chunk("before "),
        finish_chunk("stop"),
    ])])
    .await;
    assert_eq!(client(&server).probe_stop_sequences().await, Ok(true));
    let recorded = server.requests();
    assert_eq!(recorded.len(), 1);
    let body = recorded[0].body.as_object().expect("object");
    assert_eq!(body["stop"], json!(["<tool_response>"]));
    assert!(!body.contains_key("tools") && !body.contains_key("tool_choice"));
    let prompt = body["messages"][1]["content"].as_str().expect("prompt");
    assert!(
        prompt.contains("deepsolve-canary-before <tool_response> deepsolve-canary-after"),
        "{prompt}"
    );
}

#[tokio::test]
async fn stop_probe_reports_false_when_the_server_ignores_the_stop() {
    let server = TestServer::start(vec![
        Reply::chunks(&[
            text_chunk("deepsolve-canary-before <tool_resp"),
            text_chunk("onse> deepsolve-canary-after"),
            finish_chunk("stop"),
        ]),
        // The marker was dropped but the text after it came back: the stop never fired.
        Reply::chunks(&[
            text_chunk("deepsolve-canary-before deepsolve-canary-after"),
            finish_chunk("stop"),
        ]),
        // The model did not echo the canary: nothing was shown either way.
        Reply::chunks(&[text_chunk("Sure! How can I help?"), finish_chunk("stop")]),
    ])
    .await;
    let client = client(&server);
    for _ in 0..3 {
        assert_eq!(client.probe_stop_sequences().await, Ok(false));
    }
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn stop_probe_makes_a_single_attempt_and_returns_the_error() {
    let server = TestServer::start(vec![Reply::error(
        503,
        json!({"error": {"message": "overloaded"}}),
    )])
    .await;
    let result = client(&server).probe_stop_sequences().await;
    assert!(
        matches!(
            result,
            Err(ModelError::Server {
                status: 503,
                attempts: 1,
                ..
            })
        ),
        "{result:?}"
    );
    assert_eq!(server.request_count(), 1);
}
