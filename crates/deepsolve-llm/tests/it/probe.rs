//! The endpoint probe against the testkit's mock server: what it concludes about endpoints
//! that honour everything, ignore `tool_choice` and refuse `response_format`, or behave like
//! llama.cpp's server with a small model; the verdict kept and reused; a request that
//! contradicts it marks it stale. And one check against llama.cpp's own server.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use deepsolve_core::{
    ChatModel, ChatRequest, FinishReason, Language, Message, Texts, ToolChoice, ToolSpec,
};
use deepsolve_llm::{
    Capability, ClientConfig, OpenAiClient, ProbeSpec, Verdict, WindowSource, verdicts,
};
use deepsolve_testkit::{FnPolicy, MockServer, PolicyRequest, Reply};
use serde_json::{Value, json};

fn client(url: &str) -> OpenAiClient {
    let config = ClientConfig {
        stream_idle_timeout: Duration::from_secs(10),
        backoff_base: Duration::from_millis(5),
        ..ClientConfig::new(url, "mock-model")
    };
    OpenAiClient::new(config).expect("client")
}

fn spec() -> ProbeSpec {
    ProbeSpec::new(&Texts::builtin(Language::En), &[]).with_check_timeout(Duration::from_secs(20))
}

fn call(name: &str) -> Reply {
    let args = match name {
        "solve_plan" => json!({"analysis": "pencils then erasers", "steps": [{"goal": "pencils"}]}),
        "solve_finish_step" => json!({"step_id": "S1", "summary": "12 pencils cost $4"}),
        "solve_replan" => json!({"reason": "asked to", "steps": [{"goal": "again"}]}),
        other => panic!("no arguments for {other}"),
    };
    Reply::calls(vec![(name, args)])
}

/// The tool a request names in its `tool_choice`, if it names one.
fn named(raw: &Value) -> Option<String> {
    let name = raw.get("tool_choice")?.get("function")?.get("name")?;
    name.as_str().map(str::to_string)
}

fn required(raw: &Value) -> bool {
    raw.get("tool_choice").and_then(Value::as_str) == Some("required")
}

const CANARY: &str = "deepsolve-canary-before <tool_response> deepsolve-canary-after";

