//! The OpenAPI document: its references resolve, a real OpenAPI validator accepts it (the
//! `openapi-spec-validator` Python package, from `DEEPSOLVE_TEST_PYTHON`, which scripts/test
//! sets up), and what the server really sends validates against its schemas.

use deepsolve_server::openapi::document;
use deepsolve_store::Role;
use deepsolve_testkit::WellBehaved;
use serde_json::{Value, json};

use crate::support::{Options, start};

/// Every `"$ref"` string anywhere under `value`.
fn refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get("$ref") {
                out.push(r.clone());
            }
            map.values().for_each(|v| refs(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

#[test]
fn every_reference_points_into_the_components_and_every_body_has_a_schema() {
    let doc = document();
    let schemas = doc["components"]["schemas"].as_object().expect("schemas");
    for name in [
        "CreateTurn",
        "TurnCreated",
        "TurnView",
        "SessionView",
        "SessionList",
        "CancelAccepted",
        "SettingsView",
        "PutSettings",
        "Health",
        "ErrorBody",
        "ApiErrorCode",
        "TurnEvent",
        "EventKind",
        "WarningKind",
        "ErrorKind",
        "StopReason",
        "Usage",
        "SolveRecord",
        "Checkpoint",
        "ChatRequest",
        "AuthSessionView",
        "LoginRequest",
        "CapabilitiesView",
        "ChatCompletion",
        "ChatCompletionChunk",
        "ModelList",
        "KbView",
        "KbList",
        "KbDetail",
        "DocumentView",
        "DocumentsAccepted",
        "SearchKb",
        "SearchResults",
        "TurnAttachment",
        "KnowledgeView",
        "CreateEval",
        "EvalStatus",
        "EvalView",
        "EvalList",
        "EvalRow",
        "EvalDetail",
        "EvalCancelAccepted",
        "RecordError",
        "Extraction",
        "Judged",
        "Report",
        "ModeSummary",
        "Paired",
        "GroupRow",
        "ModeTally",
        "Language",
    ] {
        assert!(schemas.contains_key(name), "no component schema {name}");
    }
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(!all.is_empty());
    for r in &all {
        let name = r
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("{r} points outside #/components/schemas/"));
        assert!(schemas.contains_key(name), "{r} resolves to nothing");
    }
    assert!(
        !serde_json::to_string(&doc).expect("json").contains("$defs"),
        "no schema keeps local $defs"
    );
    // Every JSON body of an operation is a component (only this document's own is free-form).
    for (path, ops) in doc["paths"].as_object().expect("paths") {
        for (method, op) in ops.as_object().expect("ops") {
            let mut bodies: Vec<&Value> = op["responses"]
                .as_object()
                .expect("responses")
                .values()
                .collect();
            bodies.extend(op.get("requestBody"));
            for body in bodies {
                let Some(schema) = body.pointer("/content/application~1json/schema") else {
                    continue;
                };
                if path == "/openapi.json" {
                    continue;
                }
                assert!(
                    schema.get("$ref").is_some(),
                    "{method} {path}: a JSON body without a component schema: {schema}"
                );
            }
        }
    }
    let sse = doc
        .pointer("/paths/~1api~1v1~1turns~1{id}~1events/get/responses/200/content/text~1event-stream/x-data-schema/$ref")
        .and_then(Value::as_str);
    assert_eq!(sse, Some("#/components/schemas/TurnEvent"));
    let progress = doc
        .pointer("/paths/~1api~1v1~1evals~1{id}~1events/get/responses/200/content/text~1event-stream/x-data-schema/$ref")
        .and_then(Value::as_str);
    assert_eq!(progress, Some("#/components/schemas/EvalView"));
    // Flattened types are inlined into the types that flatten them, not left as components.
    for inlined in ["EvalMeta", "ResultRecord"] {
        assert!(!schemas.contains_key(inlined), "{inlined} is inlined");
    }
    assert!(
        schemas.keys().all(|name| !name.ends_with(char::is_numeric)),
        "two types share a schema name: {:?}",
        schemas.keys().collect::<Vec<_>>()
    );
}

/// The web UI's routes: pages and assets, not API.
const UNDOCUMENTED_ROUTES: [&str; 2] = ["/", "/assets/{*path}"];

/// Each `.route("path", …)` of the router's source with its methods (`get`, `post`, …).
fn routed(source: &str) -> Vec<(String, Vec<String>)> {
    let router = source
        .split_once("pub fn router(")
        .and_then(|(_, rest)| rest.split_once(".fallback("))
        .map(|(routes, _)| routes)
        .expect("the router's routes in lib.rs");
    router
        .split(".route(")
        .skip(1)
        .map(|route| {
            let path = route.split('"').nth(1).expect("a route's path").to_string();
            let handlers = route.split_once(',').map_or("", |(_, h)| h);
            let methods = ["get", "post", "put", "patch", "delete"]
                .into_iter()
                .filter(|m| {
                    handlers.match_indices(&format!("{m}(")).any(|(at, _)| {
                        !handlers[..at]
                            .chars()
                            .next_back()
                            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
                    })
                })
                .map(str::to_string)
                .collect();
            (path, methods)
        })
        .collect()
}

/// The other direction of `every_operation_in_openapi_json_is_served`: a route added to the
/// router without its paths here fails.
#[test]
fn every_route_of_the_router_is_documented() {
    let doc = document();
    let routes = routed(include_str!("../../src/lib.rs"));
    assert!(routes.len() >= 30, "the router's routes: {routes:?}");
    for (path, methods) in routes {
        if UNDOCUMENTED_ROUTES.contains(&path.as_str()) {
            continue;
        }
        let documented = &doc["paths"][&path];
        assert!(
            documented.is_object(),
            "{path} is routed but not in /openapi.json"
        );
        assert!(!methods.is_empty(), "{path}: no method found");
        for method in methods {
            assert!(
                documented.get(&method).is_some(),
                "{method} {path} is routed but not in /openapi.json"
            );
        }
    }
}

/// A Python that can `import openapi_spec_validator`, or `None` to skip.
fn python_with_validator() -> Option<String> {
    let candidates = std::env::var("DEEPSOLVE_TEST_PYTHON")
        .ok()
        .into_iter()
        .chain(["python3".to_string()]);
    candidates.into_iter().find(|python| {
        std::process::Command::new(python)
            .args(["-c", "import openapi_spec_validator"])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

const VALIDATE: &str = r#"
import json, sys
from openapi_spec_validator import validate
from openapi_spec_validator.readers import read_from_filename
spec, _ = read_from_filename(sys.argv[1])
validate(spec)
print(json.dumps({"paths": len(spec["paths"]), "schemas": len(spec["components"]["schemas"])}))
"#;

#[test]
fn the_document_passes_an_openapi_validator() {
    let Some(python) = python_with_validator() else {
        // scripts/test (and so CI) names the venv it installed: there, a missing validator is
        // a failure, never a silent skip.
        assert!(
            std::env::var_os("DEEPSOLVE_TEST_PYTHON").is_none(),
            "DEEPSOLVE_TEST_PYTHON is set but cannot `import openapi_spec_validator`"
        );
        eprintln!(
            "skipped: no Python with openapi-spec-validator (scripts/install-deps installs one)"
        );
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("openapi.json");
    let doc = document();
    std::fs::write(&path, serde_json::to_vec_pretty(&doc).expect("json")).expect("write");
    let out = std::process::Command::new(&python)
        .args(["-c", VALIDATE])
        .arg(&path)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "the validator refused the document:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("report json");
    assert_eq!(
        report["paths"],
        json!(doc["paths"].as_object().map(|p| p.len()))
    );
    eprintln!("openapi-spec-validator: valid ({report})");
}

/// Checks JSON against the document's component schemas.
pub(crate) struct Schemas {
    components: Value,
}

impl Schemas {
    pub(crate) fn new() -> Schemas {
        Schemas {
            components: document()["components"].clone(),
        }
    }

    pub(crate) fn check(&self, name: &str, instance: &Value) {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$ref": format!("#/components/schemas/{name}"),
            "components": self.components,
        });
        let validator = jsonschema::validator_for(&schema).expect("a valid JSON Schema");
        let errors: Vec<String> = validator
            .iter_errors(instance)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{name} does not describe {instance}:\n{errors:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_server_sends_matches_the_schemas() {
    let started = start(
        WellBehaved::new(2).with_work_tool(None),
        Options {
            users: vec![("ada", Role::Admin)],
            ..Options::default()
        },
    )
    .await;
    let s = started.server;
    let token = Some(started.tokens[0].as_str());
    let schemas = Schemas::new();

    let (status, created) = s
        .post(
            "/api/v1/turns",
            json!({"problem": "Solve x + 1 = 2"}),
            token,
        )
        .await;
    assert_eq!(status, 201);
    schemas.check("TurnCreated", &created);
    let turn = created["turn_id"].as_str().expect("turn id").to_string();
    let events = s.events(&turn, None, token).await;
    assert!(events.len() > 5);
    for event in &events {
        schemas.check("TurnEvent", &event.data);
    }
    let view = s.wait_done(&turn, token).await;
    schemas.check("TurnView", &view);
    let (_, sessions) = s.get("/api/v1/sessions", token).await;
    schemas.check("SessionList", &sessions);
    let session = created["session_id"].as_str().expect("session");
    let (_, session) = s.get(&format!("/api/v1/sessions/{session}"), token).await;
    schemas.check("SessionView", &session);
    let (_, settings) = s.get("/api/v1/capabilities/settings", token).await;
    schemas.check("SettingsView", &settings);
    let (status, changed) = s
        .put(
            "/api/v1/capabilities/settings",
            json!({"solve": {"max_rounds": 500}}),
            token,
        )
        .await;
    assert_eq!(status, 200, "{changed}");
    schemas.check("SettingsView", &changed);
    let (_, health) = s.get("/healthz", None).await;
    schemas.check("Health", &health);
    let (_, capabilities) = s.get("/api/v1/capabilities", token).await;
    schemas.check("CapabilitiesView", &capabilities);
    for credential in [None, token] {
        let (_, session) = s.get("/api/v1/auth/session", credential).await;
        schemas.check("AuthSessionView", &session);
    }
    let (status, login) = s
        .post(
            "/api/v1/auth/login",
            json!({"token": started.tokens[0]}),
            None,
        )
        .await;
    assert_eq!(status, 200, "{login}");
    schemas.check("AuthSessionView", &login);
    // Knowledge bases: every view, from a real upload and ingest.
    let (status, kb) = s
        .post("/api/v1/knowledge-bases", json!({"name": "notes"}), token)
        .await;
    assert_eq!(status, 201, "{kb}");
    schemas.check("KbView", &kb);
    let files = vec![(
        "notes.md",
        deepsolve_testkit::documents::notes_markdown().into_bytes(),
    )];
    let (status, accepted) = crate::knowledge::upload(&s, token, "notes", files).await;
    assert_eq!(status, 202, "{accepted}");
    schemas.check("DocumentsAccepted", &accepted);
    let doc = accepted["documents"][0]["id"].as_str().expect("doc");
    let view = crate::knowledge::settled(&s, token, "notes", doc).await;
    schemas.check("DocumentView", &view);
    let (_, list) = s.get("/api/v1/knowledge-bases", token).await;
    schemas.check("KbList", &list);
    let (_, detail) = s.get("/api/v1/knowledge-bases/notes", token).await;
    schemas.check("KbDetail", &detail);
    let (status, found) = s
        .post(
            "/api/v1/knowledge-bases/notes/search",
            json!({"query": "eigenvalue"}),
            token,
        )
        .await;
    assert_eq!(status, 200, "{found}");
    assert!(!found["hits"].as_array().expect("hits").is_empty());
    schemas.check("SearchResults", &found);
    schemas.check("CreateKb", &json!({"name": "n"}));
    schemas.check("SearchKb", &json!({"query": "q", "top_k": 3}));
    check_eval_responses(&s, token, &schemas).await;
    let (_, models) = s.get("/v1/models", token).await;
    schemas.check("ModelList", &models);
    let (status, completion) = s
        .post(
            "/v1/chat/completions",
            json!({"model": "deepsolve", "messages": [{"role": "user", "content": "Solve x + 2 = 5"}]}),
            token,
        )
        .await;
    assert_eq!(status, 200, "{completion}");
    schemas.check("ChatCompletion", &completion);
    // Errors, from several layers: the router, the JSON extractor, the request checks, auth.
    for (status, body) in [
        s.get("/api/v1/turns/nonexistent", token).await,
        s.post("/api/v1/turns", json!({"problme": "typo"}), token)
            .await,
        s.post(
            "/api/v1/turns",
            json!({"problem": "p", "tools": ["nope"]}),
            token,
        )
        .await,
        s.get("/api/v1/sessions", None).await,
        s.get("/nowhere", token).await,
    ] {
        assert!(status >= 400, "{body}");
        schemas.check("ErrorBody", &body);
    }
    // A request that fits its schema is accepted by the server, and one that does not is not.
    schemas.check("CreateTurn", &json!({"problem": "p", "language": "zh"}));
    let refused = std::panic::catch_unwind(|| {
        Schemas::new().check("CreateTurn", &json!({"problme": "typo"}));
    });
    assert!(refused.is_err(), "the schema refuses unknown fields too");
    s.shutdown().await;
}

/// An evaluation run against the scripted model, both modes on one uploaded problem: every
/// view of it (created, each progress frame, the list, the detail with its report and rows),
/// its plot, its errors and its deletion.
async fn check_eval_responses(
    s: &crate::support::TestServer,
    token: Option<&str>,
    schemas: &Schemas,
) {
    let request = json!({
        "set": "one.jsonl",
        "data": json!({"id": "p1", "question": "What is 6 times 7?", "answer": "42"}).to_string(),
        "modes": ["deepsolve", "plain"],
        "concurrency": 1,
    });
    schemas.check("CreateEval", &request);
    let (status, created) = s.post("/api/v1/evals", request, token).await;
    assert_eq!(status, 201, "{created}");
    schemas.check("EvalView", &created);
    let id = created["id"].as_str().expect("eval id").to_string();
    let body = s
        .get_response(&format!("/api/v1/evals/{id}/events"), token)
        .await
        .text()
        .await
        .expect("the stream ends with the run");
    let frames = crate::support::parse_sse(&body);
    assert_eq!(
        frames.last().and_then(|f| f.event.as_deref()),
        Some("finished"),
        "{body}"
    );
    for frame in &frames {
        schemas.check("EvalView", &frame.data);
    }
    let (status, detail) = s.get(&format!("/api/v1/evals/{id}"), token).await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(
        detail["results"].as_array().map(Vec::len),
        Some(2),
        "{detail}"
    );
    assert!(detail["report"].is_object(), "{detail}");
    schemas.check("EvalDetail", &detail);
    let (_, list) = s.get("/api/v1/evals", token).await;
    schemas.check("EvalList", &list);
    let plot = s
        .get_response(&format!("/api/v1/evals/{id}/plots/accuracy.svg"), token)
        .await;
    assert_eq!(plot.status().as_u16(), 200);
    assert_eq!(
        plot.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("image/svg+xml"),
        "the type the document names"
    );
    for (status, body) in [
        s.get("/api/v1/evals/ev_0123", token).await,
        s.post("/api/v1/evals", json!({"set": "nope"}), token).await,
        s.post("/api/v1/evals", json!({"sett": "typo"}), token)
            .await,
    ] {
        assert!(status >= 400, "{body}");
        schemas.check("ErrorBody", &body);
    }
    let refused = std::panic::catch_unwind(|| {
        Schemas::new().check("CreateEval", &json!({"sett": "typo"}));
    });
    assert!(refused.is_err(), "the schema refuses unknown fields too");
    let status = s.delete(&format!("/api/v1/evals/{id}"), token).await;
    assert_eq!(status, 204, "a run that is over is deleted");
}
