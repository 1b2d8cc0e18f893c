//! A turn's life, the same for every front end — the server's runner, the CLI's `solve` and
//! `resume`, an eval runner: **prepare → record → run → finish**.
//!
//! 1. **Prepare** — the caller checks what it was asked in its own terms (an HTTP request, flags,
//!    an eval case) and fills a [`TurnPlan`]: a fresh turn id, the problem, the language, the
//!    work tools the app offers (`App::tools_for_turn_with`), the solve knobs, the context
//!    window, and, when asked for, the material and the images (checked: `App::image_sight`).
//! 2. **Record** — [`Recorder::record`] writes the turn `running` under the recorder's owner (a
//!    server's instance id, `cli_owner()`, an eval's name), in a new session or one it
//!    continues ([`SessionChoice`]), with its images, in one transaction, and returns the
//!    engine's [`TurnSpec`]. Nothing that can refuse comes after: a recorded turn always runs.
//!    A resumed turn skips this step: its spec comes from `crate::stored::resume_spec`, and
//!    [`Recorder::reclaim`] claims it for this owner.
//! 3. **Run** — [`Recorder::run`] runs the turn on a task of its own (a panic becomes a failed
//!    turn, not one stuck `running`) in its workspace ([`hold_workspace_for`], held until the
//!    end is recorded so no collection deletes it); every event goes to the store through the
//!    [`EventWriter`] and, when the caller gives one, to its own sink (a display, an eval log).
//! 4. **Finish** — files the calls reported but could not store live (an app given
//!    [`Recorder::artifacts`] stores them as each call ends) are copied once more
//!    ([`ArtifactStore::store_leftovers`]); the turn's end (status, answer, stop reason, usage,
//!    solve record) is written in the transaction of its `turn_finished` ([`finish_of`]); a
//!    turn the engine refused to start is recorded `failed` with an `error` event saying why.
//!    The outcome goes back to the caller.
//!
//! ```no_run
//! # async fn demo(app: &deepsolve_app::App, store: deepsolve_store::Store)
//! #     -> Result<(), Box<dyn std::error::Error>> {
//! use deepsolve_app::life::{Recorder, SessionChoice, TurnPlan, TurnRun, hold_workspace_for};
//! let recorder = Recorder::spawn(store, "eval:demo");
//! let tools = app.tools_for_turn(&["code_execution"])?;
//! let plan = TurnPlan::new("What is 2 + 2?", deepsolve_core::Language::En, tools,
//!     deepsolve_core::SolveConfig::default(), deepsolve_core::DEFAULT_CONTEXT_WINDOW);
//! let workspace = hold_workspace_for(app, &plan.tools, &plan.turn_id,
//!     deepsolve_app::default_workspace_root)?;
//! let spec = recorder.record(deepsolve_app::LOCAL_USER, SessionChoice::new(), plan).await?;
//! let outcome = recorder.run(TurnRun::new(app, spec).workspace(workspace)).await?;
//! println!("{:?} after {} prompt tokens", outcome.stop_reason, outcome.usage.prompt_tokens);
//! # Ok(()) }
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use deepsolve_core::{ChatModel, Engine, EventSink, SolveConfig, TurnError, TurnSpec};
use deepsolve_protocol::{
    ErrorKind, EventKind, Language, Material, PriorTurn, StopReason, StoredTurnSpec, TurnEvent,
    TurnOutcome, TurnStatus,
};
use deepsolve_store::{NewTurn, Store, StoreError, TurnFinish};
use tokio_util::sync::CancellationToken;

use crate::App;
use crate::artifacts::{ArtifactStore, DEFAULT_MAX_ARTIFACT_BYTES};
use crate::stored::{TurnImages, TurnKeys, engine_spec};
use crate::turn::{HeldWorkspace, WorkspaceError, hold_workspace, new_turn_id};
use crate::writer::{EventWriter, NoObserver, TurnSink};

