//! [`ScriptedModel`]: a policy (or a script) as an in-process `deepsolve_core::ChatModel`.
//!
//! For the core's tests and benchmarks: no HTTP, no JSON round trip of the conversation, no
//! artificial latency. It mimics what a correct client does around the wire — retries of
//! transient failures before any output (with `Retrying` deltas, no backoff delay), typed
//! errors, usage — so the engine sees the same outcomes as through `deepsolve-llm`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use deepsolve_core::{
    ChatModel, ChatRequest, Completion, DeltaSink, FinishReason, Honours, ModelError, StreamDelta,
    ToolCall,
};
use deepsolve_protocol::Usage;
use serde_json::Value;

use crate::invariants::{InvariantConfig, check_request};
use crate::policy::{Policy, Script, Source};
use crate::reply::{Reply, Turn};
use crate::request::PolicyRequest;
use crate::sse::{self, split_chars};
use crate::wire::request_to_wire;
use crate::{Violation, lock, problems_report};

/// What a [`ScriptedModel`] does besides answering.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptedOptions {
    /// Run the request invariants on every request (on a wire-shaped copy). On by default.
    pub check_invariants: bool,
    /// Keep a copy of every request for `requests()`. On by default.
    pub record_requests: bool,
    pub invariants: InvariantConfig,
    /// Attempts per call for transient failures (429, 5xx, cuts before output); 1 = no retry.
    pub max_attempts: u32,
    /// Latency added to every attempt (none by default).
    pub latency: Option<Duration>,
    /// What the model says it honours at decoding time (nothing by default, like an endpoint
    /// nobody has probed).
    pub honours: Honours,
}

impl Default for ScriptedOptions {
    fn default() -> Self {
        ScriptedOptions {
            check_invariants: true,
            record_requests: true,
            invariants: InvariantConfig::default(),
            max_attempts: 4,
            latency: None,
            honours: Honours::default(),
        }
    }
}

#[derive(Default)]
struct Journal {
    requests: Vec<ChatRequest>,
    violations: Vec<Violation>,
}

/// A scripted in-process model.
pub struct ScriptedModel {
    name: String,
    source: Source,
    options: ScriptedOptions,
    requests: AtomicUsize,
    calls: AtomicUsize,
    ids: AtomicU64,
    journal: Mutex<Journal>,
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("name", &self.name)
            .field("options", &self.options)
            .field("calls", &self.call_count())
            .finish()
    }
}

/// How one attempt failed.
enum Failure {
    /// Transient and before any output: another attempt may succeed.
    Retry {
        error: ModelError,
        reason: String,
    },
    Fatal(ModelError),
}

impl ScriptedModel {
    fn with_source(source: Source) -> Self {
        ScriptedModel {
            name: "scripted".into(),
            source,
            options: ScriptedOptions::default(),
            requests: AtomicUsize::new(0),
            calls: AtomicUsize::new(0),
            ids: AtomicU64::new(0),
            journal: Mutex::new(Journal::default()),
        }
    }

    /// A policy, with invariant checks and request recording on.
    pub fn new(policy: impl Policy + 'static) -> Self {
        Self::with_source(Source::Policy(Box::new(policy)))
    }

    /// Exactly these replies, in order (a call beyond them is a violation and a 500 error).
    pub fn sequence(replies: Vec<Reply>) -> Self {
        Self::with_source(Source::Script(Script::new(replies)))
    }

    /// A policy with checks and recording off: for benchmarks.
    pub fn lean(policy: impl Policy + 'static) -> Self {
        Self::new(policy).with_options(ScriptedOptions {
            check_invariants: false,
            record_requests: false,
            ..ScriptedOptions::default()
        })
    }

    pub fn with_options(mut self, options: ScriptedOptions) -> Self {
        self.options = options;
        self
    }

    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    pub fn options(&self) -> &ScriptedOptions {
        &self.options
    }

