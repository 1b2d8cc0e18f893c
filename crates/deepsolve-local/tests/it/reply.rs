//! Reading a finished reply: Hermes blocks and fenced JSON become calls; anything doubtful
//! is left for the engine.

use deepsolve_core::{ToolChoice, ToolSpec};
use deepsolve_local::read_reply;
use serde_json::{Value, json};

fn tools() -> Vec<ToolSpec> {
    ["web_search", "solve_plan"]
        .into_iter()
        .map(|name| ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        })
        .collect()
}

fn args(s: &str) -> Value {
    serde_json::from_str(s).unwrap()
}

#[test]
fn a_hermes_block_becomes_a_call() {
    let r = read_reply(
        "<think>search first</think>Let me look.\n<tool_call>\n{\"name\": \"web_search\", \"arguments\": {\"query\": \"x\"}}\n</tool_call>",
        &tools(),
        &ToolChoice::Auto,
    );
    assert_eq!(r.text, "Let me look.");
    assert_eq!(r.reasoning, "search first");
    assert_eq!(r.calls.len(), 1);
    assert_eq!(r.calls[0].name, "web_search");
    assert_eq!(args(&r.calls[0].arguments), json!({"query": "x"}));
}

#[test]
fn a_fenced_json_call_of_an_offered_tool_becomes_a_call() {
    let r = read_reply(
        "I will search.\n```json\n{\"name\": \"web_search\", \"arguments\": {\"query\": \"x\"}}\n```\n",
        &tools(),
        &ToolChoice::Auto,
    );
    assert_eq!(r.text, "I will search.");
    assert_eq!(r.calls.len(), 1);
    assert_eq!(args(&r.calls[0].arguments), json!({"query": "x"}));
    // A list of calls, a bare fence, arguments as a string.
    let r = read_reply(
        "```\n[{\"name\": \"web_search\", \"arguments\": \"{\\\"query\\\": \\\"y\\\"}\"}, {\"name\": \"solve_plan\", \"arguments\": {}}]\n```",
        &tools(),
        &ToolChoice::Auto,
    );
    let names: Vec<&str> = r.calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["web_search", "solve_plan"]);
    assert_eq!(args(&r.calls[0].arguments), json!({"query": "y"}));
    assert_ne!(r.calls[0].id, r.calls[1].id);
}

#[test]
fn other_code_stays_text() {
    for raw in [
        "```json\n{\"name\": \"not_a_tool\", \"arguments\": {}}\n```",
        "```python\nprint({\"name\": \"web_search\"})\n```",
        "```json\n{\"answer\": 42}\n```",
        "Plain answer.",
    ] {
        let r = read_reply(raw, &tools(), &ToolChoice::Auto);
        assert_eq!(r.text, raw);
        assert!(r.calls.is_empty(), "{raw}");
    }
}

#[test]
fn without_callable_tools_nothing_is_read() {
    let raw = "<tool_call>{\"name\": \"web_search\", \"arguments\": {}}</tool_call>";
    assert!(
        read_reply(raw, &tools(), &ToolChoice::None)
            .calls
            .is_empty()
    );
    assert!(read_reply(raw, &[], &ToolChoice::Auto).calls.is_empty());
    assert_eq!(read_reply(raw, &[], &ToolChoice::Auto).text, raw);
}

#[test]
fn doubtful_replies_go_to_the_engine_untouched() {
    for raw in [
        // A malformed block beside a good one: the engine reports it to the model.
        "<tool_call>{\"name\": \"web_search\", \"arguments\": {}}</tool_call><tool_call>oops</tool_call>",
        // An invented result: the engine cuts it and warns.
        "<tool_call>{\"name\": \"web_search\", \"arguments\": {}}</tool_call><tool_response>made up",
    ] {
        let r = read_reply(raw, &tools(), &ToolChoice::Auto);
        assert_eq!(r.text, raw);
        assert!(r.calls.is_empty());
    }
}

#[test]
fn a_reply_that_is_only_a_call_becomes_one() {
    let r = read_reply(
        "{\"name\": \"web_search\", \"arguments\": {\"query\": \"x\"}}",
        &tools(),
        &ToolChoice::Auto,
    );
    assert_eq!(r.text, "");
    assert_eq!(r.calls.len(), 1);
    assert_eq!(args(&r.calls[0].arguments), json!({"query": "x"}));
    // JSON that is not a call of an offered tool stays the answer.
    let raw = "{\"answer\": 42}";
    assert_eq!(read_reply(raw, &tools(), &ToolChoice::Auto).text, raw);
}
