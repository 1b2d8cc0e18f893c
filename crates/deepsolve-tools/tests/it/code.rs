//! `code_execution` and `exec` through the `Tool` interface, against the real sandbox: the
//! per-turn interpreter, artifacts, timeouts that keep partial output, restarts that say the
//! state is gone, and turns that cannot see each other.

use std::path::{Path, PathBuf};
use std::time::Duration;

use deepsolve_core::{Language, SolveConfig, Tool, ToolContext, ToolOutput};
use deepsolve_tools::code::*;
use deepsolve_tools::*;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

async fn sandbox() -> Sandbox {
    Sandbox::detect(SandboxConfig::with_mode(SandboxMode::Bwrap))
        .await
        .unwrap_or_else(|e| panic!("these tests need bubblewrap (scripts/install-deps): {e}"))
}

fn bare() -> PythonOptions {
    PythonOptions {
        preload: vec![],
        ..PythonOptions::default()
    }
}

fn ctx(turn: &str, workspace: Option<&Path>) -> ToolContext {
    ToolContext {
        turn_id: turn.into(),
        session_id: None,
        user_id: None,
        workspace: workspace.map(Path::to_path_buf),
        call_id: "c".into(),
        language: Language::En,
        cancel: CancellationToken::new(),
        deadline: None,
        ..ToolContext::default()
    }
}

async fn call(tool: &dyn Tool, args: Value, ctx: &ToolContext) -> ToolOutput {
    tool.run(args, ctx).await.expect("the tool runs")
}

fn scratch() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("turn-a");
    let b = dir.path().join("turn-b");
    (dir, a, b)
}

fn no_process_with(needle: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().all(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| !String::from_utf8_lossy(&c).contains(needle))
            .unwrap_or(true)
    })
}

#[tokio::test]
async fn a_turn_keeps_its_names_and_gets_its_figures_as_artifacts() {
    let tool = CodeExecutionTool::new(sandbox().await, bare(), Duration::from_secs(30));
    let (_d, ws, _) = scratch();
    let c = ctx("t1", Some(&ws));
    tool.turn_started(&c).await;
    let one = call(
        &tool,
        json!({"code": "import sympy as sp\nx = sp.symbols('x')\nf = x**2 - 5*x + 6\nf"}),
        &c,
    )
    .await;
    assert!(one.ok, "{}", one.content);
    assert_eq!(one.content, "[value]\nx**2 - 5*x + 6");
    let two = call(&tool, json!({"code": "print(sp.solve(f, x))"}), &c).await;
    assert_eq!(two.content, "[stdout]\n[2, 3]");
    let three = call(
        &tool,
        json!({"code": "import matplotlib.pyplot as plt\nimport numpy as np\nxs = np.linspace(0, 5, 50)\nplt.plot(xs, [float(f.subs(x, v)) for v in xs])"}),
        &c,
    )
    .await;
    assert!(three.ok, "{}", three.content);
    assert_eq!(three.artifacts.len(), 1, "{:?}", three.artifacts);
    let png = &three.artifacts[0];
    assert_eq!(
        (png.path.as_str(), png.mime.as_str()),
        ("figure_1.png", "image/png")
    );
    assert!(png.size > 1000);
    assert!(
        three
            .content
            .contains("[files written]\nfigure_1.png (image/png,"),
        "{}",
        three.content
    );
    assert!(ws.join("figure_1.png").is_file());
    let err = call(&tool, json!({"code": "undefined_name"}), &c).await;
    assert!(!err.ok);
    assert!(
        err.content
            .contains("NameError: name 'undefined_name' is not defined")
    );
    tool.turn_finished(&c).await;
}

#[tokio::test]
async fn turns_do_not_share_names_or_files() {
    let tool = CodeExecutionTool::new(sandbox().await, bare(), Duration::from_secs(30));
    let (_d, a, b) = scratch();
    let (ca, cb) = (ctx("ta", Some(&a)), ctx("tb", Some(&b)));
    tool.turn_started(&ca).await;
    tool.turn_started(&cb).await;
    call(
        &tool,
        json!({"code": "secret = 'a'\nopen('a.txt', 'w').write('a')"}),
        &ca,
    )
    .await;
    let seen = call(
        &tool,
        json!({"code": "import os\nprint('secret' in globals(), os.listdir('.'))"}),
        &cb,
    )
    .await;
    assert_eq!(seen.content, "[stdout]\nFalse []");
    tool.turn_finished(&ca).await;
    tool.turn_finished(&cb).await;
}

