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

/// A server whose every turn (the facade's included) is offered `make_figures`, which draws a
/// PNG, an HTML page and an SVG.
async fn figure_server(
    users: Vec<(&'static str, Role)>,
    config: Option<deepsolve_server::ServerConfig>,
) -> crate::support::Started {
    let mut settings = deepsolve_settings::Settings::default();
    settings.tools.enabled = vec!["make_figures".into()];
    start(
        WellBehaved::new(1).with_work_tool(Some("make_figures")),
        Options {
            users,
            config,
            tools: vec![crate::artifacts::make_figures()],
            settings,
        },
    )
    .await
}

/// The link of `[name](…)` (or `![name](…)`) in `answer`.
fn link_to(answer: &str, name: &str) -> Option<String> {
    let start = answer.find(&format!("[{name}]("))? + name.len() + 3;
    let end = start + answer[start..].find(')')?;
    Some(answer[start..end].to_string())
}

async fn fetch(http: &reqwest::Client, url: &str) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let resp = http.get(url).send().await.expect("fetch");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.bytes().await.expect("body").to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_links_the_turn_s_files_with_signed_links_a_browser_can_open() {
    let started = figure_server(vec![("ada", Role::User)], None).await;
    let s = &started.server;
    let token = started.tokens[0].as_str();
    let ask = json!({"model": "deepsolve", "messages": [{"role": "user", "content": "Plot it"}]});
    let (status, body) = s
        .post("/v1/chat/completions", ask.clone(), Some(token))
        .await;
    assert_eq!(status, 200, "{body}");
    let answer = body["choices"][0]["message"]["content"]
        .as_str()
        .expect("answer")
        .to_string();
    assert!(answer.contains("\n\nFiles\n"), "{answer}");
    // A figure is a Markdown image; other files are links; all absolute, at this server.
    assert!(answer.contains("![plot.png]("), "{answer}");
    assert!(answer.contains("\n[page.html](") && !answer.contains("![page.html]"));
    assert!(answer.contains("\n[figure.svg](") && !answer.contains("![figure.svg]"));
    let png = link_to(&answer, "plot.png").expect("png link");
    assert!(
        png.starts_with(&format!("{}/api/v1/artifacts/art_", s.base)) && png.contains("&sig="),
        "{png}"
    );

    // No token: the link is the proof. The image shows inline, with the usual guards.
    let anonymous = reqwest::Client::new();
    let (status, headers, bytes) = fetch(&anonymous, &png).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "image/png");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(
        headers["content-security-policy"],
        "sandbox; default-src 'none'"
    );
    assert_eq!(bytes, crate::artifacts::PNG);
    // Anything else downloads, sandboxed, whatever it claims to be.
    for name in ["page.html", "figure.svg"] {
        let url = link_to(&answer, name).expect("link");
        let (status, headers, _) = fetch(&anonymous, &url).await;
        assert_eq!(status, 200, "{name}");
        let disposition = headers["content-disposition"].to_str().unwrap_or_default();
        assert!(
            disposition.starts_with("attachment;"),
            "{name}: {disposition}"
        );
        assert_eq!(
            headers["content-security-policy"],
            "default-src 'none'; sandbox"
        );
    }
    // A link altered in any part opens nothing, and says no more than a missing file.
    let flip = |url: &str, from: &str, to: &str| url.replacen(from, to, 1);
    let sig_at = png.find("&sig=").expect("sig") + 5;
    let mut forged = png.clone();
    let last = if forged.ends_with('0') { "1" } else { "0" };
    forged.replace_range(forged.len() - 1.., last);
    let exp = png
        .split("&exp=")
        .nth(1)
        .and_then(|r| r.split('&').next())
        .expect("exp");
    let later = (exp.parse::<u64>().expect("exp number") + 1).to_string();
    for bad in [
        forged,
        flip(&png, &format!("exp={exp}"), &format!("exp={later}")),
        flip(&png, "u=", "u=x"),
        png[..sig_at].to_string(),
        png.split('?').next().expect("path").to_string(),
    ] {
        let (status, _, body) = fetch(&anonymous, &bad).await;
        assert!(status == 404 || status == 400, "{bad}: {status}");
        let body = String::from_utf8_lossy(&body);
        assert!(
            !body.contains("signature") && !body.contains("expired"),
            "{body}"
        );
    }

    // Streaming: the same block follows the answer in the content deltas.
    let mut streamed = ask.clone();
    streamed["stream"] = json!(true);
    let resp = s
        .http
        .post(s.url("/v1/chat/completions"))
        .bearer_auth(token)
        .json(&streamed)
        .send()
        .await
        .expect("stream");
    let text = resp.text().await.expect("body");
    let content: String = data_lines(&text)
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(String::from)
        })
        .collect();
    let streamed_png = link_to(&content, "plot.png").expect("streamed link");
    assert_eq!(fetch(&anonymous, &streamed_png).await.0, 200);

    // A Host header the server cannot vouch for gets no links: names only.
    let resp = s
        .http
        .post(s.url("/v1/chat/completions"))
        .bearer_auth(token)
        .header("host", "evil.example")
        .json(&ask)
        .send()
        .await
        .expect("spoofed host");
    let body: Value = resp.json().await.expect("json");
    let answer = body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(answer.contains("Files\n- plot.png\n"), "{answer}");
    assert!(
        !answer.contains("evil.example") && !answer.contains("sig="),
        "{answer}"
    );
    started.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_links_start_with_the_configured_public_url() {
    let config = deepsolve_server::ServerConfig {
        public_url: Some(
            deepsolve_server::PublicUrl::parse("https://solve.example.com/ds/").expect("url"),
        ),
        ..deepsolve_server::ServerConfig::default()
    };
    let started = figure_server(Vec::new(), Some(config)).await;
    let s = &started.server;
    let ask = json!({"model": "deepsolve", "messages": [{"role": "user", "content": "Plot it"}]});
    let (status, body) = s.post("/v1/chat/completions", ask, None).await;
    assert_eq!(status, 200, "{body}");
    let answer = body["choices"][0]["message"]["content"]
        .as_str()
        .expect("answer");
    let png = link_to(answer, "plot.png").expect("link");
    let prefix = "https://solve.example.com/ds/api/v1/artifacts/";
    assert!(png.starts_with(prefix), "{png}");
    // The same path and query on this server opens the file: the origin is only a prefix.
    let local = format!("{}/api/v1/artifacts/{}", s.base, &png[prefix.len()..]);
    assert_eq!(fetch(&reqwest::Client::new(), &local).await.0, 200);
    started.server.shutdown().await;
}

