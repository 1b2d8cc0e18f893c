//! Tool dispatch for one round: every call judged in order (`judge`), solve tools run inline,
//! work tools in parallel with timeouts (`run`) — and exactly one result for every call,
//! always.

mod judge;
mod repetition;
mod run;
mod toolbox;

use std::collections::HashMap;

use serde_json::Value;
use tokio::time::Instant;

use crate::config::SolveConfig;
use crate::json_repair::{JsonError, parse_lenient};
use crate::message::ToolCall;
use crate::solve::{SessionHandle, SpineEffect, spine};
use crate::texts::Texts;
use crate::tool::{ToolContext, ToolOutput};
use crate::wire::history::CODE_TOOL;

use judge::{Candidate, Round, Verdict};
use run::{Bounds, Ran, run_work};

pub(crate) use repetition::{FORCE_AT, RepetitionGuard, Signature, signature};
pub(crate) use toolbox::{InvalidSchema, Mounted, Toolbox};

/// The result of one call, in call order.
pub(crate) struct CallResult {
    pub(crate) call: ToolCall,
    /// What the call's event and the turn record carry.
    pub(crate) output: ToolOutput,
    /// What the model is shown instead, when it differs (an internal tool error).
    pub(crate) for_model: Option<String>,
    pub(crate) duration_ms: u64,
    pub(crate) effect: SpineEffect,
}

impl CallResult {
    /// What the model is shown (before truncation).
    pub(crate) fn model_content(&self) -> &str {
        self.for_model.as_deref().unwrap_or(&self.output.content)
    }
}

pub(crate) struct BatchInput<'a> {
    pub(crate) calls: &'a [ToolCall],
    pub(crate) toolbox: &'a Toolbox,
    pub(crate) session: &'a SessionHandle,
    pub(crate) config: &'a SolveConfig,
    pub(crate) guard: &'a mut RepetitionGuard,
    pub(crate) deadline: Instant,
    pub(crate) base_ctx: &'a ToolContext,
    pub(crate) texts: &'a Texts,
}

pub(crate) struct BatchOutput {
    pub(crate) results: Vec<CallResult>,
    /// Each call's signature, in the order of the calls (what the open step has done is
    /// kept by these, `engine::decoding`).
    pub(crate) signatures: Vec<Signature>,
    /// The repetition guard reached its forced-answer threshold.
    pub(crate) force_answer: bool,
}

/// A call judged, waiting to run (or already answered).
struct Judged<'a> {
    call: &'a ToolCall,
    args: Value,
    verdict: Verdict,
}

/// A round's calls as read: arguments parsed leniently, signatures, and repetition streaks.
struct Read {
    parsed: Vec<Result<Value, JsonError>>,
    signatures: Vec<Signature>,
    streaks: Vec<u32>,
}

impl Read {
    fn new(calls: &[ToolCall], guard: &mut RepetitionGuard) -> Self {
        let parsed: Vec<Result<Value, JsonError>> = calls
            .iter()
            .map(|c| {
                parse_lenient(&c.arguments).map(|args| spine::lenient_arguments(&c.name, args))
            })
            .collect();
        let signatures: Vec<Signature> = calls
            .iter()
            .zip(&parsed)
            .map(|(c, p)| signature(&c.name, p.as_ref().unwrap_or(&Value::Null)))
            .collect();
        let streaks = guard.observe(&signatures);
        Read {
            parsed,
            signatures,
            streaks,
        }
    }
}

/// Decide what to do with each call, run the spine inline and the work tools in parallel.
/// `on_start` is given each call's parsed arguments once it is judged, before any work tool
/// runs (a solve tool has run by then: it emits nothing itself).
pub(crate) async fn run_batch(
    input: BatchInput<'_>,
    on_start: &(dyn Fn(&ToolCall, Value) + Sync),
    on_done: &(dyn Fn(&CallResult) + Sync),
) -> BatchOutput {
    let read = Read::new(input.calls, input.guard);
    let force_answer = read.streaks.iter().any(|s| *s >= FORCE_AT);
    let signatures = read.signatures.clone();
    let judged = judge_all(&input, read, on_start);
    let bounds = Bounds {
        config: input.config,
        deadline: input.deadline,
        texts: input.texts,
    };
    let runs = judged
        .into_iter()
        .map(|j| execute(j, input.base_ctx, &bounds, on_done));
    let results = futures::future::join_all(runs).await;
    note_printed(input.session, &results);
    BatchOutput {
        results,
        signatures,
        force_answer,
    }
}

/// What the round's programs printed goes to the open step, whose summary is checked
/// against it (a failed run's output is a traceback, not a result).
fn note_printed(session: &SessionHandle, results: &[CallResult]) {
    let mut printed = results
        .iter()
        .filter(|r| r.call.name == CODE_TOOL && r.output.ok)
        .peekable();
    if printed.peek().is_none() {
        return;
    }
    let mut session = session.lock().unwrap_or_else(|e| e.into_inner());
    for result in printed {
        session.note_printed(&result.output.content);
    }
}

/// Every call through the gates, in call order (solve tools run as they are judged). A call's
/// parsed arguments move on to its event, and are copied only for a work tool that runs with
/// them: arguments may be megabytes.
fn judge_all<'a>(
    input: &BatchInput<'a>,
    read: Read,
    on_start: &(dyn Fn(&ToolCall, Value) + Sync),
) -> Vec<Judged<'a>> {
    let mut round = Round {
        toolbox: input.toolbox,
        session: input.session,
        config: input.config,
        texts: input.texts,
        limit: input.config.max_parallel_tool_calls as usize,
        has_work: input
            .calls
            .iter()
            .any(|c| input.toolbox.is_work_tool(&c.name)),
        first_of: HashMap::new(),
    };
    let Read {
        parsed,
        signatures,
        streaks,
    } = read;
    input
        .calls
        .iter()
        .zip(parsed)
        .zip(signatures.into_iter().zip(streaks))
        .enumerate()
        .map(|(index, ((call, parsed), (signature, streak)))| {
            let verdict = round.judge(Candidate {
                index,
                call,
                parsed: &parsed,
                signature,
                streak,
            });
            let parsed = parsed.unwrap_or(Value::Null);
            let args = match verdict {
                Verdict::Work(_) => {
                    on_start(call, parsed.clone());
                    parsed
                }
                Verdict::Done { .. } => {
                    on_start(call, parsed);
                    Value::Null
                }
            };
            Judged {
                call,
                args,
                verdict,
            }
        })
        .collect()
}

/// One judged call to its result: a work tool runs under its own child context.
async fn execute(
    judged: Judged<'_>,
    base_ctx: &ToolContext,
    bounds: &Bounds<'_>,
    on_done: &(dyn Fn(&CallResult) + Sync),
) -> CallResult {
    let started = Instant::now();
    let (ran, effect) = match judged.verdict {
        Verdict::Done { output, effect } => (
            Ran {
                output: *output,
                for_model: None,
            },
            effect,
        ),
        Verdict::Work(tool) => {
            let ctx = ToolContext {
                call_id: judged.call.id.clone(),
                cancel: base_ctx.cancel.child_token(),
                progress: base_ctx.progress.for_call(&judged.call.id),
                ..base_ctx.clone()
            };
            let ran = run_work(tool.as_ref(), judged.args, &ctx, bounds).await;
            (ran, SpineEffect::None)
        }
    };
    let result = CallResult {
        call: judged.call.clone(),
        output: ran.output,
        for_model: ran.for_model,
        duration_ms: started.elapsed().as_millis() as u64,
        effect,
    };
    on_done(&result);
    result
}
