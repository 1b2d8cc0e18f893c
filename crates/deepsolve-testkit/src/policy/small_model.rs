//! What small local models (1.5B and below, served by llama.cpp) were seen to do instead of
//! following the spine: each behaviour replayed by one policy, so the engine's answer to it
//! is tested without the model. Every one answers a forced-answer request (`tool_choice:
//! "none"`) with a final text, except [`IgnoresToolChoice`].

use deepsolve_core::solve::spine::{SOLVE_FINISH_STEP, SOLVE_PLAN, SOLVE_REPLAN};
use serde_json::Value;

use crate::policy::markup::{as_plain_text, push_line};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::policy::moves::{common, work_args};
use crate::policy::{Policy, WellBehaved};
use crate::reply::{Reply, Turn};
use crate::request::{NUDGE_MARKER, PolicyRequest, ULTIMATUM_MARKER};
use crate::tags::{MarkupStyle, render_markup};

/// The result every one of these policies reaches in prose.
pub const SMALL_MODEL_RESULT: &str = "42";

/// The model has spoken before in this conversation (its plan, or an answer the engine sent
/// back with a nudge).
fn has_spoken(req: &PolicyRequest) -> bool {
    req.messages
        .iter()
        .any(|m| m.role == deepsolve_core::Role::Assistant)
}

/// The problem is written in Chinese: the model answers in Chinese too.
fn in_chinese(req: &PolicyRequest) -> bool {
    req.problem()
        .chars()
        .any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c))
}

/// A prose answer with the result, as a small model writes one without tools.
fn prose_answer(req: &PolicyRequest) -> String {
    if in_chinese(req) {
        format!(
            "**答案：** {SMALL_MODEL_RESULT}\n\n先求出第一部分，再求出第二部分，合起来得到 {SMALL_MODEL_RESULT}。"
        )
    } else {
        format!(
            "**Answer:** {SMALL_MODEL_RESULT}\n\nWorking out part 1 gives 6 and part 2 gives 7; together 6 * 7 = {SMALL_MODEL_RESULT}."
        )
    }
}

/// Writes its plan as prose and never calls a tool; once the engine has answered the plan
/// (with the plan-first nudge), answers in prose.
///
/// **Engine:** the plan gate nudges once, then the prose answer stands.
/// **Ending:** `answered_without_plan`, with [`SMALL_MODEL_RESULT`] in the answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProsePlanner;

impl Policy for ProsePlanner {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        if has_spoken(req) {
            return Reply::text(prose_answer(req));
        }
        let plan = if in_chinese(req) {
            "解题计划：\n1. 求出第一部分。\n2. 求出第二部分。\n3. 把两部分合起来得到答案。"
        } else {
            "Here is my plan:\n1. Work out part 1 of the problem.\n2. Work out part 2 of the problem.\n3. Combine both parts into the answer."
        };
        Reply::text(plan)
    }
}

/// Answers in prose at once; answers the nudge by echoing it, literally beginning with its
/// marker, then apologising and promising to call `solve_plan` — and calls nothing.
///
/// **Engine:** the plan gate nudges once; the echo is not an answer (engine text and a
/// promise only), so the forced-answer path asks for the answer without tools.
/// **Ending:** `empty_rounds`, with the forced answer (never the echo).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NudgeEcho;

impl NudgeEcho {
    /// The nudge's own words, marker first, then an apology and a promise.
    fn echo(req: &PolicyRequest) -> String {
        let nudge = req.last_user_text();
        let echoed = nudge
            .find(NUDGE_MARKER)
            .map_or(nudge, |at| &nudge[at..])
            .trim();
        let promise = if in_chinese(req) {
            format!("抱歉造成了困惑。我会先调用 `{SOLVE_PLAN}`……")
        } else {
            format!("I apologize for the confusion. I will call `{SOLVE_PLAN}` first…")
        };
        format!("{echoed}\n\n{promise}")
    }
}

impl Policy for NudgeEcho {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        if req.was_nudged() {
            return Reply::text(NudgeEcho::echo(req));
        }
        Reply::text(prose_answer(req))
    }
}

/// `inner`'s calls written as text in `content`, one block per call, instead of native calls.
fn calls_in_content(reply: Reply, render: impl Fn(&str, &str) -> String) -> Reply {
    reply.map_turn(|turn| {
        if turn.tool_calls.is_empty() {
            return turn;
        }
        let mut text = turn.text.clone().unwrap_or_default();
        for (name, arguments) in &turn.tool_calls {
            push_line(&mut text, &render(name, arguments));
        }
        as_plain_text(turn, text)
    })
}

