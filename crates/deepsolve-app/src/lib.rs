//! deepsolve-app: the composition root shared by the CLI (`solve`, `doctor`) and the server
//! (`serve`, and its OpenAI facade).
//!
//! Settings → model clients (main, reasoning, vision) → the sandbox → the tool catalog → [`Engine`],
//! in one place, so every front end mounts the same tools by the same rule (see
//! `deepsolve_tools::toolset`). Turn ids and turn workspaces are made here too ([`turn`]), and
//! old workspaces collected ([`gc`]). A turn's whole life — prepared, recorded in the store,
//! run with its events logged ([`writer`]) and its files stored ([`artifacts`]), its end
//! recorded — is [`life`], for the server, the CLI and an eval runner alike.
//!
//! ```no_run
//! # async fn demo(loaded: &deepsolve_settings::Loaded, requested: &[String])
//! #     -> Result<(), Box<dyn std::error::Error>> {
//! let app = deepsolve_app::AppBuilder::from_settings(loaded).await?.build()?;
//! // The automatic tools, then `tools.enabled`, then what the turn asked for.
//! let offered = app.tools_for_turn(requested)?;
//! let turn_id = deepsolve_app::new_turn_id();
//! // Held while the turn runs: no collection ([`gc`]) deletes it meanwhile.
//! let workspace = if app.needs_workspace(&offered) {
//!     Some(deepsolve_app::hold_workspace(&deepsolve_app::default_workspace_root()?, &turn_id)?)
//! } else {
//!     None
//! };
//! # Ok(()) }
//! ```
//!
//! Tests and embedders start from [`AppBuilder::new`] with model clients they built (e.g. a
//! scripted model), so no HTTP model is needed.

pub mod artifacts;
pub mod eval;
pub mod gc;
pub mod knowledge;
pub mod life;
pub mod models;
pub mod owner;
pub mod probe;
pub mod sandbox;
pub mod stored;
pub mod turn;
pub mod vision;
pub mod writer;

use std::path::PathBuf;
use std::sync::Arc;

use deepsolve_core::{ChatModel, Engine, EngineError, Language, ToolRef, TurnImage};
use deepsolve_kb::extract::ChildCommand;
use deepsolve_settings::{Loaded, Settings, ToolSection, Vision};
use deepsolve_tools::{CATALOG, Deps, Knowledge, Recheck, Sandbox, SandboxError, Toolset};

/// A turn's images made ready for a model (every front end prepares them through it).
pub use deepsolve_images as images;
/// The in-process model (`llm.provider: local`): its types for front ends (`doctor`).
#[cfg(feature = "local")]
pub use deepsolve_local as local;

pub use artifacts::{ArtifactRegistry, ArtifactStore, DEFAULT_MAX_ARTIFACT_BYTES, is_rendered};
pub use deepsolve_tools::{
    DisabledError, Policy, ToolEntry, ToolRequestError, ToolStatus, Unavailable,
};
pub use gc::{GcOptions, GcReport, collect_workspaces};
pub use knowledge::{KnowledgeError, KnowledgeOptions, kb_limits, knowledge_from_settings};
pub use models::{
    DEFAULT_BASE_URL, DEFAULT_LOCAL_MODEL, MainChoice, MainClient, main_choice, main_client,
    reasoning_model, vision_model,
};
pub use owner::LOCAL_USER;
pub use turn::{
    HeldWorkspace, WorkspaceError, create_workspace, data_dir, default_workspace_root,
    hold_workspace, new_turn_id,
};
pub use vision::{CannotSeeImages, Sight};

/// The settings sections the tool catalog declares (`tools.<tool>`): what the settings loader
/// (`LoadOptions::tool_sections`) and `settings set` check those keys against.
pub fn tool_sections() -> Vec<ToolSection> {
    deepsolve_tools::tool_sections(CATALOG)
}

