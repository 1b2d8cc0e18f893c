//! `deepsolve doctor` when the main model runs in this process: which file, where, its memory
//! (weights, KV cache, the resident set once loaded) and its speed on this machine (a probe
//! of about ten seconds; `--quick` skips it).

use std::time::Duration;

use deepsolve_app::local::{CallStats, Constraint, LocalModel};
use deepsolve_core::{ChatRequest, Message, ToolChoice};

use crate::output::outln;

/// Tokens the speed probe generates.
const PROBE_TOKENS: u32 = 48;

/// The section; false when the probe call failed.
pub(crate) async fn section(model: &LocalModel, quick: bool) -> bool {
    let info = model.info();
    outln!("endpoint   none: the model runs in this process (llm.provider: local)");
    outln!("model      {}", deepsolve_core::ChatModel::name(model));
    outln!(
        "file       {} ({} MiB, {}{})",
        info.path.display(),
        info.file_bytes >> 20,
        info.architecture,
        info.trained_context
            .map(|t| format!(", trained for {t} tokens"))
            .unwrap_or_default()
    );
    outln!(
        "context    {} tokens × {} (llm.local.context, llm.local.parallel), {} thread(s) each",
        model.context(),
        model.parallel(),
        model.threads()
    );
    let kv = model
        .kv_cache_bytes()
        .map(|bytes| format!("{} MiB", bytes >> 20))
        .unwrap_or_else(|| "unknown".into());
    let rss = resident_mib()
        .map(|mib| format!("{mib} MiB"))
        .unwrap_or_else(|| "unknown".into());
    outln!(
        "memory     weights {} MiB (memory-mapped, shared) + KV cache {kv} when full; resident now {rss}",
        info.file_bytes >> 20
    );
    super::doctor::ok(&format!(
        "loaded in {:.1} s",
        model.load_time().as_secs_f64()
    ));
    if quick {
        outln!("speed      not measured (--quick)");
        return true;
    }
    match probe(model).await {
        Ok(stats) => {
            super::doctor::ok(&speed_line(&stats));
            true
        }
        Err(e) => {
            super::doctor::fail(&format!("the model did not answer the speed probe: {e}"));
            false
        }
    }
}

/// One short call with a prompt nothing is cached for: its timings.
async fn probe(model: &LocalModel) -> Result<CallStats, deepsolve_core::ModelError> {
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    // About 300 prompt tokens: enough to time the prompt's reading, short enough for a slow
    // machine.
    let context = "The quick brown fox jumps over the lazy dog. ".repeat(28);
    let request = ChatRequest {
        messages: vec![
            Message::system(format!("Probe {nonce}. {context}")),
            Message::user("Count from 1 to 100, separated by spaces."),
        ],
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        max_tokens: PROBE_TOKENS,
        temperature: 0.0,
        stop: Vec::new(),
        response_format: None,
    };
    let (_, stats) = model
        .complete_constrained(&request, &Constraint::Free, &mut |_| {})
        .await?;
    Ok(stats)
}

fn speed_line(stats: &CallStats) -> String {
    let read = stats.prompt_tokens.saturating_sub(stats.cached_tokens);
    let generated = stats.completion_tokens.saturating_sub(1);
    format!(
        "speed on this machine: prompt {:.0} tokens/s ({read} tokens), generation {:.1} tokens/s \
         ({generated} tokens), first token after {:.1} s; load average {}",
        per_second(read, stats.prompt_time),
        per_second(generated, stats.generation_time),
        stats.first_token.as_secs_f64(),
        load_average()
    )
}

fn per_second(tokens: u32, time: Duration) -> f64 {
    f64::from(tokens) / time.as_secs_f64().max(1e-9)
}

/// The 1-minute load average, as `/proc/loadavg` says (speeds mean little on a busy machine).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

/// This process's resident set, MiB (`VmRSS` in `/proc/self/status`).
fn resident_mib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}
