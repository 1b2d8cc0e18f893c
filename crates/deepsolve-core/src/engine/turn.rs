//! A running turn: its state, built from the spec; its start, its rounds, its end.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::budget::Budget;
use super::decoding::{Decoding, enforced};
use super::drafts::Drafts;
use super::gates::Nudged;
use super::reply::ReplyState;
use super::{PriorTurn, RECORD_MARKER, TurnSpec};
use crate::citations::{Citations, cited};
use crate::config::{Draft, SolveConfig};
use crate::context::Context;
use crate::dispatch::{RepetitionGuard, Toolbox};
use crate::event::{Emitter, EventKind, EventSink};
use crate::image::TurnImage;
use crate::message::Message;
use crate::model::{ChatModel, ChatRequest, Honours, ModelError, ToolChoice, ToolSpec};
use crate::outcome::{AnswerSource, StopReason, TurnOutcome};
use crate::progress;
use crate::solve::{SessionHandle, SolveRecord, ToolLine, playbook};
use crate::texts::{Text, Texts};
use crate::tool::{Artifact, Material, Progress, ToolContext};
use crate::wire::{ToolProtocol, Wire};

/// How the round loop ended.
pub(super) enum Ending {
    /// The model answered of its own accord.
    Answered {
        text: String,
        stop: StopReason,
    },
    /// A budget or guard ended the turn: a forced answer follows.
    Force(StopReason),
    /// The stream broke after output had started: a forced answer salvages what it can.
    Salvage(ModelError),
    Cancelled,
    ModelFailed(ModelError),
}

/// The turn's final answer, where it came from, and why the turn stopped.
pub(super) struct Final {
    pub(super) answer: Option<String>,
    pub(super) source: Option<AnswerSource>,
    pub(super) stop: StopReason,
    /// What went wrong, for `model_error`.
    pub(super) error: Option<String>,
}

impl Final {
    pub(super) fn answered(text: String, source: AnswerSource, stop: StopReason) -> Self {
        Final {
            answer: Some(text),
            source: Some(source),
            stop,
            error: None,
        }
    }

    pub(super) fn without_answer(stop: StopReason) -> Self {
        Final {
            answer: None,
            source: None,
            stop,
            error: None,
        }
    }
}

/// A finished turn: the outcome, and whether it found the model to lack native tools.
pub(super) struct TurnEnd {
    pub(super) outcome: TurnOutcome,
    pub(super) fell_back_to_tags: bool,
}

pub(super) struct TurnRun<'a> {
    pub(super) model: &'a dyn ChatModel,
    pub(super) emit: Emitter<'a>,
    pub(super) problem: String,
    pub(super) texts: Arc<Texts>,
    pub(super) cfg: SolveConfig,
    pub(super) toolbox: Toolbox,
    pub(super) specs: Vec<ToolSpec>,
    pub(super) session: SessionHandle,
    pub(super) ctx: Context,
    pub(super) cancel: CancellationToken,
    pub(super) tool_ctx: ToolContext,
    pub(super) wire: Wire,
    pub(super) budget: Budget,
    pub(super) nudged: Nudged,
    /// How the spine is held at decoding time (`solve.enforce`).
    pub(super) decoding: Decoding,
    pub(super) reply: ReplyState,
    pub(super) guard: RepetitionGuard,
    pub(super) artifacts: Vec<Artifact>,
    /// The model sees the turn's images (`TurnSpec::sees_images`).
    pub(super) sees_images: bool,
    /// Every line of the tails the model was shown (progress blocks, notices): an answer that
    /// copies one back carries engine text (see `vet`).
    pub(super) shown_tail_lines: BTreeSet<String>,
    /// The endpoint ends a reply at a stop sequence (the probe's verdict).
    stops_honoured: bool,
    /// The first workings asked for plainly (`solve.draft`, see [`drafts_first`]); `None` where
    /// the turn does not draft.
    pub(super) drafts: Option<Drafts>,
}

/// Whether a turn's first rounds ask for the model's first workings plainly: `solve.draft`,
/// where the spine is held at decoding time (the draft is kept as the reasoning before the
/// plan, and the next round asks for the plan), and only for a problem that stands alone —
/// no earlier turns, material or images, which the short prompt would leave out.
fn drafts_first(spec: &TurnSpec, decoding: &Decoding, honours: &Honours) -> bool {
    let wanted = match spec.config.draft {
        Draft::On => true,
        Draft::Off => false,
        Draft::Auto => honours.plans_unforced != Some(true),
    };
    let alone = spec.history.is_empty()
        && spec.material.is_none()
        && spec.images.is_empty()
        && spec.resume.is_none();
    wanted && alone && decoding.is_on()
}

