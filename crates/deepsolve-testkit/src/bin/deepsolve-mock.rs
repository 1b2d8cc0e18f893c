//! `deepsolve-mock`: a scripted OpenAI-compatible endpoint for manual demos.
//!
//! ```text
//! deepsolve-mock --policy well-behaved --steps 3
//! curl -N http://127.0.0.1:PORT/v1/chat/completions -d '{"messages":[...],"stream":true}'
//! ```

use clap::Parser;
use deepsolve_testkit::MockServer;
use deepsolve_testkit::policy::{POLICY_NAMES, by_name};

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
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let work_tool = (args.work_tool != "none").then(|| args.work_tool.clone());
    let Some(policy) = by_name(&args.policy, args.steps, work_tool) else {
        eprintln!(
            "unknown policy '{}'; one of: {}",
            args.policy,
            POLICY_NAMES.join(", ")
        );
        return std::process::ExitCode::from(2);
    };
    let server = match MockServer::builder()
        .port(args.port)
        .log_to_stderr(!args.quiet)
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
