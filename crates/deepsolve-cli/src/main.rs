//! `deepsolve`: solve a problem from the command line, manage settings, check a setup.

mod answer;
mod database;
mod doctor;
mod doctor_local;
mod eval_cmd;
mod exit;
mod gc;
mod hints;
mod history;
mod images;
mod input;
mod kb_cmd;
mod manual;
mod models_cmd;
mod output;
mod recorded;
mod render;
mod serve;
mod session;
mod settings_cmd;
mod setup;
mod solve;
mod users_cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::exit::Exit;
use crate::output::errln;

/// `0.1.0 (git abc123def456)`: the version and the revision it was built from (`build.rs`).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("DEEPSOLVE_REVISION"),
    ")"
);

#[derive(Parser)]
#[command(
    name = "deepsolve",
    version = VERSION,
    about = "A rigorous step-by-step problem solver on any OpenAI-compatible model",
    after_help = exit::HELP
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Where the settings come from; shared by every command.
#[derive(Args, Clone, Default)]
pub struct ConfigArgs {
    /// Settings file (default: $DEEPSOLVE_CONFIG, else ~/.config/deepsolve/settings.yaml).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Override a setting for this run, e.g. --set solve.max_rounds=20 (repeatable).
    #[arg(long = "set", global = true, value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// The OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1 (sets llm.base_url).
    #[arg(long, global = true, value_name = "URL")]
    pub base_url: Option<String>,
    /// The model name (sets llm.model).
    #[arg(long, global = true)]
    pub model: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LangArg {
    En,
    Zh,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProtocolArg {
    Native,
    Tags,
    Auto,
    Fence,
    Code,
    Structured,
    Tongyi,
    Deepanalyze,
}

/// How a turn that runs here (`solve`, `resume`) is shown and where its answer goes.
#[derive(Args)]
pub struct RunArgs {
    /// Print one JSON event per line on stdout, and nothing else.
    #[arg(long)]
    pub json: bool,
    /// Write the final answer (Markdown) to FILE, atomically, instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// How tools are offered: native tool calling, text tags (models without tool calling),
    /// a fenced JSON call, code blocks, structured output, a trained format (tongyi,
    /// deepanalyze), or auto (from what the endpoint honours). Overrides llm.protocol.
    #[arg(long, value_enum)]
    pub protocol: Option<ProtocolArg>,
}

#[derive(Args)]
#[command(after_help = exit::HELP)]
pub struct SolveArgs {
    /// The problem, in plain text (Markdown and LaTeX welcome). `-`, or none with a pipe on
    /// stdin, reads it from stdin.
    pub problem: Option<String>,
    /// Read the problem from FILE (`-`: stdin).
    #[arg(
        short = 'f',
        long = "file",
        value_name = "FILE",
        conflicts_with = "problem"
    )]
    pub file: Option<PathBuf>,
    /// Continue the most recent session: the model sees its earlier problems and answers.
    #[arg(short = 'c', long = "continue", conflicts_with = "session")]
    pub continue_last: bool,
    /// Continue the session ID (`deepsolve history --json` shows each turn's session).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Answer language and playbook language.
    #[arg(long, value_enum, default_value = "en")]
    pub lang: LangArg,
    /// An opt-in tool for this turn (repeatable); `deepsolve doctor` lists the tools.
    #[arg(long = "tool", value_name = "TOOL")]
    pub tools: Vec<String>,
    #[command(flatten)]
    pub run: RunArgs,
    /// A knowledge base the solve may search and cite, by name or id (repeatable;
    /// `deepsolve kb list` shows yours).
    #[arg(long = "kb", value_name = "NAME")]
    pub kbs: Vec<String>,
    /// A document for this turn only (repeatable): read before the turn starts, searched and
    /// cited like a knowledge base's.
    #[arg(long = "attach", value_name = "FILE")]
    pub attachments: Vec<PathBuf>,
    /// A picture of the problem or its figure (repeatable): PNG, JPEG, WebP or GIF, at most
    /// 10 MiB; the model sees it when it can (llm.vision), else a tool that reads images must.
    #[arg(long = "image", value_name = "FILE")]
    pub images: Vec<PathBuf>,
    /// Act as this user of the server (default: the single-user identity).
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    #[command(flatten)]
    pub(crate) database: database::DatabaseArgs,
    #[command(flatten)]
    pub config: ConfigArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Solve a problem step by step. Progress goes to stderr, the answer to stdout.
    Solve(SolveArgs),
    /// The turns solved so far (here and in the web UI), newest first.
    History(history::HistoryArgs),
    /// Replay a stored turn through the live view; its answer on stdout.
    Show(history::ShowArgs),
    /// Continue an interrupted turn (its process was killed, or the server stopped) from its
    /// last finished step.
    #[command(after_help = exit::HELP)]
    Resume(history::ResumeArgs),
    /// Read or change the settings file.
    Settings {
        #[command(subcommand)]
        action: settings_cmd::SettingsAction,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Check the configured model: an endpoint (reachable, model listed, and what it honours:
    /// native tool calls, tool_choice, json_schema, stop sequences, its context window, as the
    /// probe last found or probing now) or the in-process model (file, memory, speed here).
    /// Exits 1 when a check fails.
    Doctor {
        /// Skip the in-process model's speed probe (about ten seconds).
        #[arg(long)]
        quick: bool,
        #[command(flatten)]
        config: ConfigArgs,
        /// Probe the endpoint again even when a verdict on it is kept.
        #[arg(long)]
        recheck: bool,
    },
    /// Run the HTTP server: the web UI at `/`, the streaming API, persistent sessions.
    Serve(serve::ServeArgs),
    /// Evaluate: problem sets through the deepsolve and plain modes with the same model, every
    /// answer graded, a report with accuracy, intervals and a paired test.
    Eval(eval_cmd::EvalArgs),
    /// Remove old turn workspaces: empty ones, and finished turns' past sandbox.retention_days
    /// (never a running or resumable turn's).
    Gc(gc::GcArgs),
    /// Knowledge bases: your own documents (PDF, DOCX, HTML, Markdown, text) that a solve can
    /// search and cite (`deepsolve solve --kb NAME`).
    Kb(kb_cmd::KbArgs),
    /// Local GGUF models on disk (for `llm.provider: local`): list the catalog and the model
    /// directory, pull one (resumable, checksum-verified), remove one.
    Models(models_cmd::ModelsArgs),
    /// Manage the server's users, their bearer tokens and web UI sign-ins.
    Users {
        #[command(subcommand)]
        action: users_cmd::UsersAction,
        #[command(flatten)]
        database: database::DatabaseArgs,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Print a shell completion script: `deepsolve completions bash > ~/.local/share/bash-completion/completions/deepsolve`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (`deepsolve man > deepsolve.1`), or write one per command to DIR.
    Man {
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// jemalloc serves Rust's allocations: a server turn allocates and frees thousands of small
/// buffers (events, JSON, messages) across the runtime's threads, where glibc's malloc spent a
/// fifth of the server's CPU and kept the freed memory of a load in per-thread arenas for good.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its first allocation: a background thread returns pages that
/// have stayed free for a second (`dirty_decay_ms`) straight to the system (`muzzy_decay_ms:
/// 0`: released, not merely marked reusable), so the resident set falls back after a load
/// without any thread of ours having to allocate again.
#[allow(non_upper_case_globals)]
// SAFETY: jemalloc reads this symbol as a NUL-terminated C string: the bytes are static, end in
// `\0`, and nothing else in the binary exports the name.
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static malloc_conf: &[u8; 60] =
    b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

/// Freed large buffers of C code (SQLite's page caches and statements still use glibc's
/// malloc) go back to the system at once. By default glibc raises its threshold for serving
/// allocations from their own mappings to the largest buffer freed so far, so buffers above
/// it end up in heap arenas and stay resident after use. Pinning the threshold at glibc's own
/// starting value (128 KiB) keeps every buffer above it in a mapping of its own, returned
/// when freed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn return_large_buffers_to_the_system() {
    // SAFETY: mallopt only sets an allocator parameter and has no memory-safety preconditions;
    // it runs first thing in `main`, before any other thread exists, so nothing races with it.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn return_large_buffers_to_the_system() {}

fn main() -> ExitCode {
    // The PDF parser's child process: before clap and the async runtime, since it only reads
    // a PDF on stdin and writes its pages (see `setup::pdf_child`).
    if std::env::args_os().nth(1).as_deref() == Some(std::ffi::OsStr::new(setup::PDF_CHILD)) {
        return deepsolve_kb::extract::pdf_child_main(std::env::args_os().skip(2));
    }
    return_large_buffers_to_the_system();
    let cli = Cli::parse();
    let exit = run(cli.command);
    if let Some(why) = output::stdout_failure() {
        errln!("deepsolve: cannot write to stdout: {why}");
        return Exit::Failure.into();
    }
    // The reader of stdout went away (`| head`): like other Unix tools, that is no failure.
    if output::stdout_closed() {
        return Exit::Answer.into();
    }
    exit.into()
}

/// Run `command` on the async runtime; its exit code.
fn run(command: Command) -> Exit {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            errln!("deepsolve: could not start the async runtime: {e}");
            return Exit::Failure;
        }
    };
    let exit = report(runtime.block_on(async {
        match command {
            Command::Solve(args) => solve::run(args).await,
            Command::History(args) => history::history(args).await,
            Command::Show(args) => history::show(args).await,
            Command::Resume(args) => history::resume(args).await,
            Command::Settings { action, config } => settings_cmd::run(action, &config),
            Command::Doctor {
                config,
                recheck,
                quick,
            } => doctor::run(&config, recheck, quick).await,
            Command::Serve(args) => serve::run(args).await,
            Command::Eval(args) => eval_cmd::run(args).await,
            Command::Gc(args) => gc::run(args).await,
            Command::Kb(args) => kb_cmd::run(args).await,
            Command::Models(args) => models_cmd::run(args).await,
            Command::Users {
                action,
                database,
                config,
            } => users_cmd::run(action, &database, &config).await,
            Command::Completions { shell } => Ok(manual::completions(shell)),
            Command::Man { dir } => manual::man(dir.as_deref()),
        }
    }));
    // The command has finished (a server has had its shutdown grace): work still running on a
    // blocking thread — an HTML or DOCX parse that cannot be interrupted — must not hold the
    // process open; dropping the runtime would wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    exit
}

/// A command's error, said once on stderr, as its exit code.
fn report(result: anyhow::Result<Exit>) -> Exit {
    match result {
        Ok(exit) => exit,
        Err(e) => {
            errln!("deepsolve: {e:#}");
            Exit::for_error(&e)
        }
    }
}
