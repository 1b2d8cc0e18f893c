//! Numbers as people write them: separators (`1,234`, `1 234`, `1{,}234`), currency signs,
//! units (`18 dollars`, `5 cm^2`, `12元`), percentages, fractions (`3/4`, `\frac{3}{4}`, mixed
//! `2\frac12`), scientific notation; and the tolerance two of them are compared with.

use std::sync::LazyLock;

use regex::Regex;

/// A number read from an answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Number {
    pub value: f64,
    /// Written as an integer (no decimal point, no fraction): compared exactly.
    pub integer: bool,
    pub percent: bool,
}

/// Relative tolerance for numbers that are not both integers (the Qwen2.5-Math grader's).
pub const RELATIVE_TOLERANCE: f64 = 1e-4;

static UNIT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"^(?P<num>.*?[0-9}])(?:\s*\\(?:text|mbox|mathrm)\{[^{}]*\}(?:\^\{?[23]\}?)?|\s+[A-Za-z][A-Za-z./]*(?:\^\{?[23]\}?|[²³])?(?:\s+[A-Za-z][A-Za-z./]*)*|[A-Za-z]{2,}[A-Za-z./]*(?:\^\{?[23]\}?|[²³])?|\s*\p{Han}+)$",
    )
    .ok()
});
static PLAIN: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"^[+-]?(?:\d{1,3}(?:(?:,|\\,|\{,\}| )\d{3})+|\d+)?(?:\.\d+)?(?:[eE][+-]?\d+)?$")
        .ok()
});
static SCIENTIFIC: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"^([+-]?\d+(?:\.\d+)?)\s*(?:\\times|\\cdot|\*|x)\s*10\^\{?([+-]?\d+)\}?$").ok()
});
static FRACTION: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"^([+-])?(\d+)?\s*(?:\\frac\{\s*([+-]?\d+(?:\.\d+)?)\s*\}\{\s*(\d+(?:\.\d+)?)\s*\}|\\frac(\d)(\d)|([+-]?\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?))$",
    )
    .ok()
});

/// Read `raw` (an answer, not yet normalised) as a number, or `None` when it is not one.
pub(crate) fn parse(raw: &str) -> Option<Number> {
    let mut s = raw.trim().to_string();
    for wrap in ["$$", "$", "\\(", "\\)", "\\[", "\\]"] {
        if let Some(inner) = s.strip_prefix(wrap) {
            s = inner.to_string();
        }
    }
    s = s
        .replace("\\$", "")
        .replace("\\!", "")
        .replace("\\dfrac", "\\frac");
    s = s.replace("\\tfrac", "\\frac").replace('−', "-");
    let s = s.trim().trim_end_matches(['.', '。']).trim();
    let s = s.trim_end_matches('$').trim();
    let mut s = strip_currency(s).trim().to_string();
    let mut percent = false;
    for sign in ["\\%", "%", "percent", "％"] {
        if let Some(rest) = s.strip_suffix(sign) {
            s = rest.trim().to_string();
            percent = true;
            break;
        }
    }
    if let Some(n) = number_core(&s) {
        return Some(Number { percent, ..n });
    }
    // A unit after the number: try without it.
    let caps = UNIT.as_ref()?.captures(&s)?;
    let num = caps.name("num")?.as_str().trim();
    let num = strip_currency(num);
    let (num, pct) = match num.strip_suffix("\\%").or_else(|| num.strip_suffix('%')) {
        Some(n) => (n.trim(), true),
        None => (num.as_str(), percent),
    };
    number_core(num).map(|n| Number { percent: pct, ..n })
}

/// `$5`, `¥5`, `-$5` → `5`, `5`, `-5`.
fn strip_currency(s: &str) -> String {
    let s = s.trim();
    let (sign, body) = match s.strip_prefix('-') {
        Some(rest) => ("-", rest.trim_start()),
        None => ("", s),
    };
    let mut body = body;
    for currency in ["US$", "USD", "RMB", "$", "¥", "￥", "€", "£", "Rs.", "Rs"] {
        if let Some(rest) = body.strip_prefix(currency) {
            body = rest.trim_start();
        }
    }
    format!("{sign}{body}")
}

/// A bare number: plain, scientific or a fraction.
fn number_core(s: &str) -> Option<Number> {
    let s = s.trim();
    if s.is_empty() || s == "-" || s == "+" || s == "." {
        return None;
    }
    if PLAIN.as_ref()?.is_match(s) {
        let cleaned: String = s
            .replace("\\,", "")
            .replace("{,}", "")
            .chars()
            .filter(|c| *c != ',' && *c != ' ')
            .collect();
        let value: f64 = cleaned.parse().ok()?;
        let integer = !cleaned.contains(['.', 'e', 'E']);
        return value.is_finite().then_some(Number {
            value,
            integer,
            percent: false,
        });
    }
    if let Some(caps) = SCIENTIFIC.as_ref()?.captures(s) {
        let mantissa: f64 = caps.get(1)?.as_str().parse().ok()?;
        let exponent: i32 = caps.get(2)?.as_str().parse().ok()?;
        let value = mantissa * 10f64.powi(exponent);
        return value.is_finite().then_some(Number {
            value,
            integer: false,
            percent: false,
        });
    }
    fraction(s)
}

fn fraction(s: &str) -> Option<Number> {
    let caps = FRACTION.as_ref()?.captures(s)?;
    let negative = caps.get(1).is_some_and(|m| m.as_str() == "-");
    let whole: f64 = match caps.get(2) {
        Some(m) => m.as_str().parse().ok()?,
        None => 0.0,
    };
    let (num, den) = [(3, 4), (5, 6), (7, 8)]
        .iter()
        .find_map(|&(a, b)| Some((caps.get(a)?.as_str(), caps.get(b)?.as_str())))?;
    let num: f64 = num.parse().ok()?;
    let den: f64 = den.parse().ok()?;
    if den == 0.0 {
        return None;
    }
    let magnitude = if num < 0.0 {
        -(whole + num.abs() / den)
    } else {
        whole + num / den
    };
    let value = if negative { -magnitude } else { magnitude };
    value.is_finite().then_some(Number {
        value,
        integer: false,
        percent: false,
    })
}

/// Whether two numbers are the same answer: integers exactly, others within
/// [`RELATIVE_TOLERANCE`]; a percentage on one side also matches its fraction (`45%` = `0.45`)
/// or its bare figure (`45%` = `45`).
pub(crate) fn same(expected: Number, answer: Number) -> bool {
    if expected.percent == answer.percent {
        return close(expected, answer);
    }
    let (pct, other) = if expected.percent {
        (expected, answer)
    } else {
        (answer, expected)
    };
    close(pct, other)
        || close(
            Number {
                value: pct.value / 100.0,
                integer: false,
                ..pct
            },
            other,
        )
}

fn close(a: Number, b: Number) -> bool {
    if a.integer && b.integer {
        return a.value == b.value;
    }
    values_close(a.value, b.value)
}

pub(crate) fn values_close(a: f64, b: f64) -> bool {
    let scale = a.abs().max(b.abs());
    (a - b).abs() <= RELATIVE_TOLERANCE * scale || (a - b).abs() <= 1e-9
}
