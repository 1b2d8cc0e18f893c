//! `deepsolve solve`: one turn, recorded in the store (a session of its own, or the one `-c`
//! or `--session` continues), shown live on stderr or as NDJSON, its answer on stdout or in
//! `-o FILE`.

use deepsolve_app::life::{Recorder, SessionChoice, TurnPlan, hold_workspace_for};
use deepsolve_app::owner::cli_owner;
use deepsolve_app::{AppBuilder, AppError, default_workspace_root, new_turn_id};
use deepsolve_core::{PriorTurn, SolveConfig, count_tokens, prompt_room};
use deepsolve_kb::Knowledge;
use deepsolve_protocol::{Language, Material, Protocol};
use deepsolve_settings::Loaded;
use deepsolve_store::Store;
use deepsolve_tools::Recheck;

use crate::answer::AnswerTarget;
use crate::database::open_store;
use crate::exit::{Exit, UsageError};
use crate::kb_cmd::{ingest_file, unknown_kb};
use crate::output::errln;
use crate::recorded::{self, Recorded};
use crate::render::Display;
use crate::session::{FollowUp, follow_up};
use crate::setup::{build_recording_app, knowledge, load_settings, report_sandbox, user_id};
use crate::{LangArg, ProtocolArg, SolveArgs};

pub(crate) async fn run(args: SolveArgs) -> anyhow::Result<Exit> {
    let problem = crate::input::read_problem(args.problem.as_deref(), args.file.as_deref())?;
    let loaded = load_settings(&args.config)?;
    // The store opens and the session followed up on is read while the model clients are made
    // and the sandbox is probed (a child process: the longest wait before the first request).
    let (opened, builder) = tokio::join!(open(&args, &loaded), app_builder(&loaded));
    let opened = opened?;
    let result = match builder {
        Ok((builder, recheck)) => solve(&args, problem, &loaded, &opened, builder, recheck).await,
        Err(e) => Err(e.into()),
    };
    opened.store.close().await;
    result
}

/// The app's builder, its sandbox from the last probe's verdict when nothing it depends on
/// changed (`deepsolve_app::sandbox::for_settings_remembered`), with the probe to run again
/// beside the turn.
pub(crate) async fn app_builder(
    loaded: &Loaded,
) -> Result<(AppBuilder, Option<Recheck>), AppError> {
    say_first_use_probe(loaded);
    match deepsolve_app::sandbox::probe_file() {
        Some(file) => AppBuilder::from_settings_remembering(loaded, file).await,
        None => Ok((AppBuilder::from_settings(loaded).await?, None)),
    }
}

/// Why the first turn on a new endpoint waits: the app probes it first (`llm.probe`).
pub(crate) fn say_first_use_probe(loaded: &Loaded) {
    if let Some((base_url, model)) = deepsolve_app::probe::first_use_due(loaded) {
        errln!(
            "deepsolve: first use of {model} at {base_url}: checking what it honours (a few requests, once; `deepsolve doctor` shows the verdict)"
        );
    }
}

/// The store a turn is recorded in, who acts on it, and the session followed up on.
struct Opened {
    store: Store,
    user: String,
    follow: Option<FollowUp>,
}

async fn open(args: &SolveArgs, loaded: &Loaded) -> anyhow::Result<Opened> {
    let store = open_store(&args.database, &loaded.settings.server).await?;
    let found = async {
        let user = user_id(&store, args.user.as_deref()).await?;
        let follow = follow_up(&store, &user, args.continue_last, args.session.as_deref()).await?;
        anyhow::Ok((user, follow))
    }
    .await;
    match found {
        Ok((user, follow)) => Ok(Opened {
            store,
            user,
            follow,
        }),
        Err(e) => {
            store.close().await;
            Err(e)
        }
    }
}

async fn solve(
    args: &SolveArgs,
    problem: String,
    loaded: &Loaded,
    opened: &Opened,
    builder: AppBuilder,
    recheck: Option<Recheck>,
) -> anyhow::Result<Exit> {
    let Opened {
        store,
        user,
        follow,
    } = opened;
    let history = follow
        .as_ref()
        .map(|f| f.history.clone())
        .unwrap_or_default();
    let config = loaded.settings.solve.clone();
    // llm.context_window, else the server's own (the probe's verdict), else the default.
    let honours = builder.main_model().honours();
    let (window, _) = deepsolve_app::probe::context_window(&loaded.settings, &honours);
    check_fits(&problem, &history, &config, window)?;
    let turn_id = new_turn_id();
    let prepared = if args.kbs.is_empty() && args.attachments.is_empty() {
        None
    } else {
        match prepare_material(args, loaded, store, user, &turn_id).await? {
            Ok(prepared) => Some(prepared),
            // Already said on stderr, naming the file.
            Err(exit) => return Ok(exit),
        }
    };
    let knowledge = prepared.as_ref().map(|p| p.knowledge.clone());
    let material = prepared.map(|p| p.material);
    // Recorded `running` under this process: should it die, the turn becomes interrupted.
    let recorder = Recorder::spawn(store.clone(), cli_owner());
    let app = build_recording_app(builder, &recorder, knowledge)?;
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
    // Held until the turn's end is recorded: no collection, here or in another process,
    // deletes it.
    let held = hold_workspace_for(&app, &offered, &turn_id, default_workspace_root)?;
    let workspace = held.as_ref().map(|h| h.path().to_path_buf());
    let automatic_gc = crate::gc::collect_in_background(&loaded.settings);

    let plan = TurnPlan {
        turn_id,
        material,
        images,
        ..TurnPlan::new(problem, language, offered, config, window)
    };
    let session = match follow {
        Some(f) => SessionChoice::Continue {
            session_id: f.session_id.clone(),
            history,
        },
        None => SessionChoice::New { history },
    };
    let mut spec = recorder.record(user, session, plan).await?;
    spec.protocol = protocol(args.run.protocol, loaded.settings.llm.protocol);

    let turn = Recorded {
        app: &app,
        recorder: &recorder,
        workspace: held,
        display: Display::new(args.run.json, workspace),
        answer: AnswerTarget {
            json: args.run.json,
            file: args.run.output.clone(),
        },
        base_url: crate::setup::base_url(loaded),
    };
    let exit = rechecking(recheck, recorded::run(turn, spec)).await;
    if let Some(pass) = automatic_gc {
        pass.finish();
    }
    exit
}

