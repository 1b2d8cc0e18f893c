//! Grading: the final answer taken from an output ([`extract`]), then compared with the
//! reference by the cheapest judge that can decide — the same text, numbers with tolerance,
//! a multiple-choice letter, normalised LaTeX, constants evaluated in Rust, tuples, intervals
//! and sets element by element — and sympy in the sandbox only for expressions with symbols.
//! Every verdict says how it was reached ([`Judged`]).

mod expr;
pub mod extract;
mod latex;
mod number;
pub mod sympy;

use std::sync::{Arc, LazyLock};

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use extract::{AnswerStyle, Extracted, Extraction, extract, last_boxed};
pub use number::RELATIVE_TOLERANCE;
pub use sympy::{
    DEFAULT_SYMPY_TIMEOUT, Relation, SandboxSympy, SymbolicError, SymbolicJudge, SymbolicQuery,
};

use latex::{Normal, Shape, normalize, shape};

/// How a verdict was reached.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Judged {
    /// The same text.
    Exact,
    /// Both read as numbers (separators, units, percentages, fractions), compared with the
    /// tolerance.
    Numeric,
    /// A multiple-choice letter.
    Choice,
    /// The same after LaTeX normalisation (or different, with nothing more to try).
    Latex,
    /// Both constant expressions, evaluated in Rust and compared with the tolerance.
    Evaluated,
    /// Tuples, intervals, sets or lists, element by element.
    Elementwise,
    /// Decided by sympy in the sandbox.
    Sympy,
    /// Needed sympy, which was not available or failed: counted wrong, with the reason.
    Unverified,
    /// No answer could be found in the output.
    Unparsed,
    /// The mode failed (an endpoint error): nothing to grade.
    Error,
}

impl Judged {
    pub fn as_str(self) -> &'static str {
        match self {
            Judged::Exact => "exact",
            Judged::Numeric => "numeric",
            Judged::Choice => "choice",
            Judged::Latex => "latex",
            Judged::Evaluated => "evaluated",
            Judged::Elementwise => "elementwise",
            Judged::Sympy => "sympy",
            Judged::Unverified => "unverified",
            Judged::Unparsed => "unparsed",
            Judged::Error => "error",
        }
    }
}

/// A comparison's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub correct: bool,
    pub judged: Judged,
    /// Why, when the judge alone does not say it (a sympy failure, a fallback taken).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Verdict {
    fn new(correct: bool, judged: Judged) -> Self {
        Verdict {
            correct,
            judged,
            note: None,
        }
    }

    fn noted(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }
}

/// An output graded against its reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Graded {
    pub answer: Option<String>,
    pub extraction: Option<Extraction>,
    pub verdict: Verdict,
}

/// The longest list compared element by element (pairings are quadratic).
const MAX_ITEMS: usize = 32;

/// The deepest nesting of tuples, sets and intervals compared.
const MAX_NESTING: usize = 8;

/// Grades answers; holds the symbolic judge when there is one.
#[derive(Clone, Default)]
pub struct Grader {
    symbolic: Option<Arc<dyn SymbolicJudge>>,
}

impl std::fmt::Debug for Grader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grader")
            .field("symbolic", &self.symbolic.is_some())
            .finish()
    }
}

static CHOICE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^\(?([A-Ea-e])\)?(?:[.:．、)\s]|$)").ok());

impl Grader {
    /// A grader without sympy: answers that need it are judged `unverified`.
    pub fn new() -> Self {
        Grader::default()
    }

    pub fn with_symbolic(judge: Arc<dyn SymbolicJudge>) -> Self {
        Grader {
            symbolic: Some(judge),
        }
    }

    pub fn has_symbolic(&self) -> bool {
        self.symbolic.is_some()
    }

    /// Take the final answer from `output` and compare it with `expected`.
    pub async fn grade(&self, expected: &str, output: &str, style: AnswerStyle) -> Graded {
        let Some(found) = extract(output, style) else {
            return Graded {
                answer: None,
                extraction: None,
                verdict: Verdict::new(false, Judged::Unparsed)
                    .noted("no \\boxed{}, stated answer or number in the output"),
            };
        };
        let mut verdict = self.compare(expected, &found.text).await;
        if !verdict.correct
            && matches!(found.how, Extraction::AnswerIs | Extraction::FirstLine)
            && let Some(fallback) = self.number_in_sentence(expected, &found.text)
        {
            verdict = fallback;
        }
        Graded {
            answer: Some(found.text),
            extraction: Some(found.how),
            verdict,
        }
    }

