//! LaTeX normalisation: the spellings of one answer made one string (`\dfrac` → `\frac`,
//! `\left`/`\right`, degrees, `\text{}` units, `$`, spacing, `x =`), and an answer's shape
//! (a tuple or interval, a set, an unordered list, a union of intervals, or one atom).

use std::sync::LazyLock;

use regex::Regex;

use super::extract::braced;

/// An answer normalised, and whether it carried a percent sign.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Normal {
    pub text: String,
    pub percent: bool,
}

fn re(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

static LEFT_RIGHT: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"\\(?:left|right|bigl|bigr|Bigl|Bigr|big|Big)([^a-zA-Z]|$)"));
static TRAILING_TEXT: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"^(.*?\S)\s*\\(?:text|mbox|mathrm)\s*\{[^{}]*\}\s*$"));
static TEXT_CMD: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(r"\\(?:text|textbf|textit|mbox|mathrm|mathbf|mathit|operatorname|rm)\s*\{([^{}]*)\}")
});
static SHORT_LHS: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"^(?:[a-zA-Z](?:_\{?[a-zA-Z0-9]+\}?)?|\\[a-zA-Z]+)(?:=|\\in)([^=].*)$"));
static SQRT_BARE: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"\\sqrt([0-9a-zA-Z])"));
static FRAC_BARE: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"\\frac([0-9a-zA-Z])([0-9a-zA-Z])"));
static FRAC_HALF_BARE: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"\\frac([0-9a-zA-Z])\{"));

fn replace_all(re: &LazyLock<Option<Regex>>, text: &str, with: &str) -> String {
    match re.as_ref() {
        Some(re) => re.replace_all(text, with).into_owned(),
        None => text.to_string(),
    }
}

/// Normalise an answer for comparison. Idempotent.
pub(crate) fn normalize(raw: &str) -> Normal {
    let mut s = raw.trim().to_string();
    s = unwrap_math_delimiters(&s);
    if let Some(inner) = s
        .strip_prefix("\\boxed{")
        .and_then(braced)
        .filter(|inner| inner.len() + "\\boxed{}".len() == s.len())
    {
        s = inner;
    }
    for (from, to) in [
        ("\\displaystyle", ""),
        ("\\dfrac", "\\frac"),
        ("\\tfrac", "\\frac"),
        ("\\!", ""),
        ("\\,", ""),
        ("\\;", ""),
        ("\\:", ""),
        ("\\qquad", " "),
        ("\\quad", " "),
        ("\\ ", " "),
        ("~", " "),
        ("{,}", ""),
        ("\\leq", "\\le"),
        ("\\geq", "\\ge"),
        ("\\neq", "\\ne"),
        ("≤", "\\le"),
        ("≥", "\\ge"),
        ("≠", "\\ne"),
        ("−", "-"),
        ("×", "\\times"),
        ("÷", "\\div"),
        ("π", "\\pi"),
        ("∞", "\\infty"),
        ("√", "\\sqrt"),
        ("\\emptyset", "\\{\\}"),
        ("\\varnothing", "\\{\\}"),
    ] {
        s = s.replace(from, to);
    }
    s = replace_all(&LEFT_RIGHT, &s, "$1");
    // `\left.` / `\right.` leave a lone dot at an edge.
    let s_degrees = strip_degrees(&s);
    s = s_degrees;
    let percent = s.contains('%');
    s = s.replace("\\%", "").replace('%', "");
    // A trailing `\text{ cm}` is a unit when something precedes it.
    if let Some(re) = TRAILING_TEXT.as_ref()
        && let Some(caps) = re.captures(&s)
        && let Some(m) = caps.get(1)
    {
        s = m.as_str().to_string();
    }
    s = replace_all(&TEXT_CMD, &s, "$1");
    s = s.replace("infinity", "\\infty");
    s = s.trim().trim_end_matches(['.', '。']).to_string();
    s.retain(|c| !c.is_whitespace());
    s = replace_all(&SQRT_BARE, &s, "\\sqrt{$1}");
    s = replace_all(&FRAC_BARE, &s, "\\frac{$1}{$2}");
    s = replace_all(&FRAC_HALF_BARE, &s, "\\frac{$1}{");
    if let Some(re) = SHORT_LHS.as_ref()
        && let Some(caps) = re.captures(&s)
        && let Some(m) = caps.get(1)
    {
        s = m.as_str().to_string();
    }
    if s.starts_with('.') {
        s.insert(0, '0');
    }
    Normal { text: s, percent }
}

