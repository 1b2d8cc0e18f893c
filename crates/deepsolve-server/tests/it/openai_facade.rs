//! The OpenAI-compatible facade: over raw HTTP, and through the real `openai` Python client
//! (from `DEEPSOLVE_TEST_PYTHON`, which scripts/test sets up).

use std::time::Duration;

use crate::support::{Options, start};
use deepsolve_store::Role;
use deepsolve_testkit::{FnPolicy, Policy, PolicyRequest, Reply, WellBehaved};
use futures::StreamExt;
use serde_json::{Value, json};

fn solver() -> WellBehaved {
    WellBehaved::new(2).with_work_tool(None)
}

/// `data:` payloads of an SSE body.
fn data_lines(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| d.trim().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_completions_answers_and_streams_progress_then_the_answer() {
    let s = start(solver(), Options::default()).await.server;
    let (status, models) = s.get("/v1/models", None).await;
    assert_eq!(status, 200);
    assert_eq!(models["data"][0]["id"], "deepsolve");

    let (status, body) = s
        .post(
            "/v1/chat/completions",
            json!({"model": "deepsolve", "messages": [{"role": "user", "content": "What is 6*7?"}]}),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "chat.completion");
    let answer = body["choices"][0]["message"]["content"]
        .as_str()
        .expect("answer");
    assert!(!answer.is_empty());
    assert!(
        body["choices"][0]["message"]["reasoning_content"]
            .as_str()
            .is_some_and(|r| r.contains("Plan:") && r.contains("✓ S2"))
    );
    assert!(
        body["usage"]["total_tokens"]
            .as_u64()
            .is_some_and(|t| t > 0)
    );

    let resp = s
        .http
        .post(s.url("/v1/chat/completions"))
        .json(&json!({
            "model": "deepsolve",
            "stream": true,
            "stream_options": {"include_usage": true},
            "temperature": 0.7,
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "EARLIER-QUESTION"},
                {"role": "assistant", "content": "EARLIER-ANSWER"},
                {"role": "user", "content": "And the follow-up?"}
            ]
        }))
        .send()
        .await
        .expect("stream");
    assert_eq!(resp.status().as_u16(), 200);
    let lines = data_lines(&resp.text().await.expect("body"));
    assert_eq!(lines.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = lines[..lines.len() - 1]
        .iter()
        .map(|l| serde_json::from_str(l).expect("chunk json"))
        .collect();
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let delta = |field: &str| -> String {
        chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"][field].as_str())
            .collect()
    };
    let reasoning = delta("reasoning_content");
    let content = delta("content");
    assert!(
        reasoning.contains("Plan:") && reasoning.contains("✓ S1"),
        "{reasoning}"
    );
    assert!(!content.is_empty());
    let first_content = chunks
        .iter()
        .position(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|t| !t.is_empty())
        })
        .expect("content");
    let last_reasoning = chunks
        .iter()
        .rposition(|c| c["choices"][0]["delta"]["reasoning_content"].is_string())
        .expect("reasoning");
    assert!(
        last_reasoning < first_content,
        "progress first, then the answer"
    );
    let finish = chunks
        .iter()
        .find(|c| c["choices"][0]["finish_reason"] == "stop");
    assert!(finish.is_some());
    let usage = chunks.last().map(|c| c["usage"]["total_tokens"].clone());
    assert!(usage.and_then(|u| u.as_u64()).is_some_and(|t| t > 0));
    // The conversation reached the model as history.
    assert!(s.mock.requests().iter().any(|r| {
        let body = r.body.to_string();
        body.contains("EARLIER-QUESTION")
            && body.contains("EARLIER-ANSWER")
            && body.contains("And the follow-up?")
    }));

    let (status, err) = s
        .post(
            "/v1/chat/completions",
            json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}),
            None,
        )
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (404, Some("model_not_found"))
    );
    let (status, _) = s
        .post(
            "/v1/chat/completions",
            json!({"model": "deepsolve", "messages": []}),
            None,
        )
        .await;
    assert_eq!(status, 422);
    s.shutdown().await;
}

/// The Python client, or `None` (said on stderr) to skip the test. scripts/test (and so CI)
/// names the venv it installed: there, a missing client is a failure, never a silent skip.
pub(crate) fn python_or_skip() -> Option<String> {
    let python = python_with_openai();
    if python.is_none() {
        assert!(
            std::env::var_os("DEEPSOLVE_TEST_PYTHON").is_none(),
            "DEEPSOLVE_TEST_PYTHON is set but cannot `import openai`"
        );
        eprintln!("skipped: no Python with the openai package (scripts/install-deps installs one)");
    }
    python
}

