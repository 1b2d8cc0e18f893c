//! Editing a settings file in its own text: one dotted key replaced, inserted or removed where
//! it stands, so the file keeps its comments, blank lines, key order and quoting.
//!
//! The editor understands the block style people write settings in (`key: value`, nested
//! sections by indentation, comments, block sequences and block scalars as values). Anything
//! else on the way to the key — a flow mapping (`llm: {model: x}`), an anchor, a tab in the
//! indentation, a second document — makes it give up (`None`), and the caller writes the
//! file afresh instead. The caller also reads the edited text back and compares it with the
//! intended settings, so an edit that would load differently is never written.

use serde_json::Value;

use crate::yaml;

/// Indentation of a new nested section when the file shows none to copy.
const DEFAULT_INDENT: usize = 2;

/// `text` with the value at `path` set to `value` (`None`: the key removed). `None` when the
/// text has a shape this editor does not handle.
pub(crate) fn edit(text: &str, path: &[String], value: Option<&Value>) -> Option<String> {
    let mut doc = Document::parse(text)?;
    match value {
        Some(value) => doc.set(path, value)?,
        None => doc.remove(path)?,
    }
    Some(doc.render())
}

/// One line of the file, classified.
#[derive(Debug, Clone)]
enum Line {
    /// Blank, or only a comment (or a document start before any content).
    Trivia(String),
    /// `key: value  # comment` at `indent`.
    Entry(Entry),
    /// Anything else: part of a value spanning lines (a sequence item, a block scalar's text).
    Other { indent: usize, text: String },
}

#[derive(Debug, Clone)]
struct Entry {
    indent: usize,
    /// The key as written (quotes kept).
    raw_key: String,
    /// The key as YAML reads it.
    key: String,
    /// The value on the key's line, without its comment (may be empty).
    value: String,
    /// The trailing comment with the spaces before it (may be empty).
    comment: String,
}

impl Line {
    fn indent(&self) -> Option<usize> {
        match self {
            Line::Trivia(_) => None,
            Line::Entry(e) => Some(e.indent),
            Line::Other { indent, .. } => Some(*indent),
        }
    }

    fn text(&self) -> String {
        match self {
            Line::Trivia(text) | Line::Other { text, .. } => text.clone(),
            Line::Entry(e) => format!(
                "{}{}:{}{}",
                " ".repeat(e.indent),
                e.raw_key,
                if e.value.is_empty() {
                    String::new()
                } else {
                    format!(" {}", e.value)
                },
                e.comment
            ),
        }
    }
}

struct Document {
    lines: Vec<Line>,
    newline: &'static str,
    /// The indentation step the file uses.
    unit: usize,
}

/// Where a mapping's entries are: the lines `start..end`, and the parent's indentation
/// (`None` at the top level).
#[derive(Debug, Clone, Copy)]
struct Block {
    start: usize,
    end: usize,
    parent_indent: Option<usize>,
}

impl Document {
    fn parse(text: &str) -> Option<Document> {
        let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
        let mut lines = Vec::new();
        let mut content_seen = false;
        for raw in text.lines() {
            let line = classify(raw, content_seen)?;
            content_seen |= !matches!(line, Line::Trivia(_));
            lines.push(line);
        }
        let unit = indent_unit(&lines);
        Some(Document {
            lines,
            newline,
            unit,
        })
    }

    fn render(&self) -> String {
        let mut out = String::new();
        for line in &self.lines {
            out.push_str(&line.text());
            out.push_str(self.newline);
        }
        out
    }

    fn root(&self) -> Block {
        Block {
            start: 0,
            end: self.lines.len(),
            parent_indent: None,
        }
    }

    /// The direct entries of `block`: their line numbers. Every line of the block must be an
    /// entry at the block's indentation or belong to one (more indented, or a sequence item
    /// right under its key).
    fn entries(&self, block: Block) -> Option<Vec<usize>> {
        let mut found = Vec::new();
        let mut indent = None;
        for i in block.start..block.end {
            let Some(line_indent) = self.lines[i].indent() else {
                continue;
            };
            let level = *indent.get_or_insert(line_indent);
            if line_indent < level {
                return None;
            }
            if line_indent == level {
                match &self.lines[i] {
                    Line::Entry(_) => found.push(i),
                    // A sequence item at the key's own indentation belongs to the key above.
                    Line::Other { text, .. } if is_item(text) && !found.is_empty() => {}
                    _ => return None,
                }
            }
        }
        Some(found)
    }

