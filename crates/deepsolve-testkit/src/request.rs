//! [`PolicyRequest`]: one model call as a scripted policy sees it, with the questions a fake
//! solver asks about the conversation (is there a plan? which step is current? what did my last
//! tool calls return?).
//!
//! Policies keep no memory of their own where the conversation can answer: the answers come
//! from the latest progress block, then from the solve tools' results after it. So a policy
//! plays correctly whatever the engine folded away, and a wrong fold shows up as a wrong move.

use deepsolve_core::solve::is_solve_tool;
use deepsolve_core::{ChatRequest, Message, Role};
use serde_json::Value;

use crate::invariants::MARKER_PREFIX;
use crate::progress::{PROGRESS_MARKER, PlanStep, ProgressBlock};
use crate::tags::{self, PromptTool};
use crate::wire::{WireError, messages_from_wire};

/// The marker of the engine's nudges (finish gate, plan-first, "stop deliberating").
pub const NUDGE_MARKER: &str = "[deepsolve:nudge]";
/// The marker of the engine's forced-answer instruction.
pub const ULTIMATUM_MARKER: &str = "[deepsolve:ultimatum]";

/// One model call, provider-neutral.
///
/// A text-tag request (no `tools` field; tools listed in the system prompt) reads the same as
/// a native one: `tools` holds the prompt's tools, and `messages` the history with
/// `<tool_call>`/`<tool_response>` blocks turned into calls and tool messages
/// ([`tags::neutral_messages`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyRequest {
    pub messages: Vec<deepsolve_core::Message>,
    /// Names of the offered tools, native or listed in the system prompt (empty for a
    /// tool-less sub-call).
    pub tools: Vec<String>,
    /// The tools the system prompt lists, with their schemas, when the request declares no
    /// native tools (empty otherwise).
    pub prompt_tools: Vec<PromptTool>,
    /// `"auto"`, `"none"`, … as sent.
    pub tool_choice: Option<String>,
    pub max_tokens: Option<u64>,
    pub stop: Vec<String>,
    /// The wire body (`Value::Null` in-process).
    pub raw: Value,
}

/// A tool result with the call it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResultView {
    /// Index of the tool message in `messages`.
    pub index: usize,
    pub call_id: String,
    /// The called tool, when the call is visible (or the message names it).
    pub name: Option<String>,
    /// The call's raw arguments, when the call is visible.
    pub arguments: Option<String>,
    pub content: String,
}

impl ToolResultView {
    /// The result parsed as JSON (solve tools answer in JSON), if it is JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.content).ok()
    }

    /// The `status` field of a JSON result (`planned`, `step_done`, `budget_exhausted`, …).
    pub fn status(&self) -> Option<String> {
        self.json()?
            .get("status")
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    fn is_solve(&self) -> bool {
        self.name.as_deref().is_some_and(is_solve_tool)
    }
}

/// The plan as far as the conversation shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanView {
    pub analysis: String,
    pub steps: Vec<PlanStep>,
    /// `(used, max)` when known.
    pub replans: Option<(u32, u32)>,
}

impl PlanView {
    /// The current step: the first one not done (the engine's rule).
    pub fn current(&self) -> Option<&PlanStep> {
        self.steps.iter().find(|s| !s.done)
    }

    pub fn done_steps(&self) -> impl Iterator<Item = &PlanStep> {
        self.steps.iter().filter(|s| s.done)
    }

    pub fn all_done(&self) -> bool {
        !self.steps.is_empty() && self.steps.iter().all(|s| s.done)
    }

    fn from_block(block: ProgressBlock) -> Self {
        PlanView {
            analysis: block.analysis.unwrap_or_default(),
            steps: block.steps,
            replans: block.replans,
        }
    }

    /// Apply one solve tool result on top of what is known.
    fn apply(&mut self, body: &Value) {
        match body.get("status").and_then(Value::as_str) {
            Some("planned") | Some("replanned") => self.replace_steps(body),
            Some("step_done") => {
                if let Some(done) = body.get("completed").and_then(step_of) {
                    self.upsert(done);
                }
                if let Some(next) = body.get("next").and_then(step_of)
                    && !self.steps.iter().any(|s| s.id == next.id)
                {
                    self.steps.push(next);
                }
            }
            _ => {}
        }
    }

