//! A tiny simulated engine: just enough of the loop (the real spine from deepsolve-core,
//! gates, folding with a progress block, nudges, repetition guard, empty rounds, the forced
//! answer) to drive each scripted policy to its intended ending through a `ChatModel`.
//! It is a test fixture for the policies, not a reference for the engine.
//!
//! It speaks the native protocol, the text-tag protocol (calls written in the reply, results
//! sent back as `<tool_response>` blocks in a user message), or `auto` (native until the
//! provider says tools are unsupported). Replies are read with the engine's own
//! `deepsolve_core::parse_reply` (think blocks, vendor markup, invented results cut), so
//! the testkit's renderings are checked against the engine's reader on every turn.

use deepsolve_core::solve::spine::{self, SOLVE_FINISH_STEP, SpineEffect};
use deepsolve_core::solve::{SolveSession, is_solve_tool, solve_tool_specs};
use deepsolve_core::{
    ChatModel, ChatRequest, Completion, Language, Message, ModelError, ParsedCall, Role,
    StreamDelta, Texts, ToolCall, ToolChoice, ToolSpec, parse_reply,
};
use deepsolve_protocol::SolveRecord;
use deepsolve_testkit::tags::{STOP_SEQUENCES, render_call, render_response};
use serde_json::{Value, json};

/// How tools are offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SimProtocol {
    Native,
    /// Tools listed in the system prompt, no `tools` field, stopped at `<tool_response>`.
    Tags,
    /// Native until the model answers "tools unsupported", then tags for the rest of the turn.
    Auto,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    Answered,
    AnsweredWithOpenSteps,
    AnsweredWithoutPlan,
    MaxRounds,
    Repetition,
    EmptyRounds,
    ModelError,
}

/// Where the progress block goes: each placement an engine could reasonably choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FoldStyle {
    /// The step's messages (since the plan result) are replaced by the block, in place.
    Appended,
    /// Everything after the problem (the plan call included) is folded; the block is merged
    /// into the problem message.
    MergedIntoProblem,
    /// Like deepsolve-core's engine: a fold clears the working messages, and the block is
    /// re-rendered as the last user message of every request once a plan exists.
    EphemeralTail,
}

pub(crate) const FOLD_STYLES: [FoldStyle; 3] = [
    FoldStyle::Appended,
    FoldStyle::MergedIntoProblem,
    FoldStyle::EphemeralTail,
];

#[derive(Debug, Clone)]
pub(crate) struct SimConfig {
    pub max_rounds: u32,
    pub settlement_rounds: u32,
    pub max_replans: u32,
    pub max_parallel: usize,
    /// Work tools offered besides the solve tools.
    pub work_tools: Vec<&'static str>,
    pub fold: FoldStyle,
    pub protocol: SimProtocol,
    /// Tags mode: keep the reply's raw text in the history (invented results included)
    /// instead of the visible text and the calls read from it — a careless engine.
    pub keep_raw_reply: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            max_rounds: 12,
            settlement_rounds: 2,
            max_replans: 2,
            max_parallel: 8,
            work_tools: vec!["reason"],
            fold: FoldStyle::EphemeralTail,
            protocol: SimProtocol::Native,
            keep_raw_reply: false,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    pub stop: Stop,
    pub answer: String,
    pub record: SolveRecord,
    pub rounds: u32,
    /// Every tool result: (tool name, content).
    pub results: Vec<(String, String)>,
    /// Tool calls per round (rounds with calls only).
    pub batch_sizes: Vec<usize>,
    pub nudges: u32,
    pub retries: u32,
    pub error: Option<ModelError>,
}

impl Outcome {
    pub(crate) fn results_of(&self, tool: &str) -> Vec<&str> {
        self.results
            .iter()
            .filter(|(n, _)| n == tool)
            .map(|(_, c)| c.as_str())
            .collect()
    }

    pub(crate) fn any_result_contains(&self, needle: &str) -> bool {
        self.results.iter().any(|(_, c)| c.contains(needle))
    }

    pub(crate) fn done_steps(&self) -> usize {
        self.record.steps.iter().filter(|s| s.done).count()
    }
}

fn english() -> std::sync::Arc<Texts> {
    Texts::builtin(Language::En)
}

pub(crate) const PROBLEM: &str = "Find all real x with x^2 - 5x + 6 = 0.";

fn work_spec(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("the {name} tool"),
        parameters: json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
    }
}

