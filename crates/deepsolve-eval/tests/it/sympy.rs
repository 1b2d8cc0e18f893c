//! Symbolic equivalence: the queries the grader sends (through a fake judge), and sympy in the
//! real sandbox when this machine has one (skipped, saying so, when it has not).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use deepsolve_eval::grade::{Relation, SandboxSympy, SymbolicError, SymbolicJudge, SymbolicQuery};
use deepsolve_eval::{Grader, Judged};

#[derive(Default)]
struct Recording {
    queries: Mutex<Vec<SymbolicQuery>>,
    answer: Option<bool>,
}

#[async_trait]
impl SymbolicJudge for Recording {
    async fn equivalent(&self, query: &SymbolicQuery) -> Result<bool, SymbolicError> {
        self.queries.lock().unwrap().push(query.clone());
        self.answer
            .ok_or_else(|| SymbolicError::Failed("no verdict".into()))
    }
}

#[tokio::test]
async fn the_grader_sends_sympy_expressions_rebuilt_from_the_parse() {
    let judge = Arc::new(Recording {
        answer: Some(true),
        ..Recording::default()
    });
    let grader = Grader::with_symbolic(judge.clone());
    let v = grader.compare("x^2 - 1", "(x-1)(x+1)").await;
    assert_eq!((v.correct, v.judged), (true, Judged::Sympy));
    let v = grader.compare("x^2+y^2=1", "y^2 + x^2 = 1").await;
    assert_eq!(v.judged, Judged::Sympy);
    let v = grader.compare("\\frac{\\alpha}{2}", "\\lambda").await;
    assert_eq!(v.judged, Judged::Sympy);
    // Constants never reach sympy.
    let v = grader.compare("\\sqrt{8}", "2\\sqrt{2}").await;
    assert_eq!(v.judged, Judged::Evaluated);
    // Text that is not an expression never reaches it either.
    let v = grader.compare("x", "__import__('os').system('true')").await;
    assert!(!v.correct);
    let queries = judge.queries.lock().unwrap();
    assert_eq!(queries.len(), 3, "{queries:?}");
    assert_eq!(queries[0].expected, "((x**2)-1)");
    assert_eq!(queries[0].answer, "((x-1)*(x+1))");
    assert_eq!(queries[0].symbols, vec!["x"]);
    assert_eq!(queries[1].relation, Relation::Equation);
    assert_eq!(queries[1].symbols, vec!["x", "y"]);
    assert_eq!(queries[2].symbols, vec!["alpha", "lamda"]);
}

#[tokio::test]
async fn a_failing_judge_makes_the_verdict_unverified_with_its_reason() {
    let grader = Grader::with_symbolic(Arc::new(Recording::default()));
    let v = grader.compare("x+1", "1+x").await;
    assert_eq!((v.correct, v.judged), (false, Judged::Unverified));
    assert!(v.note.unwrap().contains("no verdict"));
}

/// (expected, answer, equal) pairs only sympy can decide.
const SYMBOLIC: &[(&str, &str, bool)] = &[
    ("x^2 - 1", "(x-1)(x+1)", true),
    ("2x+1", "1+2x", true),
    ("\\frac{x}{2}", "0.5x", true),
    ("x^2", "x^3", false),
    ("(a+b)^2", "a^2+2ab+b^2", true),
    ("(a+b)^2", "a^2+b^2", false),
    ("\\frac{1}{x} + \\frac{1}{y}", "\\frac{x+y}{xy}", true),
    ("\\sin^2 x + \\cos^2 x", "1", true),
    ("x+y=1", "1-x-y=0", true),
    ("x^2+y^2=1", "y^2+x^2=1", true),
    ("x+y=1", "x-y=1", false),
    ("\\sqrt{x^2}", "|x|", false),
];

#[tokio::test]
async fn sympy_in_the_sandbox_decides_symbolic_pairs() {
    let judge = match SandboxSympy::detect(Duration::from_secs(60)).await {
        Ok(j) => j,
        Err(e) => {
            eprintln!("SKIPPED sympy_in_the_sandbox_decides_symbolic_pairs: no sandbox here ({e})");
            return;
        }
    };
    let grader = Grader::with_symbolic(Arc::new(judge));
    let mut failures = Vec::new();
    for &(expected, answer, equal) in SYMBOLIC {
        let v = grader.compare(expected, answer).await;
        if v.judged != Judged::Sympy || v.correct != equal {
            failures.push(format!("{expected:?} vs {answer:?}: {v:?}, want {equal}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
