//! The persistent interpreter, for real: state across cells, notebook-style values,
//! trimmed tracebacks, figures, interrupts and kills.

use std::time::Duration;

use crate::common::*;
use deepsolve_sandbox::*;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn names_survive_from_one_cell_to_the_next() {
    let sb = sandbox().await;
    let (_d, ws) = workspace();
    let mut py = python(&sb, &ws).await;
    let a = cell(&mut py, "x = 21\nprint('set x')").await;
    assert_eq!(a.status, CellStatus::Ok, "{a:?}");
    assert_eq!(a.stdout.text, "set x\n");
    assert_eq!(a.value, None);
    let b = cell(
        &mut py,
        "def double(v):\n    return 2 * v\ny = double(x)\ny",
    )
    .await;
    assert_eq!(b.value.as_deref(), Some("42"), "{b:?}");
    let c = cell(
        &mut py,
        "import sys\nprint('to stderr', file=sys.stderr)\n_ + 1",
    )
    .await;
    assert_eq!(c.stderr.text, "to stderr\n");
    assert_eq!(c.value.as_deref(), Some("43"), "`_` holds the last value");
    let d = cell(&mut py, "None").await;
    assert_eq!(d.value, None, "a None value is not shown");
}

#[tokio::test]
async fn a_cell_ending_in_an_assignment_shows_the_value_assigned() {
    // The 1.5B model computed `total_earnings = 30 * 7`, printed nothing, and read
    // "(no output)".
    let sb = sandbox().await;
    let (_d, ws) = workspace();
    let mut py = python(&sb, &ws).await;
    let a = cell(&mut py, "total = 30 * 7").await;
    assert_eq!(a.value.as_deref(), Some("210"), "{a:?}");
    let b = cell(&mut py, "total -= 100").await;
    assert_eq!(b.value.as_deref(), Some("110"), "{b:?}");
    let c = cell(&mut py, "left: int = total\nprint('done')\nrate = left / 2").await;
    assert_eq!(c.stdout.text, "done\n");
    assert_eq!(c.value.as_deref(), Some("55.0"), "{c:?}");
    let d = cell(&mut py, "a, b = 1, 2").await;
    assert_eq!(d.value, None, "only a single name's value is shown: {d:?}");
    let e = cell(&mut py, "nothing = None").await;
    assert_eq!(e.value, None, "a None value is not shown");
}

#[tokio::test]
async fn sympy_state_carries_across_cells() {
    let sb = sandbox().await;
    let (_d, ws) = workspace();
    let mut py = python(&sb, &ws).await;
    let a = cell(
        &mut py,
        "import sympy as sp\nx = sp.symbols('x')\nf = x**2 - 5*x + 6\nf",
    )
    .await;
    assert_eq!(a.value.as_deref(), Some("x**2 - 5*x + 6"), "{a:?}");
    let b = cell(&mut py, "sp.solve(f, x)").await;
    assert_eq!(b.value.as_deref(), Some("[2, 3]"), "{b:?}");
}

#[tokio::test]
async fn tracebacks_show_only_the_users_code() {
    let sb = sandbox().await;
    let (_d, ws) = workspace();
    let mut py = python(&sb, &ws).await;
    let out = cell(
        &mut py,
        "def f(n):\n    return n / 0\n\nprint('before')\nf(1)",
    )
    .await;
    assert_eq!(out.status, CellStatus::Error);
    assert_eq!(
        out.stdout.text, "before\n",
        "output before the error is kept"
    );
    let tb = out.error.unwrap_or_default();
    assert!(tb.starts_with("Traceback (most recent call last):"), "{tb}");
    assert!(tb.contains("line 5") && tb.contains("line 2, in f"), "{tb}");
    assert!(tb.contains("return n / 0"), "source lines are shown: {tb}");
    assert!(tb.ends_with("ZeroDivisionError: division by zero"), "{tb}");
    assert!(!tb.contains("deepsolve driver"), "{tb}");

    let syntax = cell(&mut py, "def broken(:\n    pass").await;
    assert_eq!(syntax.status, CellStatus::Error);
    let tb = syntax.error.unwrap_or_default();
    assert!(
        tb.contains("SyntaxError") && !tb.contains("Traceback"),
        "{tb}"
    );

    let exit = cell(&mut py, "import sys\nsys.exit(3)").await;
    assert_eq!(
        exit.status,
        CellStatus::Error,
        "SystemExit does not end the interpreter"
    );
    assert!(py.is_alive());
}

