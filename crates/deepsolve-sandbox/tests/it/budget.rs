//! The per-turn budgets, for real: memory and processes of all the turn's sandboxes
//! together, and the workspace's size, entry count and depth, enforced while the code runs;
//! the call a budget stopped says which. Limits are scaled down so each test takes seconds.

use std::time::{Duration, Instant};

use crate::common::*;
use deepsolve_sandbox::*;

const MIB: u64 = 1 << 20;

fn limits(memory_mb: u64, processes: u64, workspace_mb: u64, workspace_files: u64) -> Limits {
    Limits {
        memory_bytes: memory_mb * MIB,
        address_space_bytes: Limits::address_space_for(memory_mb * MIB),
        processes,
        workspace_bytes: workspace_mb * MIB,
        workspace_files,
        ..Limits::default()
    }
}

/// Forks `children`, each touching `mb` MB page by page, then waits for them.
fn forking_allocator(children: u32, mb: u32) -> String {
    format!(
        "import os, time\nkids = []\nfor _ in range({children}):\n    pid = os.fork()\n    if pid == 0:\n        b = bytearray({mb} << 20)\n        for i in range(0, len(b), 4096):\n            b[i] = 1\n        time.sleep(60)\n        os._exit(0)\n    kids.append(pid)\nfor pid in kids:\n    os.waitpid(pid, 0)\nprint('all done')"
    )
}