/// What a turn was given besides its problem's text, as the system prompt lists it.
#[derive(Clone, Copy)]
pub(super) struct Given<'a> {
    pub(super) material: Option<&'a Material>,
    pub(super) images: &'a [TurnImage],
    /// The model sees the images (they go with the problem as image parts).
    pub(super) sees_images: bool,
}

/// The system prompt: the playbook, the material manifest (when the turn has material), the
/// images (when it has any), and the protocol's tools manifest of `specs` (the toolbox's, as
/// offered). Each mounted work tool is listed with its own line in the turn's language.
pub(super) fn system_prompt(
    texts: &Texts,
    toolbox: &Toolbox,
    specs: &[ToolSpec],
    protocol: &dyn ToolProtocol,
    given: Given<'_>,
) -> String {
    let mounted: Vec<ToolLine<'_>> = toolbox
        .work_tools()
        .map(|tool| {
            let spec = tool.spec();
            ToolLine {
                name: &spec.name,
                description: &spec.description,
                line: tool.playbook_line(texts.language()),
            }
        })
        .collect();
    let mut prompt = playbook(texts, &mounted);
    if let Some(manifest) = given
        .material
        .and_then(|m| crate::material::manifest(m, texts))
    {
        prompt.push_str(&manifest);
    }
    let readers: Vec<&str> = toolbox
        .work_tools()
        .filter(|tool| tool.reads_images())
        .map(|tool| tool.spec().name.as_str())
        .collect();
    if let Some(manifest) = crate::image::manifest(given.images, given.sees_images, &readers, texts)
    {
        prompt.push_str(&manifest);
    }
    if let Some(manifest) = protocol.manifest(specs, texts) {
        prompt.push_str(&manifest);
    }
    prompt
}

/// A previous turn's solve record, as the model sees it before that turn's answer.
fn record_text(record: &SolveRecord, texts: &Texts) -> String {
    let mut out = format!(
        "{RECORD_MARKER} {}",
        texts.render(Text::PlanAnalysis, &[("analysis", &record.analysis)])
    );
    for step in &record.steps {
        out.push_str(&progress::step_line(step));
    }
    out
}