pub(crate) struct Sim<'m, M: ChatModel> {
    model: &'m M,
    cfg: SimConfig,
    messages: Vec<Message>,
    tools: Vec<ToolSpec>,
    session: SolveSession,
    /// Where the current step's messages start (appended style: where the block goes), and
    /// the length of the message before it then (tags mode merges blocks into it).
    boundary: Option<(usize, usize)>,
    /// Speaking the text-tag protocol now.
    tags: bool,
    /// Calls read from reply text so far (their ids).
    text_calls: usize,
    /// The raw text of the latest reply, before reading.
    raw_reply: String,
    plan_nudged: bool,
    gate_nudged: bool,
    last_sig: Option<String>,
    repeats: u32,
    round: u32,
    out: Outcome,
}

impl<'m, M: ChatModel> Sim<'m, M> {
    pub(crate) fn new(model: &'m M, cfg: SimConfig) -> Self {
        let tags = cfg.protocol == SimProtocol::Tags;
        let mut tools = solve_tool_specs(&english());
        tools.extend(cfg.work_tools.iter().map(|t| work_spec(t)));
        Sim {
            model,
            session: SolveSession::new("sim", cfg.max_replans, 12),
            cfg,
            messages: vec![
                Message::system("You are a careful solver. Plan first, then work each step."),
                Message::user(PROBLEM),
            ],
            tools,
            boundary: None,
            tags,
            text_calls: 0,
            raw_reply: String::new(),
            plan_nudged: false,
            gate_nudged: false,
            last_sig: None,
            repeats: 0,
            round: 0,
            out: Outcome {
                stop: Stop::ModelError,
                answer: String::new(),
                record: SolveRecord::default(),
                rounds: 0,
                results: Vec::new(),
                batch_sizes: Vec::new(),
                nudges: 0,
                retries: 0,
                error: None,
            },
        }
    }

    fn request(&self, choice: ToolChoice, max_tokens: u32) -> ChatRequest {
        let mut messages = self.messages.clone();
        if self.cfg.fold == FoldStyle::EphemeralTail && self.session.record.has_plan() {
            let block = self.progress_block(self.round);
            match messages.last_mut() {
                Some(last) if last.role == Role::User => {
                    last.content.push_str("\n\n");
                    last.content.push_str(&block);
                }
                _ => messages.push(Message::user(block)),
            }
        }
        if !self.tags {
            return ChatRequest {
                messages,
                tools: self.tools.clone(),
                tool_choice: choice,
                max_tokens,
                temperature: 0.3,
                stop: Vec::new(),
                response_format: None,
            };
        }
        messages[0].content.push_str(&manifest(&self.tools));
        ChatRequest {
            messages,
            tools: Vec::new(),
            tool_choice: choice,
            max_tokens,
            temperature: 0.3,
            stop: STOP_SEQUENCES.iter().map(|s| s.to_string()).collect(),
            response_format: None,
        }
    }

    async fn call(&mut self, req: &ChatRequest) -> Result<deepsolve_core::Completion, ModelError> {
        let mut retries = 0;
        let result = self
            .model
            .complete(req, &mut |d| {
                if matches!(d, StreamDelta::Retrying { .. }) {
                    retries += 1;
                }
            })
            .await;
        self.out.retries += retries;
        result.map(|c| self.read_reply(c))
    }

    /// The reply as the engine reads it: think blocks to reasoning, calls written in the text
    /// (tags, vendor markup) to calls, everything from an invented `<tool_response>` cut.
    fn read_reply(&mut self, mut completion: Completion) -> Completion {
        self.raw_reply = completion.text.clone();
        let parsed = parse_reply(&completion.text);
        completion.text = parsed.visible;
        if !parsed.reasoning.is_empty() {
            completion.reasoning.push_str(&parsed.reasoning);
        }
        if completion.tool_calls.is_empty() {
            for call in parsed.calls {
                let (name, arguments) = match call {
                    ParsedCall::Call { name, arguments } => (name, arguments),
                    ParsedCall::Malformed { raw, .. } => (String::new(), raw),
                };
                self.text_calls += 1;
                completion.tool_calls.push(ToolCall {
                    id: format!("call_text_{}", self.text_calls),
                    name,
                    arguments,
                });
            }
        }
        completion
    }

    /// Append an engine notice as a user message, merged into a previous user message.
    fn notice(&mut self, text: String) {
        match self.messages.last_mut() {
            Some(last) if last.role == Role::User => {
                last.content.push_str("\n\n");
                last.content.push_str(&text);
            }
            _ => self.messages.push(Message::user(text)),
        }
    }

    fn nudge(&mut self, text: &str) {
        self.out.nudges += 1;
        self.notice(format!("[deepsolve:nudge] {text}"));
    }

