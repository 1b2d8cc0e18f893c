//! The settings endpoint's reports: what a change clamped.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A value a settings change asked for that was out of range (or not a finite number), and
/// what was written instead.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClampedValue {
    /// The full key, e.g. `solve.max_rounds`.
    pub key: String,
    /// The value as the request sent it.
    pub asked: Value,
    /// The value in force now (and in the settings file).
    pub applied: f64,
    /// The key's range.
    pub min: f64,
    pub max: f64,
}
