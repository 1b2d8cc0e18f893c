//! The final answer in a model's output: the last `\boxed{}`, else an "the answer is" line,
//! else (for an answer that states its result first) the first line, else the last number.
//! In an answer that states its result first, an "answer is" line that gives no value is a
//! remark, and a first line that gives one wins over it.

use std::sync::LazyLock;

pub(crate) use deepsolve_core::boxed::braced;
pub use deepsolve_core::boxed::last_boxed;
use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where the extracted answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Extraction {
    /// The last `\boxed{…}` (or `\fbox{…}`), braces matched.
    Boxed,
    /// The last "the answer is …", "Answer: …", "#### …", "答案是…" line.
    AnswerIs,
    /// The first line of an answer that states its result first.
    FirstLine,
    /// The last number of the output: the fallback.
    LastNumber,
}

impl Extraction {
    pub fn as_str(self) -> &'static str {
        match self {
            Extraction::Boxed => "boxed",
            Extraction::AnswerIs => "answer_is",
            Extraction::FirstLine => "first_line",
            Extraction::LastNumber => "last_number",
        }
    }
}

/// How an output is laid out, which decides whether its first line is an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerStyle {
    /// Reasoning first, the answer at the end (a plain chain-of-thought completion).
    #[default]
    Reasoned,
    /// The result first, then the explanation (a deepsolve answer).
    ResultFirst,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extracted {
    pub text: String,
    pub how: Extraction,
}

/// The longest first line taken as an answer.
const FIRST_LINE_MAX_CHARS: usize = 120;

pub fn extract(output: &str, style: AnswerStyle) -> Option<Extracted> {
    let body = after_thinking(output);
    let found = |text: String, how| Some(Extracted { text, how });
    if let Some(boxed) = last_boxed(body).filter(|b| !b.trim().is_empty()) {
        return found(boxed.trim().to_string(), Extraction::Boxed);
    }
    let stated = answer_is(body);
    let first = (style == AnswerStyle::ResultFirst)
        .then(|| first_line(body))
        .flatten();
    // A stated answer that gives no value ("…the final answer is clearly stated as the result
    // of the computation", the 1.5B model) is a remark when the first line gives one.
    match (stated, first) {
        (Some(stated), Some(line)) if !gives_a_value(&stated) && gives_a_value(&line) => {
            found(line, Extraction::FirstLine)
        }
        (Some(stated), _) => found(stated, Extraction::AnswerIs),
        (None, Some(line)) => found(line, Extraction::FirstLine),
        (None, None) => last_number(body).and_then(|n| found(n, Extraction::LastNumber)),
    }
}

/// What follows a closed `<think>…</think>` block (reasoning a server left in the text).
fn after_thinking(output: &str) -> &str {
    match output.rfind("</think>") {
        Some(at) => &output[at + "</think>".len()..],
        None => output,
    }
}

static ANSWER_IS: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?im)(?:(?:final\s+)?answer\s*(?:is|:|=)|####|答案\s*(?:是|为|：|:)|答\s*[:：])[\s:：]*(.+)$",
    )
    .ok()
});

/// The last stated answer that gives a value, else the last stated answer, cut at the end of
/// its sentence. A sentence about the answer is not one ("The final answer is: 7 DVDs. This
/// answer is derived from the plan…", the 1.5B model), nor is a remark on it that gives no
/// value ("…is 428 points. This answer is clear and concise…": the answer is found elsewhere).
fn answer_is(text: &str) -> Option<String> {
    let re = ANSWER_IS.as_ref()?;
    let stated: Vec<String> = (re.captures_iter(text))
        .filter_map(|caps| {
            let said = statement(re, caps.get(1)?.as_str())?;
            let before = &text[..caps.get(0)?.start()];
            (gives_a_value(&said) || !remarks_on_the_answer(before)).then_some(said)
        })
        .collect();
    let valued = stated.iter().rev().find(|s| gives_a_value(s));
    valued.or(stated.last()).cloned()
}

/// The words before "answer is" point at an answer already given ("This answer is…",
/// "这个答案是…"): what follows is a remark on it.
fn remarks_on_the_answer(before: &str) -> bool {
    let before = before.trim_end();
    let start = (before.char_indices().rev())
        .take_while(|(_, c)| c.is_alphabetic())
        .last()
        .map_or(before.len(), |(i, _)| i);
    let word = before[start..].to_lowercase();
    matches!(
        word.as_str(),
        "this" | "that" | "which" | "my" | "our" | "your" | "above"
    ) || ["这个", "那个", "这", "此", "该"]
        .iter()
        .any(|d| word.ends_with(d))
}

