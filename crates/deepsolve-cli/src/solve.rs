//! `deepsolve solve`: one turn, rendered live or as NDJSON.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::bail;
use deepsolve_core::{ChatModel, Engine, ToolRef, TurnSpec};
use deepsolve_protocol::{Language, Protocol, StopReason, TurnOutcome};
use deepsolve_tools::{REASON, ReasonTool};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub(crate) mod sandbox_tools;

use crate::render::{JsonRenderer, LiveRenderer, Renderer};
use crate::setup::{load_settings, main_client, reason_client};
use crate::{LangArg, ProtocolArg, SolveArgs};

/// Opt-in tools the design knows; the ones not built yet are refused by name.
const KNOWN_OPT_IN: [&str; 3] = [REASON, "web_search", "geogebra_analysis"];

pub async fn run(args: SolveArgs) -> anyhow::Result<ExitCode> {
    let loaded = load_settings(&args.config)?;
    let model = main_client(&loaded)?;
    let requested = requested_tools(&args.tools, &loaded.settings.tools.enabled)?;
    let mut tools: Vec<ToolRef> = Vec::new();
    if requested.iter().any(|t| t == REASON) {
        let solve = &loaded.settings.solve;
        let reasoner = reason_client(&loaded, &model)?;
        tools.push(Arc::new(ReasonTool::new(
            reasoner,
            solve.max_tokens,
            solve.temperature as f32,
        )));
    }
    let turn_id = new_turn_id();
    let mut workspace = None;
    let mut offered = requested;
    if let Some((code_tools, names)) = sandbox_tools::mount(&loaded.settings).await? {
        workspace = Some(sandbox_tools::turn_workspace(&turn_id)?);
        tools.extend(code_tools);
        offered.extend(names);
    }
    let engine = Engine::new(tools)?;
    let mut spec = TurnSpec::new(turn_id, args.problem.clone());
    spec.workspace = workspace.clone();
    spec.language = match args.lang {
        LangArg::En => Language::En,
        LangArg::Zh => Language::Zh,
    };
    spec.config = loaded.settings.solve.clone();
    if let Some(window) = loaded.settings.llm.context_window {
        spec.context_window = window;
    }
    spec.tools = offered;
    spec.protocol = protocol(args.protocol, loaded.settings.llm.protocol);

    let renderer: Box<dyn Renderer> = if args.json {
        Box::new(JsonRenderer::new())
    } else {
        Box::new(LiveRenderer::new(model.name()).with_workspace(workspace))
    };
    let outcome = drive(&engine, model.as_ref(), spec, renderer).await?;
    Ok(exit_code(&outcome))
}

fn requested_tools(flags: &[String], enabled: &[String]) -> anyhow::Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for name in enabled.iter().chain(flags) {
        let name = name.trim();
        if !KNOWN_OPT_IN.contains(&name) {
            bail!(
                "unknown tool '{name}': opt-in tools are {}",
                KNOWN_OPT_IN.join(", ")
            );
        }
        if name != REASON {
            bail!("the tool '{name}' is not available in this build yet; available: {REASON}");
        }
        if !out.iter().any(|t| t == name) {
            out.push(name.to_string());
        }
    }
    Ok(out)
}

/// `--protocol` wins over `llm.protocol`.
fn protocol(flag: Option<ProtocolArg>, setting: Protocol) -> Protocol {
    match flag {
        Some(ProtocolArg::Native) => Protocol::Native,
        Some(ProtocolArg::Tags) => Protocol::Tags,
        Some(ProtocolArg::Auto) => Protocol::Auto,
        None => setting,
    }
}

fn new_turn_id() -> String {
    format!("turn_{}", uuid::Uuid::now_v7().simple())
}

/// Run the turn on a task while the renderer consumes its events; Ctrl-C cancels it cleanly
/// (a second Ctrl-C exits at once).
async fn drive(
    engine: &Engine,
    model: &dyn ChatModel,
    spec: TurnSpec,
    mut renderer: Box<dyn Renderer>,
) -> anyhow::Result<TurnOutcome> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let watcher = tokio::spawn(watch_ctrl_c(cancel.clone()));
    let outcome = {
        let turn = engine.run_turn(model, spec, &tx, cancel.clone());
        tokio::pin!(turn);
        loop {
            tokio::select! {
                Some(event) = rx.recv() => renderer.event(&event),
                result = &mut turn => break result?,
            }
        }
    };
    drop(tx);
    while let Some(event) = rx.recv().await {
        renderer.event(&event);
    }
    watcher.abort();
    renderer.finish(&outcome);
    Ok(outcome)
}

async fn watch_ctrl_c(cancel: CancellationToken) {
    if tokio::signal::ctrl_c().await.is_ok() {
        eprintln!("\ncancelling… (press Ctrl-C again to quit at once)");
        cancel.cancel();
        if tokio::signal::ctrl_c().await.is_ok() {
            std::process::exit(130);
        }
    }
}

fn exit_code(outcome: &TurnOutcome) -> ExitCode {
    match (outcome.stop_reason, &outcome.answer) {
        (StopReason::Cancelled, _) => ExitCode::from(130),
        (_, Some(_)) => ExitCode::SUCCESS,
        (_, None) => ExitCode::from(1),
    }
}
