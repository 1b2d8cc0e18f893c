//! [`LocalModel`]: a GGUF model loaded once (memory-mapped, shared) and served by worker
//! threads, one llama.cpp context (KV cache) each. A request waits its turn in a fair queue,
//! takes the idle context whose cached tokens share the longest prefix with its prompt (a
//! turn's next round finds its own), and decodes only what is new.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::token::LlamaToken;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};

use deepsolve_core::{
    ChatModel, ChatRequest, Completion, DeltaSink, FinishReason, Honours, ModelError, ToolCall,
    ToolChoice, Usage,
};

use crate::backend::backend;
use crate::config::LocalConfig;
use crate::error::LocalError;
use crate::gguf::{GgufInfo, available_memory, inspect};
use crate::reply::read_reply;
use crate::stream::ReplyStream;
use crate::template::ChatTemplate;
use crate::worker::{Job, SlotBook, WorkerEvent, spawn_worker};

/// What a reply must be, beyond the request: grammar-constrained decoding.
#[derive(Debug, Clone, PartialEq)]
pub enum Constraint {
    /// Free text (tool calls as the model writes them).
    Free,
    /// Text that opens no call (`tool_choice: none` with tools offered, which stay in the
    /// prompt so that its prefix is byte-stable): neither a `<tool_call>` block nor a JSON
    /// object whose first key starts with `name` (`TEXT_WITHOUT_CALLS`), and no JSON object
    /// first. Asked for its answer without it, the 1.5B model wrote its last
    /// `solve_finish_step` call again, or the spine's result to it.
    Text,
    /// Free text until a call opens (`{"name":`, bare, fenced or in a `<tool_call>` block);
    /// from there a call of one of these offered tools (all of them when empty), well
    /// formed, its block closed, and the reply ended (a lazy grammar, as llama.cpp's server
    /// constrains the calls of a free reply).
    TextOrCall { names: Vec<String> },
    /// A call of one of these offered tools (all of them when empty), nothing else: the
    /// reply is `{"name": …, "arguments": {…}}` matching the tool's parameters.
    ToolCall { names: Vec<String> },
    /// A JSON value matching this JSON Schema (a structured reply).
    JsonSchema(Value),
}

/// How one call went, beyond the completion: what the benchmark and the tests read.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CallStats {
    pub prompt_tokens: u32,
    /// Prompt tokens found in the context's KV cache (not decoded again).
    pub cached_tokens: u32,
    pub completion_tokens: u32,
    /// Waiting for a context.
    pub queued: Duration,
    /// Decoding the prompt's new tokens.
    pub prompt_time: Duration,
    /// From the start of the call (after queueing) to the first generated token.
    pub first_token: Duration,
    /// Generating every token after the first.
    pub generation_time: Duration,
}

/// A local GGUF model behind the `ChatModel` trait.
pub struct LocalModel {
    name: String,
    model: Arc<LlamaModel>,
    template: ChatTemplate,
    info: GgufInfo,
    context: u32,
    threads: u32,
    /// Fair (FIFO) admission: one permit per context.
    queue: Arc<Semaphore>,
    slots: Arc<SlotBook>,
    workers: Vec<std::sync::mpsc::Sender<Job>>,
    load_time: Duration,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("name", &self.name)
            .field("path", &self.info.path)
            .field("context", &self.context)
            .field("parallel", &self.workers.len())
            .finish_non_exhaustive()
    }
}

