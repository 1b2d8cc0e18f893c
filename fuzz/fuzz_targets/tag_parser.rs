//! `deepsolve_core::parse_reply` on arbitrary model text: never panics, and nothing the
//! model wrote from its first `<tool_response` on survives in what the engine keeps.
#![no_main]

use deepsolve_core::parse_reply;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let reply = parse_reply(text);
    assert_eq!(reply.cut_invented, text.contains("<tool_response"));
    assert!(
        !reply.visible.contains("<tool_response"),
        "visible text holds a <tool_response: {:?}",
        reply.visible
    );
});
