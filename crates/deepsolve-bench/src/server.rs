//! `bench server`: the real `deepsolve serve` binary against the `deepsolve-mock` model, both
//! as separate processes in private directories, driven over HTTP and SSE like clients do.
//!
//! Per code-tools mode (mounted / not mounted) and concurrency it runs three passes, each on
//! a fresh server and mock:
//! - **instant**: the mock answers at once; `--turns` turns (at least the concurrency) with
//!   `c` in flight. Server CPU per model round, CPU spent below the server (sandboxes),
//!   turns/s, RSS from start to a minute after the load, POST → first SSE event.
//! - **paced**: the mock streams at a realistic rate (`--ttft-ms`, `--tokens-per-s`) and
//!   stamps each text delta with its emission time; `c` turns at once. POST → first SSE event
//!   and model delta → SSE client, measured when the CPU is not saturated by an instant model.
//! - **first code call** (code mounted only): sequential turns whose model calls
//!   `code_execution` with `print(1)`, its arguments streamed a few characters per delta;
//!   the time from the `tool_call` event to its `tool_result`, as the client sees them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use deepsolve_protocol::{EventKind, StopReason, TurnEvent};
use deepsolve_testkit::policy::FirstCodeCall;
use deepsolve_testkit::stamp::{stamps, unix_micros};
use futures::StreamExt;
use serde_json::json;

use crate::procfs;

/// Model rounds of the scripted solve: a plan, one finish per step, the answer.
const STEPS: usize = 8;
const ROUNDS: u32 = STEPS as u32 + 2;
/// Rounds of the first-code-call solve: plan, the code call, finish, answer.
const CODE_ROUNDS: u32 = 4;
/// How long a turn may take before the bench gives up on it.
const TURN_TIMEOUT: Duration = Duration::from_secs(600);

/// How the code tools are taken away for the "not mounted" rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CodeOff {
    /// `DEEPSOLVE_BWRAP=/nonexistent`: no sandbox, so no code tool (works on every build).
    Env,
    /// The `tools.disabled` setting lists `code_execution` and `exec`.
    Setting,
}

#[derive(Debug, Clone)]
struct Opts {
    deepsolve: PathBuf,
    mock: PathBuf,
    concurrency: Vec<usize>,
    turns: usize,
    settle: Duration,
    /// Settle only after the load of the largest concurrency (the long idle is for the
    /// memory a big load leaves behind).
    settle_max_only: bool,
    code_off: CodeOff,
    /// Which code modes to run: `true` = mounted.
    code_modes: Vec<bool>,
    ttft_ms: u64,
    tokens_per_s: u64,
    paced_min_turns: usize,
    code_call_turns: usize,
    code_tokens_per_s: u64,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            deepsolve: PathBuf::from("target/release/deepsolve"),
            mock: PathBuf::from("target/release/deepsolve-mock"),
            concurrency: vec![1, 50, 200, 1000],
            turns: 200,
            settle: Duration::from_secs(60),
            settle_max_only: false,
            code_off: CodeOff::Env,
            code_modes: vec![true, false],
            ttft_ms: 400,
            tokens_per_s: 20,
            paced_min_turns: 5,
            code_call_turns: 10,
            code_tokens_per_s: 30,
        }
    }
}

const USAGE: &str = "bench server [--deepsolve PATH] [--mock PATH] [--concurrency 1,50,200,1000] \
[--turns N] [--settle-s S] [--settle-rows all|max] [--code mounted,off] [--code-off env|setting] [--ttft-ms MS] \
[--tokens-per-s N] [--paced-min-turns N] [--code-call-turns N] [--code-tokens-per-s N]";

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
            "--concurrency" => {
                opts.concurrency = value()?
                    .split(',')
                    .map(|c| c.trim().parse::<usize>().map(|c| c.max(1)))
                    .collect::<Result<_, _>>()
                    .context("--concurrency: a list like 1,50,200")?;
            }
            "--turns" => opts.turns = number(value()?)? as usize,
            "--settle-s" => opts.settle = Duration::from_secs(number(value()?)?),
            "--settle-rows" => {
                opts.settle_max_only = match value()?.as_str() {
                    "all" => false,
                    "max" => true,
                    other => bail!("--settle-rows: all or max, not {other}"),
                }
            }
            "--code" => {
                opts.code_modes = value()?
                    .split(',')
                    .map(|m| match m.trim() {
                        "mounted" => Ok(true),
                        "off" => Ok(false),
                        other => bail!("--code: mounted or off, not {other}"),
                    })
                    .collect::<anyhow::Result<_>>()?;
            }
            "--code-off" => {
                opts.code_off = match value()?.as_str() {
                    "env" => CodeOff::Env,
                    "setting" => CodeOff::Setting,
                    other => bail!("--code-off: env or setting, not {other}"),
                }
            }
            "--ttft-ms" => opts.ttft_ms = number(value()?)?,
            "--tokens-per-s" => opts.tokens_per_s = number(value()?)?,
            "--paced-min-turns" => opts.paced_min_turns = number(value()?)? as usize,
            "--code-call-turns" => opts.code_call_turns = number(value()?)? as usize,
            "--code-tokens-per-s" => opts.code_tokens_per_s = number(value()?)?,
            other => bail!("unknown argument {other}; usage: {USAGE}"),
        }
    }
    Ok(opts)
}

