//! The solve knobs (DESIGN §5.2): defaults, clamps, strict keys. Every value is clamped on load
//! and on write, with a warning naming the key, the value and the range.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One numeric knob and its contract.
#[derive(Debug, Clone, Copy)]
pub struct Knob {
    pub key: &'static str,
    pub default: f64,
    pub min: f64,
    pub max: f64,
    pub integer: bool,
    pub help: &'static str,
}

const fn knob(key: &'static str, default: f64, min: f64, max: f64, help: &'static str) -> Knob {
    Knob {
        key,
        default,
        min,
        max,
        integer: true,
        help,
    }
}

/// The numeric knobs, in the order they are documented.
pub const KNOBS: &[Knob] = &[
    Knob {
        integer: false,
        ..knob("temperature", 0.3, 0.0, 2.0, "sampling temperature")
    },
    knob(
        "max_tokens",
        8192.0,
        1.0,
        200_000.0,
        "output tokens per model call",
    ),
    knob(
        "max_rounds",
        12.0,
        1.0,
        50.0,
        "model calls that may use tools",
    ),
    knob("max_replans", 2.0, 0.0, 10.0, "solve_replan budget"),
    knob(
        "max_steps",
        12.0,
        1.0,
        12.0,
        "plan length; longer plans are truncated",
    ),
    knob(
        "settlement_rounds",
        2.0,
        0.0,
        5.0,
        "extra rounds after max_rounds with a finish-now notice",
    ),
    knob(
        "turn_timeout_s",
        1200.0,
        10.0,
        21_600.0,
        "wall-clock limit of a turn",
    ),
    knob("tool_timeout_s", 60.0, 1.0, 600.0, "per tool call"),
    knob(
        "code_timeout_s",
        30.0,
        1.0,
        600.0,
        "per code_execution/exec call",
    ),
    knob(
        "stream_idle_timeout_s",
        120.0,
        5.0,
        600.0,
        "no byte from the model for this long is an error",
    ),
    knob(
        "max_parallel_tool_calls",
        8.0,
        1.0,
        32.0,
        "tool calls run per round; the rest are skipped",
    ),
    knob(
        "token_budget",
        0.0,
        0.0,
        1.0e9,
        "total tokens per turn; 0 = off",
    ),
    Knob {
        integer: false,
        ..knob(
            "ultimatum_at",
            0.85,
            0.3,
            0.95,
            "fraction of the context window that forces an answer",
        )
    },
];

/// Boolean knobs.
pub const FLAGS: &[(&str, bool, &str)] = &[
    ("plan_first", true, "refuse work tools before solve_plan"),
    (
        "fold",
        true,
        "fold a finished step's messages out of the context (off only to measure what folding saves)",
    ),
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SolveConfig {
    pub temperature: f64,
    pub max_tokens: u32,
    pub max_rounds: u32,
    pub max_replans: u32,
    pub max_steps: u32,
    pub settlement_rounds: u32,
    pub turn_timeout_s: u64,
    pub tool_timeout_s: u64,
    pub code_timeout_s: u64,
    pub stream_idle_timeout_s: u64,
    pub max_parallel_tool_calls: u32,
    pub token_budget: u64,
    pub ultimatum_at: f64,
    pub plan_first: bool,
    pub fold: bool,
}

impl Default for SolveConfig {
    fn default() -> Self {
        // Built from the knob table so the defaults are written down once.
        SolveConfig::from_map(&Map::new())
            .map(|(cfg, _)| cfg)
            .unwrap_or_else(|_| unreachable!("an empty map has no bad keys"))
    }
}

/// A value that was out of range (or not a finite number) and was replaced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClampWarning {
    pub key: String,
    pub value: String,
    pub used: f64,
    pub min: f64,
    pub max: f64,
}

