//! `Engine::run_turn`: the deep-solve loop (DESIGN §3, §5). One turn, start to end: rounds of
//! model calls and tool dispatch under the solve spine, folding after every finished step,
//! budgets, gates, and one forced-answer path.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::config::SolveConfig;
use crate::context::Context;
use crate::dispatch::{BatchInput, CallResult, Mounted, RepetitionGuard, Toolbox, run_batch};
use crate::event::{Emitter, EventKind, EventSink, RoundRole};
use crate::message::Message;
use crate::message::ToolCall;
use crate::model::{
    ChatModel, ChatRequest, Completion, FinishReason, ModelError, Protocol, StreamDelta,
    ToolChoice, ToolSpec, Usage,
};
use crate::outcome::{AnswerSource, Checkpoint, StopReason, TurnOutcome};
use crate::progress::{self, Position};
use crate::solve::{
    Language, SessionHandle, SolveRecord, SolveSession, SolveSessionStore, SpineEffect, StoreError,
    playbook, solve_tool_specs,
};
use crate::stream_filter::{Piece, VisibleFilter};
use crate::tags::{self, MarkupError, ParsedCall};
use crate::texts::{Text, Texts};
use crate::tool::{Artifact, ToolContext, ToolRef};
use crate::truncate::{MAX_BYTES, MAX_LINES, head_tail};

pub const NUDGE_MARKER: &str = "[deepsolve:nudge]";
pub const ULTIMATUM_MARKER: &str = "[deepsolve:ultimatum]";
const CONTINUE_MARKER: &str = "[deepsolve:continue]";
const NOTICE_MARKER: &str = "[deepsolve:notice]";
const RECORD_MARKER: &str = "[deepsolve:record]";
/// The model's output limit when doubling the budget for a reasoning model.
const MAX_OUTPUT_TOKENS: u32 = 200_000;
/// A forced answer after the turn deadline still gets this long.
const FORCED_ANSWER_GRACE: Duration = Duration::from_secs(60);
/// Context fraction above which old tool outputs are snipped.
const COMPACT_AT: f64 = 0.8;
const MAX_COMPACTIONS_PER_ROUND: u32 = 2;
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;
/// The name under which an unreadable text-protocol call is recorded.
pub const UNREADABLE_CALL: &str = "unreadable_tool_call";

/// A previous turn of the same conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriorTurn {
    pub problem: String,
    pub answer: String,
    #[serde(default)]
    pub solve: Option<SolveRecord>,
}

/// Everything a turn needs, resolved server-side.
#[derive(Debug, Clone)]
pub struct TurnSpec {
    pub turn_id: String,
    pub session_id: Option<String>,
    pub user_id: Option<String>,
    pub problem: String,
    pub history: Vec<PriorTurn>,
    pub language: Language,
    pub config: SolveConfig,
    pub context_window: u64,
    /// Work tools to offer this turn (by name); the solve tools are always offered.
    pub tools: Vec<String>,
    pub workspace: Option<PathBuf>,
    /// The first event `seq` (non-zero when a turn is resumed).
    pub first_seq: u64,
    pub protocol: Protocol,
    /// Continue an interrupted turn from its last step checkpoint (`None`: a fresh turn).
    pub resume: Option<Checkpoint>,
}