    /// A plan result. Steps the view already knows as done (same id and goal) stay done: a
    /// progress block placed before an unfolded `solve_plan` result is newer than it.
    fn replace_steps(&mut self, body: &Value) {
        if let Some(analysis) = body.get("analysis").and_then(Value::as_str) {
            self.analysis = analysis.to_string();
        }
        let steps: Vec<PlanStep> = body
            .get("steps")
            .and_then(Value::as_array)
            .map(|s| s.iter().filter_map(step_of).collect())
            .unwrap_or_default();
        let old = std::mem::replace(&mut self.steps, steps);
        for step in &mut self.steps {
            if let Some(known) = old
                .iter()
                .find(|o| o.id == step.id && o.goal == step.goal && o.done)
            {
                step.done = true;
                step.summary = known.summary.clone();
            }
        }
        let field = |k: &str| body.get(k).and_then(Value::as_u64);
        if let (Some(used), Some(max)) = (field("replans_used"), field("replans_max")) {
            self.replans = Some((used as u32, max as u32));
        }
    }

    fn upsert(&mut self, step: PlanStep) {
        match self.steps.iter_mut().find(|s| s.id == step.id) {
            Some(known) => {
                known.done |= step.done;
                if step.summary.is_some() {
                    known.summary = step.summary;
                }
            }
            None => self.steps.push(step),
        }
    }
}

/// A step object of a solve result: `{"id", "goal", "done", "summary"?}`.
fn step_of(value: &Value) -> Option<PlanStep> {
    let text = |k: &str| value.get(k).and_then(Value::as_str).map(str::to_string);
    Some(PlanStep {
        id: text("id")?,
        goal: text("goal").unwrap_or_default(),
        done: value.get("done").and_then(Value::as_bool).unwrap_or(false),
        summary: text("summary"),
    })
}

