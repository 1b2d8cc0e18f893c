//! Problem sets: every layout detected per record, errors that name the record, the sets
//! shipped with the crate, deterministic selection.

use std::path::Path;

use deepsolve_core::Language;
use deepsolve_eval::data::{DataError, Selection, parse, select};
use deepsolve_eval::{AnswerStyle, Grader, Layout, sets};

fn one(line: &str) -> deepsolve_eval::Problem {
    let mut all = parse(Path::new("set.jsonl"), line).unwrap();
    assert_eq!(all.len(), 1);
    all.remove(0)
}

#[test]
fn gsm8k_records_take_the_number_after_the_hashes() {
    let p = one(
        r#"{"question":"Tom has 3 bags of 4 apples. How many apples?","answer":"3*4=<<3*4=12>>12\n#### 12","idx":7}"#,
    );
    assert_eq!(
        (p.layout, p.id.as_str(), p.expected.as_str()),
        (Layout::Gsm8k, "7", "12")
    );
    assert_eq!(p.language, Language::En);
}

#[test]
fn math_records_take_the_last_boxed_answer_of_the_solution_or_their_answer() {
    let p = one(
        r#"{"problem":"Simplify $\\frac{2}{4}$.","solution":"Halve: $\\boxed{\\frac{1}{2}}$.","level":"Level 3","type":"Prealgebra","unique_id":"test/prealgebra/1.json"}"#,
    );
    assert_eq!(p.layout, Layout::Math);
    assert_eq!(p.expected, "\\frac{1}{2}");
    assert_eq!(p.level.as_deref(), Some("3"));
    assert_eq!(p.subject.as_deref(), Some("Prealgebra"));
    assert_eq!(p.id, "test/prealgebra/1.json");
    let p =
        one(r#"{"id":60,"problem":"Find t.","solution":"Work... so 204 minutes.","answer":"204"}"#);
    assert_eq!(
        (p.layout, p.expected.as_str(), p.id.as_str()),
        (Layout::Math, "204", "60")
    );
}

#[test]
fn the_qwen_evaluation_layouts_are_read() {
    // math as Qwen2.5-Math stores it: gt beside gt_cot
    let p = one(
        r#"{"idx":0,"question":"What is 2+2?","gt_cot":"It is \\boxed{4}","gt":"4","level":"Level 1","type":"Algebra"}"#,
    );
    assert_eq!(
        (p.layout, p.expected.as_str(), p.level.as_deref()),
        (Layout::Qwen, "4", Some("1"))
    );
    // CMATH, in the original's layout (golden) and Qwen's (answer)
    let p = one(
        r#"{"id":"c1","grade":2,"question":"小明有5个苹果，吃了2个，还剩几个？","golden":"3","reasoning_step":1}"#,
    );
    assert_eq!(
        (p.expected.as_str(), p.language, p.level.as_deref()),
        ("3", Language::Zh, Some("grade 2"))
    );
    let p = one(
        r#"{"grade":1,"question":"芳芳有12页书，看了9页，还剩多少页？","answer":"3","reasoning_step":1,"num_digits":2}"#,
    );
    assert_eq!(
        (p.layout, p.expected.as_str(), p.id.as_str()),
        (Layout::Qwen, "3", "line-1")
    );
    // amc23: a float answer written by Python
    let p = one(
        r#"{"id":0,"problem":"How many miles?","answer":27.0,"url":"https://example.org","question":"How many miles?"}"#,
    );
    assert_eq!(p.expected, "27");
    // OlympiadBench: a list of final answers
    let p = one(
        r#"{"id":1606,"subfield":"Combinatorics","question":"How many moves?","final_answer":["$2$"],"is_multiple_answer":false}"#,
    );
    assert_eq!(
        (p.expected.as_str(), p.subject.as_deref()),
        ("2", Some("Combinatorics"))
    );
    // gaokao multiple choice: the letter, with the options in the question
    let p = one(
        r#"{"question":"设集合 A={x|x≥1}，则 A∩B=( )","options":{"A":"{x|x>-1}","B":"{x|x≥1}"},"label":"B","answer":null}"#,
    );
    assert_eq!(p.expected, "B");
    assert!(p.question.contains("A. {x|x>-1}") && p.question.contains("B. {x|x≥1}"));
    let p = one(
        r#"{"idx":0,"question":"已知集合 M，则 M∪N=( )","answer":"C. {x | -3<x<4}","choice_answer":"C"}"#,
    );
    assert_eq!(p.expected, "C");
    // gaokao2023en declares its language
    let p = one(
        r#"{"source":"2023","question":"Find $M \\cap N$.","lang":"en","answer":"$\\{x|-2\\leq x < 1\\}$"}"#,
    );
    assert_eq!(p.language, Language::En);
    // mawps
    let p = one(
        r#"{"input":"Joan had 70 shells and gave some away; 27 are left. How many did she give?","target":43.0}"#,
    );
    assert_eq!(p.expected, "43");
}

#[test]
fn plain_records_and_the_language_of_their_question() {
    let p = one(r#"{"id":"q1","question":"一个数的 3 倍是 12，这个数是多少？","answer":4}"#);
    assert_eq!(
        (p.layout, p.expected.as_str(), p.language),
        (Layout::Plain, "4", Language::Zh)
    );
    // A Chinese name in an English problem does not make it Chinese.
    let p = one(
        r#"{"id":"q2","question":"Li Ming (李明) has 4 pens and buys 3 more. How many pens does he have?","answer":"7"}"#,
    );
    assert_eq!(p.language, Language::En);
}

#[test]
fn a_record_that_fits_no_layout_is_named_with_its_line_keys_and_the_layouts() {
    let text = "{\"id\":1,\"question\":\"ok\",\"answer\":\"1\"}\n\n{\"prompt\":\"x\",\"label_text\":\"y\"}\n";
    let err = parse(Path::new("my-set.jsonl"), text).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, DataError::Unrecognised { line: 3, .. }),
        "{msg}"
    );
    for part in [
        "my-set.jsonl:3",
        "prompt",
        "label_text",
        "GSM8K",
        "MATH",
        "Qwen2.5-Math",
        "plain",
    ] {
        assert!(msg.contains(part), "{part} missing from: {msg}");
    }
    let err = parse(
        Path::new("s.jsonl"),
        "{\"question\":\"What?\",\"hint\":\"none\"}",
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("without a reference answer"),
        "{err}"
    );
}