/// Why the app could not be put together.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(
        "no model configured: pass --model (and --base-url), or set DEEPSOLVE_MODEL (and DEEPSOLVE_BASE_URL), or run `deepsolve settings set llm.model=NAME` to write it in {}; or run a model in this process: scripts/fetch-model qwen2.5-coder-1.5b-instruct-q4_k_m fetches the default one{}",
        settings_path.display(),
        default_local.as_ref().map(|p| format!(" (to {})", p.display())).unwrap_or_default()
    )]
    NoModel {
        settings_path: PathBuf,
        /// Where the embedded default would be found.
        default_local: Option<PathBuf>,
    },
    /// `llm.provider: local` without `llm.local.model`, and no model cache to look in.
    #[error(
        "llm.provider is `local` but llm.local.model is not set and there is no model cache \
         (neither DEEPSOLVE_MODELS nor HOME is set): set llm.local.model to a GGUF file"
    )]
    NoModelCache,
    /// The in-process model could not be made ready (the file, its header, memory, the CPU).
    #[error(transparent)]
    Local(#[from] deepsolve_local::LocalError),
    /// `llm.provider: local` (or the embedded default) in a build without llama.cpp.
    #[error(
        "this build of deepsolve has no in-process model (built without the `local` feature); \
         pass --base-url and --model to use an OpenAI-compatible endpoint"
    )]
    LocalNotBuilt,
    #[error("cannot use the configured model")]
    Client(#[source] deepsolve_llm::ClientError),
    #[error("sandbox.backend is `bwrap`, but {0}")]
    SandboxRequired(#[source] SandboxError),
    #[error("tools.enabled: {0}")]
    Enabled(#[source] ToolRequestError),
    #[error("tools.disabled: {0}")]
    Disabled(#[source] DisabledError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("prompts: {0}")]
    Prompts(#[from] deepsolve_core::OverrideError),
}

/// What a front end runs turns on: the engine with the mounted tools, the main model, and the
/// record of which tools are mounted and why the others are not.
pub struct App {
    engine: Arc<Engine>,
    model: Arc<dyn ChatModel>,
    tools: Toolset,
    sandbox: Result<Sandbox, Unavailable>,
    knowledge: Option<Knowledge>,
    catalog: &'static [ToolEntry],
    /// `llm.vision`.
    vision: Vision,
    /// What the vision probe found, per model (`llm.vision: auto`).
    sight: vision::Remembered,
}

impl App {
    /// The settings sections of the catalog it mounted (for writing the settings file).
    pub fn tool_sections(&self) -> Vec<ToolSection> {
        deepsolve_tools::tool_sections(self.catalog)
    }

    /// The catalog the tools were mounted from (their names, policies and playbook lines).
    pub fn catalog(&self) -> &'static [ToolEntry] {
        self.catalog
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The main model, the one turns run on.
    pub fn model(&self) -> &Arc<dyn ChatModel> {
        &self.model
    }

    /// The mounted tools, the unavailable ones and why (`doctor`, the web UI).
    pub fn tools(&self) -> &Toolset {
        &self.tools
    }

    /// The sandbox the code tools run in, or why there is none.
    pub fn sandbox(&self) -> Result<&Sandbox, &Unavailable> {
        self.sandbox.as_ref()
    }

    /// The work tools a turn that asks for `requested` is offered: the automatic ones, then
    /// `tools.enabled`, then `requested`; an unknown or unavailable name (one `tools.disabled`
    /// names included) is an error.
    pub fn tools_for_turn<S: AsRef<str>>(
        &self,
        requested: &[S],
    ) -> Result<Vec<String>, ToolRequestError> {
        self.tools.for_turn(requested)
    }

    /// [`App::tools_for_turn`] for a turn with material (knowledge bases or attachments) or
    /// without: with it, `rag` and `read_source` follow the automatic tools.
    pub fn tools_for_turn_with<S: AsRef<str>>(
        &self,
        requested: &[S],
        has_material: bool,
    ) -> Result<Vec<String>, ToolRequestError> {
        self.tools.for_turn_with(requested, has_material)
    }

    /// The knowledge-base service the knowledge tools use, when the front end gave one.
    pub fn knowledge(&self) -> Option<&Knowledge> {
        self.knowledge.as_ref()
    }

    /// Whether the main model sees images: `llm.vision`, or with `auto` a probe (one small
    /// image) asked once per model and remembered for the process. An unknown answer (the probe
    /// failed) is not remembered.
    pub async fn main_model_sight(&self, language: Language) -> Sight {
        vision::main_sight(self.vision, self.model.as_ref(), &self.sight, language).await
    }

    /// The one check before a turn with `images` starts, offered the work tools `offered`:
    /// `Ok(true)` when the main model sees images (they go with the problem:
    /// `TurnSpec::sees_images`), `Ok(false)` when it does not but a tool of the turn reads them
    /// (or there are no images), `Err` — one line — when nothing can see them. Asks the model
    /// (see [`App::main_model_sight`]) only for a turn with images.
    pub async fn image_sight<S: AsRef<str>>(
        &self,
        images: &[TurnImage],
        offered: &[S],
        language: Language,
    ) -> Result<bool, CannotSeeImages> {
        if images.is_empty() {
            return Ok(false);
        }
        let sight = self.main_model_sight(language).await;
        if sight == Sight::Sees {
            return Ok(true);
        }
        // The other way to see: a tool of the turn that reads images with a model of its own
        // (`Tool::reads_images`, e.g. `geogebra_analysis`). Where its model's own sight must be
        // checked too (`models.vision`), this is the one place to add it.
        if self.reads_images(offered) {
            return Ok(false);
        }
        Err(CannotSeeImages::new(self.model.name(), &sight))
    }

    /// Some tool among `offered` reads the turn's images itself.
    fn reads_images<S: AsRef<str>>(&self, offered: &[S]) -> bool {
        self.image_readers()
            .iter()
            .any(|name| offered.iter().any(|o| o.as_ref() == name))
    }

    /// The mounted tools that read images themselves (`Tool::reads_images`).
    pub fn image_readers(&self) -> Vec<String> {
        self.tools
            .tools()
            .iter()
            .filter(|tool| tool.reads_images())
            .map(|tool| tool.spec().name.clone())
            .collect()
    }

    /// Whether a turn offered `offered` needs a workspace ([`turn::create_workspace`]).
    pub fn needs_workspace<S: AsRef<str>>(&self, offered: &[S]) -> bool {
        self.tools.needs_workspace(offered)
    }
}

/// Put the operator's texts (`prompts`) in force in `engine`, for each language that has any;
/// the others keep the built-in texts. The server calls it again after a settings change.
pub fn put_prompts_in_force(
    engine: &Engine,
    prompts: &deepsolve_settings::prompts::PromptsSettings,
) -> Result<(), AppError> {
    for language in deepsolve_core::Texts::LANGUAGES {
        let overridden = prompts.overridden.iter().any(|o| o.language == language);
        let builtin =
            engine.texts(language).as_ref() == deepsolve_core::Texts::builtin(language).as_ref();
        if overridden || !builtin {
            engine.set_texts(Arc::new(prompts.texts(language)?))?;
        }
    }
    Ok(())
}

/// What the sandbox probe says: a sandbox, why there is none, or (required and missing) an
/// error.
type SandboxVerdict = Result<Result<Sandbox, Unavailable>, AppError>;

/// Puts an [`App`] together.
pub struct AppBuilder {
    settings: Settings,
    main_model: Arc<dyn ChatModel>,
    reasoning_model: Option<Result<Arc<dyn ChatModel>, Unavailable>>,
    vision_model: Result<Option<Arc<dyn ChatModel>>, Unavailable>,
    sandbox: Result<Sandbox, Unavailable>,
    knowledge: Option<Knowledge>,
    pdf_child: Option<ChildCommand>,
    catalog: &'static [ToolEntry],
    extra_tools: Vec<ToolRef>,
    session_capacity: Option<usize>,
    artifact_registry: Option<Arc<dyn ArtifactRegistry>>,
}

impl AppBuilder {
    /// From already-built model clients; the reasoning model is the main one and there is no
    /// sandbox until [`Self::reasoning_model`] and [`Self::sandbox`] say otherwise.
    pub fn new(settings: Settings, main_model: Arc<dyn ChatModel>) -> Self {
        AppBuilder {
            settings,
            main_model,
            reasoning_model: None,
            vision_model: Ok(None),
            sandbox: Err(Unavailable("no sandbox was set up".into())),
            knowledge: None,
            pdf_child: None,
            catalog: CATALOG,
            extra_tools: Vec::new(),
            session_capacity: None,
            artifact_registry: None,
        }
    }

    /// Everything from the loaded settings: the main client (an error without a model), the
    /// reasoning client, and the sandbox (detected now; an error only when `sandbox.backend:
    /// bwrap` requires one that does not work).
    pub async fn from_settings(loaded: &Loaded) -> Result<Self, AppError> {
        let settings = loaded.settings.clone();
        let probe = async move { (sandbox::for_settings(&settings).await, None) };
        let (builder, _) = Self::with_probe(loaded, probe).await?;
        Ok(builder)
    }

    /// [`Self::from_settings`], with the sandbox probe's verdict kept in `file` between
    /// processes ([`sandbox::for_settings_remembered`]), and the [`Recheck`] to run beside the
    /// turn when the sandbox came from there.
    pub async fn from_settings_remembering(
        loaded: &Loaded,
        file: PathBuf,
    ) -> Result<(Self, Option<Recheck>), AppError> {
        let settings = loaded.settings.clone();
        let probe = async move { sandbox::for_settings_remembered(&settings, &file).await };
        Self::with_probe(loaded, probe).await
    }

    async fn with_probe(
        loaded: &Loaded,
        probe: impl Future<Output = (SandboxVerdict, Option<Recheck>)> + Send + 'static,
    ) -> Result<(Self, Option<Recheck>), AppError> {
        // The probe is a sandboxed child process, the longest wait before a turn's first
        // request: it runs on the runtime's other threads while the clients are made here
        // (which reads the system's root certificates).
        let probe = tokio::spawn(probe);
        let main = main_client(loaded).await;
        if let Ok(MainClient::Endpoint(client)) = &main {
            probe::on_first_use(&loaded.settings, client).await;
        }
        let clients = main.map(|main| {
            let main = main.model();
            let reasoning = reasoning_model(loaded, &main);
            (main, reasoning, vision_model(loaded))
        });
        // Awaited even when the clients failed: the probe cleans up its scratch directory.
        let (sandbox, recheck) = probe.await.unwrap_or_else(|e| {
            let stopped = Unavailable(format!("the sandbox probe stopped: {e}"));
            (Ok(Err(stopped)), None)
        });
        let sandbox = sandbox?;
        let (main, reasoning, vision) = clients?;
        let builder = AppBuilder::new(loaded.settings.clone(), main)
            .reasoning_model(reasoning)
            .vision_model(vision)
            .sandbox(sandbox);
        Ok((builder, recheck))
    }

    /// The main model (its `honours()` decides the turn's context window:
    /// [`probe::context_window`]).
    pub fn main_model(&self) -> &Arc<dyn ChatModel> {
        &self.main_model
    }

    /// The model behind `reason`, or why there is none.
    pub fn reasoning_model(mut self, model: Result<Arc<dyn ChatModel>, Unavailable>) -> Self {
        self.reasoning_model = Some(model);
        self
    }

    /// The model that reads images (`Ok(None)`: none configured), or why the configured one
    /// cannot be used.
    pub fn vision_model(mut self, model: Result<Option<Arc<dyn ChatModel>>, Unavailable>) -> Self {
        self.vision_model = model;
        self
    }

    /// The sandbox for the code tools, or why there is none.
    pub fn sandbox(mut self, sandbox: Result<Sandbox, Unavailable>) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// The knowledge-base service behind `rag` and `read_source` (without it they are
    /// unavailable); see [`knowledge_from_settings`].
    pub fn knowledge(mut self, knowledge: Knowledge) -> Self {
        self.knowledge = Some(knowledge);
        self
    }

    /// The program that parses PDFs out of process (`web_fetch` reads PDFs with it; the
    /// knowledge-base service has its own, see [`KnowledgeOptions`]).
    pub fn pdf_child(mut self, child: Option<ChildCommand>) -> Self {
        self.pdf_child = child;
        self
    }

    /// Mount these entries instead of [`CATALOG`].
    pub fn catalog(mut self, entries: &'static [ToolEntry]) -> Self {
        self.catalog = entries;
        self
    }

    /// A tool built outside the catalog (tests, embedders): opt-in, with a workspace, by the
    /// same rule as the catalog's tools.
    pub fn extra_tool(mut self, tool: ToolRef) -> Self {
        self.extra_tools.push(tool);
        self
    }

    /// Bound the engine's live solve sessions (one per running turn).
    pub fn session_capacity(mut self, capacity: usize) -> Self {
        self.session_capacity = Some(capacity.max(1));
        self
    }

    /// Hand every call's reported artifacts to `registry` as the call ends, before its
    /// `tool_result` event (see [`artifacts`]).
    pub fn artifact_registry(mut self, registry: Arc<dyn ArtifactRegistry>) -> Self {
        self.artifact_registry = Some(registry);
        self
    }

    /// Check `tools.disabled`, mount the catalog, check `tools.enabled` against it, and build
    /// the engine.
    pub fn build(self) -> Result<App, AppError> {
        deepsolve_tools::check_disabled(self.catalog, &self.settings.tools.disabled)
            .map_err(AppError::Disabled)?;
        let settings_vision = self.settings.llm.vision;
        let deps = Deps {
            reasoning_model: self
                .reasoning_model
                .unwrap_or_else(|| Ok(self.main_model.clone())),
            main_model: self.main_model.clone(),
            vision: self.vision_model,
            sandbox: self.sandbox,
            knowledge: self.knowledge.clone().ok_or_else(|| {
                Unavailable("no knowledge bases: this front end has no store for them".into())
            }),
            pdf_child: self.pdf_child,
            settings: self.settings,
        };
        let mut tools = Toolset::mount(self.catalog, &deps);
        for tool in self.extra_tools {
            tools = tools.with_tool(tool, Policy::OptIn);
        }
        let none: &[&str] = &[];
        tools.for_turn(none).map_err(AppError::Enabled)?;
        let mut engine_tools = tools.tools();
        if let Some(registry) = &self.artifact_registry {
            engine_tools = engine_tools
                .into_iter()
                .map(|tool| artifacts::registering(tool, registry.clone()))
                .collect();
        }
        let mut engine = Engine::new(engine_tools)?;
        if let Some(capacity) = self.session_capacity {
            engine = engine.with_session_capacity(capacity);
        }
        put_prompts_in_force(&engine, &deps.settings.prompts)?;
        Ok(App {
            engine: Arc::new(engine),
            model: self.main_model,
            tools,
            sandbox: deps.sandbox,
            knowledge: self.knowledge,
            catalog: self.catalog,
            vision: settings_vision,
            sight: vision::Remembered::default(),
        })
    }
}
