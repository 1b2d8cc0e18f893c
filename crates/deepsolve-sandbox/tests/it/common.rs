//! Shared by the sandbox's integration tests: a real sandbox (these tests run for real; a
//! machine without bubblewrap fails them loudly rather than skipping), scratch workspaces,
//! and process-table checks.

use std::path::{Path, PathBuf};
use std::time::Duration;

use deepsolve_sandbox::*;
use tokio_util::sync::CancellationToken;

/// Limits small enough that bombs hit them quickly.
pub(crate) fn test_limits() -> Limits {
    Limits {
        address_space_bytes: 1 << 30,
        processes: 64,
        ..Limits::default()
    }
}

pub(crate) async fn sandbox() -> Sandbox {
    sandbox_with(test_limits()).await
}

pub(crate) async fn sandbox_with(limits: Limits) -> Sandbox {
    let config = SandboxConfig {
        mode: SandboxMode::Bwrap,
        limits,
        ..SandboxConfig::default()
    };
    match Sandbox::detect(config).await {
        Ok(s) => s,
        Err(e) => panic!(
            "the sandbox tests need a working bubblewrap (scripts/install-deps installs it): {e}"
        ),
    }
}

/// A fresh scratch workspace.
pub(crate) fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    (dir, ws)
}

pub(crate) fn bare() -> PythonOptions {
    PythonOptions {
        preload: Vec::new(),
        ..PythonOptions::default()
    }
}

pub(crate) async fn python(sandbox: &Sandbox, ws: &Path) -> Interpreter {
    sandbox
        .start_python(ws, &bare())
        .await
        .expect("interpreter starts")
}

pub(crate) async fn cell(interp: &mut Interpreter, code: &str) -> CellOutcome {
    cell_with(interp, code, Duration::from_secs(20)).await
}

pub(crate) async fn cell_with(
    interp: &mut Interpreter,
    code: &str,
    timeout: Duration,
) -> CellOutcome {
    interp
        .run(code, timeout, &CancellationToken::new())
        .await
        .expect("the cell runs")
}

pub(crate) async fn sh(
    sandbox: &Sandbox,
    ws: &Path,
    command: &str,
    timeout: Duration,
) -> ExecOutcome {
    sandbox
        .run_command(command, ws, timeout, &CancellationToken::new())
        .await
        .expect("the command runs")
}

/// Host pids whose command line contains `needle`.
pub(crate) fn processes_with(needle: &str) -> Vec<u32> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(needle))
                .unwrap_or(false)
        })
        .collect()
}

/// A value sampled on its own thread every `every` until [`Sampling::finish`], which returns
/// the lowest and the highest seen (e.g. processes at once, the host's available memory).
pub(crate) struct Sampling {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<(u64, u64)>,
}

impl Sampling {
    pub(crate) fn start(every: Duration, probe: impl Fn() -> u64 + Send + 'static) -> Sampling {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let (mut low, mut high) = (u64::MAX, 0);
            while !flag.load(Ordering::Relaxed) {
                let v = probe();
                low = low.min(v);
                high = high.max(v);
                std::thread::sleep(every);
            }
            (low, high)
        });
        Sampling { stop, thread }
    }

    pub(crate) fn finish(self) -> (u64, u64) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().expect("the sampling thread")
    }
}

/// The host's MemAvailable, bytes.
pub(crate) fn mem_available() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Poll until no host process mentions `needle` (teardown of a pid namespace takes a moment).
pub(crate) async fn assert_no_process_left(needle: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left = processes_with(needle);
        if left.is_empty() {
            return;
        }
        if std::time::Instant::now() > deadline {
            panic!("processes outlived the sandbox: {left:?} ({needle})");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
