//! Recorded-shape provider transcripts (`tests/fixtures/<provider>.sse`), hand-written from each
//! provider's documented streaming format, replayed through the real `OpenAiClient` against the
//! in-process test server. Each test asserts exactly what the engine gets back: the calls (ids,
//! names, arguments), the visible text, the reasoning, the finish reason and the usage.
//!
//! Every transcript is replayed twice: one network write per SSE event, and in 7-byte pieces
//! (splitting events, UTF-8 sequences and JSON strings) — the result must be the same.

use std::time::Duration;

use crate::support::{Part, Recorded, Reply, TestServer, finish_chunk, text_chunk};
use deepsolve_core::{
    ChatModel, ChatRequest, Completion, FinishReason, Message, ModelError, StreamDelta, ToolCall,
    ToolChoice, ToolSpec, Usage,
};
use deepsolve_llm::{ClientConfig, OpenAiClient};
use serde_json::{Map, Value, json};

/// What a transcript must turn into.
struct Expected {
    text: &'static str,
    reasoning: &'static str,
    /// `(id, name, arguments)`; `None` for an id the client must synthesise.
    calls: &'static [(Option<&'static str>, &'static str, &'static str)],
    finish_reason: FinishReason,
    /// `(prompt_tokens, completion_tokens)` as the provider reported them.
    usage: (u64, u64),
}

/// How a transcript is cut into network writes.
#[derive(Debug, Clone, Copy)]
enum Split {
    PerEvent,
    Bytes(usize),
}

const SPLITS: [Split; 2] = [Split::PerEvent, Split::Bytes(7)];

fn reply(transcript: &[u8], split: Split) -> Reply {
    let pieces: Vec<Vec<u8>> = match split {
        Split::PerEvent => transcript.split_inclusive(|b| *b == b'\n').fold(
            Vec::<Vec<u8>>::new(),
            |mut events, line| {
                // A blank line ends an event: start the next write after it.
                match events.last_mut() {
                    Some(last) if !last.ends_with(b"\n\n") => last.extend_from_slice(line),
                    _ => events.push(line.to_vec()),
                }
                events
            },
        ),
        Split::Bytes(n) => transcript.chunks(n).map(<[u8]>::to_vec).collect(),
    };
    Reply::sse(pieces.into_iter().map(Part::Bytes).collect())
}

fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("The {name} tool."),
        parameters: json!({"type": "object"}),
    }
}

fn request(messages: Vec<Message>) -> ChatRequest {
    ChatRequest {
        messages,
        tools: [
            "solve_plan",
            "solve_finish_step",
            "reason",
            "code_execution",
        ]
        .into_iter()
        .map(tool)
        .collect(),
        tool_choice: ToolChoice::Auto,
        max_tokens: 4096,
        temperature: 0.3,
        stop: Vec::new(),
        response_format: None,
    }
}

fn first_round() -> ChatRequest {
    request(vec![
        Message::system("You solve problems."),
        Message::user("Solve x^2 - 5x + 6 = 0."),
    ])
}

fn client_for(server: &TestServer, extra_body: Map<String, Value>) -> OpenAiClient {
    let config = ClientConfig {
        extra_body,
        stream_idle_timeout: Duration::from_secs(5),
        max_attempts: 1,
        ..ClientConfig::new(server.base_url(), "fixture-model")
    };
    OpenAiClient::new(config).expect("valid config")
}

async fn complete(
    client: &OpenAiClient,
    request: &ChatRequest,
) -> (Result<Completion, ModelError>, Vec<StreamDelta>) {
    let mut deltas = Vec::new();
    let result = client.complete(request, &mut |d| deltas.push(d)).await;
    (result, deltas)
}

/// Replays `transcript` in every split and checks each completion against `expected`.
/// Returns the last completion and the recorded requests.
async fn replay(
    transcript: &[u8],
    expected: &Expected,
    extra_body: Map<String, Value>,
    request: &ChatRequest,
) -> (Completion, Vec<Recorded>) {
    let replies = SPLITS.iter().map(|s| reply(transcript, *s)).collect();
    let server = TestServer::start(replies).await;
    let client = client_for(&server, extra_body);
    let mut last = None;
    for split in SPLITS {
        let (result, deltas) = complete(&client, request).await;
        let completion = result.unwrap_or_else(|e| panic!("{split:?}: {e}"));
        check(&completion, &deltas, expected, split);
        last = Some(completion);
    }
    (last.expect("at least one split"), server.requests())
}

