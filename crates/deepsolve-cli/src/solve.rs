//! `deepsolve solve`: one turn, rendered live or as NDJSON.

use std::process::ExitCode;
use std::sync::Arc;

use deepsolve_app::{default_workspace_root, hold_workspace, new_turn_id};
use deepsolve_core::{ChatModel, Engine, TurnSpec};
use deepsolve_kb::Knowledge;
use deepsolve_protocol::{Language, Material, Protocol, StopReason, TurnOutcome};
use deepsolve_store::KnowledgeBase;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::kb_cmd::{ingest_file, knowledge, unknown_kb, user_id};
use crate::render::{JsonRenderer, LiveRenderer, Renderer};
use crate::serve::open_store;
use crate::setup::{build_app_with_knowledge, load_settings, report_sandbox};
use crate::{LangArg, ProtocolArg, SolveArgs};

pub(crate) async fn run(args: SolveArgs) -> anyhow::Result<ExitCode> {
    let loaded = load_settings(&args.config)?;
    let turn_id = new_turn_id();
    let prepared = if args.kbs.is_empty() && args.attachments.is_empty() {
        None
    } else {
        match prepare_material(&args, &loaded, &turn_id).await? {
            Ok(prepared) => Some(prepared),
            // Already said on stderr, naming the file.
            Err(code) => return Ok(code),
        }
    };
    let knowledge = prepared.as_ref().map(|p| p.knowledge.clone());
    let material = prepared.as_ref().map(|p| p.material.clone());
    // The knowledge tools read as this user (only material turns need one).
    let user_id = prepared.as_ref().map(|p| p.user.clone());
    let app = build_app_with_knowledge(&loaded, None, None, knowledge).await?;
    let offered = app.tools_for_turn_with(&args.tools, material.is_some())?;
    report_sandbox(&app);
    let language = match args.lang {
        LangArg::En => Language::En,
        LangArg::Zh => Language::Zh,
    };
    // `--image`: ready, and seen by something, before any model call of the turn.
    let images = match crate::images::for_turn(&args.images, &app, &offered, language).await {
        Ok(images) => images,
        Err(code) => return Ok(code),
    };
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
    spec.language = language;
    spec.config = loaded.settings.solve.clone();
    if let Some(window) = loaded.settings.llm.context_window {
        spec.context_window = window;
    }
    spec.tools = offered;
    spec.protocol = protocol(args.protocol, loaded.settings.llm.protocol);
    spec.material = material;
    spec.user_id = user_id;
    spec.images = images.images;
    spec.sees_images = images.sees;

    let model = app.model();
    let renderer: Box<dyn Renderer> = if args.json {
        Box::new(JsonRenderer::new())
    } else {
        Box::new(LiveRenderer::new(model.name()).with_workspace(workspace))
    };
    let outcome = drive(app.engine(), model.as_ref(), spec, renderer).await?;
    if let Some(prepared) = prepared {
        prepared.forget_attachments().await;
    }
    drop(held);
    if let Some(pass) = automatic_gc {
        pass.finish();
    }
    Ok(exit_code(&outcome))
}

/// What `--kb` and `--attach` give the turn: the KBs (an unknown one is an error listing the
/// user's), the attachments read into the turn's own hidden KB with their progress on stderr
/// (one that fails: "error: FILE: why" and exit 1, before any model call), and the service
/// the knowledge tools search.
async fn prepare_material(
    args: &SolveArgs,
    loaded: &deepsolve_settings::Loaded,
    turn_id: &str,
) -> anyhow::Result<Result<Prepared, ExitCode>> {
    let store = open_store(&args.database, &loaded.settings.server).await?;
    let user = user_id(&store, args.user.as_deref()).await?;
    let knowledge = knowledge(loaded, store)?;
    let kbs = knowledge
        .resolve_kbs(&user, &args.kbs)
        .await
        .map_err(unknown_kb)?;
    let attachments = if args.attachments.is_empty() {
        None
    } else {
        let kb = knowledge.attachments_kb(&user, turn_id).await?;
        for file in &args.attachments {
            if let Err(failure) = ingest_file(&knowledge, &user, &kb, file).await {
                eprintln!("{} {}", console::style("error:").red(), failure.message);
                let _ = knowledge.delete_kb(&user, &kb.id).await;
                return Ok(Err(ExitCode::from(1)));
            }
        }
        Some(kb)
    };
    let material = knowledge
        .material(&user, &kbs, attachments.as_ref())
        .await?;
    Ok(Ok(Prepared {
        knowledge,
        material: Arc::new(material),
        user,
        attachments,
    }))
}

/// A turn's material and what it took to make it.
struct Prepared {
    knowledge: Knowledge,
    material: Arc<Material>,
    user: String,
    /// The turn's hidden KB of attached files.
    attachments: Option<KnowledgeBase>,
}

impl Prepared {
    /// A command-line turn is not stored, so nothing can resume it: its attachments are
    /// deleted with it rather than left in the store unseen.
    async fn forget_attachments(self) {
        let Some(kb) = self.attachments else { return };
        if let Err(e) = self.knowledge.delete_kb(&self.user, &kb.id).await {
            eprintln!("warning: the turn's attachments stay in the store: {e}");
        }
    }
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