impl TurnSpec {
    pub fn new(turn_id: impl Into<String>, problem: impl Into<String>) -> Self {
        TurnSpec {
            turn_id: turn_id.into(),
            session_id: None,
            user_id: None,
            problem: problem.into(),
            history: Vec::new(),
            language: Language::En,
            config: SolveConfig::default(),
            context_window: DEFAULT_CONTEXT_WINDOW,
            tools: Vec::new(),
            workspace: None,
            first_seq: 0,
            protocol: Protocol::Native,
            resume: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TurnError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("unknown tool '{name}' requested for this turn (available: {available})")]
    UnknownTool { name: String, available: String },
    #[error("the problem is empty")]
    EmptyProblem,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EngineError(String);

/// The engine: registered tools and the live solve sessions. Shared by all turns.
pub struct Engine {
    /// The solve tools, described in each built-in language.
    solve_tools: Vec<(Language, Vec<Arc<Mounted>>)>,
    work_tools: Vec<Arc<Mounted>>,
    sessions: Arc<SolveSessionStore>,
    /// Models found to lack native tool calling (protocol `auto`), for the process.
    no_native_tools: Mutex<HashSet<String>>,
}

impl Engine {
    pub fn new(tools: Vec<ToolRef>) -> Result<Self, EngineError> {
        let solve_tools = Texts::LANGUAGES
            .into_iter()
            .map(|language| {
                solve_tool_specs(&Texts::builtin(language))
                    .into_iter()
                    .map(|spec| Mounted::new(spec, None).map(Arc::new))
                    .collect::<Result<Vec<_>, _>>()
                    .map(|mounted| (language, mounted))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(EngineError)?;
        let mut work_tools: Vec<Arc<Mounted>> = Vec::new();
        for tool in tools {
            let spec = tool.spec().clone();
            if crate::solve::is_solve_tool(&spec.name)
                || work_tools.iter().any(|m| m.spec.name == spec.name)
            {
                return Err(EngineError(format!(
                    "tool '{}' is registered twice",
                    spec.name
                )));
            }
            work_tools.push(Arc::new(
                Mounted::new(spec, Some(tool)).map_err(EngineError)?,
            ));
        }
        Ok(Engine {
            solve_tools,
            work_tools,
            sessions: Arc::new(SolveSessionStore::default()),
            no_native_tools: Mutex::new(HashSet::new()),
        })
    }

    /// Bound the live solve sessions (one per running turn).
    pub fn with_session_capacity(mut self, capacity: usize) -> Self {
        self.sessions = Arc::new(SolveSessionStore::new(capacity));
        self
    }

    pub fn work_tool_names(&self) -> Vec<String> {
        self.work_tools
            .iter()
            .map(|m| m.spec.name.clone())
            .collect()
    }

    pub fn sessions(&self) -> &SolveSessionStore {
        &self.sessions
    }

    fn toolbox(&self, requested: &[String], language: Language) -> Result<Toolbox, TurnError> {
        let mut mounted = self
            .solve_tools
            .iter()
            .find(|(l, _)| *l == language)
            .map(|(_, tools)| tools.clone())
            .unwrap_or_default();
        for name in requested {
            let tool = self
                .work_tools
                .iter()
                .find(|m| &m.spec.name == name)
                .ok_or_else(|| TurnError::UnknownTool {
                    name: name.clone(),
                    available: self.work_tool_names().join(", "),
                })?;
            if !mounted.iter().any(|m| &m.spec.name == name) {
                mounted.push(tool.clone());
            }
        }
        Ok(Toolbox::new(mounted))
    }

    /// Run one turn to its end. Errors are only for a turn that cannot start; everything
    /// after the start ends in a `TurnOutcome` with a typed stop reason.
    pub async fn run_turn(
        &self,
        model: &dyn ChatModel,
        spec: TurnSpec,
        sink: &dyn EventSink,
        cancel: CancellationToken,
    ) -> Result<TurnOutcome, TurnError> {
        if spec.problem.trim().is_empty() {
            return Err(TurnError::EmptyProblem);
        }
        let toolbox = self.toolbox(&spec.tools, spec.language)?;
        let mut session = SolveSession::new(
            spec.session_id
                .clone()
                .unwrap_or_else(|| spec.turn_id.clone()),
            spec.config.max_replans,
            spec.config.max_steps,
        );
        if let Some(resume) = &spec.resume {
            session.record = resume.record.clone();
            session.record.replans_max = spec.config.max_replans;
        }
        let handle = self.sessions.open(&spec.turn_id, session)?;
        let _close = CloseOnDrop {
            store: &self.sessions,
            turn_id: spec.turn_id.clone(),
        };
        let known_without_tools = self
            .no_native_tools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(model.name());
        let mut run = TurnRun::new(model, spec, toolbox, handle, sink, cancel);
        if known_without_tools && run.auto {
            run.use_tags();
        }
        let outcome = run.run().await;
        if outcome.1 {
            self.no_native_tools
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(model.name().to_string());
        }
        Ok(outcome.0)
    }
}

/// Removes the session from the store however the turn ends (even if its future is dropped).
struct CloseOnDrop<'a> {
    store: &'a SolveSessionStore,
    turn_id: String,
}

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.store.close(&self.turn_id);
    }
}

fn system_prompt(texts: &Texts, specs: &[ToolSpec], tags: bool) -> String {
    let mounted: Vec<(&str, &str)> = specs
        .iter()
        .map(|s| (s.name.as_str(), s.description.as_str()))
        .collect();
    let mut prompt = playbook(texts, &mounted);
    if tags {
        prompt.push_str(&tags::manifest(specs, texts));
    }
    prompt
}

/// A previous turn as the model sees it: the question, then the record and the answer.
fn history_messages(history: &[PriorTurn], texts: &Texts) -> Vec<Message> {
    history
        .iter()
        .flat_map(|turn| {
            let mut answer = String::new();
            if let Some(record) = turn.solve.as_ref().filter(|r| r.has_plan()) {
                answer.push_str(RECORD_MARKER);
                answer.push(' ');
                answer
                    .push_str(&texts.render(Text::PlanAnalysis, &[("analysis", &record.analysis)]));
                for step in &record.steps {
                    answer.push_str(&progress::step_line(step));
                }
                answer.push_str("\n\n");
            }
            answer.push_str(&turn.answer);
            [
                Message::user(turn.problem.clone()),
                Message::assistant(answer),
            ]
        })
        .collect()
}

enum Ending {
    Answered(String, StopReason),
    Force(StopReason),
    Cancelled,
    ModelFailed(ModelError),
}

enum CallFailure {
    Cancelled,
    Deadline,
    Model(ModelError),
}

struct TurnRun<'a> {
    model: &'a dyn ChatModel,
    emit: Emitter<'a>,
    problem: String,
    language: Language,
    texts: Arc<Texts>,
    cfg: SolveConfig,
    context_window: u64,
    toolbox: Toolbox,
    specs: Vec<ToolSpec>,
    session: SessionHandle,
    ctx: Context,
    cancel: CancellationToken,
    tool_ctx: ToolContext,
    started: Instant,
    deadline: Instant,
    /// Wall-clock time spent before a resume.
    spent_before: Duration,
    usage: Usage,
    rounds: u32,
    guard: RepetitionGuard,
    artifacts: Vec<Artifact>,
    plan_nudged: bool,
    finish_nudged: bool,
    empty_rounds: u32,
    doubled_budget: bool,
    next_max_tokens: Option<u32>,
    answer_parts: Vec<String>,
    /// The text-tag protocol is in use.
    tags: bool,
    /// Protocol `auto`: may switch to tags.
    auto: bool,
    switched_to_tags: bool,
    format_errors: u32,
    calls_made: u64,
}

