//! The repetition guard: the same call (tool and arguments) made round after round is
//! refused, then ends the turn.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hasher};

use serde_json::Value;

/// From this many rounds in a row, the call is refused…
pub(crate) const REFUSE_AT: u32 = 3;
/// …and from this many, the turn goes to a forced answer.
pub(crate) const FORCE_AT: u32 = 5;

/// What identifies one exact call: a hash of its tool name and canonical arguments. A hash,
/// not the canonical text itself, because the guard keeps the round's signatures until the
/// next round and arguments may be megabytes long.
pub(crate) type Signature = u64;

/// Tracks how many rounds in a row each exact call was made.
#[derive(Default)]
pub(crate) struct RepetitionGuard {
    streaks: HashMap<Signature, u32>,
}

impl RepetitionGuard {
    /// Record a round's call signatures; returns each one's streak (rounds in a row).
    pub(crate) fn observe(&mut self, sigs: &[Signature]) -> Vec<u32> {
        let mut next = HashMap::new();
        let streaks = sigs
            .iter()
            .map(|sig| {
                *next
                    .entry(*sig)
                    .or_insert_with(|| self.streaks.get(sig).copied().unwrap_or(0) + 1)
            })
            .collect();
        self.streaks = next;
        streaks
    }
}

/// A stable hash of `(name, arguments)`, keys sorted at every depth. The canonical text is
/// streamed into the hasher, never built.
pub(crate) fn signature(name: &str, args: &Value) -> Signature {
    // Fixed keys: the same call hashes the same in every round of the turn.
    let mut hasher = DefaultHasher::new();
    let mut out = HashWriter(&mut hasher);
    out.put(name.as_bytes());
    out.put(b":");
    canonical(args, &mut out);
    hasher.finish()
}

/// Bytes into a hasher, as a writer (so JSON encoders can write into it).
struct HashWriter<'h>(&'h mut DefaultHasher);

impl HashWriter<'_> {
    fn put(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }

    /// The JSON encoding of a key or scalar.
    fn json(&mut self, value: &impl serde::Serialize) {
        // Writing into a hasher cannot fail, and these values always encode.
        let _ = serde_json::to_writer(&mut *self, value);
    }
}

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.put(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn canonical(v: &Value, out: &mut HashWriter<'_>) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.put(b"{");
            for k in keys {
                out.json(k);
                out.put(b":");
                canonical(&map[k], out);
                out.put(b",");
            }
            out.put(b"}");
        }
        Value::Array(items) => {
            out.put(b"[");
            for item in items {
                canonical(item, out);
                out.put(b",");
            }
            out.put(b"]");
        }
        other => out.json(other),
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
        let s = vec![signature("x", &Value::Null)];
        assert_eq!(g.observe(&s), [1]);
        assert_eq!(g.observe(&s), [2]);
        assert_eq!(g.observe(&[signature("y", &Value::Null)]), [1]);
        assert_eq!(g.observe(&s), [1]);
        assert_eq!(g.observe(&s), [2]);
        assert_eq!(g.observe(&s), [3]);
    }
}