fn check(completion: &Completion, deltas: &[StreamDelta], expected: &Expected, split: Split) {
    assert_eq!(completion.text, expected.text, "{split:?}: text");
    assert_eq!(
        completion.reasoning, expected.reasoning,
        "{split:?}: reasoning"
    );
    assert_eq!(
        completion.finish_reason, expected.finish_reason,
        "{split:?}: finish reason"
    );
    let (prompt_tokens, completion_tokens) = expected.usage;
    // The cached prompt tokens, when a recording reports them, are checked by its own test.
    assert_eq!(
        Usage {
            cached_tokens: None,
            ..completion.usage
        },
        Usage {
            prompt_tokens,
            completion_tokens,
            estimated: false,
            cached_tokens: None,
        },
        "{split:?}: usage"
    );
    check_calls(&completion.tool_calls, expected.calls, split);
    check_deltas(deltas, expected, split);
}

fn check_calls(calls: &[ToolCall], expected: &[(Option<&str>, &str, &str)], split: Split) {
    let got: Vec<(&str, &str)> = calls
        .iter()
        .map(|c| (c.name.as_str(), c.arguments.as_str()))
        .collect();
    let want: Vec<(&str, &str)> = expected.iter().map(|(_, n, a)| (*n, *a)).collect();
    assert_eq!(got, want, "{split:?}: calls");
    for (call, (id, _, _)) in calls.iter().zip(expected) {
        match id {
            Some(id) => assert_eq!(call.id, *id, "{split:?}: id"),
            None => assert!(call.id.starts_with("call_ds_"), "{split:?}: {}", call.id),
        }
        let args: Result<Value, _> = serde_json::from_str(&call.arguments);
        assert!(
            args.is_ok(),
            "{split:?}: arguments are JSON: {}",
            call.arguments
        );
    }
    let mut ids: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), calls.len(), "{split:?}: ids are unique");
}

/// The live deltas add up to the completion, reasoning before text, each call's start named
/// its tool, and nothing else was sent (no retries, no tool-call text).
fn check_deltas(deltas: &[StreamDelta], expected: &Expected, split: Split) {
    let mut reasoning = String::new();
    let mut text = String::new();
    let mut started = Vec::new();
    for delta in deltas {
        match delta {
            StreamDelta::ToolCallStarted { name } => started.push(name.clone()),
            StreamDelta::Reasoning(r) => {
                assert!(text.is_empty(), "{split:?}: reasoning after text");
                reasoning.push_str(r);
            }
            StreamDelta::Text(t) => text.push_str(t),
            other => panic!("{split:?}: unexpected delta {other:?}"),
        }
    }
    assert_eq!(
        reasoning, expected.reasoning,
        "{split:?}: streamed reasoning"
    );
    assert_eq!(text, expected.text, "{split:?}: streamed text");
    let names: Vec<&str> = expected.calls.iter().map(|(_, name, _)| *name).collect();
    assert_eq!(started, names, "{split:?}: each call's start, in order");
}

fn no_extra() -> Map<String, Value> {
    Map::new()
}

// ---------------------------------------------------------------------------------------------

/// OpenAI: parallel calls keyed by `index` (id and name only on the first delta), `content:
/// null`, `obfuscation` padding fields, and usage in a last chunk with empty `choices`.
#[tokio::test]
async fn openai_parallel_tool_calls_and_usage_chunk() {
    let expected = Expected {
        text: "",
        reasoning: "",
        calls: &[
            (
                Some("call_Qm3fT0aXb9"),
                "solve_plan",
                r#"{"analysis":"factor","steps":[{"goal":"x²−5x+6 → (x−2)(x−3)"}]}"#,
            ),
            (
                Some("call_8VnR2sLc4d"),
                "reason",
                r#"{"query": "roots of x^2-5x+6"}"#,
            ),
        ],
        finish_reason: FinishReason::ToolCalls,
        usage: (412, 58),
    };
    let transcript = include_bytes!("../fixtures/openai.sse");
    replay(transcript, &expected, no_extra(), &first_round()).await;
}

