//! What the budget watchdog costs: the CPU time of its two threads (the sampler and the
//! workspace watcher) while N idle interpreters are watched, and while a workspace holds
//! 10 000 files. Printed as a Markdown table. Run:
//! `cargo bench -p deepsolve-sandbox --bench watchdog` (needs bubblewrap).

// A measuring harness: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use deepsolve_sandbox::{Interpreter, PythonOptions, Sandbox, SandboxConfig, SandboxMode};

const WINDOW: Duration = Duration::from_secs(5);

/// Nanoseconds on CPU of this process's thread whose name starts with `name`.
fn thread_cpu_ns(name: &str) -> u64 {
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end().starts_with(name) {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap();
            return stat.split_whitespace().next().unwrap().parse().unwrap();
        }
    }
    panic!("no thread named {name}");
}

/// Percent of one core the thread used over the window.
fn measure(name: &str) -> f64 {
    let before = thread_cpu_ns(name);
    let started = Instant::now();
    std::thread::sleep(WINDOW);
    let used = thread_cpu_ns(name) - before;
    used as f64 / started.elapsed().as_nanos() as f64 * 100.0
}

async fn interpreters(sandbox: &Sandbox, root: &std::path::Path, n: usize) -> Vec<Interpreter> {
    let bare = PythonOptions {
        preload: vec![],
        ..PythonOptions::default()
    };
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let ws = root.join(format!("ws{i}"));
        out.push(sandbox.start_python(&ws, &bare).await.expect("starts"));
    }
    out
}

async fn run() -> Vec<(String, f64)> {
    let sandbox = Sandbox::detect(SandboxConfig::with_mode(SandboxMode::Bwrap))
        .await
        .unwrap_or_else(|e| panic!("the benchmark needs a sandbox: {e}"));
    for line in sandbox.describe_budgets() {
        eprintln!("{line}");
    }
    let root: PathBuf = std::env::temp_dir().join(format!("deepsolve-wd-{}", std::process::id()));
    let mut rows = Vec::new();
    for n in [1, 8, 32] {
        let mut live = interpreters(&sandbox, &root, n).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let cpu = tokio::task::spawn_blocking(|| measure("deepsolve-watch"))
            .await
            .unwrap();
        rows.push((format!("sampler, {n} idle interpreter(s)"), cpu));
        for py in &mut live {
            py.shutdown().await;
        }
    }
    let many = root.join("many");
    std::fs::create_dir_all(many.join("files")).unwrap();
    for i in 0..10_000 {
        std::fs::write(many.join("files").join(i.to_string()), b"x").unwrap();
    }
    let bare = PythonOptions {
        preload: vec![],
        ..PythonOptions::default()
    };
    let mut py = sandbox.start_python(&many, &bare).await.expect("starts");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cpu = tokio::task::spawn_blocking(|| measure("deepsolve-quota"))
        .await
        .unwrap();
    rows.push((
        "workspace watcher, one workspace of 10 000 files".into(),
        cpu,
    ));
    py.shutdown().await;
    let _ = std::fs::remove_dir_all(&root);
    rows
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let rows = runtime.block_on(run());
    println!("| watchdog thread, while | CPU (% of one core) |");
    println!("|---|---|");
    for (what, cpu) in rows {
        println!("| {what} | {cpu:.1} % |");
    }
}