    /// A numeric reference against a stated sentence (`She makes $18 a day`): its last number.
    fn number_in_sentence(&self, expected: &str, sentence: &str) -> Option<Verdict> {
        let want = number::parse(expected)?;
        if number::parse(sentence).is_some() {
            return None;
        }
        let last = extract::last_number(sentence)?;
        let got = number::parse(&last)?;
        number::same(want, got).then(|| {
            Verdict::new(true, Judged::Numeric).noted("the last number of the stated answer")
        })
    }

    /// Whether `answer` is the same answer as `expected`, and how that was decided.
    pub async fn compare(&self, expected: &str, answer: &str) -> Verdict {
        self.compare_at(expected, answer, 0).await
    }

    /// [`Self::compare`] at a nesting depth (tuples of tuples); a hostile nesting is refused.
    async fn compare_at(&self, expected: &str, answer: &str, depth: usize) -> Verdict {
        if expected.trim() == answer.trim() {
            return Verdict::new(true, Judged::Exact);
        }
        if let Some(letter) = expected_choice(expected) {
            let got = choice_letter(answer).or_else(|| choice_letter(&normalize(answer).text));
            return Verdict::new(got == Some(letter), Judged::Choice);
        }
        if let (Some(want), Some(got)) = (number::parse(expected), number::parse(answer)) {
            return Verdict::new(number::same(want, got), Judged::Numeric);
        }
        let want = normalize(expected);
        let got = normalize(answer);
        if want.text.eq_ignore_ascii_case(&got.text) && want.percent == got.percent {
            return Verdict::new(true, Judged::Latex);
        }
        match (shape(&want.text), shape(&got.text)) {
            (Shape::Atom(_), Shape::Atom(_)) => self.atoms(&want, &got).await,
            _ if depth >= MAX_NESTING => Verdict::new(false, Judged::Latex).noted(format!(
                "nested deeper than {MAX_NESTING} levels: not compared"
            )),
            (w, g) => self.shapes(w, g, depth).await,
        }
    }

    async fn shapes(&self, want: Shape, got: Shape, depth: usize) -> Verdict {
        let (want_items, got_items, ordered) = match (want, got) {
            (
                Shape::Sequence {
                    open: wo,
                    close: wc,
                    items: w,
                },
                Shape::Sequence {
                    open: go,
                    close: gc,
                    items: g,
                },
            ) => {
                if (wo, wc) != (go, gc) {
                    return Verdict::new(false, Judged::Elementwise)
                        .noted("different brackets (open and closed ends differ)");
                }
                (w, g, true)
            }
            (Shape::Set(w) | Shape::List(w), Shape::Set(g) | Shape::List(g))
            | (Shape::Union(w), Shape::Union(g)) => (w, g, false),
            _ => {
                return Verdict::new(false, Judged::Elementwise)
                    .noted("different kinds of answer (a list, set, interval or single value)");
            }
        };
        if want_items.len() != got_items.len() {
            return Verdict::new(false, Judged::Elementwise).noted(format!(
                "{} elements expected, {} given",
                want_items.len(),
                got_items.len()
            ));
        }
        if want_items.len() > MAX_ITEMS {
            return Verdict::new(false, Judged::Elementwise)
                .noted(format!("more than {MAX_ITEMS} elements: not compared"));
        }
        let mut unverified = None;
        let mut used = vec![false; got_items.len()];
        for (i, w) in want_items.iter().enumerate() {
            let mut matched = false;
            for (j, g) in got_items.iter().enumerate() {
                if used[j] || (ordered && i != j) {
                    continue;
                }
                let v = Box::pin(self.compare_at(w, g, depth + 1)).await;
                if v.correct {
                    used[j] = true;
                    matched = true;
                    break;
                }
                if v.judged == Judged::Unverified {
                    unverified = v.note.clone();
                }
            }
            if !matched {
                return match unverified {
                    Some(why) => Verdict::new(false, Judged::Unverified).noted(why),
                    None => Verdict::new(false, Judged::Elementwise)
                        .noted(format!("no match for element {w:?}")),
                };
            }
        }
        Verdict::new(true, Judged::Elementwise)
    }

