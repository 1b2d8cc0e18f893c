//! What a turn ends with, for every scripted policy through the real engine in English and
//! Chinese and in both tool protocols: never engine text in the answer (no `[deepsolve:…]`
//! marker, no nudge, notice, ultimatum or refusal text of either language), and always a named
//! stop. The small-model behaviours (a prose plan, an echoed nudge) still end with the answer.

use deepsolve_core::{AnswerSource, Language, StopReason, Text, Texts};
use deepsolve_testkit::policy::{POLICY_NAMES, SMALL_MODEL_POLICY_NAMES, SMALL_MODEL_RESULT};

use crate::engine_turns::{Played, SCENARIOS, play, play_scenario, protocols_for};

const EN_PROBLEM: &str = "Find all real x with x^2 - 5x + 6 = 0.";
const ZH_PROBLEM: &str = "求出满足 x^2 - 5x + 6 = 0 的所有实数 x。";
const TOOL: &str = "a hard sub-derivation";

/// The engine texts that must never reach an answer.
const ENGINE_TEXTS: &[Text] = &[
    Text::NoticeCallPlan,
    Text::NoticeCallStep,
    Text::NudgeContinue,
    Text::NudgeActNow,
    Text::NudgePlanFirst,
    Text::NudgeOpenSteps,
    Text::Ultimatum,
    Text::NoticeRoundBudgetSpent,
    Text::NoticeTokenBudget,
    Text::RefuseOverLimit,
    Text::RefuseUnknownTool,
    Text::RefuseInvalidArguments,
    Text::RefuseDuplicate,
    Text::RefuseRepetition,
    Text::RefusePlanFirst,
    Text::RefuseNoImplementation,
    Text::RefuseFinishBatched,
];

/// The telling fixed pieces of every engine text of both languages (the text between its
/// placeholders, long enough that no answer holds it by chance).
pub(crate) fn engine_pieces() -> Vec<String> {
    let mut pieces = Vec::new();
    for language in Texts::LANGUAGES {
        let texts = Texts::builtin(language);
        for text in ENGINE_TEXTS {
            let template = texts.get(*text);
            let mut fixed = vec![template.to_string()];
            for name in Texts::placeholders(template) {
                let placeholder = format!("{{{name}}}");
                fixed = fixed
                    .iter()
                    .flat_map(|p| p.split(&placeholder))
                    .map(str::to_string)
                    .collect();
            }
            pieces.extend(
                fixed
                    .into_iter()
                    .map(|p| p.trim().to_string())
                    .filter(|p| p.chars().count() >= 16),
            );
        }
    }
    pieces
}

/// What is wrong with the end of one turn.
pub(crate) fn problems(turn: &str, played: &Played, pieces: &[String]) -> Vec<String> {
    let outcome = &played.outcome;
    let mut found = Vec::new();
    let stop = outcome.stop_reason;
    if StopReason::parse(stop.as_str()) != Some(stop) {
        found.push(format!("{turn}: the stop {stop:?} has no name"));
    }
    match outcome.answer.as_deref() {
        Some(answer) => {
            if answer.contains("[deepsolve:") {
                found.push(format!(
                    "{turn}: an engine marker in the answer: {answer:?}"
                ));
            }
            for piece in pieces.iter().filter(|p| answer.contains(p.as_str())) {
                found.push(format!("{turn}: engine text {piece:?} in the answer"));
            }
            // What the evaluation report would count (every sentence of every engine text,
            // case and emphasis ignored), in an answer in the model's words.
            let assembled = outcome.answer_source == Some(AnswerSource::StepSummaries);
            if let Some(piece) = deepsolve_eval::engine_text::find(answer).filter(|_| !assembled) {
                found.push(format!(
                    "{turn}: the report counts engine text {piece:?} in the answer {answer:?}"
                ));
            }
            if answer.trim().is_empty() {
                found.push(format!("{turn}: an empty answer"));
            }
        }
        None if stop.is_natural_answer() => {
            found.push(format!("{turn}: {stop} without an answer"));
        }
        None => {}
    }
    found
}

