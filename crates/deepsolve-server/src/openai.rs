//! The OpenAI-compatible facade: `POST /v1/chat/completions` with
//! `model: "deepsolve"` runs a solve turn over the conversation it is given, so any OpenAI
//! client or chat UI can use the solver. Streaming sends the progress (the plan, each finished
//! step, tool calls, replans) as `reasoning_content` deltas and the answer as `content`
//! deltas, then `[DONE]`. The turn is an ordinary turn: stored, visible in the API, and
//! cancelled when a streaming client goes away.
//!
//! A chat client shows only the answer's text, so everything the user needs is put in it: the
//! sources the answer cites (a `Sources` list), and the files the turn made (`Files`: a figure
//! as a Markdown image, any other file as a link), each an absolute, signed, expiring link a
//! browser can open without the caller's token ([`crate::links`]).

use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use deepsolve_core::solve::is_solve_tool;
use deepsolve_protocol::api::openai::{
    AssistantMessage, ChatChoice, ChatCompletion, ChatCompletionChunk, ChatMessage, ChatRequest,
    ChatUsage, ChunkChoice, ChunkDelta, ModelCard, ModelList, StreamError, StreamErrorDetail,
};
use deepsolve_protocol::api::{ApiErrorCode, CreateTurn, TurnAttachment};
use deepsolve_protocol::{EventKind, PriorTurn, Source, Usage};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiJson;
use crate::links::{LinkSigner, link_origin};
use crate::routes::{raster_image_type, safe_file_name};
use crate::runner::start_turn_with;
use crate::sse::tail;
use crate::state::AppState;

/// The one model this facade serves.
pub const MODEL_ID: &str = "deepsolve";
/// Answer text per `content` delta.
const CONTENT_CHUNK: usize = 200;

pub async fn list_models(_caller: Caller) -> Json<ModelList> {
    Json(ModelList {
        object: "list".into(),
        data: vec![ModelCard {
            id: MODEL_ID.into(),
            object: "model".into(),
            created: 0,
            owned_by: "deepsolve".into(),
        }],
    })
}

pub async fn chat_completions(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    headers: HeaderMap,
    ApiJson(req): ApiJson<ChatRequest>,
) -> ApiResult<Response> {
    if req.model != MODEL_ID {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            ApiErrorCode::ModelNotFound,
            format!("model '{}' is not served here; use '{MODEL_ID}'", req.model),
        ));
    }
    let Conversation {
        problem,
        history,
        images,
    } = conversation(&req.messages)?;
    let create = CreateTurn {
        problem,
        knowledge_bases: req.knowledge_bases.clone(),
        images,
        ..CreateTurn::default()
    };
    let created = start_turn_with(&state, &caller, create, Some(history)).await?;
    let events = tail(
        state.store.clone(),
        created.turn_id.clone(),
        None,
        state.config.sse_poll,
    );
    let id = format!("chatcmpl-{}", created.turn_id);
    let files = TurnFiles {
        state: state.clone(),
        turn_id: created.turn_id.clone(),
        user_id: caller.user_id.clone(),
        origin: link_origin(state.config.public_url.as_ref(), &headers),
    };
    if req.stream {
        let include_usage = req.stream_options.is_some_and(|o| o.include_usage);
        Ok(stream(state, id, files, events, include_usage))
    } else {
        complete(id, files, events).await
    }
}

/// Where a facade turn's files are, and where links to them point.
struct TurnFiles {
    state: Arc<AppState>,
    turn_id: String,
    user_id: String,
    /// `None`: no trusted origin (no `server.public_url`, reached by a non-loopback name):
    /// the files are listed by name only.
    origin: Option<String>,
}

impl TurnFiles {
    /// The `Files` block that follows the answer, once the turn has ended (every file it made
    /// is in the store by then); `None` when it made none. A store error leaves the block
    /// out: the answer matters more than its attachments.
    async fn block(&self) -> Option<String> {
        let listed = match self.state.store.turn_artifacts(&self.turn_id).await {
            Ok(artifacts) => artifacts,
            Err(e) => {
                tracing::error!(turn_id = %self.turn_id, error = %e, "facade: files not listed");
                return None;
            }
        };
        let mut files = Vec::with_capacity(listed.len());
        for meta in listed {
            let image = self.is_raster_image(&meta).await;
            files.push((meta, image));
        }
        let signer = self.origin.clone().map(|origin| LinkSigner {
            key: &self.state.config.link_key,
            origin,
            ttl: self.state.config.artifact_link_ttl,
        });
        files_block(&files, signer.as_ref(), &self.user_id)
    }