    async fn atoms(&self, want: &Normal, got: &Normal) -> Verdict {
        let as_number = |n: &Normal| {
            number::parse(&n.text).map(|x| number::Number {
                percent: x.percent || n.percent,
                ..x
            })
        };
        if let (Some(w), Some(g)) = (as_number(want), as_number(got)) {
            return Verdict::new(number::same(w, g), Judged::Numeric);
        }
        let equations = (
            want.text.matches('=').count(),
            got.text.matches('=').count(),
        );
        if equations == (1, 1) {
            return self.equations(&want.text, &got.text).await;
        }
        if equations.0 != equations.1 {
            return Verdict::new(false, Judged::Latex)
                .noted("an equation compared with an expression");
        }
        if has_word(&want.text) || has_word(&got.text) {
            return Verdict::new(false, Judged::Latex).noted("words: compared as normalised text");
        }
        let (Some(w), Some(g)) = (expr::parse(&want.text), expr::parse(&got.text)) else {
            return Verdict::new(false, Judged::Latex)
                .noted("not both expressions: compared as normalised text");
        };
        // An expression in variables may still be a constant (sin²x + cos²x): sympy decides.
        if let (Some(a), Some(b)) = (w.eval(), g.eval()) {
            return Verdict::new(number::values_close(a, b), Judged::Evaluated);
        }
        let mut symbols = w.symbols();
        symbols.extend(g.symbols());
        symbols.sort();
        symbols.dedup();
        self.symbolic(SymbolicQuery {
            expected: w.sympy(),
            answer: g.sympy(),
            symbols,
            relation: Relation::Expression,
        })
        .await
    }

    async fn equations(&self, want: &str, got: &str) -> Verdict {
        let sides = |s: &str| -> Option<expr::Expr> {
            let (l, r) = s.split_once('=')?;
            Some(expr::Expr::Sub(
                Box::new(expr::parse(l)?),
                Box::new(expr::parse(r)?),
            ))
        };
        let (Some(w), Some(g)) = (sides(want), sides(got)) else {
            return Verdict::new(false, Judged::Latex)
                .noted("equations that are not both expressions: compared as normalised text");
        };
        let mut symbols = w.symbols();
        symbols.extend(g.symbols());
        symbols.sort();
        symbols.dedup();
        self.symbolic(SymbolicQuery {
            expected: w.sympy(),
            answer: g.sympy(),
            symbols,
            relation: Relation::Equation,
        })
        .await
    }

    async fn symbolic(&self, query: SymbolicQuery) -> Verdict {
        let Some(judge) = &self.symbolic else {
            return Verdict::new(false, Judged::Unverified)
                .noted("symbolic equivalence needs sympy, and no sandbox was available");
        };
        match judge.equivalent(&query).await {
            Ok(same) => Verdict::new(same, Judged::Sympy),
            Err(e) => Verdict::new(false, Judged::Unverified).noted(e.to_string()),
        }
    }
}

/// Whether `text` holds a word (three or more letters not naming a LaTeX command): a text
/// answer, not a product of variables.
fn has_word(text: &str) -> bool {
    let mut run = 0;
    let mut command = false;
    for c in text.chars() {
        if c.is_ascii_alphabetic() {
            run += 1;
            if run >= 3 && !command {
                return true;
            }
        } else {
            run = 0;
            command = c == '\\';
        }
    }
    false
}

/// A reference that is a choice: one capital letter A–E, maybe in parentheses or with a dot.
fn expected_choice(text: &str) -> Option<char> {
    let t = text
        .trim()
        .trim_start_matches('(')
        .trim_end_matches(['.', ')']);
    let mut chars = t.chars();
    match (chars.next(), chars.next()) {
        (Some(c @ 'A'..='E'), None) => Some(c),
        _ => None,
    }
}

/// `A`, `(B)`, `C.`, `D. {x | …}` → the letter; only A–E.
fn choice_letter(text: &str) -> Option<char> {
    let t = text.trim();
    let t = t
        .strip_prefix("\\text{")
        .and_then(|x| x.strip_suffix('}'))
        .unwrap_or(t);
    let caps = CHOICE.as_ref()?.captures(t.trim())?;
    caps.get(1)?
        .as_str()
        .chars()
        .next()
        .map(|c| c.to_ascii_uppercase())
}
