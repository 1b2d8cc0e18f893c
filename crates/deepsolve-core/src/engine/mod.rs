//! `Engine::run_turn`: the deep-solve loop. One turn, start to end: rounds of model calls and
//! tool dispatch under the solve spine, folding after every finished step, budgets, gates, and
//! one forced-answer path.
//!
//! - `turn`: a running turn's state, built from its spec; its start and its end.
//! - `rounds`: the round loop and what a failed model call leads to.
//! - `call`: one streaming model call; `live`: its output as events, at a bounded rate;
//!   `announce`: telling a tool early that the streamed reply calls it.
//! - `reply`: taking in a completion (calls, cut-off text, silence, an answer).
//! - `work`: a round of tool calls and what finished steps lead to (fold, checkpoint).
//! - `decoding`: the spine at decoding time — each round's `tool_choice` from the spine's
//!   state (`solve.enforce`), a reply's text kept as reasoning before the call it owes.
//! - `gates`: the plan and finish gates before an answer is accepted.
//! - `tail`: the ephemeral last message (progress block, notices).
//! - `forced`: the one forced-answer path and the answer of last resort.
//! - `vet`: the one rule every answer passes before the turn ends (no engine text in it; a
//!   reply of apologies and promises only is not an answer, and the forced path answers).
//! - `budget`: rounds, tokens, time and context, with their named thresholds.

mod announce;
mod budget;
mod call;
mod decoding;
mod drafts;
mod forced;
mod gates;
mod live;
mod reply;
mod rounds;
mod tail;
mod turn;
mod vet;
mod work;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use tokio_util::sync::CancellationToken;

use crate::config::SolveConfig;
use crate::dispatch::{InvalidSchema, Mounted, Toolbox};
use crate::event::EventSink;
use crate::image::TurnImage;
use crate::model::{ChatModel, Protocol};
use crate::outcome::{Checkpoint, TurnOutcome};
use crate::solve::{Language, SolveSession, SolveSessionStore, StoreError};
use crate::solve::{is_solve_tool, solve_tool_specs};
use crate::texts::Texts;
use crate::tool::{Material, ToolRef};
use crate::wire::Wire;

use turn::TurnRun;

pub use budget::DEFAULT_CONTEXT_WINDOW;
pub use budget::prompt_room;

/// The name under which an unreadable text-protocol call is recorded.
pub(crate) const UNREADABLE_CALL: &str = "unreadable_tool_call";

/// Markers of the blocks the engine injects (language-neutral, like tool names).
pub(crate) const NUDGE_MARKER: &str = "[deepsolve:nudge]";
pub(crate) const NOTICE_MARKER: &str = "[deepsolve:notice]";
pub(crate) const CONTINUE_MARKER: &str = "[deepsolve:continue]";
pub(crate) const ULTIMATUM_MARKER: &str = "[deepsolve:ultimatum]";
pub(crate) const RECORD_MARKER: &str = "[deepsolve:record]";

/// A previous turn of the same conversation (a wire type: the store and the facade give it).
pub use deepsolve_protocol::PriorTurn;

/// Everything a turn needs, resolved server-side.
#[derive(Debug, Clone)]
pub struct TurnSpec {
    pub turn_id: String,
    pub session_id: Option<String>,
    pub user_id: Option<String>,
    pub problem: String,
    pub history: Vec<PriorTurn>,
    pub language: Language,
    pub config: SolveConfig,
    pub context_window: u64,
    /// Work tools to offer this turn (by name); the solve tools are always offered.
    pub tools: Vec<String>,
    pub workspace: Option<PathBuf>,
    /// The first event `seq` (non-zero when a turn is resumed).
    pub first_seq: u64,
    pub protocol: Protocol,
    /// Continue an interrupted turn from its last step checkpoint (`None`: a fresh turn).
    pub resume: Option<Checkpoint>,
    /// What the turn may read: listed in the system prompt, handed to every tool call.
    pub material: Option<Arc<Material>>,
    /// The images the turn was given: sent to a model that can see them, and handed to
    /// every tool call (`ToolContext::images`).
    pub images: Arc<[TurnImage]>,
    /// The model sees images: the turn's images go with the problem as image parts. When
    /// false they are only listed in the system prompt, with the tools that can read them
    /// (`Tool::reads_images`). Front ends decide it before the turn (`llm.vision`).
    pub sees_images: bool,
}

