//! The text-tag protocol end to end: tags-mode requests read into the neutral view, the
//! tags / inventing / reasoning / vendor-markup policies driven to their endings by the
//! simulated engine (in-process and over HTTP), the invariants that catch a careless engine,
//! and the testkit's renderings cross-checked against the engine's own (`deepsolve_core::parse_reply`, `render_tag_call`, …).

use crate::common::{FOLD_STYLES, SimConfig, SimProtocol, Stop, WireModel, run};
use deepsolve_core::solve::solve_tool_specs;
use deepsolve_core::{ChatRequest, ModelError, ToolSpec};
use deepsolve_core::{ParsedCall, parse_reply};
use deepsolve_testkit::tags::{
    self, INVENTED_MARKER, MarkupStyle, STOP_SEQUENCES, render_call, render_response,
};
use deepsolve_testkit::{
    MockServer, NoNativeTools, Policy, PolicyRequest, ReasoningModel, ScriptedModel, THINK_MARKER,
    TagsMode, VendorMarkup, WellBehaved,
};
use serde_json::{Value, json};

fn tags(inner: impl Policy + 'static, invent_responses: bool) -> TagsMode<impl Policy> {
    TagsMode {
        inner,
        invent_responses,
    }
}

fn tags_cfg() -> SimConfig {
    SimConfig {
        protocol: SimProtocol::Tags,
        ..SimConfig::default()
    }
}

/// Every text a request carries: contents and reasoning.
fn request_text(request: &ChatRequest) -> String {
    request
        .messages
        .iter()
        .map(|m| {
            format!(
                "{}\n{}",
                m.content,
                m.reasoning_content.as_deref().unwrap_or("")
            )
        })
        .collect()
}

#[tokio::test]
async fn tags_mode_solves_every_step_in_every_fold_style() {
    for fold in FOLD_STYLES {
        let model = ScriptedModel::new(tags(WellBehaved::new(3), false));
        let out = run(&model, SimConfig { fold, ..tags_cfg() }).await;
        model.assert_clean();
        assert_eq!(out.stop, Stop::Answered, "{fold:?}: {out:#?}");
        assert_eq!(out.done_steps(), 3);
        assert_eq!(out.results_of("reason").len(), 3);
        for request in model.requests() {
            let view = PolicyRequest::from_chat(&request);
            if view.is_subcall() {
                continue;
            }
            assert!(request.tools.is_empty());
            assert_eq!(request.stop, STOP_SEQUENCES);
            assert!(view.is_tags_mode());
            assert!(
                view.offers("solve_plan") && view.offers("reason"),
                "{view:?}"
            );
        }
    }
}

#[tokio::test]
async fn invented_results_never_reach_a_later_request() {
    for fold in FOLD_STYLES {
        let model = ScriptedModel::new(tags(WellBehaved::new(2), true));
        let out = run(&model, SimConfig { fold, ..tags_cfg() }).await;
        model.assert_clean();
        assert_eq!(out.stop, Stop::Answered, "{fold:?}");
        assert_eq!(out.done_steps(), 2);
        for request in model.requests() {
            let text = request_text(&request);
            assert!(!text.contains(INVENTED_MARKER), "{fold:?}: {text}");
        }
        assert!(!out.answer.contains(INVENTED_MARKER));
    }
}

#[tokio::test]
async fn an_engine_that_keeps_invented_results_is_caught() {
    let model = ScriptedModel::new(tags(WellBehaved::new(2), true));
    let cfg = SimConfig {
        keep_raw_reply: true,
        ..tags_cfg()
    };
    run(&model, cfg).await;
    let problems = model.verify().expect_err("invented results went back");
    let all = problems.join("\n");
    assert!(all.contains("carries 'INVENTED-RESULT'"), "{all}");
    assert!(
        all.contains("assistant content contains '<tool_response'"),
        "{all}"
    );
}

#[tokio::test]
async fn a_provider_without_native_tools_falls_back_to_tags_under_auto() {
    let policy = || NoNativeTools {
        inner: tags(WellBehaved::new(2), false),
    };
    let model = ScriptedModel::new(policy());
    let cfg = SimConfig {
        protocol: SimProtocol::Auto,
        ..SimConfig::default()
    };
    let out = run(&model, cfg).await;
    model.assert_clean();
    assert_eq!(out.stop, Stop::Answered, "{out:#?}");
    let requests = model.requests();
    assert!(!requests[0].tools.is_empty(), "the first request is native");
    assert!(requests[1..].iter().all(|r| r.tools.is_empty()));

    let native = ScriptedModel::new(policy());
    let out = run(&native, SimConfig::default()).await;
    assert_eq!(out.stop, Stop::ModelError);
    assert!(matches!(
        out.error,
        Some(ModelError::ToolsUnsupported { .. })
    ));
}

