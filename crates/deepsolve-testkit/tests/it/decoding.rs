//! The spine at decoding time (`solve.enforce`): each round's `tool_choice` follows the spine,
//! a reply may reason in text before the call it owes, the prompt's prefix only grows, a model
//! that ignores `tool_choice` falls back to the nudges, and no answer carries engine text.

use deepsolve_core::config::{Draft, Enforce};
use deepsolve_core::event::{TurnEvent, WarningKind};
use deepsolve_core::{
    AnswerSource, ChatRequest, EventKind, Honours, Language, PriorTurn, Protocol, Role, StopReason,
    Text, Texts, ToolChoice, TurnSpec,
};
use deepsolve_testkit::policy::{
    POLICY_NAMES, SMALL_MODEL_POLICY_NAMES, SMALL_MODEL_RESULT, by_name,
};
use deepsolve_testkit::{ScriptedModel, ScriptedOptions};

use crate::answers::{engine_pieces, problems};
use crate::engine_turns::{Played, Setup, play_model, protocols_for};

const EN_PROBLEM: &str = "Find all real x with x^2 - 5x + 6 = 0.";
const ZH_PROBLEM: &str = "求出满足 x^2 - 5x + 6 = 0 的所有实数 x。";

fn honouring() -> Honours {
    Honours {
        native_tools: true,
        tool_choice_required: true,
        tool_choice_named: true,
        ..Honours::default()
    }
}

/// One turn of policy `name` (two steps, with the `reason` tool), the model honouring
/// `honours`, the turn configured by `configure`.
async fn play_configured(
    name: &str,
    protocol: Protocol,
    language: Language,
    honours: Honours,
    configure: impl FnOnce(&mut TurnSpec),
) -> Played {
    let policy = by_name(name, 2, Some("reason".into())).expect("a known policy");
    let model = ScriptedModel::new(policy).with_options(ScriptedOptions {
        honours,
        ..ScriptedOptions::default()
    });
    let problem = match language {
        Language::Zh => ZH_PROBLEM,
        _ => EN_PROBLEM,
    };
    let setup = Setup {
        protocol,
        language,
        problem,
        tool_description: "a hard sub-derivation",
    };
    play_model(model, &setup, configure).await
}

/// One turn of policy `name` under `enforce`, the model honouring `honours`. Round 1 is asked
/// under the playbook (`solve.draft: off`): these tests are about what the rounds hold the
/// model to; the draft has its own, below.
async fn play_enforced(
    name: &str,
    protocol: Protocol,
    language: Language,
    enforce: Enforce,
    honours: Honours,
) -> Played {
    play_configured(name, protocol, language, honours, |spec: &mut TurnSpec| {
        spec.config.enforce = enforce;
        spec.config.draft = Draft::Off;
    })
    .await
}

/// One turn of policy `name` on the native protocol, held at decoding time by a model that
/// honours `tool_choice`.
async fn play_decoding(name: &str, language: Language) -> Played {
    play_enforced(
        name,
        Protocol::Native,
        language,
        Enforce::Decoding,
        honouring(),
    )
    .await
}

fn choices(played: &Played) -> Vec<ToolChoice> {
    played
        .requests
        .iter()
        .map(|r| r.tool_choice.clone())
        .collect()
}

/// The `tool_choice` each `round_started` event names.
fn announced(played: &Played) -> Vec<Option<String>> {
    rounds_announced(played).map(|a| a.tool_choice).collect()
}

/// What a round announced in its `round_started` event.
struct Announced {
    tool_choice: Option<String>,
    draft: bool,
    max_rounds: u32,
}

/// Each round's announcement, in order.
fn rounds_announced(played: &Played) -> impl Iterator<Item = Announced> + '_ {
    played.events.iter().filter_map(|e| match &e.kind {
        EventKind::RoundStarted {
            tool_choice,
            draft,
            max_rounds,
            ..
        } => Some(Announced {
            tool_choice: tool_choice.clone(),
            draft: *draft,
            max_rounds: *max_rounds,
        }),
        _ => None,
    })
}

/// `later` repeats `earlier` up to `earlier`'s last message (the ephemeral tail, or the
/// problem before a plan): the prompt only grew.
fn only_grew(earlier: &ChatRequest, later: &ChatRequest) -> bool {
    let kept = earlier.messages.len().saturating_sub(1);
    later.messages.len() > kept && later.messages[..kept] == earlier.messages[..kept]
}