impl LocalModel {
    /// Check the file, load the model (memory-mapped) and start one worker per context.
    /// Blocking (seconds for a large model): call it from `spawn_blocking` in async code.
    pub fn load(config: &LocalConfig) -> Result<Self, LocalError> {
        let started = Instant::now();
        check_config(config)?;
        check_cpu()?;
        let info = inspect(&config.model)?;
        let path = info.path.clone();
        if let Some(trained) = info.trained_context
            && config.context > trained
        {
            return Err(LocalError::ContextTooLong {
                path,
                asked: config.context,
                trained,
            });
        }
        let Some(template_source) = info.chat_template.clone() else {
            return Err(LocalError::NoChatTemplate { path });
        };
        check_memory(&info, config)?;
        let backend = backend()?;
        let params = LlamaModelParams::default();
        let model =
            LlamaModel::load_from_file(backend, &path, &params).map_err(|e| LocalError::Load {
                path: path.clone(),
                message: e.to_string(),
            })?;
        let model = Arc::new(model);
        let template = ChatTemplate::new(
            &template_source,
            &special_piece(&model, model.vocab().bos()),
            &special_piece(&model, model.vocab().eos()),
        )
        .map_err(|error| LocalError::Template {
            path: path.clone(),
            error,
        })?;
        let parallel = config.parallel as usize;
        let slots = Arc::new(SlotBook::new(parallel));
        let mut workers = Vec::with_capacity(parallel);
        for index in 0..parallel {
            workers.push(spawn_worker(
                index,
                model.clone(),
                config.context,
                config.thread_count(),
                slots.clone(),
            )?);
        }
        Ok(LocalModel {
            name: config.display_name(),
            model,
            template,
            info,
            context: config.context,
            threads: config.thread_count(),
            queue: Arc::new(Semaphore::new(parallel)),
            slots,
            workers,
            load_time: started.elapsed(),
        })
    }

    /// [`LocalModel::load`] off the async threads.
    pub async fn load_async(config: LocalConfig) -> Result<Self, LocalError> {
        tokio::task::spawn_blocking(move || Self::load(&config))
            .await
            .map_err(|e| LocalError::Load {
                path: std::path::PathBuf::new(),
                message: format!("the loading task failed: {e}"),
            })?
    }

    /// What the file's header says (trained context, architecture, template).
    pub fn info(&self) -> &GgufInfo {
        &self.info
    }

    /// Tokens each context holds.
    pub fn context(&self) -> u32 {
        self.context
    }

    /// Threads each request decodes with.
    pub fn threads(&self) -> u32 {
        self.threads
    }

    /// Requests served at once (contexts).
    pub fn parallel(&self) -> usize {
        self.workers.len()
    }

    /// Bytes of KV cache all contexts hold when full, when the header says.
    pub fn kv_cache_bytes(&self) -> Option<u64> {
        (self.info.kv_bytes_per_token)
            .map(|per_token| per_token * u64::from(self.context) * self.workers.len() as u64)
    }

    /// How long [`LocalModel::load`] took.
    pub fn load_time(&self) -> Duration {
        self.load_time
    }

    /// The prompt `request` renders to (the model's own chat template).
    pub fn render(&self, request: &ChatRequest) -> Result<String, ModelError> {
        self.template
            .render(&request.messages, &request.tools)
            .map_err(|e| ModelError::BadRequest {
                status: 400,
                message: e.to_string(),
            })
    }

    /// Tokens of `text` as the model reads it (special tokens of the template included).
    pub fn tokenize(&self, text: &str) -> Vec<LlamaToken> {
        self.model
            .vocab()
            .tokenize(text.as_bytes(), self.model.vocab().should_add_bos(), true)
    }

    /// One call, with a [`Constraint`], and its [`CallStats`].
    pub async fn complete_constrained(
        &self,
        request: &ChatRequest,
        constraint: &Constraint,
        on_delta: DeltaSink<'_>,
    ) -> Result<(Completion, CallStats), ModelError> {
        let grammar = grammar_for(request, constraint)?;
        let prompt = self.tokenize(&self.render(request)?);
        self.check_room(prompt.len())?;
        let queued_at = Instant::now();
        let permit = self
            .queue
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| server_error("the local model is shutting down"))?;
        let queued = queued_at.elapsed();
        let slot = self.slots.take_best(&prompt);
        let (events, mut received) = mpsc::unbounded_channel();
        let cancel = CancelOnDrop(Arc::new(AtomicBool::new(false)));
        let job = Job {
            prompt,
            max_tokens: request.max_tokens,
            temperature: request.temperature,
            stop: request.stop.clone(),
            grammar,
            events,
            cancel: cancel.0.clone(),
            permit,
        };
        let worker = self
            .workers
            .get(slot)
            .ok_or_else(|| server_error("no worker for the chosen context"))?;
        worker
            .send(job)
            .map_err(|_| server_error("the local model's worker thread has stopped"))?;

