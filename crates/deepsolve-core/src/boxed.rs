//! A working's result as it writes it: the content of its last `\boxed{…}`. The engine
//! compares a new problem's drafts by it (`solve.drafts`); `deepsolve-eval` grades by it.

/// The content of the last `\boxed{…}` / `\fbox{…}` with nested braces, or `\boxed 5`.
pub fn last_boxed(text: &str) -> Option<String> {
    let at = ["\\boxed", "\\fbox"]
        .iter()
        .filter_map(|cmd| text.rfind(cmd).map(|i| (i, cmd.len())))
        .max_by_key(|(i, _)| *i)?;
    let rest = &text[at.0 + at.1..];
    let trimmed = rest.trim_start();
    if let Some(inner) = trimmed.strip_prefix('{') {
        return braced(inner);
    }
    // `\boxed 5`: up to the next space or `$`.
    let token: String = trimmed
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != '$')
        .collect();
    (!token.is_empty()).then_some(token)
}

/// The text up to the `}` that closes an already-opened `{`.
pub fn braced(inner: &str) -> Option<String> {
    let mut depth = 1usize;
    let mut escaped = false;
    for (i, c) in inner.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(inner[..i].to_string());
                }
            }
            _ => {}
        }
    }
    None
}

/// What two workings' boxed results are compared by: a box holding exactly one number (with
/// or beside a currency sign, thousands separators, a percent sign or a unit in words) is
/// that number, written one way (`\$1,200.00` and `1200 dollars` are both `1200`); anything
/// else is its text without spaces or `$`. Two spellings of one expression (`\frac12` and
/// `0.5`) stay two results: the workings then count as differing, which costs a draft, never
/// a wrong agreement.
pub fn result_key(boxed: &str) -> String {
    let plain: String = boxed
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '$')
        .collect();
    match only_number(&plain) {
        Some(number) => number,
        None => plain,
    }
}

/// The one number of `text`, written canonically, when it holds exactly one and nothing else
/// but letters, `\`, `{}`, `%` and a full stop.
fn only_number(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut number: Option<String> = None;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if starts_number(&chars[i..]) {
            if number.is_some() {
                return None;
            }
            let start = i;
            i += 1;
            while i < chars.len()
                && (chars[i].is_ascii_digit() || chars[i] == '.' || separator(&chars, i))
            {
                i += 1;
            }
            let digits: String = chars[start..i].iter().filter(|c| **c != ',').collect();
            number = Some(canonical(&digits)?);
            continue;
        }
        // A point not before a digit ends a sentence: `5 hours.`
        if !(c.is_alphabetic() || matches!(c, '\\' | '{' | '}' | '%' | '.')) {
            return None;
        }
        i += 1;
    }
    number
}

/// A digit, or a sign or point right before one (`-3`, `.75`, `-.5`).
fn starts_number(chars: &[char]) -> bool {
    let unsigned = match chars.first() {
        Some('-') => &chars[1..],
        _ => chars,
    };
    match unsigned {
        [d, ..] if d.is_ascii_digit() => true,
        ['.', d, ..] => d.is_ascii_digit(),
        _ => false,
    }
}

/// A `,` between a digit and three more digits: a thousands separator.
fn separator(chars: &[char], i: usize) -> bool {
    chars[i] == ','
        && i > 0
        && chars[i - 1].is_ascii_digit()
        && chars.len() >= i + 4
        && chars[i + 1..i + 4].iter().all(char::is_ascii_digit)
        && !chars.get(i + 4).is_some_and(char::is_ascii_digit)
}

/// `12.50` → `12.5`, `7.0` → `7`, `007` → `7`; `None` for what is not a number (`1.2.3`).
fn canonical(digits: &str) -> Option<String> {
    let (sign, unsigned) = match digits.trim_end_matches('.').strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", digits),
    };
    let (whole, fraction) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    if fraction.contains('.') || whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let whole = whole.trim_start_matches('0');
    let fraction = fraction.trim_end_matches('0');
    let whole = if whole.is_empty() { "0" } else { whole };
    let sign = if whole == "0" && fraction.is_empty() {
        ""
    } else {
        sign
    };
    Some(match fraction {
        "" => format!("{sign}{whole}"),
        f => format!("{sign}{whole}.{f}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_box_with_nested_braces() {
        assert_eq!(
            last_boxed(r"\boxed{1} then \boxed{\frac{1}{2}}").as_deref(),
            Some(r"\frac{1}{2}")
        );
        assert_eq!(last_boxed(r"so \boxed 5 $").as_deref(), Some("5"));
        assert_eq!(last_boxed(r"\boxed{unclosed"), None);
        assert_eq!(last_boxed("no box"), None);
    }

    #[test]
    fn one_number_is_written_one_way() {
        for same in [
            r"\$1,200.00",
            "1200",
            "1200 dollars",
            r"1,200\text{ dollars}",
            "1200.",
        ] {
            assert_eq!(result_key(same), "1200", "{same}");
        }
        assert_eq!(result_key("-0.50"), "-0.5");
        assert_eq!(result_key("-0"), "0");
        assert_eq!(result_key(r"25\%"), "25");
        assert_eq!(result_key("007"), "7");
        assert_eq!(result_key(".75"), "0.75");
        assert_eq!(result_key("-.5"), "-0.5");
        assert_ne!(result_key(".75"), result_key("75"));
        assert_eq!(result_key("5 hours."), "5");
    }

    #[test]
    fn anything_else_is_its_text_without_spaces() {
        assert_eq!(result_key(r"\frac{1}{2}"), r"\frac{1}{2}");
        assert_eq!(result_key("1, 2"), "1,2");
        assert_eq!(result_key("3 and 4"), "3and4");
        assert_eq!(result_key("x = 5"), "x=5");
        assert_ne!(result_key("12"), result_key("1,2"));
        assert_ne!(result_key("1.2.3"), result_key("1.23"));
    }
}