/// Run `turn` with the sandbox probe again beside it, when the sandbox came from the last
/// probe's verdict; then say if the probe found that sandbox no longer working (the turn's
/// code calls failed; the next turn probes afresh).
pub(crate) async fn rechecking<T>(recheck: Option<Recheck>, turn: impl Future<Output = T>) -> T {
    let recheck = recheck.map(|recheck| tokio::spawn(recheck.run()));
    let out = turn.await;
    // A probe takes tens of milliseconds; most turns outlast it, and one stuck is not waited for.
    if let Some(recheck) = recheck
        && let Ok(Ok(Some(why))) = tokio::time::timeout(RECHECK_WAIT, recheck).await
    {
        errln!(
            "warning: the sandbox stopped working here: {why}; code tools are off from the next turn (see `deepsolve doctor`)"
        );
    }
    out
}

/// The longest a finished turn waits for its sandbox recheck.
const RECHECK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Refuse, before any model call, a problem (with the session's earlier turns) that cannot
/// fit the model's context window, naming both sizes.
fn check_fits(
    problem: &str,
    history: &[PriorTurn],
    config: &SolveConfig,
    window: u64,
) -> anyhow::Result<()> {
    let earlier: u64 = history
        .iter()
        .map(|t| count_tokens(&t.problem) + count_tokens(&t.answer))
        .sum();
    let tokens = count_tokens(problem) + earlier;
    let room = prompt_room(config, window);
    if tokens <= room {
        return Ok(());
    }
    let what = if earlier > 0 {
        "the problem and the session's earlier turns are"
    } else {
        "the problem is"
    };
    Err(UsageError::error(format!(
        "{what} about {tokens} tokens (estimated), more than the model's context window of {window} tokens can take ({room} after the room kept for the answer); shorten it, or raise llm.context_window if the model's window is larger"
    )))
}

/// What `--kb` and `--attach` give the turn: the KBs (an unknown one is an error listing the
/// user's), the attachments read into the turn's own hidden KB with their progress on stderr
/// (one that fails: "error: FILE: why" and exit 1, before any model call), and the service
/// the knowledge tools search.
async fn prepare_material(
    args: &SolveArgs,
    loaded: &Loaded,
    store: &Store,
    user: &str,
    turn_id: &str,
) -> anyhow::Result<Result<Prepared, Exit>> {
    let knowledge = knowledge(loaded, store.clone())?;
    let kbs = knowledge
        .resolve_kbs(user, &args.kbs)
        .await
        .map_err(unknown_kb)?;
    let attachments = if args.attachments.is_empty() {
        None
    } else {
        let kb = knowledge.attachments_kb(user, turn_id).await?;
        for file in &args.attachments {
            if let Err(failure) = ingest_file(&knowledge, user, &kb, file).await {
                errln!(
                    "{} {}",
                    console::style("error:").for_stderr().red(),
                    failure.message
                );
                let _ = knowledge.delete_kb(user, &kb.id).await;
                return Ok(Err(Exit::Failure));
            }
        }
        Some(kb)
    };
    let material = knowledge.material(user, &kbs, attachments.as_ref()).await?;
    Ok(Ok(Prepared {
        knowledge,
        material,
    }))
}

/// A turn's material and the service that reads it.
struct Prepared {
    knowledge: Knowledge,
    material: Material,
}

/// `--protocol` wins over `llm.protocol`.
pub(crate) fn protocol(flag: Option<ProtocolArg>, setting: Protocol) -> Protocol {
    match flag {
        Some(ProtocolArg::Native) => Protocol::Native,
        Some(ProtocolArg::Tags) => Protocol::Tags,
        Some(ProtocolArg::Auto) => Protocol::Auto,
        Some(ProtocolArg::Fence) => Protocol::Fence,
        Some(ProtocolArg::Code) => Protocol::Code,
        Some(ProtocolArg::Structured) => Protocol::Structured,
        Some(ProtocolArg::Tongyi) => Protocol::Tongyi,
        Some(ProtocolArg::Deepanalyze) => Protocol::DeepAnalyze,
        None => setting,
    }
}
