//! The server mounts tools by the catalog's one rule: opt-in tools only when a turn asks,
//! and a tool that cannot be mounted here (no sandbox in this harness) or that
//! `tools.disabled` switches off refused by name with the reason and the tools that are
//! available.

use deepsolve_settings::Settings;
use deepsolve_testkit::WellBehaved;
use serde_json::{Value, json};

use crate::support::{Options, start};

fn offered(started: &Value) -> Vec<String> {
    started["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opt_in_tools_are_offered_only_when_asked_for() {
    let s = start(WellBehaved::new(1).with_work_tool(None), Options::default())
        .await
        .server;
    let (plain, _) = s.start_turn(json!({"problem": "p"}), None).await;
    let (asked, _) = s
        .start_turn(json!({"problem": "p", "tools": ["reason"]}), None)
        .await;
    let plain = s.events(&plain, None, None).await;
    let asked = s.events(&asked, None, None).await;
    assert_eq!(plain[0].kind(), "turn_started");
    assert!(!offered(&plain[0].data).contains(&"reason".to_string()));
    assert!(offered(&asked[0].data).contains(&"reason".to_string()));
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_cannot_be_mounted_here_is_refused_with_the_reason() {
    let s = start(WellBehaved::new(1).with_work_tool(None), Options::default())
        .await
        .server;
    let (status, err) = s
        .post(
            "/api/v1/turns",
            json!({"problem": "p", "tools": ["code_execution"]}),
            None,
        )
        .await;
    assert_eq!(status, 422, "{err}");
    assert_eq!(err["error"]["code"], "unknown_tool");
    let message = err["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with("tools not available on this server: code_execution (no sandbox: "),
        "{message}"
    );
    assert!(message.contains("(available: reason"), "{message}");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_tool_is_refused_as_disabled_even_when_asked_for() {
    let mut settings = Settings::default();
    settings.tools.disabled = vec!["reason".into()];
    let options = Options {
        settings,
        ..Options::default()
    };
    let s = start(WellBehaved::new(1).with_work_tool(None), options)
        .await
        .server;
    let (status, err) = s
        .post(
            "/api/v1/turns",
            json!({"problem": "p", "tools": ["reason"]}),
            None,
        )
        .await;
    assert_eq!(status, 422, "{err}");
    assert_eq!(err["error"]["code"], "unknown_tool");
    let message = err["error"]["message"].as_str().unwrap_or("");
    assert!(
        message
            .starts_with("tools not available on this server: reason (disabled by tools.disabled)"),
        "{message}"
    );
    // A turn that asks for nothing still runs, without it.
    let (plain, _) = s.start_turn(json!({"problem": "p"}), None).await;
    let plain = s.events(&plain, None, None).await;
    assert!(!offered(&plain[0].data).contains(&"reason".to_string()));
    s.shutdown().await;
}