    fn entry(&self, i: usize) -> Option<&Entry> {
        match &self.lines[i] {
            Line::Entry(e) => Some(e),
            _ => None,
        }
    }

    /// The lines after entry `i` that hold its value (`i + 1..end`), without the comments
    /// and blank lines at its end, which belong to what follows.
    fn value_lines(&self, i: usize, limit: usize) -> (usize, usize) {
        let Some(entry) = self.entry(i) else {
            return (i + 1, i + 1);
        };
        let mut end = i + 1;
        let mut last_content = i + 1;
        while end < limit {
            match &self.lines[end] {
                Line::Trivia(_) => {}
                Line::Other { indent, text }
                    if *indent > entry.indent || (*indent == entry.indent && is_item(text)) => {}
                Line::Entry(e) if e.indent > entry.indent => {}
                _ => break,
            }
            if !matches!(self.lines[end], Line::Trivia(_)) {
                last_content = end + 1;
            }
            end += 1;
        }
        (i + 1, last_content)
    }

    /// The mapping under entry `i` (its value lines), for descending into it. `None` when its
    /// value is not a block mapping (a scalar, a flow collection, an anchor, a sequence).
    fn child_block(&self, i: usize, limit: usize) -> Option<Block> {
        let entry = self.entry(i)?;
        if !entry.value.is_empty() && !is_null(&entry.value) {
            return None;
        }
        let (start, end) = self.value_lines(i, limit);
        let block = Block {
            start,
            end,
            parent_indent: Some(entry.indent),
        };
        // Only entries below: a sequence or a scalar there is not a section.
        let entries = self.entries(block)?;
        let any_content = (start..end).any(|j| self.lines[j].indent().is_some());
        if any_content && entries.is_empty() {
            return None;
        }
        Some(block)
    }

    fn find(&self, block: Block, key: &str) -> Option<Option<usize>> {
        let entries = self.entries(block)?;
        Some(
            entries
                .into_iter()
                .find(|&i| self.entry(i).is_some_and(|e| e.key == key)),
        )
    }

    fn set(&mut self, path: &[String], value: &Value) -> Option<()> {
        let mut block = self.root();
        for (depth, segment) in path.iter().enumerate() {
            let last = depth + 1 == path.len();
            match self.find(block, segment)? {
                Some(i) if last => return self.replace_value(i, block.end, value),
                Some(i) => {
                    let child = self.child_block(i, block.end)?;
                    if let Line::Entry(e) = &mut self.lines[i] {
                        // `key: ~` becomes a section: `key:`.
                        e.value.clear();
                    }
                    block = child;
                }
                None => return self.insert(block, &path[depth..], value),
            }
        }
        None
    }

    /// Entry `i` takes `value` on its own line; the lines of its old value go.
    fn replace_value(&mut self, i: usize, limit: usize, value: &Value) -> Option<()> {
        let (start, end) = self.value_lines(i, limit);
        let rendered = inline_value(value)?;
        if let Line::Entry(e) = &mut self.lines[i] {
            e.value = rendered;
        }
        self.lines.drain(start..end);
        Some(())
    }

    /// Insert `rest` (the path not found, and its value) at the end of `block`'s entries.
    fn insert(&mut self, block: Block, rest: &[String], value: &Value) -> Option<()> {
        let entries = self.entries(block)?;
        let indent = match entries.first() {
            Some(&first) => self.lines[first].indent()?,
            None => block.parent_indent.map_or(0, |p| p + self.unit),
        };
        // After the last entry's value, before the comments that lead into what follows.
        let at = match entries.last() {
            Some(&last) => self.value_lines(last, block.end).1,
            None => block.end,
        };
        let mut new = Vec::with_capacity(rest.len());
        for (depth, segment) in rest.iter().enumerate() {
            let last = depth + 1 == rest.len();
            new.push(Line::Entry(Entry {
                indent: indent + depth * self.unit,
                raw_key: key_text(segment),
                key: segment.clone(),
                value: if last {
                    inline_value(value)?
                } else {
                    String::new()
                },
                comment: String::new(),
            }));
        }
        self.lines.splice(at..at, new);
        Some(())
    }

