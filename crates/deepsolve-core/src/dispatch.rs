//! Tool dispatch for one round (DESIGN §5.3): allowlist, lenient parsing, schema validation,
//! duplicates, the plan-first gate, the repetition guard, bounded parallel execution with
//! timeouts — and exactly one result for every call, always.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use futures::FutureExt;
use serde_json::Value;

use crate::config::SolveConfig;
use crate::json_repair::{JsonError, parse_lenient};
use crate::message::ToolCall;
use crate::model::ToolSpec;
use crate::solve::spine::{self, SOLVE_FINISH_STEP, SpineEffect};
use crate::solve::{SessionHandle, is_solve_tool};
use crate::texts::{Text, Texts};
use crate::tool::{Tool, ToolContext, ToolOutput, ToolRef};

/// A tool with its compiled argument validator.
pub struct Mounted {
    pub spec: ToolSpec,
    pub tool: Option<ToolRef>,
    validator: jsonschema::Validator,
}

impl Mounted {
    pub fn new(spec: ToolSpec, tool: Option<ToolRef>) -> Result<Self, String> {
        let validator = jsonschema::validator_for(&spec.parameters)
            .map_err(|e| format!("tool {} has an invalid schema: {e}", spec.name))?;
        Ok(Mounted {
            spec,
            tool,
            validator,
        })
    }

    fn validate(&self, args: &Value) -> Result<(), String> {
        let errors: Vec<String> = self
            .validator
            .iter_errors(args)
            .map(|e| {
                let path = e.instance_path().to_string();
                if path.is_empty() {
                    e.to_string()
                } else {
                    format!("{e} at {path}")
                }
            })
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }
}

/// The tools offered in one turn, by name.
pub struct Toolbox {
    mounted: Vec<Arc<Mounted>>,
}

impl Toolbox {
    pub fn new(mounted: Vec<Arc<Mounted>>) -> Self {
        Toolbox { mounted }
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.mounted.iter().map(|m| m.spec.clone()).collect()
    }

    /// The work tools' implementations (for turn start/finish hooks).
    pub fn work_tools(&self) -> impl Iterator<Item = &ToolRef> {
        self.mounted.iter().filter_map(|m| m.tool.as_ref())
    }

    pub fn names(&self) -> Vec<String> {
        self.mounted.iter().map(|m| m.spec.name.clone()).collect()
    }

    /// Exact name first, then a unique case-insensitive match.
    pub fn resolve(&self, name: &str) -> Option<&Arc<Mounted>> {
        let name = name.trim();
        if let Some(m) = self.mounted.iter().find(|m| m.spec.name == name) {
            return Some(m);
        }
        let mut ci = self
            .mounted
            .iter()
            .filter(|m| m.spec.name.eq_ignore_ascii_case(name));
        match (ci.next(), ci.next()) {
            (Some(m), None) => Some(m),
            _ => None,
        }
    }
}

/// Tracks how many rounds in a row each exact call was made.
#[derive(Default)]
pub struct RepetitionGuard {
    streaks: HashMap<String, u32>,
}

pub const REFUSE_AT: u32 = 3;
pub const FORCE_AT: u32 = 5;

impl RepetitionGuard {
    /// Record a round's call signatures; returns each one's streak (rounds in a row).
    pub fn observe(&mut self, sigs: &[String]) -> Vec<u32> {
        let mut next = HashMap::new();
        let streaks = sigs
            .iter()
            .map(|sig| {
                *next
                    .entry(sig.clone())
                    .or_insert_with(|| self.streaks.get(sig).copied().unwrap_or(0) + 1)
            })
            .collect();
        self.streaks = next;
        streaks
    }
}

