//! `GET /openapi.json`: the API described for clients and generators (OpenAPI 3.1).
//!
//! Written by hand rather than derived: the engine's types live in `deepsolve-core`, which
//! knows nothing about HTTP. A test requests every documented operation and fails if the
//! router does not serve it, so the document cannot promise routes that do not exist.

use axum::Json;
use serde_json::{Value, json};

fn error_response(description: &str) -> Value {
    json!({"description": description,
           "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
}

fn json_ok(description: &str, schema: Value) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": schema}}})
}

fn id_param(name: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}})
}

fn op(summary: &str, params: Vec<Value>, responses: Value) -> Value {
    json!({"summary": summary, "parameters": params, "responses": responses})
}

/// The document.
pub fn document() -> Value {
    let id = || vec![id_param("id")];
    let not_found = error_response("Not found — or not yours");
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "deepsolve",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "A rigorous step-by-step problem solver. Errors are {\"error\": {\"code\", \"message\"}}; another user's data answers 404.",
        },
        "security": [{"bearer": []}],
        "paths": {
            "/api/v1/turns": {"post": {
                "summary": "Start a turn (a new session, or a follow-up with session_id)",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/CreateTurn"}}}},
                "responses": {
                    "201": json_ok("Started", json!({"$ref": "#/components/schemas/TurnCreated"})),
                    "404": not_found,
                    "409": error_response("Another turn of the session is running"),
                    "413": error_response("Body too large"),
                    "422": error_response("Invalid request (unknown fields or config keys are named)"),
                    "503": error_response("Too many running turns"),
                }
            }},
            "/api/v1/turns/{id}": {"get": op("A turn: status, plan, answer, usage, stop reason", id(),
                json!({"200": json_ok("The turn", json!({"type": "object"})), "404": not_found}))},
            "/api/v1/turns/{id}/events": {"get": {
                "summary": "The turn's events over SSE (id: <seq>); resume with Last-Event-ID or ?after=",
                "parameters": [id_param("id"),
                    {"name": "Last-Event-ID", "in": "header", "schema": {"type": "integer"}},
                    {"name": "after", "in": "query", "schema": {"type": "integer"}}],
                "responses": {"200": {"description": "text/event-stream of turn events", "content": {"text/event-stream": {}}}, "404": not_found}
            }},
            "/api/v1/turns/{id}/cancel": {"post": op("Cancel a running turn", id(),
                json!({"202": json_ok("Cancelling", json!({"type": "object"})), "404": not_found, "409": error_response("Not running here")}))},
            "/api/v1/turns/{id}/resume": {"post": op("Resume an interrupted turn from its last finished step", id(),
                json!({"202": json_ok("Resumed: follow the same events_url, seqs continue", json!({"$ref": "#/components/schemas/TurnCreated"})),
                    "404": not_found, "409": error_response("Not interrupted (running, finished, or resumed meanwhile)"),
                    "503": error_response("Too many running turns")}))},
            "/api/v1/sessions": {"get": op("Your sessions, most recent first",
                vec![json!({"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 200}})],
                json!({"200": json_ok("Sessions", json!({"type": "object"}))}))},
            "/api/v1/sessions/{id}": {
                "get": op("A session with its turns", id(), json!({"200": json_ok("The session", json!({"type": "object"})), "404": not_found})),
                "delete": op("Delete a session with its turns, events and artifacts", id(),
                    json!({"204": {"description": "Deleted"}, "404": not_found, "409": error_response("A turn is running")})),
            },
            "/api/v1/artifacts/{id}": {"get": op("Download an artifact (always as an attachment)", id(),
                json!({"200": {"description": "The file"}, "404": not_found}))},
            "/api/v1/capabilities/settings": {
                "get": op("The solve knobs in force, with their ranges", vec![], json!({"200": json_ok("Settings", json!({"type": "object"}))})),
                "put": {
                    "summary": "Change solve knobs (admin only; clamped; one atomic write)",
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["solve"], "properties": {"solve": {"type": "object"}}, "additionalProperties": false}}}},
                    "responses": {"200": json_ok("Settings now in force", json!({"type": "object"})), "403": error_response("Not an admin"), "422": error_response("Unknown key or bad value")}
                },
            },
            "/v1/chat/completions": {"post": {
                "summary": "OpenAI-compatible: model \"deepsolve\" runs a solve turn; streaming sends progress as reasoning_content and the answer as content",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["model", "messages"]}}}},
                "responses": {"200": {"description": "chat.completion, or an SSE stream of chat.completion.chunk ending with [DONE]"}, "404": error_response("Unknown model"), "422": error_response("Bad conversation")}
            }},
            "/v1/models": {"get": op("OpenAI-compatible model list", vec![], json!({"200": json_ok("Models", json!({"type": "object"}))}))},
            "/healthz": {"get": {"summary": "Liveness and database reachability", "security": [], "responses": {"200": {"description": "ok"}, "503": error_response("Database unreachable")}}},
            "/metrics": {"get": {"summary": "Prometheus metrics", "security": [], "responses": {"200": {"description": "text/plain exposition"}}}},
            "/openapi.json": {"get": {"summary": "This document", "security": [], "responses": {"200": {"description": "OpenAPI 3.1"}}}},
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "deepsolve users token NAME; not needed in single-user (loopback) mode"}},
            "schemas": {
                "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "object", "required": ["code", "message"], "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}}},
                "CreateTurn": {"type": "object", "required": ["problem"], "additionalProperties": false, "properties": {
                    "problem": {"type": "string"},
                    "session_id": {"type": "string", "description": "Continue this session: the turn sees the earlier answers and solve records"},
                    "language": {"type": "string", "enum": ["en", "zh"]},
                    "tools": {"type": "array", "items": {"type": "string"}},
                    "config": {"type": "object", "description": "Solve knob overrides; unknown keys are refused by name, values clamped"},
                    "attachments": {"type": "array"},
                    "knowledge_bases": {"type": "array", "items": {"type": "string"}},
                }},
                "TurnCreated": {"type": "object", "properties": {
                    "turn_id": {"type": "string"}, "session_id": {"type": "string"},
                    "status": {"type": "string"}, "events_url": {"type": "string"}}},
            },
        },
    })
}

pub async fn openapi_json() -> Json<Value> {
    Json(document())
}
