//! Scripted model behaviours.
//!
//! A [`Policy`] reads one request and answers one [`Reply`]. The scripted solvers here are
//! deterministic and derive their state from the conversation (see
//! [`PolicyRequest`]), so whatever the engine folds, nudges or retries,
//! the next move follows from what the model can see. Every policy answers a forced-answer
//! request (`tool_choice: "none"`) with a final text and a tool-less sub-call with a
//! derivation ending in `Answer: …`, unless its docs say otherwise.

mod bench;
mod geogebra;
mod kb_cite;
mod markup;
mod misbehave;
pub(crate) mod moves;
mod script;
mod showcase;
mod small_model;
mod solver;
mod vision;
mod web_cite;
mod wrappers;

use std::sync::Arc;

pub use bench::{CODE_NARRATION, FIRST_CODE, FirstCodeCall};
pub use geogebra::{
    FIGURE_COMMANDS, GEOGEBRA_GOALS, GEOGEBRA_PROBLEM, Geogebra, MISSPELT, table_value,
};
pub use kb_cite::{FirstHit, KB_CITE_GOALS, KbCite, first_hit};
pub use markup::{NoNativeTools, ReasoningModel, THINK_MARKER, TagsMode, VendorMarkup};
pub use misbehave::{
    AnswerWithOpenSteps, IdenticalLoop, MalformedArgs, NeverEnding, OutOfOrderFinisher,
    ParallelFlood, PlanSkipper, ReasoningOnly, ReplanPastBudget, SecondPlan, UnknownTool,
};
pub use moves::{MALFORMED_PLAN_ARGS, summary_for, work_args};
pub use script::Script;
pub use showcase::{
    HOSTILE_MARKUP, SHOWCASE_CODE, SHOWCASE_PROBLEM, SHOWCASE_ROOTS_LINE, Showcase, ShowcaseVariant,
};
pub use small_model::{
    AnswersWithACall, CopiesItsTail, CopiesSummaries, DraftsDiffer, FencedJsonCalls,
    FinishesOneThenProbes, HermesInContent, IgnoresToolChoice, InventedOutput,
    InventsToolResponses, LoopsInForcedCall, LoopsInForcedNativeCall, NudgeEcho,
    PlansAgainWhenForced, ProsePlanner, RepeatsItsWorkCall, ReplansWhenForced, SMALL_MODEL_RESULT,
    TalksAboutItsAnswer, ThinksBeforeCalls,
};
pub use solver::WellBehaved;
pub use vision::{
    ANGLE_C, FIGURE_TOOL, NO_FIGURE, VISION_GOALS, Vision, answered_angle, figure_commands,
};
pub use web_cite::{WEB_CITE_GOALS, WebCite, result_urls};
pub use wrappers::{CutBeforeOutput, FlakyStatus, NoIndexDeltas, RepeatedIdName, WithStyle};

use crate::reply::Reply;
use crate::request::PolicyRequest;
use crate::tags::MarkupStyle;

/// A scripted model: one reply per request. Implementations may keep interior state (counters)
/// but should prefer reading the conversation, which survives retries and folds.
pub trait Policy: Send + Sync {
    fn reply(&self, request: &PolicyRequest) -> Reply;
}

impl<P: Policy + ?Sized> Policy for Box<P> {
    fn reply(&self, request: &PolicyRequest) -> Reply {
        (**self).reply(request)
    }
}

impl<P: Policy + ?Sized> Policy for Arc<P> {
    fn reply(&self, request: &PolicyRequest) -> Reply {
        (**self).reply(request)
    }
}

/// A closure as a policy, for one-off tests.
pub struct FnPolicy<F>(pub F);

impl<F: Fn(&PolicyRequest) -> Reply + Send + Sync> Policy for FnPolicy<F> {
    fn reply(&self, request: &PolicyRequest) -> Reply {
        (self.0)(request)
    }
}

/// Where a mock's replies come from: a fixed script or a policy.
pub(crate) enum Source {
    Script(Script),
    Policy(Box<dyn Policy>),
}

