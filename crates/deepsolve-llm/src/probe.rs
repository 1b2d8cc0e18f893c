//! The endpoint probe: what one endpoint and model honour at decoding time, asked the way a
//! solve asks, not with a toy call.
//!
//! Five short requests under the real playbook with the real solve tools, each one attempt
//! with a small `max_tokens` and its own time bound:
//! 1. a problem, `tool_choice: "auto"`: does a native call come back (and does the model plan
//!    unasked)?
//! 2. the same after a `solve_plan` call and its real result, `tool_choice: "required"`: does
//!    a call come back? And a question the model would answer in a sentence, with the solve
//!    tools and `"required"`: does a call come back there too? A model calls after a tool
//!    result on its own, so the first alone cannot tell a server that holds the choice from
//!    one that drops it (llama.cpp's pinned server with Qwen2.5-Coder: seen by hand).
//! 3. the same history with `solve_replan` named (a call the model would not pick itself, so
//!    that a server treating any named choice as "required" is told apart): is that tool
//!    called?
//! 4. a question to answer "in one short sentence" with `response_format: json_schema`: does
//!    the reply come back as JSON?
//! 5. a canary line to echo with a stop sequence in its middle: does the reply end there?
//!
//! Then the context window the server really has: vLLM's `max_model_len` in `/v1/models`,
//! llama.cpp's `/props` (`default_generation_settings.n_ctx`), Ollama's `/api/show`
//! (`num_ctx` in its parameters, else the model's `context_length`).
//!
//! The [`Verdict`] is kept per endpoint and model ([`crate::verdicts`]) and read back by
//! [`crate::OpenAiClient::honours`].

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use deepsolve_core::solve::spine::{self, SOLVE_PLAN, SOLVE_REPLAN};
use deepsolve_core::solve::{SolveSession, playbook_for, solve_tool_specs};
use deepsolve_core::{
    ChatRequest, Completion, Honours, Message, ModelError, Protocol, ReplySchema, STOP_MARKER,
    Texts, ToolCall, ToolChoice, ToolSpec,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The problem every tool check poses: small, but one that takes a plan of a few steps.
const PROBLEM: &str = "A shop sells pencils at 3 for $1 and erasers at $0.40 each. Mia buys 12 \
                       pencils and 5 erasers. How much does she pay?";

/// The canary's text before and after [`STOP_MARKER`]: distinctive words that only appear in
/// the reply if the model echoed them.
pub(crate) const CANARY_BEFORE: &str = "deepsolve-canary-before";
pub(crate) const CANARY_AFTER: &str = "deepsolve-canary-after";

/// A question any model answers in a sentence when left free (checks 2 and 4).
const SENTENCE_QUESTION: &str = "What is 2 + 3? Answer in one short sentence.";

/// How long one check may take by default: a small model on a busy CPU prefills the
/// playbook in tens of seconds.
pub const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a context-window lookup may take.
const WINDOW_LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

/// What the probe asks with.
#[derive(Debug, Clone)]
pub struct ProbeSpec {
    /// The system prompt: the playbook a turn would start under.
    pub system: String,
    /// The tools offered: the solve tools and the work tools given.
    pub tools: Vec<ToolSpec>,
    /// `solve_plan`'s result for the probe's plan, in the texts' language.
    pub plan_result: String,
    /// The bound on each request.
    pub check_timeout: Duration,
}

impl ProbeSpec {
    /// The probe for a turn in `texts`' language offering `work_tools` (none is fine: the
    /// solve tools are always offered).
    pub fn new(texts: &Texts, work_tools: &[ToolSpec]) -> ProbeSpec {
        let mut tools = solve_tool_specs(texts);
        tools.extend(work_tools.iter().map(ToolSpec::as_offered));
        let mut session = SolveSession::new("probe", 2, 6);
        let plan_result = spine::plan(&mut session, &plan_arguments(), texts)
            .output
            .content;
        ProbeSpec {
            system: playbook_for(texts, work_tools),
            tools,
            plan_result,
            check_timeout: DEFAULT_CHECK_TIMEOUT,
        }
    }

    /// The same probe with another bound per request.
    pub fn with_check_timeout(mut self, timeout: Duration) -> ProbeSpec {
        self.check_timeout = timeout;
        self
    }
}

/// The plan the history of checks 2 and 3 holds.
fn plan_arguments() -> Value {
    json!({
        "analysis": "Pencils cost $1 per 3; erasers $0.40 each.",
        "steps": [
            {"goal": "Cost of the 12 pencils"},
            {"goal": "Cost of the 5 erasers"},
            {"goal": "Add the two"}
        ]
    })
}

/// One capability the probe checks (the fields of [`Honours`] but the window).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    NativeTools,
    ToolChoiceRequired,
    ToolChoiceNamed,
    JsonSchema,
    StopSequences,
}

