//! Load benchmark: N concurrent turns against a mock model with realistic latency and token
//! rate, each followed live over SSE; prints a table (never a timed test).
//!
//! ```text
//! cargo run --release -p deepsolve-server --example loadbench -- --turns 100,1000,2000
//! ```
//!
//! The server runs in a child process (this binary with `--child`), so its CPU time and
//! memory are measured apart from the clients: memory per active turn is the child's peak RSS
//! growth over its idle RSS divided by N; CPU is the child's user+system time over the run's
//! wall time. The mock model lives in the server process (timers only, no HTTP): each model
//! round waits `--ttft-ms`, then streams `--think-tokens` reasoning tokens and then the
//! scripted reply at `--tokens-per-s`. Every synthetic token carries its emission time, so a
//! client measures event latency as model delta → SSE client, across processes on one clock.
//! Before the loads, `--probes` turns are started one at a time on a fresh server, each timed
//! from its POST to its first SSE event; after each load the server's RSS is read again
//! `--settle-s` seconds later, to show what memory it gave back.

// A measuring harness: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use deepsolve_core::{ChatModel, ChatRequest, Completion, DeltaSink, ModelError, StreamDelta};
use deepsolve_server::ServerConfig;
use deepsolve_store::{Store, StoreOptions};
use deepsolve_testkit::{ScriptedModel, WellBehaved};
use futures::StreamExt;
use serde_json::{Value, json};

#[derive(Debug, Clone)]
struct Opts {
    turns: Vec<usize>,
    steps: usize,
    ttft_ms: u64,
    tokens_per_s: u64,
    think_tokens: usize,
    database: Option<String>,
    /// How long to wait after a load before reading the server's RSS again.
    settle_s: u64,
    /// Turns started one at a time, each timed from its POST to its first SSE event.
    probes: usize,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            turns: vec![100, 1000, 2000],
            steps: 2,
            ttft_ms: 400,
            tokens_per_s: 20,
            think_tokens: 20,
            database: None,
            settle_s: 60,
            probes: 20,
        }
    }
}

fn parse(args: &[String]) -> Result<(bool, Opts), String> {
    let mut opts = Opts::default();
    let mut child = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
        let num = |v: String| v.parse::<u64>().map_err(|e| format!("{a}: {e}"));
        match a.as_str() {
            "--child" => child = true,
            "--turns" => {
                opts.turns = val()?
                    .split(',')
                    .map(|t| t.trim().parse::<usize>().map_err(|e| e.to_string()))
                    .collect::<Result<_, _>>()?
            }
            "--steps" => opts.steps = num(val()?)? as usize,
            "--ttft-ms" => opts.ttft_ms = num(val()?)?,
            "--tokens-per-s" => opts.tokens_per_s = num(val()?)?.max(1),
            "--think-tokens" => opts.think_tokens = num(val()?)? as usize,
            "--database" => opts.database = Some(val()?),
            "--settle-s" => opts.settle_s = num(val()?)?,
            "--probes" => opts.probes = num(val()?)? as usize,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok((child, opts))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (child, opts) = match parse(&args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("loadbench: {e}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if child {
        runtime.block_on(serve_child(opts));
    } else {
        runtime.block_on(drive(opts, &args));
    }
}

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// A scripted solver behind realistic timing.
struct PacedModel {
    inner: ScriptedModel,
    ttft: Duration,
    per_token: Duration,
    think_tokens: usize,
}

#[async_trait]
impl ChatModel for PacedModel {
    fn name(&self) -> &str {
        "paced-mock"
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<Completion, ModelError> {
        let start = tokio::time::Instant::now() + self.ttft;
        let mut scripted = Vec::new();
        let completion = self
            .inner
            .complete(request, &mut |d| scripted.push(d))
            .await?;
        let mut tick = 0u32;
        let mut next = || {
            let at = start + self.per_token * tick;
            tick += 1;
            tokio::time::sleep_until(at)
        };
        for _ in 0..self.think_tokens {
            next().await;
            on_delta(StreamDelta::Reasoning(format!("⏱{} ", now_nanos())));
        }
        for d in scripted {
            next().await;
            on_delta(d);
        }
        Ok(completion)
    }
}

async fn serve_child(opts: Opts) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = opts
        .database
        .clone()
        .unwrap_or_else(|| format!("sqlite://{}", dir.path().join("bench.db").display()));
    let store = Store::open(&url, StoreOptions::default())
        .await
        .expect("store");
    let model = PacedModel {
        inner: ScriptedModel::lean(WellBehaved::new(opts.steps).with_work_tool(None)),
        ttft: Duration::from_millis(opts.ttft_ms),
        per_token: Duration::from_micros(1_000_000 / opts.tokens_per_s),
        think_tokens: opts.think_tokens,
    };
    // No work tools: the benchmark measures the loop and the event path.
    let app = deepsolve_app::AppBuilder::new(Default::default(), Arc::new(model))
        .catalog(&[])
        .session_capacity(100_000)
        .build()
        .expect("app");
    let config = ServerConfig {
        instance_id: "bench".into(),
        max_running_turns: 100_000,
        ..ServerConfig::default()
    };
    let state = deepsolve_server::prepare(store, Arc::new(app), config)
        .await
        .expect("prepare");
    let listener = deepsolve_server::bind("127.0.0.1:0".parse().expect("addr"), state.auth)
        .await
        .expect("bind");
    println!("ADDR {}", listener.local_addr().expect("addr"));
    deepsolve_server::serve(listener, state, std::future::pending())
        .await
        .expect("serve");
}

/// RSS (KiB) and CPU time (s) of a process, from /proc.
fn proc_stats(pid: u32) -> (u64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) — utime and stime are 14 and 15.
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i)?.parse::<u64>().ok())
        .sum();
    (rss, ticks as f64 / 100.0)
}