/// A call as the JSON object small models write: `{"name": …, "arguments": {…}}`.
fn call_object(name: &str, arguments: &str) -> String {
    let arguments: Value =
        serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_string()));
    serde_json::json!({"name": name, "arguments": arguments}).to_string()
}

/// [`WellBehaved`]'s calls written as a fenced ```` ```json ```` block in `content`
/// (`{"name": …, "arguments": …}`), never as native calls.
///
/// **Engine (today):** no protocol reads a fenced block, so the block is text: the plan gate
/// nudges once, then the block stands as the answer. A code-fence protocol would run the
/// calls. **Ending (today):** `answered_without_plan`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FencedJsonCalls {
    pub inner: WellBehaved,
}

impl Policy for FencedJsonCalls {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        calls_in_content(self.inner.reply(req), |name, arguments| {
            format!("```json\n{}\n```", call_object(name, arguments))
        })
    }
}

/// Writes a ```` ```python ```` block and, after it, an ```` ```output ```` block it invented
/// (nothing ran the code), then the result it read from its own invention. Never calls a tool.
///
/// **Engine (today):** the block is text: the plan gate nudges once, then the reply stands
/// as the answer, invented output included. Code-as-action would run the code and cut the
/// invented output. **Ending (today):** `answered_without_plan`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InventedOutput;

impl Policy for InventedOutput {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        Reply::text(format!(
            "Let me compute it.\n```python\nprint(6 * 7)\n```\n```output\n{SMALL_MODEL_RESULT}\n```\nSo the answer is {SMALL_MODEL_RESULT}."
        ))
    }
}

/// [`WellBehaved`]'s calls written as Hermes `<tool_call>{"name": …, "arguments": …}
/// </tool_call>` blocks in `content` while native tools are offered (a chat template that
/// renders the calls but a server that does not parse them).
///
/// **Engine:** reads markup calls from the content when the provider gave no native ones.
/// **Ending:** `answered`, as [`WellBehaved`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HermesInContent {
    pub inner: WellBehaved,
}

impl Policy for HermesInContent {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        calls_in_content(self.inner.reply(req), |name, arguments| {
            render_markup(
                MarkupStyle::Hermes,
                &[(name.to_string(), arguments.to_string())],
            )
        })
    }
}

/// Ignores `tool_choice`: asked to answer without tools (`"none"`), it calls a tool anyway
/// (no text). Otherwise as `inner` ([`FinishesOneThenProbes`] by default, so a budget ends
/// the turn after one finished step and the forced answer is asked for).
///
/// **Engine:** the forced reply has no text and its call is not run, so the step summaries
/// are the answer. **Ending:** `max_rounds`, answered from the step summaries.
pub struct IgnoresToolChoice<P = FinishesOneThenProbes> {
    pub inner: P,
}

impl Default for IgnoresToolChoice {
    fn default() -> Self {
        IgnoresToolChoice {
            inner: FinishesOneThenProbes::new(WellBehaved::default()),
        }
    }
}

impl<P: Policy> Policy for IgnoresToolChoice<P> {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if req.is_forced_answer() {
            let tool = req.work_tools().next().unwrap_or(SOLVE_PLAN).to_string();
            return Reply::Turn(Turn::calls(vec![(
                tool.as_str(),
                serde_json::json!({"query": "one more look, whatever tool_choice says"}),
            )]));
        }
        self.inner.reply(req)
    }
}

/// Follows the spine until a step is finished, then calls the work tool forever (distinct
/// arguments, so the repetition guard stays quiet): a budget ends the turn.
#[derive(Debug, Default)]
pub struct FinishesOneThenProbes {
    pub then: WellBehaved,
    probes: AtomicUsize,
}

impl FinishesOneThenProbes {
    pub fn new(then: WellBehaved) -> Self {
        FinishesOneThenProbes {
            then,
            probes: AtomicUsize::new(0),
        }
    }
}

impl Policy for FinishesOneThenProbes {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        let finished_one = req.plan().is_some_and(|p| p.done_steps().next().is_some());
        if !finished_one {
            return self.then.next_move(req);
        }
        let n = self.probes.fetch_add(1, Ordering::SeqCst) + 1;
        let tool = self.then.any_work_tool(req);
        let args = work_args(req, &tool, &format!("probe {n}"));
        Reply::calls(vec![(tool.as_str(), args)])
    }
}