#[tokio::test]
async fn no_answer_of_any_policy_carries_engine_text_and_every_turn_ends_with_a_named_stop() {
    let pieces = engine_pieces();
    let mut problems_found = Vec::new();
    let mut turns = 0;
    for (language, problem) in [(Language::En, EN_PROBLEM), (Language::Zh, ZH_PROBLEM)] {
        for name in POLICY_NAMES.iter().chain(SMALL_MODEL_POLICY_NAMES) {
            for protocol in protocols_for(name) {
                let played = play(name, protocol, language, problem, TOOL).await;
                let turn = format!("{name} {protocol} {}", language.code());
                problems_found.extend(problems(&turn, &played, &pieces));
                turns += 1;
            }
        }
        for scenario in SCENARIOS {
            let played = play_scenario(scenario, language, problem, TOOL).await;
            let turn = format!("{} {}", scenario.name, language.code());
            problems_found.extend(problems(&turn, &played, &pieces));
            turns += 1;
        }
    }
    assert!(turns > 60, "only {turns} turns were played");
    assert!(problems_found.is_empty(), "{}", problems_found.join("\n"));
}

/// Every way `name` is played: both languages, both protocols.
async fn every_play(name: &str) -> Vec<(String, Played)> {
    let mut plays = Vec::new();
    for (language, problem) in [(Language::En, EN_PROBLEM), (Language::Zh, ZH_PROBLEM)] {
        for protocol in protocols_for(name) {
            let played = play(name, protocol, language, problem, TOOL).await;
            plays.push((format!("{name} {protocol} {}", language.code()), played));
        }
    }
    plays
}

/// The answer carries the result and nothing of the conversation about tools.
fn assert_useful(turn: &str, played: &Played) {
    let answer = played.outcome.answer.as_deref().unwrap_or_default();
    assert!(answer.contains(SMALL_MODEL_RESULT), "{turn}: {answer:?}");
    for meta in ["solve_plan", "apologize", "抱歉", "[deepsolve:"] {
        assert!(!answer.contains(meta), "{turn}: {meta:?} in {answer:?}");
    }
}

#[tokio::test]
async fn a_prose_planner_ends_with_its_prose_answer() {
    for (turn, played) in every_play("prose-planner").await {
        assert_eq!(
            played.outcome.stop_reason,
            StopReason::AnsweredWithoutPlan,
            "{turn}"
        );
        assert_eq!(
            played.outcome.answer_source,
            Some(AnswerSource::Model),
            "{turn}"
        );
        assert_useful(&turn, &played);
    }
}

#[tokio::test]
async fn a_nudge_echo_is_not_the_answer_the_forced_answer_is() {
    for (turn, played) in every_play("nudge-echo").await {
        assert_eq!(
            played.outcome.stop_reason,
            StopReason::EmptyRounds,
            "{turn}"
        );
        assert_eq!(
            played.outcome.answer_source,
            Some(AnswerSource::Forced),
            "{turn}"
        );
        assert_useful(&turn, &played);
        let forced = played.requests.last().expect("requests");
        assert!(
            forced.tools.is_empty() || forced.tool_choice == deepsolve_core::ToolChoice::None,
            "{turn}: the answer was asked for without tools"
        );
    }
}

#[tokio::test]
async fn hermes_calls_in_the_content_are_read_and_the_spine_is_followed() {
    for (turn, played) in every_play("hermes-in-content").await {
        assert_eq!(played.outcome.stop_reason, StopReason::Answered, "{turn}");
        assert!(played.outcome.solve.has_plan(), "{turn}");
        assert!(played.outcome.solve.open_steps().next().is_none(), "{turn}");
    }
}

#[tokio::test]
async fn a_model_that_ignores_tool_choice_is_answered_from_its_step_summaries() {
    for (turn, played) in every_play("ignores-tool-choice").await {
        assert_eq!(played.outcome.stop_reason, StopReason::MaxRounds, "{turn}");
        assert_eq!(
            played.outcome.answer_source,
            Some(AnswerSource::StepSummaries),
            "{turn}"
        );
    }
}