/// The Python client: a path to a Python that can `import openai`, or `None` to skip.
fn python_with_openai() -> Option<String> {
    let candidates = std::env::var("DEEPSOLVE_TEST_PYTHON")
        .ok()
        .into_iter()
        .chain(["python3".to_string()]);
    for python in candidates {
        let ok = std::process::Command::new(&python)
            .args(["-c", "import openai"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(python);
        }
    }
    None
}

const CLIENT_SCRIPT: &str = r#"
import json, sys
from openai import OpenAI

client = OpenAI(base_url=sys.argv[1], api_key=sys.argv[2], max_retries=0, timeout=60)
models = [m.id for m in client.models.list()]
full = client.chat.completions.create(
    model="deepsolve",
    messages=[{"role": "user", "content": "Solve x + 1 = 2"}],
)
content, reasoning, finish = [], [], None
for chunk in client.chat.completions.create(
    model="deepsolve",
    messages=[{"role": "user", "content": "Solve x + 2 = 5"}],
    stream=True,
):
    if not chunk.choices:
        continue
    delta = chunk.choices[0].delta
    if delta.content:
        content.append(delta.content)
    extra = getattr(delta, "reasoning_content", None) or (delta.model_extra or {}).get("reasoning_content")
    if extra:
        reasoning.append(extra)
    finish = chunk.choices[0].finish_reason or finish
try:
    client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    not_found = None
except Exception as e:
    not_found = getattr(e, "status_code", None)
print(json.dumps({
    "models": models,
    "answer": full.choices[0].message.content,
    "usage": full.usage.total_tokens,
    "streamed": "".join(content),
    "reasoning": "".join(reasoning),
    "finish": finish,
    "not_found": not_found,
}))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_openai_python_client_works_streaming_and_not() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let started = start(
        solver(),
        Options {
            users: vec![("ada", Role::User)],
            ..Options::default()
        },
    )
    .await;
    let s = started.server;
    let base = s.url("/v1");
    let token = started.tokens[0].clone();
    let out = tokio::process::Command::new(&python)
        .args(["-c", CLIENT_SCRIPT, &base, &token])
        .output()
        .await
        .expect("run python");
    assert!(
        out.status.success(),
        "python failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("report json");
    assert_eq!(report["models"], json!(["deepsolve"]));
    assert!(
        report["answer"].as_str().is_some_and(|a| !a.is_empty()),
        "{report}"
    );
    assert!(report["usage"].as_u64().is_some_and(|t| t > 0));
    assert!(
        report["streamed"].as_str().is_some_and(|a| !a.is_empty()),
        "{report}"
    );
    assert!(
        report["reasoning"]
            .as_str()
            .is_some_and(|r| r.contains("Plan:")),
        "{report}"
    );
    assert_eq!(report["finish"], "stop");
    assert_eq!(report["not_found"], 404);
    // A wrong key is refused like any API call.
    let bad = tokio::process::Command::new(&python)
        .args(["-c", CLIENT_SCRIPT, &base, "dst_wrong"])
        .output()
        .await
        .expect("run python");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("401"));
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_client_that_goes_away_cancels_its_turn() {
    let inner = WellBehaved::new(5).with_work_tool(None);
    let slow = FnPolicy(move |req: &PolicyRequest| {
        Reply::delayed(Duration::from_millis(200), inner.reply(req))
    });
    let s = start(slow, Options::default()).await.server;
    let resp = s
        .http
        .post(s.url("/v1/chat/completions"))
        .json(&json!({"model": "deepsolve", "stream": true,
                      "messages": [{"role": "user", "content": "long one"}]}))
        .send()
        .await
        .expect("stream");
    let mut body = resp.bytes_stream();
    let first = body.next().await.expect("a chunk").expect("bytes");
    assert!(String::from_utf8_lossy(&first).contains("chat.completion.chunk"));
    drop(body);
    // The turn behind it is an ordinary, listed turn; it ends cancelled.
    let mut status = String::new();
    for _ in 0..100 {
        let (_, list) = s.get("/api/v1/sessions", None).await;
        let session = list["sessions"][0]["id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let (_, view) = s.get(&format!("/api/v1/sessions/{session}"), None).await;
        status = view["turns"][0]["status"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if status != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, "cancelled");
    s.shutdown().await;
}