    fn remove(&mut self, path: &[String]) -> Option<()> {
        let mut block = self.root();
        let mut parent = None;
        for (depth, segment) in path.iter().enumerate() {
            let Some(i) = self.find(block, segment)? else {
                // Nothing to remove.
                return Some(());
            };
            if depth + 1 == path.len() {
                let (_, end) = self.value_lines(i, block.end);
                self.lines.drain(i..end);
                // A section left without entries reads as null: keep it an empty mapping.
                if let Some(p) = parent
                    && self
                        .entries(Block {
                            end: block.end - (end - i),
                            ..block
                        })?
                        .is_empty()
                    && let Line::Entry(e) = &mut self.lines[p]
                {
                    e.value = "{}".into();
                }
                return Some(());
            }
            parent = Some(i);
            block = self.child_block(i, block.end)?;
        }
        Some(())
    }
}

/// Classify one line. `None` for what the editor does not handle.
fn classify(raw: &str, content_seen: bool) -> Option<Line> {
    let trimmed = raw.trim_start_matches(' ');
    if trimmed.starts_with('\t') {
        return None;
    }
    let indent = raw.len() - trimmed.len();
    if trimmed.trim().is_empty() || trimmed.starts_with('#') {
        return Some(Line::Trivia(raw.to_string()));
    }
    if indent == 0 && (trimmed.starts_with("---") || trimmed.starts_with("...")) {
        // One leading document marker is harmless; anything more is a second document.
        return (!content_seen && trimmed.trim_end() == "---")
            .then(|| Line::Trivia(raw.to_string()));
    }
    Some(match entry(trimmed, indent) {
        Some(e) => Line::Entry(e),
        None => Line::Other {
            indent,
            text: raw.to_string(),
        },
    })
}

/// `key: rest` at the start of `text`, if that is what it is.
fn entry(text: &str, indent: usize) -> Option<Entry> {
    let (key, raw_key, after) = match text.chars().next()? {
        '"' => {
            let end = closing_double_quote(text)?;
            let raw = &text[..=end];
            (
                serde_json::from_str::<String>(raw).ok()?,
                raw,
                &text[end + 1..],
            )
        }
        '\'' => {
            let end = closing_single_quote(text)?;
            let raw = &text[..=end];
            (
                raw[1..raw.len() - 1].replace("''", "'"),
                raw,
                &text[end + 1..],
            )
        }
        c if "-?[]{}&*!|>%@`,#".contains(c) => return None,
        _ => {
            let colon = plain_key_end(text)?;
            let raw = &text[..colon];
            (raw.trim_end().to_string(), raw.trim_end(), &text[colon..])
        }
    };
    let rest = after.strip_prefix(':')?;
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    let (value, comment) = split_comment(rest.trim_start_matches(' '), rest);
    Some(Entry {
        indent,
        raw_key: raw_key.to_string(),
        key,
        value: value.to_string(),
        comment: comment.to_string(),
    })
}

/// Where a plain key ends: the first `:` followed by a space or the end of the line (`None`
/// when a comment starts first: the line is a scalar, not an entry).
fn plain_key_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b':' if bytes.get(i + 1).is_none_or(|next| *next == b' ') => return Some(i),
            b'#' if i > 0 && bytes[i - 1] == b' ' => return None,
            _ => {}
        }
    }
    None
}

fn closing_double_quote(text: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in text.char_indices().skip(1) {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return Some(i),
            _ => escaped = false,
        }
    }
    None
}

fn closing_single_quote(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = 1;
    while i < bytes.len() {
        if bytes[i] == b'\'' {
            if bytes.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return Some(i);
        }
        i += 1;
    }
    None
}

/// `value` (the text after `key: `) split into the value and its trailing comment, the
/// comment keeping the spaces before it (taken from `rest`, the text after the colon).
fn split_comment<'a>(value: &'a str, rest: &'a str) -> (&'a str, &'a str) {
    let skip = match value.chars().next() {
        Some('"') => closing_double_quote(value).map_or(value.len(), |e| e + 1),
        Some('\'') => closing_single_quote(value).map_or(value.len(), |e| e + 1),
        _ => 0,
    };
    let offset = rest.len() - value.len();
    let hash = if value.starts_with('#') {
        Some(0)
    } else {
        value[skip..].find(" #").map(|p| p + skip + 1)
    };
    match hash {
        Some(h) => {
            let kept = value[..h].trim_end();
            // The comment keeps the spaces before it; with no value, all of them.
            let from = if kept.is_empty() {
                0
            } else {
                offset + kept.len()
            };
            (kept, &rest[from..])
        }
        None => (value.trim_end(), ""),
    }
}

