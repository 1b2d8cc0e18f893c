//! Prometheus metrics (`GET /metrics`), fed by the turn events as they pass the sink.
//!
//! Hand-rolled on atomics rather than the `metrics` facade: the facade's recorder is
//! process-global, and tests run several servers in one process, each needing its own
//! numbers. The text format is small and stable.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Latency buckets (seconds): from a fast tool call to a long model round.
const SECONDS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];
/// Rounds per turn.
const ROUNDS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 12.0, 16.0, 24.0, 32.0, 50.0];

/// A fixed-bucket histogram.
struct Histogram {
    bounds: &'static [f64],
    /// Per bucket (not cumulative); the last is +Inf.
    counts: Vec<AtomicU64>,
    /// Sum in micro-units, so it stays an integer.
    sum_micros: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_micros: AtomicU64::new(0),
        }
    }

    fn observe(&self, value: f64) {
        let i = self
            .bounds
            .iter()
            .position(|b| value <= *b)
            .unwrap_or(self.bounds.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum_micros
            .fetch_add((value.max(0.0) * 1e6) as u64, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (i, count) in self.counts.iter().enumerate() {
            cumulative += count.load(Ordering::Relaxed);
            let le = self
                .bounds
                .get(i)
                .map(|b| b.to_string())
                .unwrap_or_else(|| "+Inf".into());
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
            );
        }
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let braces = |l: &str| {
            if l.is_empty() {
                String::new()
            } else {
                format!("{{{l}}}")
            }
        };
        let _ = writeln!(out, "{name}_sum{} {sum}", braces(labels));
        let _ = writeln!(out, "{name}_count{} {cumulative}", braces(labels));
    }
}

/// Counters and histograms keyed by a rendered label set.
#[derive(Default)]
struct Family<T> {
    series: Mutex<BTreeMap<String, T>>,
}

impl Family<AtomicU64> {
    fn add(&self, labels: String, n: u64) {
        let mut series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        series
            .entry(labels)
            .or_insert_with(|| AtomicU64::new(0))
            .fetch_add(n, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        let series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        for (labels, value) in series.iter() {
            let _ = writeln!(out, "{name}{{{labels}}} {}", value.load(Ordering::Relaxed));
        }
    }
}

struct HistogramFamily {
    bounds: &'static [f64],
    series: Mutex<BTreeMap<String, Histogram>>,
}

impl HistogramFamily {
    fn new(bounds: &'static [f64]) -> Self {
        HistogramFamily {
            bounds,
            series: Mutex::new(BTreeMap::new()),
        }
    }