    /// Whether the signed link will show this file as an image: it claims an image type and
    /// its bytes are one (a page claiming `image/png` would be a broken image in the chat).
    async fn is_raster_image(&self, meta: &deepsolve_store::ArtifactMeta) -> bool {
        if !meta.mime.trim().to_ascii_lowercase().starts_with("image/") {
            return false;
        }
        match self.state.store.artifact(&meta.id, &self.user_id).await {
            Ok(Some((_, bytes))) => raster_image_type(&bytes).is_some(),
            _ => false,
        }
    }
}

/// `\n\nFiles\n` and one line per file: `![name](url)` for an image, `[name](url)` for the
/// rest, or `- name` without a signer. Names are reduced to safe characters, so a file name
/// cannot write Markdown of its own.
fn files_block(
    files: &[(deepsolve_store::ArtifactMeta, bool)],
    signer: Option<&LinkSigner<'_>>,
    user_id: &str,
) -> Option<String> {
    if files.is_empty() {
        return None;
    }
    let mut text = String::from("\n\nFiles\n");
    for (artifact, image) in files {
        let name = safe_file_name(&artifact.name);
        let line = match signer {
            Some(signer) => {
                let url = signer.artifact_url(&artifact.id, user_id);
                format!("{}[{name}]({url})", if *image { "!" } else { "" })
            }
            None => format!("- {name}"),
        };
        text.push_str(&line);
        text.push('\n');
    }
    Some(text)
}

/// What the facade makes of a conversation.
#[derive(Debug)]
struct Conversation {
    problem: String,
    history: Vec<PriorTurn>,
    /// The images of the user messages, in order: the turn's images (a follow-up about a
    /// figure sent earlier still sees it).
    images: Vec<TurnAttachment>,
}

/// The last user message is the problem; earlier user → assistant pairs are the history; the
/// users' images are the turn's.
fn conversation(messages: &[ChatMessage]) -> ApiResult<Conversation> {
    let mut history = Vec::new();
    let mut images = Vec::new();
    let mut pending_user: Option<String> = None;
    for m in messages {
        let text = text_of(&m.content)?;
        match m.role.as_str() {
            // Two user messages in a row are one question.
            "user" => {
                images_of(&m.content, &mut images)?;
                pending_user = Some(match pending_user.take() {
                    Some(earlier) => format!("{earlier}\n\n{text}"),
                    None => text,
                });
            }
            "assistant" => {
                if let Some(problem) = pending_user.take() {
                    history.push(PriorTurn {
                        problem,
                        answer: text,
                        solve: None,
                    });
                }
            }
            // The engine writes its own system prompt; client system and tool messages have
            // no place in a solve.
            "system" | "developer" | "tool" => {}
            other => {
                return Err(ApiError::invalid(
                    ApiErrorCode::InvalidRequest,
                    format!("unknown message role '{other}'"),
                ));
            }
        }
    }
    match pending_user {
        Some(problem) if !problem.trim().is_empty() => Ok(Conversation {
            problem,
            history,
            images,
        }),
        _ => Err(ApiError::invalid(
            ApiErrorCode::InvalidRequest,
            "the conversation must end with a non-empty user message (the problem)",
        )),
    }
}

/// A message's text: a string, or the text parts of a content array (its `image_url` parts
/// are read by [`images_of`]).
fn text_of(content: &Value) -> ApiResult<String> {
    match content {
        Value::String(s) => Ok(s.clone()),
        Value::Null => Ok(String::new()),
        Value::Array(parts) => {
            let mut out = Vec::new();
            for part in parts {
                match part.get("type").and_then(Value::as_str) {
                    Some("text") => out.push(
                        part.get("text")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                    ),
                    Some("image_url") => {}
                    other => {
                        return Err(ApiError::invalid(
                            ApiErrorCode::Unsupported,
                            format!(
                                "content parts of type '{}' are not supported yet",
                                other.unwrap_or("?")
                            ),
                        ));
                    }
                }
            }
            Ok(out.join("\n"))
        }
        _ => Err(ApiError::invalid(
            ApiErrorCode::InvalidRequest,
            "message content must be a string or an array of parts",
        )),
    }
}