    pub(crate) async fn run(mut self) -> Outcome {
        let total = self.cfg.max_rounds + self.cfg.settlement_rounds;
        let mut empty_rounds = 0;
        for round in 1..=total {
            self.out.rounds = round;
            self.round = round;
            if round == self.cfg.max_rounds + 1 {
                self.notice("[deepsolve:notice] The round budget is spent: finish now.".into());
            }
            let completion = match self.round_completion().await {
                Ok(c) => c,
                Err(e) => return self.fail(e),
            };
            if completion.tool_calls.is_empty() && completion.text.trim().is_empty() {
                empty_rounds += 1;
                if empty_rounds >= 2 {
                    return self.forced(Stop::EmptyRounds).await;
                }
                self.nudge("Stop deliberating and act: call a tool or answer.");
                continue;
            }
            empty_rounds = 0;
            if completion.tool_calls.is_empty() {
                if let Some(outcome) = self.answer(completion.text) {
                    return outcome;
                }
                continue;
            }
            if self.dispatch(completion, round).await {
                return self.forced(Stop::Repetition).await;
            }
        }
        self.forced(Stop::MaxRounds).await
    }

    /// One round's completion; an all-reasoning `length` reply is retried once with twice
    /// the budget (R11).
    async fn round_completion(&mut self) -> Result<deepsolve_core::Completion, ModelError> {
        let req = self.request(ToolChoice::Auto, 1000);
        let first = match self.call(&req).await {
            Err(ModelError::ToolsUnsupported { .. })
                if self.cfg.protocol == SimProtocol::Auto && !self.tags =>
            {
                self.tags = true;
                let req = self.request(ToolChoice::Auto, 1000);
                self.call(&req).await?
            }
            other => other?,
        };
        let empty = first.tool_calls.is_empty() && first.text.trim().is_empty();
        if !(empty && first.finish_reason == deepsolve_core::FinishReason::Length) {
            return Ok(first);
        }
        let retry = self.request(ToolChoice::Auto, 2000);
        self.call(&retry).await
    }

    fn fail(mut self, e: ModelError) -> Outcome {
        self.out.stop = Stop::ModelError;
        self.out.error = Some(e);
        self.out.record = self.session.record.clone();
        self.out
    }

    /// An answer: gates first (plan nudge, finish gate), else the turn ends.
    fn answer(&mut self, text: String) -> Option<Outcome> {
        let record = &self.session.record;
        let open: Vec<String> = record.open_steps().map(|s| s.id.clone()).collect();
        if !record.has_plan() && !self.plan_nudged {
            self.plan_nudged = true;
            self.messages.push(Message::assistant(text));
            self.nudge("Make a plan with solve_plan first.");
            return None;
        }
        if record.has_plan() && !open.is_empty() && !self.gate_nudged {
            self.gate_nudged = true;
            self.messages.push(Message::assistant(text));
            let msg = format!(
                "Steps remain open: {}. Continue with {}, or finish/replan; if you are certain, say so.",
                open.join(", "),
                open[0]
            );
            self.nudge(&msg);
            return None;
        }
        self.out.stop = if !record.has_plan() {
            Stop::AnsweredWithoutPlan
        } else if open.is_empty() {
            Stop::Answered
        } else {
            Stop::AnsweredWithOpenSteps
        };
        self.out.answer = text;
        self.out.record = record.clone();
        Some(self.out.clone())
    }

    /// Run one batch of calls. Returns true when the repetition guard forces an answer.
    async fn dispatch(&mut self, completion: deepsolve_core::Completion, round: u32) -> bool {
        let calls = completion.tool_calls.clone();
        self.out.batch_sizes.push(calls.len());
        if self.tags {
            self.messages
                .push(Message::assistant(self.tags_history(&completion)));
        } else {
            self.messages.push(Message::assistant_with_calls(
                completion.text,
                calls.clone(),
                Some(completion.reasoning).filter(|r| !r.is_empty()),
            ));
        }
        let mut results = Vec::new();
        let has_work = calls.iter().any(|c| !is_solve_tool(&c.name));
        let mut force = false;
        let mut fold = false;
        let mut planned = false;
        for (i, call) in calls.iter().enumerate() {
            let content = if i >= self.cfg.max_parallel {
                "skipped: over the per-round limit".to_string()
            } else {
                let (content, effect, stop) = self.run_call(call, has_work).await;
                force |= stop;
                fold |= matches!(effect, SpineEffect::StepDone { .. });
                planned |= effect == SpineEffect::Planned;
                content
            };
            self.out.results.push((call.name.clone(), content.clone()));
            results.push(Message::tool_result(call, content));
        }
        if self.tags {
            let blocks: Vec<String> = results
                .iter()
                .map(|r| {
                    let name = r.name.as_deref().unwrap_or_default();
                    render_response(
                        name,
                        r.tool_call_id.as_deref().unwrap_or_default(),
                        &r.content,
                    )
                })
                .collect();
            self.messages.push(Message::user(blocks.join("\n")));
        } else {
            self.messages.extend(results);
        }
        if planned {
            let last_len = self.messages.last().map_or(0, |m| m.content.len());
            self.boundary = Some((self.messages.len(), last_len));
        }
        if fold {
            self.fold(round);
        }
        force
    }