impl<'a> TurnRun<'a> {
    fn new(
        model: &'a dyn ChatModel,
        spec: TurnSpec,
        toolbox: Toolbox,
        session: SessionHandle,
        sink: &'a dyn EventSink,
        cancel: CancellationToken,
    ) -> Self {
        let specs = toolbox.specs();
        let texts = Texts::builtin(spec.language);
        let tags = spec.protocol == Protocol::Tags;
        let mut prefix = vec![Message::system(system_prompt(&texts, &specs, tags))];
        prefix.extend(history_messages(&spec.history, &texts));
        prefix.push(Message::user(spec.problem.clone()));
        let started = Instant::now();
        let (rounds, usage, spent_ms) = spec
            .resume
            .as_ref()
            .map(|r| (r.rounds, r.usage, r.elapsed_ms))
            .unwrap_or_default();
        let spent = Duration::from_millis(spent_ms);
        let tool_ctx = ToolContext {
            turn_id: spec.turn_id.clone(),
            session_id: spec.session_id.clone(),
            user_id: spec.user_id.clone(),
            workspace: spec.workspace.clone(),
            call_id: String::new(),
            cancel: cancel.child_token(),
            deadline: None,
        };
        TurnRun {
            model,
            emit: Emitter::new(spec.turn_id.clone(), spec.first_seq, sink),
            problem: spec.problem,
            language: spec.language,
            deadline: started + spec.config.turn_timeout().saturating_sub(spent),
            spent_before: spent,
            cfg: spec.config,
            context_window: spec.context_window.max(1024),
            toolbox,
            specs,
            session,
            ctx: Context::new(prefix, texts.clone()),
            texts,
            cancel,
            tool_ctx,
            started,
            usage,
            rounds,
            guard: RepetitionGuard::default(),
            artifacts: Vec::new(),
            plan_nudged: false,
            finish_nudged: false,
            empty_rounds: 0,
            doubled_budget: false,
            next_max_tokens: None,
            answer_parts: Vec::new(),
            tags,
            auto: spec.protocol == Protocol::Auto,
            switched_to_tags: false,
            format_errors: 0,
            calls_made: 0,
        }
    }

    /// Switch to the text-tag protocol for the rest of the turn.
    fn use_tags(&mut self) {
        self.tags = true;
        self.ctx
            .set_system(system_prompt(&self.texts, &self.specs, true));
    }

    /// The outcome, and whether the turn found the model to lack native tools.
    async fn run(mut self) -> (TurnOutcome, bool) {
        let resumed = self.rounds > 0;
        self.emit.emit(EventKind::TurnStarted {
            model: self.model.name().to_string(),
            problem: self.problem.clone(),
            tools: self.toolbox.names(),
            language: self.language.code().to_string(),
            resumed,
        });
        if resumed {
            self.emit_plan(&self.record());
        }
        for tool in self.toolbox.work_tools() {
            tool.turn_started(&self.tool_ctx).await;
        }
        let ending = self.rounds_loop().await;
        for tool in self.toolbox.work_tools() {
            tool.turn_finished(&self.tool_ctx).await;
        }
        let mut error = None;
        let (answer, source, stop) = match ending {
            Ending::Answered(text, stop) => (Some(text), Some(AnswerSource::Model), stop),
            Ending::Force(stop) => self.force_answer(stop).await,
            Ending::Cancelled => (None, None, StopReason::Cancelled),
            Ending::ModelFailed(e) => {
                self.emit.emit(EventKind::Error {
                    kind: e.kind().to_string(),
                    message: e.to_string(),
                });
                error = Some(e.to_string());
                let fallback = summary_answer(&self.record(), &self.texts);
                let source = fallback.as_ref().map(|_| AnswerSource::StepSummaries);
                (fallback, source, StopReason::ModelError)
            }
        };
        let switched = self.switched_to_tags;
        (self.finish(answer, source, stop, error), switched)
    }

