//! The Qwen2.5-Coder template (as shipped in the 0.5B GGUF) rendered with tools, calls and
//! results, checked against the text Hugging Face's renderer produces for it.

use deepsolve_core::{Message, ToolCall, ToolSpec};
use deepsolve_local::{ChatTemplate, TemplateError};
use serde_json::json;

const QWEN: &str = include_str!("fixtures/qwen2.5-coder-instruct.jinja");

fn qwen() -> ChatTemplate {
    ChatTemplate::new(QWEN, "<|endoftext|>", "<|im_end|>").unwrap()
}

fn search_tool() -> ToolSpec {
    ToolSpec {
        name: "web_search".into(),
        description: "Search the web.".into(),
        parameters: json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
    }
}

#[test]
fn a_plain_conversation_renders_as_chatml() {
    let text = qwen()
        .render(&[Message::system("Be brief."), Message::user("Hi")], &[])
        .unwrap();
    assert_eq!(
        text,
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    );
}

#[test]
fn tools_are_listed_as_python_json_in_their_key_order() {
    let text = qwen()
        .render(
            &[Message::system("S"), Message::user("Find it")],
            &[search_tool()],
        )
        .unwrap();
    // json.dumps' separators, the keys in OpenAI's order (type before function; name,
    // description, parameters), nothing HTML-escaped. (Inside the schema the keys are sorted:
    // that is how the workspace's serde_json keeps a `Value`.)
    let line = r#"{"type": "function", "function": {"name": "web_search", "description": "Search the web.", "parameters": {"properties": {"query": {"type": "string"}}, "required": ["query"], "type": "object"}}}"#;
    assert!(
        text.contains(&format!("<tools>\n{line}\n</tools>")),
        "{text}"
    );
    assert!(
        text.starts_with("<|im_start|>system\nS\n\n# Tools\n"),
        "{text}"
    );
    assert!(text.ends_with("<|im_start|>user\nFind it<|im_end|>\n<|im_start|>assistant\n"));
}

#[test]
fn calls_and_results_render_as_the_model_was_trained() {
    let call = ToolCall {
        id: "c1".into(),
        name: "web_search".into(),
        arguments: r#"{"query":"a < b"}"#.into(),
    };
    let messages = [
        Message::system("S"),
        Message::user("Q"),
        Message::assistant_with_calls("Looking.", vec![call.clone()], None),
        Message::tool_result(&call, "result one"),
        Message::tool_result(&call, "result two"),
    ];
    let text = qwen().render(&messages, &[search_tool()]).unwrap();
    let want = "<|im_start|>assistant\nLooking.\n<tool_call>\n{\"name\": \"web_search\", \"arguments\": {\"query\": \"a < b\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nresult one\n</tool_response>\n<tool_response>\nresult two\n</tool_response><|im_end|>\n<|im_start|>assistant\n";
    assert!(text.ends_with(want), "{text}");
}

#[test]
fn arguments_that_are_not_json_stay_a_string() {
    let call = ToolCall {
        id: "c1".into(),
        name: "web_search".into(),
        arguments: "not json".into(),
    };
    let text = qwen()
        .render(
            &[
                Message::user("Q"),
                Message::assistant_with_calls("", vec![call], None),
            ],
            &[search_tool()],
        )
        .unwrap();
    assert!(text.contains(r#""arguments": "not json"}"#), "{text}");
}

#[test]
fn template_helpers_work() {
    let source = "{{ bos_token }}{% for m in messages %}{{ m.content.strip().upper() }}|{{ m | tojson(indent=2) | length > 0 }}{% endfor %}{% if not tools %}none{% endif %}";
    let template = ChatTemplate::new(source, "<s>", "</s>").unwrap();
    let text = template.render(&[Message::user("  hi  ")], &[]).unwrap();
    // Booleans print as Python prints them.
    assert_eq!(text, "<s>HI|Truenone");
}

#[test]
fn a_template_that_raises_or_does_not_compile_is_a_clear_error() {
    let raising =
        ChatTemplate::new("{{ raise_exception('roles must alternate') }}", "", "").unwrap();
    let err = raising.render(&[Message::user("x")], &[]).unwrap_err();
    assert!(
        matches!(&err, TemplateError::Render(m) if m.contains("roles must alternate")),
        "{err}"
    );
    let err = ChatTemplate::new("{% for %}", "", "").unwrap_err();
    assert!(matches!(err, TemplateError::Compile(_)), "{err}");
}
