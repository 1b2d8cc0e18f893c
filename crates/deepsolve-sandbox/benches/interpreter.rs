//! The sandboxed interpreter's costs, printed as a Markdown table (warm
//! `print(1)` p50 < 20 ms), and a turn's first call: the interpreter started when the model's
//! stream names the tool, the call arriving 0, 50 or 150 ms later, timed from the call to its
//! result. Run: `cargo bench -p deepsolve-sandbox --bench interpreter`.
//! Needs bubblewrap and the Debian maths stack (scripts/install-deps).

// A measuring harness: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use deepsolve_sandbox::{
    CellStatus, Interpreter, PythonOptions, Sandbox, SandboxConfig, SandboxMode,
};
use tokio_util::sync::CancellationToken;

const TIMEOUT: Duration = Duration::from_secs(60);

struct Row {
    what: String,
    samples: Vec<Duration>,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

async fn cell(py: &mut Interpreter, code: &str) -> Duration {
    let started = Instant::now();
    let out = py
        .run(code, TIMEOUT, &CancellationToken::new())
        .await
        .unwrap_or_else(|e| panic!("{code}: {e}"));
    let took = started.elapsed();
    assert_eq!(out.status, CellStatus::Ok, "{code}: {:?}", out.error);
    took
}

fn preloading(preload: &[&str], in_background: bool) -> PythonOptions {
    PythonOptions {
        preload: preload.iter().map(|m| m.to_string()).collect(),
        preload_in_background: in_background,
        ..PythonOptions::default()
    }
}

async fn cold_starts(sandbox: &Sandbox, options: &PythonOptions, n: usize) -> Vec<Duration> {
    let dir = std::env::temp_dir().join(format!("deepsolve-bench-{}", std::process::id()));
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let mut py = sandbox.start_python(&dir, options).await.expect("starts");
        samples.push(started.elapsed());
        py.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&dir);
    samples
}

/// A turn's first call of `code`: the interpreter is started `gap` before the call (when the
/// stream names the tool), or by the call itself (`None`); timed from the call to its result.
async fn first_calls(
    sandbox: &Sandbox,
    options: &PythonOptions,
    gap: Option<Duration>,
    code: &str,
    n: usize,
) -> Vec<Duration> {
    let dir = std::env::temp_dir().join(format!("deepsolve-bench-first-{}", std::process::id()));
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let (sb, opts, ws) = (sandbox.clone(), options.clone(), dir.clone());
        let start = async move { sb.start_python(&ws, &opts).await };
        let (called, mut py) = match gap {
            Some(gap) => {
                let starting = tokio::spawn(start);
                tokio::time::sleep(gap).await;
                let called = Instant::now();
                (called, starting.await.unwrap().expect("starts"))
            }
            None => (Instant::now(), start.await.expect("starts")),
        };
        cell(&mut py, code).await;
        samples.push(called.elapsed());
        py.shutdown().await;
        // Let the host settle between samples (the shutdown's reaping, the page cache).
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = std::fs::remove_dir_all(&dir);
    samples
}

