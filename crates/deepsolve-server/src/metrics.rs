//! Prometheus metrics (`GET /metrics`), fed by the turn events as they pass the sink.
//!
//! On the official `prometheus-client` crate, whose registry is a value: each server (and
//! each test's server, several to a process) owns its own, with no process-global recorder.
//! The names, types and labels are a contract with dashboards: a test reads them back.

use std::time::Duration;

use deepsolve_protocol::EVENT_TYPES;
use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The `Content-Type` of the exposition: the Prometheus text format 0.0.4.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// Latency buckets (seconds): from a fast tool call to a long model round.
const SECONDS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];
/// Rounds per turn.
const ROUNDS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 12.0, 16.0, 24.0, 32.0, 50.0];

/// A series' labels, `(name, value)` in a fixed order.
type Labels = Vec<(&'static str, String)>;
type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

/// The label of events whose type is not in the protocol's list (a newer engine's).
const OTHER_EVENT: &str = "other";

fn seconds() -> Histogram {
    Histogram::new(SECONDS.iter().copied())
}

/// The server's metrics and the registry that exposes them.
pub struct Metrics {
    registry: Registry,
    turns: Family<Labels, Counter>,
    rounds: Histogram,
    tokens: Family<Labels, Counter>,
    tool_calls: Family<Labels, Counter>,
    tool_seconds: Histograms,
    model_round_seconds: Histogram,
    model_first_delta_seconds: Histogram,
    /// One counter per event type, resolved once: this is touched by every event of every
    /// turn, so it takes no lock.
    events: Vec<Counter>,
    running_turns: Gauge,
    followed_turns: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        // Help texts have no final period: the registry adds one.
        let mut registry = Registry::default();
        let turns = Family::<Labels, Counter>::default();
        registry.register(
            "deepsolve_turns",
            "Turns ended, by stop reason",
            turns.clone(),
        );
        let rounds = Histogram::new(ROUNDS.iter().copied());
        registry.register(
            "deepsolve_turn_rounds",
            "Model rounds per ended turn",
            rounds.clone(),
        );
        let tokens = Family::<Labels, Counter>::default();
        registry.register(
            "deepsolve_tokens",
            "Model tokens used by ended turns",
            tokens.clone(),
        );
        let tool_calls = Family::<Labels, Counter>::default();
        registry.register(
            "deepsolve_tool_calls",
            "Tool calls, by tool and outcome",
            tool_calls.clone(),
        );
        let tool_seconds: Histograms = Family::new_with_constructor(seconds);
        registry.register(
            "deepsolve_tool_call_duration_seconds",
            "Tool call durations",
            tool_seconds.clone(),
        );
        let model_round_seconds = seconds();
        registry.register(
            "deepsolve_model_round_duration_seconds",
            "Model call durations (round start to round end, streaming included)",
            model_round_seconds.clone(),
        );
        let model_first_delta_seconds = seconds();
        registry.register(
            "deepsolve_model_first_delta_seconds",
            "Model latency to the first streamed delta of a round",
            model_first_delta_seconds.clone(),
        );
        let event_family = Family::<Labels, Counter>::default();
        registry.register(
            "deepsolve_events",
            "Turn events logged, by type",
            event_family.clone(),
        );
        let events = (EVENT_TYPES.iter().chain([&OTHER_EVENT]))
            .map(|kind| event_family.get_or_create_owned(&vec![("type", kind.to_string())]))
            .collect();
        let running_turns = Gauge::default();
        registry.register(
            "deepsolve_running_turns",
            "Turns running on this instance",
            running_turns.clone(),
        );
        let followed_turns = Gauge::default();
        registry.register(
            "deepsolve_followed_turns",
            "Turns with live SSE readers on this instance",
            followed_turns.clone(),
        );
        Metrics {
            registry,
            turns,
            rounds,
            tokens,
            tool_calls,
            tool_seconds,
            model_round_seconds,
            model_first_delta_seconds,
            events,
            running_turns,
            followed_turns,
        }
    }
}

impl Metrics {
    /// A turn ended (`stop_reason` is `failed` for turns that could not run).
    pub fn turn_ended(&self, stop_reason: &str, rounds: u32, prompt: u64, completion: u64) {
        self.turns
            .get_or_create(&vec![("stop_reason", stop_reason.to_string())])
            .inc();
        self.rounds.observe(f64::from(rounds));
        self.tokens
            .get_or_create(&vec![("kind", "prompt".to_string())])
            .inc_by(prompt);
        self.tokens
            .get_or_create(&vec![("kind", "completion".to_string())])
            .inc_by(completion);
    }

    pub fn tool_call(&self, tool: &str, ok: bool, duration: Duration) {
        self.tool_calls
            .get_or_create(&vec![("tool", tool.to_string()), ("ok", ok.to_string())])
            .inc();
        self.tool_seconds
            .get_or_create(&vec![("tool", tool.to_string())])
            .observe(duration.as_secs_f64());
    }

    pub fn model_round(&self, duration: Duration) {
        self.model_round_seconds.observe(duration.as_secs_f64());
    }

    pub fn model_first_delta(&self, latency: Duration) {
        self.model_first_delta_seconds
            .observe(latency.as_secs_f64());
    }

    pub fn event(&self, kind: &str) {
        // Past the protocol's list: `other`.
        let i = EVENT_TYPES
            .iter()
            .position(|t| *t == kind)
            .unwrap_or(EVENT_TYPES.len());
        if let Some(counter) = self.events.get(i) {
            counter.inc();
        }
    }

    /// The Prometheus text exposition, with the live gauges given by the caller.
    pub fn render(&self, running_turns: usize, followed_turns: usize) -> String {
        self.running_turns
            .set(i64::try_from(running_turns).unwrap_or(i64::MAX));
        self.followed_turns
            .set(i64::try_from(followed_turns).unwrap_or(i64::MAX));
        let mut out = String::with_capacity(8192);
        // Writing to a String cannot fail.
        let _ = prometheus_text::encode(&mut out, &self.registry);
        out
    }
}

/// The event writer's sinks report what every turn's events show here.
impl deepsolve_app::writer::TurnObserver for Metrics {
    fn event(&self, type_name: &str) {
        Metrics::event(self, type_name);
    }

    fn model_first_delta(&self, latency: Duration) {
        Metrics::model_first_delta(self, latency);
    }

    fn model_round(&self, duration: Duration) {
        Metrics::model_round(self, duration);
    }

    fn tool_call(&self, tool: &str, ok: bool, duration: Duration) {
        Metrics::tool_call(self, tool, ok, duration);
    }

    fn turn_ended(&self, stop_reason: &str, rounds: u32, prompt: u64, completion: u64) {
        Metrics::turn_ended(self, stop_reason, rounds, prompt, completion);
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
        assert!(
            text.contains("# TYPE deepsolve_turns_total counter"),
            "{text}"
        );
        assert!(text.contains("deepsolve_turns_total{stop_reason=\"answered\"} 2"));
        assert!(text.contains("deepsolve_tokens_total{kind=\"prompt\"} 110"));
        assert!(
            text.contains("deepsolve_turn_rounds_bucket{le=\"4\"} 1"),
            "{text}"
        );
        assert!(text.contains("deepsolve_turn_rounds_bucket{le=\"+Inf\"} 2"));
        assert!(text.contains("deepsolve_turn_rounds_sum 8.0"), "{text}");
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
