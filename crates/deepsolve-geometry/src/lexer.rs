//! One line of a script as tokens, each with its columns.

use crate::ast::Span;
use crate::error::ErrorKind;
use crate::limits::MAX_NAME_CHARS;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Number(f64),
    Name(String),
    Text(String),
    LParen,
    RParen,
    Comma,
    Plus,
    Minus,
    Star,
    Slash,
    Caret,
    Equals,
    Colon,
    Degree,
}

impl Tok {
    /// How an error names it.
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Number(n) => format!("the number {n}"),
            Tok::Name(n) => format!("'{n}'"),
            Tok::Text(_) => "a text in quotes".into(),
            Tok::LParen => "'('".into(),
            Tok::RParen => "')'".into(),
            Tok::Comma => "','".into(),
            Tok::Plus => "'+'".into(),
            Tok::Minus => "'-'".into(),
            Tok::Star => "'*'".into(),
            Tok::Slash => "'/'".into(),
            Tok::Caret => "'^'".into(),
            Tok::Equals => "'='".into(),
            Tok::Colon => "':'".into(),
            Tok::Degree => "'°'".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    pub tok: Tok,
    pub span: Span,
}

/// A lexing error at a column.
pub(crate) type LexError = (usize, ErrorKind);

pub(crate) fn tokenize(line: &str) -> Result<Vec<Token>, LexError> {
    let chars: Vec<char> = line.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i + 1;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let (tok, next) = if c.is_ascii_digit() || (c == '.' && next_is_digit(&chars, i)) {
            number(&chars, i)?
        } else if is_name_start(c) {
            name(&chars, i)?
        } else if c == '"' {
            text(&chars, i)?
        } else {
            (
                symbol(c).ok_or((start, ErrorKind::UnexpectedChar(c)))?,
                i + 1,
            )
        };
        tokens.push(Token {
            tok,
            span: Span {
                start,
                end: next + 1,
            },
        });
        i = next;
    }
    Ok(tokens)
}

fn next_is_digit(chars: &[char], i: usize) -> bool {
    chars.get(i + 1).is_some_and(char::is_ascii_digit)
}

fn symbol(c: char) -> Option<Tok> {
    Some(match c {
        '(' => Tok::LParen,
        ')' => Tok::RParen,
        ',' => Tok::Comma,
        '+' => Tok::Plus,
        // The minus sign and the dot and cross of multiplication, as typeset maths writes them.
        '-' | '\u{2212}' => Tok::Minus,
        '*' | '\u{b7}' | '\u{d7}' => Tok::Star,
        '/' => Tok::Slash,
        '^' => Tok::Caret,
        '=' => Tok::Equals,
        ':' => Tok::Colon,
        '°' => Tok::Degree,
        _ => return None,
    })
}

pub(crate) fn is_name_start(c: char) -> bool {
    c.is_alphabetic()
}

pub(crate) fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '\''
}

/// Digits with at most one decimal point.
fn number(chars: &[char], from: usize) -> Result<(Tok, usize), LexError> {
    let mut i = from;
    let mut seen_point = false;
    while let Some(&c) = chars.get(i) {
        if c.is_ascii_digit() {
            i += 1;
        } else if c == '.' && !seen_point {
            seen_point = true;
            i += 1;
        } else {
            break;
        }
    }
    let literal: String = chars[from..i].iter().collect();
    match literal.parse::<f64>() {
        Ok(n) if n.is_finite() => Ok((Tok::Number(n), i)),
        _ => Err((from + 1, ErrorKind::BadNumber(literal))),
    }
}

fn name(chars: &[char], from: usize) -> Result<(Tok, usize), LexError> {
    let mut i = from;
    while chars.get(i).is_some_and(|&c| is_name_char(c)) {
        i += 1;
    }
    if i - from > MAX_NAME_CHARS {
        return Err((from + 1, ErrorKind::NameTooLong(MAX_NAME_CHARS)));
    }
    Ok((Tok::Name(chars[from..i].iter().collect()), i))
}

/// `"…"`, with `\"` and `\\` for a quote and a backslash.
fn text(chars: &[char], from: usize) -> Result<(Tok, usize), LexError> {
    let mut out = String::new();
    let mut i = from + 1;
    loop {
        match chars.get(i) {
            None => return Err((from + 1, ErrorKind::UnterminatedText)),
            Some('"') => return Ok((Tok::Text(out), i + 1)),
            Some('\\') if matches!(chars.get(i + 1), Some('"' | '\\')) => {
                out.push(chars[i + 1]);
                i += 2;
            }
            Some(&c) => {
                out.push(c);
                i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(line: &str) -> Vec<Tok> {
        tokenize(line).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn reads_numbers_names_texts_and_symbols_with_columns() {
        assert_eq!(
            toks("A' = (1.5, .5)"),
            vec![
                Tok::Name("A'".into()),
                Tok::Equals,
                Tok::LParen,
                Tok::Number(1.5),
                Tok::Comma,
                Tok::Number(0.5),
                Tok::RParen
            ]
        );
        assert_eq!(
            toks(r#"Text("a \"b\" \\ c")"#)[2],
            Tok::Text(r#"a "b" \ c"#.into())
        );
        let spans: Vec<Span> = tokenize("ab + 12")
            .unwrap()
            .iter()
            .map(|t| t.span)
            .collect();
        assert_eq!(
            spans,
            vec![
                Span { start: 1, end: 3 },
                Span { start: 4, end: 5 },
                Span { start: 6, end: 8 }
            ]
        );
        assert_eq!(
            toks("2−x·3"),
            vec![
                Tok::Number(2.0),
                Tok::Minus,
                Tok::Name("x".into()),
                Tok::Star,
                Tok::Number(3.0)
            ]
        );
    }

    #[test]
    fn names_the_column_of_what_it_cannot_read() {
        assert_eq!(
            tokenize("A = (1, 2) # x"),
            Err((12, ErrorKind::UnexpectedChar('#')))
        );
        assert_eq!(
            tokenize("Text(\"open"),
            Err((6, ErrorKind::UnterminatedText))
        );
        assert!(matches!(
            tokenize(&"9".repeat(400)),
            Err((1, ErrorKind::BadNumber(_)))
        ));
    }
}