#[tokio::test]
async fn a_one_line_program_with_its_line_breaks_escaped_runs_as_meant() {
    let sb = sandbox().await;
    let (_d, ws) = workspace();
    let mut py = python(&sb, &ws).await;
    // Its JSON escaped twice: `\n` arrives as a backslash and an `n` (the 1.5B model).
    let out = cell(
        &mut py,
        r"left = 16\nhip_hop = left - left * 0.25\nprint(hip_hop)",
    )
    .await;
    assert_eq!(out.status, CellStatus::Ok, "{out:?}");
    assert_eq!(out.stdout.text, "12.0\n");
    // A program that parses as written is never changed: `\n` in its string stays one.
    let out = cell(&mut py, r#"print("a\nb".count("\n"))"#).await;
    assert_eq!(out.stdout.text, "1\n", "{out:?}");
    // Still broken once read with line breaks: the error is the program's own, as written.
    let out = cell(&mut py, r"def f(:\n    pass").await;
    assert_eq!(out.status, CellStatus::Error);
    let tb = out.error.unwrap_or_default();
    assert!(
        tb.contains("SyntaxError") && tb.contains(r"def f(:\n"),
        "{tb}"
    );
}

#[tokio::test]
async fn a_saved_figure_is_one_file_and_a_changed_one_is_saved_again() {
    let sb = sandbox().await;
    let (_d, ws) = workspace();
    let mut py = python(&sb, &ws).await;
    // Saved and left open: the cell's file is the figure; no figure_1.png beside it.
    let code = "import matplotlib.pyplot as plt\nplt.plot([0, 1], [0, 1])\nplt.savefig('line.png')";
    let out = cell(&mut py, code).await;
    assert_eq!(out.status, CellStatus::Ok, "{out:?}");
    assert!(out.figures.is_empty(), "{:?}", out.figures);
    assert!(ws.join("line.png").is_file());
    assert!(!ws.join("figure_1.png").exists());
    // Changed after the save: the figure as it ends up is saved too.
    let code = "plt.plot([0, 1], [0, 1])\nplt.savefig('first.png')\nplt.title('changed')";
    let out = cell(&mut py, code).await;
    assert_eq!(out.figures, ["figure_1.png"]);
}

#[tokio::test]
async fn matplotlib_figures_become_png_files() {
    let sb = sandbox().await;
    let (_d, ws) = workspace();
    let mut py = python(&sb, &ws).await;
    let code = "import matplotlib.pyplot as plt\nplt.plot([0, 1, 2], [0, 1, 4])\nplt.title('squares')\nplt.show()";
    let out = cell(&mut py, code).await;
    assert_eq!(out.status, CellStatus::Ok, "{out:?}");
    assert_eq!(out.figures, ["figure_1.png"]);
    assert!(
        out.stderr.text.is_empty(),
        "no Agg warning: {}",
        out.stderr.text
    );
    let png = std::fs::read(ws.join("figure_1.png")).expect("the figure is in the workspace");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // Figures are closed after saving; the next one gets the next free name.
    let again = cell(
        &mut py,
        "plt.figure(); plt.plot([1, 2])\nplt.figure(); plt.plot([3, 4])",
    )
    .await;
    assert_eq!(again.figures, ["figure_2.png", "figure_3.png"]);
    let none = cell(&mut py, "1 + 1").await;
    assert!(none.figures.is_empty());
}

#[tokio::test]
async fn a_timed_out_cell_is_interrupted_and_the_state_kept() {
    let sb = sandbox().await;
    let (_d, ws) = workspace();
    let mut py = python(&sb, &ws).await;
    cell(&mut py, "kept = 'still here'").await;
    let out = cell_with(
        &mut py,
        "import time\nprint('partial', flush=True)\nwhile True:\n    time.sleep(0.05)",
        Duration::from_millis(800),
    )
    .await;
    assert_eq!(out.status, CellStatus::Interrupted, "{out:?}");
    assert_eq!(out.stdout.text, "partial\n");
    assert!(out.error.unwrap_or_default().contains("KeyboardInterrupt"));
    assert!(py.is_alive());
    let after = cell(&mut py, "kept").await;
    assert_eq!(after.value.as_deref(), Some("'still here'"));
}

#[tokio::test]
async fn a_cell_that_ignores_the_interrupt_is_killed_with_its_output_kept() {
    let sb = sandbox().await;
    let (_d, ws) = workspace();
    let mut py = python(&sb, &ws).await;
    let token = py.token().to_string();
    let code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('partial')\nwhile True:\n    pass";
    let out = cell_with(&mut py, code, Duration::from_millis(500)).await;
    assert_eq!(out.status, CellStatus::TimedOut, "{out:?}");
    assert!(out.status.state_lost());
    assert_eq!(
        out.stdout.text, "partial\n",
        "partial output survives the kill"
    );
    assert!(!py.is_alive());
    assert!(matches!(
        py.run("1", Duration::from_secs(1), &CancellationToken::new())
            .await,
        Err(SandboxError::Dead)
    ));
    assert_no_process_left(&token).await;
}

#[tokio::test]
async fn a_crash_is_reported_and_cancel_kills() {
    let sb = sandbox().await;
    let (_d, ws) = workspace();
    let mut py = python(&sb, &ws).await;
    let out = cell(&mut py, "import os\nprint('bye')\nos._exit(7)").await;
    match &out.status {
        CellStatus::Crashed(why) => assert!(why.contains("exit"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(out.stdout.text, "bye\n");

    let mut py = python(&sb, &ws).await;
    let token = py.token().to_string();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trigger.cancel();
    });
    let out = py
        .run("while True: pass", Duration::from_secs(30), &cancel)
        .await
        .expect("runs");
    assert_eq!(out.status, CellStatus::Cancelled);
    assert_no_process_left(&token).await;
}

#[tokio::test]
async fn a_dropped_call_leaves_the_interpreter_dead_not_confused() {
    let sb = sandbox().await;
    let (_d, ws) = workspace();
    let mut py = python(&sb, &ws).await;
    let token = py.token().to_string();
    let never = CancellationToken::new();
    let call = py.run("while True: pass", Duration::from_secs(30), &never);
    assert!(
        tokio::time::timeout(Duration::from_millis(300), call)
            .await
            .is_err()
    );
    assert!(!py.is_alive());
    assert!(matches!(
        py.run("1", Duration::from_secs(1), &never).await,
        Err(SandboxError::Dead)
    ));
    assert_no_process_left(&token).await;
}

#[tokio::test]
async fn background_preloads_finish_under_the_first_cells() {
    let sb = sandbox().await;
    let (_d, ws) = workspace();
    let options = PythonOptions {
        preload: vec!["sympy".into(), "no_such_module".into()],
        preload_in_background: true,
        ..PythonOptions::default()
    };
    let mut py = sb.start_python(&ws, &options).await.expect("starts");
    let info = py.ready_info().clone();
    assert_eq!(info.preloading, ["sympy", "no_such_module"]);
    assert!(info.preloaded.is_empty() && info.preload_failed.is_empty());
    assert_eq!(cell(&mut py, "print(1)").await.stdout.text, "1\n");
    // A cell importing what is being preloaded gets the whole module (it waits on the lock).
    let out = cell(&mut py, "import sympy\nsympy.Integer(6) / 4").await;
    assert_eq!(out.value.as_deref(), Some("3/2"), "{:?}", out.error);
    let out = cell(
        &mut py,
        "'sympy' in globals(), 'no_such_module' in globals()",
    )
    .await;
    assert_eq!(
        out.value.as_deref(),
        Some("(True, False)"),
        "only the user's own import"
    );
}

#[tokio::test]
async fn preloads_are_reported() {
    let sb = sandbox().await;
    let (_d, ws) = workspace();
    let options = PythonOptions {
        preload: vec!["sympy".into(), "no_such_module".into()],
        preload_in_background: false,
        ..PythonOptions::default()
    };
    let mut py = sb.start_python(&ws, &options).await.expect("starts");
    assert_eq!(py.ready_info().preloaded, ["sympy"]);
    assert!(py.ready_info().preload_failed[0].contains("no_such_module"));
    let out = cell(
        &mut py,
        "'sympy' in globals(), __import__('sys').modules.get('sympy') is not None",
    )
    .await;
    assert_eq!(
        out.value.as_deref(),
        Some("(False, True)"),
        "preloads do not touch user names"
    );
}

#[tokio::test]
async fn a_start_that_takes_too_long_fails_cleanly() {
    let sb = sandbox().await;
    let (_d, ws) = workspace();
    let options = PythonOptions {
        preload: vec!["sympy".into()],
        preload_in_background: false,
        start_timeout: Duration::from_millis(1),
    };
    match sb.start_python(&ws, &options).await {
        Err(SandboxError::Start(why)) => assert!(why.contains("not ready"), "{why}"),
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("ready in a millisecond?"),
    }
}
