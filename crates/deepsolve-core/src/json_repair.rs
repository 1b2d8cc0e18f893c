//! Lenient parsing of tool arguments written by a model: strict JSON first, then a repaired
//! form, then the contents of a fenced block. Never panics, whatever the input.

use serde_json::Value;

use crate::texts::{Text, Texts};

/// Arguments no repair could read. `detail` is the JSON parser's message for the raw text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    pub detail: String,
}

impl JsonError {
    /// What the model is told, in the turn's language.
    pub fn describe(&self, texts: &Texts) -> String {
        texts.render(Text::InvalidJson, &[("detail", &self.detail)])
    }
}

impl std::fmt::Display for JsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe(&Texts::builtin(crate::solve::Language::En)))
    }
}

impl std::error::Error for JsonError {}

/// Parse model-written arguments into a JSON value.
/// An empty string means "no arguments" (`{}`), as several servers send for argument-less calls.
pub fn parse_lenient(raw: &str) -> Result<Value, JsonError> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
        return Ok(unwrap_double_encoded(v));
    }
    let unfenced = strip_fence(trimmed);
    if let Ok(v) = serde_json::from_str::<Value>(unfenced) {
        return Ok(unwrap_double_encoded(v));
    }
    let repaired = repair(unfenced);
    serde_json::from_str::<Value>(&repaired)
        .map(unwrap_double_encoded)
        .map_err(|e| {
            let strict = serde_json::from_str::<Value>(trimmed).err();
            JsonError {
                detail: strict
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| e.to_string()),
            }
        })
}

/// Some models send the arguments object as a JSON string containing JSON.
fn unwrap_double_encoded(v: Value) -> Value {
    if let Value::String(s) = &v
        && let Ok(inner @ Value::Object(_)) = serde_json::from_str::<Value>(s.trim())
    {
        return inner;
    }
    v
}

/// The body of the first ``` fenced block, or the input itself.
fn strip_fence(s: &str) -> &str {
    let Some(start) = s.find("```") else {
        return s;
    };
    let after = &s[start + 3..];
    let body_start = after.find('\n').map(|i| i + 1).unwrap_or(0);
    let body = &after[body_start..];
    match body.find("```") {
        Some(end) => body[..end].trim(),
        None => body.trim(),
    }
}

