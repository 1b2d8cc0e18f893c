//! A turn's interpreter with everything real but the model: the real sandbox, the real client
//! against the mock model (`deepsolve-testkit`), the engine. A turn that runs no code starts
//! no interpreter; one whose reply streams a `code_execution` call has it started by the
//! stream's announcement, in both tool protocols, and gets the call's result.

use std::sync::Arc;
use std::time::Duration;

use deepsolve_app::{App, AppBuilder};
use deepsolve_core::{EventKind, Protocol, TurnSpec, VecSink};
use deepsolve_settings::LoadOptions;
use deepsolve_testkit::{MockServer, WellBehaved};
use deepsolve_tools::code::CodeExecutionTool;
use deepsolve_tools::{PythonOptions, Sandbox, SandboxConfig, SandboxMode};
use tokio_util::sync::CancellationToken;

struct Rig {
    app: App,
    code: Arc<CodeExecutionTool>,
    sandbox: Sandbox,
    _dir: tempfile::TempDir,
}

/// The app on the real client against `server`, with `code_execution` as its one work tool.
async fn rig(server: &MockServer) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("settings.yaml");
    std::fs::write(&file, "").unwrap();
    let loaded = deepsolve_settings::load(&LoadOptions {
        config_path: Some(file),
        sets: vec![
            format!("llm.base_url={}", server.url()),
            "llm.model=mock-model".into(),
        ],
        ..LoadOptions::default()
    })
    .unwrap();
    let sandbox = Sandbox::detect(SandboxConfig::with_mode(SandboxMode::Bwrap))
        .await
        .unwrap_or_else(|e| panic!("these tests need bubblewrap (scripts/install-deps): {e}"));
    let bare = PythonOptions {
        preload: vec![],
        ..PythonOptions::default()
    };
    let code = Arc::new(CodeExecutionTool::new(
        sandbox.clone(),
        bare,
        Duration::from_secs(30),
    ));
    let app = AppBuilder::new(
        loaded.settings.clone(),
        deepsolve_app::main_client(&loaded).await.unwrap().model(),
    )
    .catalog(&[])
    .extra_tool(code.clone())
    .build()
    .unwrap();
    Rig {
        app,
        code,
        sandbox,
        _dir: dir,
    }
}

/// Runs one turn offered `code_execution`; its events.
async fn turn(rig: &Rig, protocol: Protocol) -> Vec<EventKind> {
    let id = deepsolve_app::new_turn_id();
    let workspace = rig._dir.path().join(&id);
    let mut spec = TurnSpec::new(id, "Compute 6 * 7.");
    spec.tools = rig.app.tools_for_turn(&["code_execution"]).unwrap();
    spec.workspace = Some(workspace);
    spec.protocol = protocol;
    let sink = VecSink::default();
    rig.app
        .engine()
        .run_turn(
            rig.app.model().as_ref(),
            spec,
            &sink,
            CancellationToken::new(),
        )
        .await
        .expect("the turn runs");
    sink.take().into_iter().map(|e| e.kind).collect()
}

fn code_results(events: &[EventKind]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            EventKind::ToolResult { name, content, .. } if name == "code_execution" => {
                Some(content.clone())
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_turn_that_runs_no_code_starts_no_interpreter() {
    let server = MockServer::policy(WellBehaved::new(2).with_work_tool(None));
    let rig = rig(&server).await;
    let events = turn(&rig, Protocol::Native).await;
    assert!(code_results(&events).is_empty());
    assert!(
        events.iter().any(|e| matches!(e, EventKind::Answer { .. })),
        "{events:?}"
    );
    assert_eq!(rig.sandbox.interpreters_started(), 0);
    assert_eq!(rig.code.started_ahead(), 0);
    server.assert_clean();
}

#[tokio::test]
async fn a_streamed_code_call_starts_the_interpreter_on_its_announcement() {
    for protocol in [Protocol::Native, Protocol::Tags] {
        let server = MockServer::policy(WellBehaved::new(2).with_work_tool(Some("code_execution")));
        let rig = rig(&server).await;
        let events = turn(&rig, protocol).await;
        let results = code_results(&events);
        assert_eq!(results, ["[stdout]\nresult: 42"; 2], "{protocol:?}");
        // One interpreter for the turn, started ahead by the first call's announcement; the
        // second call's announcement found it there.
        assert_eq!(rig.sandbox.interpreters_started(), 1, "{protocol:?}");
        assert_eq!(rig.code.started_ahead(), 1, "{protocol:?}");
        server.assert_clean();
    }
}