/// A child process killed (and waited for) when dropped.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `cmd` with no `DEEPSOLVE_*` or key variable of the caller's environment.
fn clean(mut cmd: Command) -> Command {
    for (key, _) in std::env::vars() {
        if key.starts_with("DEEPSOLVE_") || key == "OPENAI_API_KEY" {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// The first stdout line of `child`, or the tail of its stderr log if it never comes.
fn first_line(child: &mut Child, log: &Path, what: &str) -> anyhow::Result<String> {
    let stdout = child.stdout.take().context("no stdout pipe")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    if line.trim().is_empty() {
        bail!("{what} did not start; its stderr:\n{}", tail(log));
    }
    Ok(line.trim().to_string())
}

/// The last lines of a log file.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

struct Mock {
    child: Guard,
    url: String,
    _dir: tempfile::TempDir,
}

impl Mock {
    fn start(binary: &Path, args: &[String]) -> anyhow::Result<Mock> {
        let dir = tempfile::tempdir()?;
        let log = dir.path().join("mock.log");
        let mut cmd = clean(Command::new(binary));
        cmd.args(["--port", "0", "--quiet", "--no-capture"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log)?);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let url = first_line(&mut child, &log, "deepsolve-mock")?;
        Ok(Mock {
            child: Guard(child),
            url,
            _dir: dir,
        })
    }

    fn pid(&self) -> u32 {
        self.child.0.id()
    }
}

struct Server {
    child: Guard,
    base: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(opts: &Opts, model_url: &str, code: bool) -> anyhow::Result<Server> {
        let dir = tempfile::tempdir()?;
        let home = dir.path();
        let settings = home.join("settings.yaml");
        let disabled = !code && opts.code_off == CodeOff::Setting;
        let text = if disabled {
            "tools:\n  disabled: [code_execution, exec]\n"
        } else {
            ""
        };
        std::fs::write(&settings, text)?;
        let log = home.join("serve.log");
        let db = format!("sqlite://{}", home.join("deepsolve.db").display());
        let mut cmd = clean(Command::new(&opts.deepsolve));
        cmd.env("DEEPSOLVE_CONFIG", &settings)
            .env("HOME", home)
            .env("XDG_DATA_HOME", home.join("data"))
            .env("XDG_CONFIG_HOME", home.join("config"))
            .args(["serve", "--addr", "127.0.0.1:0", "--database", &db])
            .args(["--instance-id", "bench", "--base-url", model_url])
            .args(["--model", "mock-model"])
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log)?);
        if !code && opts.code_off == CodeOff::Env {
            // bwrap is also looked up on PATH when the named one is missing.
            cmd.env("DEEPSOLVE_BWRAP", "/nonexistent")
                .env("PATH", "/nonexistent");
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", opts.deepsolve.display()))?;
        let line = first_line(&mut child, &log, "deepsolve serve")?;
        let base = line
            .strip_prefix("listening on ")
            .with_context(|| format!("unexpected first line {line:?}; stderr:\n{}", tail(&log)))?
            .to_string();
        Ok(Server {
            child: Guard(child),
            base,
            log,
            _dir: dir,
        })
    }

    fn pid(&self) -> u32 {
        self.child.0.id()
    }

    fn cpu_ticks(&self) -> u64 {
        procfs::proc_cpu(self.pid()).map_or(0, |c| c.own)
    }

    /// Fails with the server's stderr tail if it has exited.
    fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.0.try_wait()? {
            bail!(
                "deepsolve serve exited ({status}); its stderr:\n{}",
                tail(&self.log)
            );
        }
        Ok(())
    }
}

/// A mock model and a server on it (code tools mounted) for another scenario (`bench ui`);
/// both stop when it is dropped, the server first.
pub(crate) struct Pair {
    server: Server,
    _mock: Mock,
}

impl Pair {
    pub(crate) fn start(
        deepsolve: &Path,
        mock: &Path,
        mock_args: &[String],
    ) -> anyhow::Result<Pair> {
        let opts = Opts {
            deepsolve: deepsolve.to_path_buf(),
            mock: mock.to_path_buf(),
            ..Opts::default()
        };
        let mock = Mock::start(&opts.mock, mock_args)?;
        let server = Server::start(&opts, &mock.url, true)?;
        Ok(Pair {
            server,
            _mock: mock,
        })
    }

    /// The server's origin, e.g. `http://127.0.0.1:41234`.
    pub(crate) fn base(&self) -> &str {
        &self.server.base
    }

    /// Fails with the server's stderr tail if it has exited.
    pub(crate) fn check_alive(&mut self) -> anyhow::Result<()> {
        self.server.check_alive()
    }
}

/// What one turn looked like from the client.
#[derive(Debug, Default)]
struct TurnRecord {
    post_to_first_event: Option<Duration>,
    /// Model delta emission → SSE client arrival, µs, one per stamped delta.
    delta_latency_us: Vec<u64>,
    /// The emission time of the turn's first stamped delta (µs since the epoch).
    first_stamp: Option<u64>,
    tool_call_at: Option<Instant>,
    /// The first `code_execution` result: arrival (and in µs since the epoch), its
    /// `duration_ms`, whether it succeeded, its content.
    tool_result: Option<(Instant, u64, u64, bool, String)>,
    tools: Vec<String>,
    rounds: u32,
    elapsed_ms: u64,
    error: Option<String>,
}

/// One `data:` payload out of an SSE block.
pub(crate) fn sse_data(block: &str) -> Option<&str> {
    block
        .lines()
        .find_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
}

/// POST a turn and follow its events to `turn_finished`.
async fn run_turn(http: &reqwest::Client, base: &str, problem: String) -> TurnRecord {
    let mut record = TurnRecord::default();
    if let Err(e) = follow_turn(http, base, problem, &mut record).await {
        record.error = Some(format!("{e:#}"));
    }
    record
}

async fn follow_turn(
    http: &reqwest::Client,
    base: &str,
    problem: String,
    record: &mut TurnRecord,
) -> anyhow::Result<()> {
    let posted = Instant::now();
    let created = http
        .post(format!("{base}/api/v1/turns"))
        .json(&json!({ "problem": problem }))
        .send()
        .await?;
    let status = created.status();
    if status.as_u16() != 201 {
        bail!("POST /api/v1/turns: {status}: {}", created.text().await?);
    }
    let created: serde_json::Value = created.json().await?;
    let turn_id = created["turn_id"]
        .as_str()
        .context("no turn_id in the POST reply")?;
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
    let mut buf = String::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.context("the event stream broke")?;
        let (arrived, arrived_us) = (Instant::now(), unix_micros());
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let Some(data) = sse_data(&block) else {
                continue;
            };
            let event: TurnEvent =
                serde_json::from_str(data).with_context(|| format!("unreadable event {data}"))?;
            record
                .post_to_first_event
                .get_or_insert(arrived.duration_since(posted));
            if note_event(record, event.kind, arrived, arrived_us)? {
                return Ok(());
            }
        }
    }
    bail!("the event stream ended without turn_finished")
}

