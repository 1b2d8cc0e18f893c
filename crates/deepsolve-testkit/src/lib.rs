//! deepsolve-testkit (dev-only): everything needed to test the deepsolve engine against a
//! model that is not there.
//!
//! - [`MockServer`]: an OpenAI-compatible HTTP server on its own thread and runtime, in
//!   sequence mode (an exact list of replies) or policy mode (a scripted solver that reads the
//!   conversation); every captured request is checked against the request invariants.
//! - [`ScriptedModel`]: the same policies in-process, as a `deepsolve_core::ChatModel`.
//! - [`stamp`]: emission-time stamps in streamed deltas, for latency benchmarks.
//! - [`sse`]: builders for `chat.completion.chunk` streams (and a parser for the way back).
//! - [`check_request`]: the request invariants as a pure function.
//! - [`policy`]: the scripted behaviours (well-behaved solver, plan skipper, flood, …), and
//!   wrappers that write any of them as text-tag calls ([`TagsMode`]), with inline `<think>`
//!   ([`ReasoningModel`]) or as vendor markup ([`VendorMarkup`]).
//! - [`documents`]: fixture documents (PDF, DOCX, HTML, Markdown) and hostile ones.
//! - [`images`]: fixture images (a triangle figure, a solid colour, a decompression bomb)
//!   and what the scripted vision model reads from an image's pixels.
//! - [`tags`]: the text-tag protocol read and written independently of the engine's
//!   implementation; tags-mode requests reach policies in the same neutral shape as native ones.
//!
//! - [`real`]: the project's small real model and llama.cpp's own server for real-model tests.
//!
//! The testkit reads the OpenAI wire format itself ([`wire`]) and never depends on
//! `deepsolve-llm`, the client it helps test.
//!
//! ```
//! use deepsolve_testkit::{MockServer, Reply, ScriptedModel, WellBehaved};
//!
//! // Over HTTP, with an exact call count: point the client at `server.url()`.
//! let server = MockServer::sequence(vec![Reply::text("4")]);
//! assert!(server.url().ends_with("/v1"));
//! assert!(server.verify().is_err(), "the scripted reply was never asked for");
//!
//! // In-process, for the engine's own tests: a scripted solver as a `ChatModel`.
//! let model = ScriptedModel::new(WellBehaved::new(3));
//! assert_eq!(model.call_count(), 0);
//! ```

pub mod documents;
pub mod images;
pub mod invariants;
pub mod policy;
pub mod progress;
pub mod real;
pub mod reply;
pub mod request;
mod scripted;
mod server;
pub mod sse;
pub mod stamp;
pub mod tags;
pub mod web;
pub mod wire;

use std::fmt;
use std::sync::{Mutex, MutexGuard};

pub use invariants::{InvariantConfig, check_request, estimate_prompt_tokens};
pub use policy::{
    AnswerWithOpenSteps, CutBeforeOutput, FencedJsonCalls, FlakyStatus, FnPolicy, HermesInContent,
    IdenticalLoop, IgnoresToolChoice, InventedOutput, MalformedArgs, NeverEnding, NoIndexDeltas,
    NoNativeTools, NudgeEcho, OutOfOrderFinisher, ParallelFlood, PlanSkipper, Policy, ProsePlanner,
    ReasoningModel, ReasoningOnly, RepeatedIdName, ReplanPastBudget, Script, SecondPlan,
    THINK_MARKER, TagsMode, UnknownTool, VendorMarkup, Vision, WellBehaved, WithStyle,
};
pub use progress::{PROGRESS_MARKER, PlanStep, ProgressBlock};
pub use reply::{DEFAULT_USAGE, DeltaStyle, Reply, Turn};
pub use request::{NUDGE_MARKER, PlanView, PolicyRequest, ToolResultView, ULTIMATUM_MARKER};
pub use scripted::{ScriptedModel, ScriptedOptions};
pub use server::{CapturedRequest, MockError, MockServer, MockServerBuilder, StreamOptions};
pub use tags::{INVENTED_MARKER, MarkupStyle, PromptTool};

/// One broken expectation: a request invariant, an unexpected call, an unreadable request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Index of the offending request in `requests()`, when it was captured.
    pub request: Option<usize>,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.request {
            Some(i) => write!(f, "request[{i}]: {}", self.message),
            None => write!(f, "{}", self.message),
        }
    }
}

/// Lock a mutex, recovering from poisoning: a panicking test thread must not hide the
/// journal from the assertions that follow.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The panic message for `assert_clean`, or `None` when there is nothing to report.
pub(crate) fn problems_report(who: &str, problems: &[String]) -> Option<String> {
    (!problems.is_empty()).then(|| {
        format!(
            "{who}: {} problem(s):\n  {}",
            problems.len(),
            problems.join("\n  ")
        )
    })
}