    fn finish(
        self,
        answer: Option<String>,
        source: Option<AnswerSource>,
        stop: StopReason,
        error: Option<String>,
    ) -> TurnOutcome {
        if let Some(text) = &answer {
            self.emit.emit(EventKind::Answer {
                text: text.clone(),
                forced: source != Some(AnswerSource::Model),
            });
        }
        let elapsed_ms = self.elapsed_ms();
        self.emit.emit(EventKind::TurnFinished {
            stop_reason: stop,
            usage: self.usage,
            rounds: self.rounds,
            elapsed_ms,
        });
        TurnOutcome {
            turn_id: self.tool_ctx.turn_id.clone(),
            answer,
            answer_source: source,
            stop_reason: stop,
            solve: self.record(),
            usage: self.usage,
            rounds: self.rounds,
            elapsed_ms,
            artifacts: self.artifacts,
            error,
        }
    }

    fn elapsed_ms(&self) -> u64 {
        (self.spent_before + self.started.elapsed()).as_millis() as u64
    }

    fn record(&self) -> SolveRecord {
        self.session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record
            .clone()
    }

    fn max_total_rounds(&self) -> u32 {
        self.cfg.max_rounds + self.cfg.settlement_rounds
    }

    /// The ephemeral last user message: the progress block (once a plan exists) and notices.
    fn tail(&self, round: u32) -> Option<String> {
        let record = self.record();
        let mut parts = Vec::new();
        if record.has_plan() {
            parts.push(progress::render(
                &self.problem,
                &record,
                &Position {
                    round,
                    max_rounds: self.cfg.max_rounds,
                    settlement_rounds: self.cfg.settlement_rounds,
                },
                &self.texts,
            ));
        } else if round > self.cfg.max_rounds {
            let notice = self.texts.render(
                Text::NoticeRoundBudgetSpent,
                &[("max_rounds", &self.cfg.max_rounds)],
            );
            parts.push(format!("{NUDGE_MARKER} {notice}"));
        }
        if self.cfg.token_budget > 0 && self.usage.total() * 3 >= self.cfg.token_budget * 2 {
            let notice = self.texts.render(
                Text::NoticeTokenBudget,
                &[
                    ("used", &self.usage.total()),
                    ("budget", &self.cfg.token_budget),
                ],
            );
            parts.push(format!("{NOTICE_MARKER} {notice}"));
        }
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }

    fn reserve(&self) -> u64 {
        u64::from(self.cfg.max_tokens).min(self.context_window / 4)
    }

    fn ultimatum_limit(&self) -> u64 {
        ((self.context_window as f64 * self.cfg.ultimatum_at) as u64).saturating_sub(self.reserve())
    }

    /// Snip old tool outputs while over the compaction threshold. Returns the prompt estimate.
    fn compact_if_needed(&mut self, tail_tokens: u64) -> u64 {
        let threshold =
            ((self.context_window as f64 * COMPACT_AT) as u64).min(self.ultimatum_limit());
        let mut estimate = self.ctx.estimate(tail_tokens);
        let mut attempts = 0;
        while estimate > threshold && attempts < MAX_COMPACTIONS_PER_ROUND {
            attempts += 1;
            let before = estimate;
            let mut snipped = false;
            while self.ctx.estimate(tail_tokens) > threshold && self.ctx.snip_oldest_tool_output() {
                snipped = true;
            }
            if !snipped {
                break;
            }
            estimate = self.ctx.estimate(tail_tokens);
            self.emit.emit(EventKind::ContextFolded {
                tokens_before: before,
                tokens_after: estimate,
            });
        }
        estimate
    }

