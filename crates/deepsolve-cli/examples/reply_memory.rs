//! What one big model reply costs `deepsolve serve` in memory: prints a table (never a timed
//! test).
//!
//! ```text
//! cargo build --release -p deepsolve-cli
//! cargo run --release -p deepsolve-cli --example reply_memory [-- --delta 64 --cap-mb 4]
//! ```
//!
//! `--cap-mb` sets `llm.max_reply_mb` (default: not set, so the default cap of 4 MiB holds);
//! `--uncapped` measures a build from before the cap (the whole stream counts as read);
//! `--rows content:3000000,arguments:8000000` picks the rows.
//!
//! Each row starts the real binary (`target/<profile>/deepsolve`, or `DEEPSOLVE_BIN`) against
//! a mock model, runs a warm-up turn, then one turn whose first reply is the big one, streamed
//! in deltas of `--delta` characters, with an SSE client following the turn. Peak growth is
//! the server's `VmHWM` during that turn over its `VmRSS` before it; "SSE in" is what the
//! server read of the model's stream (up to the cap when the reply crossed it).

// A measuring harness: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/it/memory_probe.rs"]
mod memory_probe;

use std::path::{Path, PathBuf};

use memory_probe::{BigReply, Part, measure};

const MB: usize = 1_000_000;
const MIB: usize = 1024 * 1024;

/// The `deepsolve` binary next to an example's own executable (`target/<profile>/examples/`).
fn binary_beside_examples() -> PathBuf {
    let exe = std::env::current_exe().expect("own path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    dir.join("deepsolve")
}

fn arg(args: &[String], name: &str) -> Option<usize> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
}

/// `content:3000000` → (content, 3 MB).
fn parse_row(row: &str) -> (Part, usize) {
    let (part, bytes) = row.split_once(':').expect("--rows part:bytes,…");
    let part = match part {
        "content" => Part::Content,
        "letters" => Part::Letters,
        "reasoning" => Part::Reasoning,
        "arguments" => Part::Arguments,
        other => panic!("unknown part {other}"),
    };
    (part, bytes.parse().expect("bytes"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let delta = arg(&args, "--delta").unwrap_or(64);
    let cap_mb = arg(&args, "--cap-mb");
    let binary = std::env::var_os("DEEPSOLVE_BIN")
        .map(Into::into)
        .unwrap_or_else(binary_beside_examples);
    let settings = cap_mb
        .map(|mb| format!("llm:\n  max_reply_mb: {mb}\n"))
        .unwrap_or_default();
    let cap = if args.iter().any(|a| a == "--uncapped") {
        usize::MAX
    } else {
        cap_mb.unwrap_or(4) * MIB
    };
    let mut rows = vec![
        (Part::Content, 3 * MB),
        (Part::Content, cap.min(4 * MIB) - 64 * 1024),
        (Part::Content, 10 * MB),
        (Part::Letters, 10 * MB),
        (Part::Reasoning, 10 * MB),
        (Part::Arguments, 3 * MB),
        (Part::Arguments, 8 * MB),
    ];
    if let Some(only) = args
        .iter()
        .position(|a| a == "--rows")
        .and_then(|i| args.get(i + 1))
    {
        rows = only.split(',').map(parse_row).collect();
    }
    println!("binary: {}; deltas of {delta} characters", binary.display());
    println!();
    println!(
        "| reply | SSE in | stop reason | error | RSS before | peak growth | growth / SSE in | time |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (part, bytes) in rows {
        let big = BigReply {
            part,
            bytes,
            delta_chars: delta,
        };
        let m = measure(&binary, &settings, big).await;
        let sse = big.sse_bytes_read(cap);
        println!(
            "| {:.1} MB of {} | {:.1} MB | {} | {} | {} MiB | {:.0} MiB | {:.2} | {:.1} s |",
            bytes as f64 / MB as f64,
            part.name(),
            sse as f64 / MB as f64,
            m.stop_reason,
            m.error_kind.as_deref().unwrap_or("-"),
            m.rss_before_kib / 1024,
            m.growth_bytes() as f64 / MIB as f64,
            m.growth_bytes() as f64 / sse as f64,
            m.elapsed.as_secs_f64(),
        );
    }
}
