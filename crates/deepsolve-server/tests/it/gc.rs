//! The workspace collector of a real server: its first pass at start and the periodic ones,
//! what it keeps (a resumable turn's workspace, a running turn's), and that a collected
//! turn's artifacts are still served from the store.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use deepsolve_app::gc::KeptBecause;
use deepsolve_app::{GcOptions, collect_workspaces, new_turn_id};
use deepsolve_core::{Tool, ToolContext, ToolError, ToolOutput, ToolRef, ToolSpec};
use deepsolve_protocol::{Artifact, Language, StoredTurnSpec};
use deepsolve_server::ServerConfig;
use deepsolve_server::gc::{collect_once, spawn_collector};
use deepsolve_store::NewTurn;
use deepsolve_testkit::WellBehaved;
use serde_json::{Value, json};
use tokio::sync::{Notify, watch};

use crate::support::{Options, query_tool_spec, start};

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

fn root_of(s: &crate::support::TestServer) -> PathBuf {
    s.state
        .config
        .workspace_root
        .clone()
        .expect("a workspace root")
}

/// A workspace with one file, everything in it last changed `age` ago.
fn workspace(root: &Path, age: Duration) -> PathBuf {
    let dir = root.join(new_turn_id());
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "x").unwrap();
    for path in [dir.join("notes.txt"), dir.clone()] {
        let file = std::fs::File::open(&path).unwrap();
        file.set_modified(SystemTime::now() - age).unwrap();
    }
    dir
}

fn empty_workspace(root: &Path, id: &str) -> PathBuf {
    let dir = root.join(id);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn wait_gone(path: &Path) {
    for _ in 0..600 {
        if !path.exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{} was not collected", path.display());
}

/// A turn recorded by a server that died: `interrupted`, resumable.
async fn interrupted_turn(s: &crate::support::TestServer) -> String {
    let store = &s.state.store;
    let session = store.create_session("local", "p").await.unwrap();
    let id = new_turn_id();
    let spec = StoredTurnSpec {
        language: Language::En,
        tools: Vec::new(),
        config: serde_json::Map::new(),
        context_window: 32_000,
        history: Vec::new(),
        material: None,
        images: Vec::new(),
    };
    store
        .create_turn(&NewTurn {
            id: id.clone(),
            session_id: session.id,
            user_id: "local".into(),
            problem: "p".into(),
            spec,
            owner: "a-dead-node".into(),
        })
        .await
        .unwrap();
    store.mark_interrupted("a-dead-node").await.unwrap();
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_collector_runs_at_start_then_every_interval() {
    let config = ServerConfig {
        workspace_gc_interval: Duration::from_millis(200),
        ..ServerConfig::default()
    };
    let s = start(
        WellBehaved::new(1),
        Options {
            config: Some(config),
            ..Options::default()
        },
    )
    .await
    .server;
    let root = root_of(&s);
    let empty = empty_workspace(&root, &new_turn_id());
    let old = workspace(&root, 30 * DAY);
    let recent = workspace(&root, DAY);
    let resumable = interrupted_turn(&s).await;
    // Empty and old: only its turn being resumable keeps it.
    let resumable_dir = empty_workspace(&root, &resumable);
    std::fs::File::open(&resumable_dir)
        .unwrap()
        .set_modified(SystemTime::now() - 400 * DAY)
        .unwrap();

    let collector = spawn_collector(&s.state);
    wait_gone(&empty).await;
    wait_gone(&old).await;
    // A later pass takes what appeared since.
    let later = empty_workspace(&root, &new_turn_id());
    wait_gone(&later).await;
    assert!(recent.join("notes.txt").exists());
    assert!(resumable_dir.is_dir());
    collector.stop().await;
    // Stopped: nothing is collected any more.
    let after_stop = empty_workspace(&root, &new_turn_id());
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(after_stop.is_dir());
    s.shutdown().await;
}

/// A work tool that writes `page.html`, reports it, then waits until the test lets it go: its
/// turn is running meanwhile.
struct Gated {
    spec: ToolSpec,
    entered: Arc<Notify>,
    release: watch::Receiver<bool>,
}

#[async_trait]
impl Tool for Gated {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, _args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let dir = ctx
            .workspace
            .as_ref()
            .ok_or_else(|| ToolError::internal("no workspace"))?;
        std::fs::write(dir.join("page.html"), "<p>kept</p>")
            .map_err(|e| ToolError::internal(e.to_string()))?;
        self.entered.notify_one();
        let mut release = self.release.clone();
        let _ = release.wait_for(|go| *go).await;
        let mut out = ToolOutput::ok("wrote page.html");
        out.artifacts.push(Artifact {
            path: "page.html".into(),
            size: 11,
            mime: "text/html".into(),
            id: None,
            url: None,
            rendered_sha256: None,
        });
        Ok(out)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_turn_holds_its_workspace_and_its_artifacts_outlive_it() {
    let entered = Arc::new(Notify::new());
    let (release, released) = watch::channel(false);
    let tool: ToolRef = Arc::new(Gated {
        spec: query_tool_spec("gated_file", "Writes a file, slowly."),
        entered: entered.clone(),
        release: released,
    });
    let config = ServerConfig {
        workspace_retention: Duration::ZERO,
        ..ServerConfig::default()
    };
    let s = start(
        WellBehaved::new(1).with_work_tool(Some("gated_file")),
        Options {
            config: Some(config),
            tools: vec![tool],
            ..Options::default()
        },
    )
    .await
    .server;
    let root = root_of(&s);
    let (turn, _) = s
        .start_turn(
            json!({"problem": "make a page", "tools": ["gated_file"]}),
            None,
        )
        .await;
    tokio::time::timeout(Duration::from_secs(60), entered.notified())
        .await
        .expect("the tool runs");
    let dir = root.join(&turn);
    // Even a collector that knows nothing of the store (another process's `deepsolve gc`
    // without a database) finds the workspace held.
    let blind = collect_workspaces(&root, &GcOptions::new(0)).unwrap();
    let why = blind.kept.iter().find(|k| k.turn_id == turn).map(|k| k.why);
    assert_eq!(why, Some(KeptBecause::InUse));
    let report = collect_once(&s.state, None).await.unwrap();
    assert!(report.removed.is_empty(), "{report:?}");
    assert!(dir.join("page.html").exists());

    release.send(true).unwrap();
    let view = s.wait_done(&turn, None).await;
    let url = view["artifacts"][0]["url"]
        .as_str()
        .expect("an artifact")
        .to_string();
    // Finished, unused, retention zero: collected; the artifact is still served.
    let report = collect_once(&s.state, None).await.unwrap();
    assert!(
        report.removed.iter().any(|r| r.turn_id == turn),
        "{report:?}"
    );
    assert!(!dir.exists());
    let resp = s.http.get(s.url(&url)).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.text().await.unwrap(), "<p>kept</p>");
    s.shutdown().await;
}