    async fn rounds_loop(&mut self) -> Ending {
        loop {
            if self.cancel.is_cancelled() {
                return Ending::Cancelled;
            }
            if Instant::now() >= self.deadline {
                return Ending::Force(StopReason::TurnTimeout);
            }
            if self.cfg.token_budget > 0 && self.usage.total() >= self.cfg.token_budget {
                return Ending::Force(StopReason::Budget);
            }
            if self.rounds >= self.max_total_rounds() {
                return Ending::Force(StopReason::MaxRounds);
            }
            let round = self.rounds + 1;
            let tail = self.tail(round);
            let tail_tokens = tail.as_deref().map(crate::tokens::count).unwrap_or(0);
            let estimate = self.compact_if_needed(tail_tokens);
            if estimate > self.ultimatum_limit() {
                return Ending::Force(StopReason::ContextLimit);
            }
            self.rounds = round;
            self.emit.emit(EventKind::RoundStarted {
                round,
                max_rounds: self.cfg.max_rounds,
                context_tokens: estimate,
                context_window: self.context_window,
            });
            let raw_estimate = self.ctx.raw_estimate(tail_tokens);
            let max_tokens = self.next_max_tokens.take().unwrap_or(self.cfg.max_tokens);
            let request = self.request(tail, ToolChoice::Auto, max_tokens);
            let completion = match self.call_model(&request, self.deadline).await {
                Ok(c) => c,
                Err(CallFailure::Cancelled) => return Ending::Cancelled,
                Err(CallFailure::Deadline) => return Ending::Force(StopReason::TurnTimeout),
                Err(CallFailure::Model(ModelError::ContextLength { message })) => {
                    self.emit.emit(EventKind::Warning {
                        kind: "context_length".into(),
                        message: message.clone(),
                    });
                    if self.ctx.snip_oldest_tool_output() {
                        continue;
                    }
                    return Ending::Force(StopReason::ContextLimit);
                }
                Err(CallFailure::Model(ModelError::ToolsUnsupported { message }))
                    if self.auto && !self.tags =>
                {
                    self.emit.emit(EventKind::Warning {
                        kind: "protocol".into(),
                        message: format!(
                            "the provider does not support native tool calling ({message}); switching to the text-tag protocol"
                        ),
                    });
                    self.use_tags();
                    self.switched_to_tags = true;
                    self.rounds -= 1;
                    continue;
                }
                Err(CallFailure::Model(e @ ModelError::StreamCut { .. })) => {
                    self.emit.emit(EventKind::Warning {
                        kind: e.kind().into(),
                        message: format!("{e}; salvaging with a forced answer"),
                    });
                    return Ending::Force(StopReason::ModelError);
                }
                Err(CallFailure::Model(e)) => return Ending::ModelFailed(e),
            };
            if !completion.usage.estimated {
                self.ctx
                    .calibrate(raw_estimate, completion.usage.prompt_tokens);
            }
            if let Some(ending) = self.absorb(completion).await {
                return ending;
            }
        }
    }

    /// A request in the turn's protocol: native tools, or the text-tag form (no tools field,
    /// calls and results rewritten as text, stop sequences at `<tool_response>`).
    fn request(
        &self,
        tail: Option<String>,
        tool_choice: ToolChoice,
        max_tokens: u32,
    ) -> ChatRequest {
        let messages = self.ctx.request_messages(tail);
        let (messages, tools, stop) = if self.tags {
            let stop = tags::STOP_SEQUENCES.iter().map(|s| s.to_string()).collect();
            (
                tags::to_text_protocol(messages, &self.texts),
                Vec::new(),
                stop,
            )
        } else {
            (messages, self.specs.clone(), Vec::new())
        };
        ChatRequest {
            messages,
            tools,
            tool_choice,
            max_tokens,
            temperature: self.cfg.temperature as f32,
            stop,
        }
    }