fn is_item(text: &str) -> bool {
    let t = text.trim_start();
    t == "-" || t.starts_with("- ")
}

fn is_null(value: &str) -> bool {
    matches!(value, "~" | "null" | "Null" | "NULL")
}

/// The indentation step of the file: the smallest step from an entry to the entries under
/// it, else [`DEFAULT_INDENT`].
fn indent_unit(lines: &[Line]) -> usize {
    let mut unit = None;
    let mut last_entry_indent: Option<usize> = None;
    for line in lines {
        if let Line::Entry(e) = line {
            if let Some(prev) = last_entry_indent
                && e.indent > prev
            {
                let step = e.indent - prev;
                unit = Some(unit.map_or(step, |u: usize| u.min(step)));
            }
            last_entry_indent = Some(e.indent);
        }
    }
    unit.unwrap_or(DEFAULT_INDENT)
}

/// A key as written: plain when YAML reads it back as the same text, else double-quoted.
fn key_text(key: &str) -> String {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !key.starts_with('-')
    {
        key.to_string()
    } else {
        json_quoted(key)
    }
}

/// A value on one line: scalars as YAML would write them, collections in flow style.
fn inline_value(value: &Value) -> Option<String> {
    Some(match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string_text(s),
        Value::Array(items) => {
            let items: Option<Vec<String>> = items.iter().map(inline_value).collect();
            format!("[{}]", items?.join(", "))
        }
        Value::Object(map) => {
            let entries: Option<Vec<String>> = map
                .iter()
                .map(|(k, v)| Some(format!("{}: {}", key_text(k), inline_value(v)?)))
                .collect();
            format!("{{{}}}", entries?.join(", "))
        }
    })
}

/// A string plain when it reads back as itself (and holds nothing flow syntax would take),
/// else double-quoted.
fn string_text(s: &str) -> String {
    let plain_safe = !s.is_empty()
        && !s.contains([',', '[', ']', '{', '}', '#', '"', '\''])
        && !s.contains(": ")
        && s.trim() == s
        && yaml::parse(&format!("k: {s}")).ok() == Some(serde_json::json!({ "k": s }));
    if plain_safe {
        s.to_string()
    } else {
        json_quoted(s)
    }
}

fn json_quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{}\"", s.escape_default()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(key: &str) -> Vec<String> {
        key.split('.').map(str::to_string).collect()
    }

    fn set(text: &str, key: &str, value: Value) -> String {
        let out = edit(text, &path(key), Some(&value)).expect("editable");
        // The edit means what it says: the rest of the file reads as before.
        let mut expected = yaml::parse(text).expect("valid input");
        if expected.is_null() {
            expected = json!({});
        }
        let Value::Object(ref mut map) = expected else {
            panic!("a mapping")
        };
        crate::tree::replace(map, &path(key), Some(value));
        assert_eq!(yaml::parse(&out).ok(), Some(expected), "{out}");
        out
    }

    const FILE: &str = "\
# deepsolve settings
llm:
  # the local server
  base_url: http://127.0.0.1:11434/v1   # ollama
  model: qwen3

# knobs
solve:
  max_rounds: 20 # enough
