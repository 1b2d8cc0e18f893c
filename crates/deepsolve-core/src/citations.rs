//! A turn's citation sources: numbered once per turn as tools find them, so `[n]` means the
//! same passage in every tool result and in the answer, across a resume too; and the sources
//! an answer cites.

use std::sync::Mutex;

use deepsolve_protocol::Source;

/// The sources numbered in one turn. Shared by every tool call of the turn (tools run in
/// parallel, hence the lock); restored from the last checkpoint when a turn resumes.
#[derive(Debug, Default)]
pub struct Citations {
    sources: Mutex<Vec<Source>>,
}

/// Two sources are the same passage: the same chunk; else, without chunks, the same page of
/// the same document; else the same URL. A source with none of these is never the same.
fn same_passage(a: &Source, b: &Source) -> bool {
    match (&a.chunk_id, &b.chunk_id) {
        (Some(x), Some(y)) => return x == y,
        (None, None) => {}
        _ => return false,
    }
    match (&a.document_id, &b.document_id) {
        (Some(x), Some(y)) => return x == y && a.page == b.page,
        (None, None) => {}
        _ => return false,
    }
    matches!((&a.url, &b.url), (Some(x), Some(y)) if x == y)
}

impl Citations {
    /// The numbering so far (empty for a fresh turn; a checkpoint's `sources` on resume).
    pub fn new(restored: Vec<Source>) -> Self {
        Citations {
            sources: Mutex::new(restored),
        }
    }

    /// Number `source`: the next number, or the one the same passage already has. Returns it
    /// as registered, with its `n`.
    pub fn register(&self, mut source: Source) -> Source {
        let mut sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(known) = sources.iter().find(|s| same_passage(s, &source)) {
            return known.clone();
        }
        source.n = sources.iter().map(|s| s.n).max().unwrap_or(0) + 1;
        sources.push(source.clone());
        source
    }

    /// Every source numbered so far, in the order they were numbered.
    pub fn all(&self) -> Vec<Source> {
        self.sources
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// The sources `answer` cites: those whose `[n]` (also `[1, 3]`, `[1][2]`, `[1–3]`, and the
/// full-width `【1】`) appears outside code spans, code blocks and maths. Unknown numbers are
/// ignored; each source once, ordered by `n`.
pub fn cited(answer: &str, sources: &[Source]) -> Vec<Source> {
    let prose = prose(answer);
    let ranges = citation_ranges(&prose);
    let mut out: Vec<Source> = sources
        .iter()
        .filter(|s| ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&s.n)))
        .cloned()
        .collect();
    out.sort_by_key(|s| s.n);
    out.dedup_by_key(|s| s.n);
    out
}

/// The answer without its fenced code blocks, code spans and maths (each replaced by a
/// space): a `[1]` there is an index, an interval or code, not a citation.
fn prose(answer: &str) -> String {
    let mut out = String::with_capacity(answer.len());
    let mut fence: Option<(char, usize)> = None;
    let mut display_math = false;
    for line in answer.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if let Some((c, len)) = fence {
            if fence_of(trimmed).is_some_and(|(d, n)| d == c && n >= len)
                && trimmed.trim_start_matches(c).trim().is_empty()
            {
                fence = None;
            }
            out.push('\n');
            continue;
        }
        if let Some(opened) = fence_of(trimmed) {
            fence = Some(opened);
            out.push('\n');
            continue;
        }
        out.push_str(&inline_prose(line, &mut display_math));
    }
    out
}

/// A fence line's character and length (three or more backticks or tildes).
fn fence_of(line: &str) -> Option<(char, usize)> {
    let c = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = line.chars().take_while(|x| *x == c).count();
    (len >= 3).then_some((c, len))
}