/// Record one event; `true` once the turn has finished.
fn note_event(
    record: &mut TurnRecord,
    kind: EventKind,
    arrived: Instant,
    arrived_us: u64,
) -> anyhow::Result<bool> {
    match kind {
        EventKind::TurnStarted { tools, .. } => record.tools = tools,
        EventKind::TextDelta { text } | EventKind::ReasoningDelta { text } => {
            for sent in stamps(&text) {
                record.first_stamp.get_or_insert(sent);
                record
                    .delta_latency_us
                    .push(arrived_us.saturating_sub(sent));
            }
        }
        EventKind::ToolCall { name, .. } if name == "code_execution" => {
            record.tool_call_at.get_or_insert(arrived);
        }
        EventKind::ToolResult {
            name,
            ok,
            content,
            duration_ms,
            ..
        } if name == "code_execution" && record.tool_result.is_none() => {
            record.tool_result = Some((arrived, arrived_us, duration_ms, ok, content));
        }
        EventKind::Error { kind, message } => bail!("error event ({kind:?}): {message}"),
        EventKind::TurnFinished {
            stop_reason,
            rounds,
            elapsed_ms,
            ..
        } => {
            ensure!(
                stop_reason == StopReason::Answered,
                "the turn ended {stop_reason} instead of answered"
            );
            record.rounds = rounds;
            record.elapsed_ms = elapsed_ms;
            return Ok(true);
        }
        _ => {}
    }
    Ok(false)
}