#[tokio::test]
async fn decoding_asks_for_the_plan_the_steps_calls_and_then_the_answer() {
    for language in [Language::En, Language::Zh] {
        let played = play_decoding("thinks-before-calls", language).await;
        let turn = format!("thinks-before-calls {}", language.code());
        let outcome = &played.outcome;
        assert_eq!(outcome.stop_reason, StopReason::Answered, "{turn}");
        assert_eq!(outcome.answer_source, Some(AnswerSource::Model), "{turn}");
        assert!(outcome.solve.has_plan(), "{turn}");
        assert!(outcome.solve.open_steps().next().is_none(), "{turn}");
        let choices = choices(&played);
        assert_eq!(
            choices[0],
            ToolChoice::AutoAmong(vec!["solve_plan".into()]),
            "{turn}: room to think first, and a call may only be the plan"
        );
        assert_eq!(
            choices[1],
            ToolChoice::Named("solve_plan".into()),
            "{turn}: the plan is asked for by name"
        );
        assert_eq!(
            choices.last(),
            Some(&ToolChoice::None),
            "{turn}: {choices:?}"
        );
        // A step's call may be any tool but `solve_plan`, which a plan leaves nothing to do,
        // whether it is asked for or free.
        assert!(
            choices
                .iter()
                .any(|c| matches!(c, ToolChoice::AutoAmong(names)
                if names.iter().any(|n| n == "solve_finish_step")
                    && !names.iter().any(|n| n == "solve_plan"))),
            "{turn}: {choices:?}"
        );
        // Asked for, it may not be `solve_replan` either: a replan is the free round's choice.
        assert!(
            choices.iter().any(|c| matches!(c, ToolChoice::Among(names)
                if names.iter().any(|n| n == "solve_finish_step"))),
            "{turn}: {choices:?}"
        );
        for choice in &choices {
            if let ToolChoice::Among(names) = choice {
                assert!(
                    !names
                        .iter()
                        .any(|n| n == "solve_plan" || n == "solve_replan"),
                    "{turn}: {choices:?}"
                );
            }
        }
        // Every forced round follows a round that was free, and only added to its prompt, or
        // a step's forced round (a step has one free round).
        for (i, pair) in played.requests.windows(2).enumerate() {
            if matches!(
                pair[1].tool_choice,
                ToolChoice::Required | ToolChoice::Named(_) | ToolChoice::Among(_)
            ) {
                if pair[0].tool_choice.is_auto() {
                    assert!(only_grew(&pair[0], &pair[1]), "{turn}: round {}", i + 2);
                } else {
                    assert!(
                        matches!(pair[0].tool_choice, ToolChoice::Among(_)),
                        "{turn}: round {i}"
                    );
                }
            }
        }
        // The tools and the system prompt never change.
        let first = &played.requests[0];
        for request in &played.requests {
            assert_eq!(request.tools, first.tools, "{turn}");
            assert_eq!(request.messages[0], first.messages[0], "{turn}");
        }
        // The reasoning went into the context beside the call it led to: never two assistant
        // messages in a row.
        for request in &played.requests {
            for pair in request.messages.windows(2) {
                assert!(
                    !(pair[0].role == Role::Assistant && pair[1].role == Role::Assistant),
                    "{turn}: two assistant messages in a row"
                );
            }
        }
        let named: Vec<Option<String>> = announced(&played);
        assert_eq!(named.len(), played.requests.len(), "{turn}");
        assert_eq!(named[0].as_deref(), Some("auto"), "{turn}");
        assert_eq!(named[1].as_deref(), Some("solve_plan"), "{turn}");
        assert_eq!(named.last().cloned().flatten().as_deref(), Some("none"));
        let found = problems(&turn, &played, &engine_pieces());
        assert!(found.is_empty(), "{}", found.join("\n"));
    }
}

#[tokio::test]
async fn a_call_asked_for_after_reasoning_does_not_take_a_round_from_the_budget() {
    // The plan reasoned and then called for; two steps, each a free round, the call its
    // reasoning leads to (the work tool) and the step's close; then the answer: nine
    // requests, six rounds of the model's own. A budget of six holds the whole spine.
    let policy = by_name("thinks-before-calls", 2, Some("reason".into())).expect("a policy");
    let model = ScriptedModel::new(policy).with_options(ScriptedOptions {
        honours: honouring(),
        ..ScriptedOptions::default()
    });
    let setup = Setup {
        protocol: Protocol::Native,
        language: Language::En,
        problem: EN_PROBLEM,
        tool_description: "a hard sub-derivation",
    };
    let played = play_model(model, &setup, |spec: &mut TurnSpec| {
        spec.config.enforce = Enforce::Decoding;
        spec.config.max_rounds = 6;
        spec.config.settlement_rounds = 0;
    })
    .await;
    let outcome = &played.outcome;
    assert_eq!(
        outcome.stop_reason,
        StopReason::Answered,
        "{:#?}",
        played.events
    );
    assert!(outcome.solve.has_plan() && outcome.solve.open_steps().next().is_none());
    assert_eq!(played.requests.len(), 9);
    let budgets: Vec<(u32, u32)> = (played.events.iter())
        .filter_map(|e| match e.kind {
            EventKind::RoundStarted {
                round, max_rounds, ..
            } => Some((round, max_rounds)),
            _ => None,
        })
        .collect();
    assert_eq!(
        budgets,
        [
            (1, 6),
            (2, 7),
            (3, 7),
            (4, 8),
            (5, 8),
            (6, 8),
            (7, 9),
            (8, 9),
            (9, 9)
        ],
        "each asked-for call moves the budget's last round on by one"
    );
}

#[tokio::test]
async fn without_a_named_tool_choice_the_plan_is_a_required_call() {
    let played = play_enforced(
        "thinks-before-calls",
        Protocol::Native,
        Language::En,
        Enforce::Decoding,
        Honours::default(),
    )
    .await;
    assert_eq!(played.outcome.stop_reason, StopReason::Answered);
    let choices = choices(&played);
    assert_eq!(choices[1], ToolChoice::Required, "{choices:?}");
    assert!(!choices.iter().any(|c| matches!(c, ToolChoice::Named(_))));
    let notice = played.requests[1].messages.last().expect("a tail");
    assert!(
        notice.content.contains("`solve_plan`"),
        "{}",
        notice.content
    );
    // A required call of any tool could be a work tool: that round offers `solve_plan` alone,
    // and the next round the whole list again.
    let offered = |i: usize| -> Vec<String> {
        played.requests[i]
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect()
    };
    assert_eq!(offered(1), ["solve_plan"]);
    assert!(
        offered(0).len() > 1 && offered(2) == offered(0),
        "{:?}",
        offered(2)
    );
}

#[tokio::test]
async fn auto_enforces_at_decoding_time_only_where_the_model_honours_tool_choice() {
    let unknown = play_enforced(
        "thinks-before-calls",
        Protocol::Native,
        Language::En,
        Enforce::Auto,
        Honours::default(),
    )
    .await;
    assert!(
        choices(&unknown).iter().all(|c| *c == ToolChoice::Auto),
        "{:?}",
        choices(&unknown)
    );
    assert!(announced(&unknown).iter().all(Option::is_none));
    assert_eq!(
        unknown.outcome.stop_reason,
        StopReason::AnsweredWithoutPlan,
        "the prompt alone holds the spine, as before"
    );

    let honoured = play_enforced(
        "thinks-before-calls",
        Protocol::Native,
        Language::En,
        Enforce::Auto,
        honouring(),
    )
    .await;
    assert_eq!(honoured.outcome.stop_reason, StopReason::Answered);
    assert!(
        choices(&honoured)
            .iter()
            .any(|c| matches!(c, ToolChoice::Among(_)))
    );

    let prompt = play_enforced(
        "thinks-before-calls",
        Protocol::Native,
        Language::En,
        Enforce::Prompt,
        honouring(),
    )
    .await;
    assert!(choices(&prompt).iter().all(|c| *c == ToolChoice::Auto));
    assert_eq!(prompt.outcome.stop_reason, StopReason::AnsweredWithoutPlan);
}

