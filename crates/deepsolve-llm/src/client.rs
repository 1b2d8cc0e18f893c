//! [`OpenAiClient`]: one endpoint, one model, streaming chat completions with retries.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use deepsolve_core::{
    ChatModel, ChatRequest, Completion, DeltaSink, FinishReason, Honours, Message, ModelError,
    StreamDelta, ToolChoice, ToolSpec,
};
use futures::StreamExt;
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use crate::accumulate::{ReplyTooLarge, StreamAccumulator};
use crate::classify::{
    Failure, Retry, RetryKind, classify_status, classify_stream_error, rejected_capability,
};
use crate::config::{ClientConfig, ClientError, normalize_base_url};
use crate::probe::{self, Capability, Check, Finding, Outcome, ProbeSpec, Verdict, WindowSource};
use crate::retry::{backoff_delay, parse_retry_after, random_jitter};
use crate::sse::{MAX_EVENT_BYTES, MAX_STREAM_BYTES, SseError, SseEvent, SseParser};
use crate::verdicts;
use crate::wire::{self, ChatChunk, ProviderError, truncate_message};

/// Cap on an HTTP error body we read to explain a failure.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;
/// Cap on a `/models` listing.
const MAX_MODELS_BYTES: usize = 8 * 1024 * 1024;
/// The tool offered by [`OpenAiClient::probe_native_tools`].
const PROBE_TOOL: &str = "deepsolve_probe";
/// Cap on a context-window lookup's body (`/props`, `/api/show`).
const MAX_LOOKUP_BYTES: usize = 1024 * 1024;

/// Where live deltas go inside this module (the same as [`DeltaSink`], without the reference).
type Sink<'a> = dyn FnMut(StreamDelta) + Send + 'a;

/// A streaming chat client for one OpenAI-compatible endpoint and model.
///
/// It owns one `reqwest::Client` (connection pool), built without proxy support so the API key
/// never travels through a proxy picked up from the environment.
#[derive(Debug)]
pub struct OpenAiClient {
    config: ClientConfig,
    endpoint: String,
    http: reqwest::Client,
    /// The probe's verdict on this endpoint and model, and the file it is kept in.
    verdict: Mutex<Option<Verdict>>,
    verdict_file: Mutex<Option<PathBuf>>,
}

/// Whether the event loop should keep reading.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    Done,
}

/// How long a connection to the model server stays pooled without a request.
const POOL_IDLE: Duration = Duration::from_secs(15);

impl OpenAiClient {
    /// Validates `config` (the base URL must be http or https) and builds the HTTP client.
    pub fn new(mut config: ClientConfig) -> Result<Self, ClientError> {
        config.base_url = normalize_base_url(&config.base_url)?;
        config.max_attempts = config.max_attempts.max(1);
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            // reqwest's default, said here because the request is small writes (head, body)
            // whose reply we wait for: with Nagle on, each could wait for a delayed ACK.
            .tcp_nodelay(true)
            // Each idle connection keeps its buffers (tens of KiB): after a load of a thousand
            // turns they would hold the server's memory for reqwest's default 90 s. Under
            // load a connection is reused within milliseconds, so a short idle life costs
            // nothing; after it, the server's memory is returned (see the server's trimmer).
            .pool_idle_timeout(POOL_IDLE)
            .no_proxy()
            .build()
            .map_err(|e| ClientError::Http {
                message: e.to_string(),
            })?;
        let endpoint = wire::chat_completions_url(&config.base_url);
        Ok(OpenAiClient {
            config,
            endpoint,
            http,
            verdict: Mutex::new(None),
            verdict_file: Mutex::new(None),
        })
    }

