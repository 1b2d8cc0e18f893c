//! The live view of a reply: reasoning split off, call markup hidden and announced, a fenced
//! call held back, other code shown — however the text is cut into pieces.

use deepsolve_core::{StreamDelta, ToolSpec};
use deepsolve_local::ReplyStream;
use serde_json::json;

fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "web_search".into(),
        description: String::new(),
        parameters: json!({"type": "object"}),
    }]
}

/// Stream `text` in pieces of `size` bytes (on char boundaries); (text, reasoning, announced).
fn run(text: &str, size: usize, tools: &[ToolSpec]) -> (String, String, Vec<String>) {
    let mut stream = ReplyStream::new(tools);
    let mut deltas = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = size.min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        deltas.extend(stream.push(&rest[..cut]));
        rest = &rest[cut..];
    }
    deltas.extend(stream.finish());
    let (mut visible, mut reasoning, mut named) = (String::new(), String::new(), Vec::new());
    for delta in deltas {
        match delta {
            StreamDelta::Text(t) => visible.push_str(&t),
            StreamDelta::Reasoning(t) => reasoning.push_str(&t),
            StreamDelta::ToolCallStarted { name } => named.push(name),
            StreamDelta::Retrying { .. } => panic!("no retries locally"),
        }
    }
    (visible, reasoning, named)
}

#[test]
fn every_split_gives_the_same_view() {
    let reply = "<think>plan é</think>Searching.\n```json\n{\"name\": \"web_search\", \"arguments\": {\"q\": \"x\"}}\n```\nAnd code:\n```python\nx = 1\n```\n<tool_call>\n{\"name\": \"web_search\", \"arguments\": {}}\n</tool_call>";
    for size in [1, 2, 3, 5, 8, 13, 1000] {
        let (visible, reasoning, named) = run(reply, size, &tools());
        assert_eq!(reasoning.trim(), "plan é", "size {size}");
        assert_eq!(
            visible, "Searching.\n\nAnd code:\n```python\nx = 1\n```\n",
            "size {size}"
        );
        assert_eq!(named, ["web_search", "web_search"], "size {size}");
    }
}

#[test]
fn without_tools_a_fenced_block_is_plain_text() {
    let reply = "```json\n{\"name\": \"web_search\", \"arguments\": {}}\n```";
    let (visible, _, named) = run(reply, 4, &[]);
    assert_eq!(visible, reply);
    assert!(named.is_empty());
}

#[test]
fn an_unclosed_fence_is_resolved_at_the_end() {
    let (visible, _, named) = run(
        "```json\n{\"name\": \"web_search\", \"arguments\": {",
        3,
        &tools(),
    );
    assert_eq!(visible, "");
    assert_eq!(named, ["web_search"]);
    let (visible, _, _) = run("Cost: 3`", 3, &tools());
    assert_eq!(visible, "Cost: 3`");
}

#[test]
fn a_bare_json_reply_is_held_and_resolved_at_the_end() {
    let call = "{\"name\": \"web_search\", \"arguments\": {\"q\": 1}}";
    for size in [1, 4, 100] {
        let (visible, _, named) = run(call, size, &tools());
        assert_eq!(
            (visible.as_str(), named.as_slice()),
            ("", &["web_search".to_string()][..])
        );
        let answer = "{\"answer\": 42}\nThat is all.";
        let (visible, _, named) = run(answer, size, &tools());
        assert_eq!(visible, answer);
        assert!(named.is_empty());
    }
}
