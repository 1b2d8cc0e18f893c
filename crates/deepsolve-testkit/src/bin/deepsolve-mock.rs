//! `deepsolve-mock`: a scripted OpenAI-compatible endpoint for manual demos.
//!
//! ```text
//! deepsolve-mock --policy well-behaved --steps 3
//! curl -N http://127.0.0.1:PORT/v1/chat/completions -d '{"messages":[...],"stream":true}'
//! deepsolve-mock --policy well-behaved --steps 8 --work-tool none --no-capture --stamp \
//!     --ttft-ms 400 --tokens-per-s 20      # a realistic pace, for benchmarks
//! ```

use clap::Parser;
use std::time::Duration;

use deepsolve_testkit::policy::{
    BENCH_POLICY_NAMES, POLICY_NAMES, SMALL_MODEL_POLICY_NAMES, by_name,
};
use deepsolve_testkit::{MockServer, StreamOptions};

#[derive(Debug, Parser)]
#[command(
    name = "deepsolve-mock",
    about = "A scripted OpenAI-compatible mock model"
)]
struct Args {
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// The behaviour to play.
    #[arg(long, default_value = "well-behaved")]
    policy: String,
    /// Steps the scripted solver plans.
    #[arg(long, default_value_t = 3)]
    steps: usize,
    /// The work tool each step uses when offered ("none" for no work calls).
    #[arg(long, default_value = "reason")]
    work_tool: String,
    /// Do not log calls and violations to stderr.
    #[arg(long)]
    quiet: bool,
    /// Keep no request and check no invariant: memory stays flat over any number of calls.
    #[arg(long)]
    no_capture: bool,
    /// Prefix each streamed text and reasoning delta with its emission time, `⟦t=<unix µs>⟧`.
    #[arg(long)]
    stamp: bool,
    /// Milliseconds before the first delta of a streamed reply.
    #[arg(long, default_value_t = 0)]
    ttft_ms: u64,
    /// Deltas per second after the first (one delta stands for one token); 0 streams at once.
    #[arg(long, default_value_t = 0)]
    tokens_per_s: u64,
}

impl Args {
    fn stream_options(&self) -> StreamOptions {
        StreamOptions {
            ttft: Duration::from_millis(self.ttft_ms),
            per_delta: match self.tokens_per_s {
                0 => Duration::ZERO,
                rate => Duration::from_secs(1) / u32::try_from(rate).unwrap_or(u32::MAX),
            },
            stamp: self.stamp,
        }
    }
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let work_tool = (args.work_tool != "none").then(|| args.work_tool.clone());
    let Some(policy) = by_name(&args.policy, args.steps, work_tool) else {
        eprintln!(
            "unknown policy '{}'; one of: {}",
            args.policy,
            POLICY_NAMES
                .iter()
                .chain(SMALL_MODEL_POLICY_NAMES)
                .chain(BENCH_POLICY_NAMES)
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        );
        return std::process::ExitCode::from(2);
    };
    let server = match MockServer::builder()
        .port(args.port)
        .log_to_stderr(!args.quiet)
        .capture(!args.no_capture)
        .stream_options(args.stream_options())
        .policy(policy)
    {
        Ok(server) => server,
        Err(e) => {
            eprintln!("deepsolve-mock: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    println!("{}", server.url());
    // Serve until killed; the server lives on its own thread.
    loop {
        std::thread::park();
    }
}