/// DeepSeek thinking mode: `: keep-alive` comments, `reasoning_content` deltas (with `content:
/// null`), then a tool call; usage rides on the finish chunk. The next request must carry the
/// reasoning back on the assistant tool-call message (DeepSeek rejects it otherwise).
#[tokio::test]
async fn deepseek_thinking_mode_reasoning_then_tool_call_and_reasoning_sent_back() {
    let expected = Expected {
        text: "",
        reasoning: "The plan exists; step S1 needs the discriminant. 25 − 24 = 1.",
        calls: &[(
            Some("call_00_kT5wQ2nR8sJ1"),
            "code_execution",
            "{\"code\": \"import math\\nprint(math.sqrt(25 - 24))\"}",
        )],
        finish_reason: FinishReason::ToolCalls,
        usage: (1290, 87),
    };
    let transcript = include_bytes!("../fixtures/deepseek.sse");
    let (completion, _) = replay(transcript, &expected, no_extra(), &first_round()).await;

    // The engine's next round: the reply goes back with its reasoning, then the result.
    let mut history = first_round().messages;
    let call = completion.tool_calls[0].clone();
    history.push(Message::assistant_with_calls(
        completion.text.clone(),
        vec![call.clone()],
        Some(completion.reasoning.clone()),
    ));
    history.push(Message::tool_result(&call, "1.0"));
    let server = TestServer::start(vec![Reply::chunks(&[
        text_chunk("x = 2 or x = 3."),
        finish_chunk("stop"),
    ])])
    .await;
    let (result, _) = complete(&client_for(&server, no_extra()), &request(history)).await;
    assert_eq!(result.expect("second round").text, "x = 2 or x = 3.");
    let body = &server.requests()[0].body;
    let assistant = &body["messages"][2];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["reasoning_content"], json!(expected.reasoning));
    assert_eq!(assistant["tool_calls"][0]["id"], "call_00_kT5wQ2nR8sJ1");
    assert_eq!(assistant["content"], Value::Null);
    assert_eq!(body["messages"][3]["tool_call_id"], "call_00_kT5wQ2nR8sJ1");
}

/// Qwen on DashScope (OpenAI-compatible mode): `reasoning_content`, text before the calls,
/// the first call's id and name repeated on every delta, the second's continued with `"id": ""`
/// and `"name": ""`, a closing delta of nulls, usage in the last chunk.
#[tokio::test]
async fn qwen_dashscope_repeated_ids_and_names_are_not_concatenated() {
    let expected = Expected {
        text: "我先制定计划。",
        reasoning: "嗯，用户要解方程，先做计划。",
        calls: &[
            (
                Some("call_5507104cabae4f64a0fdd3"),
                "solve_plan",
                r#"{"analysis": "因式分解", "steps": [{"goal": "分解"}, {"goal": "验证"}]}"#,
            ),
            (
                Some("call_9c1e0b7d2f3a4e5b8c6d7e"),
                "reason",
                r#"{"query": "判别式"}"#,
            ),
        ],
        finish_reason: FinishReason::ToolCalls,
        usage: (294, 61),
    };
    let transcript = include_bytes!("../fixtures/qwen.sse");
    let mut extra = Map::new();
    extra.insert("enable_thinking".into(), json!(true));
    let (_, requests) = replay(transcript, &expected, extra, &first_round()).await;
    assert_eq!(requests[0].body["enable_thinking"], json!(true));
}

/// vLLM with a reasoning parser and a tool parser: `reasoning_content` deltas, the `"\n\n"`
/// Qwen3 writes after its thinking as content, a call whose first delta has a name but no
/// arguments, `stop_reason`/`token_ids` extras, usage in a last chunk. `chat_template_kwargs`
/// travels in `extra_body` and must reach the request.
#[tokio::test]
async fn vllm_reasoning_parser_tool_call_and_chat_template_kwargs() {
    let expected = Expected {
        text: "\n\n",
        reasoning: "\nOkay, S2 asks for a check. Plug both roots in.\n",
        calls: &[(
            Some("chatcmpl-tool-5b0a9e8d7c6f4e3d"),
            "code_execution",
            r#"{"code": "print([x*x - 5*x + 6 for x in (2, 3)])"}"#,
        )],
        finish_reason: FinishReason::ToolCalls,
        usage: (733, 69),
    };
    let transcript = include_bytes!("../fixtures/vllm.sse");
    let mut extra = Map::new();
    extra.insert(
        "chat_template_kwargs".into(),
        json!({"enable_thinking": true}),
    );
    let (_, requests) = replay(transcript, &expected, extra, &first_round()).await;
    for recorded in &requests {
        assert_eq!(
            recorded.body["chat_template_kwargs"],
            json!({"enable_thinking": true})
        );
        assert_eq!(recorded.body["stream"], json!(true));
        assert_eq!(recorded.body["model"], json!("fixture-model"));
    }
}