        let free = matches!(constraint, Constraint::Free | Constraint::TextOrCall { .. });
        let callable = if request.tool_choice == ToolChoice::None || !free {
            &[][..]
        } else {
            &request.tools[..]
        };
        let mut stream = ReplyStream::new(callable);
        let mut raw = String::new();
        let outcome = loop {
            match received.recv().await {
                Some(WorkerEvent::Text(text)) => {
                    raw.push_str(&text);
                    for delta in stream.push(&text) {
                        on_delta(delta);
                    }
                }
                Some(WorkerEvent::Done(outcome)) => break outcome,
                Some(WorkerEvent::Failed(error)) => return Err(error),
                None => {
                    return Err(server_error(
                        "the local model's worker thread stopped mid-reply",
                    ));
                }
            }
        };
        for delta in stream.finish() {
            on_delta(delta);
        }
        let mut stats = outcome.stats;
        stats.queued = queued;
        let completion = self.completion(raw, outcome.finish, request, constraint, &stats);
        Ok((completion, stats))
    }

    /// The prompt leaves room for at least one generated token.
    fn check_room(&self, prompt_tokens: usize) -> Result<(), ModelError> {
        if prompt_tokens + 1 > self.context as usize {
            return Err(ModelError::ContextLength {
                message: format!(
                    "the prompt is {prompt_tokens} tokens and the local context holds {} \
                     (llm.local.context)",
                    self.context
                ),
            });
        }
        Ok(())
    }

    fn completion(
        &self,
        raw: String,
        finish: FinishReason,
        request: &ChatRequest,
        constraint: &Constraint,
        stats: &CallStats,
    ) -> Completion {
        let usage = Usage {
            prompt_tokens: u64::from(stats.prompt_tokens),
            completion_tokens: u64::from(stats.completion_tokens),
            estimated: false,
            cached_tokens: Some(u64::from(stats.cached_tokens)),
        };
        let (text, reasoning, tool_calls) = match constraint {
            Constraint::ToolCall { .. } => match forced_call(&raw) {
                Some(call) => (String::new(), String::new(), vec![call]),
                None => (raw, String::new(), Vec::new()),
            },
            Constraint::JsonSchema(_) => (raw, String::new(), Vec::new()),
            Constraint::Free | Constraint::Text | Constraint::TextOrCall { .. } => {
                let read = read_reply(&raw, &request.tools, &request.tool_choice);
                (read.text, read.reasoning, read.calls)
            }
        };
        let finish_reason = if tool_calls.is_empty() {
            finish
        } else {
            FinishReason::ToolCalls
        };
        Completion {
            text,
            reasoning,
            tool_calls,
            finish_reason,
            usage,
        }
    }
}

