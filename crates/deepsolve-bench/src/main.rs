//! `cargo run --release -p deepsolve-bench --bin bench`: a 6-step scripted solve against an
//! instant in-process model, many times over. Prints engine time per round (the time outside
//! the model call: dispatch, folding, request building, token accounting), allocations and
//! peak heap per turn, and the prompt size of every round with folding on and off.
//!
//! `bench first-turn`: the first turn of a fresh process (engine time, resident set).
//! `bench cli-startup`: a `deepsolve solve` process from its start to its first model request
//! (time, CPU, resident set; see the `cli_startup` module).
//! `bench tokens`: the engine's token estimate against the exact o200k count, per kind of text.
//! `bench server …`: the real `deepsolve serve` against the `deepsolve-mock` model over HTTP
//! (see the `server` module).
//! `bench kb`: knowledge bases — ingest pages per minute of a text PDF, query latency on a
//! 10 000-chunk KB (BM25 and hybrid), index size, RSS, recall@5 and MRR on a labelled question
//! set (see the `kb` module).
//! `bench kb-ingest`: ingest time of 1, 8 and 49 MiB of one unbroken run and of ordinary
//! Markdown (see the `kb::ingest_size` module).
//! `bench ui`: the web UI in the system Chromium against the same pair: bytes of the first
//! load, time to first render, time to render a recorded turn of a few thousand events (see
//! the `ui` module).
//! `bench local-model [PATH]` (with `--features local`): the in-process local model — load,
//! resident set, prompt and generation tokens/s, time to first token, KV reuse on a follow-up
//! (see the `local_model` module).

mod alloc;
mod cli_startup;
mod kb;
#[cfg(feature = "local")]
mod local_model;
mod procfs;
mod server;
mod tokens;
mod ui;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use deepsolve_core::{
    ChatModel, ChatRequest, Completion, DeltaSink, Engine, ModelError, NullSink, SolveConfig, Tool,
    ToolContext, ToolError, ToolOutput, ToolSpec, TurnSpec, message_tokens,
};
use deepsolve_protocol::StopReason;
use deepsolve_testkit::{ScriptedModel, WellBehaved};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;

const STEPS: usize = 6;
const WARMUP_TURNS: usize = 20;
const TURNS: usize = 300;

/// A work tool with a realistic, deterministic output (~1.5 KB, like a computation's printout).
struct Lookup {
    spec: ToolSpec,
}

impl Lookup {
    fn new() -> Self {
        Lookup {
            spec: ToolSpec {
                name: "lookup".into(),
                description: "compute something for the current step".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {"query": {"type": "string"}, "context": {"type": "string"}},
                    "required": ["query"],
                    "additionalProperties": false
                }),
            },
        }
    }
}

#[async_trait]
impl Tool for Lookup {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, args: Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        let query = args["query"].as_str().unwrap_or_default();
        let mut out = format!("result for {query}\n");
        for i in 0..30 {
            out.push_str(&format!("  intermediate value {i}: {}\n", i * i + 7));
        }
        out.push_str("Answer: 42");
        Ok(ToolOutput::ok(out))
    }
}

/// Wraps the model to time each call and size each prompt.
struct Timed<M> {
    inner: M,
    calls: Mutex<Vec<(Instant, Instant, u64)>>,
}

#[async_trait]
impl<M: ChatModel> ChatModel for Timed<M> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<Completion, ModelError> {
        let start = Instant::now();
        let prompt: u64 = request.messages.iter().map(message_tokens).sum();
        let result = self.inner.complete(request, on_delta).await;
        let end = Instant::now();
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((start, end, prompt));
        result
    }

    fn honours(&self) -> deepsolve_core::Honours {
        self.inner.honours()
    }
}

struct TurnStats {
    engine_per_round: Vec<Duration>,
    prompt_per_round: Vec<u64>,
    allocations: u64,
    allocated_bytes: u64,
    peak_bytes: u64,
}