fn client(concurrency: usize) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency.max(1) * 2)
        .tcp_nodelay(true)
        .timeout(TURN_TIMEOUT)
        .build()?)
}

/// `total` turns, `concurrency` at a time; the records in completion order.
async fn run_load(
    http: &reqwest::Client,
    base: &str,
    total: usize,
    concurrency: usize,
) -> Vec<TurnRecord> {
    let next = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..concurrency.min(total))
        .map(|_| {
            let (http, base, next) = (http.clone(), base.to_string(), next.clone());
            tokio::spawn(async move {
                let mut records = Vec::new();
                loop {
                    let n = next.fetch_add(1, Ordering::SeqCst);
                    if n >= total {
                        return records;
                    }
                    records.push(run_turn(&http, &base, format!("bench problem {n}")).await);
                }
            })
        })
        .collect();
    let mut records = Vec::with_capacity(total);
    for worker in workers {
        match worker.await {
            Ok(r) => records.extend(r),
            Err(e) => records.push(TurnRecord {
                error: Some(format!("client task failed: {e}")),
                ..TurnRecord::default()
            }),
        }
    }
    records
}

/// Samples a process's RSS every 10 ms on its own thread; the peak (KiB) when stopped.
struct PeakSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<()>,
    pid: u32,
}

impl PeakSampler {
    fn start(pid: u32) -> PeakSampler {
        procfs::reset_peak(pid);
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(procfs::rss_kib(pid)));
        let thread = {
            let (stop, peak) = (stop.clone(), peak.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(procfs::rss_kib(pid), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
        };
        PeakSampler {
            stop,
            peak,
            thread,
            pid,
        }
    }

    /// The higher of the sampled peak and the kernel's `VmHWM` since the start.
    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        let hwm = procfs::status_kib(self.pid, "VmHWM:").unwrap_or(0);
        self.peak.load(Ordering::Relaxed).max(hwm)
    }
}

/// CPU ticks of the processes a pass cares about, read together.
#[derive(Debug, Clone, Copy)]
struct CpuReading {
    server: u64,
    below_server: u64,
    system: u64,
    bench: u64,
    mock: u64,
}

impl CpuReading {
    /// Below the server: what it reaped, its live descendants, and the orphans of its
    /// sandboxes (adopted by this process as subreaper), all with what they reaped.
    fn now(server: u32, mock: u32) -> CpuReading {
        let procs = procfs::scan();
        let bench = std::process::id();
        let own = |pid| procs.get(&pid).map_or(0, |c: &procfs::ProcCpu| c.own);
        let reaped = procs.get(&server).map_or(0, |c| c.reaped_children);
        CpuReading {
            server: own(server),
            below_server: reaped
                + procfs::tree_cpu(server, &procs, &[])
                + procfs::tree_cpu(bench, &procs, &[server, mock]),
            system: procfs::system_busy().unwrap_or(0),
            bench: own(bench),
            mock: own(mock),
        }
    }
}

/// What the rest of the machine spends while this bench idles (other work on a shared box),
/// in ticks per second over one second.
async fn background_ticks_per_s(server: u32, mock: u32) -> f64 {
    let before = CpuReading::now(server, mock);
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = CpuReading::now(server, mock);
    let ours =
        (after.server - before.server) + (after.bench - before.bench) + (after.mock - before.mock);
    (after.system - before.system).saturating_sub(ours) as f64 / started.elapsed().as_secs_f64()
}

fn ms_of_ticks(ticks: u64) -> f64 {
    ticks as f64 / procfs::TICKS_PER_S * 1e3
}

