//! Measuring what one big model reply costs `deepsolve serve`: the real binary against a mock
//! model that streams the reply in many small deltas, the way providers do, with the server's
//! peak resident memory read from `/proc/<pid>/status`. Shared by the memory tests and by
//! `cargo run --release -p deepsolve-cli --example reply_memory`, which prints a table.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use deepsolve_core::Role;
use deepsolve_testkit::sse::{FrameIter, StreamMeta};
use deepsolve_testkit::{DeltaStyle, FnPolicy, MockServer, PolicyRequest, Reply, Turn};
use futures::StreamExt;
use serde_json::{Value, json};

/// Where the reply's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// Visible text.
    Content,
    /// Visible text that is one run of letters, without a space (the tokenizer's worst case).
    Letters,
    /// `reasoning_content`.
    Reasoning,
    /// The arguments of one tool call (to a tool the turn does not offer: refused, as any
    /// call a model invents).
    Arguments,
}

impl Part {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Part::Content => "content",
            Part::Letters => "letters",
            Part::Reasoning => "reasoning",
            Part::Arguments => "arguments",
        }
    }
}

/// One big reply: `bytes` of `part`, `delta_chars` characters per delta.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BigReply {
    pub part: Part,
    pub bytes: usize,
    pub delta_chars: usize,
}

impl BigReply {
    /// The reply as the mock plays it.
    pub(crate) fn turn(&self) -> Turn {
        // Words and spaces, like prose: the tokenizer sees ordinary text.
        let body: String = "lorem ipsum dolor sit amet "
            .chars()
            .cycle()
            .take(self.bytes)
            .collect();
        let style = DeltaStyle {
            text_chunk: self.delta_chars,
            args_chunk: self.delta_chars,
            ..DeltaStyle::default()
        };
        let turn = match self.part {
            Part::Content => Turn::text(body),
            Part::Letters => Turn::text(body.replace(' ', "x")),
            Part::Reasoning => Turn::text("Done.").with_reasoning(body),
            Part::Arguments => {
                let args = json!({"notes": body}).to_string();
                Turn::raw_calls(vec![("scratchpad", args)])
            }
        };
        turn.with_style(style)
    }

    /// The SSE bytes of the whole reply, as the mock streams it.
    pub(crate) fn sse_bytes(&self) -> u64 {
        let meta = StreamMeta::numbered(1, "mock-model");
        FrameIter::new(self.turn(), meta)
            .map(|f| f.len() as u64)
            .sum()
    }

    /// The SSE bytes the server reads before the reply reaches `cap` (all of them when it
    /// fits): the deltas are all alike, so the share of the stream is the share of the reply.
    pub(crate) fn sse_bytes_read(&self, cap: usize) -> u64 {
        let all = self.sse_bytes();
        if self.bytes <= cap {
            return all;
        }
        (all as f64 * cap as f64 / self.bytes as f64) as u64
    }

    /// The problem that asks the mock for this reply.
    pub(crate) fn problem(&self) -> String {
        format!(
            "memory probe: {} {} {}",
            self.part.name(),
            self.bytes,
            self.delta_chars
        )
    }

    fn parse(problem: &str) -> Option<BigReply> {
        let mut words = problem.strip_prefix("memory probe: ")?.split_whitespace();
        let part = match words.next()? {
            "content" => Part::Content,
            "letters" => Part::Letters,
            "reasoning" => Part::Reasoning,
            "arguments" => Part::Arguments,
            _ => return None,
        };
        Some(BigReply {
            part,
            bytes: words.next()?.parse().ok()?,
            delta_chars: words.next()?.parse().ok()?,
        })
    }
}

/// The mock: the first round of a probe turn gets the big reply, everything else a short
/// answer.
pub(crate) fn probe_model() -> MockServer {
    MockServer::policy(FnPolicy(|req: &PolicyRequest| {
        let first_round = !req.messages.iter().any(|m| m.role == Role::Assistant);
        let big = req
            .messages
            .iter()
            .filter(|m| m.role == Role::User)
            .find_map(|m| BigReply::parse(&m.content));
        match big {
            Some(big) if first_round => Reply::Turn(big.turn()),
            _ => Reply::text("The answer is 42."),
        }
    }))
}

/// What one probe turn cost.
#[derive(Debug, Clone)]
pub(crate) struct Measured {
    /// The server's resident memory before the turn (after a warm-up turn), KiB.
    pub rss_before_kib: u64,
    /// The server's peak resident memory during the turn, KiB.
    pub peak_kib: u64,
    pub stop_reason: String,
    /// The `error` event's kind, if the turn had one.
    pub error_kind: Option<String>,
    /// How long the big reply's turn took (the example prints it; the tests bound memory only).
    #[cfg_attr(test, expect(dead_code, reason = "read by the reply_memory example"))]
    pub elapsed: Duration,
}

impl Measured {
    /// Peak growth over the memory before the turn, in bytes.
    pub(crate) fn growth_bytes(&self) -> u64 {
        self.peak_kib.saturating_sub(self.rss_before_kib) * 1024
    }
}

/// `deepsolve serve` on a free loopback port, isolated from the developer's settings.
pub(crate) struct Server {
    child: Child,
    pub base: String,
    _home: tempfile::TempDir,
}

