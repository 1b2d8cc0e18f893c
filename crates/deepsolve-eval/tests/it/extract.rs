//! Where the final answer is found in an output, and grading whole outputs.

use deepsolve_eval::grade::{AnswerStyle, Extraction, extract, last_boxed};
use deepsolve_eval::{Grader, Judged};

fn found(output: &str, style: AnswerStyle) -> Option<(String, Extraction)> {
    extract(output, style).map(|e| (e.text, e.how))
}

#[test]
fn the_last_boxed_answer_wins_with_its_nested_braces() {
    let out = "First \\boxed{3}. Then, correcting: \\boxed{\\frac{1}{\\sqrt{2}}}.";
    assert_eq!(
        found(out, AnswerStyle::Reasoned),
        Some(("\\frac{1}{\\sqrt{2}}".into(), Extraction::Boxed))
    );
    assert_eq!(last_boxed("so \\fbox{42} it is"), Some("42".into()));
    assert_eq!(last_boxed("$\\boxed 7$"), Some("7".into()));
    assert_eq!(last_boxed("\\boxed{\\{1,2\\}}"), Some("\\{1,2\\}".into()));
    assert_eq!(last_boxed("\\boxed{unclosed"), None);
}

#[test]
fn a_stated_answer_is_taken_when_nothing_is_boxed() {
    let cases = [
        ("Working... The answer is 42.", "42"),
        (
            "Final Answer: The final answer is $\\frac{3}{4}$. I hope it is correct.",
            "\\frac{3}{4}",
        ),
        ("16 - 3 - 4 = 9\n9 * 2 = 18\n#### 18", "18"),
        ("**Answer:** 18 dollars", "18 dollars"),
        ("所以小明还剩 60 张。\n答案是 60 张。", "60 张"),
        ("答：一共 32 元。", "一共 32 元"),
        // A later sentence about the answer is not the answer (the 1.5B model).
        (
            "The final answer is: 7 DVDs\n\nThis answer is derived from the plan and the steps.",
            "7 DVDs",
        ),
        ("答案是六十张。这个答案是根据计划得出的。", "六十张"),
        (
            "So the answer is 12 apples. This answer is based on the plan.",
            "12 apples",
        ),
        // Without a value anywhere, the last statement stands.
        ("The answer is no. So the answer is yes.", "yes"),
    ];
    for (out, want) in cases {
        assert_eq!(
            found(out, AnswerStyle::Reasoned),
            Some((want.to_string(), Extraction::AnswerIs)),
            "{out}"
        );
    }
}

/// The 1.5B model's answer to GSM8K `line-801`: the result stated first, then a remark on it.
const STATED_THEN_REMARKED: &str = "The total points scored by Pierson and Nikita is 428 points.\n\n\
    This answer is clear and concise, following the instructions provided.";

#[test]
fn a_remark_on_the_answer_that_gives_no_value_is_not_a_stated_answer() {
    // Taken as the stated answer, the remark was graded wrong.
    let out = STATED_THEN_REMARKED;
    let first = "The total points scored by Pierson and Nikita is 428 points";
    assert_eq!(
        found(out, AnswerStyle::ResultFirst),
        Some((first.into(), Extraction::FirstLine))
    );
    assert_eq!(
        found(out, AnswerStyle::Reasoned),
        Some(("428".into(), Extraction::LastNumber))
    );
    assert_eq!(
        found("这个答案是清楚的。\n一共 428 分。", AnswerStyle::Reasoned),
        Some(("428".into(), Extraction::LastNumber))
    );
    // Such a remark that gives a value still states it; one after "the" always did.
    for (out, want) in [
        ("This answer is 12.", "12"),
        ("所以这个答案是 60 张。", "60 张"),
        ("The answer is no.", "no"),
    ] {
        assert_eq!(
            found(out, AnswerStyle::Reasoned),
            Some((want.to_string(), Extraction::AnswerIs)),
            "{out}"
        );
    }
}

#[tokio::test]
async fn a_result_stated_first_then_remarked_on_is_graded_right() {
    assert_a_result_first_answer_graded_right("428", STATED_THEN_REMARKED, Extraction::FirstLine)
        .await;
}

/// The 1.5B model's answer to GSM8K `line-534` (seed 6): the result first, then "the final
/// answer is" followed by no value.
const STATED_THEN_SAID_TO_BE_STATED: &str = "The cost of one monitor is $300.\n\n\
    The explanation of how it was obtained is not provided in the given response, but the \
    final answer is clearly stated as the result of the computation.";

#[tokio::test]
async fn a_stated_answer_without_a_value_gives_way_to_a_first_line_with_one() {
    assert_a_result_first_answer_graded_right(
        "300",
        STATED_THEN_SAID_TO_BE_STATED,
        Extraction::FirstLine,
    )
    .await;
    let cases = [
        // Without a value on the first line, or in a reasoned output, the statement stands.
        (
            "Yes, it can.\n\nSo the answer is no.",
            AnswerStyle::ResultFirst,
            "no",
        ),
        (
            STATED_THEN_SAID_TO_BE_STATED,
            AnswerStyle::Reasoned,
            "clearly stated as the result of the computation",
        ),
        // A stated answer with a value still wins over the first line.
        (
            "About 20.\n\nThe answer is 18.",
            AnswerStyle::ResultFirst,
            "18",
        ),
    ];
    for (out, style, want) in cases {
        let stated = Some((want.to_string(), Extraction::AnswerIs));
        assert_eq!(found(out, style), stated, "{out}");
    }
}