impl PolicyRequest {
    /// Read a wire request body (`POST /chat/completions`).
    pub fn from_wire(body: &Value) -> Result<Self, WireError> {
        let messages = messages_from_wire(body)?;
        let tools = body
            .get("tools")
            .and_then(Value::as_array)
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let tool_choice = match body.get("tool_choice") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Object(o)) => Some(Value::Object(o.clone()).to_string()),
            _ => None,
        };
        let max_tokens = body
            .get("max_tokens")
            .or_else(|| body.get("max_completion_tokens"))
            .and_then(Value::as_u64);
        let stop = match body.get("stop") {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            _ => Vec::new(),
        };
        Ok(PolicyRequest {
            messages,
            tools,
            prompt_tools: Vec::new(),
            tool_choice,
            max_tokens,
            stop,
            raw: body.clone(),
        }
        .read_text_tools())
    }

    /// Without native tools, the tools come from the system prompt and the history's tags are
    /// read as calls and results (harmless for a sub-call, which has neither).
    fn read_text_tools(mut self) -> Self {
        if !self.tools.is_empty() {
            return self;
        }
        let system = self
            .messages
            .iter()
            .find(|m| m.role == Role::System)
            .map_or("", |m| m.content.as_str());
        self.prompt_tools = tags::prompt_tools(system);
        self.tools = self.prompt_tools.iter().map(|t| t.name.clone()).collect();
        self.messages = tags::neutral_messages(&self.messages);
        self
    }

    /// An in-process request, without a JSON round trip (`raw` is `Null`).
    pub fn from_chat(request: &ChatRequest) -> Self {
        let has_tools = !request.tools.is_empty();
        PolicyRequest {
            messages: request.messages.clone(),
            tools: request.tools.iter().map(|t| t.name.clone()).collect(),
            prompt_tools: Vec::new(),
            tool_choice: has_tools.then(|| {
                match crate::wire::tool_choice_value(&request.tool_choice) {
                    Value::String(s) => s,
                    named => named.to_string(),
                }
            }),
            max_tokens: Some(u64::from(request.max_tokens)),
            stop: request.stop.clone(),
            raw: Value::Null,
        }
        .read_text_tools()
    }

    /// The engine is forcing a final answer: `tool_choice: "none"`, or (tags mode has no
    /// tool choice) its ultimatum in the latest user message.
    pub fn is_forced_answer(&self) -> bool {
        self.tool_choice.as_deref() == Some("none")
            || self.last_user_text().contains(ULTIMATUM_MARKER)
    }

    /// A tool-less sub-call (e.g. the `reason` tool's): no tools offered in any form, not a
    /// tags-mode request and not a forced answer.
    pub fn is_subcall(&self) -> bool {
        self.tools.is_empty() && !self.is_tags_mode() && !self.is_forced_answer()
    }

    /// A text-tag protocol request: no native tools, and the engine stops the
    /// model at `<tool_response>`.
    pub fn is_tags_mode(&self) -> bool {
        !self.has_native_tools() && self.stop.iter().any(|s| s.contains("<tool_response>"))
    }

    /// The request declares tools in its `tools` field.
    pub fn has_native_tools(&self) -> bool {
        !self.tools.is_empty() && self.prompt_tools.is_empty()
    }

    /// Is `tool` declared in this request?
    pub fn offers(&self, tool: &str) -> bool {
        self.tools.iter().any(|t| t == tool)
    }

    /// The declared tools that are not solve tools.
    pub fn work_tools(&self) -> impl Iterator<Item = &str> {
        self.tools
            .iter()
            .map(String::as_str)
            .filter(|t| !is_solve_tool(t))
    }

    /// The JSON Schema of a declared tool: from the wire `tools` (native tools are only known
    /// for wire requests) or from the system prompt (tags mode).
    pub fn tool_parameters(&self, tool: &str) -> Option<&Value> {
        let native = || {
            self.raw
                .get("tools")?
                .as_array()?
                .iter()
                .find(|t| t.pointer("/function/name").and_then(Value::as_str) == Some(tool))?
                .pointer("/function/parameters")
        };
        native().or_else(|| {
            self.prompt_tools
                .iter()
                .find(|t| t.name == tool)?
                .parameters
                .as_ref()
        })
    }

    /// The latest progress block and the index of the message that holds it.
    pub fn progress_block_at(&self) -> Option<(usize, ProgressBlock)> {
        self.messages
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, m)| m.role == Role::User && m.content.contains(PROGRESS_MARKER))
            .find_map(|(i, m)| ProgressBlock::parse(&m.content).map(|b| (i, b)))
    }

    /// The latest progress block.
    pub fn progress_block(&self) -> Option<ProgressBlock> {
        self.progress_block_at().map(|(_, b)| b)
    }

    /// The plan: the latest progress block, updated by the solve results that follow it; or,
    /// without a block, rebuilt from the solve results alone.
    pub fn plan(&self) -> Option<PlanView> {
        let (mut view, start) = match self.progress_block_at() {
            Some((i, block)) => (Some(PlanView::from_block(block)), i + 1),
            None => (None, 0),
        };
        for result in self.tool_results() {
            if result.index < start || !result.is_solve() {
                continue;
            }
            if let Some(body) = result.json() {
                view.get_or_insert_with(PlanView::default).apply(&body);
            }
        }
        view.filter(|v| !v.steps.is_empty())
    }

    pub fn has_plan(&self) -> bool {
        self.plan().is_some()
    }

    /// The current step (see [`PolicyRequest::plan`]).
    pub fn current_step(&self) -> Option<PlanStep> {
        self.plan()?.current().cloned()
    }

    /// Every visible tool result, with its call when the call is visible.
    pub fn tool_results(&self) -> Vec<ToolResultView> {
        self.messages
            .iter()
            .enumerate()
            .filter(|(_, m)| m.role == Role::Tool)
            .map(|(index, m)| {
                let call_id = m.tool_call_id.clone().unwrap_or_default();
                let call = self.call(&call_id);
                ToolResultView {
                    index,
                    name: call.map(|c| c.name.clone()).or_else(|| m.name.clone()),
                    arguments: call.map(|c| c.arguments.clone()),
                    call_id,
                    content: m.content.clone(),
                }
            })
            .collect()
    }

    /// The results of the last assistant message's calls (what the model is reacting to).
    pub fn last_tool_results(&self) -> Vec<ToolResultView> {
        let Some(last_assistant) = self
            .messages
            .iter()
            .rposition(|m| m.role == Role::Assistant)
        else {
            return Vec::new();
        };
        self.tool_results()
            .into_iter()
            .filter(|r| r.index > last_assistant)
            .collect()
    }

    fn call(&self, id: &str) -> Option<&deepsolve_core::ToolCall> {
        if id.is_empty() {
            return None;
        }
        self.messages
            .iter()
            .flat_map(|m| m.tool_calls.iter())
            .find(|c| c.id == id)
    }

    /// How many visible assistant calls name `tool`.
    pub fn calls_to(&self, tool: &str) -> usize {
        self.messages
            .iter()
            .flat_map(|m| m.tool_calls.iter())
            .filter(|c| c.name == tool)
            .count()
    }

    /// Any visible assistant tool call at all?
    pub fn has_any_call(&self) -> bool {
        self.messages.iter().any(|m| !m.tool_calls.is_empty())
    }

    /// Results of non-solve calls whose arguments carry `step`'s key ([`PlanStep::key`]): the
    /// work already done for that step.
    pub fn work_results_for(&self, step: &PlanStep) -> Vec<ToolResultView> {
        let key = step.key();
        self.tool_results()
            .into_iter()
            .filter(|r| !r.is_solve())
            .filter(|r| r.arguments.as_deref().is_some_and(|a| mentions(a, &key)))
            .collect()
    }

    /// Is there a solve result with this `status` in view?
    pub fn saw_status(&self, status: &str) -> bool {
        self.tool_results()
            .iter()
            .any(|r| r.is_solve() && r.status().as_deref() == Some(status))
    }

    /// The text of the last user message.
    pub fn last_user_text(&self) -> &str {
        self.messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map_or("", |m| m.content.as_str())
    }

    /// Does the latest user message carry an engine marker (a nudge, a notice, …)?
    pub fn last_user_has_marker(&self) -> bool {
        self.last_user_text().contains(MARKER_PREFIX)
    }

    /// Did the engine nudge since the model last spoke (a `[deepsolve:nudge]` user message,
    /// possibly merged with the progress block)?
    pub fn was_nudged(&self) -> bool {
        let since = self
            .messages
            .iter()
            .rposition(|m| m.role == Role::Assistant)
            .map_or(0, |i| i + 1);
        self.messages[since..]
            .iter()
            .any(|m| m.role == Role::User && m.content.contains(NUDGE_MARKER))
    }

    /// The images the conversation shows the model (the problem's figures), in order.
    pub fn images(&self) -> Vec<&deepsolve_core::TurnImage> {
        self.messages
            .iter()
            .filter(|m| m.role == Role::User)
            .flat_map(|m| m.images.iter())
            .collect()
    }

    /// The problem: from the progress block, else the latest user text before any marker.
    pub fn problem(&self) -> String {
        if let Some(problem) = self.progress_block().and_then(|b| b.problem) {
            return problem;
        }
        self.messages
            .iter()
            .rev()
            .filter(|m| m.role == Role::User)
            .map(|m| {
                m.content
                    .split(MARKER_PREFIX)
                    .next()
                    .unwrap_or_default()
                    .trim()
            })
            .find(|t| !t.is_empty())
            .unwrap_or_default()
            .to_string()
    }
}

