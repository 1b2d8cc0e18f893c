//! The 0.5B test model for real (Qwen2.5-Coder-0.5B-Instruct Q4_K_M): a streamed reply, a
//! tool call, the KV cache kept across a turn's rounds, cancellation, two requests at once,
//! grammar-constrained replies. The model is the testkit's (`DEEPSOLVE_TEST_MODEL`, which
//! scripts/test sets after `scripts/fetch-model qwen2.5-coder-0.5b-instruct-q4_k_m`): skipped
//! with a SKIP line without it, a failure under CI. The
//! assertions are about shape, never exact words. One test at a time: they share the model
//! and some measure time.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use deepsolve_core::{
    ChatModel, ChatRequest, FinishReason, Message, StreamDelta, ToolChoice, ToolSpec,
};
use deepsolve_local::{Constraint, LocalConfig, LocalModel};
use serde_json::{Value, json};
use tokio::sync::{Mutex, MutexGuard};

static MODEL: LazyLock<Option<LocalModel>> = LazyLock::new(|| {
    let path = deepsolve_testkit::real::test_model()?;
    let mut config = LocalConfig::new(path);
    config.context = 4096;
    config.parallel = 2;
    Some(LocalModel::load(&config).unwrap())
});

static SERIAL: Mutex<()> = Mutex::const_new(());

/// The shared model and the right to use it alone, or None (after a SKIP line).
async fn model(test: &str) -> Option<(&'static LocalModel, MutexGuard<'static, ()>)> {
    let guard = SERIAL.lock().await;
    match MODEL.as_ref() {
        Some(model) => Some((model, guard)),
        None => {
            println!("SKIP {test}: no real model (see the line above)");
            None
        }
    }
}

fn request(messages: Vec<Message>, max_tokens: u32) -> ChatRequest {
    ChatRequest {
        messages,
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        max_tokens,
        temperature: 0.0,
        stop: Vec::new(),
        response_format: None,
    }
}

/// A question this model answers with a call of the weather tool at once.
fn weather_question() -> ChatRequest {
    request(
        vec![
            Message::system("You are a helpful assistant. Use the tools when they help."),
            Message::user("What is the weather like in Paris right now?"),
        ],
        128,
    )
}

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Get the current weather in a city.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city's name"}},
            "required": ["city"],
            "additionalProperties": false,
        }),
    }
}

#[tokio::test]
async fn a_reply_streams_and_matches_its_completion() {
    let Some((model, _serial)) = model("a_reply_streams_and_matches_its_completion").await else {
        return;
    };
    let req = request(
        vec![
            Message::system("You are a helpful assistant."),
            Message::user("Name three primary colours, briefly."),
        ],
        48,
    );
    let mut streamed = String::new();
    let mut deltas = 0;
    let completion = model
        .complete(&req, &mut |d| {
            if let StreamDelta::Text(t) = d {
                streamed.push_str(&t);
                deltas += 1;
            }
        })
        .await
        .unwrap();
    assert!(deltas > 1, "the reply came in {deltas} delta(s)");
    assert_eq!(streamed, completion.text);
    assert!(!completion.text.trim().is_empty());
    assert!(completion.tool_calls.is_empty());
    assert!(matches!(
        completion.finish_reason,
        FinishReason::Stop | FinishReason::Length
    ));
    assert!(!completion.usage.estimated);
    let prompt = model.tokenize(&model.render(&req).unwrap()).len() as u64;
    assert_eq!(completion.usage.prompt_tokens, prompt);
    assert!(completion.usage.completion_tokens >= 1 && completion.usage.completion_tokens <= 48);
}

#[tokio::test]
async fn the_token_limit_and_stop_sequences_end_a_reply() {
    let Some((model, _serial)) = model("the_token_limit_and_stop_sequences_end_a_reply").await
    else {
        return;
    };
    let mut req = request(
        vec![Message::user("Count from 1 to 50, one number per line.")],
        5,
    );
    let c = model.complete(&req, &mut |_| {}).await.unwrap();
    assert_eq!(c.finish_reason, FinishReason::Length);
    assert_eq!(c.usage.completion_tokens, 5);
    req.max_tokens = 200;
    req.stop = vec!["5".into()];
    let c = model.complete(&req, &mut |_| {}).await.unwrap();
    assert_eq!(c.finish_reason, FinishReason::Stop);
    assert!(!c.text.contains('5'), "{:?}", c.text);
    assert!(c.text.contains('4'), "{:?}", c.text);
}