impl Source {
    /// The reply to one call. `request` is only built for policies. `Err` is a violation to
    /// record: a call beyond the script, an unreadable request, a panicking policy.
    pub(crate) fn reply(
        &self,
        request: impl FnOnce() -> Result<PolicyRequest, String>,
    ) -> Result<Reply, String> {
        match self {
            Source::Script(script) => script.next().map_err(|n| {
                format!(
                    "unexpected call #{n} (the script has {} replies)",
                    script.expected()
                )
            }),
            Source::Policy(policy) => {
                let request = request()?;
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| policy.reply(&request)))
                    .map_err(|panic| format!("the policy panicked: {}", panic_message(&*panic)))
            }
        }
    }

    /// Fewer calls than scripted, for `verify`.
    pub(crate) fn shortfall(&self) -> Option<String> {
        match self {
            Source::Script(script) => script.shortfall(),
            Source::Policy(_) => None,
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string())
}

/// The names [`by_name`] knows (the `deepsolve-mock --policy` values).
pub const POLICY_NAMES: &[&str] = &[
    "well-behaved",
    "plan-skipper",
    "out-of-order",
    "parallel-flood",
    "malformed-args",
    "unknown-tool",
    "identical-loop",
    "never-ending",
    "reasoning-only",
    "never-answers",
    "answer-with-open-steps",
    "replan-past-budget",
    "second-plan",
    "flaky-429",
    "flaky-500",
    "cut-before-output",
    "repeated-id-name",
    "no-index-deltas",
    "tags",
    "tags-inventing",
    "tags-reasoning",
    "no-native-tools",
    "reasoning-model",
    "vendor-hermes",
    "vendor-dsml",
    "vendor-kimi",
];

/// Policies [`by_name`] also knows that replay what small local models were seen to do
/// instead of following the spine (prose plans, echoed nudges, calls written as text,
/// invented output, `tool_choice` ignored). Kept out of [`POLICY_NAMES`], whose requests are
/// pinned byte for byte; the engine's answer tests replay both lists.
pub const SMALL_MODEL_POLICY_NAMES: &[&str] = &[
    "prose-planner",
    "nudge-echo",
    "fenced-json-calls",
    "invented-output",
    "hermes-in-content",
    "ignores-tool-choice",
    "thinks-before-calls",
    "drafts-agree-late",
    "drafts-never-agree",
    "drafts-agree-answer-differs",
    "drafts-agree-answer-unboxed",
    "loops-in-forced-call",
    "loops-in-forced-native-call",
    "copies-its-tail",
    "talks-about-its-answer",
    "answers-with-a-call",
    "answers-with-a-call-stubborn",
    "copies-summaries",
    "replans-when-forced",
    "invents-tool-responses",
    "repeats-its-work-call",
    "plans-again-when-forced",
];

/// Policies [`by_name`] also knows that exist for benchmarks, the web UI's browser tests and
/// the knowledge-base, web, figure and image tests (`kb-cite` needs `rag` and `read_source`,
/// `web-cite` `web_search` and `web_fetch`, `geogebra` `geogebra_analysis`, `vision` a turn
/// with images), not for the engine's behaviour tests (which replay every one of
/// [`POLICY_NAMES`] and pin their requests byte for byte).
pub const BENCH_POLICY_NAMES: &[&str] = &[
    "first-code-call",
    "geogebra",
    "kb-cite",
    "showcase",
    "showcase-hostile",
    "showcase-long",
    "vision",
    "web-cite",
];

/// Drafts whose second and third results agree (`$42.00` is `42`).
const AGREE_LATE: &[&str] = &["41", "42", "\\$42.00"];

