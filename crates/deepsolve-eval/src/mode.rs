//! Modes: how a problem is put to the model. `plain` is here (one chat completion asking for
//! a step-by-step solution with the answer in `\boxed{}`); `deepsolve` runs a whole solve turn
//! and is supplied by the caller as a [`Solver`], since turns are built above this crate.

use std::sync::Arc;

use async_trait::async_trait;
use deepsolve_core::{
    AnswerSource, ChatModel, ChatRequest, DeltaSink, Language, Message, ModelError, SolveConfig,
    StopReason, StreamDelta, ToolChoice, TurnOutcome, Usage,
};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::grade::AnswerStyle;
use crate::problem::Problem;
use crate::record::SpineRecord;

/// What a mode produced for one problem.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// The text graded: the completion (plain) or the turn's answer (deepsolve).
    pub output: String,
    /// Whether the output states its result first (a deepsolve answer) or last.
    pub style: AnswerStyle,
    /// Model calls made (1 for plain).
    pub rounds: u32,
    pub usage: Usage,
    /// Why it ended: the finish reason (`stop`, `length`) or the turn's stop reason.
    pub stop: String,
    /// The stored turn, when the mode records one (its trace opens in the UI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// How the turn went along the spine, when the mode runs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spine: Option<SpineRecord>,
}

impl Attempt {
    /// A deepsolve turn's outcome as an attempt: its answer (stated result first), rounds,
    /// usage, stop reason and turn id. A turn that ended on a model error is that problem's
    /// endpoint failure; a cancelled one is not recorded (a resumed run does it again).
    pub fn from_turn(outcome: &TurnOutcome) -> Result<Attempt, SolveError> {
        match outcome.stop_reason {
            StopReason::Cancelled => Err(SolveError::Cancelled),
            StopReason::ModelError => Err(SolveError::Failed {
                kind: StopReason::ModelError.as_str().to_string(),
                message: outcome
                    .error
                    .clone()
                    .unwrap_or_else(|| "the model failed".into()),
            }),
            stop => Ok(Attempt {
                output: outcome.answer.clone().unwrap_or_default(),
                style: answer_style(outcome.answer_source),
                rounds: outcome.rounds,
                usage: outcome.usage,
                stop: stop.as_str().to_string(),
                turn_id: Some(outcome.turn_id.clone()),
                spine: Some(SpineRecord::of(outcome)),
            }),
        }
    }
}

/// Where a turn's answer states its result: first in the model's own answer (the playbook asks
/// for it), but at the end of one assembled from the step summaries, under the engine's header
/// line — the last step's summary holds the result.
pub(crate) fn answer_style(source: Option<AnswerSource>) -> AnswerStyle {
    match source {
        Some(AnswerSource::StepSummaries) => AnswerStyle::Reasoned,
        Some(AnswerSource::Model | AnswerSource::Forced) | None => AnswerStyle::ResultFirst,
    }
}

/// Why a mode produced nothing to grade.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SolveError {
    /// The endpoint (or the turn) failed: recorded for this problem, the run goes on.
    #[error("{kind}: {message}")]
    Failed { kind: String, message: String },
    /// The run was cancelled while this problem was running: nothing is recorded, so a
    /// resumed run does it again.
    #[error("cancelled")]
    Cancelled,
}

impl From<ModelError> for SolveError {
    fn from(e: ModelError) -> Self {
        SolveError::Failed {
            kind: e.kind().to_string(),
            message: e.to_string(),
        }
    }
}

/// One way of solving a problem. The deepsolve mode's implementation runs a recorded turn
/// through the app and returns its answer with `AnswerStyle::ResultFirst`.
#[async_trait]
pub trait Solver: Send + Sync {
    async fn solve(
        &self,
        problem: &Problem,
        cancel: &CancellationToken,
    ) -> Result<Attempt, SolveError>;
}

/// A named mode of a run.
#[derive(Clone)]
pub struct Mode {
    name: String,
    solver: Arc<dyn Solver>,
}

