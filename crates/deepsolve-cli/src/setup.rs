//! From flags to loaded settings, the acting user, the knowledge-base service and a ready
//! app: shared by `solve`, `resume`, `serve`, `kb`, `doctor` and `settings`.

use std::ffi::OsString;
use std::sync::Arc;

use anyhow::bail;
use deepsolve_app::life::Recorder;
use deepsolve_app::{App, AppBuilder, ArtifactRegistry, DEFAULT_BASE_URL, KnowledgeOptions};
use deepsolve_kb::Knowledge;
use deepsolve_kb::extract::ChildCommand;
use deepsolve_settings::{LoadOptions, Loaded};
use deepsolve_store::Store;

use crate::ConfigArgs;
use crate::output::errln;

/// The hidden first argument that makes this binary the PDF parser's child process
/// (`deepsolve_kb::extract::pdf_child_main`): the parser runs out of process, and the child
/// is this same executable, so an installed `deepsolve` needs no second binary beside it.
pub(crate) const PDF_CHILD: &str = "__pdf-child";

/// The PDF child as extraction runs it: this executable with the hidden argument.
pub(crate) fn pdf_child() -> Option<ChildCommand> {
    let program = std::env::current_exe().ok()?;
    Some(ChildCommand {
        program,
        args: vec![OsString::from(PDF_CHILD)],
    })
}

/// Load the layered settings; `--base-url` and `--model` are `--set`s of their keys.
/// Clamp warnings go to stderr (stdout may be an NDJSON stream).
pub(crate) fn load_settings(args: &ConfigArgs) -> anyhow::Result<Loaded> {
    let mut sets = args.sets.clone();
    if let Some(url) = &args.base_url {
        sets.push(format!("llm.base_url={url}"));
    }
    if let Some(model) = &args.model {
        sets.push(format!("llm.model={model}"));
    }
    let options = LoadOptions {
        config_path: args.config.clone(),
        env: std::env::vars().collect(),
        sets,
        tool_sections: deepsolve_app::tool_sections(),
    };
    let loaded = deepsolve_settings::load(&options)?;
    for warning in &loaded.warnings {
        errln!("warning: {warning}");
    }
    Ok(loaded)
}

/// The app on the loaded settings (model clients, sandbox, mounted tools, engine), with the
/// knowledge-base service behind `rag` and `read_source` when the caller has one.
pub(crate) async fn build_app_with_knowledge(
    loaded: &Loaded,
    session_capacity: Option<usize>,
    artifacts: Option<Arc<dyn ArtifactRegistry>>,
    knowledge: Option<Knowledge>,
) -> anyhow::Result<App> {
    crate::solve::say_first_use_probe(loaded);
    let mut builder = AppBuilder::from_settings(loaded)
        .await?
        .pdf_child(pdf_child());
    if let Some(knowledge) = knowledge {
        builder = builder.knowledge(knowledge);
    }
    if let Some(capacity) = session_capacity {
        builder = builder.session_capacity(capacity);
    }
    if let Some(registry) = artifacts {
        builder = builder.artifact_registry(registry);
    }
    Ok(builder.build()?)
}

/// The app of a turn `recorder` records (`solve`, `resume`), from a builder made by
/// [`AppBuilder::from_settings`] (the sandbox probe, which may run while the store opens):
/// its calls' files go to the recorder's artifact store as each call ends, as the server
/// stores them, so the web UI shows them too.
pub(crate) fn build_recording_app(
    builder: AppBuilder,
    recorder: &Recorder,
    knowledge: Option<Knowledge>,
) -> anyhow::Result<App> {
    let mut builder = builder
        .pdf_child(pdf_child())
        .artifact_registry(recorder.artifacts());
    if let Some(knowledge) = knowledge {
        builder = builder.knowledge(knowledge);
    }
    Ok(builder.build()?)
}

/// The knowledge-base service as the settings say, parsing PDFs with this binary.
pub(crate) fn knowledge(loaded: &Loaded, store: Store) -> anyhow::Result<Knowledge> {
    let options = KnowledgeOptions {
        index_root: None,
        pdf_child: pdf_child(),
    };
    Ok(deepsolve_app::knowledge_from_settings(
        &loaded.settings,
        store,
        options,
    )?)
}

/// The id of `--user NAME`, else the single-user identity.
pub(crate) async fn user_id(store: &Store, name: Option<&str>) -> anyhow::Result<String> {
    let Some(name) = name else {
        return Ok(deepsolve_app::LOCAL_USER.to_string());
    };
    match store.user_by_name(name).await? {
        Some(user) => Ok(user.id),
        None => bail!("no user named '{name}' (deepsolve users list shows them)"),
    }
}

/// The model endpoint the settings name.
pub(crate) fn base_url(loaded: &Loaded) -> String {
    (loaded.settings.llm.base_url.clone()).unwrap_or_else(|| DEFAULT_BASE_URL.to_string())
}

/// Say on stderr, before the in-process model loads (seconds for a large one), which file it
/// is; nothing when the main model is behind an endpoint.
pub(crate) fn report_local_loading(loaded: &Loaded) {
    let model_dir = deepsolve_local_dir();
    if let Ok(deepsolve_app::MainChoice::Local(config)) =
        deepsolve_app::main_choice(loaded, model_dir.as_deref())
    {
        let size = std::fs::metadata(&config.model)
            .map(|m| format!(", {} MiB", m.len() >> 20))
            .unwrap_or_default();
        errln!(
            "deepsolve: loading the local model {}{size} (in-process, context {} tokens) before listening",
            config.model.display(),
            config.context
        );
    }
}

/// The model cache the embedded default is looked for in.
pub(crate) fn deepsolve_local_dir() -> Option<std::path::PathBuf> {
    deepsolve_app::models::model_cache_dir()
}

/// Say on stderr, in one line, why the code tools are off, or that they run unisolated.
pub(crate) fn report_sandbox(app: &App) {
    match app.sandbox() {
        Err(why) => errln!("warning: code tools are off: {why} (see `deepsolve doctor`)"),
        Ok(sandbox) => {
            if let Some(warning) = sandbox.warning() {
                errln!("WARNING: {warning}");
            }
        }
    }
}
