//! `deepsolve_core::parse_reply` on arbitrary model text: never panics, and nothing the
//! model wrote from its first `<tool_response` on survives in what the engine keeps — not
//! even one that only appears once its `<think>` sections are taken out
//! (`<tool_res<think>…</think>ponse>`: cut as well, so `cut_invented` may be set without the
//! raw text holding the tag).
#![no_main]

use deepsolve_core::parse_reply;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let reply = parse_reply(text);
    if text.contains("<tool_response") {
        assert!(reply.cut_invented, "an invented response was not cut");
    }
    assert!(
        !reply.visible.contains("<tool_response"),
        "visible text holds a <tool_response: {:?}",
        reply.visible
    );
});