#[tokio::test]
async fn vendor_markup_over_native_requests_is_solved() {
    for style in [
        MarkupStyle::Hermes,
        MarkupStyle::DeepSeekDsml,
        MarkupStyle::KimiK2,
    ] {
        let model = ScriptedModel::new(VendorMarkup {
            inner: WellBehaved::new(2),
            style,
        });
        let out = run(&model, SimConfig::default()).await;
        model.assert_clean();
        assert_eq!(out.stop, Stop::Answered, "{style:?}: {out:#?}");
        assert_eq!(out.done_steps(), 2, "{style:?}");
        assert!(model.requests().iter().any(|r| !r.tools.is_empty()));
    }
}

#[tokio::test]
async fn inline_thinking_never_reaches_the_answer_or_the_summaries() {
    for (protocol, policy) in [
        (
            SimProtocol::Native,
            Box::new(ReasoningModel {
                inner: WellBehaved::new(2),
            }) as Box<dyn Policy>,
        ),
        (
            SimProtocol::Tags,
            Box::new(tags(
                ReasoningModel {
                    inner: WellBehaved::new(2),
                },
                false,
            )),
        ),
    ] {
        let model = ScriptedModel::new(policy);
        let cfg = SimConfig {
            protocol,
            ..SimConfig::default()
        };
        let out = run(&model, cfg).await;
        model.assert_clean();
        assert_eq!(out.stop, Stop::Answered, "{protocol:?}: {out:#?}");
        assert!(!out.answer.contains(THINK_MARKER), "{}", out.answer);
        assert!(!out.answer.contains("<think>"));
        for step in &out.record.steps {
            let summary = step.summary.as_deref().unwrap_or_default();
            assert!(!summary.contains(THINK_MARKER), "{summary}");
        }
    }
}

#[tokio::test]
async fn tags_mode_over_http_reads_the_wire_history() {
    let server = MockServer::policy(tags(WellBehaved::new(2), true));
    let model = WireModel::new(server.url());
    let out = run(&model, tags_cfg()).await;
    server.assert_clean();
    assert_eq!(out.stop, Stop::Answered, "{out:#?}");
    assert_eq!(out.done_steps(), 2);
    let views = server.policy_requests();
    assert!(views.iter().any(|v| v.is_tags_mode() && v.has_any_call()));
    for (request, view) in server.requests().iter().zip(&views) {
        assert!(request.body.get("tools").is_none());
        assert!(view.is_tags_mode() || view.is_subcall());
    }
}

// --- reading tags-mode requests ---

fn specs() -> Vec<ToolSpec> {
    let mut specs = solve_tool_specs(&deepsolve_core::Texts::builtin(
        deepsolve_core::Language::En,
    ));
    specs.push(ToolSpec {
        name: "reason".into(),
        description: "Derive a result.".into(),
        parameters: json!({"type": "object", "properties": {"query": {"type": "string"}},
            "required": ["query"], "additionalProperties": false}),
    });
    specs
}

/// A tags-mode wire body: the engine's own manifest and renderings.
fn tags_body(messages: Vec<Value>) -> Value {
    let system = format!(
        "You solve problems.{}",
        deepsolve_core::tags_manifest(
            &specs(),
            &deepsolve_core::Texts::builtin(deepsolve_core::Language::En)
        )
    );
    let mut all = vec![json!({"role": "system", "content": system})];
    all.extend(messages);
    json!({"model": "m", "messages": all, "stop": STOP_SEQUENCES, "stream": true, "max_tokens": 512})
}

#[test]
fn the_engine_manifest_declares_every_tool() {
    let body = tags_body(vec![json!({"role": "user", "content": "Solve x+1=2."})]);
    let view = PolicyRequest::from_wire(&body).expect("readable");
    let names: Vec<String> = specs().into_iter().map(|s| s.name).collect();
    assert_eq!(view.tools, names);
    assert!(view.is_tags_mode() && !view.is_subcall() && !view.is_forced_answer());
    assert!(!view.has_native_tools());
    assert_eq!(
        view.tool_parameters("reason")
            .and_then(|p| p.get("required")),
        Some(&json!(["query"]))
    );
}