#[tokio::test]
async fn children_that_together_exceed_the_memory_budget_are_stopped_and_the_host_keeps_its_memory()
{
    let budget_mb = 256;
    let sb = sandbox_with(limits(budget_mb, 64, 1024, 10_000)).await;
    let lines = sb.describe_budgets();
    assert!(
        lines[0].starts_with("memory budget: 256 MiB per turn, ")
            && (lines[0].contains("watchdog (") || lines[0].contains("cgroup v2")),
        "{lines:?}"
    );
    let (_d, ws) = workspace();
    let mut py = python(&sb, &ws).await;
    let token = py.token().to_string();
    let before = mem_available();
    let available = Sampling::start(Duration::from_millis(2), mem_available);
    let started = Instant::now();
    // Three children of 200 MB each: every one fits the 1 GiB address space, together they
    // are more than twice the turn's budget.
    let out = cell_with(&mut py, &forking_allocator(3, 200), Duration::from_secs(30)).await;
    let (lowest, _) = available.finish();
    let CellStatus::Stopped(Stopped::MemoryBudget { limit_mb, used_mb }) = out.status else {
        panic!("not stopped by the memory budget: {out:?}");
    };
    assert_eq!(limit_mb, budget_mb);
    assert!(used_mb > budget_mb && used_mb < 2 * budget_mb, "{used_mb}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!out.stdout.text.contains("all done"));
    let drop_mb = before.saturating_sub(lowest) / MIB;
    // `cargo test -p deepsolve-sandbox --test it -- --nocapture budget::children` shows it.
    println!(
        "budget {budget_mb} MiB: stopped at {used_mb} MiB after {:?}; the host's MemAvailable fell by at most {drop_mb} MiB",
        started.elapsed()
    );
    assert!(
        drop_mb <= 2 * budget_mb,
        "the host lost {drop_mb} MiB of available memory"
    );
    assert_eq!(
        py.stopped_by(),
        Some(Stopped::MemoryBudget { limit_mb, used_mb })
    );
    assert!(!py.is_alive());
    py.shutdown().await;
    assert_no_process_left(&token).await;
}

#[tokio::test]
async fn the_interpreter_and_a_command_of_the_same_turn_share_one_budget() {
    let sb = sandbox_with(limits(256, 64, 1024, 10_000)).await;
    let (_d, ws) = workspace();
    let mut py = python(&sb, &ws).await;
    let held = cell(
        &mut py,
        "held = bytearray(170 << 20)\nfor i in range(0, len(held), 4096):\n    held[i] = 1\nlen(held) >> 20",
    )
    .await;
    assert_eq!(held.status, CellStatus::Ok, "{held:?}");
    assert_eq!(py.stopped_by(), None);
    // Alone, this command is well within the budget; with the interpreter's 170 MB the turn
    // is not. The command pushed it over, so the command goes; the idle interpreter keeps
    // its names.
    let shell = sh(
        &sb,
        &ws,
        "python3 -c \"import time\nb = bytearray(120 << 20)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\ntime.sleep(1)\nprint('command done')\"",
        Duration::from_secs(20),
    )
    .await;
    assert!(
        matches!(
            shell.exit,
            ExitKind::Stopped(Stopped::MemoryBudget { limit_mb: 256, .. })
        ),
        "{shell:?}"
    );
    assert!(!shell.stdout.text.contains("command done"));
    assert_eq!(py.stopped_by(), None);
    let kept = cell(&mut py, "len(held) >> 20").await;
    assert_eq!(kept.value.as_deref(), Some("170"), "{kept:?}");
    // The interpreter itself growing past the budget in a cell is stopped, of course.
    let more = cell(
        &mut py,
        "more = bytearray(120 << 20)\nfor i in range(0, len(more), 4096):\n    more[i] = 1",
    )
    .await;
    assert!(
        matches!(
            more.status,
            CellStatus::Stopped(Stopped::MemoryBudget { limit_mb: 256, .. })
        ),
        "{more:?}"
    );
    assert!(!py.is_alive());
    // A turn of its own (another workspace) has a budget of its own.
    let (_d2, other) = workspace();
    let alone = sh(
        &sb,
        &other,
        "python3 -c \"b = bytearray(200 << 20)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\"",
        Duration::from_secs(20),
    )
    .await;
    assert!(alone.success(), "{alone:?}");
}

#[tokio::test]
async fn files_in_the_private_tmp_are_memory_and_count_against_the_budget() {
    let sb = sandbox_with(limits(256, 64, 1024, 10_000)).await;
    let (_d, ws) = workspace();
    let mut py = python(&sb, &ws).await;
    // 200 MB in /tmp (a tmpfs: memory, not the process's RSS) and 100 MB held.
    let out = cell(
        &mut py,
        "import time\nwith open('/tmp/blob', 'wb') as f:\n    for _ in range(25):\n        f.write(b'x' * (8 << 20))\nheld = bytearray(100 << 20)\nfor i in range(0, len(held), 4096):\n    held[i] = 1\ntime.sleep(2)\nprint('kept it all')",
    )
    .await;
    assert!(
        matches!(
            out.status,
            CellStatus::Stopped(Stopped::MemoryBudget { limit_mb: 256, .. })
        ),
        "{out:?}"
    );
    assert!(!out.stdout.text.contains("kept it all"));
}

#[tokio::test]
async fn processes_are_counted_for_the_turn_across_its_sandboxes() {
    // Each sandbox alone stays under the limit; the turn does not.
    let limit = 16;
    let sb = sandbox_with(limits(2048, limit, 1024, 10_000)).await;
    let (_d, ws) = workspace();
    let mut py = python(&sb, &ws).await;
    let sleepers = cell(
        &mut py,
        "import subprocess\nkids = [subprocess.Popen(['sleep', '60']) for _ in range(8)]\nlen(kids)",
    )
    .await;
    assert_eq!(sleepers.value.as_deref(), Some("8"), "{sleepers:?}");
    let shell = sh(
        &sb,
        &ws,
        "for i in 1 2 3 4 5 6 7 8 9; do sleep 60 & done; wait",
        Duration::from_secs(20),
    )
    .await;
    let stopped = [
        match shell.exit {
            ExitKind::Stopped(why) => Some(why),
            _ => None,
        },
        py.stopped_by(),
    ];
    assert!(
        stopped.contains(&Some(Stopped::ProcessBudget { limit })),
        "{shell:?} {stopped:?}"
    );
}

#[tokio::test]
async fn filling_the_workspace_stops_at_the_quota_and_cleaning_up_is_allowed() {
    let quota_mb = 64;
    let sb = sandbox_with(limits(2048, 64, quota_mb, 10_000)).await;
    let (_d, ws) = workspace();
    let mut py = python(&sb, &ws).await;
    // One file may not exceed the quota (RLIMIT_FSIZE follows it)…
    let one = cell(&mut py, "open('one.bin', 'wb').write(b'x' * (80 << 20))").await;
    assert!(
        one.error.unwrap_or_default().contains("File too large"),
        "{:?}",
        one.status
    );
    // …and many files may not either: writing without end is stopped by the workspace walk,
    // long before the time limit. (How far past the quota it got depends on how fast the disk
    // takes writes between two walks, so that is not asserted.)
    let started = Instant::now();
    let fill = cell_with(
        &mut py,
        "import os, itertools\nchunk = os.urandom(1 << 20) * 8\nfor i in itertools.count():\n    with open(f'fill_{i}.bin', 'wb') as f:\n        f.write(chunk)",
        Duration::from_secs(60),
    )
    .await;
    let CellStatus::Stopped(Stopped::WorkspaceBytes { limit_mb, used_mb }) = fill.status else {
        panic!("not stopped at the quota: {fill:?}");
    };
    assert_eq!(limit_mb, quota_mb);
    assert!(used_mb > quota_mb, "{used_mb}");
    assert!(started.elapsed() < Duration::from_secs(30));
    // The next interpreter may delete (shrink), then write within the quota again.
    py.shutdown().await;
    let mut py = python(&sb, &ws).await;
    let clean = cell(
        &mut py,
        "import glob, os\nfor f in glob.glob('fill_*.bin'):\n    os.remove(f)\nopen('small.txt', 'w').write('ok')",
    )
    .await;
    assert_eq!(clean.status, CellStatus::Ok, "{clean:?}");
}

#[tokio::test]
async fn a_command_too_quick_for_the_watcher_is_still_held_to_the_quota() {
    let sb = sandbox_with(limits(2048, 64, 16, 10_000)).await;
    let (_d, ws) = workspace();
    let out = sh(
        &sb,
        &ws,
        "head -c 10M /dev/zero > a && head -c 10M /dev/zero > b",
        Duration::from_secs(20),
    )
    .await;
    assert!(
        matches!(
            out.exit,
            ExitKind::Stopped(Stopped::WorkspaceBytes { limit_mb: 16, .. })
        ),
        "{out:?}"
    );
}

/// A program that never stops making files is stopped by the workspace walk, long before its
/// time limit. (It never ends on its own: a bounded burst may finish between two walks on a
/// fast machine, and is then named at the call's end — see the next test.)
#[tokio::test]
async fn creating_files_without_end_stops_at_the_file_limit() {
    let sb = sandbox_with(limits(2048, 64, 1024, 10_000)).await;
    let (_d, ws) = workspace();
    let mut py = python(&sb, &ws).await;
    let started = Instant::now();
    let out = cell_with(
        &mut py,
        "import os, itertools\nos.mkdir('many')\nfor i in itertools.count():\n    open(f'many/{i}', 'w').close()",
        Duration::from_secs(60),
    )
    .await;
    let CellStatus::Stopped(Stopped::WorkspaceFiles { limit, found }) = out.status else {
        panic!("not stopped at the file limit: {out:?}");
    };
    assert_eq!(limit, 10_000);
    assert!(found > limit, "{found}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// A burst that is over the limit when the call ends is named then, whether or not a walk
/// caught it on the way.
#[tokio::test]
async fn a_burst_of_files_over_the_limit_is_named_when_the_call_ends() {
    let sb = sandbox_with(limits(2048, 64, 1024, 10_000)).await;
    let (_d, ws) = workspace();
    let mut py = python(&sb, &ws).await;
    let out = cell_with(
        &mut py,
        "import os\nos.mkdir('many')\nfor i in range(12000):\n    open(f'many/{i}', 'w').close()",
        Duration::from_secs(60),
    )
    .await;
    let CellStatus::Stopped(Stopped::WorkspaceFiles { limit, found }) = out.status else {
        panic!("not stopped at the file limit: {out:?}");
    };
    assert_eq!(limit, 10_000);
    assert!(found > limit, "{found}");
}

#[tokio::test]
async fn a_workspace_nested_too_deep_to_count_is_stopped() {
    let sb = sandbox_with(limits(2048, 64, 1024, 10_000)).await;
    let (_d, ws) = workspace();
    let deep = vec!["d"; 80].join("/");
    let out = sh(
        &sb,
        &ws,
        &format!("mkdir -p {deep}"),
        Duration::from_secs(20),
    )
    .await;
    assert!(
        matches!(out.exit, ExitKind::Stopped(Stopped::WorkspaceDepth { .. })),
        "{out:?}"
    );
}

#[tokio::test]
async fn normal_work_passes_under_the_default_limits() {
    let sb = sandbox_with(Limits::default()).await;
    let (_d, ws) = workspace();
    let mut py = sb
        .start_python(&ws, &PythonOptions::default())
        .await
        .expect("the interpreter starts with numpy and sympy preloaded");
    let out = cell_with(
        &mut py,
        "import numpy as np, sympy as sp, scipy.linalg, subprocess\nimport matplotlib.pyplot as plt\na = np.ones(64 << 20)\nm = np.random.rand(400, 400)\nx = sp.symbols('x')\nplt.plot(np.linalg.eigvalsh(m @ m.T)[:10])\nouts = [subprocess.run(['python3', '-c', 'print(6 * 7)'], capture_output=True, text=True).stdout for _ in range(4)]\n(a.nbytes >> 20, str(sp.integrate(x**2, x)), outs)",
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(out.status, CellStatus::Ok, "{out:?}");
    assert_eq!(
        out.value.as_deref(),
        Some("(512, 'x**3/3', ['42\\n', '42\\n', '42\\n', '42\\n'])"),
        "{out:?}"
    );
    assert_eq!(out.figures, ["figure_1.png"]);
    assert_eq!(py.stopped_by(), None);
}