#[tokio::test]
async fn an_offered_tool_is_called_with_well_formed_arguments() {
    let Some((model, _serial)) =
        model("an_offered_tool_is_called_with_well_formed_arguments").await
    else {
        return;
    };
    let mut req = weather_question();
    req.tools = vec![weather_tool()];
    let mut announced = Vec::new();
    let c = model
        .complete(&req, &mut |d| {
            if let StreamDelta::ToolCallStarted { name } = d {
                announced.push(name);
            }
        })
        .await
        .unwrap();
    assert_eq!(c.tool_calls.len(), 1, "no call in {:?}", c.text);
    let call = &c.tool_calls[0];
    assert_eq!(call.name, "get_weather");
    let args: Value = serde_json::from_str(&call.arguments).unwrap();
    assert!(args["city"].is_string(), "{args}");
    assert_eq!(c.finish_reason, FinishReason::ToolCalls);
    assert_eq!(announced, ["get_weather"]);
    assert!(!c.text.contains("get_weather"), "{:?}", c.text);
}

#[tokio::test]
async fn a_free_reply_may_open_a_call_only_of_the_tools_it_is_narrowed_to() {
    let Some((model, _serial)) =
        model("a_free_reply_may_open_a_call_only_of_the_tools_it_is_narrowed_to").await
    else {
        return;
    };
    // The question asks for the weather, which this model calls for at once (the test
    // above); the round may call only the clock: once the call opens, the grammar holds it.
    let clock = ToolSpec {
        name: "get_time".into(),
        description: "Get the current time in a city.".into(),
        ..weather_tool()
    };
    let mut req = weather_question();
    req.tools = vec![weather_tool(), clock];
    req.tool_choice = ToolChoice::AutoAmong(vec!["get_time".into()]);
    let c = model.complete(&req, &mut |_| {}).await.unwrap();
    assert_eq!(c.tool_calls.len(), 1, "no call in {:?}", c.text);
    assert_eq!(c.tool_calls[0].name, "get_time");
    let args: Value = serde_json::from_str(&c.tool_calls[0].arguments).unwrap();
    assert!(args["city"].is_string(), "{args}");
    assert_eq!(c.finish_reason, FinishReason::ToolCalls);
}

#[tokio::test]
async fn a_held_calls_string_is_closed_at_its_bound() {
    let Some((model, _serial)) = model("a_held_calls_string_is_closed_at_its_bound").await else {
        return;
    };
    // Asked to copy 3 000 characters into an unbounded string, the model stops at the
    // grammar's bound (2 000): a call looping inside a string closes there too.
    let lines: String = (1..=100)
        .map(|i| format!("Line {i:03}: the cat sat on the mat.\n"))
        .collect();
    let note = ToolSpec {
        name: "write_note".into(),
        description: "Write a note.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": false,
        }),
    };
    let mut req = request(
        vec![Message::user(format!(
            "Call write_note with this text, copied exactly:\n\n{lines}"
        ))],
        1_200,
    );
    req.tools = vec![note];
    let forced = Constraint::ToolCall {
        names: vec!["write_note".into()],
    };
    let (c, _) = model
        .complete_constrained(&req, &forced, &mut |_| {})
        .await
        .unwrap();
    assert_eq!(c.finish_reason, FinishReason::ToolCalls, "{:?}", c.text);
    assert_eq!(c.tool_calls.len(), 1, "{:?}", c.text);
    let args: Value = serde_json::from_str(&c.tool_calls[0].arguments).unwrap();
    let text = args["text"].as_str().unwrap_or_default();
    assert_eq!(text.chars().count(), 2_000, "{text:?}");
    assert!(
        text.starts_with("Line 001: the cat sat on the mat."),
        "{text:?}"
    );
}