/// Does raw argument text mention `key`, either verbatim or inside a JSON string value (the
/// key may have been escaped on the way)?
fn mentions(arguments: &str, key: &str) -> bool {
    if arguments.contains(key) {
        return true;
    }
    fn any_string(v: &Value, key: &str) -> bool {
        match v {
            Value::String(s) => s.contains(key),
            Value::Array(a) => a.iter().any(|x| any_string(x, key)),
            Value::Object(o) => o.values().any(|x| any_string(x, key)),
            _ => false,
        }
    }
    serde_json::from_str::<Value>(arguments).is_ok_and(|v| any_string(&v, key))
}

/// Build a conversation quickly in tests and examples.
pub fn message_with_calls(calls: &[(&str, &str, &str)]) -> Message {
    Message::assistant_with_calls(
        "",
        calls
            .iter()
            .map(|(id, name, args)| deepsolve_core::ToolCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: (*args).into(),
            })
            .collect(),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use deepsolve_core::ToolCall;
    use serde_json::json;

    fn result(id: &str, content: &str) -> Message {
        Message::tool_result(
            &ToolCall {
                id: id.into(),
                name: String::new(),
                arguments: String::new(),
            },
            content,
        )
    }

    fn req(messages: Vec<Message>) -> PolicyRequest {
        PolicyRequest {
            messages,
            tools: vec![
                "solve_plan".into(),
                "solve_finish_step".into(),
                "reason".into(),
            ],
            prompt_tools: Vec::new(),
            tool_choice: Some("auto".into()),
            max_tokens: None,
            stop: vec![],
            raw: Value::Null,
        }
    }

    fn planned() -> String {
        json!({"status": "planned", "analysis": "an", "steps": [
            {"id": "S1", "goal": "a", "done": false},
            {"id": "S2", "goal": "b", "done": false}
        ], "next": {"id": "S1", "goal": "a", "done": false}})
        .to_string()
    }

    #[test]
    fn plan_from_solve_results() {
        let r = req(vec![
            Message::system("s"),
            Message::user("problem"),
            message_with_calls(&[("p", "solve_plan", "{}")]),
            result("p", &planned()),
            message_with_calls(&[("w", "reason", r#"{"query":"[S1] a"}"#)]),
            result("w", "Answer: 1"),
            message_with_calls(&[("f", "solve_finish_step", "{}")]),
            result(
                "f",
                &json!({"status": "step_done", "completed": {"id": "S1", "goal": "a", "done": true, "summary": "one"}, "next": {"id": "S2", "goal": "b", "done": false}, "all_done": false}).to_string(),
            ),
        ]);
        let plan = r.plan().unwrap();
        assert_eq!(plan.analysis, "an");
        assert_eq!(plan.current().unwrap().id, "S2");
        assert_eq!(plan.steps[0].summary.as_deref(), Some("one"));
        assert_eq!(r.last_tool_results().len(), 1);
        let s1 = &plan.steps[0];
        assert_eq!(r.work_results_for(s1).len(), 1);
        assert!(r.work_results_for(&plan.steps[1]).is_empty());
        assert_eq!(r.problem(), "problem");
    }

    #[test]
    fn progress_block_wins_over_older_results() {
        let r = req(vec![
            Message::system("s"),
            Message::user(
                "problem\n\n[deepsolve:progress] round 3 of 12 · replans 0 of 2\nProblem: problem\nPlan: an\n  [x] S1 a — one\n  [ ] S2 b   <- current",
            ),
            message_with_calls(&[("p", "solve_plan", "{}")]),
            // An unfolded plan result after a pinned block must not reopen S1.
            result("p", &planned()),
        ]);
        let plan = r.plan().unwrap();
        assert_eq!(plan.current().unwrap().id, "S2");
        assert_eq!(plan.replans, Some((0, 2)));
        assert!(r.progress_block().is_some());
    }

    #[test]
    fn replan_after_a_block_replaces_the_steps() {
        let r = req(vec![
            Message::system("s"),
            Message::user("p\n[deepsolve:progress]\n  [x] S1 a — one\n  [ ] S2 b"),
            message_with_calls(&[("r", "solve_replan", "{}")]),
            result(
                "r",
                &json!({"status": "replanned", "replans_used": 1, "replans_max": 2, "steps": [{"id": "S1", "goal": "new", "done": false}]}).to_string(),
            ),
        ]);
        let plan = r.plan().unwrap();
        assert_eq!(plan.current().unwrap().goal, "new");
        assert_eq!(plan.replans, Some((1, 2)));
    }

    #[test]
    fn refusals_do_not_make_a_plan() {
        let r = req(vec![
            Message::system("s"),
            Message::user("p"),
            message_with_calls(&[("a", "reason", "{}")]),
            result("a", "Call solve_plan first."),
        ]);
        assert!(!r.has_plan());
        assert!(r.has_any_call());
        assert_eq!(r.calls_to("reason"), 1);
    }

    #[test]
    fn wire_requests_are_read() {
        let body = json!({
            "model": "m",
            "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
            "tools": [{"type": "function", "function": {"name": "reason", "parameters": {"type": "object"}}}],
            "tool_choice": "none",
            "max_tokens": 99,
            "stop": "<tool_response>",
        });
        let r = PolicyRequest::from_wire(&body).unwrap();
        assert!(r.is_forced_answer() && !r.is_subcall());
        assert_eq!(r.max_tokens, Some(99));
        assert_eq!(r.stop, vec!["<tool_response>".to_string()]);
        assert_eq!(
            r.tool_parameters("reason"),
            Some(&json!({"type": "object"}))
        );
        let sub = PolicyRequest::from_wire(&json!({"messages": []})).unwrap();
        assert!(sub.is_subcall() && !sub.is_forced_answer());
    }

    #[test]
    fn mentions_sees_through_json_escapes() {
        assert!(mentions(r#"{"q":"[S1] say \"hi\""}"#, "[S1] say \"hi\""));
        assert!(!mentions("{}", "[S1] x"));
    }
}
