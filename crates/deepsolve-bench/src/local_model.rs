//! `bench local-model [PATH] [--threads N] [--vs-server]` (built with `--features local`): the
//! in-process local model (deepsolve-local) — load time and resident set, prompt and
//! generation tokens per second, time to first token cold and on a follow-up round, and the
//! share of the follow-up's prompt found in the KV cache. With `--vs-server`, the same
//! conversations then go to llama.cpp's own server (the testkit's `LlamaServer`, the pinned
//! `xllamacpp`, two threads; its Python from `DEEPSOLVE_TEST_PYTHON`) on the same model, its
//! own timings read from each reply: the physical limit in-process is measured against. The model defaults to the 0.5B test model in the model
//! cache (`scripts/fetch-model qwen2.5-coder-0.5b-instruct-q4_k_m`). The machine's load
//! average is printed beside the figures: they are only comparable on a quiet machine.

use std::time::Duration;

use anyhow::Context;
use deepsolve_core::{ChatRequest, Message, ToolChoice};
use deepsolve_local::{CallStats, Constraint, LocalConfig, LocalModel, model_cache_dir};

const DEFAULT_MODEL: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
const RUNS: usize = 3;
const GENERATED: u32 = 128;

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let mut path = None;
    let mut threads = None;
    let mut vs_server = false;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--vs-server" => vs_server = true,
            "--threads" => {
                let n = rest.next().context("--threads needs a number")?;
                threads = Some(n.parse().context("--threads needs a number")?);
            }
            other if path.is_none() => path = Some(std::path::PathBuf::from(other)),
            other => {
                anyhow::bail!(
                    "unexpected argument {other:?} (local-model [PATH] [--threads N] [--vs-server])"
                )
            }
        }
    }
    let path = match path {
        Some(path) => path,
        None => model_cache_dir()
            .context("no model cache directory (set DEEPSOLVE_MODELS or HOME)")?
            .join(DEFAULT_MODEL),
    };
    let mut config = LocalConfig::new(path);
    config.context = 8192;
    config.threads = threads;
    let rss_before = super::rss_kib()?;
    let model = LocalModel::load(&config)?;
    let rss_loaded = super::rss_kib()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut rounds = Vec::new();
    for run in 0..RUNS {
        rounds.push(runtime.block_on(one_conversation(&model, run))?);
    }
    let rss_after = super::rss_kib()?;
    print_table(
        &model,
        &config,
        &rounds,
        [rss_before, rss_loaded, rss_after],
    )?;
    if vs_server {
        // The weights and contexts go before the server maps its own copy.
        drop(model);
        runtime.block_on(server_table(&config))?;
    }
    Ok(())
}

/// One round as llama.cpp's server timed it (`timings` of its reply).
#[derive(Debug, Clone, Copy, Default)]
struct ServerRound {
    prompt_n: f64,
    prompt_ms: f64,
    predicted_n: f64,
    predicted_ms: f64,
    cache_n: f64,
    prompt: u64,
}