/// A small model under a decoder that honours `tool_choice`: asked with `auto`, it thinks
/// aloud in prose and calls nothing; asked for a call (`required`, or a named tool), it makes
/// `then`'s move; asked for text (`none`), it answers.
///
/// **Engine:** under `solve.enforce: decoding`, each prose reply is kept as reasoning and the
/// call asked for; the spine is followed to the end. Under `prompt`, the plan gate nudges once,
/// then the prose stands. **Ending:** `answered` (decoding), `answered_without_plan` (prompt).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThinksBeforeCalls {
    pub then: WellBehaved,
}

impl ThinksBeforeCalls {
    /// Prose reasoning towards [`SMALL_MODEL_RESULT`].
    fn thinking(req: &PolicyRequest) -> String {
        if in_chinese(req) {
            format!("想一想：第一部分得 6，第二部分得 7，所以 6 * 7 = {SMALL_MODEL_RESULT}。")
        } else {
            format!(
                "Thinking it through: part 1 gives 6 and part 2 gives 7, so 6 * 7 = {SMALL_MODEL_RESULT}."
            )
        }
    }
}

impl Policy for ThinksBeforeCalls {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        match req.tool_choice.as_deref() {
            Some("auto") | None => Reply::text(ThinksBeforeCalls::thinking(req)),
            Some(_) => self.then.next_move(req),
        }
    }
}

/// A small model on an endpoint that reads a narrowed required choice as plain `required`
/// (llama.cpp's server): asked with `auto`, it thinks aloud towards [`SMALL_MODEL_RESULT`];
/// asked for a call once it has a plan, it replans with the current step alone whenever
/// `solve_replan` is offered, as the 1.5B model did there; offered only the step's tools,
/// it makes `then`'s move.
///
/// **Engine:** under `solve.enforce: decoding`, the replan is not run: the round is asked
/// again offering only the tools it admits, and the plan keeps its steps. **Ending:**
/// `answered`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplansWhenForced {
    pub then: WellBehaved,
}

impl Policy for ReplansWhenForced {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        let current = req.current_step();
        match (req.tool_choice.as_deref(), current) {
            (Some("auto") | None, _) => Reply::text(ThinksBeforeCalls::thinking(req)),
            (Some("required"), Some(step)) if req.offers(SOLVE_REPLAN) => Reply::calls(vec![(
                SOLVE_REPLAN,
                serde_json::json!({"reason": "do this step first", "steps": [{"goal": step.goal}]}),
            )]),
            _ => self.then.next_move(req),
        }
    }
}

/// A small model that, asked for a call in a step, runs the same work call again and again,
/// a malformed copy in between (so no two rounds in a row make the same call and the
/// repetition guard's streak stays short), as the 1.5B model did on llama.cpp's server: it ran
/// `zack_age = 21 / 2` eight times in one step until the turn ran out of rounds. Asked with
/// `auto`, it thinks aloud towards [`SMALL_MODEL_RESULT`]; offered no work tool, it makes
/// `then`'s move.
///
/// **Engine:** under `solve.enforce: decoding`, the step's first repeated call leaves only
/// `solve_finish_step` for its next rounds (a call outside that is not run, and the round is
/// asked again offering only it). **Ending:** `answered`.
#[derive(Debug, Default)]
pub struct RepeatsItsWorkCall {
    pub then: WellBehaved,
    calls: AtomicUsize,
}

impl RepeatsItsWorkCall {
    pub fn new(then: WellBehaved) -> Self {
        RepeatsItsWorkCall {
            then,
            calls: AtomicUsize::new(0),
        }
    }
}

impl Policy for RepeatsItsWorkCall {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        let step_open = req.plan().is_some_and(|plan| !plan.all_done());
        let forced = matches!(req.tool_choice.as_deref(), Some(c) if c != "auto" && c != "none");
        if !step_open || !forced {
            return match req.tool_choice.as_deref() {
                Some("auto") | None => Reply::text(ThinksBeforeCalls::thinking(req)),
                _ => self.then.next_move(req),
            };
        }
        let Some(tool) = req.work_tools().next().map(str::to_string) else {
            return self.then.next_move(req);
        };
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let key = if n.is_multiple_of(2) {
            "zack_age = 21 / 2"
        } else {
            "zack_age = 21 / 2\",\"timeout_s\":30}"
        };
        Reply::calls(vec![(tool.as_str(), work_args(req, &tool, key))])
    }
}