/// `out`, a deepsolve answer, graded right against `expected`, its answer found by `how`.
async fn assert_a_result_first_answer_graded_right(expected: &str, out: &str, how: Extraction) {
    let graded = Grader::new()
        .grade(expected, out, AnswerStyle::ResultFirst)
        .await;
    assert!(graded.verdict.correct, "{graded:?}");
    assert_eq!(graded.extraction, Some(how));
}

#[test]
fn the_first_line_counts_only_for_an_answer_that_states_its_result_first() {
    let out = "**x = 4**\n\nWe subtract 3 from both sides, giving 2x = 8, so x = 4 of 7 tries.";
    assert_eq!(
        found(out, AnswerStyle::ResultFirst),
        Some(("x = 4".into(), Extraction::FirstLine))
    );
    assert_eq!(
        found(out, AnswerStyle::Reasoned),
        Some(("7".into(), Extraction::LastNumber))
    );
}

#[test]
fn a_first_line_that_heads_or_introduces_is_not_a_result() {
    // The 1.5B model began its answers with its step replies' headings and introductions.
    for out in [
        "### Step 6: Write the final answer\n\nThe farmer earns 6 * 3 = 18 dollars.",
        "To find the total, we need to follow these steps:\n\n1. 9 eggs at $2 make 18.",
        "```\nThe total is 18\n```",
        "**总共需要：**\n\n9 * 2 = 18",
    ] {
        assert_eq!(
            found(out, AnswerStyle::ResultFirst),
            Some(("18".into(), Extraction::LastNumber)),
            "{out}"
        );
    }
}

#[test]
fn the_last_number_is_the_fallback_and_no_number_is_unparsed() {
    assert_eq!(
        found(
            "She has 3 apples and buys 1,250 more",
            AnswerStyle::Reasoned
        ),
        Some(("1250".into(), Extraction::LastNumber))
    );
    assert_eq!(found("I cannot solve this.", AnswerStyle::Reasoned), None);
    // Reasoning left in the text is skipped.
    assert_eq!(
        found("<think>maybe 5</think>It is 6", AnswerStyle::Reasoned),
        Some(("6".into(), Extraction::LastNumber))
    );
}

#[test]
fn a_number_joined_to_the_word_after_it_is_not_the_last_number() {
    let cases = [
        ("Tim deals with 120 calls during his 5-day work week", "120"),
        ("She earns $1,500 for one 24-hour shift", "1500"),
        ("A 10-year-old", "10"),
        ("5 - 3 leaves 2", "2"),
    ];
    for (text, last) in cases {
        assert_eq!(
            found(text, AnswerStyle::Reasoned),
            Some((last.into(), Extraction::LastNumber)),
            "{text}"
        );
    }
}

#[tokio::test]
async fn a_stated_sentence_with_a_compound_number_is_graded_by_its_count() {
    // The 1.5B model's answer after a forced round; graded by its "5-day", it was wrong.
    let out = "The final answer is:\n\nTim deals with 120 calls during his 5-day work week.\n\n\
        This answer is stated plainly and structured, and it is the only information provided.";
    assert_a_result_first_answer_graded_right("120", out, Extraction::AnswerIs).await;
}

#[tokio::test]
async fn grading_an_output_says_where_the_answer_came_from_and_how_it_was_judged() {
    let g = Grader::new();
    let graded = g
        .grade("18", "Step 1 ... so \\boxed{\\$18}", AnswerStyle::Reasoned)
        .await;
    assert_eq!(graded.answer.as_deref(), Some("\\$18"));
    assert_eq!(graded.extraction, Some(Extraction::Boxed));
    assert!(graded.verdict.correct);
    assert_eq!(graded.verdict.judged, Judged::Numeric);

    let graded = g.grade("18", "I don't know.", AnswerStyle::Reasoned).await;
    assert_eq!(graded.verdict.judged, Judged::Unparsed);
    assert!(!graded.verdict.correct);
    assert!(graded.answer.is_none());
}

#[tokio::test]
async fn a_result_first_sentence_is_graded_by_its_number() {
    let g = Grader::new();
    let graded = g
        .grade(
            "18",
            "Janet makes $18 every day at the market.\n\nShe sells 9 eggs at $2.",
            AnswerStyle::ResultFirst,
        )
        .await;
    assert_eq!(graded.extraction, Some(Extraction::FirstLine));
    assert!(graded.verdict.correct, "{graded:?}");
    assert_eq!(graded.verdict.judged, Judged::Numeric);
    assert!(graded.verdict.note.unwrap().contains("last number"));
}