/// The same conversations through llama.cpp's own server, and its table.
async fn server_table(config: &LocalConfig) -> anyhow::Result<()> {
    let python = std::env::var_os("DEEPSOLVE_TEST_PYTHON")
        .map(std::path::PathBuf::from)
        .context("--vs-server needs DEEPSOLVE_TEST_PYTHON (a Python with xllamacpp)")?;
    let started = std::time::Instant::now();
    let model = config.model.clone();
    let context = config.context;
    let server = tokio::task::spawn_blocking(move || {
        deepsolve_testkit::real::LlamaServer::start(&python, &model, context)
    })
    .await??;
    let startup = started.elapsed();
    let http = reqwest::Client::new();
    let mut rounds = Vec::new();
    for run in 0..RUNS {
        rounds.push(server_conversation(&http, &server.url(), run).await?);
    }
    let first: Vec<&ServerRound> = rounds.iter().map(|r| &r[0]).collect();
    let second: Vec<&ServerRound> = rounds.iter().map(|r| &r[1]).collect();
    let rate = |n: f64, ms: f64| n / (ms / 1e3).max(1e-9);
    let prompt_rate = median(
        first
            .iter()
            .map(|r| rate(r.prompt_n, r.prompt_ms))
            .collect(),
    );
    let generation_rate = median(
        rounds
            .iter()
            .flatten()
            .map(|r| rate(r.predicted_n, r.predicted_ms))
            .collect(),
    );
    let ttft_cold = median(first.iter().map(|r| r.prompt_ms).collect());
    let ttft_follow = median(second.iter().map(|r| r.prompt_ms).collect());
    let share = median(
        second
            .iter()
            .map(|r| 100.0 * r.cache_n / (r.prompt as f64).max(1.0))
            .collect(),
    );
    let load_average = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!();
    println!(
        "llama.cpp's server (xllamacpp), same model and conversations, 2 threads; load average: {}",
        load_average
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| start-up (load, listen) | {:.0} ms |",
        startup.as_secs_f64() * 1e3
    );
    println!("| prompt processing | {prompt_rate:.0} tokens/s |");
    println!("| generation | {generation_rate:.1} tokens/s |");
    println!("| prompt time, round 1 (cold; first token a token later) | {ttft_cold:.0} ms |");
    println!("| prompt time, round 2 (follow-up) | {ttft_follow:.0} ms |");
    println!("| round 2 prompt found in the KV cache | {share:.1} % |");
    Ok(())
}

async fn server_conversation(
    http: &reqwest::Client,
    url: &str,
    run: usize,
) -> anyhow::Result<[ServerRound; 2]> {
    let (system, question, follow_up) = conversation(run);
    let mut messages = vec![
        serde_json::json!({"role": "system", "content": system}),
        serde_json::json!({"role": "user", "content": question}),
    ];
    let (first, answer) = server_call(http, url, &messages).await?;
    messages.push(serde_json::json!({"role": "assistant", "content": answer}));
    messages.push(serde_json::json!({"role": "user", "content": follow_up}));
    let (second, _) = server_call(http, url, &messages).await?;
    Ok([first, second])
}

