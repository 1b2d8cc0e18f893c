//! A scripted in-process model and fake tools for the engine's tests.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use deepsolve_core::*;
use serde_json::{Value, json};

pub(crate) enum Step {
    Reply(Completion),
    Fail(ModelError),
    Sleep(Duration),
}

type Script = Box<dyn FnMut(&ChatRequest, usize) -> Step + Send>;

/// A model that plays a script and checks the request invariants on every call.
pub(crate) struct Fake {
    script: Mutex<Script>,
    pub requests: Mutex<Vec<ChatRequest>>,
}

impl Fake {
    pub(crate) fn new(script: impl FnMut(&ChatRequest, usize) -> Step + Send + 'static) -> Self {
        Fake {
            script: Mutex::new(Box::new(script)),
            requests: Mutex::new(Vec::new()),
        }
    }

    /// Replies in order; panics (fails the test) on a call beyond the list.
    pub(crate) fn seq(steps: Vec<Step>) -> Self {
        let mut steps = steps.into_iter();
        Fake::new(move |_, n| {
            steps
                .next()
                .unwrap_or_else(|| panic!("unexpected model call #{}", n + 1))
        })
    }

    pub(crate) fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().unwrap().clone()
    }
}

#[async_trait]
impl ChatModel for Fake {
    fn name(&self) -> &str {
        "fake"
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<Completion, ModelError> {
        check_invariants(request);
        let step = {
            let mut reqs = self.requests.lock().unwrap();
            reqs.push(request.clone());
            let n = reqs.len() - 1;
            (self.script.lock().unwrap())(request, n)
        };
        match step {
            Step::Reply(c) => {
                if !c.reasoning.is_empty() {
                    on_delta(StreamDelta::Reasoning(c.reasoning.clone()));
                }
                if !c.text.is_empty() {
                    on_delta(StreamDelta::Text(c.text.clone()));
                }
                // As a native stream does: each call's name first, then its arguments.
                for call in &c.tool_calls {
                    on_delta(StreamDelta::ToolCallStarted {
                        name: call.name.clone(),
                    });
                }
                Ok(c)
            }
            Step::Fail(e) => Err(e),
            Step::Sleep(d) => {
                tokio::time::sleep(d).await;
                Err(ModelError::Transport {
                    attempts: 1,
                    message: "slept".into(),
                })
            }
        }
    }
}

/// The message invariants (one leading system message, paired tool calls, no empty
/// messages), asserted on every request.
pub(crate) fn check_invariants(req: &ChatRequest) {
    let m = &req.messages;
    assert_eq!(m[0].role, Role::System, "first message must be system");
    assert_eq!(
        m.iter().filter(|x| x.role == Role::System).count(),
        1,
        "one system message"
    );
    let offered: HashSet<&str> = req.tools.iter().map(|t| t.name.as_str()).collect();
    for (i, msg) in m.iter().enumerate() {
        assert!(
            !(msg.content.trim().is_empty()
                && msg.tool_calls.is_empty()
                && !msg.has_images()
                && msg.role != Role::Tool),
            "empty message at {i}"
        );
        assert!(
            !msg.has_images() || msg.role == Role::User,
            "images only in user messages (at {i})"
        );
        if i > 0 {
            assert!(
                !(msg.role == Role::User && m[i - 1].role == Role::User),
                "consecutive user messages at {i}"
            );
        }
        if msg.role == Role::Assistant && !msg.tool_calls.is_empty() {
            let results: Vec<&Message> = m[i + 1..]
                .iter()
                .take_while(|x| x.role == Role::Tool)
                .collect();
            for call in &msg.tool_calls {
                let n = results
                    .iter()
                    .filter(|r| r.tool_call_id.as_deref() == Some(call.id.as_str()))
                    .count();
                assert_eq!(n, 1, "call {} must have exactly one result", call.id);
            }
            assert_eq!(results.len(), msg.tool_calls.len(), "no orphan results");
        }
    }
    let tags_mode = req.stop.iter().any(|s| s.contains("<tool_response>"));
    // The one request that drops the list: the forced answer after a refused answer (a model
    // that wrote a call where its answer was due is asked under the ultimatum without tools).
    let forced = (req.messages.last()).is_some_and(|m| m.content.contains("[deepsolve:ultimatum]"));
    // And the draft: a new problem's first working asked plainly, outside the turn's prefix.
    let draft = (req.messages.first()).is_some_and(|m| {
        Texts::LANGUAGES
            .iter()
            .any(|l| m.content == Texts::builtin(*l).get(Text::DraftSystem))
    });
    if req.tool_choice == ToolChoice::None && !tags_mode && !forced && !draft {
        assert!(
            !offered.is_empty(),
            "tool_choice none keeps the tools declared"
        );
    }
}

pub(crate) fn usage(p: u64, c: u64) -> Usage {
    Usage {
        prompt_tokens: p,
        completion_tokens: c,
        estimated: false,
        cached_tokens: None,
    }
}

/// `step` with this usage (`estimated` for a provider that reported none).
pub(crate) fn with_usage(step: Step, usage: Usage) -> Step {
    match step {
        Step::Reply(c) => Step::Reply(Completion { usage, ..c }),
        other => other,
    }
}

/// `step` as from a provider that reports no usage: the client's own estimate, marked so.
pub(crate) fn unreported(step: Step) -> Step {
    with_usage(
        step,
        Usage {
            estimated: true,
            ..usage(100, 10)
        },
    )
}

pub(crate) fn text(t: &str) -> Step {
    Step::Reply(Completion {
        text: t.into(),
        reasoning: String::new(),
        tool_calls: vec![],
        finish_reason: FinishReason::Stop,
        usage: usage(100, 10),
    })
}

pub(crate) fn completion_calls(calls: Vec<(&str, Value)>) -> Completion {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    Completion {
        text: String::new(),
        reasoning: String::new(),
        tool_calls: calls
            .into_iter()
            .map(|(name, args)| ToolCall {
                id: format!(
                    "call_{}",
                    N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
                ),
                name: name.into(),
                arguments: args.to_string(),
            })
            .collect(),
        finish_reason: FinishReason::ToolCalls,
        usage: usage(100, 10),
    }
}

pub(crate) fn calls(calls: Vec<(&str, Value)>) -> Step {
    Step::Reply(completion_calls(calls))
}

pub(crate) fn plan(goals: &[&str]) -> Step {
    let steps: Vec<Value> = goals.iter().map(|g| json!({"goal": g})).collect();
    calls(vec![(
        "solve_plan",
        json!({"analysis": "the approach", "steps": steps}),
    )])
}

pub(crate) fn finish(id: &str, summary: &str) -> Step {
    calls(vec![(
        "solve_finish_step",
        json!({"step_id": id, "summary": summary}),
    )])
}

pub(crate) fn echo(q: &str) -> Step {
    calls(vec![("echo", json!({"q": q}))])
}

/// A work tool that echoes its argument, optionally sleeping or panicking.
pub(crate) struct Echo {
    pub spec: ToolSpec,
    pub delay: Duration,
    pub panic: bool,
    pub output: Option<String>,
    pub error: Option<ToolError>,
    /// Reported as the call's progress before it answers (a pause after the first).
    pub progress: Vec<String>,
    pub runs: std::sync::atomic::AtomicU32,
    /// Times `announced` was called.
    pub announced: std::sync::atomic::AtomicU32,
}

impl Echo {
    pub(crate) fn named(name: &str) -> Self {
        Echo {
            spec: ToolSpec {
                name: name.into(),
                description: "echo the query".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {"q": {"type": "string"}, "n": {"type": "integer", "minimum": 1}},
                    "required": ["q"],
                    "additionalProperties": false
                }),
            },
            delay: Duration::ZERO,
            panic: false,
            output: None,
            error: None,
            progress: Vec::new(),
            runs: Default::default(),
            announced: Default::default(),
        }
    }
}

