//! `bench local-model [PATH] [--threads N]` (built with `--features local`): the in-process local model
//! (deepsolve-local) — load time and resident set, prompt and generation tokens per second,
//! time to first token cold and on a follow-up round, and the share of the follow-up's
//! prompt found in the KV cache. The model defaults to the 0.5B test model in the model
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
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--threads" => {
                let n = rest.next().context("--threads needs a number")?;
                threads = Some(n.parse().context("--threads needs a number")?);
            }
            other if path.is_none() => path = Some(std::path::PathBuf::from(other)),
            other => {
                anyhow::bail!("unexpected argument {other:?} (local-model [PATH] [--threads N])")
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
    )
}

/// Two rounds of one conversation: a ~1 500-token system prompt and a question, then the
/// answer and a follow-up question. Each run's system prompt differs (the run number comes
/// first), so round 1 finds nothing cached.
async fn one_conversation(model: &LocalModel, run: usize) -> anyhow::Result<[CallStats; 2]> {
    let system = format!(
        "Run {run}. You are an assistant for the deepsolve project. Its architecture:\n\n{}",
        architecture_excerpt()
    );
    let mut messages = vec![
        Message::system(system),
        Message::user(
            "Explain in detail, in at least 300 words, how the engine's loop enforces planning \
             before work.",
        ),
    ];
    let first = call(model, &messages).await?;
    messages.push(Message::assistant(first.1));
    messages.push(Message::user(
        "Now explain, again in at least 300 words, how tool calls are read from a reply.",
    ));
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