fn unwrap_math_delimiters(s: &str) -> String {
    let mut s = s.trim().to_string();
    loop {
        let t = s.trim();
        let inner = t
            .strip_prefix("$$")
            .and_then(|x| x.strip_suffix("$$"))
            .or_else(|| t.strip_prefix('$').and_then(|x| x.strip_suffix('$')))
            .or_else(|| t.strip_prefix("\\(").and_then(|x| x.strip_suffix("\\)")))
            .or_else(|| t.strip_prefix("\\[").and_then(|x| x.strip_suffix("\\]")));
        match inner {
            Some(inner) => s = inner.trim().to_string(),
            None => break,
        }
    }
    // A `$` left inside (`\$5`, `5$`) is a currency sign or a stray delimiter.
    s.replace("\\$", "").replace('$', "")
}

fn strip_degrees(s: &str) -> String {
    let mut s = s.to_string();
    for deg in [
        "^{\\circ}",
        "^\\circ",
        "^{°}",
        "°",
        "\\degree",
        "\\circ",
        "degrees",
        "degree",
        "度",
    ] {
        s = s.replace(deg, "");
    }
    s
}

/// The shape of a normalised answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Shape {
    Atom(String),
    /// `(a, b)`, `[a, b)`: order and brackets matter (tuples, points, intervals).
    Sequence {
        open: char,
        close: char,
        items: Vec<String>,
    },
    /// `\{a, b\}`: order does not matter.
    Set(Vec<String>),
    /// `a, b`: a bare list, such as the roots of an equation; order does not matter.
    List(Vec<String>),
    /// `A \cup B`: order does not matter.
    Union(Vec<String>),
}

pub(crate) fn shape(text: &str) -> Shape {
    let union = split_top(text, "\\cup");
    if union.len() > 1 {
        return Shape::Union(union);
    }
    if let Some(inner) = text
        .strip_prefix("\\{")
        .and_then(|t| t.strip_suffix("\\}"))
        .filter(|inner| encloses(inner))
    {
        let items = split_top(inner, ",");
        return Shape::Set(items.into_iter().filter(|i| !i.is_empty()).collect());
    }
    let mut chars = text.chars();
    if let (Some(open @ ('(' | '[')), Some(close @ (')' | ']'))) =
        (chars.next(), text.chars().last())
    {
        let inner = &text[1..text.len() - 1];
        let items = split_top(inner, ",");
        if items.len() > 1 && encloses(inner) {
            return Shape::Sequence { open, close, items };
        }
    }
    let items = split_top(text, ",");
    if items.len() > 1 {
        return Shape::List(items);
    }
    Shape::Atom(text.to_string())
}

/// Whether brackets inside `inner` balance (so the outer pair encloses the whole).
fn encloses(inner: &str) -> bool {
    let mut depth: i32 = 0;
    for c in inner.chars() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => {}
        }
    }
    depth == 0
}

/// Split at `sep` where no bracket is open (an interval's `)` and `[` both count).
fn split_top(text: &str, sep: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth: i32 = 0;
    let mut start = 0;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if bytes[i..].starts_with(b"\\{") {
            depth += 1;
            i += 2;
            continue;
        }
        if bytes[i..].starts_with(b"\\}") {
            depth -= 1;
            i += 2;
            continue;
        }
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            _ => {}
        }
        // `sep` starts with an ASCII byte, so `i` is a character boundary when it matches.
        if depth == 0 && bytes[i..].starts_with(sep.as_bytes()) {
            parts.push(text.get(start..i).unwrap_or_default().to_string());
            i += sep.len();
            start = i;
            continue;
        }
        i += 1;
    }
    parts.push(text.get(start..).unwrap_or_default().to_string());
    parts
}