    async fn run_call(
        &mut self,
        call: &ToolCall,
        batch_has_work: bool,
    ) -> (String, SpineEffect, bool) {
        let none = SpineEffect::None;
        if !self.tools.iter().any(|t| t.name == call.name) {
            let names: Vec<&str> = self.tools.iter().map(|t| t.name.as_str()).collect();
            let msg = format!(
                "tool {} is not available; available: {}",
                call.name,
                names.join(", ")
            );
            return (msg, none, false);
        }
        let args: Value = match serde_json::from_str(&call.arguments) {
            Ok(v) => v,
            Err(e) => {
                return (
                    format!("the arguments are not valid JSON: {e}"),
                    none,
                    false,
                );
            }
        };
        if is_solve_tool(&call.name) {
            if call.name == SOLVE_FINISH_STEP && batch_has_work {
                let msg =
                    "finish the step in a later round, after reading these results".to_string();
                return (msg, none, false);
            }
            let r = spine::handle(&mut self.session, &call.name, &args, &english());
            return (r.output.content, r.effect, false);
        }
        if !self.session.record.has_plan() {
            return ("Call solve_plan first.".to_string(), none, false);
        }
        let sig = format!("{}:{}", call.name, args);
        if self.last_sig.as_deref() == Some(sig.as_str()) {
            self.repeats += 1;
        } else {
            self.last_sig = Some(sig);
            self.repeats = 1;
        }
        if self.repeats >= 3 {
            let stop = self.repeats >= 5;
            return (
                "you already ran this; change strategy".to_string(),
                none,
                stop,
            );
        }
        (self.work(&call.name, &args).await, none, false)
    }

    /// The work tools: `reason` makes a tool-less sub-call to the same model.
    async fn work(&mut self, name: &str, args: &Value) -> String {
        let query = args["query"].as_str().unwrap_or_default().to_string();
        if name != "reason" {
            return format!("{name} result for {query}: 42");
        }
        let sub = ChatRequest {
            messages: vec![
                Message::system("Derive step by step; conclude with a labelled answer."),
                Message::user(query),
            ],
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            max_tokens: 1000,
            temperature: 0.3,
            stop: Vec::new(),
            response_format: None,
        };
        match self.call(&sub).await {
            Ok(c) => c.text,
            Err(e) => format!("reason failed: {e}"),
        }
    }

    fn progress_block(&self, round: u32) -> String {
        let r = &self.session.record;
        let current = r.current().map(|s| s.id.clone());
        let mut text = format!(
            "[deepsolve:progress] round {round} of {} · replans {} of {}\nProblem: {PROBLEM}\nPlan: {}",
            self.cfg.max_rounds, r.replans_used, r.replans_max, r.analysis
        );
        for s in &r.steps {
            let line = match (&s.summary, s.done) {
                (Some(sum), true) => format!("\n  [x] {} {} — {sum}", s.id, s.goal),
                _ if Some(&s.id) == current.as_ref() => {
                    format!("\n  [ ] {} {}   <- current", s.id, s.goal)
                }
                _ => format!("\n  [ ] {} {}", s.id, s.goal),
            };
            text.push_str(&line);
        }
        text
    }

    /// Fold the finished step out of the context and pin the progress block.
    fn fold(&mut self, round: u32) {
        let block = self.progress_block(round);
        match self.cfg.fold {
            FoldStyle::MergedIntoProblem => {
                self.messages.truncate(2);
                self.messages[1].content = format!("{PROBLEM}\n\n{block}");
            }
            FoldStyle::Appended => {
                let (start, last_len) = self.boundary.unwrap_or((self.messages.len(), usize::MAX));
                // The old block sits at `start` (or, in tags mode, was merged into the results
                // message before it): replaced, not stacked.
                self.messages.truncate(start);
                if let Some(last) = self.messages.last_mut()
                    && last.content.len() > last_len
                {
                    last.content.truncate(last_len);
                }
                self.notice(block);
            }
            FoldStyle::EphemeralTail => self.messages.truncate(2),
        }
    }