/// llama.cpp server: text before the call, a call started with a partial argument, and usage
/// with the server's `timings` in a last chunk.
#[tokio::test]
async fn llamacpp_timings_and_tool_call() {
    let expected = Expected {
        text: "Let me check both roots.",
        reasoning: "",
        calls: &[(
            Some("0oN1C2UMGNWsXYFE8CFJD5Q4UFnDVHgE"),
            "reason",
            r#"{"query":"[S2] check x=2 and x=3"}"#,
        )],
        finish_reason: FinishReason::ToolCalls,
        usage: (845, 31),
    };
    let transcript = include_bytes!("../fixtures/llamacpp.sse");
    let (completion, _) = replay(transcript, &expected, no_extra(), &first_round()).await;
    // llama.cpp's `timings.cache_n`: the prompt tokens its KV cache served.
    assert_eq!(completion.usage.cached_tokens, Some(812));
}

/// Ollama's OpenAI-compatible endpoint: thinking in `reasoning`, `content: ""` on every
/// chunk, and two whole calls to the same tool without `index` — the first with an id, the
/// second with none. They stay two calls, the second gets a synthesised id.
#[tokio::test]
async fn ollama_missing_index_and_id_and_reasoning_field() {
    let expected = Expected {
        text: "",
        reasoning: "Two checks, one per root.",
        calls: &[
            (
                Some("call_hk81qg8b"),
                "code_execution",
                r#"{"code":"print(2*2-5*2+6)"}"#,
            ),
            (None, "code_execution", r#"{"code":"print(3*3-5*3+6)"}"#),
        ],
        finish_reason: FinishReason::ToolCalls,
        usage: (512, 64),
    };
    let transcript = include_bytes!("../fixtures/ollama.sse");
    replay(transcript, &expected, no_extra(), &first_round()).await;
}

/// OpenRouter: `: OPENROUTER PROCESSING` comment lines before and between events, `reasoning`
/// alongside `reasoning_details` (the same text, read once), `native_finish_reason`, and usage
/// with `cost` in a last chunk.
#[tokio::test]
async fn openrouter_processing_comments_reasoning_and_cost() {
    let expected = Expected {
        text: "Finishing S2.",
        reasoning: "Both roots check out.",
        calls: &[(
            Some("call_or_7f3e2a1b"),
            "solve_finish_step",
            r#"{"step_id":"S2","summary":"x=2 and x=3 both give 0"}"#,
        )],
        finish_reason: FinishReason::ToolCalls,
        usage: (1024, 96),
    };
    let transcript = include_bytes!("../fixtures/openrouter.sse");
    replay(transcript, &expected, no_extra(), &first_round()).await;
}

/// The transcripts themselves: well-formed SSE (every event a JSON chunk or `[DONE]`, comments
/// only as `:` lines), so a broken fixture fails here rather than as a puzzling client result.
#[test]
fn every_fixture_is_well_formed_sse() {
    let fixtures: [(&str, &[u8]); 7] = [
        ("openai", include_bytes!("../fixtures/openai.sse")),
        ("deepseek", include_bytes!("../fixtures/deepseek.sse")),
        ("qwen", include_bytes!("../fixtures/qwen.sse")),
        ("vllm", include_bytes!("../fixtures/vllm.sse")),
        ("llamacpp", include_bytes!("../fixtures/llamacpp.sse")),
        ("ollama", include_bytes!("../fixtures/ollama.sse")),
        ("openrouter", include_bytes!("../fixtures/openrouter.sse")),
    ];
    for (name, bytes) in fixtures {
        let mut parser = deepsolve_llm::sse::SseParser::new();
        let mut events = parser.feed(bytes).expect("within limits");
        events.extend(parser.finish());
        assert_eq!(
            events.last().map(|e| e.data.as_str()),
            Some("[DONE]"),
            "{name}"
        );
        for event in &events[..events.len() - 1] {
            let chunk: Result<deepsolve_llm::wire::ChatChunk, _> =
                serde_json::from_str(&event.data);
            assert!(chunk.is_ok(), "{name}: {}", event.data);
        }
    }
}