    fn observe(&self, labels: String, value: f64) {
        let mut series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        series
            .entry(labels)
            .or_insert_with(|| Histogram::new(self.bounds))
            .observe(value);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        for (labels, h) in series.iter() {
            h.render(out, name, labels);
        }
    }
}

/// `key="value"` with the value escaped per the exposition format.
fn label(key: &str, value: &str) -> String {
    let escaped = value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n");
    format!("{key}=\"{escaped}\"")
}

/// The server's metrics.
pub struct Metrics {
    turns: Family<AtomicU64>,
    rounds: HistogramFamily,
    tokens: Family<AtomicU64>,
    tool_calls: Family<AtomicU64>,
    tool_seconds: HistogramFamily,
    model_round_seconds: HistogramFamily,
    model_first_delta_seconds: HistogramFamily,
    /// Per event type, lock-free: this is touched by every event of every turn.
    events: Vec<AtomicU64>,
}

/// Every event type, in a fixed order (the index of `events`).
const EVENT_TYPES: &[&str] = &[
    "turn_started",
    "round_started",
    "reasoning_delta",
    "text_delta",
    "round_finished",
    "tool_call",
    "tool_progress",
    "tool_result",
    "plan",
    "step_finished",
    "replanned",
    "context_folded",
    "retrying",
    "warning",
    "answer",
    "turn_finished",
    "error",
];

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            turns: Family::default(),
            rounds: HistogramFamily::new(ROUNDS),
            tokens: Family::default(),
            tool_calls: Family::default(),
            tool_seconds: HistogramFamily::new(SECONDS),
            model_round_seconds: HistogramFamily::new(SECONDS),
            model_first_delta_seconds: HistogramFamily::new(SECONDS),
            // One spare slot counts types added to the engine after this list.
            events: (0..=EVENT_TYPES.len()).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl Metrics {
    /// A turn ended (`stop_reason` is `failed` for turns that could not run).
    pub fn turn_ended(&self, stop_reason: &str, rounds: u32, prompt: u64, completion: u64) {
        self.turns.add(label("stop_reason", stop_reason), 1);
        self.rounds.observe(String::new(), f64::from(rounds));
        self.tokens.add(label("kind", "prompt"), prompt);
        self.tokens.add(label("kind", "completion"), completion);
    }

    pub fn tool_call(&self, tool: &str, ok: bool, duration: Duration) {
        let labels = format!("{},{}", label("tool", tool), label("ok", &ok.to_string()));
        self.tool_calls.add(labels, 1);
        self.tool_seconds
            .observe(label("tool", tool), duration.as_secs_f64());
    }

    pub fn model_round(&self, duration: Duration) {
        self.model_round_seconds
            .observe(String::new(), duration.as_secs_f64());
    }

    pub fn model_first_delta(&self, latency: Duration) {
        self.model_first_delta_seconds
            .observe(String::new(), latency.as_secs_f64());
    }

    pub fn event(&self, kind: &str) {
        let i = EVENT_TYPES
            .iter()
            .position(|t| *t == kind)
            .unwrap_or(EVENT_TYPES.len());
        self.events[i].fetch_add(1, Ordering::Relaxed);
    }

    fn render_events(&self, out: &mut String) {
        let name = "deepsolve_events_total";
        let _ = writeln!(
            out,
            "# HELP {name} Turn events logged, by type.\n# TYPE {name} counter"
        );
        let names = EVENT_TYPES.iter().copied().chain(["other"]);
        for (kind, count) in names.zip(&self.events) {
            let n = count.load(Ordering::Relaxed);
            if n > 0 {
                let _ = writeln!(out, "{name}{{{}}} {n}", label("type", kind));
            }
        }
    }

    /// The Prometheus text exposition, with the live gauges given by the caller.
    pub fn render(&self, running_turns: usize, watched_turns: usize) -> String {
        let mut out = String::with_capacity(4096);
        self.turns.render(
            &mut out,
            "deepsolve_turns_total",
            "Turns ended, by stop reason.",
        );
        self.rounds.render(
            &mut out,
            "deepsolve_turn_rounds",
            "Model rounds per ended turn.",
        );
        self.tokens.render(
            &mut out,
            "deepsolve_tokens_total",
            "Model tokens used by ended turns.",
        );
        self.tool_calls.render(
            &mut out,
            "deepsolve_tool_calls_total",
            "Tool calls, by tool and outcome.",
        );
        self.tool_seconds.render(
            &mut out,
            "deepsolve_tool_call_duration_seconds",
            "Tool call durations.",
        );
        self.model_round_seconds.render(
            &mut out,
            "deepsolve_model_round_duration_seconds",
            "Model call durations (round start to round end, streaming included).",
        );
        self.model_first_delta_seconds.render(
            &mut out,
            "deepsolve_model_first_delta_seconds",
            "Model latency to the first streamed delta of a round.",
        );
        self.render_events(&mut out);
        let _ = writeln!(
            out,
            "# HELP deepsolve_running_turns Turns running on this instance.\n# TYPE deepsolve_running_turns gauge\ndeepsolve_running_turns {running_turns}"
        );
        let _ = writeln!(
            out,
            "# HELP deepsolve_followed_turns Turns with live SSE readers on this instance.\n# TYPE deepsolve_followed_turns gauge\ndeepsolve_followed_turns {watched_turns}"
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_cumulative_histograms() {
        let m = Metrics::default();
        m.turn_ended("answered", 5, 100, 20);
        m.turn_ended("answered", 3, 10, 2);
        m.tool_call("reason", true, Duration::from_millis(30));
        m.tool_call("re\"ason", false, Duration::from_secs(200));
        let text = m.render(2, 1);
        assert!(text.contains("deepsolve_turns_total{stop_reason=\"answered\"} 2"));
        assert!(text.contains("deepsolve_tokens_total{kind=\"prompt\"} 110"));
        assert!(text.contains("deepsolve_turn_rounds_bucket{le=\"4\"} 1"));
        assert!(text.contains("deepsolve_turn_rounds_bucket{le=\"+Inf\"} 2"));
        assert!(text.contains("deepsolve_turn_rounds_sum 8"));
        assert!(text.contains(
            "deepsolve_tool_call_duration_seconds_bucket{tool=\"reason\",le=\"0.05\"} 1"
        ));
        assert!(text.contains("tool=\"re\\\"ason\",ok=\"false\"} 1"));
        assert!(text.contains("deepsolve_running_turns 2"));
        m.event("plan");
        m.event("something_new");
        let text = m.render(0, 0);
        assert!(text.contains("deepsolve_events_total{type=\"plan\"} 1"));
        assert!(text.contains("deepsolve_events_total{type=\"other\"} 1"));
    }
}