/// The first-call rows: for each preload strategy, the call after each announcement gap.
async fn first_call_rows(sandbox: &Sandbox) -> Vec<Row> {
    const N: usize = 10;
    let strategies: [(&'static str, PythonOptions); 3] = [
        (
            "numpy + sympy before ready",
            preloading(&["numpy", "sympy"], false),
        ),
        (
            "numpy + sympy in the background (the default)",
            preloading(&["numpy", "sympy"], true),
        ),
        ("bare", preloading(&[], false)),
    ];
    let gaps: [(&'static str, Option<Duration>); 4] = [
        ("started by the call", None),
        ("announced 0 ms before", Some(Duration::ZERO)),
        ("announced 50 ms before", Some(Duration::from_millis(50))),
        ("announced 150 ms before", Some(Duration::from_millis(150))),
    ];
    let mut rows = Vec::new();
    for (strategy, options) in &strategies {
        for (gap_name, gap) in gaps {
            let what = format!("first `print(1)`, {strategy}, {gap_name}");
            let samples = first_calls(sandbox, options, gap, "print(1)", N).await;
            rows.push(Row { what, samples });
        }
        let gap = Some(Duration::from_millis(150));
        let code = "import numpy, sympy";
        let what = format!("first `{code}`, {strategy}, announced 150 ms before");
        let samples = first_calls(sandbox, options, gap, code, N).await;
        rows.push(Row { what, samples });
    }
    rows
}

async fn run() -> Vec<Row> {
    let sandbox = Sandbox::detect(SandboxConfig::with_mode(SandboxMode::Bwrap))
        .await
        .unwrap_or_else(|e| panic!("the benchmark needs a sandbox: {e}"));
    eprintln!("sandbox: {}", sandbox.describe());
    let mut rows = vec![
        Row {
            what: "cold start, bare interpreter (spawn → ready)".into(),
            samples: cold_starts(&sandbox, &preloading(&[], false), 30).await,
        },
        Row {
            what: "cold start, numpy + sympy imported before ready".into(),
            samples: cold_starts(&sandbox, &preloading(&["numpy", "sympy"], false), 10).await,
        },
        Row {
            what: "cold start, numpy + sympy imported in the background (the default)".into(),
            samples: cold_starts(&sandbox, &preloading(&["numpy", "sympy"], true), 10).await,
        },
    ];
    rows.extend(first_call_rows(&sandbox).await);

    let dir = std::env::temp_dir().join(format!("deepsolve-bench-warm-{}", std::process::id()));
    let bare = PythonOptions {
        preload: vec![],
        ..PythonOptions::default()
    };
    let mut py = sandbox.start_python(&dir, &bare).await.expect("starts");
    for _ in 0..20 {
        cell(&mut py, "print(1)").await;
    }
    let mut print = Vec::new();
    for _ in 0..500 {
        print.push(cell(&mut py, "print(1)").await);
    }
    rows.push(Row {
        what: "warm `print(1)`".into(),
        samples: print,
    });
    let first_import = cell(&mut py, "import sympy as sp\nx = sp.symbols('x')").await;
    rows.push(Row {
        what: "first `import sympy` in a bare interpreter".into(),
        samples: vec![first_import],
    });
    let mut import = Vec::new();
    for _ in 0..500 {
        import.push(cell(&mut py, "import sympy").await);
    }
    rows.push(Row {
        what: "warm `import sympy` (reused from sys.modules)".into(),
        samples: import,
    });
    let mut solve = Vec::new();
    for k in 0..200 {
        // Different coefficients each time, so sympy's cache cannot answer for it.
        let (a, b) = (k + 2, k + 3);
        let code = format!("sp.solve(x**2 - {}*x + {}, x)", a + b, a * b);
        solve.push(cell(&mut py, &code).await);
    }
    rows.push(Row {
        what: "sympy solve of a quadratic (warm)".into(),
        samples: solve,
    });
    py.shutdown().await;

    let cancel = CancellationToken::new();
    let mut exec = Vec::new();
    for _ in 0..30 {
        let started = Instant::now();
        let out = sandbox
            .run_command("true", &dir, TIMEOUT, &cancel)
            .await
            .expect("exec");
        assert!(out.success());
        exec.push(started.elapsed());
    }
    rows.push(Row {
        what: "`exec` of `true` (a fresh sandbox per command)".into(),
        samples: exec,
    });
    let _ = std::fs::remove_dir_all(&dir);
    rows
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let rows = runtime.block_on(run());
    println!("| operation | p50 | p99 | mean | n |");
    println!("|---|---|---|---|---|");
    for row in rows {
        let mut sorted = row.samples.clone();
        sorted.sort();
        let mean = sorted.iter().sum::<Duration>() / sorted.len() as u32;
        println!(
            "| {} | {} | {} | {} | {} |",
            row.what,
            ms(percentile(&sorted, 0.5)),
            ms(percentile(&sorted, 0.99)),
            ms(mean),
            sorted.len()
        );
    }
}