/// A policy by its kebab-case name, solving `steps` steps with `work_tool` where the
/// behaviour has a well-behaved part. `None` for an unknown name.
pub fn by_name(name: &str, steps: usize, work_tool: Option<String>) -> Option<Box<dyn Policy>> {
    let base = WellBehaved {
        steps: steps.max(1),
        work_tool,
    };
    let policy: Box<dyn Policy> = match name {
        "well-behaved" => Box::new(base),
        "plan-skipper" => Box::new(PlanSkipper { then: base }),
        "out-of-order" => Box::new(OutOfOrderFinisher { then: base }),
        "parallel-flood" => Box::new(ParallelFlood { n: 10, then: base }),
        "malformed-args" => Box::new(MalformedArgs { then: base }),
        "unknown-tool" => Box::new(UnknownTool::new(base)),
        "identical-loop" => Box::new(IdenticalLoop { then: base }),
        "never-ending" => Box::new(NeverEnding::new(base)),
        "reasoning-only" => Box::new(ReasoningOnly::new(1, base)),
        "never-answers" => Box::new(ReasoningOnly::new(usize::MAX, base)),
        "answer-with-open-steps" => Box::new(AnswerWithOpenSteps { then: base }),
        "replan-past-budget" => Box::new(ReplanPastBudget { then: base }),
        "second-plan" => Box::new(SecondPlan { then: base }),
        "flaky-429" => Box::new(FlakyStatus::new(429, 2, base).retry_after(Some(1))),
        "flaky-500" => Box::new(FlakyStatus::new(500, 2, base)),
        "cut-before-output" => Box::new(CutBeforeOutput::new(2, base)),
        "repeated-id-name" => Box::new(RepeatedIdName { inner: base }),
        "no-index-deltas" => Box::new(NoIndexDeltas { inner: base }),
        "tags" => Box::new(tags_mode(base, false)),
        "tags-inventing" => Box::new(tags_mode(base, true)),
        "tags-reasoning" => Box::new(tags_mode(ReasoningModel { inner: base }, false)),
        "no-native-tools" => Box::new(NoNativeTools {
            inner: tags_mode(base, false),
        }),
        "reasoning-model" => Box::new(ReasoningModel { inner: base }),
        "vendor-hermes" => Box::new(vendor(base, MarkupStyle::Hermes)),
        "vendor-dsml" => Box::new(vendor(base, MarkupStyle::DeepSeekDsml)),
        "vendor-kimi" => Box::new(vendor(base, MarkupStyle::KimiK2)),
        "prose-planner" => Box::new(ProsePlanner),
        "nudge-echo" => Box::new(NudgeEcho),
        "fenced-json-calls" => Box::new(FencedJsonCalls { inner: base }),
        "invented-output" => Box::new(InventedOutput),
        "hermes-in-content" => Box::new(HermesInContent { inner: base }),
        "thinks-before-calls" => Box::new(ThinksBeforeCalls { then: base }),
        "drafts-agree-late" => Box::new(DraftsDiffer::new(AGREE_LATE, &["42"], base)),
        "drafts-never-agree" => Box::new(DraftsDiffer::new(&["41", "42", "43"], &[], base)),
        "drafts-agree-answer-differs" => Box::new(DraftsDiffer::new(AGREE_LATE, &["41"], base)),
        "drafts-agree-answer-unboxed" => Box::new(DraftsDiffer::new(AGREE_LATE, &[], base)),
        "loops-in-forced-call" => Box::new(LoopsInForcedCall),
        "loops-in-forced-native-call" => Box::new(LoopsInForcedNativeCall),
        "copies-its-tail" => Box::new(CopiesItsTail { then: base }),
        "talks-about-its-answer" => Box::new(TalksAboutItsAnswer { then: base }),
        "answers-with-a-call" => Box::new(AnswersWithACall {
            then: base,
            stubborn: false,
        }),
        "answers-with-a-call-stubborn" => Box::new(AnswersWithACall {
            then: base,
            stubborn: true,
        }),
        "copies-summaries" => Box::new(CopiesSummaries { then: base }),
        "replans-when-forced" => Box::new(ReplansWhenForced { then: base }),
        "invents-tool-responses" => Box::new(InventsToolResponses { then: base }),
        "repeats-its-work-call" => Box::new(RepeatsItsWorkCall::new(base)),
        "plans-again-when-forced" => Box::new(PlansAgainWhenForced { then: base }),
        "ignores-tool-choice" => Box::new(IgnoresToolChoice {
            inner: FinishesOneThenProbes::new(base),
        }),
        "first-code-call" => Box::new(FirstCodeCall::default()),
        "geogebra" => Box::new(Geogebra),
        "kb-cite" => Box::new(KbCite),
        "showcase" => Box::new(Showcase::new(ShowcaseVariant::Plain)),
        "showcase-hostile" => Box::new(Showcase::new(ShowcaseVariant::Hostile)),
        "showcase-long" => Box::new(Showcase::new(ShowcaseVariant::Long)),
        "vision" => Box::new(Vision),
        "web-cite" => Box::new(WebCite),
        _ => return None,
    };
    Some(policy)
}

fn tags_mode<P>(inner: P, invent_responses: bool) -> TagsMode<P> {
    TagsMode {
        inner,
        invent_responses,
    }
}

fn vendor<P>(inner: P, style: MarkupStyle) -> VendorMarkup<P> {
    VendorMarkup { inner, style }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_resolves() {
        let names = POLICY_NAMES
            .iter()
            .chain(SMALL_MODEL_POLICY_NAMES)
            .chain(BENCH_POLICY_NAMES);
        for name in names {
            assert!(by_name(name, 2, None).is_some(), "{name}");
        }
        assert!(by_name("nope", 2, None).is_none());
    }
}
