//! `bench ui`: the web UI in a real browser, against the real `deepsolve serve` (the UI
//! embedded) and the `deepsolve-mock` model. Prints a table, asserts nothing about time.
//!
//! It records one long turn (the `showcase-long` policy, paced so that each delta is its own
//! event: a few thousand events), then runs `web/bench/ui.mjs` (Playwright's library driving
//! the system Chromium) which measures:
//! - the bytes of the first load of `/`: JavaScript, CSS, fonts (KaTeX's apart), HTML, as
//!   transferred and gzip-compressed;
//! - navigation start → the problem editor visible, and the first contentful paint;
//! - the time to render the recorded turn when its session page opens: between the UI's
//!   marks `deepsolve:events-start:<turn>` and `deepsolve:rendered:<turn>`, the median of
//!   several loads.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use deepsolve_testkit::policy::SHOWCASE_PROBLEM;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::procfs;
use crate::server::{Pair, sse_data};

#[derive(Debug, Clone)]
struct Opts {
    deepsolve: PathBuf,
    mock: PathBuf,
    node: PathBuf,
    script: PathBuf,
    loads: usize,
    tokens_per_s: u64,
    min_events: usize,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            deepsolve: PathBuf::from("target/debug/deepsolve"),
            mock: PathBuf::from("target/debug/deepsolve-mock"),
            node: PathBuf::from("node"),
            script: PathBuf::from("web/bench/ui.mjs"),
            loads: 5,
            // Slower than one delta per 20 ms window of the engine's live output, so every
            // delta is an event of its own.
            tokens_per_s: 45,
            min_events: 2000,
        }
    }
}

const USAGE: &str = "bench ui [--deepsolve PATH] [--mock PATH] [--node PATH] [--script PATH] \
[--loads N] [--tokens-per-s N] [--min-events N]";

fn parse(args: &[String]) -> anyhow::Result<Opts> {
    let mut opts = Opts::default();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .with_context(|| format!("{flag} needs a value; usage: {USAGE}"))
        };
        let number = |v: String| {
            v.parse::<u64>()
                .with_context(|| format!("{flag}: not a number: {v}"))
        };
        match flag.as_str() {
            "--deepsolve" => opts.deepsolve = value()?.into(),
            "--mock" => opts.mock = value()?.into(),
            "--node" => opts.node = value()?.into(),
            "--script" => opts.script = value()?.into(),
            "--loads" => opts.loads = number(value()?)?.max(1) as usize,
            "--tokens-per-s" => opts.tokens_per_s = number(value()?)?,
            "--min-events" => opts.min_events = number(value()?)? as usize,
            other => bail!("unknown argument {other}; usage: {USAGE}"),
        }
    }
    Ok(opts)
}

/// The recorded turn.
struct Recorded {
    turn_id: String,
    session_id: String,
    events: usize,
    stop_reason: String,
}

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let opts = parse(args)?;
    for binary in [&opts.deepsolve, &opts.mock] {
        ensure!(
            binary.exists(),
            "{} not found: build it (cargo build -p deepsolve-cli -p deepsolve-testkit --bins) or pass its path",
            binary.display()
        );
    }
    ensure!(
        opts.script.exists(),
        "{} not found: run from the workspace root or pass --script",
        opts.script.display()
    );
    procfs::become_subreaper().context("cannot become the subreaper of the sandboxes")?;
    let mock_args = [
        "--policy".to_string(),
        "showcase-long".to_string(),
        "--tokens-per-s".to_string(),
        opts.tokens_per_s.to_string(),
    ];
    let mut pair = Pair::start(&opts.deepsolve, &opts.mock, &mock_args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let recorded = runtime.block_on(record(pair.base())).inspect_err(|_| {
        let _ = pair.check_alive();
    })?;
    ensure!(
        recorded.events >= opts.min_events,
        "the recorded turn has {} events, fewer than {}: pace the mock slower (--tokens-per-s)",
        recorded.events,
        opts.min_events
    );
    let measured = measure(&opts, pair.base(), &recorded)?;
    print_table(&opts, &recorded, &measured);
    Ok(())
}

