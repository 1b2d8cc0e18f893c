//! A whole turn of arbitrary model replies through the real `Engine`: the bytes are cut into
//! replies (text, raw tool calls with any name and any argument text, reasoning, finish
//! reasons), in either tool protocol. Whatever the model sends, the turn ends with a stop
//! reason and a `turn_finished` event, the events' `seq` is gapless, and every request the
//! engine builds passes the testkit's request invariants (one system message, every tool call
//! answered exactly once, in order, no invented results...).
#![no_main]

use std::sync::Arc;

use async_trait::async_trait;
use deepsolve_core::{
    Engine, EventKind, Language, Protocol, Tool, ToolContext, ToolError, ToolOutput, ToolSpec,
    TurnSpec, VecSink,
};
use deepsolve_testkit::{Reply, ScriptedModel, Turn};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Tool names a reply may call: the solve spine, the mounted work tool, and one that is not.
const NAMES: [&str; 5] = ["solve_plan", "solve_finish_step", "solve_replan", "echo", "rm_rf"];
/// Fuzzed replies per turn at most (the round budget below ends the turn before that).
const MAX_REPLIES: usize = 12;
/// Plain answers after the fuzzed replies: the engine may ask for more replies than the script
/// holds (nudges, retries, the forced answer), and a model always has one more.
const PADDING: usize = 24;

struct Echo(ToolSpec);

#[async_trait]
impl Tool for Echo {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn run(&self, args: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        match args["text"].as_str().unwrap_or_default() {
            "fail" => Err(ToolError::internal("echo broke")),
            text => Ok(ToolOutput::ok(text.to_string())),
        }
    }
}

fn echo() -> Echo {
    Echo(ToolSpec {
        name: "echo".into(),
        description: "Repeat the text.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": false
        }),
    })
}

/// One reply from one segment: its first byte picks the shape, the rest is the text.
fn reply(segment: &[u8]) -> Reply {
    let Some((&shape, rest)) = segment.split_first() else {
        return Reply::text("");
    };
    let text = String::from_utf8_lossy(rest).into_owned();
    let turn = match shape % 6 {
        0 | 1 => Turn::text(text),
        2 => Turn::text(text).with_finish("length"),
        3 => Turn::text("").with_reasoning(text),
        _ => {
            // Calls: `name|args` pairs separated by newlines.
            let calls = text
                .split('\n')
                .take(4)
                .map(|call| {
                    let (name, args) = call.split_once('|').unwrap_or((call, "{}"));
                    let name = name
                        .bytes()
                        .next()
                        .map_or(NAMES[0], |b| NAMES[usize::from(b) % NAMES.len()]);
                    (name.to_string(), args.to_string())
                })
                .collect();
            Turn::raw_calls(calls)
        }
    };
    Reply::Turn(turn)
}

fuzz_target!(|data: &[u8]| {
    let Some((&setup, script)) = data.split_first() else {
        return;
    };
    let protocol = if setup & 1 == 0 {
        Protocol::Native
    } else {
        Protocol::Tags
    };
    let language = if setup & 2 == 0 {
        Language::En
    } else {
        Language::Zh
    };
    let mut replies: Vec<Reply> =
        script.split(|&b| b == 0xff).take(MAX_REPLIES).map(reply).collect();
    replies.extend((0..PADDING).map(|_| Reply::text("The answer is 2.")));
    let model = ScriptedModel::sequence(replies);
    let Ok(engine) = Engine::new(vec![Arc::new(echo())]) else {
        panic!("the engine builds");
    };
    let mut spec = TurnSpec::new("turn-fuzz", "Solve x + 1 = 3.");
    spec.tools = vec!["echo".into()];
    spec.protocol = protocol;
    spec.language = language;
    spec.config.max_rounds = 8;
    let sink = VecSink::default();
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        panic!("a runtime");
    };
    let outcome = runtime.block_on(engine.run_turn(&model, spec, &sink, CancellationToken::new()));
    let Ok(outcome) = outcome else {
        panic!("a valid spec always starts: {outcome:?}");
    };
    let events = sink.take();
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.seq, i as u64, "seq is gapless from 0");
    }
    match events.last().map(|e| &e.kind) {
        Some(EventKind::TurnFinished { stop_reason, .. }) => {
            assert_eq!(*stop_reason, outcome.stop_reason)
        }
        other => panic!("the last event is turn_finished, got {other:?}"),
    }
    // Request invariants only: a turn may end before the script (padding included) does.
    let violations = model.violations();
    assert!(violations.is_empty(), "request invariants broken: {violations:#?}");
});