    /// Attempts made (a retried call counts once per attempt), like HTTP calls on the wire.
    pub fn call_count(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// `complete` calls received.
    pub fn request_count(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// Every request received (when recording is on).
    pub fn requests(&self) -> Vec<ChatRequest> {
        lock(&self.journal).requests.clone()
    }

    pub fn violations(&self) -> Vec<Violation> {
        lock(&self.journal).violations.clone()
    }

    /// Every problem: violations, plus missing calls in sequence mode.
    pub fn verify(&self) -> Result<(), Vec<String>> {
        let mut problems: Vec<String> =
            self.violations().iter().map(Violation::to_string).collect();
        problems.extend(self.source.shortfall());
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// Panics listing every problem (see [`ScriptedModel::verify`]).
    pub fn assert_clean(&self) {
        if let Err(problems) = self.verify()
            && let Some(report) = problems_report("scripted model", &problems)
        {
            panic!("{report}");
        }
    }

    /// Count, record and check one request; returns its index.
    fn admit(&self, request: &ChatRequest) -> usize {
        let index = self.requests.fetch_add(1, Ordering::SeqCst);
        if !self.options.check_invariants && !self.options.record_requests {
            return index;
        }
        let problems = if self.options.check_invariants {
            check_request(
                &request_to_wire(request, &self.name),
                &self.options.invariants,
            )
        } else {
            Vec::new()
        };
        let mut journal = lock(&self.journal);
        if self.options.record_requests {
            journal.requests.push(request.clone());
        }
        journal
            .violations
            .extend(problems.into_iter().map(|message| Violation {
                request: Some(index),
                message,
            }));
        index
    }

    fn violation(&self, request: usize, message: String) {
        lock(&self.journal).violations.push(Violation {
            request: Some(request),
            message,
        });
    }

    /// Play one reply: `Ok` is a finished completion.
    async fn play(
        &self,
        reply: Reply,
        request: &ChatRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<Completion, Failure> {
        let mut reply = reply;
        while let Reply::Delayed(delay, inner) = reply {
            tokio::time::sleep(delay).await;
            reply = *inner;
        }
        match reply {
            Reply::Turn(turn) => Ok(self.completion(&turn, None, request, on_delta)),
            Reply::Status { status, body, .. } => Err(status_failure(status, &body)),
            Reply::CutBeforeOutput => Err(retry_transport("connection closed before any output")),
            Reply::CutAfterText(text) => {
                emit(&text, 16, StreamDelta::Text, on_delta);
                Err(cut_failure(&text, None))
            }
            Reply::StallAfterText(text, after) => {
                emit(&text, 16, StreamDelta::Text, on_delta);
                Err(cut_failure(&text, Some(after)))
            }
            Reply::Raw(payloads) => self.replay_raw(&payloads, request, on_delta),
            Reply::Delayed(..) => Err(Failure::Fatal(ModelError::Protocol {
                message: "nested delay".into(),
            })),
        }
    }

    /// Literal SSE payloads, read back the way a client would.
    fn replay_raw(
        &self,
        payloads: &[String],
        request: &ChatRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<Completion, Failure> {
        let body: String = payloads.iter().map(|p| sse::data_frame(p)).collect();
        let parsed = sse::parse_stream(&body).map_err(|e| {
            Failure::Fatal(ModelError::Protocol {
                message: e.to_string(),
            })
        })?;
        let turn = parsed.to_turn();
        if !parsed.is_complete() {
            emit(&parsed.reasoning, 0, StreamDelta::Reasoning, on_delta);
            emit(&parsed.text, 0, StreamDelta::Text, on_delta);
            return Err(cut_failure(&parsed.text, None));
        }
        let ids: Vec<Option<String>> = parsed.tool_calls.iter().map(|c| c.id.clone()).collect();
        Ok(self.completion(&turn, Some(ids), request, on_delta))
    }

    /// Stream `turn`'s deltas and build its completion (ids synthesised where missing).
    fn completion(
        &self,
        turn: &Turn,
        ids: Option<Vec<Option<String>>>,
        request: &ChatRequest,
        on_delta: DeltaSink<'_>,
    ) -> Completion {
        let reasoning = turn.reasoning.clone().unwrap_or_default();
        let text = turn.text.clone().unwrap_or_default();
        emit(
            &reasoning,
            turn.style.text_chunk,
            StreamDelta::Reasoning,
            on_delta,
        );
        emit(&text, turn.style.text_chunk, StreamDelta::Text, on_delta);
        let call_no = self.ids.fetch_add(1, Ordering::SeqCst) + 1;
        let tool_calls: Vec<ToolCall> = turn
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, (name, arguments))| ToolCall {
                id: ids
                    .as_ref()
                    .and_then(|ids| ids.get(i).cloned().flatten())
                    .unwrap_or_else(|| format!("call_s{call_no}_{i}")),
                name: name.clone(),
                arguments: arguments.clone(),
            })
            .collect();
        let usage = match turn.reported_usage() {
            Some((prompt_tokens, completion_tokens)) => Usage {
                prompt_tokens,
                completion_tokens,
                estimated: false,
                cached_tokens: None,
            },
            None => estimate_usage(request, &text, &reasoning, &tool_calls),
        };
        Completion {
            text,
            reasoning,
            tool_calls,
            finish_reason: FinishReason::parse(&turn.finish_reason),
            usage,
        }
    }
}

fn emit(text: &str, chunk: usize, wrap: fn(String) -> StreamDelta, on_delta: DeltaSink<'_>) {
    for piece in split_chars(text, chunk) {
        on_delta(wrap(piece.to_string()));
    }
}

fn estimate_usage(request: &ChatRequest, text: &str, reasoning: &str, calls: &[ToolCall]) -> Usage {
    let prompt: usize = request
        .messages
        .iter()
        .map(|m| {
            m.content.len()
                + m.tool_calls
                    .iter()
                    .map(|c| c.arguments.len())
                    .sum::<usize>()
        })
        .sum();
    let completion =
        text.len() + reasoning.len() + calls.iter().map(|c| c.arguments.len()).sum::<usize>();
    Usage {
        prompt_tokens: (prompt as u64).div_ceil(4),
        completion_tokens: (completion as u64).div_ceil(4),
        estimated: true,
        cached_tokens: None,
    }
}

fn retry_transport(message: &str) -> Failure {
    Failure::Retry {
        error: ModelError::Transport {
            attempts: 1,
            message: message.to_string(),
        },
        reason: message.to_string(),
    }
}

/// A stream that broke: retryable only before any visible text.
fn cut_failure(text: &str, idle: Option<Duration>) -> Failure {
    match (text.is_empty(), idle) {
        (true, Some(after)) => Failure::Retry {
            error: ModelError::IdleTimeout { after },
            reason: format!("no data for {}s", after.as_secs()),
        },
        (true, None) => retry_transport("stream cut before any output"),
        (false, Some(after)) => Failure::Fatal(ModelError::IdleTimeout { after }),
        (false, None) => Failure::Fatal(ModelError::StreamCut {
            message: "the stream ended without a finish".into(),
        }),
    }
}

/// An HTTP error status as the client would report it.
fn status_failure(status: u16, body: &Value) -> Failure {
    let message = body
        .pointer("/error/message")
        .and_then(Value::as_str)
        .map_or_else(|| body.to_string(), str::to_string);
    let code = body.pointer("/error/code").and_then(Value::as_str);
    match (status, code) {
        (401 | 403, _) => Failure::Fatal(ModelError::Auth { status, message }),
        (429, _) => Failure::Retry {
            reason: format!("rate limited ({status})"),
            error: ModelError::RateLimited {
                attempts: 1,
                message,
            },
        },
        (500..=599, _) => Failure::Retry {
            reason: format!("server error {status}"),
            error: ModelError::Server {
                status,
                attempts: 1,
                message,
            },
        },
        (_, Some("context_length_exceeded")) => {
            Failure::Fatal(ModelError::ContextLength { message })
        }
        (_, Some("tools_unsupported")) => Failure::Fatal(ModelError::ToolsUnsupported { message }),
        _ => Failure::Fatal(ModelError::BadRequest { status, message }),
    }
}

/// The final error after `attempts` attempts.
fn with_attempts(error: ModelError, attempts: u32) -> ModelError {
    match error {
        ModelError::RateLimited { message, .. } => ModelError::RateLimited { attempts, message },
        ModelError::Server {
            status, message, ..
        } => ModelError::Server {
            status,
            attempts,
            message,
        },
        ModelError::Transport { message, .. } => ModelError::Transport { attempts, message },
        other => other,
    }
}

#[async_trait]
impl ChatModel for ScriptedModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn honours(&self) -> Honours {
        self.options.honours.clone()
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<Completion, ModelError> {
        let index = self.admit(request);
        let max = self.options.max_attempts.max(1);
        let mut attempt = 1;
        loop {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let reply = match self.source.reply(|| Ok(PolicyRequest::from_chat(request))) {
                Ok(reply) => reply,
                Err(problem) => {
                    self.violation(index, problem.clone());
                    return Err(ModelError::Server {
                        status: 500,
                        attempts: attempt,
                        message: problem,
                    });
                }
            };
            if let Some(latency) = self.options.latency {
                tokio::time::sleep(latency).await;
            }
            match self.play(reply, request, &mut *on_delta).await {
                Ok(completion) => return Ok(completion),
                Err(Failure::Fatal(error)) => return Err(error),
                Err(Failure::Retry { error, .. }) if attempt >= max => {
                    return Err(with_attempts(error, attempt));
                }
                Err(Failure::Retry { reason, .. }) => {
                    // `attempt` in the delta is the attempt about to start, as clients report it.
                    attempt += 1;
                    on_delta(StreamDelta::Retrying {
                        attempt,
                        max,
                        reason,
                        delay_ms: 0,
                    });
                }
            }
        }
    }
}