impl Capability {
    pub const ALL: [Capability; 5] = [
        Capability::NativeTools,
        Capability::ToolChoiceRequired,
        Capability::ToolChoiceNamed,
        Capability::JsonSchema,
        Capability::StopSequences,
    ];

    /// How `doctor` names it.
    pub fn label(self) -> &'static str {
        match self {
            Capability::NativeTools => "native tool calls",
            Capability::ToolChoiceRequired => "tool_choice \"required\"",
            Capability::ToolChoiceNamed => "tool_choice naming a tool",
            Capability::JsonSchema => "response_format json_schema",
            Capability::StopSequences => "stop sequences",
        }
    }
}

/// What the probe found out about one capability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub capability: Capability,
    pub honoured: bool,
    /// What came back, in a few words ("a solve_replan call", "HTTP 400: …").
    pub detail: String,
}

/// Where a context window came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowSource {
    /// vLLM: `max_model_len` of the model in `/v1/models`.
    VllmModels,
    /// llama.cpp's server: `default_generation_settings.n_ctx` in `/props`.
    LlamaCppProps,
    /// Ollama: `num_ctx` in `/api/show`'s parameters, else the model's `context_length`.
    OllamaShow,
}

impl WindowSource {
    pub fn describe(self) -> &'static str {
        match self {
            WindowSource::VllmModels => "max_model_len in /v1/models (vLLM)",
            WindowSource::LlamaCppProps => "n_ctx in /props (llama.cpp)",
            WindowSource::OllamaShow => "/api/show (Ollama)",
        }
    }
}

/// The probe's verdict on one endpoint and model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// The endpoint's base URL, normalised.
    pub endpoint: String,
    pub model: String,
    pub findings: Vec<Finding>,
    /// The model planned with a `solve_plan` call when nothing forced it (a model that
    /// follows the spine on its own); `None` when tools did not work at all.
    pub plans_unforced: Option<bool>,
    /// The server's real context window, and where it said so.
    pub context_window: Option<u64>,
    pub window_source: Option<WindowSource>,
    /// When the probe ran, in seconds since the Unix epoch.
    pub taken_at: u64,
    /// Why this verdict no longer holds (a request failed in a way that contradicts it): the
    /// next chance probes again. `None`: it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale: Option<String>,
}

impl Verdict {
    /// Whether `capability` was found honoured.
    pub fn honoured(&self, capability: Capability) -> bool {
        self.findings
            .iter()
            .any(|f| f.capability == capability && f.honoured)
    }

    /// The finding on `capability`, if it was checked.
    pub fn finding(&self, capability: Capability) -> Option<&Finding> {
        self.findings.iter().find(|f| f.capability == capability)
    }

    /// The verdict as the engine reads it.
    pub fn honours(&self) -> Honours {
        Honours {
            probed: true,
            native_tools: self.honoured(Capability::NativeTools),
            tool_choice_required: self.honoured(Capability::ToolChoiceRequired),
            tool_choice_named: self.honoured(Capability::ToolChoiceNamed),
            json_schema: self.honoured(Capability::JsonSchema),
            stop_sequences: self.honoured(Capability::StopSequences),
            context_window: self.context_window,
            plans_unforced: self.plans_unforced,
        }
    }