impl std::fmt::Display for ClampWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} = {} is outside {}..={}; using {}",
            self.key, self.value, self.min, self.max, self.used
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("unknown solve setting '{key}' (known: {known})")]
    UnknownKey { key: String, known: String },
    #[error("solve setting '{key}' must be {expected}, got {got}")]
    WrongType {
        key: String,
        expected: &'static str,
        got: String,
    },
}

pub fn known_keys() -> String {
    KNOBS
        .iter()
        .map(|k| k.key)
        .chain(FLAGS.iter().map(|f| f.0))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Clamp one knob's value. Non-finite numbers fall back to the default.
pub fn clamp_knob(knob: &Knob, value: f64) -> (f64, Option<ClampWarning>) {
    let used = if !value.is_finite() {
        knob.default
    } else {
        let v = value.clamp(knob.min, knob.max);
        if knob.integer { v.round() } else { v }
    };
    let changed = !value.is_finite() || used != value;
    let warning = changed.then(|| ClampWarning {
        key: knob.key.to_string(),
        value: value.to_string(),
        used,
        min: knob.min,
        max: knob.max,
    });
    (used, warning)
}

fn number_of(key: &str, value: &Value) -> Result<f64, ConfigError> {
    let wrong = || ConfigError::WrongType {
        key: key.to_string(),
        expected: "a number",
        got: value.to_string(),
    };
    match value {
        Value::Number(n) => n.as_f64().ok_or_else(wrong),
        // YAML/env spell these as strings: ".nan", "inf", "1e3".
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            ".nan" | "nan" => Ok(f64::NAN),
            ".inf" | "inf" | "+.inf" => Ok(f64::INFINITY),
            "-.inf" | "-inf" => Ok(f64::NEG_INFINITY),
            t => t.parse::<f64>().map_err(|_| wrong()),
        },
        _ => Err(wrong()),
    }
}

impl SolveConfig {
    /// Build from a map of knob values (missing keys take defaults). Unknown keys and wrong
    /// types are errors; out-of-range values are clamped and reported.
    pub fn from_map(map: &Map<String, Value>) -> Result<(Self, Vec<ClampWarning>), ConfigError> {
        for key in map.keys() {
            let known = KNOBS.iter().any(|k| k.key == key) || FLAGS.iter().any(|f| f.0 == key);
            if !known {
                return Err(ConfigError::UnknownKey {
                    key: key.clone(),
                    known: known_keys(),
                });
            }
        }
        let mut warnings = Vec::new();
        let mut num = |key: &str| -> Result<f64, ConfigError> {
            let knob = KNOBS
                .iter()
                .find(|k| k.key == key)
                .unwrap_or_else(|| unreachable!("knob {key} is in the table"));
            let Some(value) = map.get(key).filter(|v| !v.is_null()) else {
                return Ok(knob.default);
            };
            let (used, warning) = clamp_knob(knob, number_of(key, value)?);
            warnings.extend(warning);
            Ok(used)
        };
        let cfg = SolveConfig {
            temperature: num("temperature")?,
            max_tokens: num("max_tokens")? as u32,
            max_rounds: num("max_rounds")? as u32,
            max_replans: num("max_replans")? as u32,
            max_steps: num("max_steps")? as u32,
            settlement_rounds: num("settlement_rounds")? as u32,
            turn_timeout_s: num("turn_timeout_s")? as u64,
            tool_timeout_s: num("tool_timeout_s")? as u64,
            code_timeout_s: num("code_timeout_s")? as u64,
            stream_idle_timeout_s: num("stream_idle_timeout_s")? as u64,
            max_parallel_tool_calls: num("max_parallel_tool_calls")? as u32,
            token_budget: num("token_budget")? as u64,
            ultimatum_at: num("ultimatum_at")?,
            plan_first: flag(map, "plan_first")?,
            fold: flag(map, "fold")?,
        };
        Ok((cfg, warnings))
    }