/// A small model on an endpoint that reads a narrowed required choice as plain `required`
/// (llama.cpp's server): asked with `auto`, it thinks aloud towards [`SMALL_MODEL_RESULT`];
/// asked for a call once it has a plan, it calls `solve_plan` again whenever it is offered,
/// as the 1.5B model did there; not offered it, it makes `then`'s move.
///
/// **Engine:** under `solve.enforce: decoding`, the second plan is not run, and `solve_plan`
/// is not offered again for the rest of the turn. **Ending:** `answered`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlansAgainWhenForced {
    pub then: WellBehaved,
}

impl Policy for PlansAgainWhenForced {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        match (req.tool_choice.as_deref(), req.current_step()) {
            (Some("auto") | None, _) => Reply::text(ThinksBeforeCalls::thinking(req)),
            (Some("required"), Some(step)) if req.offers(SOLVE_PLAN) => Reply::calls(vec![(
                SOLVE_PLAN,
                serde_json::json!({"analysis": "start again", "steps": [{"goal": step.goal}]}),
            )]),
            _ => self.then.next_move(req),
        }
    }
}

/// A small model that opens each step's free round with a tool result of its own, as the
/// 1.5B model did on llama.cpp's server: asked with `auto` once it has a plan, it writes
/// `<tool_response>` and a result nothing produced; asked for a call, it makes `then`'s move.
/// A request that stops at `<tool_response` is honoured as a server would: the reply ends
/// where the invention would begin, with nothing written.
///
/// **Engine:** the invented result is cut; from then on every request of the turn stops where
/// a result would begin. **Ending:** `answered`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InventsToolResponses {
    pub then: WellBehaved,
}

impl Policy for InventsToolResponses {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        let step_open = req.plan().is_some_and(|plan| !plan.all_done());
        if req.tool_choice.as_deref() != Some("auto") || !step_open {
            return self.then.next_move(req);
        }
        if req
            .stop
            .iter()
            .any(|s| "<tool_response>".starts_with(s.as_str()))
        {
            return Reply::text("");
        }
        Reply::text(format!(
            "<tool_response>\n{{\"stdout\": \"{SMALL_MODEL_RESULT}\"}}\n</tool_response>"
        ))
    }
}

/// A small model whose required calls go round in a loop inside their JSON: asked with
/// `auto`, it thinks aloud towards [`SMALL_MODEL_RESULT`]; asked for a call, it opens a
/// `solve_plan` call and repeats one step until the output limit (`finish_reason: length`),
/// as the 0.5B model did in-process; asked for text, it answers in prose.
///
/// **Engine:** under `solve.enforce: decoding`, the cut call is dropped and, being a loop, not
/// asked again: decoding lets go and the model's own reasoning stands as its answer.
/// **Ending:** `answered_without_plan`, with the reasoning as the answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoopsInForcedCall;

impl LoopsInForcedCall {
    /// The looping call's text: one step goal, over and over.
    fn looping_call() -> String {
        let step = r#"{"goal": "Fold a piece of paper vertically and unfold"}, "#;
        format!(
            r#"{{"name": "solve_plan", "arguments": {{"analysis": "fold it", "steps": [{}"#,
            step.repeat(24)
        )
    }
}

impl Policy for LoopsInForcedCall {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        match req.tool_choice.as_deref() {
            Some("auto") | None => Reply::text(ThinksBeforeCalls::thinking(req)),
            Some("none") => Reply::text(prose_answer(req)),
            Some(_) => {
                Reply::text(LoopsInForcedCall::looping_call()).map_turn(|t| t.with_finish("length"))
            }
        }
    }
}

/// [`LoopsInForcedCall`] through llama.cpp's server: the looping call comes back as a native
/// call whose arguments the output limit cut short (the client reads the server's error in
/// place of `finish_reason: "length"` as that cut).
///
/// **Engine:** as for [`LoopsInForcedCall`]: the cut call is not run, and being a loop, not
/// asked again. **Ending:** `answered_without_plan`, with the reasoning as the answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoopsInForcedNativeCall;

impl Policy for LoopsInForcedNativeCall {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        match req.tool_choice.as_deref() {
            Some("auto" | "none") | None => LoopsInForcedCall.reply(req),
            Some(_) => {
                let written = LoopsInForcedCall::looping_call();
                let arguments = written
                    .split_once(r#""arguments": "#)
                    .map_or(written.as_str(), |(_, arguments)| arguments);
                Reply::raw_calls(vec![(SOLVE_PLAN, arguments)])
                    .map_turn(|t| t.with_finish("length"))
            }
        }
    }
}