/// What a turn will be, checked by its front end, before anything is recorded.
#[derive(Debug, Clone)]
pub struct TurnPlan {
    /// A fresh id ([`new_turn_id`]).
    pub turn_id: String,
    pub problem: String,
    pub language: Language,
    /// The work tools offered, by the catalog's rule (`App::tools_for_turn_with`).
    pub tools: Vec<String>,
    pub config: SolveConfig,
    /// The model's context window, in tokens.
    pub context_window: u64,
    /// What the turn may read (its knowledge bases and attachments); `None`: nothing.
    pub material: Option<Material>,
    /// Its images, ready and checked (`App::image_sight`); none by default.
    pub images: TurnImages,
}

impl TurnPlan {
    /// A turn of `problem` under a fresh id, without material or images.
    pub fn new(
        problem: impl Into<String>,
        language: Language,
        tools: Vec<String>,
        config: SolveConfig,
        context_window: u64,
    ) -> TurnPlan {
        TurnPlan {
            turn_id: new_turn_id(),
            problem: problem.into(),
            language,
            tools,
            config,
            context_window,
            material: None,
            images: TurnImages::default(),
        }
    }
}

/// The session a recorded turn belongs to, and the conversation it sees.
#[derive(Debug, Clone)]
pub enum SessionChoice {
    /// A new session named after the problem, with this conversation so far (empty for a
    /// first turn; the OpenAI facade's client sends its own).
    New { history: Vec<PriorTurn> },
    /// A session of the turn's user (the caller has checked it is theirs), with its earlier
    /// answered turns (`Store::prior_turns`).
    Continue {
        session_id: String,
        history: Vec<PriorTurn>,
    },
}

impl SessionChoice {
    /// A new session, nothing before.
    pub fn new() -> SessionChoice {
        SessionChoice::New {
            history: Vec::new(),
        }
    }

    /// `session_id` of `user_id` with its earlier turns; `None` when the user has no such
    /// session.
    pub async fn continuing(
        store: &Store,
        session_id: &str,
        user_id: &str,
    ) -> Result<Option<SessionChoice>, StoreError> {
        let Some(session) = store.session(session_id, user_id).await? else {
            return Ok(None);
        };
        let history = store.prior_turns(&session.id).await?;
        Ok(Some(SessionChoice::Continue {
            session_id: session.id,
            history,
        }))
    }
}

impl Default for SessionChoice {
    fn default() -> Self {
        SessionChoice::new()
    }
}

/// Where turns are recorded and who runs them: the store, its event writer, the owner every
/// turn recorded or reclaimed here is written under, and the artifact store for the files a
/// turn leaves. Cheap to clone.
#[derive(Clone)]
pub struct Recorder {
    store: Store,
    writer: EventWriter,
    owner: String,
    artifacts: Arc<ArtifactStore>,
}

impl Recorder {
    /// Record in `store` through `writer` (the server shares one writer between all its
    /// turns) under `owner`, copying artifacts up to [`DEFAULT_MAX_ARTIFACT_BYTES`].
    pub fn new(store: Store, writer: EventWriter, owner: impl Into<String>) -> Recorder {
        Recorder {
            artifacts: ArtifactStore::new(store.clone(), DEFAULT_MAX_ARTIFACT_BYTES),
            store,
            writer,
            owner: owner.into(),
        }
    }

    /// [`Recorder::new`] with an event writer of its own that counts nothing.
    pub fn spawn(store: Store, owner: impl Into<String>) -> Recorder {
        let writer = EventWriter::spawn(store.clone(), Arc::new(NoObserver));
        Recorder::new(store, writer, owner)
    }