impl TurnSpec {
    pub fn new(turn_id: impl Into<String>, problem: impl Into<String>) -> Self {
        TurnSpec {
            turn_id: turn_id.into(),
            session_id: None,
            user_id: None,
            problem: problem.into(),
            history: Vec::new(),
            language: Language::En,
            config: SolveConfig::default(),
            context_window: DEFAULT_CONTEXT_WINDOW,
            tools: Vec::new(),
            workspace: None,
            first_seq: 0,
            protocol: Protocol::Native,
            resume: None,
            material: None,
            images: Arc::default(),
            sees_images: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TurnError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("unknown tool '{name}' requested for this turn (available: {available})")]
    UnknownTool { name: String, available: String },
    #[error("the problem is empty")]
    EmptyProblem,
}

/// Why an engine cannot be built from its tools.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error("tool '{0}' is registered twice")]
    DuplicateTool(String),
    #[error("tool {tool} has an invalid schema: {message}")]
    InvalidSchema { tool: String, message: String },
}

impl From<InvalidSchema> for EngineError {
    fn from(InvalidSchema { tool, message }: InvalidSchema) -> Self {
        EngineError::InvalidSchema { tool, message }
    }
}

/// One language's texts in force and the solve tools described in them: a turn takes both
/// at its start, so what its model reads stays the same for the whole turn.
struct LanguageKit {
    texts: Arc<Texts>,
    solve_tools: Vec<Arc<Mounted>>,
}

