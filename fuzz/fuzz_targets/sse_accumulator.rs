//! Bytes → `SseParser` (fed in pieces) → chunk JSON → `StreamAccumulator`, as the client reads
//! a stream: never panics, and the events do not depend on where the network split the bytes.
#![no_main]

use deepsolve_core::{ChatRequest, Message, ToolChoice};
use deepsolve_llm::StreamAccumulator;
use deepsolve_llm::sse::{SseEvent, SseParser};
use deepsolve_llm::wire::ChatChunk;
use libfuzzer_sys::fuzz_target;

/// All events of `pieces`, or `None` when a size cap was hit.
fn events(pieces: &[&[u8]]) -> Option<Vec<SseEvent>> {
    // An event cap small enough for the fuzzer to reach (inputs are a few KiB), large enough
    // for the provider transcripts in `seeds/` to pass.
    let mut parser = SseParser::with_limits(64 * 1024, 1024);
    let mut out = Vec::new();
    for piece in pieces {
        out.extend(parser.feed(piece).ok()?);
    }
    out.extend(parser.finish());
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    // The first byte picks the piece size: the rest is the stream.
    let Some((&size, stream)) = data.split_first() else {
        return;
    };
    let size = usize::from(size % 16) + 1;
    let pieces: Vec<&[u8]> = stream.chunks(size).collect();
    let split = events(&pieces);
    let whole = events(&[stream]);
    assert_eq!(split, whole, "events depend on the split");
    let Some(events) = whole else {
        return;
    };
    let mut acc = StreamAccumulator::new();
    for event in events {
        if event.data.trim() == "[DONE]" {
            break;
        }
        if let Ok(chunk) = serde_json::from_str::<ChatChunk>(&event.data) {
            let _ = acc.apply(&chunk);
        }
    }
    let _ = acc.saw_finish();
    let _ = acc.has_output();
    let request = ChatRequest {
        messages: vec![Message::user("fuzz")],
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        max_tokens: 16,
        temperature: 0.0,
        stop: Vec::new(),
    };
    let completion = acc.finish(&request);
    let mut ids: Vec<&str> = completion
        .tool_calls
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert!(ids.iter().all(|id| !id.is_empty()), "a call without an id");
    assert!(
        completion.tool_calls.iter().all(|c| !c.name.is_empty()),
        "a call without a name"
    );
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), completion.tool_calls.len(), "duplicate call ids");
});
