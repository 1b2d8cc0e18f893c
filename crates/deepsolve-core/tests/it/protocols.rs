//! The four text protocols beside native and tags, end to end through the engine: a scripted
//! model speaks each one (it plans, runs code, finishes its step, answers), once well and
//! once writing its own results; the requests' shape (stop sequences, how results go back)
//! and the `auto` rule from what the endpoint honours.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::common::*;
use deepsolve_core::event::WarningKind;
use deepsolve_core::*;

/// `code_execution` as the sandbox would answer it: `print(6 * 8)` prints 48.
struct FakePython {
    spec: ToolSpec,
    runs: AtomicU32,
}

impl FakePython {
    fn new() -> Arc<Self> {
        Arc::new(FakePython {
            spec: ToolSpec {
                name: "code_execution".into(),
                description: "Run Python 3.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {"code": {"type": "string"}},
                    "required": ["code"],
                    "additionalProperties": false
                }),
            },
            runs: AtomicU32::new(0),
        })
    }

    fn runs(&self) -> u32 {
        self.runs.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Tool for FakePython {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, args: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let code = args["code"].as_str().unwrap_or_default();
        let out = if code.contains("6 * 8") { "48\n" } else { "\n" };
        Ok(ToolOutput::ok(out.to_string()))
    }
}

/// A [`Fake`] whose endpoint honours `honours` (the probe's verdict).
struct Probed {
    inner: Fake,
    honours: Honours,
}

#[async_trait]
impl ChatModel for Probed {
    fn name(&self) -> &str {
        "probed"
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<Completion, ModelError> {
        self.inner.complete(request, on_delta).await
    }

    fn honours(&self) -> Honours {
        self.honours.clone()
    }
}

struct Turn {
    outcome: TurnOutcome,
    events: Vec<TurnEvent>,
    requests: Vec<ChatRequest>,
}

impl Turn {
    fn protocol(&self) -> Option<Protocol> {
        self.events.iter().find_map(|e| match &e.kind {
            EventKind::TurnStarted { protocol, .. } => *protocol,
            _ => None,
        })
    }

    fn warned_invented(&self) -> bool {
        self.events.iter().any(|e| {
            matches!(
                e.kind,
                EventKind::Warning {
                    kind: WarningKind::InventedToolResponse,
                    ..
                }
            )
        })
    }

    /// Every text of every request after the first.
    fn later_prompts(&self) -> String {
        self.requests.iter().skip(1).map(prompt_text).collect()
    }