/// One line without its code spans and maths. `display` carries an open `$$` or `\[` across
/// lines.
fn inline_prose(line: &str, display: &mut bool) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < chars.len() {
        if *display {
            match closing_display(&chars, i) {
                Some(end) => {
                    *display = false;
                    out.push(' ');
                    i = end;
                }
                None => {
                    if chars[i] == '\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
            continue;
        }
        let skip = match chars[i] {
            '`' => code_span_end(&chars, i),
            '$' if chars.get(i + 1) == Some(&'$') => {
                *display = true;
                out.push(' ');
                i += 2;
                continue;
            }
            '$' => inline_math_end(&chars, i),
            '\\' if chars.get(i + 1) == Some(&'[') => {
                *display = true;
                out.push(' ');
                i += 2;
                continue;
            }
            '\\' if chars.get(i + 1) == Some(&'(') => delimited_end(&chars, i + 2, &['\\', ')']),
            _ => None,
        };
        match skip {
            Some(end) => {
                out.push(' ');
                i = end;
            }
            None => {
                out.push(chars[i]);
                i += 1;
            }
        }
    }
    out
}

/// Where a display formula opened before `from` ends (`$$` or `\]`), past its delimiter.
fn closing_display(chars: &[char], from: usize) -> Option<usize> {
    let pair = (chars[from], chars.get(from + 1).copied());
    matches!(pair, ('$', Some('$')) | ('\\', Some(']'))).then_some(from + 2)
}

/// The end of the code span opened by the backtick run at `at`: past a closing run of the
/// same length; `None` when it never closes (the backticks are then literal).
fn code_span_end(chars: &[char], at: usize) -> Option<usize> {
    let run = chars[at..].iter().take_while(|c| **c == '`').count();
    let mut i = at + run;
    while i < chars.len() {
        if chars[i] == '`' {
            let len = chars[i..].iter().take_while(|c| **c == '`').count();
            if len == run {
                return Some(i + len);
            }
            i += len;
        } else {
            i += 1;
        }
    }
    None
}

/// The end of inline maths opened by the `$` at `at`, as Pandoc reads it: the opening `$` is
/// followed by a non-space, the closing one follows a non-space and is not followed by a
/// digit (so "$5 and $6" is no formula).
fn inline_math_end(chars: &[char], at: usize) -> Option<usize> {
    let first = chars.get(at + 1)?;
    if first.is_whitespace() {
        return None;
    }
    let mut i = at + 2;
    while i < chars.len() && chars[i] != '\n' {
        if chars[i] == '$'
            && !chars[i - 1].is_whitespace()
            && chars[i - 1] != '\\'
            && !chars.get(i + 1).is_some_and(char::is_ascii_digit)
        {
            return Some(i + 1);
        }
        i += 1;
    }
    None
}

/// Past the first occurrence of `close` at or after `from` on this line.
fn delimited_end(chars: &[char], from: usize, close: &[char]) -> Option<usize> {
    (from..chars.len().saturating_sub(close.len() - 1))
        .take_while(|i| chars[*i] != '\n')
        .find(|i| chars[*i..].starts_with(close))
        .map(|i| i + close.len())
}

/// The longest bracket group read as a citation (`[12, 13, 14–20]` fits).
const MAX_GROUP_CHARS: usize = 48;

/// Every `[…]` group that lists citation numbers, as inclusive ranges.
fn citation_ranges(prose: &str) -> Vec<(u32, u32)> {
    let chars: Vec<char> = prose.chars().collect();
    let mut ranges = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let Some(close) = closing_bracket(chars[i]) else {
            i += 1;
            continue;
        };
        let end = chars[i + 1..]
            .iter()
            .take(MAX_GROUP_CHARS)
            .position(|c| *c == close)
            .map(|p| i + 1 + p);
        match end.and_then(|end| group(&chars[i + 1..end]).map(|g| (end, g))) {
            Some((end, group)) => {
                ranges.extend(group);
                i = end + 1;
            }
            None => i += 1,
        }
    }
    ranges
}

fn closing_bracket(open: char) -> Option<char> {
    match open {
        '[' => Some(']'),
        '【' => Some('】'),
        '［' => Some('］'),
        _ => None,
    }
}

fn is_separator(c: char) -> bool {
    matches!(c, ',' | '，' | '、' | ';' | '；') || c.is_whitespace()
}

fn is_dash(c: char) -> bool {
    matches!(c, '-' | '–' | '—' | '~' | '～')
}

/// A group's numbers and ranges (`1, 3–5`), or `None` when it is not a citation: anything
/// but numbers, separators and dashes, a `0` (no source is 0: `[0, 1]` is an interval), or a
/// backward range.
fn group(inner: &[char]) -> Option<Vec<(u32, u32)>> {
    let text: String = inner.iter().collect();
    let mut out = Vec::new();
    for item in text.split(is_separator).filter(|s| !s.is_empty()) {
        let mut bounds = item.split(is_dash);
        let lo = number(bounds.next()?)?;
        let hi = match bounds.next() {
            Some(hi) => number(hi)?,
            None => lo,
        };
        if bounds.next().is_some() || lo == 0 || hi < lo {
            return None;
        }
        out.push((lo, hi));
    }
    (!out.is_empty()).then_some(out)
}