#[test]
fn broken_json_duplicate_ids_and_empty_sets_are_errors_naming_the_line() {
    let err = parse(
        Path::new("s.jsonl"),
        "{\"id\":1,\"question\":\"a\",\"answer\":\"1\"}\n{oops",
    )
    .unwrap_err();
    assert!(err.to_string().starts_with("s.jsonl:2:"), "{err}");
    let err = parse(Path::new("s.jsonl"), "[1,2]").unwrap_err();
    assert!(err.to_string().contains("JSON array"), "{err}");
    let dup = "{\"id\":\"a\",\"question\":\"q\",\"answer\":\"1\"}\n{\"id\":\"a\",\"question\":\"r\",\"answer\":\"2\"}";
    let err = parse(Path::new("s.jsonl"), dup).unwrap_err();
    assert!(
        matches!(
            err,
            DataError::DuplicateId {
                line: 2,
                first_line: 1,
                ..
            }
        ),
        "{err}"
    );
    assert!(matches!(
        parse(Path::new("s.jsonl"), "\n\n"),
        Err(DataError::Empty { .. })
    ));
    let err = deepsolve_eval::load(Path::new("/nonexistent/set.jsonl")).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/set.jsonl"), "{err}");
}

#[tokio::test]
async fn the_shipped_sets_load_and_their_answers_pass_the_grader() {
    let grader = Grader::new();
    for (name, text, language) in [
        ("gsm-style-en.jsonl", sets::GSM_STYLE_EN, Language::En),
        ("zh-arith.jsonl", sets::ZH_ARITH, Language::Zh),
    ] {
        let problems = parse(Path::new(name), text).unwrap();
        assert!(problems.len() >= 30, "{name}: {}", problems.len());
        for p in &problems {
            assert_eq!(p.language, language, "{name} {}", p.id);
            let n: i64 = p
                .expected
                .parse()
                .unwrap_or_else(|_| panic!("{}: {:?}", p.id, p.expected));
            let right = grader
                .grade(
                    &p.expected,
                    &format!("so \\boxed{{{n}}}"),
                    AnswerStyle::Reasoned,
                )
                .await;
            assert!(right.verdict.correct, "{} {:?}", p.id, right);
            let wrong = grader
                .grade(
                    &p.expected,
                    &format!("so \\boxed{{{}}}", n + 1),
                    AnswerStyle::Reasoned,
                )
                .await;
            assert!(!wrong.verdict.correct, "{}", p.id);
        }
    }
}

#[test]
fn sampling_is_deterministic_by_seed_and_keeps_file_order() {
    let problems = parse(Path::new("s"), sets::GSM_STYLE_EN).unwrap();
    let ids = |sel| -> Vec<String> {
        select(problems.clone(), sel)
            .into_iter()
            .map(|p| p.id)
            .collect()
    };
    let a = ids(Selection {
        limit: None,
        sample: Some((10, 7)),
    });
    assert_eq!(a.len(), 10);
    assert_eq!(
        a,
        ids(Selection {
            limit: None,
            sample: Some((10, 7))
        })
    );
    assert_ne!(
        a,
        ids(Selection {
            limit: None,
            sample: Some((10, 8))
        })
    );
    let mut sorted = a.clone();
    sorted.sort();
    assert_eq!(a, sorted, "file order (the ids sort as the file does)");
    let limited = ids(Selection {
        limit: Some(3),
        sample: Some((10, 7)),
    });
    assert_eq!(limited, a[..3].to_vec());
    assert_eq!(
        ids(Selection {
            limit: Some(2),
            sample: None
        }),
        vec!["en-01", "en-02"]
    );
    assert_eq!(
        ids(Selection {
            limit: None,
            sample: Some((1000, 1))
        })
        .len(),
        problems.len()
    );
}