#[async_trait]
impl Tool for Echo {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn announced(&self, _ctx: &ToolContext) {
        self.announced
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if self.panic {
            panic!("tool bug");
        }
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        for (i, message) in self.progress.iter().enumerate() {
            ctx.progress.report(message.clone());
            if i == 0 {
                // Long enough for the engine to forward it while the call still runs.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(self.delay) => {}
            _ = ctx.cancel.cancelled() => return Err(ToolError::actionable("cancelled")),
        }
        Ok(ToolOutput::ok(self.output.clone().unwrap_or_else(|| {
            format!("echo: {}", args["q"].as_str().unwrap_or_default())
        })))
    }
}

pub(crate) struct Run {
    pub outcome: TurnOutcome,
    pub events: Vec<TurnEvent>,
    pub requests: Vec<ChatRequest>,
}

impl Run {
    pub(crate) fn types(&self) -> Vec<&'static str> {
        self.events.iter().map(|e| e.kind.type_name()).collect()
    }

    pub(crate) fn results(&self) -> Vec<(String, bool, String)> {
        self.events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::ToolResult {
                    name, ok, content, ..
                } => Some((name.clone(), *ok, content.clone())),
                _ => None,
            })
            .collect()
    }

    /// Every text the model saw in the last request.
    pub(crate) fn last_prompt(&self) -> String {
        prompt_text(self.requests.last().expect("a request"))
    }
}

pub(crate) fn prompt_text(req: &ChatRequest) -> String {
    req.messages
        .iter()
        .map(|m| {
            let calls: String = m
                .tool_calls
                .iter()
                .map(|c| format!("{}({})", c.name, c.arguments))
                .collect();
            format!("{:?}: {}{}\n", m.role, m.content, calls)
        })
        .collect()
}

pub(crate) async fn run_with(
    model: Fake,
    tools: Vec<ToolRef>,
    configure: impl FnOnce(&mut TurnSpec),
) -> Run {
    let names: Vec<String> = tools.iter().map(|t| t.spec().name.clone()).collect();
    let engine = Engine::new(tools).expect("engine");
    let mut spec = TurnSpec::new("turn-1", "Solve x^2 - 5x + 6 = 0.");
    spec.tools = names;
    configure(&mut spec);
    let sink = VecSink::default();
    let outcome = engine
        .run_turn(
            &model,
            spec,
            &sink,
            tokio_util::sync::CancellationToken::new(),
        )
        .await
        .expect("turn starts");
    let events = sink.take();
    assert_seq_is_gapless(&events);
    assert_eq!(
        events.first().map(|e| e.kind.type_name()),
        Some("turn_started")
    );
    assert_eq!(
        events.last().map(|e| e.kind.type_name()),
        Some("turn_finished")
    );
    assert!(
        engine.sessions().is_empty(),
        "the session is closed at the end of the turn"
    );
    Run {
        outcome,
        events,
        requests: model.requests(),
    }
}

pub(crate) fn assert_seq_is_gapless(events: &[TurnEvent]) {
    let first = events.first().map(|e| e.seq).unwrap_or(0);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(
            e.seq,
            first + i as u64,
            "seq must be monotonic without gaps"
        );
    }
}