/// Turn errors of a pass: their count, and the first few reported with the server's stderr.
fn errors(records: &[TurnRecord], server: &Server, what: &str) -> usize {
    let failed: Vec<&String> = records.iter().filter_map(|r| r.error.as_ref()).collect();
    if let Some(first) = failed.first() {
        eprintln!(
            "{what}: {} of {} turns failed; first: {first}\nserver stderr tail:\n{}",
            failed.len(),
            records.len(),
            tail(&server.log)
        );
    }
    failed.len()
}

/// The scripted solve must have run exactly `expected` rounds: anything else means the mock
/// and the server disagree about the script, and every figure per round would be wrong.
fn check_rounds(records: &[TurnRecord], expected: u32) -> anyhow::Result<()> {
    if let Some(r) = records
        .iter()
        .find(|r| r.error.is_none() && r.rounds != expected)
    {
        bail!(
            "a turn ran {} model rounds, not the scripted {expected}; its tools: {:?}",
            r.rounds,
            r.tools
        );
    }
    Ok(())
}

/// The turn's tool list must say whether code tools are mounted as the row claims.
fn check_code_tools(record: &TurnRecord, code: bool) -> anyhow::Result<()> {
    let mounted = record.tools.iter().any(|t| t == "code_execution");
    ensure!(
        mounted == code,
        "code tools {} but the turn offers {:?}",
        if code { "asked for" } else { "turned off" },
        record.tools
    );
    Ok(())
}

fn percentile<T: Copy + Ord>(values: &mut [T], p: f64) -> Option<T> {
    values.sort_unstable();
    let last = values.len().checked_sub(1)?;
    Some(values[((last as f64) * p).round() as usize])
}

fn ms(d: Option<Duration>) -> String {
    d.map_or("—".into(), |d| format!("{:.2} ms", d.as_secs_f64() * 1e3))
}

fn ms_us(us: Option<u64>) -> String {
    us.map_or("—".into(), |us| format!("{:.2} ms", us as f64 / 1e3))
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn code_label(code: bool) -> &'static str {
    if code { "mounted" } else { "off" }
}

/// POST → first SSE event p50 / p99 over the records.
fn first_event_percentiles(records: &[TurnRecord]) -> (String, String) {
    let mut firsts: Vec<Duration> = records
        .iter()
        .filter_map(|r| r.post_to_first_event)
        .collect();
    (
        ms(percentile(&mut firsts, 0.5)),
        ms(percentile(&mut firsts, 0.99)),
    )
}

fn instant_mock_args() -> Vec<String> {
    let args = [
        "--policy",
        "well-behaved",
        "--steps",
        "8",
        "--work-tool",
        "none",
    ];
    args.map(String::from).to_vec()
}

/// The instant pass of one row: a table line.
async fn instant_row(opts: &Opts, code: bool, concurrency: usize) -> anyhow::Result<String> {
    // The previous pass's processes are gone: clear their zombies.
    procfs::reap_exited_children();
    let mock = Mock::start(&opts.mock, &instant_mock_args())?;
    let mut server = Server::start(opts, &mock.url, code)?;
    let pid = server.pid();
    let http = client(concurrency)?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_start = procfs::rss_kib(pid);

    let cpu_before_first = server.cpu_ticks();
    let first = run_turn(&http, &server.base, "the first turn".into()).await;
    let first_cpu = server.cpu_ticks() - cpu_before_first;
    if let Some(e) = &first.error {
        server.check_alive()?;
        bail!(
            "the first turn failed: {e}; server stderr:\n{}",
            tail(&server.log)
        );
    }
    check_rounds(std::slice::from_ref(&first), ROUNDS)?;
    check_code_tools(&first, code)?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss_first = procfs::rss_kib(pid);

    let total = opts.turns.max(concurrency);
    let background = background_ticks_per_s(pid, mock.pid()).await;
    let rss_before = procfs::rss_kib(pid);
    let sampler = PeakSampler::start(pid);
    let before = CpuReading::now(pid, mock.pid());
    let started = Instant::now();
    let records = run_load(&http, &server.base, total, concurrency).await;
    let wall = started.elapsed().as_secs_f64();
    let after = CpuReading::now(pid, mock.pid());
    let peak = sampler.finish();
    server.check_alive()?;
    let failed = errors(&records, &server, "instant pass");
    check_rounds(&records, ROUNDS)?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss_after = procfs::rss_kib(pid);
    let largest = opts.concurrency.iter().max() == Some(&concurrency);
    let rss_settled = if largest || !opts.settle_max_only {
        tokio::time::sleep(opts.settle).await;
        server.check_alive()?;
        mib(procfs::rss_kib(pid))
    } else {
        "—".into()
    };

    let ok = (records.len() - failed).max(1);
    let rounds = ok as f64 * f64::from(ROUNDS);
    let server_ticks = after.server - before.server;
    let below = after.below_server - before.below_server;
    let other_raw = (after.system - before.system)
        .saturating_sub(server_ticks)
        .saturating_sub(after.bench - before.bench)
        .saturating_sub(after.mock - before.mock);
    let other = other_raw.saturating_sub((background * wall) as u64);
    let per_turn_kib = peak.saturating_sub(rss_before) as f64 / concurrency as f64;
    let (p50, p99) = first_event_percentiles(&records);
    Ok(format!(
        "| {} | {concurrency} | {} | {failed} | {:.3} ms | {:.1} ms ({:.1} ms) | {:.1} ms | {:.1} | {} | {} ms ({:.0} ms CPU) | {} | {per_turn_kib:.0} KiB | {} | {} | {p50} | {p99} |",
        code_label(code),
        records.len(),
        ms_of_ticks(server_ticks) / rounds,
        ms_of_ticks(other) / ok as f64,
        ms_of_ticks(other_raw) / ok as f64,
        ms_of_ticks(below) / ok as f64,
        ok as f64 / wall,
        mib(rss_start),
        first.elapsed_ms,
        ms_of_ticks(first_cpu),
        mib(rss_first),
        mib(rss_after),
        rss_settled,
    ))
}