impl Server {
    /// Start `binary serve` against `model_url` with `settings` as its settings file.
    pub(crate) fn start(binary: &Path, model_url: &str, settings: &str) -> Server {
        let home = tempfile::tempdir().expect("home");
        let settings_path = home.path().join("settings.yaml");
        std::fs::write(&settings_path, settings).expect("settings");
        let db = format!("sqlite://{}", home.path().join("ds.db").display());
        let log = std::fs::File::create(home.path().join("serve.log")).expect("log");
        let mut cmd = Command::new(binary);
        for (key, _) in std::env::vars() {
            if key.starts_with("DEEPSOLVE_") || key == "OPENAI_API_KEY" {
                cmd.env_remove(key);
            }
        }
        cmd.env("DEEPSOLVE_CONFIG", &settings_path)
            // A scripted mock is not a model to probe on first use (also built into an
            // example, this file cannot reach the tests' support module).
            .env("DEEPSOLVE_LLM__PROBE", "never")
            .env("HOME", home.path())
            .env("XDG_DATA_HOME", home.path().join("data"))
            .args(["serve", "--addr", "127.0.0.1:0", "--database", &db])
            .args(["--base-url", model_url, "--model", "mock-model"])
            .stdout(Stdio::piped())
            .stderr(log);
        let mut child = cmd.spawn().expect("spawn deepsolve serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut first = String::new();
        BufReader::new(stdout)
            .read_line(&mut first)
            .expect("first line");
        let base = first
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| {
                let log = std::fs::read_to_string(home.path().join("serve.log"));
                panic!("unexpected first line {first:?}; stderr:\n{log:?}")
            })
            .to_string();
        Server {
            child,
            base,
            _home: home,
        }
    }

    /// `VmRSS` and `VmHWM` (peak) of the server process, in KiB.
    pub(crate) fn memory_kib(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the server's /proc status");
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    /// Forget the peak so far: the next `VmHWM` is the peak from now on.
    pub(crate) fn reset_peak(&self) {
        let path = format!("/proc/{}/clear_refs", self.child.id());
        std::fs::write(path, "5").expect("reset the peak (clear_refs 5)");
    }

    /// Run one turn with `problem`, following its events to the end like a client.
    pub(crate) async fn turn(&self, problem: &str) -> Followed {
        let http = reqwest::Client::new();
        let created: Value = http
            .post(format!("{}/api/v1/turns", self.base))
            .json(&json!({"problem": problem}))
            .send()
            .await
            .expect("post a turn")
            .json()
            .await
            .expect("json");
        let turn = created["turn_id"].as_str().expect("turn id").to_string();
        let events = http
            .get(format!("{}/api/v1/turns/{turn}/events", self.base))
            .send()
            .await
            .expect("events");
        let mut followed = follow(events).await;
        self.wait_until_recorded(&http, &turn).await;
        followed.turn_id = turn;
        followed
    }

    /// `turn_finished` reaches readers before the turn's end is written: wait for that too.
    async fn wait_until_recorded(&self, http: &reqwest::Client, turn: &str) {
        for _ in 0..1200 {
            let view: Value = http
                .get(format!("{}/api/v1/turns/{turn}", self.base))
                .send()
                .await
                .expect("get")
                .json()
                .await
                .expect("json");
            if view["status"] != "running" {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("turn {turn} is still running");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a client following a turn saw.
#[derive(Debug, Clone, Default)]
pub(crate) struct Followed {
    pub turn_id: String,
    pub stop_reason: String,
    /// The `error` event's kind, if the turn had one.
    pub error_kind: Option<String>,
}

/// Read an event stream to its end, keeping only what the probe reports.
async fn follow(response: reqwest::Response) -> Followed {
    let mut stream = response.bytes_stream();
    let mut line = Vec::new();
    let mut stop = String::new();
    let mut error = None;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.expect("event stream");
        for &b in chunk.iter() {
            if b != b'\n' {
                line.push(b);
                continue;
            }
            if let Some(data) = line.strip_prefix(b"data: ")
                && let Ok(event) = serde_json::from_slice::<Value>(data)
            {
                match event["type"].as_str() {
                    Some("turn_finished") => {
                        stop = event["stop_reason"].as_str().unwrap_or("").to_string();
                    }
                    Some("error") => error = event["kind"].as_str().map(str::to_string),
                    _ => {}
                }
            }
            line.clear();
        }
    }
    Followed {
        turn_id: String::new(),
        stop_reason: stop,
        error_kind: error,
    }
}

/// One probe: a fresh server (with `settings`), a warm-up turn, then the big reply's turn.
pub(crate) async fn measure(binary: &Path, settings: &str, big: BigReply) -> Measured {
    let model = probe_model();
    let server = Server::start(binary, &model.url(), settings);
    server.turn("Warm up: what is 6 times 7?").await;
    let (rss_before_kib, _) = server.memory_kib();
    server.reset_peak();
    let started = Instant::now();
    let followed = server.turn(&big.problem()).await;
    let elapsed = started.elapsed();
    let (_, peak_kib) = server.memory_kib();
    Measured {
        rss_before_kib,
        peak_kib,
        stop_reason: followed.stop_reason,
        error_kind: followed.error_kind,
        elapsed,
    }
}