";

    #[test]
    fn a_replaced_value_keeps_every_comment_and_the_key_order() {
        let out = set(FILE, "solve.max_rounds", json!(30));
        assert_eq!(out, FILE.replace("max_rounds: 20 #", "max_rounds: 30 #"));
        let out = set(FILE, "llm.base_url", json!("http://gpu:8000/v1"));
        assert_eq!(
            out,
            FILE.replace("http://127.0.0.1:11434/v1", "http://gpu:8000/v1")
        );
    }

    #[test]
    fn a_new_key_goes_at_the_end_of_its_section() {
        let out = set(FILE, "llm.context_window", json!(32768));
        assert_eq!(
            out,
            FILE.replace(
                "  model: qwen3\n",
                "  model: qwen3\n  context_window: 32768\n"
            )
        );
        let out = set(FILE, "solve.fold", json!(false));
        assert!(
            out.ends_with("  max_rounds: 20 # enough\n  fold: false\n"),
            "{out}"
        );
    }

    #[test]
    fn new_sections_nest_with_the_files_indentation() {
        let four = "llm:\n    model: x\n";
        let out = set(four, "tools.reason.max_tokens", json!(4000));
        assert_eq!(
            out,
            "llm:\n    model: x\ntools:\n    reason:\n        max_tokens: 4000\n"
        );
        assert_eq!(
            set("", "solve.max_rounds", json!(7)),
            "solve:\n  max_rounds: 7\n"
        );
        assert_eq!(
            set("# only a comment\n", "llm.model", json!("m")),
            "# only a comment\nllm:\n  model: m\n"
        );
    }

    #[test]
    fn quoting_is_kept_and_added_where_needed() {
        let quoted = "llm:\n  \"model\": 'old'  # was\n";
        let out = set(quoted, "llm.model", json!("1.10"));
        assert_eq!(out, "llm:\n  \"model\": \"1.10\"  # was\n");
        let out = set(quoted, "llm.model", json!("gpt-4o"));
        assert_eq!(out, "llm:\n  \"model\": gpt-4o  # was\n");
        // Values YAML would read as something else are quoted.
        for tricky in ["no", "true", "1e3", "a: b", "x #y", " lead", "", "~"] {
            set(quoted, "llm.model", json!(tricky));
        }
        let hashed = "llm:\n  model: \"a # b\" # real\n";
        let out = set(hashed, "llm.model", json!("c"));
        assert_eq!(out, "llm:\n  model: c # real\n");
    }

    #[test]
    fn collections_replace_block_values_in_flow_style() {
        let listed = "tools:\n  enabled:\n  - reason\n  - web_search   # opt-in\n  # after\nsolve:\n  fold: true\n";
        let out = set(listed, "tools.enabled", json!(["reason"]));
        assert_eq!(
            out,
            "tools:\n  enabled: [reason]\n  # after\nsolve:\n  fold: true\n"
        );
        let out = set(
            "llm:\n  extra_body:\n    thinking:\n      type: enabled\n",
            "llm.extra_body",
            json!({"thinking": {"type": "disabled"}}),
        );
        assert_eq!(out, "llm:\n  extra_body: {thinking: {type: disabled}}\n");
    }

    #[test]
    fn block_scalars_and_deeper_lines_stay_whole() {
        let text =
            "llm:\n  extra_body:\n    note: |\n      # not a comment\n      text\n  model: m\n";
        let out = set(text, "llm.model", json!("m2"));
        assert_eq!(out, text.replace("model: m", "model: m2"));
        set(text, "llm.base_url", json!("http://h/v1"));
    }

    #[test]
    fn a_null_section_becomes_a_mapping() {
        let out = set("solve: ~ # later\n", "solve.max_rounds", json!(5));
        assert_eq!(out, "solve: # later\n  max_rounds: 5\n");
        let out = set("solve:\n", "solve.max_rounds", json!(5));
        assert_eq!(out, "solve:\n  max_rounds: 5\n");
    }

    #[test]
    fn removing_keeps_the_rest_and_leaves_an_empty_section_a_mapping() {
        let out = edit(FILE, &path("llm.model"), None).unwrap();
        assert_eq!(out, FILE.replace("  model: qwen3\n", ""));
        let out = edit(FILE, &path("solve.max_rounds"), None).unwrap();
        assert!(out.ends_with("# knobs\nsolve: {}\n"), "{out}");
        let out = edit(FILE, &path("solve.fold"), None).unwrap();
        assert_eq!(out, FILE);
    }

    #[test]
    fn crlf_files_stay_crlf() {
        let text = "solve:\r\n  max_rounds: 3\r\n";
        let out = edit(text, &path("solve.max_rounds"), Some(&json!(4))).unwrap();
        assert_eq!(out, "solve:\r\n  max_rounds: 4\r\n");
    }

    #[test]
    fn shapes_it_does_not_handle_are_refused() {
        for text in [
            "llm: {model: x}\n",
            "llm: &base\n  model: x\n",
            "llm:\n\tmodel: x\n",
            "a: 1\n---\nllm:\n  model: x\n",
            "? llm\n: x\n",
            "llm:\n- a\n",
        ] {
            assert_eq!(
                edit(text, &path("llm.model"), Some(&json!("y"))),
                None,
                "{text}"
            );
        }
    }
}