    /// The knobs as a map, for writing back and for `settings get`.
    pub fn to_map(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => unreachable!("SolveConfig serialises to an object"),
        }
    }

    /// Apply overrides (e.g. a turn's `config`) on top of this config, strictly.
    pub fn with_overrides(
        &self,
        overrides: &Map<String, Value>,
    ) -> Result<(Self, Vec<ClampWarning>), ConfigError> {
        let mut map = self.to_map();
        for (k, v) in overrides {
            map.insert(k.clone(), v.clone());
        }
        // Validate unknown keys against the overrides themselves for a precise message.
        Self::from_map(&map)
    }

    pub fn turn_timeout(&self) -> Duration {
        Duration::from_secs(self.turn_timeout_s)
    }

    pub fn tool_timeout(&self) -> Duration {
        Duration::from_secs(self.tool_timeout_s)
    }

    pub fn stream_idle_timeout(&self) -> Duration {
        Duration::from_secs(self.stream_idle_timeout_s)
    }
}

fn flag(map: &Map<String, Value>, key: &str) -> Result<bool, ConfigError> {
    let default = FLAGS
        .iter()
        .find(|f| f.0 == key)
        .map(|f| f.1)
        .unwrap_or_else(|| unreachable!("flag {key} is in the table"));
    match map.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) if matches!(s.as_str(), "true" | "strict" | "on" | "yes") => {
            Ok(true)
        }
        Some(Value::String(s)) if matches!(s.as_str(), "false" | "off" | "no") => Ok(false),
        Some(other) => Err(ConfigError::WrongType {
            key: key.to_string(),
            expected: "true or false",
            got: other.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn defaults_match_the_design() {
        let c = SolveConfig::default();
        assert_eq!(c.temperature, 0.3);
        assert_eq!(c.max_tokens, 8192);
        assert_eq!(c.max_rounds, 12);
        assert_eq!(c.max_replans, 2);
        assert_eq!(c.max_steps, 12);
        assert_eq!(c.settlement_rounds, 2);
        assert_eq!(c.turn_timeout_s, 1200);
        assert_eq!(c.tool_timeout_s, 60);
        assert_eq!(c.code_timeout_s, 30);
        assert_eq!(c.stream_idle_timeout_s, 120);
        assert_eq!(c.max_parallel_tool_calls, 8);
        assert!(c.plan_first);
    }

    #[test]
    fn unknown_key_is_named() {
        let map = json!({"max_round": 3}).as_object().cloned().unwrap();
        let err = SolveConfig::from_map(&map).unwrap_err();
        assert!(err.to_string().contains("'max_round'"), "{err}");
    }

    #[test]
    fn wrong_type_is_named() {
        let map = json!({"max_rounds": "many"}).as_object().cloned().unwrap();
        let err = SolveConfig::from_map(&map).unwrap_err();
        assert!(err.to_string().contains("max_rounds"), "{err}");
    }

    #[test]
    fn out_of_range_is_clamped_with_a_warning() {
        let map = json!({"max_rounds": 1000, "temperature": ".nan"})
            .as_object()
            .cloned()
            .unwrap();
        let (c, w) = SolveConfig::from_map(&map).unwrap();
        assert_eq!(c.max_rounds, 50);
        assert_eq!(c.temperature, 0.3);
        assert_eq!(w.len(), 2);
        assert!(w[1].to_string().contains("max_rounds = 1000"), "{}", w[1]);
    }

    proptest! {
        #[test]
        fn every_knob_lands_in_range(idx in 0..KNOBS.len(), v in proptest::num::f64::ANY) {
            let knob = &KNOBS[idx];
            let (used, warning) = clamp_knob(knob, v);
            prop_assert!(used >= knob.min && used <= knob.max);
            if v.is_finite() && v >= knob.min && v <= knob.max && (!knob.integer || v.fract() == 0.0) {
                prop_assert!(warning.is_none());
            } else {
                prop_assert!(warning.is_some());
            }
        }
    }
}