/// Honours everything the probe asks for.
fn honouring(req: &PolicyRequest) -> Reply {
    if req.raw.get("response_format").is_some() {
        return Reply::text(r#"{"answer": 5}"#);
    }
    if !req.stop.is_empty() {
        // The server stopped at the marker.
        return Reply::text("deepsolve-canary-before ");
    }
    if let Some(name) = named(&req.raw) {
        return call(&name);
    }
    if required(&req.raw) {
        return call("solve_finish_step");
    }
    call("solve_plan")
}

/// Ignores `tool_choice` and answers in prose, refuses `response_format`, ignores stops.
fn ignoring(req: &PolicyRequest) -> Reply {
    if req.raw.get("response_format").is_some() {
        return Reply::Status {
            status: 400,
            body: json!({"error": {"message": "response_format is not supported by this server", "type": "invalid_request_error", "param": "response_format"}}),
            headers: Vec::new(),
        };
    }
    if !req.stop.is_empty() {
        return Reply::text(CANARY);
    }
    Reply::text("First I will work out the pencils, then the erasers. The answer is $6.")
}

/// As llama.cpp's server with a small model was seen to behave: prose unless forced; any
/// forced choice gives a call, but not of the named tool; a schema constrains the reply (the
/// model then pads it with blanks until max_tokens); stops honoured.
fn llama_like(req: &PolicyRequest) -> Reply {
    if req.raw.get("response_format").is_some() {
        return Reply::text(format!("{{{}", " ".repeat(40)));
    }
    if !req.stop.is_empty() {
        return Reply::text("deepsolve-canary-before ");
    }
    if named(&req.raw).is_some() || required(&req.raw) {
        return call("solve_finish_step");
    }
    Reply::text("To solve this, I will first find the cost of the pencils.")
}

/// A model that calls after a tool result on its own, on a server that drops `tool_choice`:
/// asked for a sentence under `"required"`, it answers in a sentence.
fn complies_on_its_own(req: &PolicyRequest) -> Reply {
    if req.raw.get("response_format").is_some() {
        return Reply::text(r#"{"answer": 5}"#);
    }
    if !req.stop.is_empty() {
        return Reply::text("deepsolve-canary-before ");
    }
    let after_a_result = req.raw["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
    if after_a_result {
        return call("solve_finish_step");
    }
    Reply::text("2 + 3 = 5.")
}

async fn probe(server: &MockServer) -> Verdict {
    let verdict = client(&server.url()).probe(&spec()).await.expect("probe");
    assert_eq!(
        server.violations(),
        Vec::new(),
        "the probe's requests are clean"
    );
    verdict
}

#[tokio::test]
async fn an_endpoint_that_honours_everything_is_found_to() {
    let server = MockServer::builder()
        .props(json!({"default_generation_settings": {"n_ctx": 16384}}))
        .policy(FnPolicy(honouring))
        .expect("mock");
    let verdict = probe(&server).await;
    for capability in Capability::ALL {
        assert!(verdict.honoured(capability), "{capability:?}: {verdict:?}");
    }
    assert_eq!(verdict.plans_unforced, Some(true));
    assert_eq!(verdict.context_window, Some(16384));
    assert_eq!(verdict.window_source, Some(WindowSource::LlamaCppProps));
    assert_eq!(verdict.recommended_protocol().as_str(), "native");
    // It asked what a solve asks: the real playbook and solve_plan, a call after a result.
    let requests = server.requests();
    let first = &requests[0].body;
    assert!(
        first["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("solve_plan")
    );
    assert!(
        first["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["function"]["name"] == "solve_plan")
    );
    assert!(requests.iter().any(|r| {
        r.body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "tool")
    }));
    assert!(
        requests
            .iter()
            .all(|r| r.body["max_tokens"].as_u64().unwrap() <= 200)
    );
}

#[tokio::test]
async fn an_endpoint_that_ignores_tool_choice_and_refuses_json_schema() {
    let server = MockServer::policy(FnPolicy(ignoring));
    let verdict = probe(&server).await;
    let honours = verdict.honours();
    assert!(
        !honours.native_tools && !honours.tool_choice_required,
        "{verdict:?}"
    );
    assert!(!honours.tool_choice_named && !honours.json_schema && !honours.stop_sequences);
    let json = verdict.finding(Capability::JsonSchema).unwrap();
    assert!(json.detail.contains("response_format"), "{json:?}");
    assert_eq!(
        verdict.context_window, None,
        "the mock says nothing of its window"
    );
    // Probed, nothing honoured: `auto`'s rule picks the code fence.
    assert_eq!(verdict.recommended_protocol().as_str(), "fence");
}

#[tokio::test]
async fn a_server_that_forces_a_call_but_not_the_named_one() {
    let server = MockServer::builder()
        .props(json!({"default_generation_settings": {"n_ctx": 4096}}))
        .policy(FnPolicy(llama_like))
        .expect("mock");
    let verdict = probe(&server).await;
    let honours = verdict.honours();
    assert!(
        honours.native_tools && honours.tool_choice_required,
        "{verdict:?}"
    );
    assert!(!honours.tool_choice_named, "{verdict:?}");
    assert!(honours.json_schema && honours.stop_sequences, "{verdict:?}");
    assert_eq!(verdict.plans_unforced, Some(false));
    assert_eq!(honours.context_window, Some(4096));
}

#[tokio::test]
async fn a_model_that_calls_on_its_own_is_not_taken_for_a_server_that_holds_required() {
    let server = MockServer::policy(FnPolicy(complies_on_its_own));
    let verdict = probe(&server).await;
    let honours = verdict.honours();
    assert!(honours.native_tools, "{verdict:?}");
    assert!(!honours.tool_choice_required, "{verdict:?}");
    assert!(!honours.tool_choice_named, "{verdict:?}");
    let required = verdict.finding(Capability::ToolChoiceRequired).unwrap();
    assert!(required.detail.contains("not held"), "{required:?}");
    // The second half asked what a free model answers in a sentence, with the tools and
    // "required".
    let asked = server.requests().into_iter().any(|r| {
        r.body["tool_choice"] == "required"
            && r.body["tools"].as_array().is_some_and(|t| !t.is_empty())
            && r.body["messages"][1]["content"]
                .as_str()
                .is_some_and(|q| q.contains("one short sentence"))
    });
    assert!(asked, "the sentence was asked under required");
}

#[tokio::test]
async fn a_kept_verdict_is_reused_and_a_contradiction_marks_it_stale() {
    let refuse_named = Arc::new(AtomicBool::new(false));
    let refusing = refuse_named.clone();
    let server = MockServer::policy(FnPolicy(move |req: &PolicyRequest| {
        if refusing.load(Ordering::SeqCst) && named(&req.raw).is_some() {
            return Reply::Status {
                status: 400,
                body: json!({"error": {"message": "tool_choice of type function is not supported", "type": "invalid_request_error", "param": "tool_choice"}}),
                headers: Vec::new(),
            };
        }
        honouring(req)
    }));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("probes.json");

    let first = client(&server.url());
    assert_eq!(first.keep_verdicts_in(&file), None);
    assert!(first.needs_probe());
    assert_eq!(
        first.honours(),
        deepsolve_core::Honours::default(),
        "unknown: nothing"
    );
    let verdict = first.probe(&spec()).await.unwrap();
    assert!(first.honours().tool_choice_named);

    // A second process takes the kept verdict up without asking the server anything.
    let asked = server.call_count();
    let second = client(&server.url());
    assert_eq!(second.keep_verdicts_in(&file), Some(verdict.clone()));
    assert!(!second.needs_probe());
    assert_eq!(second.honours(), verdict.honours());
    assert_eq!(server.call_count(), asked);

    // The server now refuses a named tool_choice: the verdict no longer holds.
    refuse_named.store(true, Ordering::SeqCst);
    let request = ChatRequest {
        messages: vec![Message::system("s"), Message::user("q")],
        tools: deepsolve_core::solve::solve_tool_specs(&Texts::builtin(Language::En)),
        tool_choice: ToolChoice::Named("solve_plan".into()),
        max_tokens: 64,
        temperature: 0.0,
        stop: Vec::new(),
        response_format: None,
    };
    let failed = second.complete(&request, &mut |_| {}).await;
    assert!(failed.is_err(), "{failed:?}");
    let honours = second.honours();
    assert!(!honours.tool_choice_named && !honours.tool_choice_required);
    assert!(honours.native_tools, "only what was contradicted goes");
    let kept = verdicts::read(&file, &second.config().base_url, "mock-model").unwrap();
    assert!(
        kept.stale.as_deref().unwrap().contains("tool_choice"),
        "{kept:?}"
    );
    let third = client(&server.url());
    third.keep_verdicts_in(&file);
    assert!(third.needs_probe(), "a stale verdict is probed again");
    assert!(!third.honours().tool_choice_named);
}

/// llama.cpp's own server with the project's small model: what it really honours (checked by
/// hand first). Measured: 470 s at a load of 8.7 on 2 cores, the first check timing out.
#[tokio::test]
async fn llama_cpp_s_own_server_as_probed() {
    use deepsolve_testkit::real::{LlamaServer, server_python, test_model};
    // Each skips outside CI (saying why) and fails under it.
    let (Some(model), Some(python)) = (test_model(), server_python()) else {
        return;
    };
    let context = 4096;
    let server = LlamaServer::start(&python, &model, context).expect("llama.cpp's server");
    // A small model on a shared CPU takes a while to prefill the playbook.
    let config = ClientConfig {
        stream_idle_timeout: Duration::from_secs(300),
        ..ClientConfig::new(server.url(), "test-model")
    };
    let client = OpenAiClient::new(config).expect("client");
    // Offered with a work tool whose schema bounds its code at 200 000 characters, as
    // `code_execution`'s does: sent as it is, that bound is more than llama.cpp's grammar
    // holds, and the server then holds nothing (seen by hand: under `"required"`, asked for a
    // poem, the model wrote the poem).
    let code = ToolSpec {
        name: "code_execution".into(),
        description: "Run Python, like a notebook cell.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"code": {"type": "string", "minLength": 1, "maxLength": 200_000}},
            "required": ["code"],
            "additionalProperties": false
        }),
    };
    let spec = ProbeSpec::new(&Texts::builtin(Language::En), &[code])
        .with_check_timeout(Duration::from_secs(300));
    let verdict = client.probe(&spec).await.unwrap_or_else(|e| {
        panic!(
            "probe: {e:?}\nthe server's log ends:\n{}",
            server.log_tail()
        )
    });
    eprintln!("{verdict:#?}");
    let honours = verdict.honours();
    assert!(honours.native_tools, "{verdict:#?}");
    // Held where the model would answer in a sentence too.
    assert!(honours.tool_choice_required, "{verdict:#?}");
    // The pinned server forces *a* call for a named choice, of whichever tool the model
    // picks (seen by hand: `solve_finish_step` named, `solve_plan` called).
    assert!(!honours.tool_choice_named, "{verdict:#?}");
    assert_eq!(
        honours.context_window,
        Some(u64::from(context)),
        "{verdict:#?}"
    );
    assert_eq!(verdict.window_source, Some(WindowSource::LlamaCppProps));

    // A forced call cut by `max_tokens`: the server sends an error in place of
    // `finish_reason: "length"`; the client reads it as the call cut off, not a failure.
    let request = ChatRequest {
        messages: vec![Message::user(
            "Plan how to compute 17 * 23 and then 5 + 9, in three steps.",
        )],
        tools: vec![plan_tool()],
        tool_choice: ToolChoice::Required,
        max_tokens: 12,
        temperature: 0.0,
        stop: Vec::new(),
        response_format: None,
    };
    let cut = client.complete(&request, &mut |_| {}).await;
    let cut = cut.expect("the cut call, not an error");
    assert_eq!(cut.finish_reason, FinishReason::Length, "{cut:?}");
    assert_eq!(cut.tool_calls.len(), 1, "{cut:?}");
}

/// `solve_plan`, as a turn offers it.
fn plan_tool() -> ToolSpec {
    ToolSpec {
        name: "solve_plan".into(),
        description: "Commit to a plan.".into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "analysis": {"type": "string"},
                "steps": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"goal": {"type": "string"}},
                    "required": ["goal"]
                }}
            },
            "required": ["analysis", "steps"]
        }),
    }
}