    /// The tool protocol this verdict points to: core's rule for `llm.protocol: auto`
    /// (`deepsolve_core::recommended_protocol`), so doctor says what a turn will use.
    pub fn recommended_protocol(&self) -> Protocol {
        deepsolve_core::recommended_protocol(&self.honours())
    }

    /// A request failed naming `capability` although the verdict says it is honoured: from
    /// now on it is not, and the verdict is stale (`why`). `false` when the verdict already
    /// said so (nothing changes).
    pub fn contradict(&mut self, capability: Capability, why: &str) -> bool {
        let mut changed = false;
        for finding in &mut self.findings {
            if finding.honoured && contradicted_by(finding.capability, capability) {
                finding.honoured = false;
                finding.detail = format!("rejected in use: {why}");
                changed = true;
            }
        }
        if changed {
            self.stale = Some(format!("{} rejected in use: {why}", capability.label()));
        }
        changed
    }
}

/// A rejection of `rejected` takes `capability` down too: a server that refuses tools honours
/// no `tool_choice`, and one refusing `tool_choice` honours neither form.
fn contradicted_by(capability: Capability, rejected: Capability) -> bool {
    match rejected {
        Capability::NativeTools => matches!(
            capability,
            Capability::NativeTools | Capability::ToolChoiceRequired | Capability::ToolChoiceNamed
        ),
        Capability::ToolChoiceRequired | Capability::ToolChoiceNamed => matches!(
            capability,
            Capability::ToolChoiceRequired | Capability::ToolChoiceNamed
        ),
        other => capability == other,
    }
}

/// Seconds since the Unix epoch, now.
pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// One request of the probe, ready to send.
pub(crate) struct Check {
    pub request: ChatRequest,
}

/// Check 1: the problem under the playbook, nothing forced.
pub(crate) fn plan_check(spec: &ProbeSpec) -> Check {
    tool_check(spec, opening(spec), ToolChoice::Auto, 200)
}

/// Check 2: after the plan and its result, `"required"`.
pub(crate) fn required_check(spec: &ProbeSpec) -> Check {
    tool_check(spec, after_plan(spec), ToolChoice::Required, 160)
}

/// Check 2, its second half: a question the model would answer in a sentence, the solve
/// tools offered and `"required"`. Only a server that holds the choice gets a call here.
pub(crate) fn required_against_text_check(spec: &ProbeSpec) -> Check {
    let messages = vec![
        Message::system("Answer briefly."),
        Message::user(SENTENCE_QUESTION),
    ];
    tool_check(spec, messages, ToolChoice::Required, 200)
}

/// Check 3: after the plan and its result, `solve_replan` named.
pub(crate) fn named_check(spec: &ProbeSpec) -> Check {
    let choice = ToolChoice::Named(SOLVE_REPLAN.to_string());
    tool_check(spec, after_plan(spec), choice, 160)
}

fn tool_check(
    spec: &ProbeSpec,
    messages: Vec<Message>,
    tool_choice: ToolChoice,
    max_tokens: u32,
) -> Check {
    Check {
        request: ChatRequest {
            messages,
            tools: spec.tools.clone(),
            tool_choice,
            max_tokens,
            temperature: 0.0,
            stop: Vec::new(),
            response_format: None,
        },
    }
}

fn opening(spec: &ProbeSpec) -> Vec<Message> {
    vec![Message::system(spec.system.clone()), Message::user(PROBLEM)]
}

/// The opening, a `solve_plan` call and its result: step S1 is open.
fn after_plan(spec: &ProbeSpec) -> Vec<Message> {
    let call = ToolCall {
        id: "call_probe_plan".to_string(),
        name: SOLVE_PLAN.to_string(),
        arguments: plan_arguments().to_string(),
    };
    let mut messages = opening(spec);
    messages.push(Message::assistant_with_calls("", vec![call.clone()], None));
    messages.push(Message::tool_result(&call, spec.plan_result.clone()));
    messages
}