async fn server_call(
    http: &reqwest::Client,
    url: &str,
    messages: &[serde_json::Value],
) -> anyhow::Result<(ServerRound, String)> {
    let body = serde_json::json!({
        "messages": messages,
        "max_tokens": GENERATED,
        "temperature": 0.0,
        "cache_prompt": true,
    });
    let reply: serde_json::Value = http
        .post(format!("{url}/chat/completions"))
        .json(&body)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let timings = &reply["timings"];
    let number = |key: &str| timings[key].as_f64().unwrap_or(0.0);
    let round = ServerRound {
        prompt_n: number("prompt_n"),
        prompt_ms: number("prompt_ms"),
        predicted_n: number("predicted_n"),
        predicted_ms: number("predicted_ms"),
        cache_n: number("cache_n"),
        prompt: reply["usage"]["prompt_tokens"].as_u64().unwrap_or(0),
    };
    let answer = reply["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    Ok((round, answer))
}

/// A conversation's system prompt, question and follow-up (the run number first, so no run
/// finds another's prompt cached).
fn conversation(run: usize) -> (String, &'static str, &'static str) {
    (
        format!(
            "Run {run}. You are an assistant for the deepsolve project. Its architecture:\n\n{}",
            architecture_excerpt()
        ),
        "Explain in detail, in at least 300 words, how the engine's loop enforces planning \
         before work.",
        "Now explain, again in at least 300 words, how tool calls are read from a reply.",
    )
}

/// Two rounds of one conversation: a ~1 500-token system prompt and a question, then the
/// answer and a follow-up question. Each run's system prompt differs (the run number comes
/// first), so round 1 finds nothing cached.
async fn one_conversation(model: &LocalModel, run: usize) -> anyhow::Result<[CallStats; 2]> {
    let (system, question, follow_up) = conversation(run);
    let mut messages = vec![Message::system(system), Message::user(question)];
    let first = call(model, &messages).await?;
    messages.push(Message::assistant(first.1));
    messages.push(Message::user(follow_up));
    let second = call(model, &messages).await?;
    Ok([first.0, second.0])
}

async fn call(model: &LocalModel, messages: &[Message]) -> anyhow::Result<(CallStats, String)> {
    let request = ChatRequest {
        messages: messages.to_vec(),
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        max_tokens: GENERATED,
        temperature: 0.0,
        stop: Vec::new(),
        response_format: None,
    };
    let (completion, stats) = model
        .complete_constrained(&request, &Constraint::Free, &mut |_| {})
        .await?;
    Ok((stats, completion.text))
}

fn architecture_excerpt() -> String {
    const ARCHITECTURE: &str = include_str!("../../../ARCHITECTURE.md");
    // About 1 500 tokens of prose.
    let end = (0..=6_000.min(ARCHITECTURE.len()))
        .rev()
        .find(|i| ARCHITECTURE.is_char_boundary(*i))
        .unwrap_or(0);
    ARCHITECTURE[..end].to_string()
}

fn per_second(tokens: u32, time: Duration) -> f64 {
    f64::from(tokens) / time.as_secs_f64().max(1e-9)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

fn print_table(
    model: &LocalModel,
    config: &LocalConfig,
    rounds: &[[CallStats; 2]],
    [rss_before, rss_loaded, rss_after]: [u64; 3],
) -> anyhow::Result<()> {
    let load_average = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load_average: Vec<&str> = load_average.split_whitespace().take(3).collect();
    let first: Vec<&CallStats> = rounds.iter().map(|r| &r[0]).collect();
    let second: Vec<&CallStats> = rounds.iter().map(|r| &r[1]).collect();
    let prompt_rate = median(
        first
            .iter()
            .map(|s| per_second(s.prompt_tokens - s.cached_tokens, s.prompt_time))
            .collect(),
    );
    let generation_rate = median(
        rounds
            .iter()
            .flatten()
            .map(|s| per_second(s.completion_tokens.saturating_sub(1), s.generation_time))
            .collect(),
    );
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let ttft_cold = median(first.iter().map(|s| ms(s.first_token)).collect());
    let ttft_follow = median(second.iter().map(|s| ms(s.first_token)).collect());
    let share = median(
        second
            .iter()
            .map(|s| 100.0 * f64::from(s.cached_tokens) / f64::from(s.prompt_tokens.max(1)))
            .collect(),
    );
    let new_tokens = median(
        second
            .iter()
            .map(|s| f64::from(s.prompt_tokens - s.cached_tokens))
            .collect(),
    );
    println!(
        "local model: {} ({:.0} MiB), context {}, {} thread(s); median of {RUNS} conversations \
         of two rounds, {GENERATED} tokens each at most, greedy",
        config.model.display(),
        model.info().file_bytes as f64 / (1u64 << 20) as f64,
        config.context,
        config.thread_count(),
    );
    println!("load average (1, 5, 15 min): {}", load_average.join(" "));
    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| load (check, mmap, context) | {:.0} ms |",
        ms(model.load_time())
    );
    println!(
        "| resident set: before load / loaded / after the runs | {} / {} / {} MiB |",
        rss_before / 1024,
        rss_loaded / 1024,
        rss_after / 1024
    );
    println!(
        "| round 1 prompt | {} tokens |",
        first.first().map(|s| s.prompt_tokens).unwrap_or(0)
    );
    println!("| prompt processing | {prompt_rate:.0} tokens/s |");
    println!("| generation | {generation_rate:.1} tokens/s |");
    println!("| time to first token, round 1 (cold) | {ttft_cold:.0} ms |");
    println!(
        "| time to first token, round 2 (follow-up, {new_tokens:.0} new prompt tokens) | {ttft_follow:.0} ms |"
    );
    println!("| round 2 prompt found in the KV cache | {share:.1} % |");
    Ok(())
}