/// The `image_url` parts of a user message's content, appended to `images` as the turn's
/// images (named `image_<n>`). Only `data:` URLs: the server never fetches a URL a client
/// names (it could point anywhere, the server's own network included).
fn images_of(content: &Value, images: &mut Vec<TurnAttachment>) -> ApiResult<()> {
    let Value::Array(parts) = content else {
        return Ok(());
    };
    let image_urls = parts
        .iter()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("image_url"));
    for part in image_urls {
        let n = images.len() + 1;
        // `{"image_url": {"url": …}}`, or the URL as a plain string (older clients).
        let url = part
            .get("image_url")
            .and_then(|u| u.get("url").or(Some(u)))
            .and_then(Value::as_str)
            .unwrap_or_default();
        images.push(TurnAttachment {
            name: format!("image_{n}"),
            data_base64: data_url_payload(url, n)?.to_string(),
        });
    }
    Ok(())
}

/// The base64 payload of a `data:<type>;base64,<payload>` URL; anything else is refused. The
/// declared type is not trusted: the image's type is read from its bytes.
fn data_url_payload(url: &str, n: usize) -> ApiResult<&str> {
    let refuse = |why: &str| {
        ApiError::invalid(
            ApiErrorCode::InvalidImage,
            format!(
                "image_{n}: {why}: send the image inline as a data: URL (data:image/png;base64,…)"
            ),
        )
    };
    let Some(rest) = url.strip_prefix("data:") else {
        return Err(refuse(&match url.split_once(':') {
            Some((scheme, _)) => format!("this server does not fetch image URLs ({scheme}:…)"),
            None => "the image_url is not a URL".to_string(),
        }));
    };
    match rest.split_once(";base64,") {
        Some((_, payload)) => Ok(payload),
        None => Err(refuse("the data: URL is not base64")),
    }
}

/// What the facade makes of one turn event.
enum Piece {
    Progress(String),
    Answer(String),
    End { usage: Usage, error: Option<String> },
    Nothing,
}

fn piece(kind: &EventKind, planned: &mut bool) -> Piece {
    match kind {
        EventKind::Plan {
            analysis, steps, ..
        } if !*planned => {
            *planned = true;
            let mut text = format!("Plan: {analysis}\n");
            for s in steps {
                text.push_str(&format!("  {} {}\n", s.id, s.goal));
            }
            Piece::Progress(text)
        }
        EventKind::StepFinished { step_id, summary } => {
            Piece::Progress(format!("✓ {step_id} — {summary}\n"))
        }
        EventKind::Replanned { reason } => {
            *planned = false;
            Piece::Progress(format!("Replanning: {reason}\n"))
        }
        EventKind::ToolCall { name, args, .. } if !is_solve_tool(name) => {
            Piece::Progress(format!("→ {name} {}\n", json_preview(args, 160)))
        }
        EventKind::ToolResult {
            name,
            ok,
            duration_ms,
            ..
        } if !is_solve_tool(name) => Piece::Progress(format!(
            "  {} {name} ({duration_ms} ms)\n",
            if *ok { "done:" } else { "failed:" }
        )),
        EventKind::Answer { text, sources, .. } => Piece::Answer(with_sources(text, sources)),
        EventKind::TurnFinished { usage, .. } => Piece::End {
            usage: *usage,
            error: None,
        },
        EventKind::Error { message, .. } => Piece::End {
            usage: Usage::default(),
            error: Some(message.clone()),
        },
        _ => Piece::Nothing,
    }
}

/// The answer with a `Sources` list of what it cites (`[1] lecture.pdf, p. 12 · 3.2
/// Limits`): a chat client shows the answer's text only, so the citations must be in it.
fn with_sources(answer: &str, sources: &[Source]) -> String {
    if sources.is_empty() {
        return answer.to_string();
    }
    let mut text = format!("{}\n\nSources\n", answer.trim_end());
    for source in sources {
        text.push_str(&source.list_line());
        text.push('\n');
    }
    text
}