/// A previous turn as the model sees it: the question, then the record and the answer.
fn history_messages(history: &[PriorTurn], texts: &Texts) -> Vec<Message> {
    history
        .iter()
        .flat_map(|turn| {
            let mut answer = String::new();
            if let Some(record) = turn.solve.as_ref().filter(|r| r.has_plan()) {
                answer.push_str(&record_text(record, texts));
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

/// The problem as the model reads it: with its images as parts when the model sees them.
fn problem_message(spec: &TurnSpec) -> Message {
    if spec.sees_images && !spec.images.is_empty() {
        Message::user_with_images(spec.problem.clone(), spec.images.clone())
    } else {
        Message::user(spec.problem.clone())
    }
}

/// The context every tool call of the turn starts from. Its one `Citations` continues the
/// numbering of the checkpoint a resumed turn starts from.
fn tool_context(spec: &TurnSpec, cancel: &CancellationToken) -> ToolContext {
    let restored = spec
        .resume
        .as_ref()
        .map(|c| c.sources.clone())
        .unwrap_or_default();
    ToolContext {
        turn_id: spec.turn_id.clone(),
        session_id: spec.session_id.clone(),
        user_id: spec.user_id.clone(),
        workspace: spec.workspace.clone(),
        call_id: String::new(),
        language: spec.language,
        cancel: cancel.child_token(),
        deadline: None,
        material: spec.material.clone(),
        citations: Arc::new(Citations::new(restored)),
        images: spec.images.clone(),
        progress: Progress::default(),
    }
}

impl<'a> TurnRun<'a> {
    #[allow(
        clippy::too_many_arguments,
        reason = "one turn's parts, each built by Engine::run_turn and moved in once"
    )]
    pub(super) fn new(
        model: &'a dyn ChatModel,
        spec: TurnSpec,
        texts: Arc<Texts>,
        toolbox: Toolbox,
        session: SessionHandle,
        wire: Wire,
        sink: &'a dyn EventSink,
        cancel: CancellationToken,
    ) -> Self {
        let specs = toolbox.specs();
        let given = Given {
            material: spec.material.as_deref(),
            images: &spec.images,
            sees_images: spec.sees_images,
        };
        let mut prefix = vec![Message::system(system_prompt(
            &texts,
            &toolbox,
            &specs,
            wire.protocol(),
            given,
        ))];
        prefix.extend(history_messages(&spec.history, &texts));
        prefix.push(problem_message(&spec));
        let honours = model.honours();
        let decoding = Decoding::new(
            enforced(spec.config.enforce, &honours),
            honours.tool_choice_named,
        );
        let drafts = drafts_first(&spec, &decoding, &honours).then(|| Drafts::new(&spec.config));
        TurnRun {
            drafts,
            decoding,
            sees_images: spec.sees_images,
            model,
            emit: Emitter::new(spec.turn_id.clone(), spec.first_seq, sink),
            tool_ctx: tool_context(&spec, &cancel),
            budget: Budget::new(&spec.config, spec.context_window, spec.resume.as_ref()),
            problem: spec.problem,
            cfg: spec.config,
            toolbox,
            specs,
            session,
            ctx: Context::new(prefix, texts.clone()),
            texts,
            cancel,
            wire,
            nudged: Nudged::default(),
            reply: ReplyState::default(),
            guard: RepetitionGuard::default(),
            artifacts: Vec::new(),
            shown_tail_lines: BTreeSet::new(),
            stops_honoured: honours.stop_sequences,
        }
    }

    pub(super) async fn run(mut self) -> TurnEnd {
        self.announce_start();
        for tool in self.toolbox.work_tools() {
            tool.turn_started(&self.tool_ctx).await;
        }
        let ending = self.rounds_loop().await;
        for tool in self.toolbox.work_tools() {
            tool.turn_finished(&self.tool_ctx).await;
        }
        let last = match ending {
            Ending::Answered { text, stop } => Final::answered(text, AnswerSource::Model, stop),
            Ending::Force(stop) => self.force_answer(stop).await,
            Ending::Salvage(cut) => self.salvage(&cut).await,
            Ending::Cancelled => Final::without_answer(StopReason::Cancelled),
            Ending::ModelFailed(e) => self.after_model_failure(&e),
        };
        let last = self.settle(last).await;
        let fell_back_to_tags = self.wire.fell_back();
        TurnEnd {
            outcome: self.finish(last),
            fell_back_to_tags,
        }
    }

    fn announce_start(&self) {
        let resumed = self.budget.rounds > 0;
        self.emit.emit(EventKind::TurnStarted {
            model: self.model.name().to_string(),
            problem: self.problem.clone(),
            tools: self.toolbox.names(),
            language: self.texts.language().code().to_string(),
            resumed,
            protocol: Some(self.wire.used()),
        });
        if resumed {
            self.emit_plan(&self.record());
        }
    }

    /// A model error ends the turn: reported, with the step summaries as the answer.
    fn after_model_failure(&self, e: &ModelError) -> Final {
        self.emit.emit(EventKind::Error {
            kind: e.error_kind(),
            message: e.to_string(),
        });
        Final {
            error: Some(e.to_string()),
            ..self.summaries_answer(StopReason::ModelError)
        }
    }

    /// A broken stream ends the turn at `model_error` whether or not the forced answer comes:
    /// the break is the turn's error, reported and kept in the outcome, so a turn left without
    /// an answer still says why.
    async fn salvage(&mut self, cut: &ModelError) -> Final {
        let salvaged = self.force_answer(StopReason::ModelError).await;
        if salvaged.stop == StopReason::Cancelled {
            return salvaged;
        }
        self.emit.emit(EventKind::Error {
            kind: cut.error_kind(),
            message: cut.to_string(),
        });
        Final {
            error: Some(cut.to_string()),
            ..salvaged
        }
    }

    /// The end: the answer with the sources it cites (forced answers and step summaries
    /// cite too), `turn_finished`, the outcome.
    fn finish(self, last: Final) -> TurnOutcome {
        let sources = last
            .answer
            .as_deref()
            .map(|text| cited(text, &self.tool_ctx.citations.all()))
            .unwrap_or_default();
        if let Some(text) = &last.answer {
            self.emit.emit(EventKind::Answer {
                text: text.clone(),
                forced: last.source != Some(AnswerSource::Model),
                sources: sources.clone(),
            });
        }
        let elapsed_ms = self.budget.elapsed_ms();
        self.emit.emit(EventKind::TurnFinished {
            stop_reason: last.stop,
            usage: self.budget.usage,
            rounds: self.budget.rounds,
            elapsed_ms,
        });
        TurnOutcome {
            turn_id: self.tool_ctx.turn_id.clone(),
            answer: last.answer,
            answer_source: last.source,
            stop_reason: last.stop,
            solve: self.record(),
            usage: self.budget.usage,
            rounds: self.budget.rounds,
            elapsed_ms,
            artifacts: self.artifacts,
            sources,
            error: last.error,
        }
    }

    pub(super) fn record(&self) -> SolveRecord {
        self.session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record
            .clone()
    }

    pub(super) fn emit_plan(&self, record: &SolveRecord) {
        self.emit.emit(EventKind::Plan {
            analysis: record.analysis.clone(),
            steps: record.step_views(),
            replans_used: record.replans_used,
            replans_max: record.replans_max,
        });
    }

    /// Switch to the fallback protocol (`auto`) for the rest of the turn, system prompt
    /// included.
    pub(super) fn fall_back_to_tags(&mut self) {
        if self.wire.fall_back() {
            let given = Given {
                material: self.tool_ctx.material.as_deref(),
                images: &self.tool_ctx.images,
                sees_images: self.sees_images,
            };
            let prompt = system_prompt(
                &self.texts,
                &self.toolbox,
                &self.specs,
                self.wire.protocol(),
                given,
            );
            self.ctx.set_system(prompt);
        }
    }

    /// A request in the turn's protocol, with `tail` (of `tail_tokens` estimated tokens) as
    /// the ephemeral last message.
    pub(super) fn request(
        &mut self,
        tail: Option<String>,
        tail_tokens: u64,
        tool_choice: ToolChoice,
        max_tokens: u32,
    ) -> ChatRequest {
        if let Some(tail) = &tail {
            self.shown_tail_lines.extend(
                tail.lines()
                    .map(|line| line.trim().to_string())
                    .filter(|line| !line.is_empty()),
            );
        }
        let messages = self.ctx.request_messages(tail, tail_tokens);
        let wire = self
            .wire
            .protocol()
            .request(messages, &self.specs, &tool_choice, &self.texts);
        // A call can be required, or narrowed, only where tools are declared natively.
        let tool_choice = match tool_choice {
            ToolChoice::Required
            | ToolChoice::Named(_)
            | ToolChoice::Among(_)
            | ToolChoice::AutoAmong(_)
                if wire.tools.is_empty() =>
            {
                ToolChoice::Auto
            }
            choice => choice,
        };
        ChatRequest {
            messages: wire.messages,
            tools: wire.tools,
            tool_choice,
            max_tokens,
            temperature: self.cfg.temperature as f32,
            stop: self.stops_for(wire.stop),
            response_format: wire.response_format,
        }
    }

    /// Round 1 as the model is asked plainly: the short step-by-step system prompt and the
    /// problem, no tools. Not the turn's context: the rounds after it keep the playbook's
    /// prefix, with this reply appended as the reasoning before the plan.
    pub(super) fn draft_request(&self, max_tokens: u32) -> ChatRequest {
        ChatRequest {
            messages: vec![
                Message::system(self.texts.get(Text::DraftSystem)),
                Message::user(self.problem.clone()),
            ],
            tools: Vec::new(),
            tool_choice: ToolChoice::None,
            max_tokens,
            temperature: self.cfg.temperature as f32,
            stop: Vec::new(),
            response_format: None,
        }
    }

    /// The protocol's stop sequences, and where a result would begin once the model has
    /// written one of its own in this turn: a small model that invents one goes on doing so
    /// (the 1.5B model on llama.cpp's server opened a free round with `<tool_response>` and
    /// wrote a result for 100–200 tokens, 3 times in its first 23 rounds), and what it wrote
    /// from there was cut anyway. Only then, so the requests of a model that never invents
    /// one are unchanged.
    fn stops_for(&self, mut stop: Vec<String>) -> Vec<String> {
        let open = crate::wire::markup::RESPONSE_OPEN;
        if self.stops_honoured
            && self.reply.invented_result()
            && !stop.iter().any(|s| s.starts_with(open))
        {
            stop.push(open.to_string());
        }
        stop
    }
}