#[tokio::test]
async fn a_timeout_keeps_partial_output_and_a_kill_is_reported_next_call() {
    let tool = CodeExecutionTool::new(sandbox().await, bare(), Duration::from_secs(30));
    let (_d, ws, _) = scratch();
    let c = ctx("t2", Some(&ws));
    tool.turn_started(&c).await;
    call(&tool, json!({"code": "kept = 1"}), &c).await;
    let soft = call(
        &tool,
        json!({"code": "import time\nprint('tick')\ntime.sleep(100)", "timeout_s": 1}),
        &c,
    )
    .await;
    assert!(!soft.ok);
    assert!(
        soft.content.contains("timed out after 1s"),
        "{}",
        soft.content
    );
    assert!(soft.content.contains("names are kept") && soft.content.contains("[stdout]\ntick"));
    let still = call(&tool, json!({"code": "kept"}), &c).await;
    assert_eq!(still.content, "[value]\n1");

    let hard = call(
        &tool,
        json!({"code": "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('spinning')\nwhile True: pass", "timeout_s": 1}),
        &c,
    )
    .await;
    assert!(
        hard.content.contains("timed out after 1s") && hard.content.contains("was killed"),
        "{}",
        hard.content
    );
    assert!(hard.content.contains("[stdout]\nspinning"));
    let next = call(
        &tool,
        json!({"code": "print('fresh')\n'kept' in globals()"}),
        &c,
    )
    .await;
    assert!(next.content.starts_with("[note] The Python interpreter was restarted (the previous call ran past 1s and was killed)"), "{}", next.content);
    assert!(
        next.content.ends_with("[stdout]\nfresh\n[value]\nFalse"),
        "{}",
        next.content
    );

    let crash = call(&tool, json!({"code": "import os\nos._exit(1)"}), &c).await;
    assert!(
        crash.content.contains("the interpreter crashed"),
        "{}",
        crash.content
    );
    let after = call(&tool, json!({"code": "1"}), &c).await;
    assert!(after.content.contains("was restarted"), "{}", after.content);
    tool.turn_finished(&c).await;
}