/// Check 4: a question to answer in a sentence, the reply held to a JSON schema.
pub(crate) fn json_schema_check() -> Check {
    let schema = ReplySchema {
        name: "answer".to_string(),
        schema: json!({
            "type": "object",
            "properties": {"answer": {"type": "integer"}},
            "required": ["answer"],
            "additionalProperties": false
        }),
    };
    Check {
        request: ChatRequest {
            messages: vec![
                Message::system("Answer briefly."),
                Message::user(SENTENCE_QUESTION),
            ],
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            max_tokens: 48,
            temperature: 0.0,
            stop: Vec::new(),
            response_format: Some(schema),
        },
    }
}

/// Check 5: echo a canary with the stop marker in its middle.
pub(crate) fn stop_check() -> Check {
    let prompt = format!(
        "This is an automated check. Reply with exactly the following line and nothing else, \
         no quotes, no explanation:\n{CANARY_BEFORE} {STOP_MARKER} {CANARY_AFTER}"
    );
    Check {
        request: ChatRequest {
            messages: vec![
                Message::system("Follow the instruction exactly."),
                Message::user(prompt),
            ],
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            max_tokens: 64,
            temperature: 0.0,
            stop: vec![STOP_MARKER.to_string()],
            response_format: None,
        },
    }
}

/// Did the canary reply stop at the marker? The text before it must be there (else the model
/// did not follow the instruction and nothing was tested), and nothing from the marker on.
pub(crate) fn stopped_before_marker(text: &str) -> bool {
    text.contains(CANARY_BEFORE) && !text.contains(STOP_MARKER) && !text.contains(CANARY_AFTER)
}

/// What one check's request came to.
pub(crate) enum Outcome {
    Replied(Completion),
    /// The server refused the request (a 4xx naming what it refused).
    Refused(ModelError),
    /// No reply within the bound.
    TimedOut(Duration),
}

/// The calls of a reply, by name, for a finding's detail.
fn calls_named(completion: &Completion) -> String {
    let names: Vec<&str> = completion
        .tool_calls
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    match names.as_slice() {
        [] => "text".to_string(),
        [one] => format!("a {one} call"),
        many => format!("calls of {}", many.join(", ")),
    }
}

fn refused_or_slow(outcome: &Outcome) -> Option<String> {
    match outcome {
        Outcome::Replied(_) => None,
        Outcome::Refused(e) => Some(format!("refused: {e}")),
        Outcome::TimedOut(after) => Some(format!("no reply within {}s", after.as_secs())),
    }
}

/// The judgement on check 1: (native calls seen, planned unasked, detail).
pub(crate) fn judge_plan(outcome: &Outcome) -> (bool, Option<bool>, String) {
    if let Some(why) = refused_or_slow(outcome) {
        let planned = match outcome {
            Outcome::Refused(ModelError::ToolsUnsupported { .. }) => None,
            _ => Some(false),
        };
        return (false, planned, why);
    }
    let Outcome::Replied(completion) = outcome else {
        return (false, None, String::new());
    };
    let planned = completion.tool_calls.iter().any(|c| c.name == SOLVE_PLAN);
    let detail = if planned {
        "planned with a solve_plan call unasked".to_string()
    } else {
        format!(
            "asked to solve, it answered with {}",
            calls_named(completion)
        )
    };
    (!completion.tool_calls.is_empty(), Some(planned), detail)
}

