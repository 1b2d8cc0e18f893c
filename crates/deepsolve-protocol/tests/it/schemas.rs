//! The generated schemas describe the JSON the types really write.

use deepsolve_protocol::api::{ApiErrorCode, CreateTurn, ErrorBody, ErrorDetail};
use deepsolve_protocol::schema::components;
use deepsolve_protocol::{
    ContentPart, ErrorKind, EventKind, RoundRole, Source, StopReason, TurnEvent, Usage, WarningKind,
};
use serde_json::{Value, json};

fn validator(name: &str) -> jsonschema::Validator {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": format!("#/components/schemas/{name}"),
        "components": {"schemas": components()},
    });
    jsonschema::validator_for(&schema).expect("a valid JSON Schema")
}

fn assert_valid(name: &str, instance: &Value) {
    let v = validator(name);
    let errors: Vec<String> = v.iter_errors(instance).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{name} refuses {instance}: {errors:?}");
}

fn event(kind: EventKind) -> Value {
    serde_json::to_value(TurnEvent {
        turn_id: "turn_1".into(),
        seq: 0,
        ts: 1,
        kind,
    })
    .expect("json")
}

#[test]
fn every_reference_resolves_inside_the_components() {
    let all = components();
    let text = serde_json::to_string(&all).expect("json");
    for (at, _) in text.match_indices("\"$ref\":\"") {
        let rest = &text[at + 8..];
        let target = &rest[..rest.find('"').expect("closing quote")];
        let name = target
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("{target} points elsewhere"));
        assert!(all.contains_key(name), "{target} resolves to nothing");
    }
    assert!(!text.contains("$defs"));
}

#[test]
fn events_validate_against_the_turn_event_schema() {
    for kind in [
        EventKind::Warning {
            kind: WarningKind::ForcedAnswer,
            message: "m".into(),
        },
        EventKind::Error {
            kind: ErrorKind::TurnNotStarted,
            message: "m".into(),
        },
        EventKind::RoundFinished {
            round: 1,
            role: RoundRole::Answer,
            finish_reason: "stop".into(),
            usage: Usage::default(),
        },
        EventKind::TurnFinished {
            stop_reason: StopReason::Answered,
            usage: Usage::default(),
            rounds: 1,
            elapsed_ms: 5,
        },
        EventKind::ToolCall {
            call_id: "c".into(),
            name: "reason".into(),
            args: json!({"question": "why"}),
            shown: None,
        },
        EventKind::ToolCall {
            call_id: "c".into(),
            name: "code_execution".into(),
            args: json!({"code": "print(1)"}),
            shown: Some(deepsolve_protocol::ShownArgument {
                name: "code".into(),
                language: Some("python".into()),
            }),
        },
    ] {
        assert_valid("TurnEvent", &event(kind));
    }
    let v = validator("TurnEvent");
    assert!(!v.is_valid(&json!({"turn_id": "t", "seq": 0, "ts": 1, "type": "no_such_event"})));
    assert!(!v.is_valid(&json!({"seq": 0, "ts": 1, "type": "text_delta", "text": "x"})));
}

#[test]
fn api_shapes_validate_against_their_schemas() {
    assert_valid(
        "ErrorBody",
        &serde_json::to_value(ErrorBody {
            error: ErrorDetail {
                code: ApiErrorCode::Busy,
                message: "retry".into(),
            },
        })
        .expect("json"),
    );
    assert!(
        !validator("ErrorBody").is_valid(&json!({"error": {"code": "teapot", "message": "m"}}))
    );
    let create = CreateTurn {
        problem: "p".into(),
        tools: vec!["reason".into()],
        ..CreateTurn::default()
    };
    assert_valid("CreateTurn", &serde_json::to_value(create).expect("json"));
    assert!(!validator("CreateTurn").is_valid(&json!({"problem": "p", "extra": 1})));
    assert_valid(
        "ContentPart",
        &serde_json::to_value(ContentPart::Image {
            mime: "image/png".into(),
            data: None,
            url: Some("https://example.org/a.png".into()),
        })
        .expect("json"),
    );
    assert_valid(
        "Source",
        &serde_json::to_value(Source {
            n: 1,
            title: "t".into(),
            score: Some(0.5),
            ..Source::default()
        })
        .expect("json"),
    );
}

/// The one list of event types names exactly the `type` tags the enum's schema has, in order.
#[test]
fn the_event_type_list_is_every_tag_of_the_event_enum() {
    let all = components();
    let tags: Vec<&str> = all["EventKind"]["oneOf"]
        .as_array()
        .expect("EventKind is a oneOf")
        .iter()
        .map(|alternative| {
            let tag = &alternative["properties"]["type"];
            tag.get("const")
                .or_else(|| tag["enum"].get(0))
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("no type tag in {alternative}"))
        })
        .collect();
    assert_eq!(tags, deepsolve_protocol::EVENT_TYPES);
    let ts = deepsolve_protocol::schema::typescript();
    for name in deepsolve_protocol::EVENT_TYPES {
        assert!(
            ts.contains(&format!("  \"{name}\",\n")),
            "{name} not in the TS list"
        );
    }
}

/// A type of a crate above this one, with a protocol type inside.
#[derive(schemars::JsonSchema)]
#[allow(dead_code)]
struct Outside {
    language: deepsolve_protocol::Language,
    usage: Usage,
}

#[test]
fn extra_roots_join_the_same_components() {
    let plain = components();
    let more = deepsolve_protocol::schema::components_with(|g| {
        deepsolve_protocol::schema::add::<Outside>(g);
    });
    assert!(!plain.contains_key("Outside"));
    let outside = more.get("Outside").expect("the extra root is a component");
    let text = outside.to_string();
    assert!(
        text.contains("#/components/schemas/Usage")
            && text.contains("#/components/schemas/Language"),
        "a protocol type inside refers to its component: {text}"
    );
    // Everything else is the same: the protocol's types are described once.
    assert_eq!(more.len(), plain.len() + 1);
    for (name, schema) in &plain {
        assert_eq!(more.get(name), Some(schema), "{name} changed");
    }
}