/// What one "the answer is" says, cut at the end of its sentence: the innermost statement
/// ("Final Answer: The final answer is $5$.") that gives a value, else the innermost. A
/// statement about the answer may follow on the same line ("…is 7. This answer is derived…").
fn statement(re: &Regex, rest: &str) -> Option<String> {
    let mut levels = Vec::new();
    let mut rest = Some(rest);
    while let Some(text) = rest {
        levels.push(cut_sentence(text));
        rest = re.captures(text).and_then(|c| c.get(1)).map(|m| m.as_str());
    }
    let levels: Vec<String> = levels.into_iter().filter(|l| !l.is_empty()).collect();
    let valued = levels.iter().rev().find(|l| gives_a_value(l));
    valued.or(levels.last()).cloned()
}

/// A statement with a number or mathematics in it.
fn gives_a_value(statement: &str) -> bool {
    statement
        .chars()
        .any(|c| c.is_ascii_digit() || "\\=".contains(c) || CHINESE_NUMERALS.contains(c))
}

const CHINESE_NUMERALS: &str = "零一二三四五六七八九十百千万";

/// `$x$. I hope it is correct.` → `x`; `18 dollars.` → `18 dollars`.
fn cut_sentence(rest: &str) -> String {
    let rest = strip_markup(rest);
    let rest = rest.trim();
    if let Some(math) = rest.strip_prefix('$') {
        let math = math.trim_start_matches('$');
        if let Some(end) = math.find('$') {
            return math[..end].trim().to_string();
        }
    }
    let mut end = rest.len();
    for pat in [". ", "。", "；", "; "] {
        if let Some(i) = rest.find(pat) {
            end = end.min(i);
        }
    }
    rest[..end]
        .trim()
        .trim_end_matches(['.', '。'])
        .trim()
        .to_string()
}

/// Markdown emphasis and a leading label removed from a line.
fn strip_markup(line: &str) -> String {
    let line = line.replace("**", "").replace("__", "");
    let line = line.trim().trim_start_matches('#').trim();
    line.to_string()
}

static LABEL: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:final\s+answer|answer|result|结果|答案|答)\s*[:：]\s*").ok()
});

/// The first line, when it states something: a heading ("### Step 6: Write the final
/// answer"), a code fence or a line that introduces what follows ("we need to follow these
/// steps:") is not a result, and the answer did not state its result first.
fn first_line(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    if line.starts_with('#') || line.starts_with("```") {
        return None;
    }
    let line = strip_markup(line);
    if line.ends_with([':', '：']) {
        return None;
    }
    let line = match LABEL.as_ref() {
        Some(re) => re.replace(&line, "").into_owned(),
        None => line,
    };
    let line = line.trim().trim_end_matches(['.', '。']).trim();
    let line = line
        .strip_prefix("$$")
        .and_then(|l| l.strip_suffix("$$"))
        .or_else(|| line.strip_prefix('$').and_then(|l| l.strip_suffix('$')))
        .unwrap_or(line)
        .trim();
    (!line.is_empty() && line.chars().count() <= FIRST_LINE_MAX_CHARS).then(|| line.to_string())
}

static NUMBER: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+)?|-?\.\d+").ok()
});

/// The last number written in `text`, separators removed. A number joined to the word after
/// it ("his 5-day work week", "a 24-hour shift") describes that word rather than counting
/// anything: the last number standing alone is taken ("Tim deals with 120 calls during his
/// 5-day work week" → 120), and a joined one only when no number stands alone.
pub fn last_number(text: &str) -> Option<String> {
    let re = NUMBER.as_ref()?;
    let numbers: Vec<_> = re.find_iter(text).collect();
    let modifies = |m: &regex::Match| {
        let mut after = text[m.end()..].chars();
        after.next() == Some('-') && after.next().is_some_and(char::is_alphabetic)
    };
    let m = (numbers.iter().rev().find(|m| !modifies(m))).or(numbers.last())?;
    Some(m.as_str().replace([',', ' '], ""))
}
