//! Running one work tool: its timeout (never past the turn's deadline), cancellation, and
//! every way it can fail turned into a result.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt;
use serde_json::Value;
use tokio::time::Instant;

use crate::config::SolveConfig;
use crate::texts::{Text, Texts};
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

/// What a work call produced: the output (for events and the record) and, when the model
/// must be shown something else, that.
pub(super) struct Ran {
    pub(super) output: ToolOutput,
    pub(super) for_model: Option<String>,
}

impl Ran {
    fn shown(output: ToolOutput) -> Self {
        Ran {
            output,
            for_model: None,
        }
    }
}

/// The limits of one call.
pub(super) struct Bounds<'a> {
    pub(super) config: &'a SolveConfig,
    pub(super) deadline: Instant,
    pub(super) texts: &'a Texts,
}

/// Run one work tool with its timeout; a panic or an error becomes an error result.
pub(super) async fn run_work(
    tool: &dyn Tool,
    args: Value,
    ctx: &ToolContext,
    b: &Bounds<'_>,
) -> Ran {
    let limit = tool.timeout(b.config);
    let remaining = b.deadline.saturating_duration_since(Instant::now());
    let budget = limit.min(remaining).max(Duration::from_millis(1));
    let ctx = &ToolContext {
        deadline: Some(Instant::now() + budget),
        ..ctx.clone()
    };
    let run = AssertUnwindSafe(tool.run(args, ctx)).catch_unwind();
    let name = &tool.spec().name;
    let texts = b.texts;
    tokio::select! {
        biased;
        _ = ctx.cancel.cancelled() => Ran::shown(ToolOutput::error(texts.get(Text::ToolCancelled))),
        r = tokio::time::timeout(budget, run) => match r {
            Err(_) => {
                ctx.cancel.cancel();
                let seconds = budget.as_secs_f64().ceil() as u64;
                Ran::shown(ToolOutput::error(texts.render(Text::ToolTimedOut, &[("seconds", &seconds)])))
            }
            Ok(Err(_panic)) => Ran::shown(ToolOutput::error(texts.render(Text::ToolPanicked, &[("tool", name)]))),
            Ok(Ok(Err(e))) => failed(name, &e, texts),
            Ok(Ok(Ok(out))) => Ran::shown(out),
        }
    }
}

/// A tool's error: the model sees what it can act on; an internal error's detail stays in
/// the result's event, and the model gets a neutral message.
fn failed(tool: &str, error: &ToolError, texts: &Texts) -> Ran {
    let detail = texts.render(Text::ToolFailed, &[("tool", &tool), ("error", error)]);
    let for_model = match error {
        ToolError::Actionable(_) => None,
        ToolError::Internal(_) => Some(texts.render(Text::ToolInternalError, &[("tool", &tool)])),
    };
    Ran {
        output: ToolOutput::error(detail),
        for_model,
    }
}