#[async_trait]
impl ChatModel for LocalModel {
    fn name(&self) -> &str {
        &self.name
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<Completion, ModelError> {
        self.complete_constrained(request, &constraint_for(request), on_delta)
            .await
            .map(|(completion, _)| completion)
    }

    /// Known by construction: tools go through the model's own template and our reader, a
    /// forced call (`required` or named) and a JSON Schema decode under a grammar, stop
    /// sequences are cut here, and the context is the one configured.
    fn honours(&self) -> Honours {
        Honours {
            probed: true,
            native_tools: true,
            tool_choice_required: true,
            tool_choice_named: true,
            json_schema: true,
            stop_sequences: true,
            context_window: Some(u64::from(self.context)),
            // Whatever model the file holds: not known without asking it.
            plans_unforced: None,
        }
    }
}

/// The grammar a request asks for: a reply schema (structured output) is one of its own;
/// otherwise `tool_choice: required` is a call of any offered tool, a named choice a call of
/// that tool, a choice among tools a call of one of them, and a free choice among tools
/// text, or a call of one of them once it opens.
pub(crate) fn constraint_for(request: &ChatRequest) -> Constraint {
    match (&request.response_format, &request.tool_choice) {
        (Some(format), _) => Constraint::JsonSchema(format.schema.clone()),
        (None, ToolChoice::Required) => Constraint::ToolCall { names: Vec::new() },
        (None, ToolChoice::Named(name)) => Constraint::ToolCall {
            names: vec![name.clone()],
        },
        (None, ToolChoice::Among(names)) => Constraint::ToolCall {
            names: names.clone(),
        },
        (None, ToolChoice::AutoAmong(names)) => Constraint::TextOrCall {
            names: names.clone(),
        },
        (None, ToolChoice::None) if !request.tools.is_empty() => Constraint::Text,
        (None, ToolChoice::Auto | ToolChoice::None) => Constraint::Free,
    }
}

/// Sets the worker's stop flag when the call's future is dropped (or ends).
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

pub(crate) fn server_error(message: &str) -> ModelError {
    ModelError::Server {
        status: 500,
        attempts: 1,
        message: message.to_string(),
    }
}

fn check_config(config: &LocalConfig) -> Result<(), LocalError> {
    if config.parallel == 0 || config.parallel > 64 {
        return Err(LocalError::Config(format!(
            "llm.local.parallel is {}; it must be 1 to 64",
            config.parallel
        )));
    }
    if config.context < 256 {
        return Err(LocalError::Config(format!(
            "llm.local.context is {}; it must be at least 256 tokens",
            config.context
        )));
    }
    Ok(())
}

/// The vector units this build of llama.cpp was compiled for (the ggml options in the
/// workspace's `.cargo/config.toml`) must be there, or the first matrix product would die
/// on an illegal instruction.
fn check_cpu() -> Result<(), LocalError> {
    #[cfg(target_arch = "x86_64")]
    {
        let wanted = [
            (
                option_env!("GGML_AVX2"),
                "avx2",
                std::arch::is_x86_feature_detected!("avx2"),
            ),
            (
                option_env!("GGML_FMA"),
                "fma",
                std::arch::is_x86_feature_detected!("fma"),
            ),
            (
                option_env!("GGML_F16C"),
                "f16c",
                std::arch::is_x86_feature_detected!("f16c"),
            ),
            (
                option_env!("GGML_AVX"),
                "avx",
                std::arch::is_x86_feature_detected!("avx"),
            ),
        ];
        let missing: Vec<&str> = wanted
            .iter()
            .filter(|(built, _, present)| *built == Some("ON") && !present)
            .map(|(_, name, _)| *name)
            .collect();
        if !missing.is_empty() {
            return Err(LocalError::CpuUnsupported {
                missing: missing.join(", "),
            });
        }
    }
    Ok(())
}

/// Weights plus every context's KV cache must fit in the memory that is available.
fn check_memory(info: &GgufInfo, config: &LocalConfig) -> Result<(), LocalError> {
    let Some(available) = available_memory() else {
        return Ok(());
    };
    let kv = info.kv_bytes_per_token.unwrap_or(0) * u64::from(config.context);
    let needed = info.file_bytes + kv * u64::from(config.parallel);
    if needed > available {
        return Err(LocalError::TooLarge {
            path: info.path.clone(),
            needed_mib: needed / (1 << 20),
            available_mib: available / (1 << 20),
            context: config.context,
            parallel: config.parallel,
        });
    }
    Ok(())
}

/// A special token's text (`bos_token`, `eos_token` in templates).
fn special_piece(model: &LlamaModel, token: LlamaToken) -> String {
    if token.0 < 0 {
        return String::new();
    }
    String::from_utf8_lossy(&model.vocab().token_to_piece(token, true, None)).into_owned()
}

/// A GBNF grammar to decode under.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Grammar {
    /// The rules; the start rule is `root`.
    pub(crate) rules: String,
    /// The rules hold only from where a call opens ([`CALL_OPENS`]): the text before is free.
    pub(crate) lazy: bool,
}