    /// No live text ever showed an invented result.
    fn assert_no_live_text_holds(&self, invented: &str) {
        for e in &self.events {
            if let EventKind::TextDelta { text } = &e.kind {
                assert!(!text.contains(invented), "{text}");
            }
        }
    }
}

async fn turn(model: &dyn ChatModel, protocol: Protocol, python: &Arc<FakePython>) -> Turn {
    turn_with(model, protocol, python, |_| {}).await
}

async fn turn_with(
    model: &dyn ChatModel,
    protocol: Protocol,
    python: &Arc<FakePython>,
    configure: impl FnOnce(&mut TurnSpec),
) -> Turn {
    let engine = Engine::new(vec![python.clone() as ToolRef]).expect("engine");
    let mut spec = TurnSpec::new("turn-p", "What is 6 times 8?");
    spec.tools = vec!["code_execution".into()];
    spec.protocol = protocol;
    configure(&mut spec);
    let sink = VecSink::default();
    let outcome = engine
        .run_turn(model, spec, &sink, Default::default())
        .await
        .expect("turn starts");
    Turn {
        outcome,
        events: sink.take(),
        requests: Vec::new(),
    }
}

async fn scripted(protocol: Protocol, replies: Vec<String>) -> (Turn, Arc<FakePython>) {
    let python = FakePython::new();
    let model = Fake::seq(replies.iter().map(|r| text(r)).collect());
    let mut run = turn(&model, protocol, &python).await;
    run.requests = model.requests();
    (run, python)
}

fn plan_args() -> Value {
    json!({"analysis": "multiply", "steps": [{"goal": "compute 6 * 8"}]})
}

fn finish_args() -> Value {
    json!({"step_id": "S1", "summary": "6 * 8 = 48"})
}

fn tag_call(name: &str, args: Value) -> String {
    format!(
        "<tool_call>\n{}\n</tool_call>",
        json!({"name": name, "arguments": args})
    )
}

fn fenced_call(name: &str, args: Value) -> String {
    format!("```json\n{}\n```", json!({"name": name, "arguments": args}))
}

/// The common ending: answered by the model, the step done, the code run once for real.
fn assert_solved(run: &Turn, python: &FakePython, answer: &str) {
    assert_eq!(
        run.outcome.stop_reason,
        StopReason::Answered,
        "{:#?}",
        run.events
    );
    assert_eq!(run.outcome.answer.as_deref(), Some(answer));
    assert_eq!(run.outcome.answer_source, Some(AnswerSource::Model));
    assert!(run.outcome.solve.all_done());
    assert_eq!(python.runs(), 1);
    for req in &run.requests {
        assert!(req.tools.is_empty(), "a text protocol declares no tools");
    }
}

// ---------------------------------------------------------------------------------------------
// Code fence

#[tokio::test]
async fn fence_plans_runs_code_finishes_and_answers() {
    let (run, python) = scripted(
        Protocol::Fence,
        vec![
            format!("I will plan.\n{}", fenced_call("solve_plan", plan_args())),
            fenced_call("code_execution", json!({"code": "print(6 * 8)"})),
            fenced_call("solve_finish_step", finish_args()),
            "6 times 8 is **48**.".into(),
        ],
    )
    .await;
    assert_solved(&run, &python, "6 times 8 is **48**.");
    assert_eq!(run.protocol(), Some(Protocol::Fence));
    for req in &run.requests {
        assert!(req.stop.iter().any(|s| s == "```output"), "{:?}", req.stop);
        assert!(req.stop.iter().any(|s| s == "<tool_response>"));
        assert!(req.response_format.is_none());
    }
    let system = &run.requests[0].messages[0].content;
    assert!(system.contains("```json") && system.contains("### code_execution"));
    // The result goes back as a user message; the call as the model wrote it.
    let third = &run.requests[2].messages;
    let result = third.last().expect("a message");
    assert_eq!(result.role, Role::User);
    assert!(
        result
            .content
            .contains("<tool_response name=\"code_execution\"")
            && result.content.contains("48"),
        "{}",
        result.content
    );
    assert!(third.iter().any(|m| {
        m.role == Role::Assistant
            && m.content
                .contains("```json\n{\"arguments\":{\"code\":\"print(6 * 8)\"}")
    }));
}

/// What a step's program printed is held against its summary: one that keeps none of its
/// numbers is refused once, the output quoted; a summary with the result then closes the step.
#[tokio::test]
async fn a_summary_without_what_the_program_printed_is_refused_once() {
    let vague = json!({"step_id": "S1", "summary": "We multiply the two numbers."});
    let (run, python) = scripted(
        Protocol::Fence,
        vec![
            fenced_call("solve_plan", plan_args()),
            fenced_call("code_execution", json!({"code": "print(6 * 8)"})),
            fenced_call("solve_finish_step", vague),
            fenced_call("solve_finish_step", finish_args()),
            "6 times 8 is **48**.".into(),
        ],
    )
    .await;
    assert_solved(&run, &python, "6 times 8 is **48**.");
    let refusals: Vec<&str> = (run.events.iter())
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult {
                name,
                ok: false,
                content,
                ..
            } if name == "solve_finish_step" => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert!(
        refusals[0].starts_with("Step S1's program printed:\n```\n48\n```"),
        "{}",
        refusals[0]
    );
    assert_eq!(
        run.outcome.solve.steps[0].summary.as_deref(),
        Some("6 * 8 = 48")
    );
}

#[tokio::test]
async fn fence_never_shows_an_invented_output() {
    let (run, python) = scripted(
        Protocol::Fence,
        vec![
            fenced_call("solve_plan", plan_args()),
            format!(
                "{}\n```output\nINVENTED-49\n```\nSo the answer is INVENTED-49.",
                fenced_call("code_execution", json!({"code": "print(6 * 8)"}))
            ),
            fenced_call("solve_finish_step", finish_args()),
            "**48**".into(),
        ],
    )
    .await;
    assert_solved(&run, &python, "**48**");
    assert!(run.warned_invented());
    assert!(
        !run.later_prompts().contains("INVENTED"),
        "{}",
        run.later_prompts()
    );
    run.assert_no_live_text_holds("INVENTED");
}

// ---------------------------------------------------------------------------------------------
// Code as action

#[tokio::test]
async fn code_runs_python_blocks_and_sends_the_output_back_as_an_output_block() {
    let (run, python) = scripted(
        Protocol::Code,
        vec![
            tag_call("solve_plan", plan_args()),
            "Multiply.\n```python\nprint(6 * 8)\n```".into(),
            tag_call("solve_finish_step", finish_args()),
            "6 times 8 is **48**.".into(),
        ],
    )
    .await;
    assert_solved(&run, &python, "6 times 8 is **48**.");
    assert_eq!(run.protocol(), Some(Protocol::Code));
    for req in &run.requests {
        assert_eq!(req.stop.first().map(String::as_str), Some("```output"));
    }
    let system = &run.requests[0].messages[0].content;
    assert!(system.contains("```python") && system.contains("### solve_plan"));
    let third = &run.requests[2].messages;
    let n = third.len();
    assert_eq!(third[n - 2].role, Role::Assistant);
    assert!(
        third[n - 2]
            .content
            .ends_with("Multiply.\n```python\nprint(6 * 8)\n```"),
        "{}",
        third[n - 2].content
    );
    assert_eq!(third[n - 1].role, Role::User);
    assert!(
        third[n - 1].content.starts_with("```output\n48\n```"),
        "{}",
        third[n - 1].content
    );
}

#[tokio::test]
async fn code_cuts_the_output_the_model_writes_itself() {
    // The 1.5B model in tags mode: a block, then an output block it made up.
    let (run, python) = scripted(
        Protocol::Code,
        vec![
            tag_call("solve_plan", plan_args()),
            "```python\nprint(6 * 8)\n```\n```output\nINVENTED-49.0\n```\nThe answer is INVENTED-49.0."
                .into(),
            tag_call("solve_finish_step", finish_args()),
            "**48**".into(),
        ],
    )
    .await;
    assert_solved(&run, &python, "**48**");
    assert!(run.warned_invented());
    assert!(
        !run.later_prompts().contains("INVENTED"),
        "{}",
        run.later_prompts()
    );
    run.assert_no_live_text_holds("INVENTED");
}

// ---------------------------------------------------------------------------------------------
// Structured output

fn json_call(name: &str, args: Value) -> String {
    json!({"analysis": "next", "call": {"name": name, "parameters": args}}).to_string()
}

#[tokio::test]
async fn structured_constrains_every_reply_to_a_call_or_an_answer() {
    let (run, python) = scripted(
        Protocol::Structured,
        vec![
            json_call("solve_plan", plan_args()),
            // A server that ignored the schema let the model go on: cut.
            format!(
                "{}\n<tool_response>INVENTED-49</tool_response>",
                json_call("code_execution", json!({"code": "print(6 * 8)"}))
            ),
            json_call("solve_finish_step", finish_args()),
            json!({"analysis": "done", "answer": "6 times 8 is **48**."}).to_string(),
        ],
    )
    .await;
    assert_solved(&run, &python, "6 times 8 is **48**.");
    assert_eq!(run.protocol(), Some(Protocol::Structured));
    assert!(run.warned_invented());
    assert!(!run.later_prompts().contains("INVENTED"));
    run.assert_no_live_text_holds("INVENTED");
    // The JSON itself is never shown live; the answer comes in the answer event.
    run.assert_no_live_text_holds("{");
    for req in &run.requests {
        let format = req.response_format.as_ref().expect("a reply schema");
        let schema = format.schema.to_string();
        for tool in ["solve_plan", "solve_finish_step", "code_execution"] {
            assert!(
                schema.contains(&format!("\"const\":\"{tool}\"")),
                "{schema}"
            );
        }
        assert!(schema.contains("\"answer\""), "{schema}");
    }
    // The reasoning went to reasoning, the past call back as the model wrote it.
    let third = prompt_text(&run.requests[2]);
    assert!(
        third.contains(r#"{"analysis":"next","call":{"name":"code_execution","parameters":{"code":"print(6 * 8)"}}}"#),
        "{third}"
    );
    assert!(third.contains("<tool_response name=\"code_execution\""));
}

// ---------------------------------------------------------------------------------------------
// Trained formats

#[tokio::test]
async fn tongyi_runs_code_calls_and_ends_at_its_answer() {
    let code_call = "<tool_call>\n{\"name\": \"PythonInterpreter\", \"arguments\": {}}\n<code>\nprint(6 * 8)\n</code>\n</tool_call>";
    let (run, python) = scripted(
        Protocol::Tongyi,
        vec![
            format!("<think>plan first</think>\n{}", tag_call("solve_plan", plan_args())),
            format!("<think>compute</think>\n{code_call}\n<tool_response>\nINVENTED-49\n</tool_response>"),
            tag_call("solve_finish_step", finish_args()),
            "<think>done</think>\n<answer>48</answer>".into(),
        ],
    )
    .await;
    assert_solved(&run, &python, "48");
    assert_eq!(run.protocol(), Some(Protocol::Tongyi));
    assert!(run.warned_invented());
    assert!(!run.later_prompts().contains("INVENTED"));
    for req in &run.requests {
        assert!(req.stop.iter().any(|s| s == "<tool_response>"));
    }
    let system = &run.requests[0].messages[0].content;
    assert!(system.contains("PythonInterpreter") && system.contains("<answer>"));
    let third = &run.requests[2].messages;
    let n = third.len();
    assert!(
        third[n - 2]
            .content
            .contains("<code>\nprint(6 * 8)\n</code>")
    );
    assert_eq!(third[n - 1].role, Role::User);
    assert!(
        third[n - 1]
            .content
            .starts_with("<tool_response>\n48\n</tool_response>"),
        "{}",
        third[n - 1].content
    );
}

#[tokio::test]
async fn deepanalyze_stops_at_code_and_reads_execute_results() {
    let (run, python) = scripted(
        Protocol::DeepAnalyze,
        vec![
            format!(
                "<Analyze>plan first</Analyze>\n{}",
                tag_call("solve_plan", plan_args())
            ),
            // As the stop at `</Code>` leaves it: the tag stripped.
            "<Analyze>multiply</Analyze>\n<Code>\n```python\nprint(6 * 8)\n```\n".into(),
            tag_call("solve_finish_step", finish_args()),
            "<Understand>done</Understand>\n<Answer>6 times 8 is **48**.</Answer>".into(),
        ],
    )
    .await;
    assert_solved(&run, &python, "6 times 8 is **48**.");
    assert_eq!(run.protocol(), Some(Protocol::DeepAnalyze));
    assert!(!run.warned_invented());
    for req in &run.requests {
        assert_eq!(req.stop.first().map(String::as_str), Some("</Code>"));
        assert!(req.stop.iter().any(|s| s == "<Execute>"));
    }
    let third = &run.requests[2].messages;
    let n = third.len();
    assert!(
        third[n - 2]
            .content
            .ends_with("```python\nprint(6 * 8)\n```\n</Code>"),
        "the stripped tag is written back: {}",
        third[n - 2].content
    );
    assert_eq!(third[n - 1].role, Role::User);
    assert!(
        third[n - 1]
            .content
            .starts_with("# Execute Result\n<Execute>\n48\n</Execute>"),
        "{}",
        third[n - 1].content
    );
}

#[tokio::test]
async fn deepanalyze_cuts_an_invented_execute_block() {
    let (run, python) = scripted(
        Protocol::DeepAnalyze,
        vec![
            tag_call("solve_plan", plan_args()),
            "<Code>\n```python\nprint(6 * 8)\n```\n</Code>\n<Execute>\nINVENTED-49\n</Execute>\n<Answer>INVENTED-49</Answer>".into(),
            tag_call("solve_finish_step", finish_args()),
            "<Answer>48</Answer>".into(),
        ],
    )
    .await;
    assert_solved(&run, &python, "48");
    assert!(run.warned_invented());
    assert!(!run.later_prompts().contains("INVENTED"));
    run.assert_no_live_text_holds("INVENTED");
}

// ---------------------------------------------------------------------------------------------
// Native, held at decoding time: a program written in a step's prose

#[tokio::test]
async fn under_decoding_a_program_written_in_a_steps_prose_runs_and_its_made_up_output_is_cut() {
    // The 1.5B model in-process: in a step's free round it wrote its code as a Python block
    // and then what it would print, made up, and no call.
    let python = FakePython::new();
    let model = Probed {
        inner: Fake::seq(vec![
            text("Two numbers to multiply."),
            plan(&["compute 6 * 8"]),
            text(
                "Multiply them.\n```python\nprint(6 * 8)\n```\nAfter running it:\n```\nINVENTED-49\n```",
            ),
            // That was the step's free round: the next one asks for a call.
            calls(vec![("solve_finish_step", finish_args())]),
            text("6 times 8 is **48**."),
        ]),
        honours: Honours {
            native_tools: true,
            tool_choice_required: true,
            tool_choice_named: true,
            ..Honours::default()
        },
    };
    let run = turn_with(&model, Protocol::Native, &python, |spec| {
        spec.config.enforce = config::Enforce::Decoding;
    })
    .await;
    let requests = model.inner.requests();
    assert_eq!(
        run.outcome.stop_reason,
        StopReason::Answered,
        "{:#?}",
        run.events
    );
    assert_eq!(run.outcome.answer.as_deref(), Some("6 times 8 is **48**."));
    assert!(run.outcome.solve.all_done());
    assert_eq!(python.runs(), 1, "the written program ran once, for real");
    assert!(run.warned_invented());
    let after_run = &requests[3];
    assert!(
        matches!(&after_run.tool_choice, ToolChoice::Among(names)
            if names.iter().any(|n| n == "solve_finish_step") && !names.iter().any(|n| n == "solve_plan")),
        "the step had its free round in the program's reply: its next round asks for a call, {:?}",
        after_run.tool_choice
    );
    let n = after_run.messages.len();
    let (call, result) = (&after_run.messages[n - 3], &after_run.messages[n - 2]);
    assert_eq!(call.content, "Multiply them.");
    assert_eq!(call.tool_calls.len(), 1);
    assert_eq!(call.tool_calls[0].name, "code_execution");
    assert_eq!(
        call.tool_calls[0].arguments,
        json!({"code": "print(6 * 8)"}).to_string()
    );
    assert_eq!((result.role, result.content.trim()), (Role::Tool, "48"));
    let later: String = requests.iter().skip(3).map(prompt_text).collect();
    assert!(!later.contains("INVENTED"), "{later}");
    assert_eq!(requests[4].tool_choice, ToolChoice::None);
    assert_eq!(requests.len(), 5);
}

// ---------------------------------------------------------------------------------------------
// auto

#[tokio::test]
async fn auto_picks_the_protocol_from_what_the_endpoint_honours() {
    let unknown = Honours::default();
    let native = Honours {
        native_tools: true,
        stop_sequences: true,
        ..Honours::default()
    };
    let schema = Honours {
        json_schema: true,
        stop_sequences: true,
        ..Honours::default()
    };
    let plain = Honours {
        stop_sequences: true,
        context_window: Some(16_384),
        ..Honours::default()
    };
    for (honours, used) in [
        (unknown, Protocol::Native),
        (native, Protocol::Native),
        (schema, Protocol::Structured),
        (plain, Protocol::Fence),
    ] {
        let model = Probed {
            inner: Fake::new(|_, _| text("48")),
            honours: honours.clone(),
        };
        let python = FakePython::new();
        let run = turn(&model, Protocol::Auto, &python).await;
        assert_eq!(run.protocol(), Some(used), "{honours:?}");
        let first = &model.inner.requests()[0];
        assert_eq!(
            first.tools.is_empty(),
            used != Protocol::Native,
            "{honours:?}"
        );
        assert_eq!(
            first.response_format.is_some(),
            used == Protocol::Structured,
            "{honours:?}"
        );
        assert_eq!(
            recommended_protocol(&honours) == Protocol::Auto,
            honours == Honours::default()
        );
    }
}
