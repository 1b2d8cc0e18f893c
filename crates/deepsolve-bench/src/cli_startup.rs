//! `bench cli-startup [--deepsolve PATH] [--runs N]`: a `deepsolve solve` process from its
//! start to its first model request, against the in-process mock model — the time (from just
//! before the spawn to the request's arrival), the CPU it spent and its resident set at that
//! moment (read from `/proc` while it waits for the reply). The mock answers that request with
//! a 401 so each run ends at once.
//!
//! Rows: a first `solve` on a fresh machine (no database yet: it is created and migrated; no
//! sandbox verdict kept yet: the probe runs before the request), a `solve` with the database
//! and the verdict in place (every later run), the same with the verdict removed before each
//! run (what every run cost before verdicts were kept), `--json`, and a `-c` follow-up (which
//! reads the session's earlier turns before its request). Each run is its own process;
//! settings, data and cache live in a private directory, so the developer's own are never
//! read.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use deepsolve_testkit::{FnPolicy, MockServer, PolicyRequest, Reply};

use crate::procfs;

/// What the child looked like when its first request arrived.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    rss_kib: u64,
    /// The part of the resident set that is the process's own memory (heap, stacks), not
    /// pages of files it maps (the binary's code, shared with the page cache).
    anon_kib: u64,
    cpu_ticks: u64,
}

struct Opts {
    deepsolve: PathBuf,
    runs: usize,
}

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let mut opts = Opts {
        deepsolve: PathBuf::from("target/release/deepsolve"),
        runs: 20,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--deepsolve" => opts.deepsolve = PathBuf::from(it.next().context("--deepsolve PATH")?),
            "--runs" => opts.runs = it.next().context("--runs N")?.parse()?,
            other => bail!("unknown option {other} (--deepsolve PATH, --runs N)"),
        }
    }
    anyhow::ensure!(
        opts.deepsolve.is_file(),
        "{} not found: cargo build --release -p deepsolve-cli",
        opts.deepsolve.display()
    );
    let child = Arc::new(AtomicU32::new(0));
    let sample: Arc<Mutex<Option<Sample>>> = Arc::default();
    let (pid, seen) = (child.clone(), sample.clone());
    let server =
        MockServer::builder()
            .capture(false)
            .policy(FnPolicy(move |_: &PolicyRequest| {
                let at = Instant::now();
                let pid = pid.load(Ordering::SeqCst);
                let mut slot = seen.lock().unwrap_or_else(PoisonError::into_inner);
                if slot.is_none() {
                    *slot = Some(Sample {
                        at,
                        rss_kib: procfs::rss_kib(pid),
                        anon_kib: procfs::status_kib(pid, "RssAnon:").unwrap_or(0),
                        cpu_ticks: procfs::proc_cpu(pid).map_or(0, |c| c.own),
                    });
                }
                Reply::status(401, "bench: stop here")
            }))?;
    let home = tempfile::tempdir()?;
    println!(
        "deepsolve solve → first model request ({} runs each, {}):\n",
        opts.runs,
        opts.deepsolve.display()
    );
    println!("| run | p50 | p90 | min | CPU p50 | RSS p50 | RSS max | of it anonymous, p50 |");
    println!("|---|---|---|---|---|---|---|---|");
    let rows: [(&str, &[&str], usize, Probe); 5] = [
        (
            "first solve (creates the database, probes the sandbox)",
            &[],
            1,
            Probe::Kept,
        ),
        ("solve", &[], opts.runs, Probe::Kept),
        (
            "solve, the sandbox probed (no verdict kept)",
            &[],
            opts.runs,
            Probe::Forgotten,
        ),
        ("solve --json", &["--json"], opts.runs, Probe::Kept),
        ("solve -c (a follow-up)", &["-c"], opts.runs, Probe::Kept),
    ];
    for (name, flags, runs, probe) in rows {
        let samples: anyhow::Result<Vec<_>> = (0..runs)
            .map(|_| {
                if probe == Probe::Forgotten {
                    forget_the_probe(home.path());
                }
                one(&opts, &server, home.path(), flags, &child, &sample)
            })
            .collect();
        match samples {
            Ok(samples) => print_row(name, &samples),
            // An older binary without the flag, say.
            Err(e) => println!("| {name} | not run: {e} | | | | | | |"),
        }
    }
    Ok(())
}