const FIGURE_SCRIPT: &str = r#"
import json, re, sys, urllib.request
from openai import OpenAI

client = OpenAI(base_url=sys.argv[1], api_key=sys.argv[2], max_retries=0, timeout=60)
answer = client.chat.completions.create(
    model="deepsolve",
    messages=[{"role": "user", "content": "Plot y = x^2"}],
).choices[0].message.content
image = re.search(r"!\[plot\.png\]\((\S+?)\)", answer).group(1)
# What a chat UI's <img> does: a plain GET, no Authorization header.
with urllib.request.urlopen(image) as resp:
    print(json.dumps({"status": resp.status, "type": resp.headers["Content-Type"],
                      "png": resp.read(8) == b"\x89PNG\r\n\x1a\n"}))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_python_client_gets_a_figure_its_chat_ui_can_show() {
    let Some(python) = python_with_openai() else {
        assert!(
            std::env::var_os("DEEPSOLVE_TEST_PYTHON").is_none(),
            "DEEPSOLVE_TEST_PYTHON is set but cannot `import openai`"
        );
        eprintln!("skipped: no Python with the openai package (scripts/install-deps installs one)");
        return;
    };
    let started = figure_server(vec![("ada", Role::User)], None).await;
    let s = &started.server;
    let out = tokio::process::Command::new(&python)
        .args(["-c", FIGURE_SCRIPT, &s.url("/v1"), &started.tokens[0]])
        .output()
        .await
        .expect("run python");
    assert!(
        out.status.success(),
        "python failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("report json");
    assert_eq!(
        report,
        json!({"status": 200, "type": "image/png", "png": true})
    );
    started.server.shutdown().await;
}
