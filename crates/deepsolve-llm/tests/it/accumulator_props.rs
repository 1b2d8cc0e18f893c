//! Property tests of the delta accumulator: whatever shape a server streams tool
//! calls in, and wherever the network splits the bytes, the calls come back exactly.

use std::collections::HashSet;

use deepsolve_core::{ChatRequest, Message, StreamDelta, ToolCall, ToolChoice};
use deepsolve_llm::sse::SseParser;
use deepsolve_llm::wire::ChatChunk;
use deepsolve_llm::{StreamAccumulator, synthesize_call_id};
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Map, Value, json};

/// A call as generated: `id: None` means the server never sends one.
#[derive(Debug, Clone)]
struct GenCall {
    id: Option<String>,
    name: String,
    arguments: String,
    /// Where the arguments text is split into fragments.
    cuts: Vec<Index>,
}

/// How the server streams.
#[derive(Debug, Clone, Copy)]
struct Shape {
    with_index: bool,
    /// `id` and `name` in every chunk of a call, or only in its first.
    repeat: bool,
}

fn json_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        "\\PC{0,12}".prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
    ]
}

fn gen_call() -> impl Strategy<Value = (Option<()>, String, String, Vec<Index>)> {
    (
        proptest::option::of(Just(())),
        "[a-zA-Z_][a-zA-Z0-9_]{0,15}",
        prop::collection::btree_map("[a-z]{1,6}", json_value(), 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>()).to_string()),
        prop::collection::vec(any::<Index>(), 0..6),
    )
}

fn gen_calls() -> impl Strategy<Value = Vec<GenCall>> {
    prop::collection::vec(gen_call(), 0..5).prop_map(|calls| {
        calls
            .into_iter()
            .enumerate()
            .map(|(i, (has_id, name, arguments, cuts))| GenCall {
                id: has_id.map(|_| format!("call_{i}_{name}")),
                name,
                arguments,
                cuts,
            })
            .collect()
    })
}

/// Splits `text` into non-empty fragments at char boundaries chosen by `cuts`.
fn fragments(text: &str, cuts: &[Index]) -> Vec<String> {
    let boundaries: Vec<usize> = text.char_indices().map(|(i, _)| i).skip(1).collect();
    let mut points: Vec<usize> = if boundaries.is_empty() {
        Vec::new()
    } else {
        cuts.iter().map(|c| *c.get(&boundaries)).collect()
    };
    points.sort_unstable();
    points.dedup();
    let mut out = Vec::new();
    let mut start = 0;
    for point in points.into_iter().chain([text.len()]) {
        out.push(text[start..point].to_string());
        start = point;
    }
    out
}

/// The wire deltas of one call, in order.
fn call_deltas(position: usize, call: &GenCall, shape: Shape) -> Vec<Value> {
    fragments(&call.arguments, &call.cuts)
        .into_iter()
        .enumerate()
        .map(|(n, fragment)| {
            let first = n == 0;
            let mut function = json!({ "arguments": fragment });
            if first || shape.repeat {
                function["name"] = json!(call.name);
            }
            let mut entry = json!({ "type": "function", "function": function });
            if shape.with_index {
                entry["index"] = json!(position);
            }
            if let Some(id) = call.id.as_ref().filter(|_| first || shape.repeat) {
                entry["id"] = json!(id);
            }
            entry
        })
        .collect()
}

/// All deltas; with an index, calls may be interleaved (the index keeps them apart).
fn all_deltas(calls: &[GenCall], shape: Shape, interleave: &[Index]) -> Vec<Value> {
    let mut per_call: Vec<std::collections::VecDeque<Value>> = calls
        .iter()
        .enumerate()
        .map(|(i, c)| call_deltas(i, c, shape).into())
        .collect();
    let mut out = Vec::new();
    let mut picks = interleave.iter();
    loop {
        let open: Vec<usize> = (0..per_call.len())
            .filter(|&i| !per_call[i].is_empty())
            .collect();
        if open.is_empty() {
            return out;
        }
        let pick = match picks.next() {
            Some(index) if shape.with_index => *index.get(&open),
            _ => open[0],
        };
        out.extend(per_call[pick].pop_front());
    }
}

/// The SSE body: one chunk per delta, a finish chunk, `[DONE]`.
fn sse_body(deltas: &[Value]) -> Vec<u8> {
    let mut body = String::new();
    for delta in deltas {
        let chunk = json!({"choices": [{"index": 0, "delta": {"tool_calls": [delta]},
            "finish_reason": null}]});
        body.push_str(&format!("data: {chunk}\n\n"));
    }
    body.push_str(
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
    );
    body.push_str("data: [DONE]\n\n");
    body.into_bytes()
}

/// Feeds `body` split at `cuts` through the SSE parser and the accumulator.
fn accumulate(body: &[u8], cuts: &[Index]) -> Vec<ToolCall> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
    points.sort_unstable();
    let mut parser = SseParser::new();
    let mut acc = StreamAccumulator::new();
    let mut start = 0;
    let mut events = Vec::new();
    for point in points.into_iter().chain([body.len()]) {
        events.extend(parser.feed(&body[start..point]).expect("within limits"));
        start = point;
    }
    events.extend(parser.finish());
    for event in events {
        if event.data == "[DONE]" {
            break;
        }
        let chunk: ChatChunk = serde_json::from_str(&event.data).expect("valid chunk");
        let deltas = acc.apply(&chunk).expect("within the cap");
        assert!(
            deltas
                .iter()
                .all(|d| matches!(d, StreamDelta::ToolCallStarted { .. })),
            "tool calls are not visible text: {deltas:?}"
        );
    }
    let request = ChatRequest {
        messages: vec![Message::user("x")],
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        max_tokens: 1,
        temperature: 0.0,
        stop: Vec::new(),
        response_format: None,
    };
    acc.finish(&request).tool_calls
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn tool_calls_survive_any_streaming_shape_and_split(
        calls in gen_calls(),
        with_index in any::<bool>(),
        repeat in any::<bool>(),
        interleave in prop::collection::vec(any::<Index>(), 0..40),
        byte_cuts in prop::collection::vec(any::<Index>(), 0..12),
    ) {
        let shape = Shape { with_index, repeat };
        let body = sse_body(&all_deltas(&calls, shape, &interleave));
        let got = accumulate(&body, &byte_cuts);

        prop_assert_eq!(got.len(), calls.len());
        let mut ids = HashSet::new();
        for (got, want) in got.iter().zip(&calls) {
            prop_assert_eq!(&got.name, &want.name);
            prop_assert_eq!(&got.arguments, &want.arguments);
            match &want.id {
                Some(id) => prop_assert_eq!(&got.id, id),
                None => prop_assert!(got.id.starts_with("call_ds_"), "{}", got.id),
            }
            prop_assert!(ids.insert(got.id.clone()), "duplicate id {}", got.id);
        }
    }
}

#[test]
fn synthesised_ids_are_unique_across_threads() {
    let handles: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(|| (0..2000).map(|_| synthesize_call_id()).collect::<Vec<_>>()))
        .collect();
    let mut all = HashSet::new();
    for handle in handles {
        for id in handle.join().expect("thread") {
            assert!(id.starts_with("call_ds_"));
            assert!(all.insert(id), "duplicate synthesised id");
        }
    }
    assert_eq!(all.len(), 8000);
}
