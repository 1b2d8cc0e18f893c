//! `GET /openapi.json`: the API described for clients and generators (OpenAPI 3.1).
//!
//! The paths are written here, next to the router they describe; every request, response and
//! event body is a `$ref` into `components.schemas`, which is generated from the types
//! themselves — the protocol's, and the server's own evaluation types (see `schemas`) —
//! (JSON Schema 2020-12, the dialect OpenAPI 3.1 uses), so the document cannot drift from
//! what the server reads and writes. Tests request every documented operation and fail if the
//! router does not serve it, fail for a route of the router missing here, and validate the
//! document with an OpenAPI validator.

use axum::Json;
use deepsolve_protocol::TurnEvent;
use deepsolve_protocol::api::openai::{
    ChatCompletion, ChatCompletionChunk, ChatRequest, ModelList, StreamError,
};
use deepsolve_protocol::api::{
    AuthSessionView, CancelAccepted, CapabilitiesView, CreateKb, CreateTurn, DocumentView,
    DocumentsAccepted, ErrorBody, Health, KbDetail, KbList, KbView, LoginRequest, PutSettings,
    SearchKb, SearchResults, SessionList, SessionView, SettingsView, TurnCreated, TurnView,
};
use deepsolve_protocol::schema::{SchemaGenerator, add, components_with, reference};
use schemars::JsonSchema;
use serde_json::{Map, Value, json};

use crate::evals::{CreateEval, EvalCancelAccepted, EvalDetail, EvalList, EvalView};

/// A JSON body of type `T`.
fn json_body<T: JsonSchema>() -> Value {
    json!({"application/json": {"schema": reference::<T>()}})
}

/// An SSE body whose `data:` lines are each a JSON `T` (OpenAPI 3.1 has no item schema for
/// streams: the frames are described, and `x-data-schema` names the type of each `data`).
fn sse_body(frames: &str, data: Value) -> Value {
    json!({"text/event-stream": {
        "schema": {"type": "string", "description": frames},
        "x-data-schema": data,
    }})
}

fn request_body<T: JsonSchema>() -> Value {
    json!({"required": true, "content": json_body::<T>()})
}

fn ok<T: JsonSchema>(description: &str) -> Value {
    json!({"description": description, "content": json_body::<T>()})
}

fn error(description: &str) -> Value {
    ok::<ErrorBody>(description)
}

fn id_param() -> Value {
    json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string"}})
}

/// An operation that needs a token: its 401 comes with it.
fn op(summary: &str, params: Vec<Value>, mut responses: Map<String, Value>) -> Value {
    responses.insert("401".into(), error("Missing, unknown or revoked token"));
    json!({"summary": summary, "parameters": params, "responses": responses})
}

/// An operation without authentication.
fn open_op(summary: &str, responses: Value) -> Value {
    json!({"summary": summary, "security": [], "responses": responses})
}

fn with_body(mut operation: Value, body: Value) -> Value {
    operation["requestBody"] = body;
    operation
}