/// The judgement on check 2: a call came back after the tool result, and for the question
/// the model would answer in a sentence.
pub(crate) fn judge_required(
    after_result: &Outcome,
    against_text: Option<&Outcome>,
) -> (bool, String) {
    if let Some(why) = refused_or_slow(after_result) {
        return (false, why);
    }
    let Outcome::Replied(after) = after_result else {
        return (false, String::new());
    };
    if after.tool_calls.is_empty() {
        return (
            false,
            format!("forced, it still answered with {}", calls_named(after)),
        );
    }
    let Some(against_text) = against_text else {
        return (false, "not asked for a sentence".to_string());
    };
    if let Some(why) = refused_or_slow(against_text) {
        return (false, format!("asked for a sentence: {why}"));
    }
    match against_text {
        Outcome::Replied(c) if !c.tool_calls.is_empty() => (
            true,
            format!(
                "after a tool result: {}; asked for a sentence: {}",
                calls_named(after),
                calls_named(c)
            ),
        ),
        Outcome::Replied(c) => (
            false,
            format!(
                "after a tool result: {} (the model's own choice); asked for a sentence, it \
                 answered with {}: the choice is not held",
                calls_named(after),
                calls_named(c)
            ),
        ),
        _ => (false, String::new()),
    }
}

/// The judgement on check 3: a call of the named tool came back.
pub(crate) fn judge_named(outcome: &Outcome) -> (bool, String) {
    if let Some(why) = refused_or_slow(outcome) {
        return (false, why);
    }
    match outcome {
        Outcome::Replied(c) if c.tool_calls.iter().any(|t| t.name == SOLVE_REPLAN) => {
            (true, format!("{SOLVE_REPLAN} named: {}", calls_named(c)))
        }
        Outcome::Replied(c) => (
            false,
            format!("{SOLVE_REPLAN} named, it answered with {}", calls_named(c)),
        ),
        _ => (false, String::new()),
    }
}

/// The judgement on check 4: asked for a sentence, the reply is JSON (an object, or the
/// opening of one cut by `max_tokens`).
pub(crate) fn judge_json_schema(outcome: &Outcome) -> (bool, String) {
    if let Some(why) = refused_or_slow(outcome) {
        return (false, why);
    }
    let Outcome::Replied(completion) = outcome else {
        return (false, String::new());
    };
    let text = completion.text.trim();
    if let Ok(Value::Object(object)) = serde_json::from_str::<Value>(text) {
        let fits = object.get("answer").is_some_and(Value::is_i64);
        let detail = if fits {
            "the reply came back as the schema's JSON".to_string()
        } else {
            "the reply came back as JSON".to_string()
        };
        return (true, detail);
    }
    if text.starts_with('{') {
        return (
            true,
            "the reply came back as JSON (cut at the probe's max_tokens)".to_string(),
        );
    }
    let shown: String = text.chars().take(60).collect();
    (false, format!("asked for a sentence, it wrote {shown:?}"))
}

/// The judgement on check 5.
pub(crate) fn judge_stop(outcome: &Outcome) -> (bool, String) {
    if let Some(why) = refused_or_slow(outcome) {
        return (false, why);
    }
    let Outcome::Replied(completion) = outcome else {
        return (false, String::new());
    };
    if stopped_before_marker(&completion.text) {
        return (true, "the reply ended at the stop sequence".to_string());
    }
    let detail = if completion.text.contains(CANARY_BEFORE) {
        "the reply went on past the stop sequence"
    } else {
        "the model did not echo the test line, so nothing was shown"
    };
    (false, detail.to_string())
}

/// The context window in a vLLM model list: `max_model_len` of `model`.
pub(crate) fn window_in_models(list: &Value, model: &str) -> Option<u64> {
    list.get("data")?
        .as_array()?
        .iter()
        .find(|m| m.get("id").and_then(Value::as_str) == Some(model))?
        .get("max_model_len")?
        .as_u64()
        .filter(|n| *n > 0)
}

/// The context window in llama.cpp's `/props`: `default_generation_settings.n_ctx` (older
/// servers put `n_ctx` at the top).
pub(crate) fn window_in_props(props: &Value) -> Option<u64> {
    props
        .get("default_generation_settings")
        .and_then(|s| s.get("n_ctx"))
        .or_else(|| props.get("n_ctx"))?
        .as_u64()
        .filter(|n| *n > 0)
}

