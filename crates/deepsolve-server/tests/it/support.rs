//! A real server on 127.0.0.1 against the testkit's mock model, and a tiny SSE client.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deepsolve_app::AppBuilder;
use deepsolve_core::{ChatModel, Tool, ToolContext, ToolError, ToolOutput, ToolRef, ToolSpec};
use deepsolve_llm::{ClientConfig, OpenAiClient};
use deepsolve_protocol::Artifact;
use deepsolve_server::{AppState, ServerConfig};
use deepsolve_settings::Settings;
use deepsolve_store::{Role, Store, StoreOptions};
use deepsolve_testkit::{MockServer, Policy};
use serde_json::{Value, json};
use tokio::sync::oneshot;

pub(crate) struct TestServer {
    pub base: String,
    pub state: Arc<AppState>,
    pub mock: MockServer,
    pub dir: tempfile::TempDir,
    pub http: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

#[derive(Default)]
pub(crate) struct Options {
    /// Users to create before start (enables token auth): (name, role).
    pub users: Vec<(&'static str, Role)>,
    pub config: Option<ServerConfig>,
    pub tools: Vec<ToolRef>,
    /// The app's settings (default: the defaults).
    pub settings: Settings,
}

pub(crate) struct Started {
    pub server: TestServer,
    /// Clear-text tokens of `Options::users`, in order.
    pub tokens: Vec<String>,
}

pub(crate) async fn start(policy: impl Policy + 'static, options: Options) -> Started {
    let mock = MockServer::policy(policy);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open_sqlite(&dir.path().join("ds.db"), StoreOptions::default())
        .await
        .expect("store");
    let mut tokens = Vec::new();
    for (name, role) in &options.users {
        let user = store.create_user(name, *role).await.expect("user");
        tokens.push(
            store
                .issue_token(&user.id, "test")
                .await
                .expect("token")
                .token,
        );
    }
    let mut config = options.config.unwrap_or_default();
    if config.workspace_root.is_none() {
        config.workspace_root = Some(dir.path().join("work"));
    }
    if config.evals.root.is_none() {
        config.evals.root = Some(dir.path().join("evals"));
    }
    if config.settings_path.is_none() {
        config.settings_path = Some(dir.path().join("settings.yaml"));
    }
    config.sse_poll = Duration::from_millis(500);
    let server = launch(store, mock, dir, config, options.tools, options.settings).await;
    Started { server, tokens }
}

pub(crate) fn model_for(mock: &MockServer) -> Arc<dyn ChatModel> {
    let mut cfg = ClientConfig::new(mock.url(), "mock-model");
    cfg.backoff_base = Duration::from_millis(10);
    Arc::new(OpenAiClient::new(cfg).expect("client"))
}

pub(crate) async fn launch(
    store: Store,
    mock: MockServer,
    dir: tempfile::TempDir,
    config: ServerConfig,
    tools: Vec<ToolRef>,
    settings: Settings,
) -> TestServer {
    // The catalog's tools on the scripted model (no sandbox: no code tools), plus the test's.
    let registry = deepsolve_app::ArtifactStore::new(store.clone(), config.max_artifact_bytes);
    let knowledge = test_knowledge(&settings, &store, dir.path());
    let mut app = AppBuilder::new(settings, model_for(&mock))
        .artifact_registry(registry)
        .knowledge(knowledge);
    for tool in tools {
        app = app.extra_tool(tool);
    }
    let app = Arc::new(app.build().expect("app"));
    let state = deepsolve_server::prepare(store, app, config)
        .await
        .expect("prepare");
    let listener = deepsolve_server::bind("127.0.0.1:0".parse().expect("addr"), state.auth)
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let (stop, stopped) = oneshot::channel::<()>();
    let serve_state = state.clone();
    let task = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stopped.await;
        };
        deepsolve_server::serve(listener, serve_state, shutdown)
            .await
            .expect("serve");
    });
    TestServer {
        base,
        state,
        mock,
        dir,
        http: reqwest::Client::new(),
        stop: Some(stop),
        task: Some(task),
    }
}

/// The knowledge service of a test server: its index in the test's directory, the PDF
/// parser's child from this crate, and a zip-bomb guard small enough to test (4 MiB).
pub(crate) fn test_knowledge(
    settings: &Settings,
    store: &Store,
    dir: &std::path::Path,
) -> deepsolve_kb::Knowledge {
    let extract = deepsolve_kb::extract::Limits {
        max_inflated_bytes: 4 * 1024 * 1024,
        pdf_child: Some(deepsolve_kb::extract::ChildCommand {
            program: env!("CARGO_BIN_EXE_deepsolve-server-pdf").into(),
            args: Vec::new(),
        }),
        ..deepsolve_kb::extract::Limits::default()
    };
    deepsolve_kb::Knowledge::new(store.clone(), dir.join("kb-index"), None)
        .with_limits(extract, deepsolve_app::kb_limits(settings))
}

