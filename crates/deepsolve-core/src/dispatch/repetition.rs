//! The repetition guard: the same call (tool and arguments) made round after round is
//! refused, then ends the turn.

use std::collections::HashMap;

use serde_json::Value;

/// From this many rounds in a row, the call is refused…
pub(crate) const REFUSE_AT: u32 = 3;
/// …and from this many, the turn goes to a forced answer.
pub(crate) const FORCE_AT: u32 = 5;

/// Tracks how many rounds in a row each exact call was made.
#[derive(Default)]
pub(crate) struct RepetitionGuard {
    streaks: HashMap<String, u32>,
}

impl RepetitionGuard {
    /// Record a round's call signatures; returns each one's streak (rounds in a row).
    pub(crate) fn observe(&mut self, sigs: &[String]) -> Vec<u32> {
        let mut next = HashMap::new();
        let streaks = sigs
            .iter()
            .map(|sig| {
                *next
                    .entry(sig.clone())
                    .or_insert_with(|| self.streaks.get(sig).copied().unwrap_or(0) + 1)
            })
            .collect();
        self.streaks = next;
        streaks
    }
}

/// A stable text for `(name, arguments)`, keys sorted at every depth.
pub(crate) fn signature(name: &str, args: &Value) -> String {
    let mut out = format!("{name}:");
    canonical(args, &mut out);
    out
}

fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for k in keys {
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(&map[k], out);
                out.push(',');
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for item in items {
                canonical(item, out);
                out.push(',');
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn signature_ignores_key_order() {
        let a = signature("t", &json!({"a": 1, "b": {"c": 2, "d": 3}}));
        let b = signature("t", &json!({"b": {"d": 3, "c": 2}, "a": 1}));
        assert_eq!(a, b);
        assert_ne!(a, signature("u", &json!({"a": 1, "b": {"c": 2, "d": 3}})));
    }

    #[test]
    fn repetition_counts_rounds_in_a_row() {
        let mut g = RepetitionGuard::default();
        let s = vec!["x".to_string()];
        assert_eq!(g.observe(&s), [1]);
        assert_eq!(g.observe(&s), [2]);
        assert_eq!(g.observe(&["y".to_string()]), [1]);
        assert_eq!(g.observe(&s), [1]);
        assert_eq!(g.observe(&s), [2]);
        assert_eq!(g.observe(&s), [3]);
    }
}