fn number(s: &str) -> Option<u32> {
    let s = s.trim();
    (!s.is_empty() && s.len() <= 4 && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(n: u32) -> Source {
        Source {
            n,
            title: format!("doc {n}"),
            ..Source::default()
        }
    }

    fn numbers(answer: &str, known: u32) -> Vec<u32> {
        let sources: Vec<Source> = (1..=known).map(source).collect();
        cited(answer, &sources).iter().map(|s| s.n).collect()
    }

    #[test]
    fn single_lists_adjacent_and_ranges_are_cited() {
        assert_eq!(numbers("By definition [2], x > 0.", 5), [2]);
        assert_eq!(numbers("Both hold [1, 3].", 5), [1, 3]);
        assert_eq!(numbers("Both hold [3][1].", 5), [1, 3]);
        assert_eq!(numbers("See [2–4] and [5-5].", 5), [2, 3, 4, 5]);
        assert_eq!(numbers("定义见【2】与[1、3]。", 5), [1, 2, 3]);
    }

    #[test]
    fn each_source_once_ordered_by_number() {
        assert_eq!(numbers("[3] then [1] then [3] and [1-3]", 4), [1, 2, 3]);
    }

    #[test]
    fn unknown_numbers_and_non_citations_are_ignored() {
        assert_eq!(numbers("As [7] says, and [2].", 3), [2]);
        assert_eq!(
            numbers("x in [0, 1] and [a] and [1.5] and [3-1]", 3),
            Vec::<u32>::new()
        );
        assert_eq!(numbers("[1, x]", 3), Vec::<u32>::new());
        assert_eq!(numbers("no citations at all", 3), Vec::<u32>::new());
    }

    #[test]
    fn markers_in_code_spans_blocks_and_maths_are_not_citations() {
        let answer = "Use `a[1]` and ``b[2]``.\n\n```python\nprint(x[3])\n```\n\
                      $v[4]$ and $$\nm[5]\n$$ but [6] is cited, as is \\(y[1]\\) not.";
        assert_eq!(numbers(answer, 6), [6]);
        assert_eq!(numbers("~~~\n[1]\n~~~\n[2]", 3), [2]);
        // An unclosed backtick is literal; "$5 and $6" is no formula.
        assert_eq!(numbers("a ` b [1]; costs $5 [2] and $6", 3), [1, 2]);
    }

    #[test]
    fn the_same_passage_keeps_its_number() {
        let citations = Citations::default();
        let chunk = |id: &str| Source {
            title: "notes.pdf".into(),
            document_id: Some("doc_1".into()),
            page: Some(3),
            chunk_id: Some(id.into()),
            ..Source::default()
        };
        let page = |p: u32| Source {
            title: "notes.pdf".into(),
            document_id: Some("doc_1".into()),
            page: Some(p),
            ..Source::default()
        };
        let web = |url: &str| Source {
            title: "web".into(),
            url: Some(url.into()),
            ..Source::default()
        };
        assert_eq!(citations.register(chunk("c1")).n, 1);
        assert_eq!(citations.register(chunk("c2")).n, 2);
        assert_eq!(citations.register(chunk("c1")).n, 1);
        // A page read without a chunk is its own passage, even on the chunk's page.
        assert_eq!(citations.register(page(3)).n, 3);
        assert_eq!(citations.register(page(3)).n, 3);
        assert_eq!(citations.register(page(4)).n, 4);
        assert_eq!(citations.register(web("https://a.example")).n, 5);
        assert_eq!(citations.register(web("https://a.example")).n, 5);
        // Nothing to identify it by: always a new number.
        assert_eq!(citations.register(source(0)).n, 6);
        assert_eq!(citations.register(source(0)).n, 7);
        let all = citations.all();
        assert_eq!(
            all.iter().map(|s| s.n).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5, 6, 7]
        );
    }

    #[test]
    fn a_restored_numbering_continues() {
        let restored = vec![Source {
            n: 4,
            chunk_id: Some("c4".into()),
            ..source(4)
        }];
        let citations = Citations::new(restored);
        let again = Source {
            chunk_id: Some("c4".into()),
            ..source(0)
        };
        assert_eq!(citations.register(again).n, 4);
        assert_eq!(citations.register(source(0)).n, 5);
    }
}
