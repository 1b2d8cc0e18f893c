//! The sandboxed interpreter's costs, printed as a Markdown table (warm
//! `print(1)` p50 < 20 ms). Run: `cargo bench -p deepsolve-sandbox --bench interpreter`.
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
    what: &'static str,
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

async fn cold_starts(sandbox: &Sandbox, preload: &[&str], n: usize) -> Vec<Duration> {
    let dir = std::env::temp_dir().join(format!("deepsolve-bench-{}", std::process::id()));
    let options = PythonOptions {
        preload: preload.iter().map(|m| m.to_string()).collect(),
        ..PythonOptions::default()
    };
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let mut py = sandbox.start_python(&dir, &options).await.expect("starts");
        samples.push(started.elapsed());
        py.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&dir);
    samples
}

async fn run() -> Vec<Row> {
    let sandbox = Sandbox::detect(SandboxConfig::with_mode(SandboxMode::Bwrap))
        .await
        .unwrap_or_else(|e| panic!("the benchmark needs a sandbox: {e}"));
    eprintln!("sandbox: {}", sandbox.describe());
    let mut rows = vec![
        Row {
            what: "cold start, bare interpreter (spawn → ready)",
            samples: cold_starts(&sandbox, &[], 30).await,
        },
        Row {
            what: "cold start, numpy + sympy preloaded (the default)",
            samples: cold_starts(&sandbox, &["numpy", "sympy"], 10).await,
        },
    ];

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
        what: "warm `print(1)`",
        samples: print,
    });
    let first_import = cell(&mut py, "import sympy as sp\nx = sp.symbols('x')").await;
    rows.push(Row {
        what: "first `import sympy` in a bare interpreter",
        samples: vec![first_import],
    });
    let mut import = Vec::new();
    for _ in 0..500 {
        import.push(cell(&mut py, "import sympy").await);
    }
    rows.push(Row {
        what: "warm `import sympy` (reused from sys.modules)",
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
        what: "sympy solve of a quadratic (warm)",
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
        what: "`exec` of `true` (a fresh sandbox per command)",
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