    async fn call_model(
        &self,
        request: &ChatRequest,
        deadline: Instant,
    ) -> Result<Completion, CallFailure> {
        let emit = &self.emit;
        let mut filter = VisibleFilter::default();
        let mut on_delta = |delta: StreamDelta| match delta {
            StreamDelta::Text(text) => emit_pieces(emit, filter.push(&text)),
            StreamDelta::Reasoning(text) => emit.emit(EventKind::ReasoningDelta { text }),
            StreamDelta::Retrying {
                attempt,
                max,
                reason,
                delay_ms,
            } => emit.emit(EventKind::Retrying {
                attempt,
                max,
                reason,
                delay_ms,
            }),
        };
        let result = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => Err(CallFailure::Cancelled),
            r = tokio::time::timeout_at(deadline, self.model.complete(request, &mut on_delta)) => match r {
                Err(_) => Err(CallFailure::Deadline),
                Ok(Err(e)) => Err(CallFailure::Model(e)),
                Ok(Ok(c)) => Ok(c),
            },
        };
        emit_pieces(emit, filter.finish());
        result
    }

    /// Read the reply's content: reasoning out, invented results cut, markup calls taken
    /// (when the provider gave no native calls). Returns the cleaned completion and the
    /// unreadable calls.
    fn interpret(&mut self, mut c: Completion) -> (Completion, Vec<(String, MarkupError)>) {
        let parsed = tags::parse_reply(&c.text);
        if parsed.cut_invented {
            self.emit.emit(EventKind::Warning {
                kind: "invented_tool_response".into(),
                message:
                    "the model wrote its own <tool_response>; it was cut before anything saw it"
                        .into(),
            });
        }
        if !parsed.reasoning.is_empty() {
            if !c.reasoning.is_empty() {
                c.reasoning.push('\n');
            }
            c.reasoning.push_str(&parsed.reasoning);
        }
        c.text = parsed.visible;
        let mut malformed = Vec::new();
        if c.tool_calls.is_empty() {
            for call in parsed.calls {
                match call {
                    ParsedCall::Call { name, arguments } => {
                        let id = self.next_call_id();
                        c.tool_calls.push(ToolCall {
                            id,
                            name,
                            arguments,
                        });
                    }
                    ParsedCall::Malformed { raw, error } => malformed.push((raw, error)),
                }
            }
        }
        (c, malformed)
    }

    /// Ids for calls read from text: unique within the turn (and across turns, by turn id).
    fn next_call_id(&mut self) -> String {
        self.calls_made += 1;
        format!("call_{}_{}", self.tool_ctx.turn_id, self.calls_made)
    }

    /// Take in one completion. `Some` ends the loop.
    async fn absorb(&mut self, c: Completion) -> Option<Ending> {
        let (c, malformed) = self.interpret(c);
        self.usage.add(&c.usage);
        let role = if c.tool_calls.is_empty() {
            RoundRole::Answer
        } else {
            RoundRole::Narration
        };
        self.emit.emit(EventKind::RoundFinished {
            round: self.rounds,
            role,
            finish_reason: c.finish_reason.as_str().to_string(),
            usage: c.usage,
        });
        if malformed.is_empty() {
            self.format_errors = 0;
        } else {
            self.format_errors += 1;
        }
        if !c.tool_calls.is_empty() || !malformed.is_empty() {
            self.empty_rounds = 0;
            let ending = self.work_round(c, malformed).await;
            if ending.is_none() && self.format_errors >= 3 {
                return Some(Ending::Force(StopReason::FormatErrors));
            }
            return ending;
        }
        let visible = !c.text.trim().is_empty();
        if c.finish_reason == FinishReason::Length {
            if visible {
                self.answer_parts.push(c.text.clone());
                self.ctx.push(Message::assistant(c.text));
                let nudge = self.texts.get(Text::NudgeContinue);
                self.ctx
                    .push(Message::user(format!("{CONTINUE_MARKER} {nudge}")));
                return None;
            }
            if !self.doubled_budget {
                self.doubled_budget = true;
                let room = self.context_window.saturating_sub(self.ctx.estimate(0));
                let doubled = self
                    .cfg
                    .max_tokens
                    .saturating_mul(2)
                    .min(MAX_OUTPUT_TOKENS)
                    .min(room.max(u64::from(self.cfg.max_tokens)) as u32);
                self.next_max_tokens = Some(doubled);
                self.emit.emit(EventKind::Warning {
                    kind: "length".into(),
                    message: format!(
                        "the model spent its whole output budget without visible output; retrying once with max_tokens = {doubled}"
                    ),
                });
                return None;
            }
        }
        if !visible && self.answer_parts.is_empty() {
            self.empty_rounds += 1;
            if self.empty_rounds >= 2 {
                return Some(Ending::Force(StopReason::EmptyRounds));
            }
            let nudge = self.texts.get(Text::NudgeActNow);
            self.ctx
                .push(Message::user(format!("{NUDGE_MARKER} {nudge}")));
            return None;
        }
        self.empty_rounds = 0;
        let mut text = std::mem::take(&mut self.answer_parts).concat();
        text.push_str(&c.text);
        self.finish_gate(text.trim().to_string())
    }

    /// DESIGN §4.5: nudge once before accepting an answer without a plan or with open steps.
    fn finish_gate(&mut self, text: String) -> Option<Ending> {
        let record = self.record();
        let budget_left = self.rounds < self.max_total_rounds();
        if !record.has_plan() {
            if !self.plan_nudged && budget_left {
                self.plan_nudged = true;
                self.ctx.push(Message::assistant(text));
                let nudge = self.texts.get(Text::NudgePlanFirst);
                self.ctx
                    .push(Message::user(format!("{NUDGE_MARKER} {nudge}")));
                return None;
            }
            return Some(Ending::Answered(text, StopReason::AnsweredWithoutPlan));
        }
        let open: Vec<String> = record
            .open_steps()
            .map(|s| {
                self.texts
                    .render(Text::NudgeOpenStep, &[("id", &s.id), ("goal", &s.goal)])
            })
            .collect();
        if open.is_empty() {
            return Some(Ending::Answered(text, StopReason::Answered));
        }
        if !self.finish_nudged && budget_left {
            self.finish_nudged = true;
            let current = record.current().map(|s| s.id.clone()).unwrap_or_default();
            self.ctx.push(Message::assistant(text));
            let nudge = self.texts.render(
                Text::NudgeOpenSteps,
                &[("open_steps", &open.join(", ")), ("current", &current)],
            );
            self.ctx
                .push(Message::user(format!("{NUDGE_MARKER} {nudge}")));
            return None;
        }
        Some(Ending::Answered(text, StopReason::AnsweredWithOpenSteps))
    }

    async fn work_round(
        &mut self,
        c: Completion,
        malformed: Vec<(String, MarkupError)>,
    ) -> Option<Ending> {
        let reasoning = (!c.reasoning.is_empty()).then(|| c.reasoning.clone());
        let unreadable: Vec<ToolCall> = malformed
            .iter()
            .map(|(raw, _)| ToolCall {
                id: self.next_call_id(),
                name: UNREADABLE_CALL.into(),
                arguments: raw.clone(),
            })
            .collect();
        let mut all_calls = c.tool_calls.clone();
        all_calls.extend(unreadable.iter().cloned());
        self.ctx.push(Message::assistant_with_calls(
            c.text.trim().to_string(),
            all_calls,
            reasoning,
        ));
        let emit = &self.emit;
        let on_start = |call: &crate::message::ToolCall, args: &serde_json::Value| {
            emit.emit(EventKind::ToolCall {
                call_id: call.id.clone(),
                name: call.name.clone(),
                args: args.clone(),
            })
        };
        let on_done = |r: &CallResult| {
            emit.emit(EventKind::ToolResult {
                call_id: r.call.id.clone(),
                name: r.call.name.clone(),
                ok: r.output.ok,
                content: r.output.content.clone(),
                artifacts: r.output.artifacts.clone(),
                duration_ms: r.duration_ms,
            })
        };
        let batch = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return Some(Ending::Cancelled),
            b = run_batch(
                BatchInput {
                    calls: &c.tool_calls,
                    toolbox: &self.toolbox,
                    session: &self.session,
                    config: &self.cfg,
                    guard: &mut self.guard,
                    deadline: self.deadline,
                    base_ctx: &self.tool_ctx,
                    texts: &self.texts,
                },
                &on_start,
                &on_done,
            ) => b,
        };
        let mut step_done = false;
        for (call, (_, error)) in unreadable.iter().zip(&malformed) {
            let content = self.texts.render(
                Text::UnreadableCall,
                &[("error", &error.describe(&self.texts))],
            );
            self.emit.emit(EventKind::ToolCall {
                call_id: call.id.clone(),
                name: call.name.clone(),
                args: serde_json::Value::String(call.arguments.clone()),
            });
            self.emit.emit(EventKind::ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                ok: false,
                content: content.clone(),
                artifacts: Vec::new(),
                duration_ms: 0,
            });
            self.ctx.push(Message::tool_result(call, content));
        }
        for result in batch.results {
            let visible = head_tail(&result.output.content, MAX_BYTES, MAX_LINES, &self.texts);
            self.ctx.push(Message::tool_result(&result.call, visible));
            self.artifacts
                .extend(result.output.artifacts.iter().cloned());
            step_done |= self.announce(&result.effect);
        }
        if step_done {
            if self.cfg.fold {
                self.fold();
            }
            self.emit.emit(EventKind::Checkpoint {
                checkpoint: Checkpoint {
                    record: self.record(),
                    rounds: self.rounds,
                    usage: self.usage,
                    elapsed_ms: self.elapsed_ms(),
                },
            });
        }
        batch
            .force_answer
            .then_some(Ending::Force(StopReason::Repetition))
    }

    /// Events for a spine effect; true when a step was finished.
    fn announce(&self, effect: &SpineEffect) -> bool {
        let step_done = match effect {
            SpineEffect::None => return false,
            SpineEffect::Planned => false,
            SpineEffect::StepDone {
                step_id, summary, ..
            } => {
                self.emit.emit(EventKind::StepFinished {
                    step_id: step_id.clone(),
                    summary: summary.clone(),
                });
                true
            }
            SpineEffect::Replanned { reason } => {
                self.emit.emit(EventKind::Replanned {
                    reason: reason.clone(),
                });
                false
            }
        };
        self.emit_plan(&self.record());
        step_done
    }

    fn emit_plan(&self, record: &SolveRecord) {
        self.emit.emit(EventKind::Plan {
            analysis: record.analysis.clone(),
            steps: record.step_views(),
            replans_used: record.replans_used,
            replans_max: record.replans_max,
        });
    }

    /// Fold the finished step's messages out of the context (DESIGN §5.6); the progress
    /// block, rendered before every request, carries the plan and the summaries.
    fn fold(&mut self) {
        let tail_tokens = self
            .tail(self.rounds + 1)
            .as_deref()
            .map(crate::tokens::count)
            .unwrap_or(0);
        let before = self.ctx.estimate(tail_tokens);
        self.ctx.fold();
        let after = self.ctx.estimate(tail_tokens);
        self.emit.emit(EventKind::ContextFolded {
            tokens_before: before,
            tokens_after: after,
        });
    }

    /// The one forced-answer path (DESIGN §5.5).
    async fn force_answer(
        &mut self,
        stop: StopReason,
    ) -> (Option<String>, Option<AnswerSource>, StopReason) {
        if stop == StopReason::Cancelled || self.cancel.is_cancelled() {
            return (None, None, StopReason::Cancelled);
        }
        self.emit.emit(EventKind::Warning {
            kind: "forced_answer".into(),
            message: format!("{stop}: asking the model for a final answer without tools"),
        });
        let mut tail = self.tail(self.rounds + 1).unwrap_or_default();
        if !tail.is_empty() {
            tail.push_str("\n\n");
        }
        tail.push_str(ULTIMATUM_MARKER);
        tail.push(' ');
        tail.push_str(self.texts.get(Text::Ultimatum));
        let tail_tokens = crate::tokens::count(&tail);
        let limit = (self.context_window as f64 * self.cfg.ultimatum_at) as u64;
        while self.ctx.estimate(tail_tokens) > limit && self.ctx.drop_largest_tool_output() {}
        self.rounds += 1;
        self.emit.emit(EventKind::RoundStarted {
            round: self.rounds,
            max_rounds: self.cfg.max_rounds,
            context_tokens: self.ctx.estimate(tail_tokens),
            context_window: self.context_window,
        });
        let request = self.request(Some(tail), ToolChoice::None, self.reserve().max(256) as u32);
        let deadline = self.deadline.max(Instant::now() + FORCED_ANSWER_GRACE);
        let result = self.call_model(&request, deadline).await;
        match result {
            Ok(c) => {
                let (c, _) = self.interpret(c);
                self.usage.add(&c.usage);
                self.emit.emit(EventKind::RoundFinished {
                    round: self.rounds,
                    role: RoundRole::Answer,
                    finish_reason: c.finish_reason.as_str().to_string(),
                    usage: c.usage,
                });
                let mut text = std::mem::take(&mut self.answer_parts).concat();
                text.push_str(&c.text);
                if !text.trim().is_empty() {
                    return (
                        Some(text.trim().to_string()),
                        Some(AnswerSource::Forced),
                        stop,
                    );
                }
            }
            Err(CallFailure::Cancelled) => return (None, None, StopReason::Cancelled),
            Err(CallFailure::Deadline) => self.emit.emit(EventKind::Warning {
                kind: "forced_answer".into(),
                message: "the forced answer did not arrive in time".into(),
            }),
            Err(CallFailure::Model(e)) => self.emit.emit(EventKind::Warning {
                kind: "forced_answer".into(),
                message: format!("the forced answer failed: {e}"),
            }),
        }
        let fallback = summary_answer(&self.record(), &self.texts);
        let source = fallback.as_ref().map(|_| AnswerSource::StepSummaries);
        (fallback, source, stop)
    }
}

fn emit_pieces(emit: &Emitter<'_>, pieces: Vec<Piece>) {
    for piece in pieces {
        emit.emit(match piece {
            Piece::Text(text) => EventKind::TextDelta { text },
            Piece::Reasoning(text) => EventKind::ReasoningDelta { text },
        });
    }
}

/// The answer of last resort: the finished steps' summaries, labelled as such.
fn summary_answer(record: &SolveRecord, texts: &Texts) -> Option<String> {
    let summaries = record.summaries();
    if summaries.is_empty() {
        return None;
    }
    let mut out = format!("{}\n", texts.get(Text::SummaryAnswerHeader));
    for (id, goal, summary) in summaries {
        out.push('\n');
        out.push_str(&texts.render(
            Text::SummaryAnswerStep,
            &[("id", &id), ("goal", &goal), ("summary", &summary)],
        ));
    }
    let open: Vec<String> = record.open_steps().map(|s| s.id.clone()).collect();
    if !open.is_empty() {
        out.push_str("\n\n");
        out.push_str(&texts.render(
            Text::SummaryAnswerNotDone,
            &[("open_steps", &open.join(", "))],
        ));
    }
    Some(out)
}