/// The paced pass of one row: a table line.
async fn paced_row(opts: &Opts, code: bool, concurrency: usize) -> anyhow::Result<String> {
    // The previous pass's processes are gone: clear their zombies.
    procfs::reap_exited_children();
    let mut args = instant_mock_args();
    args.extend([
        "--stamp".into(),
        "--ttft-ms".into(),
        opts.ttft_ms.to_string(),
        "--tokens-per-s".into(),
        opts.tokens_per_s.to_string(),
    ]);
    let mock = Mock::start(&opts.mock, &args)?;
    let mut server = Server::start(opts, &mock.url, code)?;
    let http = client(concurrency)?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The first turn after start pays for one-time setup: measured in the instant pass.
    let warm_up = run_turn(&http, &server.base, "warm-up".into()).await;
    if let Some(e) = warm_up.error {
        server.check_alive()?;
        bail!(
            "the warm-up turn failed: {e}; server stderr:
{}",
            tail(&server.log)
        );
    }
    let total = concurrency.max(opts.paced_min_turns);
    let started = Instant::now();
    let records = run_load(&http, &server.base, total, concurrency).await;
    let wall = started.elapsed().as_secs_f64();
    server.check_alive()?;
    let failed = errors(&records, &server, "paced pass");
    check_rounds(&records, ROUNDS)?;
    let (p50, p99) = first_event_percentiles(&records);
    let mut latencies: Vec<u64> = records
        .iter()
        .flat_map(|r| r.delta_latency_us.iter().copied())
        .collect();
    ensure!(
        failed == records.len() || !latencies.is_empty(),
        "no stamped delta reached the client: is the mock a build with --stamp?"
    );
    Ok(format!(
        "| {} | {concurrency} | {} | {failed} | {:.1} | {p50} | {p99} | {} | {} | {} | {} |",
        code_label(code),
        records.len(),
        (records.len() - failed) as f64 / wall,
        latencies.len(),
        ms_us(percentile(&mut latencies, 0.5)),
        ms_us(percentile(&mut latencies, 0.99)),
        ms_us(latencies.iter().max().copied()),
    ))
}