/// A stable text for `(name, arguments)`, keys sorted at every depth.
pub fn signature(name: &str, args: &Value) -> String {
    fn canon(v: &Value, out: &mut String) {
        match v {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for k in keys {
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    canon(&map[k], out);
                    out.push(',');
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for item in items {
                    canon(item, out);
                    out.push(',');
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = format!("{name}:");
    canon(args, &mut out);
    out
}

/// The result of one call, in call order.
pub struct CallResult {
    pub call: ToolCall,
    pub args: Value,
    pub output: ToolOutput,
    pub duration_ms: u64,
    pub effect: SpineEffect,
}

enum Plan {
    Done(ToolOutput, SpineEffect),
    Work(ToolRef),
}

pub struct BatchInput<'a> {
    pub calls: &'a [ToolCall],
    pub toolbox: &'a Toolbox,
    pub session: &'a SessionHandle,
    pub config: &'a SolveConfig,
    pub guard: &'a mut RepetitionGuard,
    pub deadline: Instant,
    pub base_ctx: &'a ToolContext,
    pub texts: &'a Texts,
}

pub struct BatchOutput {
    pub results: Vec<CallResult>,
    /// The repetition guard reached its forced-answer threshold.
    pub force_answer: bool,
}

/// Decide what to do with each call, run the spine inline and the work tools in parallel.
/// `on_start` is told about each call (with its parsed arguments) before anything runs.
pub async fn run_batch(
    input: BatchInput<'_>,
    on_start: &(dyn Fn(&ToolCall, &Value) + Sync),
    on_done: &(dyn Fn(&CallResult) + Sync),
) -> BatchOutput {
    let BatchInput {
        calls,
        toolbox,
        session,
        config,
        guard,
        deadline,
        base_ctx,
        texts,
    } = input;
    let limit = config.max_parallel_tool_calls as usize;
    let has_work = calls.iter().any(|c| {
        toolbox
            .resolve(&c.name)
            .is_some_and(|m| !is_solve_tool(&m.spec.name))
    });

    let parsed: Vec<Result<Value, JsonError>> =
        calls.iter().map(|c| parse_lenient(&c.arguments)).collect();
    let sigs: Vec<String> = calls
        .iter()
        .zip(&parsed)
        .map(|(c, p)| signature(&c.name, p.as_ref().unwrap_or(&Value::Null)))
        .collect();
    let streaks = guard.observe(&sigs);
    let force_answer = streaks.iter().any(|s| *s >= FORCE_AT);

    let mut plans = Vec::with_capacity(calls.len());
    let mut first_of: HashMap<&str, &str> = HashMap::new();
    for (i, call) in calls.iter().enumerate() {
        let args = parsed[i].clone().unwrap_or(Value::Null);
        on_start(call, &args);
        let plan = decide(DecideInput {
            index: i,
            call,
            parsed: &parsed[i],
            streak: streaks[i],
            limit,
            has_work,
            first_of: &mut first_of,
            sig: &sigs[i],
            toolbox,
            session,
            config,
            texts,
        });
        plans.push((args, plan));
    }

    let futures = calls.iter().zip(plans).map(|(call, (args, plan))| {
        let ctx = ToolContext {
            call_id: call.id.clone(),
            cancel: base_ctx.cancel.child_token(),
            ..base_ctx.clone()
        };
        async move {
            let started = Instant::now();
            let (output, effect) = match plan {
                Plan::Done(output, effect) => (output, effect),
                Plan::Work(tool) => (
                    run_work(tool.as_ref(), args.clone(), &ctx, config, deadline, texts).await,
                    SpineEffect::None,
                ),
            };
            let result = CallResult {
                call: call.clone(),
                args,
                output,
                duration_ms: started.elapsed().as_millis() as u64,
                effect,
            };
            on_done(&result);
            result
        }
    });
    let results = futures::future::join_all(futures).await;
    BatchOutput {
        results,
        force_answer,
    }
}

struct DecideInput<'a, 'b> {
    index: usize,
    call: &'a ToolCall,
    parsed: &'a Result<Value, JsonError>,
    streak: u32,
    limit: usize,
    has_work: bool,
    first_of: &'b mut HashMap<&'a str, &'a str>,
    sig: &'a str,
    toolbox: &'a Toolbox,
    session: &'a SessionHandle,
    config: &'a SolveConfig,
    texts: &'a Texts,
}

fn refuse(message: impl Into<String>) -> Plan {
    Plan::Done(ToolOutput::error(message), SpineEffect::None)
}

/// The gates, in order. Solve tools run here, inline and in call order, because they change
/// the state later calls of the same batch are judged by.
fn decide(d: DecideInput<'_, '_>) -> Plan {
    let texts = d.texts;
    if d.index >= d.limit {
        return refuse(texts.render(Text::RefuseOverLimit, &[("limit", &d.limit)]));
    }
    let Some(mounted) = d.toolbox.resolve(&d.call.name) else {
        return refuse(texts.render(
            Text::RefuseUnknownTool,
            &[
                ("tool", &d.call.name),
                ("available", &d.toolbox.names().join(", ")),
            ],
        ));
    };
    let name = mounted.spec.name.as_str();
    let args = match d.parsed {
        Ok(args) => args,
        Err(e) => {
            return refuse(texts.render(
                Text::RefuseUnreadableArguments,
                &[("tool", &name), ("error", &e.describe(texts))],
            ));
        }
    };
    if let Err(e) = mounted.validate(args) {
        return refuse(texts.render(
            Text::RefuseInvalidArguments,
            &[("tool", &name), ("errors", &e)],
        ));
    }
    if let Some(first) = d.first_of.get(d.sig) {
        return refuse(texts.render(Text::RefuseDuplicate, &[("first", first)]));
    }
    d.first_of.insert(d.sig, &d.call.id);
    if d.streak >= REFUSE_AT {
        return refuse(texts.render(Text::RefuseRepetition, &[("times", &(d.streak - 1))]));
    }
    if is_solve_tool(name) {
        return run_spine(name, args, d.has_work, d.session, texts);
    }
    let planned = lock(d.session).record.has_plan();
    if d.config.plan_first && !planned {
        return refuse(texts.render(Text::RefusePlanFirst, &[("tool", &name)]));
    }
    match &mounted.tool {
        Some(tool) => Plan::Work(tool.clone()),
        None => refuse(texts.render(Text::RefuseNoImplementation, &[("tool", &name)])),
    }
}

fn run_spine(
    name: &str,
    args: &Value,
    batched_with_work: bool,
    session: &SessionHandle,
    texts: &Texts,
) -> Plan {
    if name == SOLVE_FINISH_STEP && batched_with_work {
        return refuse(texts.get(Text::RefuseFinishBatched));
    }
    let result = spine::handle(&mut lock(session), name, args, texts);
    Plan::Done(result.output, result.effect)
}

fn lock(session: &SessionHandle) -> std::sync::MutexGuard<'_, crate::solve::SolveSession> {
    session.lock().unwrap_or_else(|e| e.into_inner())
}

/// Run one work tool with its timeout (never past the turn deadline); a panic or an error
/// becomes an error result.
async fn run_work(
    tool: &dyn Tool,
    args: Value,
    ctx: &ToolContext,
    config: &SolveConfig,
    deadline: Instant,
    texts: &Texts,
) -> ToolOutput {
    let limit = tool.timeout(config);
    let remaining = deadline.saturating_duration_since(Instant::now());
    let budget = limit.min(remaining).max(Duration::from_millis(1));
    let ctx = &ToolContext {
        deadline: Some(Instant::now() + budget),
        ..ctx.clone()
    };
    let run = AssertUnwindSafe(tool.run(args, ctx)).catch_unwind();
    let name = &tool.spec().name;
    tokio::select! {
        biased;
        _ = ctx.cancel.cancelled() => ToolOutput::error(texts.get(Text::ToolCancelled)),
        r = tokio::time::timeout(budget, run) => match r {
            Err(_) => {
                ctx.cancel.cancel();
                let seconds = budget.as_secs_f64().ceil() as u64;
                ToolOutput::error(texts.render(Text::ToolTimedOut, &[("seconds", &seconds)]))
            }
            Ok(Err(_panic)) => ToolOutput::error(texts.render(Text::ToolPanicked, &[("tool", name)])),
            Ok(Ok(Err(e))) => ToolOutput::error(texts.render(Text::ToolFailed, &[("tool", name), ("error", &e)])),
            Ok(Ok(Ok(out))) => out,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn signature_ignores_key_order() {
        let a = signature("t", &json!({"a": 1, "b": {"c": 2, "d": 3}}));
        let b = signature("t", &json!({"b": {"d": 3, "c": 2}, "a": 1}));
        assert_eq!(a, b);
        assert_ne!(a, signature("u", &json!({"a": 1, "b": {"c": 2, "d": 3}})));
    }

    #[test]
    fn repetition_counts_rounds_in_a_row() {
        let mut g = RepetitionGuard::default();
        let s = vec!["x".to_string()];
        assert_eq!(g.observe(&s), [1]);
        assert_eq!(g.observe(&s), [2]);
        assert_eq!(g.observe(&["y".to_string()]), [1]);
        assert_eq!(g.observe(&s), [1]);
        assert_eq!(g.observe(&s), [2]);
        assert_eq!(g.observe(&s), [3]);
    }
}