/// The context window in Ollama's `/api/show`: `num_ctx` among the model's parameters (what
/// it runs with), else `<architecture>.context_length` in `model_info`.
pub(crate) fn window_in_ollama_show(show: &Value) -> Option<u64> {
    let from_parameters = show
        .get("parameters")
        .and_then(Value::as_str)
        .and_then(|text| {
            text.lines().find_map(|line| {
                let mut words = line.split_whitespace();
                (words.next() == Some("num_ctx")).then(|| words.next()?.parse::<u64>().ok())?
            })
        });
    let from_info = || {
        show.get("model_info")?
            .as_object()?
            .iter()
            .find(|(key, _)| key.ends_with(".context_length"))?
            .1
            .as_u64()
    };
    from_parameters.or_else(from_info).filter(|n| *n > 0)
}

/// The server's root: the base URL without a trailing `/v1` (llama.cpp's `/props` and
/// Ollama's `/api/show` live there).
pub(crate) fn server_root(base_url: &str) -> &str {
    let trimmed = base_url.trim_end_matches('/');
    trimmed.strip_suffix("/v1").unwrap_or(trimmed)
}

pub(crate) const fn window_lookup_timeout() -> Duration {
    WINDOW_LOOKUP_TIMEOUT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_read_from_each_server_s_shape() {
        let vllm = json!({"data": [{"id": "other", "max_model_len": 1}, {"id": "m", "max_model_len": 32768}]});
        assert_eq!(window_in_models(&vllm, "m"), Some(32768));
        assert_eq!(window_in_models(&vllm, "x"), None);
        let llama = json!({"default_generation_settings": {"n_ctx": 16384}});
        assert_eq!(window_in_props(&llama), Some(16384));
        assert_eq!(window_in_props(&json!({"n_ctx": 4096})), Some(4096));
        assert_eq!(window_in_props(&json!({})), None);
        let ollama = json!({"parameters": "stop \"<|im_end|>\"\nnum_ctx 8192", "model_info": {"qwen2.context_length": 32768}});
        assert_eq!(window_in_ollama_show(&ollama), Some(8192));
        let info_only = json!({"model_info": {"llama.context_length": 131072}});
        assert_eq!(window_in_ollama_show(&info_only), Some(131072));
        assert_eq!(server_root("http://h:8080/v1/"), "http://h:8080");
        assert_eq!(server_root("http://h:8080"), "http://h:8080");
    }

    #[test]
    fn a_contradiction_takes_the_capability_and_its_dependents_down() {
        let finding = |capability| Finding {
            capability,
            honoured: true,
            detail: String::new(),
        };
        let mut verdict = Verdict {
            endpoint: "http://h/v1".into(),
            model: "m".into(),
            findings: Capability::ALL.iter().copied().map(finding).collect(),
            plans_unforced: Some(true),
            context_window: None,
            window_source: None,
            taken_at: 1,
            stale: None,
        };
        assert!(verdict.contradict(Capability::ToolChoiceNamed, "HTTP 400"));
        let honours = verdict.honours();
        assert!(honours.native_tools && honours.json_schema);
        assert!(!honours.tool_choice_named && !honours.tool_choice_required);
        assert!(verdict.stale.is_some());
        assert!(!verdict.contradict(Capability::ToolChoiceRequired, "again"));
    }

    #[test]
    fn the_probe_asks_under_the_real_playbook() {
        let texts = Texts::builtin(deepsolve_core::Language::En);
        let spec = ProbeSpec::new(&texts, &[]);
        assert!(spec.system.contains("solve_plan"), "{}", spec.system);
        assert!(spec.tools.iter().any(|t| t.name == SOLVE_PLAN));
        assert!(spec.plan_result.contains("S1"), "{}", spec.plan_result);
    }
}