struct ChildServer {
    child: Child,
    addr: String,
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_child(args: &[String]) -> ChildServer {
    let exe = std::env::current_exe().expect("own path");
    let mut child = Command::new(exe)
        .arg("--child")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn server");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("addr line");
    let addr = line
        .trim()
        .strip_prefix("ADDR ")
        .expect("ADDR line")
        .to_string();
    ChildServer { child, addr }
}

#[derive(Default)]
struct ClientResult {
    latencies_us: Vec<u64>,
    events: u64,
    error: Option<String>,
}

async fn one_turn(http: reqwest::Client, base: String, i: usize) -> ClientResult {
    let mut out = ClientResult::default();
    let created = http
        .post(format!("{base}/api/v1/turns"))
        .json(&json!({"problem": format!("bench problem {i}")}))
        .send()
        .await;
    let turn = match created {
        Ok(r) if r.status().as_u16() == 201 => match r.json::<Value>().await {
            Ok(v) => v["turn_id"].as_str().unwrap_or_default().to_string(),
            Err(e) => {
                out.error = Some(e.to_string());
                return out;
            }
        },
        Ok(r) => {
            out.error = Some(format!("POST {}", r.status()));
            return out;
        }
        Err(e) => {
            out.error = Some(e.to_string());
            return out;
        }
    };
    let resp = match http
        .get(format!("{base}/api/v1/turns/{turn}/events"))
        .send()
        .await
    {
        Ok(r) => r,
        Err(e) => {
            out.error = Some(e.to_string());
            return out;
        }
    };
    let mut stream = resp.bytes_stream();
    let mut buf = String::new();
    let mut finished = false;
    while let Some(chunk) = stream.next().await {
        let Ok(chunk) = chunk else {
            out.error = Some("stream broke".into());
            return out;
        };
        let received = now_nanos();
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let Some(data) = block.lines().find_map(|l| l.strip_prefix("data: ")) else {
                continue;
            };
            out.events += 1;
            if let Some(pos) = data.find('⏱') {
                let digits: String = data[pos + '⏱'.len_utf8()..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                if let Ok(sent) = digits.parse::<u128>() {
                    out.latencies_us
                        .push((received.saturating_sub(sent) / 1000) as u64);
                }
            }
            if data.contains("\"type\":\"turn_finished\"") {
                finished = true;
                if !data.contains("\"stop_reason\":\"answered\"") {
                    out.error = Some(format!("ended: {data}"));
                }
            }
        }
    }
    if !finished && out.error.is_none() {
        out.error = Some("stream ended without turn_finished".into());
    }
    out
}

/// Start one turn and time its POST to the first event its SSE stream delivers (then let
/// the stream go: the turn runs on in the server, on its timers).
async fn first_event_after_post(http: &reqwest::Client, base: &str, i: usize) -> Option<u64> {
    let started = Instant::now();
    let created = http
        .post(format!("{base}/api/v1/turns"))
        .json(&json!({"problem": format!("probe problem {i}")}))
        .send()
        .await
        .ok()?;
    let turn = created.json::<Value>().await.ok()?["turn_id"]
        .as_str()?
        .to_string();
    let resp = http
        .get(format!("{base}/api/v1/turns/{turn}/events"))
        .send()
        .await
        .ok()?;
    let mut stream = resp.bytes_stream();
    let mut buf = Vec::new();
    while let Some(Ok(chunk)) = stream.next().await {
        buf.extend_from_slice(&chunk);
        if buf.windows(2).any(|w| w == b"\n\n") {
            return Some(started.elapsed().as_micros() as u64);
        }
    }
    None
}

/// POST → first SSE event, one turn at a time, on a fresh server.
async fn probe_first_events(opts: &Opts, child_args: &[String]) {
    if opts.probes == 0 {
        return;
    }
    let server = start_child(child_args);
    let base = format!("http://{}", server.addr);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let http = reqwest::Client::new();
    let mut times = Vec::new();
    for i in 0..opts.probes {
        if let Some(us) = first_event_after_post(&http, &base, i).await {
            times.push(us);
        }
    }
    times.sort_unstable();
    println!("| turns, one at a time | POST → first SSE event p50 | p99 | max | failed |");
    println!("|---|---|---|---|---|");
    println!(
        "| {} | {:.2} ms | {:.2} ms | {:.2} ms | {} |",
        opts.probes,
        percentile(&times, 0.50),
        percentile(&times, 0.99),
        percentile(&times, 1.0),
        opts.probes - times.len()
    );
    println!();
    drop(server);
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

async fn drive(opts: Opts, args: &[String]) {
    let child_args: Vec<String> = args.to_vec();
    println!(
        "mock model: {} ms to first token, {} tokens/s, {} thinking tokens per round, {} steps ({} rounds per turn)",
        opts.ttft_ms,
        opts.tokens_per_s,
        opts.think_tokens,
        opts.steps,
        opts.steps + 2
    );
    println!();
    probe_first_events(&opts, &child_args).await;
    println!(
        "| concurrent turns | wall time | events | events/s | memory per active turn | server idle RSS | peak RSS | RSS {}s after | event latency p50 | p99 | server CPU | CPU per event | client CPU | errors |",
        opts.settle_s
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for &n in &opts.turns {
        let server = start_child(&child_args);
        let pid = server.child.id();
        let base = format!("http://{}", server.addr);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (idle_rss, cpu_before) = proc_stats(pid);
        let (_, client_cpu_before) = proc_stats(std::process::id());
        let peak = Arc::new(std::sync::atomic::AtomicU64::new(idle_rss));
        let sampling = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let sampler = {
            let (peak, sampling) = (peak.clone(), sampling.clone());
            tokio::spawn(async move {
                while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                    let (rss, _) = proc_stats(pid);
                    peak.fetch_max(rss, std::sync::atomic::Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
        };
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(n)
            .build()
            .expect("client");
        let started = Instant::now();
        let tasks: Vec<_> = (0..n)
            .map(|i| tokio::spawn(one_turn(http.clone(), base.clone(), i)))
            .collect();
        let mut latencies = Vec::new();
        let mut events = 0u64;
        let mut errors = 0usize;
        let mut first_error = None;
        for t in tasks {
            match t.await {
                Ok(r) => {
                    latencies.extend(r.latencies_us);
                    events += r.events;
                    if let Some(e) = r.error {
                        errors += 1;
                        first_error.get_or_insert(e);
                    }
                }
                Err(e) => {
                    errors += 1;
                    first_error.get_or_insert(e.to_string());
                }
            }
        }
        let wall = started.elapsed().as_secs_f64();
        sampling.store(false, std::sync::atomic::Ordering::Relaxed);
        let _ = sampler.await;
        let (_, cpu_after) = proc_stats(pid);
        let (_, client_cpu_after) = proc_stats(std::process::id());
        let peak_rss = peak.load(std::sync::atomic::Ordering::Relaxed);
        latencies.sort_unstable();
        let per_turn_kib = peak_rss.saturating_sub(idle_rss) as f64 / n as f64;
        drop(http);
        tokio::time::sleep(Duration::from_secs(opts.settle_s)).await;
        let (settled_rss, _) = proc_stats(pid);
        let server_cpu_s = cpu_after - cpu_before;
        println!(
            "| {n} | {wall:.1} s | {events} | {:.0} | {per_turn_kib:.0} KiB | {:.0} MiB | {:.0} MiB | {:.0} MiB | {:.2} ms | {:.2} ms | {:.0} % | {:.1} µs | {:.0} % | {errors} |",
            events as f64 / wall,
            idle_rss as f64 / 1024.0,
            peak_rss as f64 / 1024.0,
            settled_rss as f64 / 1024.0,
            percentile(&latencies, 0.50),
            percentile(&latencies, 0.99),
            server_cpu_s / wall * 100.0,
            server_cpu_s * 1e6 / events.max(1) as f64,
            (client_cpu_after - client_cpu_before) / wall * 100.0,
        );
        if let Some(e) = first_error {
            eprintln!("first error at {n} turns: {e}");
        }
        drop(server);
    }
    println!();
    println!(
        "CPU: percent of one core (200 % = both cores of this machine); the clients (one SSE reader per turn) run in this process"
    );
}