#[tokio::test]
async fn a_budget_stop_is_named_in_the_turns_language_and_the_interpreter_restarts() {
    let limits = Limits {
        memory_bytes: 256 << 20,
        workspace_bytes: 16 << 20,
        ..Limits::default()
    };
    let config = SandboxConfig {
        limits,
        ..SandboxConfig::with_mode(SandboxMode::Bwrap)
    };
    let sandbox = Sandbox::detect(config).await.expect("a sandbox");
    let tool = CodeExecutionTool::new(sandbox.clone(), bare(), Duration::from_secs(30));
    let (_d, ws, _) = scratch();
    let mut c = ctx("t-budget", Some(&ws));
    c.language = Language::Zh;
    tool.turn_started(&c).await;
    call(&tool, json!({"code": "kept = 1"}), &c).await;
    let hog = call(
        &tool,
        json!({"code": "b = bytearray(400 << 20)
for i in range(0, len(b), 4096):
    b[i] = 1"}),
        &c,
    )
    .await;
    assert!(!hog.ok);
    assert!(
        hog.content
            .starts_with("[status] 已停止：本轮代码占用的内存超出预算")
            && hog.content.contains("预算为 256 MiB")
            && hog.content.contains("解释器已被终止"),
        "{}",
        hog.content
    );
    assert_eq!(hog.metadata["stopped"], "memory_budget");
    let next = call(&tool, json!({"code": "'kept' in globals()"}), &c).await;
    assert!(
        next.content.contains("was restarted (the previous call was stopped: the turn's memory budget of 256 MiB was exceeded"),
        "{}",
        next.content
    );
    assert!(
        next.content.ends_with(
            "[value]
False"
        ),
        "{}",
        next.content
    );
    tool.turn_finished(&c).await;

    let exec = ExecTool::new(sandbox, Duration::from_secs(30));
    let c = ctx("t-budget", Some(&ws));
    let fill = call(
        &exec,
        json!({"command": "head -c 10M /dev/zero > a && head -c 10M /dev/zero > b"}),
        &c,
    )
    .await;
    assert!(!fill.ok);
    assert!(
        fill.content
            .starts_with("[status] stopped: the workspace grew past its quota of 16 MiB")
            && fill
                .content
                .contains("The command and everything it started were killed"),
        "{}",
        fill.content
    );
    assert_eq!(fill.metadata["stopped"], "workspace_bytes");
}

#[tokio::test]
async fn the_engine_limit_leaves_room_for_the_tools_own_timeout() {
    let tool = CodeExecutionTool::new(sandbox().await, bare(), Duration::from_secs(30));
    let config = SolveConfig::default();
    assert!(tool.timeout(&config) > Duration::from_secs(config.code_timeout_s));
    let err = tool
        .run(json!({"code": "1"}), &ctx("t", None))
        .await
        .unwrap_err();
    assert!(err.message().contains("no workspace"), "fail closed: {err}");
}

#[tokio::test]
async fn the_end_of_a_turn_stops_everything_it_started() {
    let tool = CodeExecutionTool::new(sandbox().await, bare(), Duration::from_secs(30));
    let (_d, ws, _) = scratch();
    let marker = format!("2718.{}", std::process::id());
    let c = ctx("t3", Some(&ws));
    tool.turn_started(&c).await;
    let out = call(&tool, json!({"code": format!("import subprocess\np = subprocess.Popen(['sleep', '{marker}'])\n'started'")}), &c).await;
    assert!(out.ok, "{}", out.content);
    // The child must be seen running, or the check below proves nothing. On a loaded machine
    // it can take a moment to show in the host's /proc.
    let seen_by = std::time::Instant::now() + Duration::from_secs(10);
    while no_process_with(&marker) {
        assert!(
            std::time::Instant::now() < seen_by,
            "the cell's child process never showed up"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tool.turn_finished(&c).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !no_process_with(&marker) {
        assert!(
            std::time::Instant::now() < deadline,
            "the turn's processes outlived it"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn exec_produces_files_in_the_same_workspace() {
    let sb = sandbox().await;
    let code = CodeExecutionTool::new(sb.clone(), bare(), Duration::from_secs(30));
    let exec = ExecTool::new(sb, Duration::from_secs(30));
    let (_d, ws, _) = scratch();
    let c = ctx("t4", Some(&ws));
    code.turn_started(&c).await;
    call(
        &code,
        json!({"code": "open('data.csv', 'w').write('x,y\\n1,2\\n')"}),
        &c,
    )
    .await;
    let out = call(
        &exec,
        json!({"command": "wc -l < data.csv; sort data.csv > sorted.csv; echo oops >&2"}),
        &c,
    )
    .await;
    assert!(out.ok, "{}", out.content);
    assert_eq!(
        out.content,
        "[exit status] 0\n[stdout]\n2\n[stderr]\noops\n[files written]\nsorted.csv (text/csv, 8 B)"
    );
    assert_eq!(out.artifacts[0].path, "sorted.csv");
    let seen = call(&code, json!({"code": "open('sorted.csv').read()"}), &c).await;
    assert_eq!(seen.content, "[value]\n'1,2\\nx,y\\n'");
    let failed = call(&exec, json!({"command": "exit 3"}), &c).await;
    assert!(!failed.ok);
    assert_eq!(failed.content, "[exit status] 3");
    let slow = call(
        &exec,
        json!({"command": "echo begun; sleep 30", "timeout_s": 1}),
        &c,
    )
    .await;
    assert!(!slow.ok);
    assert!(
        slow.content.starts_with("[status] timed out after 1s"),
        "{}",
        slow.content
    );
    assert!(slow.content.contains("[stdout]\nbegun"));
    code.turn_finished(&c).await;
}

#[tokio::test]
async fn interpreters_are_capped_across_turns() {
    let tool = CodeExecutionTool::new(sandbox().await, bare(), Duration::from_secs(30))
        .with_max_interpreters(1);
    let (_d, a, b) = scratch();
    let (ca, cb) = (ctx("cap-a", Some(&a)), ctx("cap-b", Some(&b)));
    tool.turn_started(&ca).await;
    tool.turn_started(&cb).await;
    assert!(call(&tool, json!({"code": "1"}), &ca).await.ok);
    let err = tool
        .run(json!({"code": "1", "timeout_s": 1}), &cb)
        .await
        .unwrap_err();
    assert!(
        err.message().contains("all 1 Python sandboxes are in use"),
        "{err}"
    );
    tool.turn_finished(&ca).await;
    let out = call(&tool, json!({"code": "2"}), &cb).await;
    assert_eq!(
        out.content, "[value]\n2",
        "a freed slot goes to the waiting turn"
    );
    tool.turn_finished(&cb).await;
}

#[tokio::test]
async fn a_turn_that_runs_no_code_starts_no_interpreter() {
    let sandbox = sandbox().await;
    let tool = CodeExecutionTool::new(sandbox.clone(), bare(), Duration::from_secs(30));
    let (_d, ws, _) = scratch();
    let c = ctx("idle", Some(&ws));
    tool.turn_started(&c).await;
    tool.turn_finished(&c).await;
    assert_eq!(
        sandbox.interpreters_started(),
        0,
        "no call, no announcement"
    );
    // The same counter sees a start (so the zero above is not a counter that never moves).
    let c = ctx("busy", Some(&ws));
    tool.turn_started(&c).await;
    assert!(call(&tool, json!({"code": "1"}), &c).await.ok);
    tool.turn_finished(&c).await;
    assert_eq!(sandbox.interpreters_started(), 1);
}

#[tokio::test]
async fn an_announcement_starts_the_interpreter_the_first_call_then_uses() {
    let sandbox = sandbox().await;
    let tool = CodeExecutionTool::new(sandbox.clone(), bare(), Duration::from_secs(30));
    let (_d, a, b) = scratch();
    let (ca, cb) = (ctx("ann-a", Some(&a)), ctx("ann-b", Some(&b)));
    tool.turn_started(&ca).await;
    tool.announced(&ca);
    assert_eq!(tool.started_ahead(), 1);
    let one = call(&tool, json!({"code": "secret = 'a'\nprint(1)"}), &ca).await;
    assert_eq!(one.content, "[stdout]\n1");
    assert_eq!(one.metadata["interpreter"], "announced");
    // A second announcement in the turn finds the interpreter there: nothing new starts.
    tool.announced(&ca);
    let two = call(&tool, json!({"code": "secret"}), &ca).await;
    assert_eq!(two.metadata["interpreter"], "kept");
    assert_eq!(
        (tool.started_ahead(), sandbox.interpreters_started()),
        (1, 1)
    );
    // Another turn's announcement starts its own interpreter, in its own sandbox.
    tool.announced(&cb);
    let seen = call(&tool, json!({"code": "print('secret' in globals())"}), &cb).await;
    assert_eq!(seen.content, "[stdout]\nFalse");
    assert_eq!(seen.metadata["interpreter"], "announced");
    assert_eq!(sandbox.interpreters_started(), 2);
    tool.turn_finished(&ca).await;
    tool.turn_finished(&cb).await;
}

#[tokio::test]
async fn an_announced_interpreter_that_is_never_called_ends_with_its_turn() {
    let sandbox = sandbox().await;
    let tool = CodeExecutionTool::new(sandbox.clone(), bare(), Duration::from_secs(30))
        .with_max_interpreters(1);
    let (_d, a, b) = scratch();
    let (ca, cb) = (ctx("gone-a", Some(&a)), ctx("gone-b", Some(&b)));
    tool.announced(&ca);
    // At the cap, another turn is not started ahead: its call would wait for a free one.
    tool.announced(&cb);
    assert_eq!(tool.started_ahead(), 1);
    tool.turn_finished(&ca).await;
    // Its turn's end gave its share of the cap back: the other turn's call gets one at once
    // (with a 1 s budget, it would be refused if the announced one were still held).
    let out = call(&tool, json!({"code": "2", "timeout_s": 1}), &cb).await;
    assert_eq!(out.content, "[value]\n2");
    assert_eq!(out.metadata["interpreter"], "started_by_call");
    tool.turn_finished(&cb).await;
}

/// What a cell prints goes out as the call's progress while it still runs: the first line
/// arrives before the cell ends, and every line arrives.
#[tokio::test]
async fn a_cells_output_is_reported_as_it_prints() {
    let tool = CodeExecutionTool::new(sandbox().await, bare(), Duration::from_secs(30));
    let (_d, ws, _) = scratch();
    let (progress, mut reports) = deepsolve_core::Progress::channel();
    let c = ToolContext {
        progress: progress.for_call("c"),
        ..ctx("live", Some(&ws))
    };
    tool.turn_started(&c).await;
    let code = "import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('second')";
    let run = call(&tool, json!({"code": code}), &c);
    tokio::pin!(run);
    let first = tokio::select! {
        report = reports.recv() => report.expect("a report"),
        output = &mut run => panic!("the cell ended before any report: {}", output.content),
    };
    assert_eq!(first, ("c".to_string(), "first".to_string()));
    let output = run.await;
    assert_eq!(output.content, "[stdout]\nfirst\nsecond");
    let mut rest = Vec::new();
    while let Ok((_, message)) = reports.try_recv() {
        rest.push(message);
    }
    assert_eq!(rest, ["second"]);
    tool.turn_finished(&c).await;
}