#[tokio::test]
async fn a_well_behaved_model_under_decoding_makes_the_same_calls_in_as_many_rounds() {
    let prompt = play_enforced(
        "well-behaved",
        Protocol::Native,
        Language::En,
        Enforce::Prompt,
        Honours::default(),
    )
    .await;
    let decoding = play_enforced(
        "well-behaved",
        Protocol::Native,
        Language::En,
        Enforce::Decoding,
        Honours::default(),
    )
    .await;
    assert_eq!(decoding.outcome.stop_reason, StopReason::Answered);
    assert_eq!(decoding.requests.len(), prompt.requests.len());
    // The same requests but for `tool_choice`: auto while a call is due (a model that calls
    // on its own is never asked twice), none for the answer.
    for (p, d) in prompt.requests.iter().zip(&decoding.requests) {
        assert_eq!(p.messages, d.messages);
        assert_eq!(p.tools, d.tools);
    }
    assert_eq!(
        choices(&decoding).last(),
        Some(&ToolChoice::None),
        "{:?}",
        choices(&decoding)
    );
}

#[tokio::test]
async fn a_model_that_ignores_a_required_call_is_held_by_the_prompt_and_the_turn_ends() {
    for name in ["prose-planner", "nudge-echo", "ignores-tool-choice"] {
        for language in [Language::En, Language::Zh] {
            let played = play_enforced(
                name,
                Protocol::Native,
                language,
                Enforce::Decoding,
                Honours::default(),
            )
            .await;
            let turn = format!("{name} {}", language.code());
            assert!(
                played.requests.len() <= 16,
                "{turn}: {} requests",
                played.requests.len()
            );
            let found = problems(&turn, &played, &engine_pieces());
            assert!(found.is_empty(), "{}", found.join("\n"));
            let forced = played
                .requests
                .iter()
                .filter(|r| {
                    matches!(
                        r.tool_choice,
                        ToolChoice::Required | ToolChoice::Named(_) | ToolChoice::Among(_)
                    )
                })
                .count();
            assert!(forced <= 2, "{turn}: asked for a call {forced} times");
        }
    }
    // The prose planner's prose stands as its answer, as without decoding.
    let prose = play_enforced(
        "prose-planner",
        Protocol::Native,
        Language::En,
        Enforce::Decoding,
        Honours::default(),
    )
    .await;
    assert_eq!(prose.outcome.stop_reason, StopReason::AnsweredWithoutPlan);
    let warned = prose.events.iter().any(|e| {
        matches!(&e.kind, EventKind::Warning { message, .. } if message.contains("tool_choice is not honoured"))
    });
    assert!(warned, "the fall-back to the prompt is said");
}

