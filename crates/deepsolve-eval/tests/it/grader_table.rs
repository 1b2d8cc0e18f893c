//! The grader against a table of answer pairs written by hand: equal and not equal, with how
//! each must be judged. No sandbox here: pairs that need sympy are in `sympy.rs`.

use deepsolve_eval::{Grader, Judged};

use Judged::*;

/// (expected, answer, correct, judged)
const TABLE: &[(&str, &str, bool, Judged)] = &[
    // the same text
    ("18", "18", true, Exact),
    ("\\frac{1}{2}", "\\frac{1}{2}", true, Exact),
    ("Monday", "Monday", true, Exact),
    // integers, separators, signs
    ("18", "18.0", true, Numeric),
    ("18", "19", false, Numeric),
    ("1234", "1,234", true, Numeric),
    ("1234567", "1,234,567", true, Numeric),
    ("1234", "1 234", true, Numeric),
    ("1234", "1{,}234", true, Numeric),
    ("1234", "1\\,234", true, Numeric),
    ("-7", "-7", true, Exact),
    ("-7", "7", false, Numeric),
    ("-7", "−7", true, Numeric),
    ("0.5", ".5", true, Numeric),
    ("100000", "100001", false, Numeric),
    ("1000000", "1000001", false, Numeric),
    ("3", "+3", true, Numeric),
    // currency and units
    ("18", "$18", true, Numeric),
    ("18", "\\$18", true, Numeric),
    ("18", "$18.00", true, Numeric),
    ("18", "18 dollars", true, Numeric),
    ("18", "18 eggs", true, Numeric),
    ("5", "5 cm", true, Numeric),
    ("25", "25 cm^2", true, Numeric),
    ("25", "25\\text{ cm}^2", true, Numeric),
    ("25", "25 \\text{ square metres}", true, Numeric),
    ("60", "60元", true, Numeric),
    ("15", "15 天", true, Numeric),
    ("8", "8只", true, Numeric),
    ("12", "¥12", true, Numeric),
    ("-5", "-$5", true, Numeric),
    ("18", "18 dollars", true, Numeric),
    ("18", "81 dollars", false, Numeric),
    // percentages
    ("45%", "45", true, Numeric),
    ("45%", "0.45", true, Numeric),
    ("45\\%", "45%", true, Numeric),
    ("0.45", "45%", true, Numeric),
    ("45%", "0.46", false, Numeric),
    ("12.5\\%", "12.5", true, Numeric),
    ("45", "0.45", false, Numeric),
    // decimals and tolerance
    ("3.14159", "3.1416", true, Numeric),
    ("3.14", "3.15", false, Numeric),
    ("0.333333", "0.3333", true, Numeric),
    ("2.5", "2.50", true, Numeric),
    ("1e3", "1000", true, Numeric),
    ("1500", "1.5 \\times 10^{3}", true, Numeric),
    ("0.0001", "0.0002", false, Numeric),
    // fractions
    ("\\frac{3}{4}", "0.75", true, Numeric),
    ("\\frac{3}{4}", "3/4", true, Numeric),
    ("\\dfrac{3}{4}", "\\frac{3}{4}", true, Numeric),
    ("\\tfrac{3}{4}", "0.75", true, Numeric),
    ("\\frac34", "0.75", true, Numeric),
    ("-\\frac{1}{2}", "-0.5", true, Numeric),
    ("\\frac{-1}{2}", "-\\frac{1}{2}", true, Numeric),
    ("\\frac{1}{3}", "0.3333", true, Numeric),
    ("\\frac{1}{3}", "0.33", false, Numeric),
    ("2\\frac{1}{2}", "2.5", true, Numeric),
    ("\\frac{2}{3}", "\\frac{3}{2}", false, Numeric),
    ("\\frac{6}{8}", "\\frac{3}{4}", true, Numeric),
    // multiple choice
    ("A", "A", true, Exact),
    ("B", "(B)", true, Choice),
    ("C", "C. {x | -3 < x < 4}", true, Choice),
    ("D", "\\text{D}", true, Choice),
    ("A", "B", false, Choice),
    ("C", "c", true, Choice),
    // LaTeX spellings of one answer
    ("\\sqrt{2}", "\\sqrt2", true, Latex),
    ("\\frac{\\sqrt{3}}{2}", "\\dfrac{\\sqrt{3}}{2}", true, Latex),
    ("\\left( 1, 2 \\right)", "(1,2)", true, Latex),
    ("30^\\circ", "30", true, Latex),
    ("30", "30°", true, Latex),
    ("90^{\\circ}", "90^\\circ", true, Latex),
    ("x = 5", "5", true, Latex),
    ("5", "x=5", true, Latex),
    ("\\text{Evelyn}", "Evelyn", true, Latex),
    ("\\text{evelyn}", "Evelyn", true, Latex),
    ("\\$5.40", "5.4", true, Numeric),
    ("$\\pi$", "\\pi", true, Latex),
    ("\\infty", "infinity", true, Latex),
    ("\\boxed{7}", "7", true, Latex),
    ("yes", "no", false, Latex),
    // constants evaluated in Rust
    (
        "\\frac{\\sqrt{3}}{2}",
        "\\frac{1}{2}\\sqrt{3}",
        true,
        Evaluated,
    ),
    ("2\\sqrt{2}", "\\sqrt{8}", true, Evaluated),
    ("\\sqrt{2}", "1.41421", true, Evaluated),
    ("\\sqrt{2}", "1.4", false, Evaluated),
    ("\\pi", "3.14159", true, Evaluated),
    ("\\pi", "3.14", false, Evaluated),
    ("\\frac{\\pi}{4}", "0.25\\pi", true, Evaluated),
    ("2^{10}", "1024", true, Evaluated),
    ("\\sqrt[3]{27}", "3", true, Evaluated),
    ("5!", "120", true, Evaluated),
    (
        "\\frac{1+\\sqrt{5}}{2}",
        "\\frac{\\sqrt{5}+1}{2}",
        true,
        Evaluated,
    ),
    (
        "\\frac{1+\\sqrt{5}}{2}",
        "\\frac{1-\\sqrt{5}}{2}",
        false,
        Evaluated,
    ),
    ("3\\sqrt{3}", "\\sqrt{27}", true, Evaluated),
    ("e^2", "7.389056", true, Evaluated),
    ("|-4|", "4", true, Evaluated),
    ("\\sin\\frac{\\pi}{6}", "\\frac12", true, Evaluated),
    ("\\log_2 8", "3", true, Evaluated),
    ("2(3+4)", "14", true, Evaluated),
    ("10\\sqrt{2}", "14.142", true, Evaluated),
    ("5", "2x", false, Unverified),
    // tuples, points, intervals
    ("(1, 2)", "(1,2)", true, Latex),
    ("(1, 2)", "(2, 1)", false, Elementwise),
    ("(\\frac{1}{2}, 3)", "(0.5, 3)", true, Elementwise),
    ("(-\\infty, 3)", "(-\\infty,3)", true, Latex),
    ("[2, 5)", "[2, 5]", false, Elementwise),
    ("(2, 5]", "\\left(2, 5\\right]", true, Latex),
    ("(1, 2, 3)", "(1, 2)", false, Elementwise),
    ("(1,\\sqrt{2})", "(1, 1.41421)", true, Elementwise),
    (
        "(-\\infty, 1) \\cup (2, \\infty)",
        "(2,\\infty)\\cup(-\\infty,1)",
        true,
        Elementwise,
    ),
    (
        "(-\\infty, 1) \\cup (2, \\infty)",
        "(-\\infty, 1)",
        false,
        Elementwise,
    ),
    // sets and unordered lists
    ("\\{1, 2, 3\\}", "\\{3, 2, 1\\}", true, Elementwise),
    ("\\{1, 2\\}", "\\{1, 3\\}", false, Elementwise),
    ("2, -3", "-3, 2", true, Elementwise),
    ("2, -3", "2, 3", false, Elementwise),
    ("\\{\\frac12, 2\\}", "2, 0.5", true, Elementwise),
    ("1, 2", "(1, 2)", false, Elementwise),
    ("[2, 5)", "x \\in [2, 5)", true, Latex),
    ("(0, 1]", "x\\in(0,1)", false, Elementwise),
    ("\\emptyset", "\\varnothing", true, Latex),
    // expressions with symbols need sympy, which this grader has not
    ("x^2 - 1", "(x-1)(x+1)", false, Unverified),
    ("x + 1", "x + 1", true, Exact),
    ("2x+1", "1+2x", false, Unverified),
    // different kinds never match
    ("y = 2x + 1", "2x + 1", true, Latex),
    ("x^2+y^2=1", "1", false, Latex),
];

