//! The real small model (`DEEPSOLVE_TEST_MODEL`, served by llama.cpp's own server) through the
//! real binary, the spine held at decoding time (`solve.enforce: decoding`), on five short
//! problems: every turn ends with a named stop and is held at decoding time, at least one makes
//! a plan, and no answer carries engine text.

use std::time::Duration;

use deepsolve_core::StopReason;
use deepsolve_testkit::real::{LlamaServer, server_python, test_model};
use serde_json::Value;

use crate::support::Isolated;

const PROBLEMS: [&str; 5] = [
    "Tom has 3 boxes with 4 apples in each. How many apples does he have?",
    "A pen costs 2 dollars. How much do 6 pens cost?",
    "Anna reads 5 pages a day. How many pages does she read in 7 days?",
    "There are 20 birds. 8 fly away. How many are left?",
    "A train travels 60 km each hour. How far does it go in 3 hours?",
];

/// Pieces of the engine's own texts that an answer must never carry.
const ENGINE_TEXT: [&str; 6] = [
    "[deepsolve:",
    "Call `solve_plan` first",
    "Steps are still open",
    "your reasoning above leads to",
    "folded away",
    "progress block",
];

fn events_of(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> impl Iterator<Item = &'a Value> {
    events.iter().filter(move |e| e["type"] == kind)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_small_real_model_follows_the_spine_at_decoding_time_on_five_problems() {
    let (Some(python), Some(model)) = (server_python(), test_model()) else {
        return;
    };
    let server = tokio::task::spawn_blocking(move || LlamaServer::start(&python, &model, 8192))
        .await
        .unwrap()
        .unwrap();
    let home = Isolated::new();
    let mut failures = Vec::new();
    let mut plans = 0;
    for problem in PROBLEMS {
        let mut cmd = home.command();
        // The turn's own clock ends it (with a named stop) well before the command's.
        cmd.timeout(Duration::from_secs(420));
        cmd.args([
            "solve",
            "--json",
            "--base-url",
            &server.url(),
            "--model",
            "test-model",
            "--set",
            "solve.enforce=decoding",
            "--set",
            "solve.max_tokens=384",
            "--set",
            "solve.max_rounds=8",
            "--set",
            "solve.turn_timeout_s=300",
            problem,
        ]);
        let out = cmd.output().expect("run deepsolve");
        let events = events_of(&out.stdout);
        let stop = of_type(&events, "turn_finished")
            .last()
            .and_then(|e| e["stop_reason"].as_str())
            .unwrap_or_default()
            .to_string();
        let answer = of_type(&events, "answer")
            .last()
            .and_then(|e| e["text"].as_str())
            .unwrap_or_default()
            .to_string();
        let planned = of_type(&events, "plan").next().is_some();
        let choices: Vec<&str> = of_type(&events, "round_started")
            .filter_map(|e| e["tool_choice"].as_str())
            .collect();
        eprintln!(
            "{problem}\n  stop {stop}, planned {planned}, rounds {choices:?}\n  answer {answer:?}"
        );
        if StopReason::parse(&stop).is_none() {
            failures.push(format!(
                "{problem}: no named stop ({stop:?}); stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        plans += usize::from(planned);
        // Held at decoding time, round 1 is `auto`, or the drafts (`solve.draft`, at most
        // `solve.drafts`; text only, `none`) followed by the plan's call asked for.
        let drafts = of_type(&events, "round_started")
            .take_while(|e| e["draft"] == true)
            .count();
        let held = match choices.first() {
            Some(&"auto") => drafts == 0,
            Some(&"none") => {
                (1..=3).contains(&drafts)
                    && choices[..drafts].iter().all(|c| *c == "none")
                    && matches!(choices.get(drafts), Some(&"required" | &"solve_plan"))
            }
            _ => false,
        };
        if !held {
            failures.push(format!("{problem}: not held at decoding time: {choices:?}"));
        }
        for piece in ENGINE_TEXT.iter().filter(|p| answer.contains(**p)) {
            failures.push(format!("{problem}: engine text {piece:?} in {answer:?}"));
        }
    }
    // The 0.5B model does not plan every time even when held (seen: 2 and 3 of 5 turns over two
    // runs; llama.cpp's server does not honour a named tool_choice). A plan on every turn is the
    // larger model's target, measured by `deepsolve eval`; here the spine must engage at all.
    if plans == 0 {
        failures.push("no turn of five made a plan".to_string());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