/// POST the showcase problem and follow its events to `turn_finished`, counting them.
async fn record(base: &str) -> anyhow::Result<Recorded> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()?;
    let created = http
        .post(format!("{base}/api/v1/turns"))
        .json(&json!({ "problem": SHOWCASE_PROBLEM }))
        .send()
        .await?;
    let status = created.status();
    if status.as_u16() != 201 {
        bail!("POST /api/v1/turns: {status}: {}", created.text().await?);
    }
    let created: Value = created.json().await?;
    let text = |key: &str| {
        created[key]
            .as_str()
            .map(str::to_string)
            .with_context(|| format!("no {key} in the POST reply: {created}"))
    };
    let (turn_id, session_id) = (text("turn_id")?, text("session_id")?);
    let events = http
        .get(format!("{base}/api/v1/turns/{turn_id}/events"))
        .send()
        .await?;
    ensure!(
        events.status().is_success(),
        "GET events: {}",
        events.status()
    );
    let mut stream = events.bytes_stream();
    let (mut buf, mut count) = (String::new(), 0);
    while let Some(chunk) = stream.next().await {
        buf.push_str(&String::from_utf8_lossy(
            &chunk.context("the event stream broke")?,
        ));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let Some(data) = sse_data(&block) else {
                continue;
            };
            count += 1;
            let event: Value =
                serde_json::from_str(data).with_context(|| format!("unreadable event {data}"))?;
            if event["type"] == "turn_finished" {
                return Ok(Recorded {
                    turn_id,
                    session_id,
                    events: count,
                    stop_reason: event["stop_reason"].as_str().unwrap_or("?").to_string(),
                });
            }
        }
    }
    bail!("the event stream ended without turn_finished")
}

/// Run the browser script; its JSON report.
fn measure(opts: &Opts, base: &str, recorded: &Recorded) -> anyhow::Result<Value> {
    let output = Command::new(&opts.node)
        .arg(&opts.script)
        .args(["--base", base, "--session", &recorded.session_id])
        .args([
            "--turn",
            &recorded.turn_id,
            "--loads",
            &opts.loads.to_string(),
        ])
        .output()
        .with_context(|| format!("cannot run {}", opts.node.display()))?;
    ensure!(
        output.status.success(),
        "{} failed ({}):\n{}",
        opts.script.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "unreadable report from {}: {}",
            opts.script.display(),
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

fn kb(bytes: &Value) -> String {
    bytes
        .as_f64()
        .map_or("–".to_string(), |b| format!("{:.1} KB", b / 1000.0))
}

fn ms(value: &Value) -> String {
    value
        .as_f64()
        .map_or("–".to_string(), |v| format!("{v:.0} ms"))
}

fn print_table(opts: &Opts, recorded: &Recorded, report: &Value) {
    let command: Vec<String> = std::env::args().collect();
    println!("## UI benchmark (`{}`)\n", command.join(" "));
    println!(
        "Recorded turn: {} events (`showcase-long`, the mock at {} deltas/s), {}; `{}` and `{}`, Chromium at `{}`.\n",
        recorded.events,
        opts.tokens_per_s,
        recorded.stop_reason,
        opts.deepsolve.display(),
        opts.mock.display(),
        report["browser"].as_str().unwrap_or("?")
    );
    println!("### First load of `/` (a fresh browser profile)\n");
    println!("| resources | requests | transferred | decoded | gzip -9 |");
    println!("|---|---|---|---|---|");
    let load = &report["first_load"];
    for (key, label) in [
        ("js", "JavaScript"),
        ("css", "CSS"),
        ("html", "HTML"),
        ("font_katex", "fonts: KaTeX"),
        ("font_other", "fonts: other"),
        ("other", "other (API replies, icons)"),
        ("total", "**total**"),
        (
            "total_without_katex_fonts",
            "**total without KaTeX fonts** (target ≤ 350 KB gzip)",
        ),
    ] {
        let row = &load[key];
        println!(
            "| {label} | {} | {} | {} | {} |",
            row["count"],
            kb(&row["transfer"]),
            kb(&row["decoded"]),
            kb(&row["gzip"])
        );
    }
    println!("\n### Time\n");
    println!("| measure | value |");
    println!("|---|---|");
    let render = &report["render"];
    println!(
        "| navigation start → the problem editor visible | {} |",
        ms(&render["editor_visible_ms"])
    );
    println!("| first contentful paint | {} |", ms(&render["fcp_ms"]));
    let samples: Vec<String> = report["turn"]["samples_ms"]
        .as_array()
        .map(|s| s.iter().map(ms).collect())
        .unwrap_or_default();
    println!(
        "| the {}-event turn rendered (`events-start` → `rendered`), median of {} loads (target < 500 ms) | {} ({}) |",
        recorded.events,
        samples.len(),
        ms(&report["turn"]["median_ms"]),
        samples.join(", ")
    );
}