#[tokio::test]
async fn a_turns_next_round_reuses_the_cache() {
    let Some((model, _serial)) = model("a_turns_next_round_reuses_the_cache").await else {
        return;
    };
    // A system prompt of a few hundred tokens, as an agent's is (the new part of round 2 is
    // the last reply's end and the follow-up: a few dozen tokens).
    let rules: String = (1..=20)
        .map(|i| format!("Rule {i}: explain step {i} of a solution in one short sentence.\n"))
        .collect();
    let system = Message::system(format!("You are a careful maths tutor.\n{rules}"));
    let mut messages = vec![system, Message::user("What is 17 times 23?")];
    let first = request(messages.clone(), 64);
    let (c1, s1) = model
        .complete_constrained(&first, &Constraint::Free, &mut |_| {})
        .await
        .unwrap();
    messages.push(Message::assistant(c1.text));
    messages.push(Message::user("And 17 times 24?"));
    let second = request(messages, 64);
    let (_, s2) = model
        .complete_constrained(&second, &Constraint::Free, &mut |_| {})
        .await
        .unwrap();
    assert!(s2.prompt_tokens > s1.prompt_tokens);
    // Round 1's whole prompt and its reply are still in the cache.
    assert!(s2.cached_tokens >= s1.prompt_tokens, "{s1:?} {s2:?}");
    let share = f64::from(s2.cached_tokens) / f64::from(s2.prompt_tokens);
    assert!(
        share >= 0.8,
        "round 2 found {} of {} prompt tokens cached",
        s2.cached_tokens,
        s2.prompt_tokens
    );
}