    /// The largest artifact copied at a turn's end.
    pub fn max_artifact_bytes(mut self, max_bytes: u64) -> Recorder {
        self.artifacts = ArtifactStore::new(self.store.clone(), max_bytes);
        self
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn writer(&self) -> &EventWriter {
        &self.writer
    }

    /// Whose turns these are (`turns.owner`).
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Its artifact store, to hand the app (`AppBuilder::artifact_registry`) so that a call's
    /// files are stored as the call ends, not only at the turn's end.
    pub fn artifacts(&self) -> Arc<ArtifactStore> {
        self.artifacts.clone()
    }

    /// Record `plan` as a `running` turn of `user_id` (with its images, in one transaction)
    /// in the session `session` says, and return the engine's spec of it (a fresh run:
    /// `first_seq` 0, no checkpoint, no workspace yet). Everything the spec needs is built
    /// before the insert: once the turn is recorded `running`, nothing may fail before it
    /// runs.
    pub async fn record(
        &self,
        user_id: &str,
        session: SessionChoice,
        plan: TurnPlan,
    ) -> Result<TurnSpec, StoreError> {
        let (session_id, history) = match session {
            SessionChoice::New { history } => {
                let session = self.store.create_session(user_id, &plan.problem).await?;
                (session.id, history)
            }
            SessionChoice::Continue {
                session_id,
                history,
            } => (session_id, history),
        };
        let stored = StoredTurnSpec {
            language: plan.language,
            tools: plan.tools,
            config: plan.config.to_map(),
            context_window: plan.context_window,
            history,
            material: plan.material,
            images: plan.images.stored(),
        };
        let new = NewTurn {
            id: plan.turn_id,
            session_id,
            user_id: user_id.to_string(),
            problem: plan.problem,
            spec: stored.clone(),
            owner: self.owner.clone(),
        };
        let rows = plan.images.rows();
        let mut spec = engine_spec(stored, plan.config, TurnKeys::from(&new));
        plan.images.put_on(&mut spec);
        self.store.create_turn_with_images(&new, &rows).await?;
        Ok(spec)
    }

    /// Claim an interrupted turn for this owner, to run it again (its spec from
    /// `crate::stored::resume_spec`); `false`: it is no longer interrupted (resumed
    /// elsewhere meanwhile).
    pub async fn reclaim(&self, turn_id: &str) -> Result<bool, StoreError> {
        self.store.reclaim_interrupted(turn_id, &self.owner).await
    }

    /// Run a recorded turn to its end and record how it ended (see the module docs): its
    /// outcome, or why it did not run. Its workspace is let go once the end is recorded (its
    /// artifacts are in the store by then).
    pub async fn run(&self, run: TurnRun) -> Result<TurnOutcome, TurnFailure> {
        let TurnRun {
            engine,
            model,
            mut spec,
            workspace: held,
            watcher,
            cancel,
        } = run;
        spec.workspace = held.as_ref().map(|h| h.path().to_path_buf());
        let turn_id = spec.turn_id.clone();
        let user_id = spec.user_id.clone().unwrap_or_default();
        let workspace = spec.workspace.clone();
        let sink = Arc::new(Tee {
            record: self.writer.sink(&turn_id, spec.first_seq),
            watcher,
        });
        let task_sink = sink.clone();
        let task = tokio::spawn(async move {
            engine
                .run_turn(model.as_ref(), spec, task_sink.as_ref(), cancel)
                .await
        });
        let result = match task.await {
            Ok(Ok(outcome)) => Ok(outcome),
            Ok(Err(e)) => Err(TurnFailure::NotStarted(e)),
            Err(join) => {
                tracing::error!(turn_id, error = %join, "the engine task failed");
                Err(TurnFailure::Crashed)
            }
        };
        let finish = match &result {
            Ok(outcome) => {
                if let Some(ws) = &workspace {
                    (self.artifacts)
                        .store_leftovers(&turn_id, &user_id, ws, outcome)
                        .await;
                }
                finish_of(outcome)
            }
            Err(failure) => self.failed(&sink.record, failure),
        };
        self.writer.finish(&sink.record, finish).await;
        drop(held);
        result
    }

    /// A turn that did not run: counted, and its log and record say why.
    fn failed(&self, sink: &TurnSink, failure: &TurnFailure) -> TurnFinish {
        self.writer.observer().turn_ended("failed", 0, 0, 0);
        let message = failure.to_string();
        sink.send_extra(EventKind::Error {
            kind: failure.kind(),
            message: message.clone(),
        });
        TurnFinish {
            status: Some(TurnStatus::Failed),
            error: Some(message),
            ..TurnFinish::default()
        }
    }
}

/// A recorded turn, ready to run: what it runs on, where its events also go, how it is
/// stopped.
pub struct TurnRun {
    engine: Arc<Engine>,
    model: Arc<dyn ChatModel>,
    spec: TurnSpec,
    workspace: Option<HeldWorkspace>,
    watcher: Option<Arc<dyn EventSink>>,
    cancel: CancellationToken,
}

impl TurnRun {
    /// `spec` on `app`'s engine and main model, without a workspace or a watcher, stopped by
    /// nothing until [`TurnRun::cancel`] gives a token.
    pub fn new(app: &App, spec: TurnSpec) -> TurnRun {
        TurnRun {
            engine: app.engine().clone(),
            model: app.model().clone(),
            spec,
            workspace: None,
            watcher: None,
            cancel: CancellationToken::new(),
        }
    }