fn responses(entries: Value) -> Map<String, Value> {
    match entries {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// A turn's request: JSON, or multipart with the JSON in a part `request` and attachments
/// in parts `file`.
fn turn_request_body() -> Value {
    let mut content = json_body::<CreateTurn>();
    if let Value::Object(content) = &mut content {
        content.insert("multipart/form-data".into(), json!({
            "schema": {
                "type": "object",
                "required": ["request"],
                "properties": {
                    "request": {"type": "string", "description": "The turn's JSON (CreateTurn)"},
                    "file": {"type": "array", "items": {"type": "string", "contentMediaType": "application/octet-stream"},
                             "description": "Attachments, ingested before the turn starts"},
                    "image": {"type": "array", "items": {"type": "string", "contentMediaType": "image/*"},
                              "description": "Images of the problem (PNG, JPEG, WebP, GIF by their bytes; at most 10 MiB each, 8 per turn)"},
                },
            },
        }));
    }
    json!({"required": true, "content": content})
}

fn turn_paths() -> Value {
    let not_found = || error("Not found — or not yours");
    let busy = || error("Too many running turns on this server; retry shortly");
    json!({
        "/api/v1/turns": {"post": with_body(op(
            "Start a turn (a new session, or a follow-up with session_id); knowledge_bases and attachments give it material to cite, images show the problem", vec![],
            responses(json!({
                "201": ok::<TurnCreated>("Started: follow events_url"),
                "404": not_found(),
                "409": error("Another turn of the session is running"),
                "413": error("Body too large, or an attachment or image over its cap (named)"),
                "415": error("Neither JSON nor multipart/form-data"),
                "422": error("Invalid request (unknown fields, tools, config keys or knowledge bases are named; an attachment that cannot be read is named with why; invalid_image names an image that is not a usable PNG, JPEG, WebP or GIF; cannot_see_images: neither the model nor a tool of the turn sees images)"),
                "503": busy(),
            }))), turn_request_body())},
        "/api/v1/turns/{id}": {"get": op(
            "A turn: status, plan, answer, usage, stop reason", vec![id_param()],
            responses(json!({"200": ok::<TurnView>("The turn"), "404": not_found()})))},
        "/api/v1/turns/{id}/events": {"get": op(
            "The turn's events over SSE; resume with Last-Event-ID or ?after=",
            vec![id_param(),
                 json!({"name": "Last-Event-ID", "in": "header", "schema": {"type": "integer", "minimum": 0}}),
                 json!({"name": "after", "in": "query", "schema": {"type": "integer", "minimum": 0},
                        "description": "Resume after this seq (for clients that cannot set Last-Event-ID)"})],
            responses(json!({
                "200": {"description": "The turn's events, from the log then live; the stream ends after turn_finished",
                        "content": sse_body("SSE frames `event: <the event's type>` + `id: <seq>` + `data: <TurnEvent as JSON>`", reference::<TurnEvent>())},
                "400": error("Last-Event-ID is not a number"),
                "404": not_found(),
            })))},
        "/api/v1/turns/{id}/images/{image}": {"get": op(
            "One image the turn was given (as the model was sent it), shown in the page: its type from its bytes",
            vec![id_param(), json!({"name": "image", "in": "path", "required": true, "schema": {"type": "string"},
                                    "description": "The image's id in the turn (image_1, …)"})],
            responses(json!({
                "200": {"description": "The image",
                        "content": {"image/*": {"schema": {"type": "string", "contentMediaType": "image/*"}}}},
                "404": not_found(),
            })))},
        "/api/v1/turns/{id}/cancel": {"post": op(
            "Cancel a running turn", vec![id_param()],
            responses(json!({
                "202": ok::<CancelAccepted>("Cancelling: the stream ends with turn_finished: cancelled"),
                "404": not_found(),
                "409": error("Not running (already ended, or on no server)"),
            })))},
        "/api/v1/turns/{id}/resume": {"post": op(
            "Resume an interrupted turn from its last finished step", vec![id_param()],
            responses(json!({
                "202": ok::<TurnCreated>("Resumed: follow the same events_url, seqs continue"),
                "404": not_found(),
                "409": error("Not interrupted (running, finished, or resumed meanwhile)"),
                "503": busy(),
            })))},
    })
}

fn session_paths() -> Value {
    let not_found = || error("Not found — or not yours");
    json!({
        "/api/v1/sessions": {"get": op(
            "Your sessions, most recent first",
            vec![json!({"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 200, "default": 50}})],
            responses(json!({"200": ok::<SessionList>("Sessions (without their turns)")})))},
        "/api/v1/sessions/{id}": {
            "get": op("A session with its turns", vec![id_param()],
                responses(json!({"200": ok::<SessionView>("The session"), "404": not_found()}))),
            "delete": op("Delete a session with its turns, events and artifacts", vec![id_param()],
                responses(json!({"204": {"description": "Deleted"}, "404": not_found(),
                                 "409": error("A turn is running")}))),
        },
        "/api/v1/artifacts/{id}": {"get": op(
            "Download an artifact (always as an attachment)", vec![id_param()],
            responses(json!({
                "200": {"description": "The file",
                        "content": {"application/octet-stream": {"schema": {"type": "string", "contentMediaType": "application/octet-stream"}}}},
                "404": not_found(),
            })))},
        "/api/v1/artifacts/{id}/inline": {"get": op(
            "Show an artifact in the page: only a raster image (PNG, JPEG, GIF, WebP by its bytes), with the type from its magic number", vec![id_param()],
            responses(json!({
                "200": {"description": "The image",
                        "content": {"image/*": {"schema": {"type": "string", "contentMediaType": "image/*"}}}},
                "404": not_found(),
                "415": error("Not an inline image; download it"),
            })))},
        "/api/v1/artifacts/{id}/signed": {"get": signed_artifact_op()},
        "/api/v1/capabilities": {"get": op(
            "What a turn can have here: the model, every work tool (and why one is unavailable), limits, price, sandbox",
            vec![], responses(json!({"200": ok::<CapabilitiesView>("Capabilities")})))},
        "/api/v1/capabilities/settings": {
            "get": op("The solve knobs in force, with their ranges", vec![],
                responses(json!({"200": ok::<SettingsView>("Settings")}))),
            "put": with_body(op("Change solve knobs (admin only; clamped; one atomic write)", vec![],
                responses(json!({
                    "200": ok::<SettingsView>("Settings now in force, with the clamp warnings"),
                    "403": error("Not an admin"),
                    "409": error("This server has no settings file"),
                    "422": error("Unknown key or bad value"),
                }))), request_body::<PutSettings>()),
        },
    })
}

/// `GET /api/v1/artifacts/{id}/signed`: no token, the link's signature instead.
fn signed_artifact_op() -> Value {
    let mut operation = open_op(
        "An artifact through a signed, expiring link (the OpenAI facade's answers carry them): a raster image inline, anything else as a download; no token needed",
        json!({
            "200": {"description": "The file",
                    "content": {"application/octet-stream": {"schema": {"type": "string", "contentMediaType": "application/octet-stream"}}}},
            "404": error("No such artifact, or the link is forged, altered or expired"),
        }),
    );
    let query = |name: &str, schema: Value, description: &str| json!({"name": name, "in": "query", "required": true, "schema": schema, "description": description});
    operation["parameters"] = json!([
        id_param(),
        query("u", json!({"type": "string"}), "The owner's user id"),
        query(
            "exp",
            json!({"type": "integer", "minimum": 0}),
            "Expiry, seconds since the Unix epoch"
        ),
        query(
            "sig",
            json!({"type": "string"}),
            "HMAC-SHA256 of (artifact, owner, expiry), hex"
        ),
    ]);
    operation
}

fn kb_param() -> Value {
    json!({"name": "kb", "in": "path", "required": true, "schema": {"type": "string"},
           "description": "The knowledge base's id or name"})
}

fn doc_param() -> Value {
    json!({"name": "doc", "in": "path", "required": true, "schema": {"type": "string"}})
}

fn upload_body() -> Value {
    json!({"required": true, "content": {"multipart/form-data": {"schema": {
        "type": "object",
        "required": ["file"],
        "properties": {"file": {"type": "array", "minItems": 1, "maxItems": crate::upload::MAX_FILES,
                                "items": {"type": "string", "contentMediaType": "application/octet-stream"}}},
    }}}})
}

fn kb_paths() -> Value {
    let not_found = || error("Not found — or not yours");
    json!({
        "/api/v1/knowledge-bases": {
            "get": op("Your knowledge bases, by name", vec![],
                responses(json!({"200": ok::<KbList>("Knowledge bases")}))),
            "post": with_body(op("Create a knowledge base", vec![],
                responses(json!({
                    "201": ok::<KbView>("Created"),
                    "409": error("You have a knowledge base of that name"),
                    "422": error("Invalid name"),
                }))), request_body::<CreateKb>()),
        },
        "/api/v1/knowledge-bases/{kb}": {
            "get": op("A knowledge base with its documents and their ingest status", vec![kb_param()],
                responses(json!({"200": ok::<KbDetail>("The knowledge base"), "404": not_found()}))),
            "delete": op("Delete a knowledge base with its documents", vec![kb_param()],
                responses(json!({"204": {"description": "Deleted"}, "404": not_found()}))),
        },
        "/api/v1/knowledge-bases/{kb}/documents": {"post": with_body(op(
            "Upload documents (PDF, DOCX, HTML, Markdown, text): queued at once, ingested in the background", vec![kb_param()],
            responses(json!({
                "202": ok::<DocumentsAccepted>("Queued: poll each document for its status and progress"),
                "404": not_found(),
                "413": error("A file over the upload cap (named), or too much in one request"),
                "415": error("Not multipart/form-data"),
                "422": error("No file, too many files, or a refused file (named, with why)"),
                "503": error("Knowledge bases are not available on this server"),
            }))), upload_body())},
        "/api/v1/knowledge-bases/{kb}/documents/{doc}": {
            "get": op("A document: status, ingest progress, error", vec![kb_param(), doc_param()],
                responses(json!({"200": ok::<DocumentView>("The document"), "404": not_found()}))),
            "delete": op("Delete a document with its passages", vec![kb_param(), doc_param()],
                responses(json!({"204": {"description": "Deleted"}, "404": not_found()}))),
        },
        "/api/v1/knowledge-bases/{kb}/search": {"post": with_body(op(
            "Search a knowledge base's ready documents", vec![kb_param()],
            responses(json!({
                "200": ok::<SearchResults>("Passages, best first"),
                "404": not_found(),
                "422": error("Empty query"),
                "503": error("Knowledge bases are not available on this server"),
            }))), request_body::<SearchKb>())},
    })
}

fn file_param() -> Value {
    json!({"name": "file", "in": "path", "required": true, "schema": {"type": "string"},
           "description": "The plot's name, with or without `.svg`: `accuracy` or `tokens`"})
}

fn eval_paths() -> Value {
    let not_found = || error("Not found — or not yours");
    let unavailable = || error("This server runs no evaluations (no directory for their results)");
    json!({
        "/api/v1/evals": {
            "get": op("Your evaluation runs, newest first", vec![],
                responses(json!({"200": ok::<EvalList>("Runs, with their progress"), "503": unavailable()}))),
            "post": with_body(op(
                "Start an evaluation run against the server's model: a shipped set or an uploaded one (JSONL), under the modes asked; each deepsolve problem is a turn of yours", vec![],
                responses(json!({
                    "201": ok::<EvalView>("Started: follow events_url"),
                    "400": error("Not JSON"),
                    "413": error("The uploaded set (or the body) is over the cap"),
                    "415": error("Not JSON"),
                    "422": error("Invalid request: no set, an unknown shipped set, a set that does not parse (named), bad modes, limit, sample or concurrency, too many problems, an unknown tool, unknown fields"),
                    "503": error("This server runs no evaluations, or runs as many as it may at once; retry when one ends"),
                }))), request_body::<CreateEval>()),
        },
        "/api/v1/evals/{id}": {
            "get": op("A run: its progress, the report and plots of the results so far, and every result (with its question and turn)", vec![id_param()],
                responses(json!({"200": ok::<EvalDetail>("The run"), "404": not_found(), "503": unavailable()}))),
            "delete": op("Cancel a running run (finished results stay), or delete one that is over with its files (its turns stay)", vec![id_param()],
                responses(json!({
                    "202": ok::<EvalCancelAccepted>("Cancelling: the run ends cancelled"),
                    "204": {"description": "Deleted"},
                    "404": not_found(),
                    "503": unavailable(),
                }))),
        },
        "/api/v1/evals/{id}/events": {"get": op(
            "The run's progress over SSE, until it is over", vec![id_param()],
            responses(json!({
                "200": {"description": "`progress` frames (after each finished problem; quick successions may be merged), then one `finished` frame, and the stream ends; a run that is over sends only `finished`",
                        "content": sse_body("SSE frames `event: progress` or `event: finished` + `data: <EvalView as JSON>`", reference::<EvalView>())},
                "404": not_found(),
                "503": unavailable(),
            })))},
        "/api/v1/evals/{id}/plots/{file}": {"get": op(
            "A plot of the run's report so far, as an image", vec![id_param(), file_param()],
            responses(json!({
                "200": {"description": "The plot",
                        "content": {"image/svg+xml": {"schema": {"type": "string", "contentMediaType": "image/svg+xml"}}}},
                "404": error("No such run (or not yours), no such plot, or no results yet"),
                "503": unavailable(),
            })))},
    })
}

/// The schemas: the protocol's, and the server's own API types (evaluations) with what they
/// embed.
fn schemas() -> Map<String, Value> {
    components_with(|g: &mut SchemaGenerator| {
        add::<CreateEval>(g);
        add::<EvalView>(g);
        add::<EvalList>(g);
        add::<EvalDetail>(g);
        add::<EvalCancelAccepted>(g);
    })
}

fn auth_paths() -> Value {
    let cookie_set = "Set-Cookie: deepsolve_session=…; HttpOnly; SameSite=Strict; Path=/; Max-Age=… (Secure over https)";
    json!({
        "/api/v1/auth/session": {"get": open_op("How this server authenticates, and who the caller is (user null: not signed in)", json!({
            "200": ok::<AuthSessionView>("The caller's session"),
        }))},
        "/api/v1/auth/login": {"post": with_body(open_op("Sign a browser in with a token: a server-side session in an HttpOnly cookie", json!({
            "200": {"description": cookie_set, "content": json_body::<AuthSessionView>()},
            "401": error("Unknown or revoked token"),
            "403": error("Cross-origin request refused (Origin is not this server's)"),
            "409": error("Single-user mode: nobody signs in"),
            "422": error("Not a login request"),
        })), request_body::<LoginRequest>())},
        "/api/v1/auth/logout": {"post": open_op("End the browser session: deleted on the server, the cookie cleared", json!({
            "204": {"description": "Signed out"},
            "403": error("Cross-origin request refused (Origin is not this server's)"),
        }))},
    })
}

fn facade_paths() -> Value {
    let chunk = json!({"oneOf": [reference::<ChatCompletionChunk>(), reference::<StreamError>()]});
    let mut content = json_body::<ChatCompletion>();
    if let (Value::Object(content), Value::Object(sse)) = (
        &mut content,
        sse_body(
            "SSE `data:` lines of chat.completion.chunk JSON, ending with `data: [DONE]`",
            chunk,
        ),
    ) {
        content.extend(sse);
    }
    json!({
        "/v1/chat/completions": {"post": with_body(op(
            "OpenAI-compatible: model \"deepsolve\" runs a solve turn; streaming sends progress as reasoning_content and the answer as content",
            vec![],
            responses(json!({
                "200": {"description": "chat.completion, or with stream: true an SSE stream of chat.completion.chunk", "content": content},
                "404": error("Unknown model"),
                "413": error("An image over its cap (named)"),
                "422": error("Bad conversation, or too many images; invalid_image for an image_url that is not a data: URL of a usable image; cannot_see_images"),
                "502": error("The turn ended without an answer"),
                "503": error("Too many running turns on this server; retry shortly"),
            }))), request_body::<ChatRequest>())},
        "/v1/models": {"get": op("OpenAI-compatible model list", vec![],
            responses(json!({"200": ok::<ModelList>("Models")})))},
    })
}

fn open_paths() -> Value {
    json!({
        "/healthz": {"get": open_op("Liveness and database reachability", json!({
            "200": ok::<Health>("ok"),
            "503": error("Database unreachable"),
        }))},
        "/metrics": {"get": op(
            "Prometheus metrics: with users, for the scrape token (server.metrics_token_env) or an admin; open in single-user mode",
            vec![], responses(json!({
            "200": {"description": "Prometheus text exposition", "content": {"text/plain": {"schema": {"type": "string"}}}},
            "403": error("Neither the scrape token nor an admin"),
        })))},
        "/openapi.json": {"get": open_op("This document", json!({
            "200": {"description": "OpenAPI 3.1", "content": {"application/json": {"schema": {"type": "object"}}}},
        }))},
    })
}

/// The document.
pub fn document() -> Value {
    let mut paths = Map::new();
    for group in [
        turn_paths(),
        session_paths(),
        kb_paths(),
        eval_paths(),
        auth_paths(),
        facade_paths(),
        open_paths(),
    ] {
        if let Value::Object(group) = group {
            paths.extend(group);
        }
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "deepsolve",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "A rigorous step-by-step problem solver. Errors are {\"error\": {\"code\", \"message\"}} (see ErrorBody); another user's data answers 404.",
        },
        "security": [{"bearer": []}, {"session": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "deepsolve users token NAME; not needed in single-user (loopback) mode"},
                "session": {"type": "apiKey", "in": "cookie", "name": "deepsolve_session", "description": "The web UI's browser session (POST /api/v1/auth/login); a change (POST, PUT, PATCH, DELETE) with it needs this server's own Origin"},
            },
            "schemas": schemas(),
        },
    })
}

pub async fn openapi_json() -> Json<Value> {
    Json(document())
}