#[test]
fn a_tags_history_reads_like_a_native_one() {
    let planned = json!({"status": "planned", "analysis": "an", "steps": [
        {"id": "S1", "goal": "a", "done": false}], "next": {"id": "S1", "goal": "a", "done": false}});
    let plan_args = r#"{"analysis":"an","steps":[{"goal":"a"}]}"#;
    let work_args = r#"{"query":"[S1] a: derive"}"#;
    let body = tags_body(vec![
        json!({"role": "user", "content": "Solve x+1=2."}),
        json!({"role": "assistant", "content": deepsolve_core::render_tag_call("solve_plan", plan_args)}),
        json!({"role": "user", "content": deepsolve_core::render_tag_response("solve_plan", "call_7", &planned.to_string())}),
        json!({"role": "assistant", "content": format!("Working on S1.\n{}", render_call("reason", work_args))}),
        json!({"role": "user", "content": format!("{}\n\n[deepsolve:progress] round 3 of 12 · replans 0 of 2\nProblem: Solve x+1=2.\nPlan: an\n  [ ] S1 a   <- current",
            render_response("reason", "call_8", "Derivation…\nAnswer: 1"))}),
    ]);
    let view = PolicyRequest::from_wire(&body).expect("readable");
    assert_eq!(view.calls_to("solve_plan"), 1);
    let results = view.last_tool_results();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].call_id, "call_8");
    assert_eq!(results[0].name.as_deref(), Some("reason"));
    assert_eq!(results[0].arguments.as_deref(), Some(work_args));
    assert_eq!(view.current_step().map(|s| s.id), Some("S1".to_string()));
    assert!(view.progress_block().is_some());
    // The solver sees S1's work done and finishes it.
    let reply = WellBehaved::new(1).reply(&view);
    let turn = reply.turn().expect("turn");
    assert_eq!(turn.tool_calls[0].0, "solve_finish_step");
    assert!(turn.tool_calls[0].1.contains("Answer: 1"), "{turn:?}");

    // The ultimatum makes it a forced answer, though tags mode has no tool choice.
    let mut forced = body.clone();
    let last = forced["messages"]
        .as_array_mut()
        .and_then(|m| m.last_mut())
        .expect("messages");
    last["content"] = json!(format!(
        "{}\n\n[deepsolve:ultimatum] Stop calling tools.",
        last["content"].as_str().unwrap_or_default()
    ));
    let view = PolicyRequest::from_wire(&forced).expect("readable");
    assert!(view.is_forced_answer() && !view.is_subcall());
    let answer = WellBehaved::new(1).reply(&view);
    assert!(answer.turn().expect("turn").tool_calls.is_empty());
}

#[test]
fn a_reason_subcall_is_not_tags_mode() {
    let body = json!({"messages": [
        {"role": "system", "content": "Derive step by step."},
        {"role": "user", "content": "[S1] a: derive"}
    ], "stream": true});
    let view = PolicyRequest::from_wire(&body).expect("readable");
    assert!(view.is_subcall() && !view.is_tags_mode());
}

#[test]
fn the_engine_parser_reads_every_rendering() {
    let calls = vec![
        (
            "solve_plan".to_string(),
            r#"{"analysis":"a \"quoted\" — ü","steps":[{"goal":"g1"},{"goal":"g2"}]}"#.to_string(),
        ),
        ("reason".to_string(), r#"{"query":"[S1] x\ny"}"#.to_string()),
    ];
    for style in [
        MarkupStyle::Hermes,
        MarkupStyle::DeepSeekDsml,
        MarkupStyle::KimiK2,
    ] {
        let text = format!("Narration.\n{}", tags::render_markup(style, &calls));
        let parsed = parse_reply(&text);
        assert_eq!(parsed.visible.trim(), "Narration.", "{style:?}");
        let got: Vec<(String, Value)> = parsed
            .calls
            .into_iter()
            .map(|c| match c {
                ParsedCall::Call { name, arguments } => {
                    let args = serde_json::from_str(&arguments).unwrap_or(Value::Null);
                    (name, args)
                }
                ParsedCall::Malformed { raw, error } => panic!("{style:?}: {error}: {raw}"),
            })
            .collect();
        let want: Vec<(String, Value)> = calls
            .iter()
            .map(|(n, a)| (n.clone(), serde_json::from_str(a).unwrap_or(Value::Null)))
            .collect();
        assert_eq!(got, want, "{style:?}");
    }
}

#[test]
fn the_engine_history_renderings_read_back() {
    let args = r#"{"query":"q"}"#;
    let (visible, calls) = tags::parse_calls(&format!(
        "Text.\n{}",
        deepsolve_core::render_tag_call("reason", args)
    ));
    assert_eq!(visible.trim(), "Text.");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].0, "reason");
    let parsed_args: Value = serde_json::from_str(&calls[0].1).unwrap_or(Value::Null);
    assert_eq!(parsed_args, json!({"query": "q"}));
    let (responses, rest) =
        tags::parse_responses(&deepsolve_core::render_tag_response("reason", "c1", "a\nb"));
    assert_eq!(responses.len(), 1);
    assert_eq!(
        (responses[0].id.as_str(), responses[0].content.as_str()),
        ("c1", "a\nb")
    );
    assert!(rest.is_empty());
    // Our invented responses are cut by the engine's reader, with everything after them.
    let invented = format!(
        "{}\n{}\n{}",
        render_call("reason", args),
        render_response("reason", "x", INVENTED_MARKER),
        render_call("reason", args)
    );
    let parsed = parse_reply(&invented);
    assert!(parsed.cut_invented);
    assert_eq!(parsed.calls.len(), 1);
    assert!(!parsed.visible.contains(INVENTED_MARKER));
}