    /// The one forced-answer path: ultimatum, `tool_choice: none`, summaries as fallback.
    async fn forced(mut self, stop: Stop) -> Outcome {
        self.notice(
            "[deepsolve:ultimatum] Stop calling tools. Answer now with what you have.".into(),
        );
        let req = self.request(ToolChoice::None, 1000);
        let text = match self.call(&req).await {
            Ok(c) if !c.text.trim().is_empty() => c.text,
            _ => {
                let sums: Vec<String> = self
                    .session
                    .record
                    .summaries()
                    .into_iter()
                    .map(|s| format!("{}: {}", s.id, s.summary))
                    .collect();
                format!("(assembled from step summaries) {}", sums.join("; "))
            }
        };
        self.out.stop = stop;
        self.out.answer = text;
        self.out.record = self.session.record.clone();
        self.out
    }
}

impl<M: ChatModel> Sim<'_, M> {
    /// A tags-mode reply as it goes back into the history: the visible text, then each call
    /// as a `<tool_call>` block (or, for a careless engine, the raw reply).
    fn tags_history(&self, completion: &Completion) -> String {
        if self.cfg.keep_raw_reply {
            return self.raw_reply.clone();
        }
        let mut text = completion.text.clone();
        for call in &completion.tool_calls {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&render_call(&call.name, &call.arguments));
        }
        text
    }
}

/// The tools section of a tags-mode system prompt, in the engine's format.
fn manifest(specs: &[ToolSpec]) -> String {
    let mut out = String::from(
        "\n\n# Calling tools\n\nTo call a tool, write:\n\n<tool_call>\n{\"name\": \"TOOL_NAME\", \"arguments\": {\"ARG\": \"VALUE\"}}\n</tool_call>\n\nThen stop: results come back as <tool_response> blocks.\n\n## Tools\n",
    );
    for spec in specs {
        out.push_str(&format!(
            "\n### {}\n{}\nArguments (JSON Schema): {}\n",
            spec.name, spec.description, spec.parameters
        ));
    }
    out
}

pub(crate) async fn run<M: ChatModel>(model: &M, cfg: SimConfig) -> Outcome {
    Sim::new(model, cfg).run().await
}

/// A minimal HTTP `ChatModel` over the mock server (the wire path of the policies), built on
/// the testkit's own wire helpers: no retries, no dependency on `deepsolve-llm`.
pub(crate) struct WireModel {
    pub url: String,
    client: reqwest::Client,
}

impl WireModel {
    pub(crate) fn new(url: String) -> Self {
        WireModel {
            url,
            client: reqwest::Client::new(),
        }
    }
}

#[async_trait::async_trait]
impl ChatModel for WireModel {
    fn name(&self) -> &str {
        "wire"
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        on_delta: deepsolve_core::DeltaSink<'_>,
    ) -> Result<deepsolve_core::Completion, ModelError> {
        let transport = |e: reqwest::Error| ModelError::Transport {
            attempts: 1,
            message: e.to_string(),
        };
        let body = deepsolve_testkit::wire::request_to_wire(request, "mock-model");
        let response = self
            .client
            .post(format!("{}/chat/completions", self.url))
            .json(&body)
            .send()
            .await
            .map_err(transport)?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(transport)?;
        if status != 200 {
            return Err(ModelError::Server {
                status,
                attempts: 1,
                message: text,
            });
        }
        let parsed =
            deepsolve_testkit::sse::parse_stream(&text).map_err(|e| ModelError::Protocol {
                message: e.to_string(),
            })?;
        if !parsed.reasoning.is_empty() {
            on_delta(StreamDelta::Reasoning(parsed.reasoning.clone()));
        }
        if !parsed.text.is_empty() {
            on_delta(StreamDelta::Text(parsed.text.clone()));
        }
        let (prompt_tokens, completion_tokens) = parsed.usage.unwrap_or_default();
        Ok(deepsolve_core::Completion {
            text: parsed.text,
            reasoning: parsed.reasoning,
            tool_calls: parsed
                .tool_calls
                .into_iter()
                .map(|c| ToolCall {
                    id: c.id.unwrap_or_default(),
                    name: c.name,
                    arguments: c.arguments,
                })
                .collect(),
            finish_reason: deepsolve_core::FinishReason::parse(
                parsed.finish_reason.as_deref().unwrap_or("stop"),
            ),
            usage: deepsolve_protocol::Usage {
                prompt_tokens,
                completion_tokens,
                estimated: false,
                cached_tokens: None,
            },
        })
    }
}