/// A small model that, once it has a plan, answers a free round by copying the tail it was
/// shown (the progress block and its notices) over and over until the output limit, as the
/// 0.5B model did in-process; asked for a call, it makes `then`'s move.
///
/// **Engine:** under `solve.enforce: decoding`, the cut copy is not continued and nothing of
/// it is kept: the call is asked for and the spine goes on. **Ending:** `answered`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopiesItsTail {
    pub then: WellBehaved,
}

impl Policy for CopiesItsTail {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        let free = matches!(req.tool_choice.as_deref(), Some("auto") | None);
        let tail = req
            .messages
            .last()
            .filter(|m| m.role == deepsolve_core::Role::User && req.has_plan())
            .map(|m| m.content.clone());
        match tail {
            Some(tail) if free => {
                Reply::text(format!("{tail}\n").repeat(6)).map_turn(|t| t.with_finish("length"))
            }
            _ => self.then.next_move(req),
        }
    }
}

/// A small model that, every step finished, answers the answer round (`tool_choice: "none"`)
/// by writing its last `solve_finish_step` call again, for as long as the tools are offered:
/// after a sentence of prose, in a ```` ```json ```` block, as the 1.5B model did on
/// llama.cpp's server; offered none, it answers in prose. `stubborn`, it writes the call as
/// bare JSON, as the 1.5B model did in-process, offered none too, and only under the
/// ultimatum answers in prose. Until then it makes `then`'s moves.
///
/// **Engine:** the call is set aside and the answer round asked again, offering no tools: the
/// prose answer stands (`answered`). Stubborn, that reply is not an answer either: the model
/// is asked once more under the ultimatum, offered no tools, and its prose answer stands
/// (`empty_rounds`, a forced answer holding [`SMALL_MODEL_RESULT`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnswersWithACall {
    pub then: WellBehaved,
    pub stubborn: bool,
}

impl Policy for AnswersWithACall {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        let all_done = req.plan().is_some_and(|plan| plan.all_done());
        let offered_none = req.tools.is_empty();
        let under_ultimatum = req.last_user_text().contains(ULTIMATUM_MARKER);
        let writes_call = if offered_none {
            self.stubborn && !under_ultimatum
        } else {
            req.tool_choice.as_deref() == Some("none")
        };
        if all_done && writes_call {
            let summary = format!("The result is {SMALL_MODEL_RESULT}.");
            let last = req
                .plan()
                .and_then(|plan| plan.steps.last().map(|s| s.id.clone()));
            let arguments = serde_json::json!({
                "step_id": last.unwrap_or_default(),
                "summary": summary,
            });
            let call = call_object(SOLVE_FINISH_STEP, &arguments.to_string());
            if self.stubborn {
                return Reply::text(call);
            }
            return Reply::text(format!(
                "To sum up, we can use the `code_execution` tool to check it.\n```json\n{call}\n```"
            ));
        }
        if all_done && (offered_none || under_ultimatum) {
            return Reply::text(prose_answer(req));
        }
        common(req).unwrap_or_else(|| self.then.next_move(req))
    }
}

/// A small model that closes every step after the first with the first step's summary,
/// copied from the progress block, as the 1.5B model did in-process, and sends the same call
/// again when it is refused; otherwise `then`'s moves.
///
/// **Engine:** each copied summary is refused once, then stands; the turn goes on to its
/// answer. **Ending:** `answered`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopiesSummaries {
    pub then: WellBehaved,
}

impl Policy for CopiesSummaries {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if let Some(reply) = common(req) {
            return reply;
        }
        let first =
            (req.plan()).and_then(|plan| plan.done_steps().next().and_then(|s| s.summary.clone()));
        let copy = |(name, arguments): (String, String)| {
            let Some(first) = first.as_deref().filter(|_| name == SOLVE_FINISH_STEP) else {
                return (name, arguments);
            };
            let mut args: Value = serde_json::from_str(&arguments).unwrap_or_default();
            args["summary"] = Value::String(first.to_string());
            (name, args.to_string())
        };
        self.then.next_move(req).map_turn(|mut turn| {
            turn.tool_calls = turn.tool_calls.into_iter().map(copy).collect();
            turn
        })
    }
}