async fn one_turn(engine: &Engine, fold: bool, n: usize) -> anyhow::Result<TurnStats> {
    let model = Timed {
        inner: ScriptedModel::lean(WellBehaved::new(STEPS).with_work_tool(Some("lookup"))),
        calls: Mutex::new(Vec::new()),
    };
    let mut spec = TurnSpec::new(
        format!("bench-{n}"),
        "Solve x^2 - 5x + 6 = 0 and check both roots.",
    );
    spec.tools = vec!["lookup".into()];
    spec.config = SolveConfig {
        fold,
        max_rounds: 50,
        ..SolveConfig::default()
    };
    let before = alloc::snapshot();
    alloc::reset_peak();
    let started = Instant::now();
    let outcome = engine
        .run_turn(&model, spec, &NullSink, CancellationToken::new())
        .await?;
    let finished = Instant::now();
    let after = alloc::snapshot();
    anyhow::ensure!(
        outcome.stop_reason == StopReason::Answered,
        "the scripted solve ended {} instead of answered",
        outcome.stop_reason
    );
    let calls = model.calls.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut engine_per_round = Vec::with_capacity(calls.len());
    let mut last_end = started;
    for (i, (start, end, _)) in calls.iter().enumerate() {
        let mut spent = start.duration_since(last_end);
        if i + 1 == calls.len() {
            spent += finished.duration_since(*end);
        }
        engine_per_round.push(spent);
        last_end = *end;
    }
    Ok(TurnStats {
        engine_per_round,
        prompt_per_round: calls.iter().map(|c| c.2).collect(),
        allocations: after.allocations - before.allocations,
        allocated_bytes: after.bytes - before.bytes,
        peak_bytes: alloc::peak().saturating_sub(before.live),
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn main() -> std::process::ExitCode {
    // `bench kb` parses PDFs in a child process that is this binary again.
    if std::env::args_os().nth(1).as_deref() == Some(std::ffi::OsStr::new(kb::PDF_CHILD)) {
        return deepsolve_kb::extract::pdf_child_main(std::env::args_os().skip(2));
    }
    match bench() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e:?}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn bench() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let scenario = args.first().map(String::as_str);
    if scenario == Some("kb") {
        return kb::run(&args[1..]);
    }
    if scenario == Some("kb-ingest") {
        return kb::ingest_size::run(&args[1..]);
    }
    if scenario == Some("server") {
        return server::run(&args[1..]);
    }
    if scenario == Some("ui") {
        return ui::run(&args[1..]);
    }
    if scenario == Some("cli-startup") {
        return cli_startup::run(&args[1..]);
    }
    if scenario == Some("local-model") {
        #[cfg(feature = "local")]
        return local_model::run(&args[1..]);
        #[cfg(not(feature = "local"))]
        anyhow::bail!(
            "bench local-model needs llama.cpp: cargo run --release -p deepsolve-bench --features local --bin bench -- local-model"
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match scenario {
        Some("engine") | None => runtime.block_on(engine_overhead()),
        Some("first-turn") => runtime.block_on(first_turn()),
        Some("tokens") => tokens::print_table(),
        Some(other) => anyhow::bail!(
            "unknown scenario {other:?} (scenarios: engine, the default; first-turn; tokens; server; ui; kb; kb-ingest; cli-startup; local-model)"
        ),
    }
}

/// The resident set of this process, from `/proc/self/status` (Linux).
fn rss_kib() -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no VmRSS in /proc/self/status"))
}

/// `bench first-turn`: the first turn of a fresh process — its engine time (nothing warmed
/// before it) and the resident set before and after it.
async fn first_turn() -> anyhow::Result<()> {
    let engine = Engine::new(vec![Arc::new(Lookup::new())])?;
    let rss_before = rss_kib()?;
    let started = Instant::now();
    let first = one_turn(&engine, true, 0).await?;
    let wall = started.elapsed();
    let rss_after = rss_kib()?;
    let second = one_turn(&engine, true, 1).await?;
    let engine_time = |s: &TurnStats| s.engine_per_round.iter().sum::<Duration>();
    let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1e3);
    let mib = |kib: u64| format!("{:.1} MiB", kib as f64 / 1024.0);
    println!(
        "## First turn of a fresh process ({STEPS}-step scripted solve, instant in-process model)\n"
    );
    println!("| metric | value |");
    println!("|---|---|");
    println!("| engine time, first turn | {} |", ms(engine_time(&first)));
    println!("| wall time, first turn | {} |", ms(wall));
    println!(
        "| engine time, second turn | {} |",
        ms(engine_time(&second))
    );
    println!("| RSS before the first turn | {} |", mib(rss_before));
    println!("| RSS after the first turn | {} |", mib(rss_after));
    Ok(())
}

/// The default scenario: engine time per round, memory per turn, prompt size per round.
async fn engine_overhead() -> anyhow::Result<()> {
    {
        let engine = Engine::new(vec![Arc::new(Lookup::new())])?;
        for n in 0..WARMUP_TURNS {
            one_turn(&engine, true, n).await?;
        }
        let mut rounds = Vec::new();
        let mut allocs = Vec::new();
        let mut bytes = Vec::new();
        let mut peaks = Vec::new();
        let mut folded_prompts = Vec::new();
        for n in 0..TURNS {
            let s = one_turn(&engine, true, n).await?;
            rounds.extend(s.engine_per_round);
            allocs.push(s.allocations);
            bytes.push(s.allocated_bytes);
            peaks.push(s.peak_bytes);
            folded_prompts = s.prompt_per_round;
        }
        let unfolded_prompts = one_turn(&engine, false, TURNS).await?.prompt_per_round;
        rounds.sort();
        let mean = rounds.iter().sum::<Duration>() / rounds.len() as u32;
        let avg = |v: &[u64]| v.iter().sum::<u64>() / v.len() as u64;

        println!(
            "## Engine overhead ({STEPS}-step scripted solve, instant in-process model, {TURNS} turns, {} rounds)\n",
            rounds.len()
        );
        println!("| metric | p50 | p99 | mean |");
        println!("|---|---|---|---|");
        println!(
            "| engine time per round | {} | {} | {} |",
            micros(percentile(&rounds, 0.5)),
            micros(percentile(&rounds, 0.99)),
            micros(mean)
        );
        println!("\n## Memory per turn\n");
        println!("| metric | value |");
        println!("|---|---|");
        println!("| allocations per turn | {} |", avg(&allocs));
        println!(
            "| bytes allocated per turn | {:.1} KiB |",
            avg(&bytes) as f64 / 1024.0
        );
        println!(
            "| peak live heap growth during a turn | {:.1} KiB |",
            avg(&peaks) as f64 / 1024.0
        );
        println!("\n## Prompt size per round (estimated tokens)\n");
        println!("| round | folding on | folding off |");
        println!("|---|---|---|");
        let n = folded_prompts.len().max(unfolded_prompts.len());
        for i in 0..n {
            let cell = |v: &[u64]| {
                v.get(i)
                    .map(|t| t.to_string())
                    .unwrap_or_else(|| "—".into())
            };
            println!(
                "| {} | {} | {} |",
                i + 1,
                cell(&folded_prompts),
                cell(&unfolded_prompts)
            );
        }
        let on: u64 = folded_prompts.iter().sum();
        let off: u64 = unfolded_prompts.iter().sum();
        let last_on = folded_prompts.last().copied().unwrap_or(0);
        let last_off = unfolded_prompts.last().copied().unwrap_or(0);
        println!(
            "| **total** | **{on}** | **{off}** |\n\nFolding: the final prompt is {:.0} % smaller ({last_on} vs {last_off} tokens); all prompts of the turn together {:.0} % smaller.",
            100.0 * (1.0 - last_on as f64 / last_off.max(1) as f64),
            100.0 * (1.0 - on as f64 / off.max(1) as f64)
        );
        Ok(())
    }
}