/// Best-effort repair of near-JSON: single-quoted strings, Python literals, trailing commas,
/// raw newlines inside strings, unquoted keys, text around the object, and missing closers.
pub(crate) fn repair(input: &str) -> String {
    let s = slice_from_first_opener(input);
    let mut out = String::with_capacity(s.len() + 8);
    let mut stack: Vec<char> = Vec::new();
    let mut chars = s.chars().peekable();
    let mut in_string: Option<char> = None;
    while let Some(c) = chars.next() {
        if let Some(quote) = in_string {
            match c {
                '\\' => {
                    out.push('\\');
                    if let Some(next) = chars.next() {
                        out.push(next);
                    }
                }
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '"' if quote == '\'' => out.push_str("\\\""),
                c if c == quote => {
                    out.push('"');
                    in_string = None;
                }
                c => out.push(c),
            }
            continue;
        }
        match c {
            '"' | '\'' => {
                out.push('"');
                in_string = Some(c);
            }
            '{' | '[' => {
                stack.push(if c == '{' { '}' } else { ']' });
                out.push(c);
            }
            '}' | ']' => {
                trim_trailing_comma(&mut out);
                if stack.pop().is_some() {
                    out.push(c);
                }
                if stack.is_empty() {
                    break; // ignore text after the object
                }
            }
            c if c.is_alphabetic() || c == '_' => {
                let mut word = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_alphanumeric() || n == '_' {
                        word.push(n);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push_str(&literal_or_key(&word, &mut chars));
            }
            c => out.push(c),
        }
    }
    if in_string.is_some() {
        out.push('"');
    }
    trim_trailing_comma(&mut out);
    while let Some(closer) = stack.pop() {
        out.push(closer);
    }
    out
}

fn slice_from_first_opener(s: &str) -> &str {
    match s.find(['{', '[']) {
        Some(i) => &s[i..],
        None => s,
    }
}

fn literal_or_key(word: &str, rest: &mut std::iter::Peekable<std::str::Chars<'_>>) -> String {
    let next_non_space = rest.clone().find(|c| !c.is_whitespace());
    if next_non_space == Some(':') {
        return format!("\"{word}\"");
    }
    match word {
        "True" | "true" => "true".into(),
        "False" | "false" => "false".into(),
        "None" | "null" | "undefined" => "null".into(),
        other => format!("\"{other}\""),
    }
}

fn trim_trailing_comma(out: &mut String) {
    let trimmed_len = out.trim_end().len();
    if out[..trimmed_len].ends_with(',') {
        out.truncate(trimmed_len - 1);
    }
}

/// The LaTeX commands that begin with `\n`, restored when JSON read their backslash as a
/// newline (a newline followed by one of them and no further letter is no prose's newline).
const NEWLINE_COMMANDS: &[&str] = &[
    "neq", "nabla", "neg", "not", "newline", "nleq", "ngeq", "nmid",
];

/// `value` with the LaTeX commands JSON ate restored in every string: a model writes `\frac`
/// inside a JSON string where it should write `\\frac`, and JSON reads `\f` as a form feed (the
/// 0.5B model's summaries showed "rac{1}{2}"). For prose only (the spine's arguments), never
/// for code: a form feed or backspace is restored always, a tab or carriage return before a
/// lowercase letter (`\times`, `\text`, `\right`), a newline only before one of a few
/// commands (`\neq`).
pub(crate) fn restore_latex_escapes(value: &Value) -> Value {
    match value {
        Value::String(text) => Value::String(restore_in(text)),
        Value::Array(items) => Value::Array(items.iter().map(restore_latex_escapes).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), restore_latex_escapes(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn restore_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for (at, c) in text.char_indices() {
        let rest = &text[at + c.len_utf8()..];
        let next_is_lower = rest.starts_with(|n: char| n.is_ascii_lowercase());
        let letter = match c {
            '\u{0c}' => Some('f'),
            '\u{08}' => Some('b'),
            '\t' if next_is_lower => Some('t'),
            '\r' if next_is_lower => Some('r'),
            '\n' if starts_newline_command(rest) => Some('n'),
            _ => None,
        };
        match letter {
            Some(letter) => {
                out.push('\\');
                out.push(letter);
            }
            None => out.push(c),
        }
    }
    out
}

/// `rest` (what follows a newline) spells one of the `\n…` commands, then no letter.
fn starts_newline_command(rest: &str) -> bool {
    NEWLINE_COMMANDS.iter().any(|command| {
        rest.strip_prefix(&command[1..])
            .is_some_and(|after| !after.starts_with(|c: char| c.is_ascii_alphabetic()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn repairs_common_model_mistakes() {
        let cases = [
            ("{'a': 'b'}", json!({"a": "b"})),
            ("{\"a\": 1,}", json!({"a": 1})),
            ("{\"a\": True, \"b\": None}", json!({"a": true, "b": null})),
            ("{a: 1}", json!({"a": 1})),
            (
                "{\"code\": \"x = 1\ny = 2\"}",
                json!({"code": "x = 1\ny = 2"}),
            ),
            ("{\"a\": [1, 2", json!({"a": [1, 2]})),
            ("Sure! {\"a\": 1} hope this helps", json!({"a": 1})),
            ("```json\n{\"a\": 1}\n```", json!({"a": 1})),
            ("\"{\\\"a\\\": 1}\"", json!({"a": 1})),
            ("", json!({})),
            ("{'s': 'it\"s'}", json!({"s": "it\"s"})),
        ];
        for (raw, want) in cases {
            assert_eq!(parse_lenient(raw).unwrap(), want, "input: {raw:?}");
        }
    }

    #[test]
    fn hopeless_input_gives_a_clear_error() {
        let err = parse_lenient("42 apples").unwrap_err().to_string();
        assert!(err.contains("not valid JSON"), "{err}");
    }

    proptest! {
        #[test]
        fn never_panics(s in ".{0,200}") {
            let _ = parse_lenient(&s);
        }

        #[test]
        fn valid_json_is_kept_exactly(v in arb_json()) {
            let text = v.to_string();
            prop_assert_eq!(parse_lenient(&text).unwrap(), v);
        }

        #[test]
        fn dropping_the_closers_is_repaired(v in arb_object()) {
            let text = v.to_string();
            let cut = text.trim_end_matches(['}', ']']);
            prop_assert_eq!(parse_lenient(cut).unwrap(), v);
        }
    }

    fn arb_leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i32>().prop_map(|n| json!(n)),
            "[a-zA-Z0-9 _\\-\n\"']{0,12}".prop_map(Value::String),
        ]
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        arb_leaf().prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z_]{1,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Objects whose last value is not itself an empty container (so cutting closers is
    /// unambiguous) and whose strings do not end the text with a closer.
    fn arb_object() -> impl Strategy<Value = Value> {
        prop::collection::btree_map("[a-z_]{1,6}", arb_leaf(), 1..4)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    #[test]
    fn latex_commands_json_read_as_escapes_are_restored_in_prose() {
        // What `{"summary": "\frac{1}{2} \times 3 \neq \beta, \right)"}` parses to.
        let eaten = serde_json::from_str::<Value>(
            r#"{"summary": "\frac{1}{2} \times 3 \neq \beta, \right)", "steps": [{"goal": "\text{x}"}]}"#,
        )
        .unwrap();
        let restored = restore_latex_escapes(&eaten);
        assert_eq!(
            restored["summary"],
            r"\frac{1}{2} \times 3 \neq \beta, \right)"
        );
        assert_eq!(restored["steps"][0]["goal"], r"\text{x}");
        // Prose whitespace stays: a newline before a word, a tab before a capital or digit.
        let prose = Value::String("First line\nnext line\n\tIndented\t42\r\nend".into());
        assert_eq!(restore_latex_escapes(&prose), prose);
        // Written correctly, nothing changes.
        let right = Value::String(r"\frac{1}{2}".into());
        assert_eq!(restore_latex_escapes(&right), right);
    }
}