/// The first `max_chars` characters of `value` as JSON, without writing out the rest (tool
/// arguments can be megabytes).
fn json_preview(value: &Value, max_chars: usize) -> String {
    /// Takes bytes until it has enough, then refuses more, which stops the encoder.
    struct Head(Vec<u8>, usize);
    impl std::io::Write for Head {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let room = self.1 - self.0.len();
            if room == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            let n = buf.len().min(room);
            self.0.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    // A character is at most 4 bytes; stopping early is the point, so the error is expected.
    let mut head = Head(Vec::new(), max_chars * 4);
    let _ = serde_json::to_writer(&mut head, value);
    String::from_utf8_lossy(&head.0)
        .chars()
        .take(max_chars)
        .collect()
}

fn created_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Non-streaming: wait for the turn, return the answer (and the progress as
/// `reasoning_content`).
async fn complete(
    id: String,
    files: TurnFiles,
    mut events: mpsc::Receiver<Arc<deepsolve_store::StoredEvent>>,
) -> ApiResult<Response> {
    let mut planned = false;
    let mut progress = String::new();
    let mut answer: Option<String> = None;
    let mut usage = Usage::default();
    let mut error: Option<String> = None;
    while let Some(stored) = events.recv().await {
        let Ok(event) = stored.decode() else { continue };
        match piece(&event.kind, &mut planned) {
            Piece::Progress(p) => progress.push_str(&p),
            Piece::Answer(a) => answer = Some(a),
            Piece::End { usage: u, error: e } => {
                usage = u;
                error = error.or(e);
            }
            Piece::Nothing => {}
        }
    }
    let Some(mut answer) = answer else {
        return Err(ApiError::new(
            StatusCode::BAD_GATEWAY,
            ApiErrorCode::NoAnswer,
            error.unwrap_or_else(|| "the turn ended without an answer".into()),
        ));
    };
    if let Some(block) = files.block().await {
        answer.push_str(&block);
    }
    let body = ChatCompletion {
        id,
        object: "chat.completion".into(),
        created: created_now(),
        model: MODEL_ID.into(),
        choices: vec![ChatChoice {
            index: 0,
            message: AssistantMessage {
                role: "assistant".into(),
                content: answer,
                reasoning_content: progress,
            },
            finish_reason: "stop".into(),
        }],
        usage: ChatUsage::from(usage),
    };
    Ok(Json(body).into_response())
}

/// Streaming: chunks as the turn goes; a client that disconnects cancels the turn.
fn stream(
    state: Arc<AppState>,
    id: String,
    files: TurnFiles,
    mut events: mpsc::Receiver<Arc<deepsolve_store::StoredEvent>>,
    include_usage: bool,
) -> Response {
    let (tx, rx) = mpsc::channel::<Event>(64);
    tokio::spawn(async move {
        let chunker = Chunker {
            id,
            created: created_now(),
        };
        let gone = async {
            let opening = ChunkDelta {
                role: Some("assistant".into()),
                content: Some(String::new()),
                ..ChunkDelta::default()
            };
            if tx.send(chunker.delta(opening)).await.is_err() {
                return true;
            }
            let mut planned = false;
            while let Some(stored) = events.recv().await {
                let Ok(event) = stored.decode() else { continue };
                let out = match piece(&event.kind, &mut planned) {
                    Piece::Progress(p) => vec![chunker.delta(ChunkDelta {
                        reasoning_content: Some(p),
                        ..ChunkDelta::default()
                    })],
                    Piece::Answer(a) => content_chunks(&a)
                        .into_iter()
                        .map(|c| {
                            chunker.delta(ChunkDelta {
                                content: Some(c),
                                ..ChunkDelta::default()
                            })
                        })
                        .collect(),
                    Piece::End { usage, error } => {
                        let mut out = Vec::new();
                        if error.is_none()
                            && let Some(block) = files.block().await
                        {
                            out.push(chunker.delta(ChunkDelta {
                                content: Some(block),
                                ..ChunkDelta::default()
                            }));
                        }
                        out.extend(chunker.end(&usage, error, include_usage));
                        out
                    }
                    Piece::Nothing => Vec::new(),
                };
                for chunk in out {
                    if tx.send(chunk).await.is_err() {
                        return true;
                    }
                }
            }
            tx.send(Event::default().data("[DONE]")).await.is_err()
        }
        .await;
        if gone {
            // The chat UI's stop button: nobody wants this answer any more.
            state.cancel_turn(&files.turn_id);
        }
    });
    let body = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Sse::new(body)
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn content_chunks(answer: &str) -> Vec<String> {
    let chars: Vec<char> = answer.chars().collect();
    chars
        .chunks(CONTENT_CHUNK)
        .map(|c| c.iter().collect())
        .collect()
}

struct Chunker {
    id: String,
    created: u64,
}

impl Chunker {
    fn chunk(&self, choices: Vec<ChunkChoice>, usage: Option<ChatUsage>) -> Event {
        data_event(&ChatCompletionChunk {
            id: self.id.clone(),
            object: "chat.completion.chunk".into(),
            created: self.created,
            model: MODEL_ID.into(),
            choices,
            usage,
        })
    }

    fn delta(&self, delta: ChunkDelta) -> Event {
        let choice = ChunkChoice {
            index: 0,
            delta,
            finish_reason: None,
        };
        self.chunk(vec![choice], None)
    }

    /// The closing chunks: a finish reason, then (when asked) a usage-only chunk, as OpenAI
    /// sends them. A turn that failed ends with an error object.
    fn end(&self, usage: &Usage, error: Option<String>, include_usage: bool) -> Vec<Event> {
        if let Some(message) = error {
            return vec![data_event(&StreamError {
                error: StreamErrorDetail {
                    message,
                    kind: "server_error".into(),
                    code: "turn_failed".into(),
                },
            })];
        }
        let finish = ChunkChoice {
            index: 0,
            delta: ChunkDelta::default(),
            finish_reason: Some("stop".into()),
        };
        let mut out = vec![self.chunk(vec![finish], None)];
        if include_usage {
            out.push(self.chunk(Vec::new(), Some(ChatUsage::from(*usage))));
        }
        out
    }
}

/// One SSE `data:` line holding `body` as JSON.
fn data_event(body: &impl serde::Serialize) -> Event {
    // Encoding these plain structs cannot fail (string keys, no maps of other keys).
    let json = serde_json::to_string(body).unwrap_or_default();
    Event::default().data(json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(role: &str, content: Value) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content,
        }
    }

    #[test]
    fn the_conversation_becomes_history_and_a_problem() {
        let Conversation {
            problem,
            history,
            images,
        } = conversation(&[
            msg("system", json!("be nice")),
            msg("user", json!("q1")),
            msg("assistant", json!("a1")),
            msg("user", json!([{"type": "text", "text": "q2"}])),
        ])
        .expect("ok");
        assert!(images.is_empty());
        assert_eq!(problem, "q2");
        assert_eq!(history.len(), 1);
        assert_eq!(
            (history[0].problem.as_str(), history[0].answer.as_str()),
            ("q1", "a1")
        );
        assert!(conversation(&[msg("user", json!("q")), msg("assistant", json!("a"))]).is_err());
        assert!(conversation(&[msg("wizard", json!("q"))]).is_err());
        let err = conversation(&[msg("user", json!([{"type": "input_audio"}]))]).err();
        assert_eq!(err.map(|e| e.code), Some(ApiErrorCode::Unsupported));
    }

    #[test]
    fn images_come_only_as_data_urls_from_every_user_message() {
        let image = |url: &str| json!({"type": "image_url", "image_url": {"url": url}});
        let seen = conversation(&[
            msg("user", json!([image("data:image/png;base64,AAAA"), {"type": "text", "text": "q1"}])),
            msg("assistant", json!("a1")),
            msg("user", json!([{"type": "text", "text": "and angle B?"}, {"type": "image_url", "image_url": "data:image/jpeg;base64,BBBB"}])),
        ])
        .expect("ok");
        assert_eq!(seen.problem, "and angle B?");
        let images: Vec<(&str, &str)> = seen
            .images
            .iter()
            .map(|i| (i.name.as_str(), i.data_base64.as_str()))
            .collect();
        assert_eq!(images, [("image_1", "AAAA"), ("image_2", "BBBB")]);
        for (url, why) in [
            (
                "https://example.com/a.png",
                "does not fetch image URLs (https:…)",
            ),
            ("file:///etc/passwd", "does not fetch image URLs (file:…)"),
            ("data:image/png,rawbytes", "not base64"),
            ("", "not a URL"),
        ] {
            let err = conversation(&[msg(
                "user",
                json!([image(url), {"type": "text", "text": "q"}]),
            )])
            .expect_err(url);
            assert_eq!(err.code, ApiErrorCode::InvalidImage);
            assert!(
                err.message.contains(why) && err.message.starts_with("image_1: "),
                "{}",
                err.message
            );
        }
    }

    #[test]
    fn long_answers_are_split_on_char_boundaries() {
        let answer = "é".repeat(450);
        let chunks = content_chunks(&answer);
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks.concat(), answer);
    }
}