/// A small model that, every step finished, answers and then says the answer round's
/// instruction back about its own answer, in its own sentence ("This result is stated
/// plainly, and the explanation follows." — the 1.5B model in-process, after "Its first line
/// is the result itself, stated plainly; the explanation follows."); otherwise `then`'s moves.
///
/// **Engine:** the sentence is cut from the answer. **Ending:** `answered`, with
/// [`SMALL_MODEL_RESULT`] in the answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TalksAboutItsAnswer {
    pub then: WellBehaved,
}

impl Policy for TalksAboutItsAnswer {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        let all_done = req.plan().is_some_and(|plan| plan.all_done());
        let said_back = if in_chinese(req) {
            "如上所述，第一行直接写出结果本身，说明放在后面。"
        } else {
            "This result is stated plainly, and the explanation follows."
        };
        let answer = format!("{}\n{said_back}", prose_answer(req));
        let reply = common(req).unwrap_or_else(|| self.then.next_move(req));
        reply.map_turn(|mut turn| {
            if all_done && turn.tool_calls.is_empty() {
                turn.text = Some(answer);
            }
            turn
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_in_content_leave_no_native_call() {
        let reply = calls_in_content(
            Reply::calls(vec![("solve_plan", serde_json::json!({"analysis": "a"}))]),
            |name, arguments| format!("```json\n{}\n```", call_object(name, arguments)),
        );
        let turn = reply.turn().expect("a turn");
        assert!(turn.tool_calls.is_empty());
        assert_eq!(
            turn.text.as_deref(),
            Some("```json\n{\"arguments\":{\"analysis\":\"a\"},\"name\":\"solve_plan\"}\n```")
        );
    }
}

/// Whether `req` asks for a new problem's first working plainly (`solve.draft`): the draft's
/// short system prompt and the problem, no tools.
fn asks_for_draft(req: &PolicyRequest) -> bool {
    use deepsolve_core::{Language, Text, Texts};
    let system = req.messages.first().map(|m| m.content.as_str());
    req.tools.is_empty()
        && req.messages.len() == 2
        && [Language::En, Language::Zh]
            .iter()
            .any(|language| system == Some(Texts::builtin(*language).get(Text::DraftSystem)))
}

/// A small model sampled at a temperature: each time it is asked for a first working plainly
/// it works the problem to the next of `results` in turn, boxed (the 1.5B model's samples of
/// one request reached different results on 10 of 30 problems); from there it is
/// [`ThinksBeforeCalls`], its answers (asked for text) boxing the next of `answers` in turn
/// (the last one again once they run out; no box where there are none).
///
/// **Engine:** drafts are asked for until one result is reached twice (`solve.drafts`); the
/// first working that reached it is the reasoning the plan starts from. Where none is reached
/// twice, the plan's round is told the results. The answer stands whatever it boxes (the
/// answer's round is reminded of the agreed result, once). **Ending:** `answered`.
#[derive(Debug)]
pub struct DraftsDiffer {
    pub results: &'static [&'static str],
    pub answers: &'static [&'static str],
    pub drafted: AtomicUsize,
    pub answered: AtomicUsize,
    pub then: ThinksBeforeCalls,
}

impl DraftsDiffer {
    pub fn new(
        results: &'static [&'static str],
        answers: &'static [&'static str],
        then: WellBehaved,
    ) -> Self {
        DraftsDiffer {
            results,
            answers,
            drafted: AtomicUsize::new(0),
            answered: AtomicUsize::new(0),
            then: ThinksBeforeCalls { then },
        }
    }

    /// The next answer's result, if answers box one.
    fn next_answer(&self) -> Option<&'static str> {
        let n = self.answered.fetch_add(1, Ordering::SeqCst);
        self.answers.get(n).or(self.answers.last()).copied()
    }
}

impl Policy for DraftsDiffer {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if !asks_for_draft(req) {
            let answering = req.tool_choice.as_deref() == Some("none");
            return self.then.reply(req).map_turn(|mut turn| {
                if answering
                    && turn.tool_calls.is_empty()
                    && let Some(text) = &mut turn.text
                    && let Some(result) = self.next_answer()
                {
                    text.push_str(&format!(" \\boxed{{{result}}}"));
                }
                turn
            });
        }
        let n = self.drafted.fetch_add(1, Ordering::SeqCst);
        let result = self.results[n % self.results.len()];
        Reply::text(if in_chinese(req) {
            format!("第一部分得 6，第二部分得 7，合起来是 \\boxed{{{result}}}。")
        } else {
            format!("Part 1 gives 6 and part 2 gives 7, so together \\boxed{{{result}}}.")
        })
    }
}