#[tokio::test]
async fn the_table_of_answer_pairs_is_judged_as_written() {
    assert!(TABLE.len() >= 100, "the table has {} pairs", TABLE.len());
    let grader = Grader::new();
    let mut failures = Vec::new();
    for &(expected, answer, correct, judged) in TABLE {
        let v = grader.compare(expected, answer).await;
        if v.correct != correct || v.judged != judged {
            failures.push(format!(
                "{expected:?} vs {answer:?}: got {} by {:?} ({:?}), want {correct} by {judged:?}",
                v.correct, v.judged, v.note
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} pairs judged otherwise:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn the_table_holds_both_verdicts_and_every_rust_judge() {
    let right = TABLE.iter().filter(|t| t.2).count();
    let wrong = TABLE.len() - right;
    assert!(
        right >= 50 && wrong >= 25,
        "{right} equal, {wrong} not equal"
    );
    for judge in [
        Exact,
        Numeric,
        Choice,
        Latex,
        Evaluated,
        Elementwise,
        Unverified,
    ] {
        assert!(
            TABLE.iter().any(|t| t.3 == judge),
            "no pair judged {judge:?}"
        );
    }
}

#[tokio::test]
async fn an_unverified_verdict_says_sympy_was_missing() {
    let v = Grader::new().compare("x^2-1", "(x-1)(x+1)").await;
    assert_eq!(v.judged, Unverified);
    assert!(v.note.unwrap().contains("sympy"));
}