/// Where a call opens, as a regular expression whose group is where the grammar takes over:
/// a JSON object whose first key is `"name"`, which is how Qwen's models write a call — in a
/// `<tool_call>` block, in a fence (the 1.5B coder model) or bare (the 0.5B). The group ends
/// at the colon, so the text the grammar is handed back is always one it admits.
pub(crate) const CALL_OPENS: &str = r#"(\{\s*"name"\s*:)"#;

/// Text in which no call opens: every `{` is followed (after blanks) by something other than a
/// key that starts with `name` (held off `"name"`, the 1.5B model wrote `"name "`), and every
/// `<` by something other than `tool_c` (Qwen's `<tool_call>` token is matched by its text).
/// The character after a checked opening is not itself checked, which lets `{{"name"`
/// through; no model writes a call that way. Nor does the text open with `{`: asked for its
/// answer, the 1.5B model copied the spine's last result (`{"all_done":true,…}`) instead.
const TEXT_WITHOUT_CALLS: &str = r#"root ::= [ \t\n]* (lead (plain | brace | angle)*)?
lead ::= [^{< \t\n] | angle
plain ::= [^{<]
brace ::= "{" [ \t\n]* ([^" \t\n] | "\"" [ ]* not-name)
not-name ::= [^n ] | "n" ([^a] | "a" ([^m] | "m" [^e]))
angle ::= "<" ([^t] | "t" ([^o] | "o" ([^o] | "o" ([^l] | "l" ([^_] | "_" [^c])))))
"#;

/// The grammar a constraint decodes under.
fn grammar_for(
    request: &ChatRequest,
    constraint: &Constraint,
) -> Result<Option<Grammar>, ModelError> {
    let (schema, lazy) = match constraint {
        Constraint::Free => return Ok(None),
        Constraint::Text => {
            return Ok(Some(Grammar {
                rules: TEXT_WITHOUT_CALLS.to_string(),
                lazy: false,
            }));
        }
        Constraint::JsonSchema(schema) => (schema.to_string(), false),
        Constraint::ToolCall { names } => (call_schema(request, names)?, false),
        Constraint::TextOrCall { names } => (call_schema(request, names)?, true),
    };
    let rules =
        llama_cpp_2::json_schema_to_grammar(&schema).map_err(|e| ModelError::BadRequest {
            status: 400,
            message: format!("the JSON Schema cannot be turned into a grammar: {e}"),
        })?;
    let rules = if lazy { call_block(&rules) } else { rules };
    Ok(Some(Grammar { rules, lazy }))
}

/// The schema of a call (`{"name": …, "arguments": …}`) of one of the offered tools named
/// `names` (any offered tool when empty), as text: the grammar follows its keys' order, and
/// the name comes first, as the models were trained to write it (and as [`CALL_OPENS`] reads
/// a call's opening).
fn call_schema(request: &ChatRequest, names: &[String]) -> Result<String, ModelError> {
    let tools: Vec<_> = request
        .tools
        .iter()
        .filter(|t| names.is_empty() || names.contains(&t.name))
        .collect();
    if tools.is_empty() {
        return Err(ModelError::BadRequest {
            status: 400,
            message: format!(
                "a tool call is asked for but none of {names:?} is offered in the request"
            ),
        });
    }
    let variants: Vec<String> = tools
        .iter()
        .map(|t| {
            format!(
                r#"{{"type":"object","properties":{{"name":{{"const":{}}},"arguments":{}}},"required":["name","arguments"],"additionalProperties":false}}"#,
                Value::String(t.name.clone()),
                with_capped_strings(&t.parameters)
            )
        })
        .collect();
    Ok(match <[String; 1]>::try_from(variants) {
        Ok([one]) => one,
        Err(variants) => format!(r#"{{"oneOf":[{}]}}"#, variants.join(",")),
    })
}

/// The longest string a held call may write, in characters: the most times a grammar
/// repeats a rule (llama.cpp refuses more). A call going round in a loop inside a string
/// must close it here and can still end within the reply's budget: the 1.5B model wrote one
/// sentence of a plan's analysis over and over until the output limit, and the turn lost its
/// plan (the analyses it finished were at most 864 characters; its code, 567).
const HELD_STRING_MAX_CHARS: u64 = 2_000;

/// `schema` with every string bounded by [`HELD_STRING_MAX_CHARS`] (a tighter bound kept).
/// Only the grammar sees it: the schema in the prompt stays as offered, byte for byte.
fn with_capped_strings(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut capped: serde_json::Map<String, Value> = (map.iter())
                .map(|(key, value)| (key.clone(), with_capped_strings(value)))
                .collect();
            if map.get("type").and_then(Value::as_str) == Some("string") {
                let bound = (map.get("maxLength").and_then(Value::as_u64))
                    .map_or(HELD_STRING_MAX_CHARS, |n| n.min(HELD_STRING_MAX_CHARS));
                capped.insert("maxLength".into(), bound.into());
            }
            Value::Object(capped)
        }
        Value::Array(items) => items.iter().map(with_capped_strings).collect(),
        other => other.clone(),
    }
}

/// A call's JSON rules (`call_rules`, start rule `root`) as the rest of a reply: the JSON,
/// then the `</tool_call>` or fence that closes its block, if any, and the end.
fn call_block(call_rules: &str) -> String {
    let renamed: Vec<String> = call_rules
        .lines()
        .map(|line| match line.strip_prefix("root ::=") {
            Some(rest) => format!("call-json ::={rest}"),
            None => line.to_string(),
        })
        .collect();
    format!(
        "root ::= call-json call-close\ncall-close ::= ([ \\n]{{0,2}} (\"</tool_call>\" | \"```\"))?\n{}\n",
        renamed.join("\n")
    )
}

/// A forced call's text (`{"name": …, "arguments": …}`) as a call.
fn forced_call(raw: &str) -> Option<ToolCall> {
    let value: Value = serde_json::from_str(raw.trim()).ok()?;
    let name = value.get("name")?.as_str()?.to_string();
    let arguments = value.get("arguments").cloned().unwrap_or_else(|| json!({}));
    let mut calls = read_reply(
        &format!(
            "<tool_call>{}</tool_call>",
            json!({"name": name, "arguments": arguments})
        ),
        &[deepsolve_core::ToolSpec {
            name: name.clone(),
            description: String::new(),
            parameters: json!({}),
        }],
        &ToolChoice::Auto,
    )
    .calls;
    calls.pop()
}

/// Lock a mutex, taking the data even if a panicking holder poisoned it.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use deepsolve_core::{Message, ReplySchema};

    fn request(tool_choice: ToolChoice, schema: Option<Value>) -> ChatRequest {
        ChatRequest {
            messages: vec![Message::user("q")],
            tools: Vec::new(),
            tool_choice,
            max_tokens: 8,
            temperature: 0.0,
            stop: Vec::new(),
            response_format: schema.map(|schema| ReplySchema {
                name: "deepsolve_reply".into(),
                schema,
            }),
        }
    }

    #[test]
    fn a_reply_schema_becomes_the_json_schema_grammar() {
        let schema = json!({"type": "object", "required": ["answer"]});
        assert_eq!(
            constraint_for(&request(ToolChoice::Required, Some(schema.clone()))),
            Constraint::JsonSchema(schema)
        );
        assert_eq!(
            constraint_for(&request(ToolChoice::Named("f".into()), None)),
            Constraint::ToolCall {
                names: vec!["f".into()]
            }
        );
        assert_eq!(
            constraint_for(&request(
                ToolChoice::Among(vec!["f".into(), "g".into()]),
                None
            )),
            Constraint::ToolCall {
                names: vec!["f".into(), "g".into()]
            }
        );
        assert_eq!(
            constraint_for(&request(ToolChoice::AutoAmong(vec!["f".into()]), None)),
            Constraint::TextOrCall {
                names: vec!["f".into()]
            }
        );
        assert_eq!(
            constraint_for(&request(ToolChoice::Auto, None)),
            Constraint::Free
        );
        // No tools, nothing to keep out; tools offered, no call may open.
        assert_eq!(
            constraint_for(&request(ToolChoice::None, None)),
            Constraint::Free
        );
        let mut req = request(ToolChoice::None, None);
        req.tools = vec![deepsolve_core::ToolSpec {
            name: "f".into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        }];
        assert_eq!(constraint_for(&req), Constraint::Text);
    }

    #[test]
    fn a_held_calls_strings_are_bounded_in_its_grammar_only() {
        let parameters = json!({
            "type": "object",
            "properties": {
                "analysis": {"type": "string"},
                "label": {"type": "string", "maxLength": 80},
                "steps": {"type": "array", "items": {
                    "type": "object", "properties": {"goal": {"type": "string"}}
                }},
            },
        });
        let capped = with_capped_strings(&parameters);
        assert_eq!(capped["properties"]["analysis"]["maxLength"], 2_000);
        assert_eq!(capped["properties"]["label"]["maxLength"], 80);
        assert_eq!(
            capped["properties"]["steps"]["items"]["properties"]["goal"]["maxLength"],
            2_000
        );
        let mut req = request(ToolChoice::Named("plan".into()), None);
        req.tools = vec![deepsolve_core::ToolSpec {
            name: "plan".into(),
            description: String::new(),
            parameters: parameters.clone(),
        }];
        let constraint = constraint_for(&req);
        let grammar = grammar_for(&req, &constraint).unwrap().expect("a grammar");
        assert!(grammar.rules.contains("{0,2000}"), "{}", grammar.rules);
        assert!(grammar.rules.contains("{0,80}"), "{}", grammar.rules);
        // What the prompt shows of the tool is untouched.
        assert_eq!(req.tools[0].parameters, parameters);
    }

    #[test]
    fn a_free_replys_calls_are_held_by_a_grammar_from_their_opening() {
        let mut req = request(ToolChoice::AutoAmong(vec!["f".into()]), None);
        req.tools = ["f", "g"]
            .map(|name| deepsolve_core::ToolSpec {
                name: name.into(),
                description: String::new(),
                parameters: json!({"type": "object", "properties": {"x": {"type": "integer"}}}),
            })
            .to_vec();
        let constraint = constraint_for(&req);
        let grammar = grammar_for(&req, &constraint).unwrap().expect("a grammar");
        assert!(grammar.lazy);
        let first = grammar.rules.lines().next().unwrap_or_default();
        assert_eq!(first, "root ::= call-json call-close");
        let call = (grammar.rules.lines())
            .find(|line| line.starts_with("call-json ::="))
            .expect("the call's rule");
        assert!(
            call.contains(r#"name-kv "," space arguments-kv"#),
            "the name first: {call}"
        );
        assert_eq!(
            grammar.rules.matches("root ::=").count(),
            1,
            "{}",
            grammar.rules
        );
        assert!(grammar.rules.contains("call-json ::="), "{}", grammar.rules);
        assert!(grammar.rules.contains(r#"\"f\""#), "{}", grammar.rules);
        assert!(
            !grammar.rules.contains(r#"\"g\""#),
            "only the named tool: {}",
            grammar.rules
        );
        // Nothing offered by that name: a clear error, not an empty grammar.
        let none = Constraint::TextOrCall {
            names: vec!["h".into()],
        };
        assert!(matches!(
            grammar_for(&req, &none),
            Err(ModelError::BadRequest { .. })
        ));
    }
}