#[tokio::test]
async fn under_decoding_no_answer_of_any_policy_carries_engine_text() {
    let pieces = engine_pieces();
    let mut found = Vec::new();
    for language in [Language::En, Language::Zh] {
        for name in POLICY_NAMES.iter().chain(SMALL_MODEL_POLICY_NAMES) {
            for protocol in protocols_for(name) {
                let played = play_enforced(
                    name,
                    protocol,
                    language,
                    Enforce::Decoding,
                    Honours::default(),
                )
                .await;
                let turn = format!("{name} {protocol} {} decoding", language.code());
                found.extend(problems(&turn, &played, &pieces));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[tokio::test]
async fn a_required_call_that_loops_to_the_output_limit_is_dropped_and_the_reasoning_stands() {
    // Written as text (in-process), or a native call cut short (llama.cpp's server).
    let plays = ["loops-in-forced-call", "loops-in-forced-native-call"]
        .into_iter()
        .flat_map(|name| [(name, Language::En), (name, Language::Zh)]);
    for (name, language) in plays {
        let played = play_decoding(name, language).await;
        let turn = format!("{name} {}", language.code());
        let outcome = &played.outcome;
        assert_eq!(
            outcome.stop_reason,
            StopReason::AnsweredWithoutPlan,
            "{turn}"
        );
        assert_eq!(outcome.answer_source, Some(AnswerSource::Model), "{turn}");
        let answer = outcome.answer.as_deref().unwrap_or_default();
        assert!(answer.contains("6 * 7 = 42"), "{turn}: {answer:?}");
        // One cut call, not asked again: a loop does not end differently with more room.
        assert_eq!(
            choices(&played),
            vec![
                ToolChoice::AutoAmong(vec!["solve_plan".into()]),
                ToolChoice::Named("solve_plan".into())
            ],
            "{turn}"
        );
        // The cut call never reached a later prompt.
        for request in &played.requests {
            for message in &request.messages {
                assert!(!message.content.contains("Fold a piece"), "{turn}");
            }
        }
        let said = played.events.iter().any(|e| {
            matches!(&e.kind, EventKind::Warning { message, .. } if message.contains("cut off by the output limit"))
        });
        assert!(said, "{turn}: the let-go is said");
        let found = problems(&turn, &played, &engine_pieces());
        assert!(found.is_empty(), "{}", found.join("\n"));
    }
}

#[tokio::test]
async fn once_decoding_steps_in_each_tail_names_the_step_to_work_on() {
    for (language, directive) in [
        (Language::En, "Work step S1 now"),
        (Language::Zh, "现在完成步骤 S1"),
    ] {
        let played = play_decoding("thinks-before-calls", language).await;
        let tails: Vec<&str> = played
            .requests
            .iter()
            .filter_map(|r| r.messages.last())
            .filter(|m| m.role == Role::User)
            .map(|m| m.content.as_str())
            .collect();
        assert!(
            tails.iter().any(|t| t.contains(directive)),
            "{}: {tails:#?}",
            language.code()
        );
    }
    // A model that calls on its own is never asked for a call, and never shown the line.
    let played = play_decoding("well-behaved", Language::En).await;
    for request in &played.requests {
        for message in &request.messages {
            assert!(!message.content.contains("Work step"), "{message:?}");
        }
    }
}

#[tokio::test]
async fn a_free_round_that_copies_its_tail_to_the_output_limit_is_not_continued_or_kept() {
    for language in [Language::En, Language::Zh] {
        let played = play_decoding("copies-its-tail", language).await;
        let turn = format!("copies-its-tail {}", language.code());
        assert_eq!(played.outcome.stop_reason, StopReason::Answered, "{turn}");
        assert!(played.outcome.solve.open_steps().next().is_none(), "{turn}");
        let shown: Vec<String> = played
            .requests
            .iter()
            .filter_map(|r| r.messages.last())
            .filter(|m| m.role == Role::User)
            .flat_map(|m| m.content.lines().map(str::trim).map(String::from))
            .filter(|line| line.chars().count() > 12)
            .collect();
        for request in &played.requests {
            let (_tail, kept) = request.messages.split_last().expect("messages");
            for message in kept {
                assert!(
                    !message.content.contains("[deepsolve:continue]"),
                    "{turn}: a cut copy was continued"
                );
                if message.role == Role::Assistant {
                    for line in &shown {
                        assert!(
                            !message.content.contains(line.as_str()),
                            "{turn}: a copied tail line was kept: {line:?}"
                        );
                    }
                }
            }
        }
        let found = problems(&turn, &played, &engine_pieces());
        assert!(found.is_empty(), "{}", found.join("\n"));
    }
}

#[tokio::test]
async fn a_call_written_where_the_answer_was_due_is_set_aside_and_the_round_asked_without_tools() {
    // The 1.5B model, every step finished, wrote its last `solve_finish_step` call again as
    // the answer round's text (3 of 17 turns in-process, 3 of 20 on llama.cpp's server); the
    // step summaries, or a forced answer, stood as the answer. While tools are offered the
    // policy writes the call; offered none, it answers.
    for language in [Language::En, Language::Zh] {
        let played = play_decoding("answers-with-a-call", language).await;
        let turn = format!("answers-with-a-call {}", language.code());
        assert_eq!(played.outcome.stop_reason, StopReason::Answered, "{turn}");
        assert_eq!(
            played.outcome.answer_source,
            Some(AnswerSource::Model),
            "{turn}"
        );
        let answer = played.outcome.answer.as_deref().unwrap_or_default();
        assert!(answer.contains(SMALL_MODEL_RESULT), "{turn}: {answer:?}");
        assert!(!answer.contains("solve_finish_step"), "{turn}: {answer:?}");
        let [.., answer_round, again] = played.requests.as_slice() else {
            panic!("{turn}: fewer than two requests");
        };
        assert_eq!(answer_round.tool_choice, ToolChoice::None, "{turn}");
        assert!(
            !answer_round.tools.is_empty(),
            "{turn}: the answer round keeps the list"
        );
        assert!(
            again.tools.is_empty(),
            "{turn}: asked again offering no tools"
        );
        let kept = answer_round.messages.len() - 1;
        assert_eq!(
            again.messages[..again.messages.len() - 1],
            answer_round.messages[..kept],
            "{turn}: the call set aside left nothing"
        );
        let found = problems(&turn, &played, &engine_pieces());
        assert!(found.is_empty(), "{}", found.join("\n"));
    }
}

#[tokio::test]
async fn a_call_written_again_offered_no_tools_leads_to_the_forced_answer_without_tools() {
    for language in [Language::En, Language::Zh] {
        let played = play_decoding("answers-with-a-call-stubborn", language).await;
        let turn = format!("answers-with-a-call-stubborn {}", language.code());
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
        let answer = played.outcome.answer.as_deref().unwrap_or_default();
        assert!(answer.contains(SMALL_MODEL_RESULT), "{turn}: {answer:?}");
        let [.., answer_round, again, forced] = played.requests.as_slice() else {
            panic!("{turn}: fewer than three requests");
        };
        assert!(!answer_round.tools.is_empty(), "{turn}");
        assert!(again.tools.is_empty() && forced.tools.is_empty(), "{turn}");
        let asked_bare = (played.requests.iter())
            .filter(|r| r.tools.is_empty())
            .count();
        assert_eq!(
            asked_bare, 2,
            "{turn}: the answer round is asked again once"
        );
        let found = problems(&turn, &played, &engine_pieces());
        assert!(found.is_empty(), "{}", found.join("\n"));
    }
}

#[tokio::test]
async fn a_summary_copied_from_an_earlier_step_is_refused_once_then_stands() {
    for language in [Language::En, Language::Zh] {
        let played = play_decoding("copies-summaries", language).await;
        let turn = format!("copies-summaries {}", language.code());
        assert_eq!(played.outcome.stop_reason, StopReason::Answered, "{turn}");
        let summaries: Vec<_> = (played.outcome.solve.steps.iter())
            .map(|s| s.summary.clone())
            .collect();
        assert_eq!(summaries.len(), 2, "{turn}");
        assert_eq!(
            summaries[0], summaries[1],
            "{turn}: the copy stands when sent again"
        );
        let refusals = (played.events.iter())
            .filter(|e| matches!(&e.kind, EventKind::ToolResult { name, ok: false, .. } if name == "solve_finish_step"))
            .count();
        assert_eq!(refusals, 1, "{turn}: refused once");
        let found = problems(&turn, &played, &engine_pieces());
        assert!(found.is_empty(), "{}", found.join("\n"));
    }
}

#[tokio::test]
async fn a_step_has_one_free_round_and_the_reasoning_before_the_plan_stays_for_the_turn() {
    // The 1.5B model, given a free round after every result, wrote the reasoning it had
    // written before its plan again, word for word, round after round, until the repetition
    // guard ended the turn; its answer was that copy. One free round per step ends that.
    // The reasoning itself stays: dropped once the plan was made, a right first working was
    // lost, and the steps computed it again, worse.
    for language in [Language::En, Language::Zh] {
        let played = play_decoding("thinks-before-calls", language).await;
        let turn = format!("thinks-before-calls {}", language.code());
        assert_eq!(played.outcome.stop_reason, StopReason::Answered, "{turn}");
        let steps = played.outcome.solve.steps.len();
        let free_with_plan = (played.requests.iter())
            .filter(|r| {
                matches!(&r.tool_choice, ToolChoice::AutoAmong(names)
                    if names.iter().all(|n| n != "solve_plan"))
            })
            .count();
        assert_eq!(free_with_plan, steps, "{turn}: one free round per step");
        let required_with_plan = (played.requests.iter())
            .filter(|r| matches!(r.tool_choice, ToolChoice::Among(_)))
            .count();
        assert!(
            required_with_plan > steps,
            "{turn}: a step's work call and its finish are both asked for: {:?}",
            choices(&played)
        );
        // The plan asked for after the reasoning sees it; every later request, through the
        // answer's, has it right after the problem, joined to the plan's call, and that call's
        // result after it.
        let planned_at = (played.requests.iter())
            .position(|r| r.tool_choice == ToolChoice::Named("solve_plan".into()))
            .expect("the plan asked for by name");
        let asked = &played.requests[planned_at];
        let problem = &asked.messages[asked.messages.len() - 3];
        let reasoning = &asked.messages[asked.messages.len() - 2];
        assert_eq!(reasoning.role, Role::Assistant, "{turn}");
        assert!(!reasoning.content.is_empty(), "{turn}");
        let later = &played.requests[planned_at + 1..];
        assert!(
            later.len() > 2 * steps,
            "{turn}: the steps and the answer came after the plan"
        );
        for (i, request) in later.iter().enumerate() {
            let at = (request.messages.iter())
                .position(|m| m.content == problem.content)
                .expect("the problem is in every request");
            let (plan_call, plan_result) = (&request.messages[at + 1], &request.messages[at + 2]);
            let round = i + 1;
            assert!(
                plan_call.content.starts_with(&reasoning.content),
                "{turn}: request {round} after the plan keeps the reasoning"
            );
            assert!(
                plan_call.tool_calls.iter().any(|c| c.name == "solve_plan"),
                "{turn}: request {round}: joined to the plan's call"
            );
            assert_eq!(plan_result.role, Role::Tool, "{turn}: request {round}");
        }
        assert_eq!(
            later.last().map(|r| &r.tool_choice),
            Some(&ToolChoice::None)
        );
    }
}

/// `stray` (a plan tool) was called once where a step's call was due, was not run, and from
/// the round asked again on, no request offers a plan tool, and the list stays one list.
fn assert_plan_tools_withdrawn_once(played: &Played, turn: &str, stray: &str) {
    let offers = |r: &ChatRequest, name: &str| r.tools.iter().any(|t| t.name == name);
    let run = (played.events.iter())
        .filter(|e| matches!(&e.kind, EventKind::ToolCall { name, .. } if name == stray))
        .count();
    let planned = usize::from(stray == "solve_plan");
    assert_eq!(
        run, planned,
        "{turn}: no {stray} ran where a step's call was due"
    );
    let warned = (played.events.iter()).filter(|e| {
        matches!(&e.kind, EventKind::Warning { message, .. }
            if message.contains(stray) && message.contains("not run"))
    });
    assert_eq!(warned.count(), 1, "{turn}: {stray} was called there once");
    let withdrawn_at = (played.requests.iter())
        .position(|r| !offers(r, "solve_plan"))
        .expect("the plan tools withdrawn");
    let (strayed, again) = (
        &played.requests[withdrawn_at - 1],
        &played.requests[withdrawn_at],
    );
    assert!(
        matches!(strayed.tool_choice, ToolChoice::Among(_)) && offers(strayed, stray),
        "{turn}: withdrawn after a required round that offered {stray}"
    );
    // The stray reply left nothing: only the tail (its round count) differs.
    let kept = strayed.messages.len() - 1;
    assert_eq!(
        strayed.messages[..kept],
        again.messages[..again.messages.len() - 1],
        "{turn}: the stray reply left nothing"
    );
    let listed: Vec<&str> = again.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(
        matches!(&again.tool_choice, ToolChoice::Among(names) if names.iter().map(String::as_str).eq(listed.iter().copied())),
        "{turn}: the round asked again lists what it admits"
    );
    let later = &played.requests[withdrawn_at..];
    for request in later {
        assert!(!offers(request, "solve_plan"), "{turn}");
        assert!(!offers(request, "solve_replan"), "{turn}");
        if request.tool_choice != ToolChoice::None {
            assert_eq!(request.tools, again.tools, "{turn}: one list from then on");
        }
    }
    assert!(
        later.iter().any(|r| r.tool_choice.is_auto()),
        "{turn}: a free round came after it: {:?}",
        choices(played)
    );
}

#[tokio::test]
async fn a_replan_where_a_step_was_due_is_not_run_and_withdraws_the_plan_tools_for_the_turn() {
    // Sent plain `required`, llama.cpp's server let the 1.5B model call `solve_replan` where
    // the spine wanted the step's work or its finish: the plan lost the steps after the
    // current one.
    for language in [Language::En, Language::Zh] {
        let played = play_decoding("replans-when-forced", language).await;
        let turn = format!("replans-when-forced {}", language.code());
        assert_eq!(played.outcome.stop_reason, StopReason::Answered, "{turn}");
        assert_eq!(
            played.outcome.solve.steps.len(),
            2,
            "{turn}: the plan kept its steps"
        );
        assert!(played.outcome.solve.steps.iter().all(|s| s.done), "{turn}");
        let replans_run = (played.events.iter())
            .filter(
                |e| matches!(&e.kind, EventKind::ToolCall { name, .. } if name == "solve_replan"),
            )
            .count();
        assert_eq!(replans_run, 0, "{turn}: no replan ran");
        assert_plan_tools_withdrawn_once(&played, &turn, "solve_replan");
        let found = problems(&turn, &played, &engine_pieces());
        assert!(found.is_empty(), "{}", found.join("\n"));
    }
}

#[tokio::test]
async fn a_work_call_a_step_makes_again_leaves_only_the_steps_finish() {
    // The 1.5B model on llama.cpp's server ran `zack_age = 21 / 2` eight times in one step, a
    // malformed copy now and then keeping the repetition guard's streak short, until the turn
    // ran out of rounds.
    for language in [Language::En, Language::Zh] {
        let played = play_decoding("repeats-its-work-call", language).await;
        let turn = format!("repeats-its-work-call {}", language.code());
        assert_eq!(played.outcome.stop_reason, StopReason::Answered, "{turn}");
        assert!(played.outcome.solve.steps.iter().all(|s| s.done), "{turn}");
        let finish_only = |r: &ChatRequest| matches!(&r.tool_choice, ToolChoice::Among(names) if names == &["solve_finish_step"]);
        // Each step: the call, a malformed copy, the call again — then only the finish.
        let work_calls_run = (played.events.iter())
            .filter(|e| matches!(&e.kind, EventKind::ToolCall { name, .. } if name == "reason"))
            .count();
        let steps = played.outcome.solve.steps.len();
        assert_eq!(work_calls_run, 3 * steps, "{turn}: {:?}", choices(&played));
        let asked_to_finish = played.requests.iter().filter(|r| finish_only(r)).count();
        assert!(asked_to_finish >= steps, "{turn}: {:?}", choices(&played));
        // No round after a step's finish is held to it: the next step's work is free again.
        for pair in played.requests.windows(2) {
            if finish_only(&pair[0]) && !finish_only(&pair[1]) {
                assert!(
                    !matches!(&pair[1].tool_choice, ToolChoice::Among(names) if !names.iter().any(|n| n == "reason")),
                    "{turn}"
                );
            }
        }
        let found = problems(&turn, &played, &engine_pieces());
        assert!(found.is_empty(), "{}", found.join("\n"));
    }
}

#[tokio::test]
async fn a_plan_called_again_where_a_step_was_due_withdraws_the_plan_tools_for_the_turn() {
    // Sent plain `required`, llama.cpp's server let the 1.5B model call `solve_plan` again in
    // 7 of 99 required rounds; narrowing the list for one round and restoring it cost two
    // prefills of the whole prompt each time.
    for language in [Language::En, Language::Zh] {
        let played = play_decoding("plans-again-when-forced", language).await;
        let turn = format!("plans-again-when-forced {}", language.code());
        assert_eq!(played.outcome.stop_reason, StopReason::Answered, "{turn}");
        assert_eq!(
            played.outcome.solve.steps.len(),
            2,
            "{turn}: the plan stood"
        );
        assert!(played.outcome.solve.steps.iter().all(|s| s.done), "{turn}");
        assert_plan_tools_withdrawn_once(&played, &turn, "solve_plan");
        let found = problems(&turn, &played, &engine_pieces());
        assert!(found.is_empty(), "{}", found.join("\n"));
    }
}

#[tokio::test]
async fn once_the_model_invents_a_tool_result_every_request_stops_where_one_would_begin() {
    // The 1.5B model on llama.cpp's server opened step rounds with `<tool_response>` and
    // wrote a result nothing produced, 100–200 tokens each time, all of it cut.
    let stops = |r: &ChatRequest| r.stop.iter().any(|s| s == "<tool_response");
    for language in [Language::En, Language::Zh] {
        let honours = Honours {
            stop_sequences: true,
            ..honouring()
        };
        let played = play_enforced(
            "invents-tool-responses",
            Protocol::Native,
            language,
            Enforce::Decoding,
            honours,
        )
        .await;
        let turn = format!("invents-tool-responses {}", language.code());
        assert_eq!(played.outcome.stop_reason, StopReason::Answered, "{turn}");
        let invented = |e: &&TurnEvent| {
            matches!(
                &e.kind,
                EventKind::Warning {
                    kind: WarningKind::InventedToolResponse,
                    ..
                }
            )
        };
        assert_eq!(
            played.events.iter().filter(invented).count(),
            1,
            "{turn}: invented once, then stopped before it"
        );
        let first = (played.requests.iter())
            .position(stops)
            .expect("a request stops at <tool_response");
        assert!(first > 0, "{turn}: not before the model invented one");
        assert!(
            played.requests[first..].iter().all(stops),
            "{turn}: every later request stops there"
        );
        assert!(
            played.requests[first - 1].tool_choice == ToolChoice::Auto
                || matches!(
                    played.requests[first - 1].tool_choice,
                    ToolChoice::AutoAmong(_)
                ),
            "{turn}: the round before was a free one"
        );
        let found = problems(&turn, &played, &engine_pieces());
        assert!(found.is_empty(), "{}", found.join("\n"));

        // An endpoint not known to honour stop sequences is not sent one.
        let played = play_decoding("invents-tool-responses", language).await;
        assert!(!played.requests.iter().any(stops), "{turn}: not probed");
    }
}

/// One turn of policy `name` held at decoding time, `draft` and `honours` as given, with
/// `configure` on top.
async fn play_draft(
    name: &str,
    language: Language,
    draft: Draft,
    honours: Honours,
    configure: impl FnOnce(&mut TurnSpec),
) -> Played {
    play_configured(
        name,
        Protocol::Native,
        language,
        honours,
        |spec: &mut TurnSpec| {
            spec.config.enforce = Enforce::Decoding;
            spec.config.draft = draft;
            configure(spec);
        },
    )
    .await
}

/// Whether round 1 was the draft: no tools, the short prompt and the problem alone.
fn drafted(played: &Played, language: Language) -> bool {
    let first = &played.requests[0];
    let texts = Texts::builtin(language);
    first.tools.is_empty()
        && first.messages.len() == 2
        && first.messages[0].role == Role::System
        && first.messages[0].content == texts.get(Text::DraftSystem)
        && first.messages[1].role == Role::User
}

/// The `draft` flag of each `round_started` event.
fn draft_flags(played: &Played) -> Vec<bool> {
    rounds_announced(played).map(|a| a.draft).collect()
}

#[tokio::test]
async fn a_new_problem_is_drafted_plainly_and_the_plan_starts_from_the_draft() {
    for language in [Language::En, Language::Zh] {
        // `auto`: the model is not known to plan on its own.
        let played = play_draft(
            "thinks-before-calls",
            language,
            Draft::Auto,
            honouring(),
            |_| {},
        )
        .await;
        let turn = format!("thinks-before-calls {}", language.code());
        let outcome = &played.outcome;
        assert_eq!(outcome.stop_reason, StopReason::Answered, "{turn}");
        assert_eq!(outcome.answer_source, Some(AnswerSource::Model), "{turn}");
        assert!(outcome.solve.has_plan(), "{turn}");
        assert!(outcome.solve.open_steps().next().is_none(), "{turn}");
        assert!(
            drafted(&played, language),
            "{turn}: {:#?}",
            played.requests[0]
        );
        let problem = &played.requests[0].messages[1].content;
        // Then the playbook's conversation: the same problem, the draft kept as the model's
        // reasoning, and the plan asked for by name.
        let second = &played.requests[1];
        assert!(!second.tools.is_empty(), "{turn}");
        assert_eq!(second.tool_choice, ToolChoice::Named("solve_plan".into()));
        assert_ne!(second.messages[0], played.requests[0].messages[0], "{turn}");
        assert_eq!(&second.messages[1].content, problem, "{turn}");
        assert_eq!(second.messages[2].role, Role::Assistant, "{turn}");
        assert!(!second.messages[2].content.trim().is_empty(), "{turn}");
        // From there the tools and the system prompt never change, and the prompt only grows
        // where a call follows reasoning.
        for request in &played.requests[1..] {
            assert_eq!(request.tools, second.tools, "{turn}");
            assert_eq!(request.messages[0], second.messages[0], "{turn}");
        }
        for pair in played.requests[1..].windows(2) {
            if pair[1].tool_choice == ToolChoice::Named("solve_plan".into()) {
                assert!(only_grew(&pair[0], &pair[1]), "{turn}");
            }
        }
        let flags = draft_flags(&played);
        assert_eq!(flags.len(), played.requests.len(), "{turn}");
        assert!(
            flags[0] && !flags[1..].iter().any(|f| *f),
            "{turn}: {flags:?}"
        );
        let named = announced(&played);
        assert_eq!(
            named[0].as_deref(),
            Some("none"),
            "{turn}: the draft is text only"
        );
        assert_eq!(named[1].as_deref(), Some("solve_plan"), "{turn}");
        let found = problems(&turn, &played, &engine_pieces());
        assert!(found.is_empty(), "{}", found.join("\n"));
    }
}

/// The `max_rounds` each `round_started` event announced.
fn announced_budgets(played: &Played) -> Vec<u32> {
    rounds_announced(played).map(|a| a.max_rounds).collect()
}

#[tokio::test]
async fn drafts_go_on_until_a_result_is_reached_twice_and_the_plan_and_answer_hear_of_it() {
    for language in [Language::En, Language::Zh] {
        let texts = Texts::builtin(language);
        // The notice `text` is in `request`'s tail (its words before the first placeholder).
        let said = |text: Text, request: &ChatRequest| {
            let tail = &request.messages.last().expect("a message").content;
            let opening = texts.get(text).split(['{', ':', '：']).next();
            opening.is_some_and(|s| tail.contains(s.trim()))
        };
        let differ_notice = |request: &ChatRequest| said(Text::NoticeDraftsDiffer, request);
        let agree_notice = |request: &ChatRequest| said(Text::NoticeDraftsAgree, request);
        let answer_notice = |request: &ChatRequest| said(Text::NoticeDraftsAnswer, request);
        for (name, kept, differing) in [
            // 41, 42, $42.00: the second and third agree; the second is kept, and the plan
            // and the answer hear the result.
            ("drafts-agree-late", "boxed{42}", None),
            // 41, 42, 43: none agrees; the first is kept, and the plan hears all three.
            (
                "drafts-never-agree",
                "boxed{41}",
                Some(r"\boxed{41}, \boxed{42}, \boxed{43}"),
            ),
        ] {
            let turn = format!("{name} {}", language.code());
            let played = play_draft(name, language, Draft::Auto, honouring(), |_| {}).await;
            let outcome = &played.outcome;
            assert_eq!(outcome.stop_reason, StopReason::Answered, "{turn}");
            assert!(outcome.solve.has_plan(), "{turn}");
            assert!(outcome.solve.open_steps().next().is_none(), "{turn}");
            // Three drafts, each the same plain request, then the plan asked for by name.
            assert_eq!(
                &draft_flags(&played)[..4],
                [true, true, true, false],
                "{turn}"
            );
            for request in &played.requests[..3] {
                assert_eq!(request.messages, played.requests[0].messages, "{turn}");
                assert!(request.tools.is_empty(), "{turn}");
            }
            assert!(drafted(&played, language), "{turn}");
            let plan_round = &played.requests[3];
            assert_eq!(
                plan_round.tool_choice,
                ToolChoice::Named("solve_plan".into()),
                "{turn}"
            );
            let reasoning = &plan_round.messages[2];
            assert_eq!(reasoning.role, Role::Assistant, "{turn}");
            assert!(
                reasoning.content.contains(kept),
                "{turn}: {:?}",
                reasoning.content
            );
            // The drafts after the first do not take from the round budget.
            let budgets = announced_budgets(&played);
            assert_eq!(budgets[2], budgets[0] + 2, "{turn}: {budgets:?}");
            let tail = &plan_round.messages.last().expect("a tail").content;
            let (answer_round, step_rounds) = played.requests[4..].split_last().expect("rounds");
            let answer_tail = &answer_round.messages.last().expect("a tail").content;
            match differing {
                Some(results) => {
                    assert!(tail.contains(results), "{turn}: {tail}");
                    assert!(differ_notice(plan_round), "{turn}: {tail}");
                    assert!(!agree_notice(plan_round), "{turn}: {tail}");
                    assert!(!answer_notice(answer_round), "{turn}: {answer_tail}");
                }
                None => {
                    assert!(!differ_notice(plan_round), "{turn}");
                    // The agreed result as the first working that reached it wrote it.
                    assert!(agree_notice(plan_round), "{turn}: {tail}");
                    assert!(tail.contains(r"\boxed{42}"), "{turn}: {tail}");
                    assert!(answer_notice(answer_round), "{turn}: {answer_tail}");
                    assert!(answer_tail.contains(r"\boxed{42}"), "{turn}: {answer_tail}");
                }
            }
            assert_eq!(answer_round.tool_choice, ToolChoice::None, "{turn}");
            // Once there is a plan, the plan's notices are not said again; the answer's is
            // said only once every step is done.
            for round in step_rounds {
                assert!(!differ_notice(round) && !agree_notice(round), "{turn}");
                assert!(!answer_notice(round), "{turn}");
            }
            let found = problems(&turn, &played, &engine_pieces());
            assert!(found.is_empty(), "{}", found.join("\n"));
        }
        // Two that agree at once need no third; one draft is what `solve.drafts: 1` asks.
        let played = play_draft(
            "drafts-never-agree",
            language,
            Draft::Auto,
            honouring(),
            |spec| {
                spec.config.drafts = 1;
            },
        )
        .await;
        assert_eq!(&draft_flags(&played)[..2], [true, false]);
        assert!(!differ_notice(&played.requests[1]) && !agree_notice(&played.requests[1]));
        assert!(played.requests[1].messages[2].content.contains("boxed{41}"));
    }
}

/// The answer's round is reminded of the drafts' agreed result; the answer stands whatever it
/// boxes. (Sending an answer that left the result back once was measured with the 1.5B model:
/// of 30 problems it mended none and spoiled one, a round spent in 9 of them.)
#[tokio::test]
async fn an_answer_that_leaves_the_agreed_result_stands() {
    for language in [Language::En, Language::Zh] {
        let texts = Texts::builtin(language);
        let reminder = texts.render(Text::NoticeDraftsAnswer, &[("result", &r"\boxed{42}")]);
        for (name, answer) in [
            ("drafts-agree-late", Some(r"\boxed{42}")),
            ("drafts-agree-answer-differs", Some(r"\boxed{41}")),
            ("drafts-agree-answer-unboxed", None),
        ] {
            let turn = format!("{name} {}", language.code());
            let played = play_draft(name, language, Draft::Auto, honouring(), |_| {}).await;
            let outcome = &played.outcome;
            assert_eq!(outcome.stop_reason, StopReason::Answered, "{turn}");
            assert_eq!(outcome.answer_source, Some(AnswerSource::Model), "{turn}");
            let given = outcome.answer.as_deref().unwrap_or_default();
            match answer {
                Some(boxed) => assert!(given.contains(boxed), "{turn}: {given}"),
                None => assert!(!given.contains(r"\boxed"), "{turn}: {given}"),
            }
            // One answer round, the turn's last, reminded of the result; no nudge after it.
            let answer_rounds: Vec<usize> = (played.requests.iter().enumerate())
                .filter(|(_, r)| r.tool_choice == ToolChoice::None && !r.tools.is_empty())
                .map(|(i, _)| i)
                .collect();
            assert_eq!(answer_rounds, [played.requests.len() - 1], "{turn}");
            let tail = &played.requests[answer_rounds[0]].messages;
            let tail = &tail.last().expect("a tail").content;
            assert!(tail.contains(&reminder), "{turn}: {tail}");
            let found = problems(&turn, &played, &engine_pieces());
            assert!(found.is_empty(), "{}", found.join("\n"));
        }
    }
}

#[tokio::test]
async fn no_draft_for_a_model_that_plans_on_its_own_or_a_problem_that_does_not_stand_alone() {
    let plans = Honours {
        plans_unforced: Some(true),
        ..honouring()
    };
    let cases: Vec<(&str, Played)> = vec![
        (
            "plans on its own",
            play_draft(
                "thinks-before-calls",
                Language::En,
                Draft::Auto,
                plans,
                |_| {},
            )
            .await,
        ),
        (
            "draft off",
            play_draft(
                "thinks-before-calls",
                Language::En,
                Draft::Off,
                honouring(),
                |_| {},
            )
            .await,
        ),
        (
            "held by the prompt",
            play_draft(
                "thinks-before-calls",
                Language::En,
                Draft::On,
                honouring(),
                |spec| {
                    spec.config.enforce = Enforce::Prompt;
                },
            )
            .await,
        ),
        (
            "a follow-up",
            play_draft(
                "thinks-before-calls",
                Language::En,
                Draft::On,
                honouring(),
                |spec| {
                    spec.history = vec![PriorTurn {
                        problem: "What is 2 + 3?".into(),
                        answer: "5".into(),
                        solve: None,
                    }];
                },
            )
            .await,
        ),
    ];
    for (case, played) in &cases {
        assert!(!drafted(played, Language::En), "{case}");
        assert!(!played.requests[0].tools.is_empty(), "{case}");
        assert!(!draft_flags(played).iter().any(|f| *f), "{case}");
    }
    // `on` drafts even for a model that plans on its own.
    let played = play_draft(
        "thinks-before-calls",
        Language::En,
        Draft::On,
        Honours {
            plans_unforced: Some(true),
            ..honouring()
        },
        |_| {},
    )
    .await;
    assert!(drafted(&played, Language::En));
    assert_eq!(played.outcome.stop_reason, StopReason::Answered);
}