    /// Run on this model instead of the app's main one (the CLI watches it for errors).
    pub fn model(mut self, model: Arc<dyn ChatModel>) -> TurnRun {
        self.model = model;
        self
    }

    /// The turn's workspace ([`hold_workspace_for`]), held until its end is recorded.
    pub fn workspace(mut self, workspace: Option<HeldWorkspace>) -> TurnRun {
        self.workspace = workspace;
        self
    }

    /// Every event the engine emits goes to `watcher` too, as it happens (before it is
    /// written). Events the engine did not emit — why a turn did not run — are recorded
    /// only; [`TurnFailure`] says it.
    pub fn watcher(mut self, watcher: Arc<dyn EventSink>) -> TurnRun {
        self.watcher = Some(watcher);
        self
    }

    /// Cancelling `cancel` stops the turn (recorded `cancelled`, with the best answer so far).
    pub fn cancel(mut self, cancel: CancellationToken) -> TurnRun {
        self.cancel = cancel;
        self
    }

    pub fn spec(&self) -> &TurnSpec {
        &self.spec
    }
}

/// Why a recorded turn did not run; it is recorded `failed` with this message.
#[derive(Debug, thiserror::Error)]
pub enum TurnFailure {
    /// The engine refused it at its start.
    #[error(transparent)]
    NotStarted(TurnError),
    /// Its task panicked.
    #[error("the turn failed inside the server")]
    Crashed,
}

impl TurnFailure {
    /// The kind of its `error` event.
    pub fn kind(&self) -> ErrorKind {
        match self {
            TurnFailure::NotStarted(_) => ErrorKind::TurnNotStarted,
            TurnFailure::Crashed => ErrorKind::Internal,
        }
    }
}

/// The store's record of how a turn that ran ended.
pub fn finish_of(outcome: &TurnOutcome) -> TurnFinish {
    TurnFinish {
        status: Some(if outcome.stop_reason == StopReason::Cancelled {
            TurnStatus::Cancelled
        } else {
            TurnStatus::Finished
        }),
        answer: outcome.answer.clone(),
        stop_reason: Some(outcome.stop_reason),
        usage: Some(outcome.usage),
        solve: Some(outcome.solve.clone()),
        rounds: outcome.rounds,
        elapsed_ms: outcome.elapsed_ms,
        error: outcome.error.clone(),
    }
}

/// The workspace of turn `turn_id`, made under `root()` and held, when a tool among `tools`
/// needs one (`App::needs_workspace`); `root` is asked only then.
pub fn hold_workspace_for<S: AsRef<str>>(
    app: &App,
    tools: &[S],
    turn_id: &str,
    root: impl FnOnce() -> Result<PathBuf, WorkspaceError>,
) -> Result<Option<HeldWorkspace>, WorkspaceError> {
    if !app.needs_workspace(tools) {
        return Ok(None);
    }
    hold_workspace(&root()?, turn_id).map(Some)
}

/// Every event to the caller's watcher, then to the turn's log.
struct Tee {
    record: TurnSink,
    watcher: Option<Arc<dyn EventSink>>,
}

impl EventSink for Tee {
    fn send(&self, event: TurnEvent) {
        if let Some(watcher) = &self.watcher {
            watcher.send(event.clone());
        }
        self.record.send(event);
    }
}