impl TestServer {
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub(crate) async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        }
    }

    fn auth(&self, req: reqwest::RequestBuilder, token: Option<&str>) -> reqwest::RequestBuilder {
        match token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    pub(crate) async fn post(&self, path: &str, body: Value, token: Option<&str>) -> (u16, Value) {
        let req = self.auth(self.http.post(self.url(path)).json(&body), token);
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// `GET path` as sent back, for a body that is not JSON or a header to read.
    pub(crate) async fn get_response(&self, path: &str, token: Option<&str>) -> reqwest::Response {
        self.auth(self.http.get(self.url(path)), token)
            .send()
            .await
            .expect("request")
    }

    /// `DELETE path` as sent back.
    pub(crate) async fn delete_response(
        &self,
        path: &str,
        token: Option<&str>,
    ) -> reqwest::Response {
        self.auth(self.http.delete(self.url(path)), token)
            .send()
            .await
            .expect("request")
    }

    pub(crate) async fn get(&self, path: &str, token: Option<&str>) -> (u16, Value) {
        let resp = self.get_response(path, token).await;
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    pub(crate) async fn put(&self, path: &str, body: Value, token: Option<&str>) -> (u16, Value) {
        let req = self.auth(self.http.put(self.url(path)).json(&body), token);
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    pub(crate) async fn delete(&self, path: &str, token: Option<&str>) -> u16 {
        self.delete_response(path, token).await.status().as_u16()
    }

    /// Start a turn; returns (turn_id, session_id).
    pub(crate) async fn start_turn(&self, body: Value, token: Option<&str>) -> (String, String) {
        let (status, created) = self.post("/api/v1/turns", body, token).await;
        assert_eq!(status, 201, "{created}");
        (
            created["turn_id"].as_str().expect("turn_id").to_string(),
            created["session_id"]
                .as_str()
                .expect("session_id")
                .to_string(),
        )
    }

    /// Read a turn's SSE stream to its end.
    pub(crate) async fn events(
        &self,
        turn_id: &str,
        last_event_id: Option<u64>,
        token: Option<&str>,
    ) -> Vec<SseEvent> {
        let mut req = self
            .http
            .get(self.url(&format!("/api/v1/turns/{turn_id}/events")));
        if let Some(id) = last_event_id {
            req = req.header("Last-Event-ID", id.to_string());
        }
        let resp = self.auth(req, token).send().await.expect("sse");
        assert_eq!(resp.status().as_u16(), 200);
        let body = tokio::time::timeout(Duration::from_secs(60), resp.text())
            .await
            .expect("the stream ends when the turn does")
            .expect("body");
        parse_sse(&body)
    }

    /// Wait until the turn is no longer running; returns its view.
    pub(crate) async fn wait_done(&self, turn_id: &str, token: Option<&str>) -> Value {
        for _ in 0..600 {
            let (status, turn) = self.get(&format!("/api/v1/turns/{turn_id}"), token).await;
            assert_eq!(status, 200, "{turn}");
            if turn["status"] != "running" {
                return turn;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("turn {turn_id} did not end");
    }
}

#[derive(Debug, Clone)]
pub(crate) struct SseEvent {
    pub id: Option<u64>,
    /// The frame's `event:` name.
    pub event: Option<String>,
    pub data: Value,
}

impl SseEvent {
    pub(crate) fn kind(&self) -> &str {
        self.data["type"].as_str().unwrap_or("")
    }
}

pub(crate) fn parse_sse(body: &str) -> Vec<SseEvent> {
    let mut out = Vec::new();
    for block in body.split("\n\n") {
        let mut id = None;
        let mut event = None;
        let mut data = String::new();
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("id:") {
                id = v.trim().parse().ok();
            } else if let Some(v) = line.strip_prefix("event:") {
                event = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.strip_prefix(' ').unwrap_or(v));
            }
        }
        if !data.is_empty() {
            out.push(SseEvent {
                id,
                event,
                data: serde_json::from_str(&data).expect("event JSON"),
            });
        }
    }
    out
}

/// The seqs of a stream must be gapless from `from`, and equal to their `id:`.
pub(crate) fn assert_gapless(events: &[SseEvent], from: u64) {
    for (i, e) in events.iter().enumerate() {
        let want = from + i as u64;
        assert_eq!(e.id, Some(want), "id of event {i}");
        assert_eq!(e.data["seq"], json!(want), "seq of event {i}");
    }
}

/// A work tool that writes an HTML file into the turn's workspace and reports it as an
/// artifact (the content is hostile on purpose: it must only ever be downloaded).
pub(crate) struct MakeFile {
    spec: ToolSpec,
}

/// The spec of a test work tool that takes one string, `query` (what the scripted model sends).
pub(crate) fn query_tool_spec(name: &str, description: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        parameters: json!({
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
            "additionalProperties": false
        }),
    }
}

pub(crate) const HOSTILE_HTML: &str = "<html><script>alert(document.cookie)</script></html>";

impl MakeFile {
    pub(crate) fn tool() -> ToolRef {
        Arc::new(MakeFile {
            spec: query_tool_spec("make_file", "Writes a file."),
        })
    }
}

#[async_trait]
impl Tool for MakeFile {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, _args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let dir = ctx
            .workspace
            .as_ref()
            .ok_or_else(|| ToolError::internal("no workspace"))?;
        std::fs::write(dir.join("page.html"), HOSTILE_HTML)
            .map_err(|e| ToolError::internal(e.to_string()))?;
        let mut out = ToolOutput::ok("wrote page.html");
        out.artifacts.push(Artifact {
            path: "page.html".into(),
            size: HOSTILE_HTML.len() as u64,
            mime: "text/html".into(),
            id: None,
            url: None,
            rendered_sha256: None,
        });
        Ok(out)
    }
}