impl LanguageKit {
    fn new(texts: Arc<Texts>) -> Result<Self, EngineError> {
        let solve_tools = solve_tool_specs(&texts)
            .into_iter()
            .map(|spec| Mounted::new(spec, None).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(LanguageKit { texts, solve_tools })
    }
}

/// The engine: registered tools and the live solve sessions. Shared by all turns.
pub struct Engine {
    /// Per built-in language (in [`Texts::LANGUAGES`] order); replaced whole by
    /// [`Engine::set_texts`].
    kits: RwLock<Vec<Arc<LanguageKit>>>,
    work_tools: Vec<Arc<Mounted>>,
    sessions: Arc<SolveSessionStore>,
    /// Models found to lack native tool calling (protocol `auto`), for the process.
    no_native_tools: Mutex<HashSet<String>>,
}

impl Engine {
    pub fn new(tools: Vec<ToolRef>) -> Result<Self, EngineError> {
        let kits = Texts::LANGUAGES
            .into_iter()
            .map(|language| LanguageKit::new(Texts::builtin(language)).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        let mut work_tools: Vec<Arc<Mounted>> = Vec::new();
        for tool in tools {
            let spec = tool.spec().clone();
            if is_solve_tool(&spec.name) || work_tools.iter().any(|m| m.spec.name == spec.name) {
                return Err(EngineError::DuplicateTool(spec.name));
            }
            work_tools.push(Arc::new(Mounted::new(spec, Some(tool))?));
        }
        Ok(Engine {
            kits: RwLock::new(kits),
            work_tools,
            sessions: Arc::new(SolveSessionStore::default()),
            no_native_tools: Mutex::new(HashSet::new()),
        })
    }

    /// Bound the live solve sessions (one per running turn).
    pub fn with_session_capacity(mut self, capacity: usize) -> Self {
        self.sessions = Arc::new(SolveSessionStore::new(capacity));
        self
    }

    pub fn work_tool_names(&self) -> Vec<String> {
        self.work_tools
            .iter()
            .map(|m| m.spec.name.clone())
            .collect()
    }

    pub fn sessions(&self) -> &SolveSessionStore {
        &self.sessions
    }

    /// Put `texts` in force for their language, from the next turn on (a running turn keeps
    /// the texts it started with). The solve tools are described anew in them.
    pub fn set_texts(&self, texts: Arc<Texts>) -> Result<(), EngineError> {
        let language = texts.language();
        let kit = Arc::new(LanguageKit::new(texts)?);
        let mut kits = self.kits.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = Texts::LANGUAGES.iter().position(|l| *l == language) {
            kits[i] = kit;
        }
        Ok(())
    }

    /// The texts in force for `language`.
    pub fn texts(&self, language: Language) -> Arc<Texts> {
        self.kit(language).texts.clone()
    }

    fn kit(&self, language: Language) -> Arc<LanguageKit> {
        let kits = self.kits.read().unwrap_or_else(PoisonError::into_inner);
        let i = Texts::LANGUAGES
            .iter()
            .position(|l| *l == language)
            .unwrap_or(0);
        kits[i].clone()
    }

    fn toolbox(&self, kit: &LanguageKit, requested: &[String]) -> Result<Toolbox, TurnError> {
        let mut mounted = kit.solve_tools.clone();
        for name in requested {
            let tool = self
                .work_tools
                .iter()
                .find(|m| &m.spec.name == name)
                .ok_or_else(|| TurnError::UnknownTool {
                    name: name.clone(),
                    available: self.work_tool_names().join(", "),
                })?;
            if !mounted.iter().any(|m| &m.spec.name == name) {
                mounted.push(tool.clone());
            }
        }
        Ok(Toolbox::new(mounted))
    }

    fn lacks_native_tools(&self, model: &str) -> bool {
        self.no_native_tools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(model)
    }

    fn remember_lacks_native_tools(&self, model: &str) {
        self.no_native_tools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(model.to_string());
    }

    fn open_session(&self, spec: &TurnSpec) -> Result<crate::solve::SessionHandle, TurnError> {
        let session_id = spec.session_id.clone();
        let mut session = SolveSession::new(
            session_id.unwrap_or_else(|| spec.turn_id.clone()),
            spec.config.max_replans,
            spec.config.max_steps,
        );
        if let Some(resume) = &spec.resume {
            session.record = resume.record.clone();
            session.record.replans_max = spec.config.max_replans;
        }
        Ok(self.sessions.open(&spec.turn_id, session)?)
    }

    /// Run one turn to its end. Errors are only for a turn that cannot start; everything
    /// after the start ends in a `TurnOutcome` with a typed stop reason.
    pub async fn run_turn(
        &self,
        model: &dyn ChatModel,
        spec: TurnSpec,
        sink: &dyn EventSink,
        cancel: CancellationToken,
    ) -> Result<TurnOutcome, TurnError> {
        if spec.problem.trim().is_empty() {
            return Err(TurnError::EmptyProblem);
        }
        let kit = self.kit(spec.language);
        let toolbox = self.toolbox(&kit, &spec.tools)?;
        let session = self.open_session(&spec)?;
        let _close = CloseOnDrop {
            store: &self.sessions,
            turn_id: spec.turn_id.clone(),
        };
        let wire = Wire::new(
            spec.protocol,
            self.lacks_native_tools(model.name()),
            &model.honours(),
        );
        let texts = kit.texts.clone();
        let end = TurnRun::new(model, spec, texts, toolbox, session, wire, sink, cancel)
            .run()
            .await;
        if end.fell_back_to_tags {
            self.remember_lacks_native_tools(model.name());
        }
        Ok(end.outcome)
    }
}

/// Removes the session from the store however the turn ends (even if its future is dropped).
struct CloseOnDrop<'a> {
    store: &'a SolveSessionStore,
    turn_id: String,
}

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.store.close(&self.turn_id);
    }
}