    /// The configuration in use (base URL normalised, `max_attempts` at least 1).
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The model ids the endpoint offers (`GET {base}/models`, `data[].id`), for `doctor` and
    /// settings UIs. One attempt, bounded by `stream_idle_timeout`.
    pub async fn list_models(&self) -> Result<Vec<String>, ModelError> {
        let url = wire::models_url(&self.config.base_url);
        let request = self.authorize(self.http.get(url));
        let response = self.send(request).await.map_err(fail_once)?;
        let body = read_limited(response, MAX_MODELS_BYTES, self.config.stream_idle_timeout)
            .await
            .map_err(fail_once)?;
        let value: Value = serde_json::from_slice(&body).map_err(|e| ModelError::Protocol {
            message: format!("the model list is not JSON: {e}"),
        })?;
        let data =
            value
                .get("data")
                .and_then(Value::as_array)
                .ok_or_else(|| ModelError::Protocol {
                    message: "the model list has no `data` array".to_string(),
                })?;
        let ids = data.iter().filter_map(|m| m.get("id")?.as_str());
        Ok(ids.map(str::to_string).collect())
    }

    /// Asks the model to call one trivial tool, for `doctor` and `protocol: auto`: `Ok(true)`
    /// when a tool call comes back, `Ok(false)` when it answers in text or the provider says
    /// tools are unsupported; other failures are returned as they are. One attempt only, so a
    /// dead endpoint is reported promptly instead of after the full retry schedule.
    pub async fn probe_native_tools(&self) -> Result<bool, ModelError> {
        let request = probe_request();
        match self.complete_with_retries(&request, &mut |_| {}, 1).await {
            Ok(completion) => Ok(!completion.tool_calls.is_empty()),
            Err(ModelError::ToolsUnsupported { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Checks that the endpoint honours stop sequences, for `doctor`: one request without
    /// tools asks the model to echo `before <tool_response> after`, sent with
    /// `stop: ["<tool_response>"]`. `Ok(true)` when the reply (its visible text; reasoning is
    /// not judged) holds the text before the marker and nothing from the marker on. `Ok(false)`
    /// when the marker or the text after it came back — the server ignored the stop — and also
    /// when the model did not echo the canary at all, since nothing was then shown. One
    /// attempt only, like [`OpenAiClient::probe_native_tools`].
    pub async fn probe_stop_sequences(&self) -> Result<bool, ModelError> {
        let check = probe::stop_check();
        let completion = self
            .complete_with_retries(&check.request, &mut |_| {}, 1)
            .await?;
        Ok(probe::stopped_before_marker(&completion.text))
    }

    /// The probe's verdict in use (`None`: nothing known, see [`OpenAiClient::probe`]).
    pub fn verdict(&self) -> Option<Verdict> {
        lock(&self.verdict).clone()
    }

    /// Use `verdict` from now on (`None`: nothing known).
    pub fn set_verdict(&self, verdict: Option<Verdict>) {
        *lock(&self.verdict) = verdict;
    }

    /// Keep verdicts in `file`: the one kept there for this endpoint and model is taken up
    /// (stale or not: a stale one already says no to what was contradicted) and returned; a
    /// new probe's verdict and any contradiction are written there.
    pub fn keep_verdicts_in(&self, file: impl Into<PathBuf>) -> Option<Verdict> {
        let file = file.into();
        let kept = verdicts::read(&file, &self.config.base_url, &self.config.model);
        *lock(&self.verdict_file) = Some(file);
        if kept.is_some() {
            self.set_verdict(kept.clone());
        }
        kept
    }

    /// Whether a probe is due: no verdict, or a stale one.
    pub fn needs_probe(&self) -> bool {
        lock(&self.verdict)
            .as_ref()
            .is_none_or(|v| v.stale.is_some())
    }

    /// Probe the endpoint (see [`crate::probe`]): six requests as a solve makes them, one
    /// attempt each, and the server's context window. The verdict is taken up and kept (see
    /// [`OpenAiClient::keep_verdicts_in`]). An endpoint that cannot be reached, or refuses the
    /// credentials, is an error: nothing is learnt, nothing kept.
    pub async fn probe(&self, spec: &ProbeSpec) -> Result<Verdict, ModelError> {
        let plan = self
            .run_check(&probe::plan_check(spec), spec.check_timeout)
            .await?;
        let (mut native, plans_unforced, plan_detail) = probe::judge_plan(&plan);
        let tools_refused = matches!(plan, Outcome::Refused(ModelError::ToolsUnsupported { .. }));
        let mut findings = Vec::new();
        let (required, named) = if tools_refused {
            let why = (
                String::from("no tools at all"),
                String::from("no tools at all"),
            );
            ((false, why.0), (false, why.1))
        } else {
            let required = self
                .run_check(&probe::required_check(spec), spec.check_timeout)
                .await?;
            // Not held even where the model would call: nothing more to learn.
            let against_text = if called(&required) {
                let check = probe::required_against_text_check(spec);
                Some(self.run_check(&check, spec.check_timeout).await?)
            } else {
                None
            };
            let named = self
                .run_check(&probe::named_check(spec), spec.check_timeout)
                .await?;
            native |= called(&required) || called(&named);
            (
                probe::judge_required(&required, against_text.as_ref()),
                probe::judge_named(&named),
            )
        };
        let native_detail = if native && !probe::judge_plan(&plan).0 {
            format!("calls come back when forced ({plan_detail})")
        } else {
            plan_detail
        };
        findings.push(finding(Capability::NativeTools, (native, native_detail)));
        findings.push(finding(Capability::ToolChoiceRequired, required));
        findings.push(finding(Capability::ToolChoiceNamed, named));
        let json = self
            .run_check(&probe::json_schema_check(), spec.check_timeout)
            .await?;
        findings.push(finding(
            Capability::JsonSchema,
            probe::judge_json_schema(&json),
        ));
        let stop = self
            .run_check(&probe::stop_check(), spec.check_timeout)
            .await?;
        findings.push(finding(Capability::StopSequences, probe::judge_stop(&stop)));
        let window = self.server_context_window().await;
        let verdict = Verdict {
            endpoint: self.config.base_url.clone(),
            model: self.config.model.clone(),
            findings,
            plans_unforced: if tools_refused { None } else { plans_unforced },
            context_window: window.map(|(n, _)| n),
            window_source: window.map(|(_, source)| source),
            taken_at: probe::now_secs(),
            stale: None,
        };
        self.set_verdict(Some(verdict.clone()));
        if let Some(file) = lock(&self.verdict_file).clone() {
            verdicts::write(&file, &verdict);
        }
        Ok(verdict)
    }

    /// One check: its outcome, or the error that makes the whole probe pointless (the
    /// endpoint unreachable, the credentials refused, the server failing).
    async fn run_check(&self, check: &Check, timeout: Duration) -> Result<Outcome, ModelError> {
        let mut ignore = |_| {};
        let call = self.complete_with_retries(&check.request, &mut ignore, 1);
        match tokio::time::timeout(timeout, call).await {
            Err(_) => Ok(Outcome::TimedOut(timeout)),
            // Reachable but slow (a small model prefilling the playbook): this check's answer.
            Ok(Err(ModelError::IdleTimeout { after })) => Ok(Outcome::TimedOut(after)),
            Ok(Ok(completion)) => Ok(Outcome::Replied(completion)),
            Ok(Err(e @ (ModelError::BadRequest { .. } | ModelError::ToolsUnsupported { .. }))) => {
                Ok(Outcome::Refused(e))
            }
            // A reply cut or unreadable is an answer about this check, not about the endpoint.
            Ok(Err(e @ (ModelError::Protocol { .. } | ModelError::StreamCut { .. }))) => {
                Ok(Outcome::Refused(e))
            }
            Ok(Err(e)) => Err(e),
        }
    }

    /// The context window the server says it has, and where it said so: vLLM's model list,
    /// llama.cpp's `/props`, Ollama's `/api/show`, asked in that order, each briefly.
    pub async fn server_context_window(&self) -> Option<(u64, WindowSource)> {
        let model = &self.config.model;
        let models = self
            .get_json(&wire::models_url(&self.config.base_url))
            .await;
        if let Some(n) = models
            .as_ref()
            .and_then(|list| probe::window_in_models(list, model))
        {
            return Some((n, WindowSource::VllmModels));
        }
        let root = probe::server_root(&self.config.base_url);
        let props = self.get_json(&format!("{root}/props")).await;
        if let Some(n) = props.as_ref().and_then(probe::window_in_props) {
            return Some((n, WindowSource::LlamaCppProps));
        }
        let show = self
            .post_json(&format!("{root}/api/show"), &json!({ "model": model }))
            .await;
        let n = show.as_ref().and_then(probe::window_in_ollama_show)?;
        Some((n, WindowSource::OllamaShow))
    }

    async fn get_json(&self, url: &str) -> Option<Value> {
        self.lookup(self.authorize(self.http.get(url))).await
    }

    async fn post_json(&self, url: &str, body: &Value) -> Option<Value> {
        self.lookup(self.authorize(self.http.post(url).json(body)))
            .await
    }

    /// A small JSON lookup: `None` on any failure, within a few seconds.
    async fn lookup(&self, request: reqwest::RequestBuilder) -> Option<Value> {
        let bound = probe::window_lookup_timeout();
        let fetch = async {
            let response = self.send_on_open_connection(request).await.ok()?;
            if !response.status().is_success() {
                return None;
            }
            let body = read_limited(response, MAX_LOOKUP_BYTES, bound).await.ok()?;
            serde_json::from_slice::<Value>(&body).ok()
        };
        tokio::time::timeout(bound, fetch).await.ok().flatten()
    }

    /// A refused request named `capability`: a verdict that said it was honoured no longer
    /// holds. From now on it says no, and the kept one is marked stale (probed again at the
    /// next chance).
    fn contradicted(&self, capability: Capability, why: &str) {
        let mut verdict = lock(&self.verdict);
        let Some(current) = verdict.as_mut() else {
            return;
        };
        if !current.contradict(capability, why) {
            return;
        }
        let marked = current.clone();
        drop(verdict);
        if let Some(file) = lock(&self.verdict_file).clone() {
            verdicts::write(&file, &marked);
        }
    }

    /// The retry loop: transient failures are retried with backoff, up to `max`
    /// attempts, but only while nothing visible has been streamed — each attempt turns a
    /// transient failure after visible output into `StreamCut` itself, so it never reaches this
    /// loop as retryable. Before each wait, `Retrying { attempt, max, .. }` announces the
    /// attempt about to be made (2 for the first retry).
    async fn complete_with_retries(
        &self,
        request: &ChatRequest,
        on_delta: &mut Sink<'_>,
        max: u32,
    ) -> Result<Completion, ModelError> {
        // Written once for every attempt; retries send the same bytes.
        let body = bytes::Bytes::from(wire::request_body_bytes(
            &self.config.model,
            request,
            &self.config.extra_body,
        ));
        let max = max.max(1);
        let mut attempt = 1;
        loop {
            let retry = match self.attempt(&body, request, on_delta).await {
                Ok(completion) => return Ok(completion),
                Err(Failure::Fatal(e)) => return Err(e),
                Err(Failure::Retry(retry)) => retry,
            };
            if attempt >= max {
                return retry.exhausted(attempt);
            }
            let delay = retry.retry_after.unwrap_or_else(|| {
                backoff_delay(self.config.backoff_base, attempt - 1, random_jitter())
            });
            on_delta(StreamDelta::Retrying {
                attempt: attempt + 1,
                max,
                reason: retry.reason,
                delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            });
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    /// One request and its stream.
    async fn attempt(
        &self,
        body: &bytes::Bytes,
        request: &ChatRequest,
        on_delta: &mut Sink<'_>,
    ) -> Result<Completion, Failure> {
        let post = self
            .http
            .post(&self.endpoint)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.clone());
        let http_request = self.authorize(post);
        let response = self.send(http_request).await?;
        let mut acc = StreamAccumulator::with_max_reply_bytes(self.config.max_reply_bytes);
        let mut visible = false;
        let read = if is_json(&response) {
            self.read_json(response, &mut acc, on_delta, &mut visible)
                .await
        } else {
            self.read_stream(response, &mut acc, on_delta, &mut visible)
                .await
        };
        match read {
            Err(Failure::Retry(retry)) if visible => Err(Failure::Fatal(ModelError::StreamCut {
                message: retry.reason,
            })),
            Err(failure) => Err(failure),
            Ok(()) => finish_attempt(acc, request, visible),
        }
    }

    /// Sends `request`, waiting at most `stream_idle_timeout` for the response headers, and
    /// turns a non-success status into a classified failure.
    async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, Failure> {
        let response = match self.send_on_open_connection(request).await {
            Err(SendError::Idle(idle)) => {
                let reason = format!("no response from the server within {}s", idle.as_secs());
                return Err(Failure::retry(RetryKind::Idle(idle), reason));
            }
            Err(SendError::Http(e)) => {
                return Err(Failure::retry(RetryKind::Transport, describe(&e)));
            }
            Ok(response) => response,
        };
        if response.status().is_success() {
            return Ok(response);
        }
        Err(self.status_failure(response).await)
    }

    /// One send, each try bounded by `stream_idle_timeout` until the response headers arrive.
    ///
    /// A request that met a pooled connection the server had already closed is sent once more
    /// at once, on a new connection, before anything counts as a failed attempt: llama.cpp's
    /// server closes its connection after every streamed reply without saying so, and the
    /// pool can hand that connection out before the close arrives. Left to the retry loop,
    /// that would be a `Retrying` notice and a backoff on a healthy server, and the end of a
    /// probe, whose checks have one attempt each.
    async fn send_on_open_connection(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, SendError> {
        let resend = request.try_clone();
        match (self.send_bounded(request).await, resend) {
            (Err(SendError::Http(e)), Some(resend)) if closed_before_reply(&e) => {
                self.send_bounded(resend).await
            }
            (sent, _) => sent,
        }
    }

    async fn send_bounded(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, SendError> {
        let idle = self.config.stream_idle_timeout;
        match tokio::time::timeout(idle, request.send()).await {
            Err(_) => Err(SendError::Idle(idle)),
            Ok(sent) => sent.map_err(SendError::Http),
        }
    }

    async fn status_failure(&self, response: reqwest::Response) -> Failure {
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, SystemTime::now()));
        let idle = self.config.stream_idle_timeout;
        let body = read_limited(response, MAX_ERROR_BODY_BYTES, idle)
            .await
            .unwrap_or_default();
        let body = self.redact(&String::from_utf8_lossy(&body));
        let error = ProviderError::from_body(&body);
        if let Some(capability) = rejected_capability(status, &error) {
            let why = truncate_message(&format!("HTTP {status}: {}", error.message));
            self.contradicted(capability, &why);
        }
        classify_status(status, &error, retry_after)
    }

    /// Reads the SSE stream into `acc`, forwarding visible deltas. Returns `Ok` when the reply
    /// is complete: `[DONE]`, or a `finish_reason` followed by end of stream, a broken
    /// connection or silence (servers that never send `[DONE]` or never close).
    async fn read_stream(
        &self,
        response: reqwest::Response,
        acc: &mut StreamAccumulator,
        on_delta: &mut Sink<'_>,
        visible: &mut bool,
    ) -> Result<(), Failure> {
        let idle = self.config.stream_idle_timeout;
        let mut stream = response.bytes_stream();
        let cap = self.config.max_reply_bytes;
        let event_limit = event_limit(cap);
        let mut parser = SseParser::with_limits(MAX_STREAM_BYTES, event_limit);
        loop {
            let next = match tokio::time::timeout(idle, stream.next()).await {
                Err(_) if acc.saw_finish() => return Ok(()),
                Err(_) => return Err(idle_failure(idle)),
                Ok(next) => next,
            };
            let bytes = match next {
                None => return self.end_of_stream(&mut parser, acc, on_delta, visible),
                Some(Err(_)) if acc.saw_finish() => return Ok(()),
                Some(Err(e)) => {
                    let reason = format!("the stream broke: {}", describe(&e));
                    return Err(Failure::retry(RetryKind::Transport, reason));
                }
                Some(Ok(bytes)) => bytes,
            };
            let events = parser.feed(&bytes).map_err(|e| match e {
                // One event that large carries more than the reply cap allows.
                SseError::EventTooLarge { .. } if event_limit < MAX_EVENT_BYTES => {
                    Failure::Fatal(ModelError::from(ReplyTooLarge { limit: cap }))
                }
                other => protocol(other.to_string()),
            })?;
            for event in events {
                if self.handle_event(event, acc, on_delta, visible)? == Flow::Done {
                    return Ok(());
                }
            }
        }
    }

    /// End of the byte stream: a last event without its blank line still counts if it parses
    /// (an unparseable one was cut mid-way); without `[DONE]` or a `finish_reason` the reply
    /// is incomplete.
    fn end_of_stream(
        &self,
        parser: &mut SseParser,
        acc: &mut StreamAccumulator,
        on_delta: &mut Sink<'_>,
        visible: &mut bool,
    ) -> Result<(), Failure> {
        if let Some(event) = parser.finish() {
            match self.handle_event(event, acc, on_delta, visible) {
                Ok(Flow::Done) => return Ok(()),
                Ok(Flow::Continue) | Err(Failure::Fatal(ModelError::Protocol { .. })) => {}
                Err(other) => return Err(other),
            }
        }
        if acc.saw_finish() {
            return Ok(());
        }
        let reason = "the stream ended before the reply was complete";
        Err(Failure::retry(RetryKind::Transport, reason))
    }

    /// A 200 with a JSON body: a server that ignored `stream: true`, or an error under a 200.
    /// The whole reply is read as one chunk (`message` is accepted in place of `delta`).
    async fn read_json(
        &self,
        response: reqwest::Response,
        acc: &mut StreamAccumulator,
        on_delta: &mut Sink<'_>,
        visible: &mut bool,
    ) -> Result<(), Failure> {
        let idle = self.config.stream_idle_timeout;
        let limit = json_body_limit(self.config.max_reply_bytes);
        // A body that large carries more than the reply cap allows.
        let too_large = || {
            Failure::Fatal(ModelError::from(ReplyTooLarge {
                limit: self.config.max_reply_bytes,
            }))
        };
        let body = read_limited_or(response, limit, idle, too_large).await?;
        let data = String::from_utf8(body)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        let event = SseEvent { event: None, data };
        self.handle_event(event, acc, on_delta, visible).map(|_| ())
    }

    /// One SSE event: `[DONE]`, an error payload, or a chunk to accumulate.
    fn handle_event(
        &self,
        event: SseEvent,
        acc: &mut StreamAccumulator,
        on_delta: &mut Sink<'_>,
        visible: &mut bool,
    ) -> Result<Flow, Failure> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(Flow::Done);
        }
        if event.event.as_deref() == Some("error") {
            return self.error_in_stream(data, acc);
        }
        let chunk: ChatChunk = serde_json::from_str(data).map_err(|e| {
            protocol(format!(
                "malformed stream chunk ({e}): {}",
                truncate_message(data)
            ))
        })?;
        if chunk.error.as_ref().is_some_and(|e| !e.is_null()) {
            return self.error_in_stream(data, acc);
        }
        // The chunk holds what it carries; the raw text is not needed any more.
        drop(event);
        // Past the cap the error ends the read, and with it the response: the connection is
        // dropped, not drained.
        let deltas = acc
            .apply(&chunk)
            .map_err(|e| Failure::Fatal(ModelError::from(e)))?;
        for delta in deltas {
            // A call's name is not output a retry would show twice.
            if !matches!(delta, StreamDelta::ToolCallStarted { .. }) {
                *visible = true;
            }
            on_delta(delta);
        }
        Ok(Flow::Continue)
    }

    /// An error inside the stream. A server error once a call has begun is that call cut
    /// off: llama.cpp's server answers a call cut by `max_tokens` with `{"error": {"code":
    /// 500, "message": "Invalid diff: now finding less tool calls!"}}` in place of
    /// `finish_reason: "length"` (it cannot read the cut call), and the same request is cut
    /// the same way again. The reply so far comes back cut by the output limit, for the
    /// loop's own handling of a cut call and the probe's reading of a call begun.
    fn error_in_stream(&self, data: &str, acc: &mut StreamAccumulator) -> Result<Flow, Failure> {
        let failure = self.stream_error(data);
        let server_error = matches!(
            &failure,
            Failure::Retry(Retry {
                kind: RetryKind::Server(_),
                ..
            })
        );
        if server_error && acc.has_calls() && !acc.saw_finish() {
            acc.cut_by_output_limit();
            return Ok(Flow::Done);
        }
        Err(failure)
    }

    fn stream_error(&self, data: &str) -> Failure {
        let data = self.redact(data);
        let error = match serde_json::from_str::<Value>(&data) {
            Ok(value) => ProviderError::from_value(&value),
            Err(_) => ProviderError::from_body(&data),
        };
        classify_stream_error(&error)
    }

    fn authorize(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.config.api_key {
            Some(key) => request.bearer_auth(key.expose_secret()),
            None => request,
        }
    }

    /// Removes the API key from provider text before it can reach an error message or a log.
    fn redact(&self, text: &str) -> String {
        match &self.config.api_key {
            Some(key) if !key.expose_secret().is_empty() => {
                text.replace(key.expose_secret(), "[redacted]")
            }
            _ => text.to_string(),
        }
    }
}

#[async_trait]
impl ChatModel for OpenAiClient {
    fn name(&self) -> &str {
        &self.config.model
    }

    /// Streams one completion with up to `max_attempts` attempts. Transport errors, 5xx, 429,
    /// idle timeouts, streams cut before their end and empty replies are retried with backoff
    /// (`Retry-After` honoured) while no text or reasoning has been passed to `on_delta`; after
    /// that a broken stream is `StreamCut`, for the loop to salvage.
    async fn complete(
        &self,
        request: &ChatRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<Completion, ModelError> {
        let max = self.config.max_attempts;
        self.complete_with_retries(request, on_delta, max).await
    }

    /// The probe's verdict in use (see [`OpenAiClient::probe`]); nothing known without one.
    fn honours(&self) -> Honours {
        lock(&self.verdict)
            .as_ref()
            .map(Verdict::honours)
            .unwrap_or_default()
    }
}

/// A verdict's lock; a panic elsewhere while it was held leaves a whole value behind.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn called(outcome: &Outcome) -> bool {
    matches!(outcome, Outcome::Replied(c) if !c.tool_calls.is_empty())
}

fn finding(capability: Capability, (honoured, detail): (bool, String)) -> Finding {
    Finding {
        capability,
        honoured,
        detail,
    }
}

/// Turns a finished stream into the attempt's result. An empty reply (no text, reasoning or
/// calls) is retried — unless output was already shown (only whitespace), or the model stopped
/// for `length`/`content_filter`, where the loop's own handling (bigger budget, nudge) is the
/// right response rather than the same request again.
fn finish_attempt(
    acc: StreamAccumulator,
    request: &ChatRequest,
    visible: bool,
) -> Result<Completion, Failure> {
    let deliberate_stop = matches!(
        acc.finish_reason(),
        Some(FinishReason::Length | FinishReason::ContentFilter)
    );
    let retry_empty = !acc.has_output() && !visible && !deliberate_stop;
    let completion = acc.finish(request);
    if retry_empty {
        let reason = "the model returned an empty reply";
        return Err(Failure::retry(
            RetryKind::Empty(Box::new(completion)),
            reason,
        ));
    }
    Ok(completion)
}

/// Reads a body of at most `cap` bytes, each read bounded by `idle`.
async fn read_limited(
    response: reqwest::Response,
    cap: usize,
    idle: Duration,
) -> Result<Vec<u8>, Failure> {
    let overflow = || protocol(format!("the response body exceeded {cap} bytes"));
    read_limited_or(response, cap, idle, overflow).await
}

/// [`read_limited`] with the failure a body over `cap` is.
async fn read_limited_or(
    response: reqwest::Response,
    cap: usize,
    idle: Duration,
    overflow: impl FnOnce() -> Failure,
) -> Result<Vec<u8>, Failure> {
    let mut stream = response.bytes_stream();
    let mut body = Vec::new();
    loop {
        let next = tokio::time::timeout(idle, stream.next())
            .await
            .map_err(|_| idle_failure(idle))?;
        let Some(chunk) = next else { return Ok(body) };
        let chunk = chunk.map_err(|e| Failure::retry(RetryKind::Transport, describe(&e)))?;
        if body.len().saturating_add(chunk.len()) > cap {
            return Err(overflow());
        }
        body.extend_from_slice(&chunk);
    }
}

/// The most one SSE event may take: like a whole JSON reply, and never more than the parser's
/// own cap on an event.
fn event_limit(max_reply_bytes: usize) -> usize {
    json_body_limit(max_reply_bytes).min(MAX_EVENT_BYTES)
}

/// The most a whole JSON reply may take: twice the reply cap (escapes such as `\n` or `\u4e00`
/// make the JSON text longer than what it carries) plus room for the envelope, and never more
/// than a stream may.
fn json_body_limit(max_reply_bytes: usize) -> usize {
    const ENVELOPE: usize = 1024 * 1024;
    max_reply_bytes
        .saturating_mul(2)
        .saturating_add(ENVELOPE)
        .min(MAX_STREAM_BYTES)
}

fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}

fn idle_failure(idle: Duration) -> Failure {
    let reason = format!("no data from the model for {}s", idle.as_secs());
    Failure::retry(RetryKind::Idle(idle), reason)
}

fn protocol(message: String) -> Failure {
    Failure::Fatal(ModelError::Protocol { message })
}

/// The error of a single-attempt call.
fn fail_once(failure: Failure) -> ModelError {
    match failure {
        Failure::Fatal(e) => e,
        Failure::Retry(retry) => retry.into_error(1),
    }
}

/// Why a send got no response headers.
enum SendError {
    Idle(Duration),
    Http(reqwest::Error),
}

/// The connection closed before any response came back: what a request sent on a pooled
/// connection the server had already closed meets (hyper's "connection closed before message
/// completed").
fn closed_before_reply(error: &reqwest::Error) -> bool {
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if cause
            .downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_incomplete_message)
        {
            return true;
        }
        source = cause.source();
    }
    false
}

/// A reqwest error with its causes ("connection refused" is usually two levels down).
fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    truncate_message(&text)
}

fn probe_request() -> ChatRequest {
    let tool = ToolSpec {
        name: PROBE_TOOL.to_string(),
        description: "Confirms that tool calling works. Call it when asked.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": { "ok": { "type": "boolean" } },
            "required": ["ok"],
            "additionalProperties": false
        }),
    };
    let prompt = format!(
        "This is an automated connectivity check. Call the tool `{PROBE_TOOL}` with \
         {{\"ok\": true}} now. Do not answer in text."
    );
    ChatRequest {
        messages: vec![Message::user(prompt)],
        tools: vec![tool],
        tool_choice: ToolChoice::Auto,
        max_tokens: 1024,
        temperature: 0.0,
        stop: Vec::new(),
        response_format: None,
    }
}