/// The first-code-call pass: a table line.
async fn code_call_row(opts: &Opts) -> anyhow::Result<String> {
    // The previous pass's processes are gone: clear their zombies.
    procfs::reap_exited_children();
    let args = [
        "--policy".to_string(),
        "first-code-call".into(),
        "--stamp".into(),
        "--ttft-ms".into(),
        opts.ttft_ms.to_string(),
        "--tokens-per-s".into(),
        opts.code_tokens_per_s.to_string(),
    ];
    let mock = Mock::start(&opts.mock, &args)?;
    let mut server = Server::start(opts, &mock.url, true)?;
    let http = client(1)?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _warm_up = run_turn(&http, &server.base, "warm-up".into()).await;
    let records = run_load(&http, &server.base, opts.code_call_turns, 1).await;
    server.check_alive()?;
    let failed = errors(&records, &server, "first-code-call pass");
    check_rounds(&records, CODE_ROUNDS)?;
    // The mock streams the narration, then each argument delta one interval later.
    let per_delta_us = 1_000_000 / opts.code_tokens_per_s.max(1);
    let arguments_us = FirstCodeCall::default().argument_deltas() as u64 * per_delta_us;
    let mut from_complete = Vec::new();
    let mut waits = Vec::new();
    let mut durations = Vec::new();
    for r in records.iter().filter(|r| r.error.is_none()) {
        let (Some(call), Some(narrated), Some((result, result_us, duration, ok, content))) =
            (r.tool_call_at, r.first_stamp, &r.tool_result)
        else {
            bail!(
                "a turn ran no stamped code_execution call; its tools: {:?}",
                r.tools
            );
        };
        ensure!(
            *ok && content.contains('1'),
            "print(1) did not print 1: {content}"
        );
        from_complete.push(result_us.saturating_sub(narrated + arguments_us));
        waits.push(result.duration_since(call));
        durations.push(*duration);
    }
    let mut first = records
        .iter()
        .filter_map(|r| r.post_to_first_event)
        .collect::<Vec<_>>();
    Ok(format!(
        "| {} | {failed} | {} | {} | {} | {} | {} | {} | {} |",
        records.len(),
        ms_us(percentile(&mut from_complete, 0.5)),
        ms_us(percentile(&mut from_complete, 0.99)),
        ms(percentile(&mut waits, 0.5)),
        ms(percentile(&mut waits, 0.99)),
        ms_us(percentile(&mut durations, 0.5).map(|d| d * 1000)),
        ms_us(percentile(&mut durations, 0.99).map(|d| d * 1000)),
        ms(percentile(&mut first, 0.5)),
    ))
}

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let opts = parse(args)?;
    for binary in [&opts.deepsolve, &opts.mock] {
        ensure!(
            binary.exists(),
            "{} not found: build it (cargo build --release -p deepsolve-cli -p deepsolve-testkit) or pass its path",
            binary.display()
        );
    }
    procfs::become_subreaper().context("cannot become the subreaper of the sandboxes")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(drive(&opts))
}

async fn drive(opts: &Opts) -> anyhow::Result<()> {
    println!(
        "## Server benchmark ({ROUNDS}-round scripted solve, `{}` against `{}`)\n",
        opts.deepsolve.display(),
        opts.mock.display()
    );
    println!(
        "### Instant model: CPU, throughput, memory ({} turns per row, at least the concurrency; code off by {:?})\n",
        opts.turns, opts.code_off
    );
    println!(
        "| code tools | concurrency | turns | errors | server CPU per round | CPU outside the server per turn (before subtracting the background) | of it in sandbox processes | turns/s | RSS at start | first turn: engine time (server CPU) | RSS after the first turn | per in-flight turn | RSS after the load | RSS after {} s idle | POST → first event p50 | p99 |",
        opts.settle.as_secs()
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for &code in &opts.code_modes {
        for &c in &opts.concurrency {
            println!("{}", instant_row(opts, code, c).await?);
        }
    }
    println!(
        "\n### Paced model: latency ({} ms to the first token, {} deltas/s, each text delta stamped; max(concurrency, {}) turns at once)\n",
        opts.ttft_ms, opts.tokens_per_s, opts.paced_min_turns
    );
    println!(
        "| code tools | concurrency | turns | errors | turns/s | POST → first event p50 | p99 | stamped deltas | model delta → SSE client p50 | p99 | max |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for &code in &opts.code_modes {
        for &c in &opts.concurrency {
            println!("{}", paced_row(opts, code, c).await?);
        }
    }
    if opts.code_modes.contains(&true) {
        println!(
            "\n### First `code_execution` call of a turn (`print(1)`, arguments streamed 4 characters per delta at {} deltas/s; sequential turns)\n",
            opts.code_tokens_per_s
        );
        println!(
            "| turns | errors | call complete (mock) → tool_result at the client p50 | p99 | tool_call → tool_result events p50 | p99 | the result's duration_ms p50 | p99 | POST → first event p50 |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        println!("{}", code_call_row(opts).await?);
    }
    Ok(())
}