#[tokio::test]
async fn a_dropped_call_stops_its_worker() {
    let Some((model, _serial)) = model("a_dropped_call_stops_its_worker").await else {
        return;
    };
    // Both contexts busy with long replies, each dropped after its first text.
    let long = request(
        vec![Message::user("Write the numbers from 1 to 2000 in words.")],
        3000,
    );
    for _ in 0..2 {
        let (first_text, seen) = tokio::sync::oneshot::channel::<()>();
        let mut first_text = Some(first_text);
        let mut sink = |d: StreamDelta| {
            if matches!(d, StreamDelta::Text(_))
                && let Some(tx) = first_text.take()
            {
                let _ = tx.send(());
            }
        };
        let call = model.complete(&long, &mut sink);
        tokio::select! {
            _ = call => panic!("the long reply finished"),
            _ = seen => {}
        }
    }
    // A new call gets a context at once: the dropped ones stopped at their next token.
    let short = request(vec![Message::user("Say yes.")], 4);
    let started = Instant::now();
    let (_, stats) = model
        .complete_constrained(&short, &Constraint::Free, &mut |_| {})
        .await
        .unwrap();
    assert!(
        stats.queued < Duration::from_secs(2),
        "waited {:?} for a context",
        stats.queued
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[tokio::test]
async fn two_requests_run_at_once() {
    let Some((model, _serial)) = model("two_requests_run_at_once").await else {
        return;
    };
    let a = request(vec![Message::user("Name a fruit.")], 24);
    let b = request(vec![Message::user("Name a colour.")], 24);
    let (mut sink_a, mut sink_b) = (|_| {}, |_| {});
    let (ra, rb) = futures::join!(
        model.complete(&a, &mut sink_a),
        model.complete(&b, &mut sink_b)
    );
    for c in [ra.unwrap(), rb.unwrap()] {
        assert!(!c.text.trim().is_empty());
        assert!(c.usage.completion_tokens >= 1);
    }
}

#[tokio::test]
async fn a_grammar_forces_a_call_or_a_schema() {
    let Some((model, _serial)) = model("a_grammar_forces_a_call_or_a_schema").await else {
        return;
    };
    let mut req = request(vec![Message::user("I am planning a trip to Lisbon.")], 96);
    req.tools = vec![weather_tool()];
    let forced = Constraint::ToolCall {
        names: vec!["get_weather".into()],
    };
    let (c, _) = model
        .complete_constrained(&req, &forced, &mut |_| {})
        .await
        .unwrap();
    assert_eq!(c.tool_calls.len(), 1, "{:?}", c.text);
    assert_eq!(c.tool_calls[0].name, "get_weather");
    let args: Value = serde_json::from_str(&c.tool_calls[0].arguments).unwrap();
    assert!(args["city"].is_string(), "{args}");
    assert_eq!(c.finish_reason, FinishReason::ToolCalls);

    let schema = json!({
        "type": "object",
        "properties": {
            "answer": {"type": "integer"},
            "confidence": {"type": "string", "enum": ["low", "high"]},
        },
        "required": ["answer", "confidence"],
        "additionalProperties": false,
    });
    let req = request(vec![Message::user("What is 6 times 7? Reply in JSON.")], 64);
    let (c, _) = model
        .complete_constrained(&req, &Constraint::JsonSchema(schema), &mut |_| {})
        .await
        .unwrap();
    let value: Value = serde_json::from_str(c.text.trim()).unwrap();
    assert!(value["answer"].is_i64(), "{value}");
    assert!(
        ["low", "high"].contains(&value["confidence"].as_str().unwrap()),
        "{value}"
    );
}

#[tokio::test]
async fn asked_for_text_with_tools_offered_the_model_opens_no_call() {
    let Some((model, _serial)) =
        model("asked_for_text_with_tools_offered_the_model_opens_no_call").await
    else {
        return;
    };
    let mut req = weather_question();
    req.tools = vec![weather_tool()];
    let (free, _) = model
        .complete_constrained(&req, &Constraint::Free, &mut |_| {})
        .await
        .unwrap();
    assert_eq!(free.tool_calls.len(), 1, "free, it calls: {:?}", free.text);
    req.tool_choice = ToolChoice::None;
    let mut streamed = String::new();
    let c = model
        .complete(&req, &mut |d| {
            if let StreamDelta::Text(t) = d {
                streamed.push_str(&t);
            }
        })
        .await
        .unwrap();
    assert!(c.tool_calls.is_empty(), "{c:?}");
    assert!(!c.text.trim().is_empty(), "{c:?}");
    assert_eq!(streamed, c.text);
    let squeezed: String = c.text.split_whitespace().collect();
    assert!(!squeezed.contains(r#"{"name""#), "{:?}", c.text);
    assert!(!c.text.contains("<tool_call>"), "{:?}", c.text);
}

/// Asked for its answer after the last step, the 1.5B model copied the spine's result JSON;
/// a reply asked for as text does not open with a JSON object, whatever the prompt says.
#[tokio::test]
async fn asked_for_text_the_model_does_not_open_with_a_json_object() {
    let Some((model, _serial)) =
        model("asked_for_text_the_model_does_not_open_with_a_json_object").await
    else {
        return;
    };
    let mut req = request(
        vec![Message::user(
            r#"Reply with exactly this JSON object and nothing else: {"status": "step_done", "all_done": true}"#,
        )],
        48,
    );
    let (free, _) = model
        .complete_constrained(&req, &Constraint::Free, &mut |_| {})
        .await
        .unwrap();
    assert!(
        free.text.trim_start().starts_with('{'),
        "free: {:?}",
        free.text
    );
    req.tools = vec![weather_tool()];
    req.tool_choice = ToolChoice::None;
    let c = model.complete(&req, &mut |_| {}).await.unwrap();
    assert!(c.tool_calls.is_empty(), "{c:?}");
    assert!(!c.text.trim().is_empty(), "{c:?}");
    assert!(!c.text.trim_start().starts_with('{'), "{:?}", c.text);
}

#[tokio::test]
async fn a_prompt_beyond_the_context_is_a_context_length_error() {
    let Some((model, _serial)) =
        model("a_prompt_beyond_the_context_is_a_context_length_error").await
    else {
        return;
    };
    let huge = "word ".repeat(6000);
    let err = model
        .complete(&request(vec![Message::user(huge)], 16), &mut |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(err, deepsolve_core::ModelError::ContextLength { .. }),
        "{err}"
    );
}