impl std::fmt::Debug for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mode").field("name", &self.name).finish()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("mode name {0:?}: use 1–32 characters of a–z, 0–9, `-` and `_` (e.g. plain, deepsolve)")]
pub struct BadModeName(pub String);

/// The mode that asks the model plainly.
pub const PLAIN: &str = "plain";
/// The mode that runs a deepsolve turn.
pub const DEEPSOLVE: &str = "deepsolve";

impl Mode {
    /// A mode under its own name (`plain`, `deepsolve`, or a variant such as `plain-t0`).
    pub fn new(name: impl Into<String>, solver: Arc<dyn Solver>) -> Result<Self, BadModeName> {
        let name = name.into();
        let ok = (1..=32).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !ok {
            return Err(BadModeName(name));
        }
        Ok(Mode { name, solver })
    }

    /// `plain` over a chat model.
    pub fn plain(model: Arc<dyn ChatModel>, options: PlainOptions) -> Self {
        Mode {
            name: PLAIN.into(),
            solver: Arc::new(PlainSolver::new(model, options)),
        }
    }

    /// `deepsolve`, whose solver the caller builds (a recorded turn per problem).
    pub fn deepsolve(solver: Arc<dyn Solver>) -> Self {
        Mode {
            name: DEEPSOLVE.into(),
            solver,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn solver(&self) -> &Arc<dyn Solver> {
        &self.solver
    }
}

/// The plain mode's request settings.
#[derive(Debug, Clone, PartialEq)]
pub struct PlainOptions {
    pub max_tokens: u32,
    pub temperature: f32,
}

impl Default for PlainOptions {
    fn default() -> Self {
        PlainOptions {
            max_tokens: 4096,
            temperature: 0.0,
        }
    }
}

impl PlainOptions {
    /// The sampling a deepsolve turn with `config` uses for each model call (its temperature
    /// and per-call output budget), so that the two modes differ only in the spine: greedy
    /// plain answers against sampled deepsolve ones measured the sampler as much as the spine.
    pub fn like_solve(config: &SolveConfig) -> Self {
        PlainOptions {
            max_tokens: config.max_tokens,
            temperature: config.temperature as f32,
        }
    }
}

/// One chat completion with a standard step-by-step prompt in the problem's language.
pub struct PlainSolver {
    model: Arc<dyn ChatModel>,
    options: PlainOptions,
}

impl PlainSolver {
    pub fn new(model: Arc<dyn ChatModel>, options: PlainOptions) -> Self {
        PlainSolver { model, options }
    }
}

/// The plain prompt's system message in each language.
pub fn plain_system_prompt(language: Language) -> &'static str {
    match language {
        Language::En => {
            "Solve the problem step by step. Put your final answer within \\boxed{}, and nothing else in the box."
        }
        Language::Zh => "请逐步解答下面的问题。把最终答案写在 \\boxed{} 中，框内只写答案。",
    }
}

/// The messages `plain` sends for a problem.
pub fn plain_messages(problem: &Problem) -> Vec<Message> {
    vec![
        Message::system(plain_system_prompt(problem.language)),
        Message::user(problem.question.clone()),
    ]
}

#[async_trait]
impl Solver for PlainSolver {
    async fn solve(
        &self,
        problem: &Problem,
        cancel: &CancellationToken,
    ) -> Result<Attempt, SolveError> {
        let request = ChatRequest {
            messages: plain_messages(problem),
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            max_tokens: self.options.max_tokens,
            temperature: self.options.temperature,
            stop: Vec::new(),
            response_format: None,
        };
        let mut ignore = |_: StreamDelta| {};
        let sink: DeltaSink<'_> = &mut ignore;
        let completion = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(SolveError::Cancelled),
            done = self.model.complete(&request, sink) => done?,
        };
        Ok(Attempt {
            output: completion.text,
            style: AnswerStyle::Reasoned,
            rounds: 1,
            usage: completion.usage,
            stop: completion.finish_reason.as_str().to_string(),
            turn_id: None,
            spine: None,
        })
    }
}
