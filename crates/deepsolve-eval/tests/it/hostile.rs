//! The grader on anything a model might write: never a panic, never a hang.

use deepsolve_eval::grade::{AnswerStyle, extract};
use deepsolve_eval::{Grader, Judged};
use proptest::prelude::*;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

/// Strings made of the pieces answers are made of.
fn answerish() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "\\frac",
        "\\dfrac",
        "\\sqrt",
        "{",
        "}",
        "(",
        ")",
        "[",
        "]",
        "\\{",
        "\\}",
        ",",
        "1",
        "23",
        "4.5",
        "-",
        "+",
        "^",
        "_",
        "x",
        "e",
        "i",
        "\\pi",
        "\\infty",
        "\\cup",
        "=",
        "%",
        "\\%",
        "$",
        "\\text{",
        " cm",
        "元",
        "°",
        "|",
        "!",
        "\\left(",
        "\\right)",
        ".",
        "/",
        "\\boxed{",
        "\\log",
        "\\sin",
        "答案是",
        "the answer is",
        "####",
        "\n",
        " ",
    ]);
    prop::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn grading_any_text_never_panics(expected in answerish(), output in answerish()) {
        let rt = runtime();
        let grader = Grader::new();
        let v = rt.block_on(grader.compare(&expected, &output));
        // Without sympy nothing is judged by it.
        prop_assert_ne!(v.judged, Judged::Sympy);
        let _ = extract(&output, AnswerStyle::ResultFirst);
        let g = rt.block_on(grader.grade(&expected, &output, AnswerStyle::Reasoned));
        prop_assert!(g.answer.is_some() || g.verdict.judged == Judged::Unparsed);
    }

    #[test]
    fn a_number_with_separators_equals_its_boxed_digits(n in -10_000_000i64..10_000_000, wrong in 1i64..1000) {
        let rt = runtime();
        let grader = Grader::new();
        let digits = n.abs().to_string();
        let mut grouped = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                grouped.push(',');
            }
            grouped.push(c);
        }
        let expected = if n < 0 { format!("-{grouped}") } else { grouped };
        let right = rt.block_on(grader.grade(&expected, &format!("so \\boxed{{{n}}}."), AnswerStyle::Reasoned));
        prop_assert!(right.verdict.correct, "{} vs {}: {:?}", expected, n, right);
        let off = rt.block_on(grader.grade(&expected, &format!("so \\boxed{{{}}}.", n + wrong), AnswerStyle::Reasoned));
        prop_assert!(!off.verdict.correct, "{} vs {}: {:?}", expected, n + wrong, off);
    }
}

#[tokio::test]
async fn deep_nesting_and_long_answers_are_refused_or_compared_not_overflowed() {
    let grader = Grader::new();
    let deep = format!("{}1{}", "(1,".repeat(5000), ")".repeat(5000));
    let other = format!("{}2{}", "(1,".repeat(5000), ")".repeat(5000));
    let v = grader.compare(&deep, &other).await;
    assert!(!v.correct);
    let brackets = format!("{}x{}", "(".repeat(10_000), ")".repeat(10_000));
    let v = grader.compare(&brackets, "y").await;
    assert!(!v.correct);
    let long = "1+".repeat(20_000) + "1";
    let v = grader.compare(&long, "20001").await;
    assert!(!v.correct || v.judged == Judged::Evaluated);
}
