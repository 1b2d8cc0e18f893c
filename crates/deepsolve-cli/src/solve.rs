//! `deepsolve solve`: one turn, rendered live or as NDJSON.

use std::process::ExitCode;

use deepsolve_app::{default_workspace_root, hold_workspace, new_turn_id};
use deepsolve_core::{ChatModel, Engine, TurnSpec};
use deepsolve_protocol::{Language, Protocol, StopReason, TurnOutcome};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::render::{JsonRenderer, LiveRenderer, Renderer};
use crate::setup::{build_app, load_settings, report_sandbox};
use crate::{LangArg, ProtocolArg, SolveArgs};

pub(crate) async fn run(args: SolveArgs) -> anyhow::Result<ExitCode> {
    let loaded = load_settings(&args.config)?;
    let app = build_app(&loaded, None, None).await?;
    let offered = app.tools_for_turn(&args.tools)?;
    report_sandbox(&app);
    let turn_id = new_turn_id();
    // Held until the turn is over: no collection, here or in another process, deletes it.
    let held = if app.needs_workspace(&offered) {
        Some(hold_workspace(&default_workspace_root()?, &turn_id)?)
    } else {
        None
    };
    let workspace = held.as_ref().map(|h| h.path().to_path_buf());
    let automatic_gc = crate::gc::collect_in_background(&loaded.settings);
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

    let model = app.model();
    let renderer: Box<dyn Renderer> = if args.json {
        Box::new(JsonRenderer::new())
    } else {
        Box::new(LiveRenderer::new(model.name()).with_workspace(workspace))
    };
    let outcome = drive(app.engine(), model.as_ref(), spec, renderer).await?;
    drop(held);
    if let Some(pass) = automatic_gc {
        pass.finish();
    }
    Ok(exit_code(&outcome))
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
