//! llama.cpp's own server, started by the testkit, serves the project's small real model: the
//! harness the real-model tests of the HTTP path stand on.

use deepsolve_testkit::real::{LlamaServer, server_python, test_model};

#[tokio::test(flavor = "multi_thread")]
async fn llama_server_serves_the_small_model_over_the_openai_wire() {
    let (Some(python), Some(model)) = (server_python(), test_model()) else {
        return;
    };
    let server = tokio::task::spawn_blocking(move || LlamaServer::start(&python, &model, 2048))
        .await
        .unwrap()
        .unwrap();
    let http = reqwest::Client::new();

    // The real context window comes from the server, not from an assumption.
    let props: serde_json::Value = http
        .get(format!("{}/props", server.root()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        props["default_generation_settings"]["n_ctx"], 2048,
        "{props}"
    );

    let reply: serde_json::Value = http
        .post(format!("{}/chat/completions", server.url()))
        .json(&serde_json::json!({
            "messages": [{"role": "user", "content": "Say hello in one word."}],
            "max_tokens": 8,
            "temperature": 0,
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let content = reply["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or("");
    assert!(!content.trim().is_empty(), "{reply}");
    assert!(
        reply["usage"]["completion_tokens"].as_u64().unwrap() <= 8,
        "{reply}"
    );
}