/// Whether a run finds the last sandbox probe's verdict kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    Kept,
    Forgotten,
}

/// Remove the kept verdict (`deepsolve_app::sandbox::probe_file` under the private cache).
fn forget_the_probe(home: &std::path::Path) {
    let _ = std::fs::remove_file(cache_dir(home).join("deepsolve").join("sandbox-probe.json"));
}

fn cache_dir(home: &std::path::Path) -> PathBuf {
    home.join("cache")
}

/// One `solve`: spawn, wait for it to end, return the first request's sample.
fn one(
    opts: &Opts,
    server: &MockServer,
    home: &std::path::Path,
    flags: &[&str],
    child_pid: &AtomicU32,
    sample: &Mutex<Option<Sample>>,
) -> anyhow::Result<Measured> {
    *sample.lock().unwrap_or_else(PoisonError::into_inner) = None;
    let mut cmd = Command::new(&opts.deepsolve);
    for (key, _) in std::env::vars() {
        if key.starts_with("DEEPSOLVE_") || key == "OPENAI_API_KEY" {
            cmd.env_remove(key);
        }
    }
    let settings = home.join("settings.yaml");
    if !settings.exists() {
        std::fs::write(&settings, "")?;
    }
    cmd.env("DEEPSOLVE_CONFIG", &settings)
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CACHE_HOME", cache_dir(home))
        .args([
            "solve",
            "--base-url",
            &server.url(),
            "--model",
            "mock-model",
        ])
        .args(flags)
        .arg("Solve x^2 - 5x + 6 = 0.")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let started = Instant::now();
    let mut child = cmd.spawn()?;
    child_pid.store(child.id(), Ordering::SeqCst);
    let status = child.wait()?;
    let seen = sample
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
        .with_context(|| format!("deepsolve made no model request (it exited {status})"))?;
    Ok(Measured {
        time: seen.at.saturating_duration_since(started),
        cpu_ticks: seen.cpu_ticks,
        rss_kib: seen.rss_kib,
        anon_kib: seen.anon_kib,
    })
}

/// One run, from its spawn to its first request.
struct Measured {
    time: Duration,
    cpu_ticks: u64,
    rss_kib: u64,
    anon_kib: u64,
}

fn print_row(name: &str, samples: &[Measured]) {
    let mut times: Vec<Duration> = samples.iter().map(|s| s.time).collect();
    let mut cpu: Vec<u64> = samples.iter().map(|s| s.cpu_ticks).collect();
    let mut rss: Vec<u64> = samples.iter().map(|s| s.rss_kib).collect();
    let mut anon: Vec<u64> = samples.iter().map(|s| s.anon_kib).collect();
    times.sort();
    cpu.sort_unstable();
    rss.sort_unstable();
    anon.sort_unstable();
    let at = |v: &[Duration], p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    let median = |v: &[u64]| v[(v.len() - 1) / 2];
    let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
    let mib = |kib: u64| format!("{:.1} MiB", kib as f64 / 1024.0);
    let cpu_ms = median(&cpu) as f64 * 1000.0 / procfs::TICKS_PER_S;
    println!(
        "| {name} | {} | {} | {} | {cpu_ms:.0} ms | {} | {} | {} |",
        ms(at(&times, 0.5)),
        ms(at(&times, 0.9)),
        ms(times[0]),
        mib(median(&rss)),
        mib(rss[rss.len() - 1]),
        mib(median(&anon)),
    );
}
