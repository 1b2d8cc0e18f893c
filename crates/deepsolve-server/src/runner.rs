//! Starting and driving turns: validate a request, record the turn, run `Engine::run_turn` on
//! its own task with a sink that logs every event as it happens, and record how it ended.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use deepsolve_app::stored::{TurnKeys, engine_spec};
use deepsolve_app::{
    ArtifactRegistry, HeldWorkspace, ToolRequestError, hold_workspace, is_rendered, new_turn_id,
};
use deepsolve_core::{Artifact, ConfigError, SolveConfig, ToolContext, TurnSpec};
use deepsolve_protocol::api::{ApiErrorCode, CreateTurn, TurnCreated};
use deepsolve_protocol::{
    ErrorKind, EventKind, Language, Material, PriorTurn, StopReason, StoredTurnSpec, TurnOutcome,
    TurnStatus,
};
use deepsolve_store::{
    ArtifactMeta, ArtifactOrigin, KnowledgeBase, NewArtifact, NewTurn, Store, TurnFinish,
};
use serde_json::{Map, Value};

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::upload::Upload;
use deepsolve_app::stored::TurnImages;
use deepsolve_kb::Knowledge;

/// A validated request, ready to run.
struct Prepared {
    language: Language,
    tools: Vec<String>,
    config: SolveConfig,
    /// What the turn may read (its knowledge bases and attachments), once gathered.
    material: Option<Material>,
    /// Its images, ready, once checked.
    images: TurnImages,
}

/// Validate, record and start a turn.
pub async fn start_turn(
    state: &Arc<AppState>,
    caller: &Caller,
    req: CreateTurn,
) -> ApiResult<TurnCreated> {
    start_turn_with(state, caller, req, None).await
}

/// Like [`start_turn`], with the conversation so far given by the client (the OpenAI facade)
/// instead of read from a stored session: the turn then opens a new session.
pub async fn start_turn_with(
    state: &Arc<AppState>,
    caller: &Caller,
    req: CreateTurn,
    history: Option<Vec<PriorTurn>>,
) -> ApiResult<TurnCreated> {
    start(state, caller, req, history, Uploaded::default()).await
}

/// Files that came with a turn as `multipart/form-data` parts.
#[derive(Debug, Default)]
pub struct Uploaded {
    /// Attachments (parts `file`).
    pub files: Vec<Upload>,
    /// Images (parts `image`).
    pub images: Vec<Upload>,
}

/// Like [`start_turn`], with attachments and images uploaded as files (besides those inline
/// in `req`).
pub async fn start_turn_with_files(
    state: &Arc<AppState>,
    caller: &Caller,
    req: CreateTurn,
    uploaded: Uploaded,
) -> ApiResult<TurnCreated> {
    start(state, caller, req, None, uploaded).await
}

async fn start(
    state: &Arc<AppState>,
    caller: &Caller,
    req: CreateTurn,
    history: Option<Vec<PriorTurn>>,
    uploaded: Uploaded,
) -> ApiResult<TurnCreated> {
    let files = uploaded.files;
    let has_material =
        !req.knowledge_bases.is_empty() || !req.attachments.is_empty() || !files.is_empty();
    let mut prepared = prepare(state, &req, has_material)?;
    prepared.images = crate::images::for_new_turn(
        state,
        &req.images,
        uploaded.images,
        &prepared.tools,
        prepared.language,
    )
    .await?;
    let asked = asked_material(state, caller, &req, files).await?;
    let turn_id = new_turn_id();
    // Reserve the slot first: a refused turn must leave nothing behind.
    let cancel = state.register_turn(&turn_id)?;
    let mut attachments_kb = None;
    let result = async {
        if let Some(asked) = asked {
            prepared.material = Some(asked.gather(caller, &turn_id, &mut attachments_kb).await?);
        }
        record_turn(
            state,
            caller,
            &req,
            history,
            &turn_id,
            prepared,
            cancel.clone(),
        )
        .await
    }
    .await;
    match result {
        Ok(created) => Ok(created),
        Err(e) => {
            state.unregister_turn(&turn_id);
            if let Some(kb_id) = attachments_kb {
                drop_attachments(state, caller, &kb_id).await;
            }
            Err(e)
        }
    }
}

/// A refused turn keeps no attachments.
async fn drop_attachments(state: &AppState, caller: &Caller, kb_id: &str) {
    let Some(knowledge) = state.app.knowledge() else {
        return;
    };
    if let Err(e) = knowledge.delete_kb(&caller.user_id, kb_id).await {
        tracing::warn!(kb_id, error = %e, "a refused turn's attachments were not deleted");
    }
}

/// What a turn asked to read: its knowledge bases (resolved) and its attachments (read).
struct AskedMaterial {
    knowledge: Knowledge,
    kbs: Vec<KnowledgeBase>,
    uploads: Vec<Upload>,
}

/// Check the material a turn asks for before anything is recorded: unknown knowledge bases
/// and unreadable attachments are refused here. `None`: the turn asks for none.
async fn asked_material(
    state: &AppState,
    caller: &Caller,
    req: &CreateTurn,
    files: Vec<Upload>,
) -> ApiResult<Option<AskedMaterial>> {
    let caps = state.config.kb.caps();
    let mut uploads = crate::upload::decode_attachments(&req.attachments, caps)?;
    uploads.extend(files);
    if uploads.len() > caps.max_files {
        return Err(ApiError::invalid(
            ApiErrorCode::InvalidRequest,
            format!("at most {} attachments per turn", caps.max_files),
        ));
    }
    if uploads.is_empty() && req.knowledge_bases.is_empty() {
        return Ok(None);
    }
    let knowledge = crate::kb::knowledge(state)?;
    let kbs = if req.knowledge_bases.is_empty() {
        Vec::new()
    } else {
        knowledge
            .resolve_kbs(&caller.user_id, &req.knowledge_bases)
            .await
            .map_err(crate::kb::kb_error)?
    };
    Ok(Some(AskedMaterial {
        knowledge,
        kbs,
        uploads,
    }))
}

impl AskedMaterial {
    /// Ingest the attachments into the turn's hidden knowledge base (its id goes to
    /// `hidden` as soon as it exists, so a refusal can delete it), then list the material.
    /// An attachment that cannot be read refuses the turn with 422 naming it and why.
    async fn gather(
        self,
        caller: &Caller,
        turn_id: &str,
        hidden: &mut Option<String>,
    ) -> ApiResult<Material> {
        let knowledge = &self.knowledge;
        let user_id = &caller.user_id;
        let mut attachments = None;
        if !self.uploads.is_empty() {
            let kb = knowledge
                .attachments_kb(user_id, turn_id)
                .await
                .map_err(crate::kb::kb_error)?;
            *hidden = Some(kb.id.clone());
            for upload in self.uploads {
                let doc = knowledge
                    .ingestor()
                    .add(user_id, &kb.id, &upload.name, upload.bytes.len() as u64)
                    .await
                    .map_err(crate::kb::ingest_error)?;
                knowledge
                    .ingestor()
                    .run(user_id, &doc.id, upload.bytes, &|_| {})
                    .await
                    .map_err(crate::kb::ingest_error)?;
            }
            attachments = Some(kb);
        }
        knowledge
            .material(user_id, &self.kbs, attachments.as_ref())
            .await
            .map_err(crate::kb::kb_error)
    }
}

async fn record_turn(
    state: &Arc<AppState>,
    caller: &Caller,
    req: &CreateTurn,
    given_history: Option<Vec<PriorTurn>>,
    turn_id: &str,
    prepared: Prepared,
    cancel: tokio_util::sync::CancellationToken,
) -> ApiResult<TurnCreated> {
    let (session_id, history) = match (&req.session_id, given_history) {
        (_, Some(history)) => {
            let session = state
                .store
                .create_session(&caller.user_id, &req.problem)
                .await?;
            (session.id, history)
        }
        (Some(id), None) => {
            let session = state
                .store
                .session(id, &caller.user_id)
                .await?
                .ok_or_else(|| ApiError::not_found("session"))?;
            let history = state.store.prior_turns(&session.id).await?;
            (session.id, history)
        }
        (None, None) => {
            let session = state
                .store
                .create_session(&caller.user_id, &req.problem)
                .await?;
            (session.id, Vec::new())
        }
    };
    let stored = StoredTurnSpec {
        language: prepared.language,
        tools: prepared.tools,
        config: prepared.config.to_map(),
        context_window: state.config.context_window,
        history,
        material: prepared.material,
        images: prepared.images.stored(),
    };
    let new = NewTurn {
        id: turn_id.to_string(),
        session_id: session_id.clone(),
        user_id: caller.user_id.clone(),
        problem: req.problem.clone(),
        spec: stored.clone(),
        owner: state.config.instance_id.clone(),
    };
    // Built before the insert: once the turn is recorded `running`, nothing may fail before
    // its task starts (a failure would leave a running turn that nothing runs).
    let rows = prepared.images.rows();
    let mut spec = engine_spec(stored, prepared.config, TurnKeys::from(&new));
    prepared.images.put_on(&mut spec);
    state.store.create_turn_with_images(&new, &rows).await?;
    Ok(launch(state, spec, cancel))
}

/// Run a recorded turn (new or resumed) on its own task; its slot is `cancel`'s. The
/// workspace is made here, once the turn exists: a refused turn leaves no directory, and a
/// resumed one finds the files it wrote before. The turn's task holds it until the turn's end
/// is recorded, so no collection deletes it meanwhile.
pub(crate) fn launch(
    state: &Arc<AppState>,
    mut spec: TurnSpec,
    cancel: tokio_util::sync::CancellationToken,
) -> TurnCreated {
    let workspace = workspace_for(state, &spec);
    spec.workspace = workspace.as_ref().map(|held| held.path().to_path_buf());
    let created = TurnCreated {
        events_url: format!("/api/v1/turns/{}/events", spec.turn_id),
        turn_id: spec.turn_id.clone(),
        session_id: spec.session_id.clone().unwrap_or_default(),
        status: TurnStatus::Running,
    };
    tokio::spawn(drive(state.clone(), spec, cancel, workspace));
    created
}

/// Check the request. `has_material`: the turn asks for knowledge bases or attachments, and
/// so is offered the knowledge tools.
fn prepare(state: &AppState, req: &CreateTurn, has_material: bool) -> ApiResult<Prepared> {
    if req.problem.trim().is_empty() {
        return Err(ApiError::invalid(
            ApiErrorCode::InvalidRequest,
            "'problem' is empty",
        ));
    }
    let chars = req.problem.chars().count();
    if chars > state.config.max_problem_chars {
        return Err(ApiError::invalid(
            ApiErrorCode::InvalidRequest,
            format!(
                "'problem' has {chars} characters; at most {} are accepted",
                state.config.max_problem_chars
            ),
        ));
    }
    let language = match req.language.as_deref() {
        None => Language::En,
        Some(l) => Language::parse(l).ok_or_else(|| {
            ApiError::invalid(
                ApiErrorCode::InvalidRequest,
                format!("unknown language '{l}': use en or zh"),
            )
        })?,
    };
    Ok(Prepared {
        language,
        tools: check_tools(state, &req.tools, has_material)?,
        config: turn_config(&state.solve_defaults(), &req.config)?,
        material: None,
        images: TurnImages::default(),
    })
}

/// The turn's work tools by the catalog's rule (`App::tools_for_turn`); refused names are a
/// 422 `unknown_tool` naming the available ones.
fn check_tools(
    state: &AppState,
    requested: &[String],
    has_material: bool,
) -> ApiResult<Vec<String>> {
    state
        .app
        .tools_for_turn_with(requested, has_material)
        .map_err(|e| ApiError::invalid(ApiErrorCode::UnknownTool, refused_tools(&e)))
}

fn refused_tools(e: &ToolRequestError) -> String {
    let available = if e.available.is_empty() {
        "none".to_string()
    } else {
        e.available.join(", ")
    };
    let mut parts = Vec::new();
    if !e.unknown.is_empty() {
        parts.push(format!(
            "unknown tools: {} (available: {available})",
            e.unknown.join(", ")
        ));
    }
    if !e.unavailable.is_empty() {
        let named: Vec<String> = e
            .unavailable
            .iter()
            .map(|(name, why)| format!("{name} ({why})"))
            .collect();
        parts.push(format!(
            "tools not available on this server: {} (available: {available})",
            named.join(", ")
        ));
    }
    parts.join("; ")
}

/// The server defaults with the turn's overrides, strictly: every unknown key is named. A
/// legacy key is taken and ignored, with a warning in the log (the turn has no other channel
/// before it starts).
pub fn turn_config(
    defaults: &SolveConfig,
    overrides: &Map<String, Value>,
) -> ApiResult<SolveConfig> {
    for legacy in SolveConfig::legacy_warnings(overrides) {
        tracing::warn!("in a turn's config: {legacy}");
    }
    apply_overrides(defaults, overrides, OverridesIn::TurnConfig).map(|(config, _)| config)
}

/// Where solve overrides were written, so that an unknown key is named as the client wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverridesIn {
    /// A turn's `config` (keys are bare knob names).
    TurnConfig,
    /// The `solve` section of `PUT /api/v1/capabilities/settings`.
    SettingsChange,
}

/// `defaults` with `overrides` applied and clamped by core, with what was clamped. Unknown keys get core's message (all of them named, the nearest known key suggested).
pub fn apply_overrides(
    defaults: &SolveConfig,
    overrides: &Map<String, Value>,
    written_in: OverridesIn,
) -> ApiResult<(SolveConfig, Vec<deepsolve_core::config::ClampWarning>)> {
    match defaults.with_overrides(overrides) {
        Ok(applied) => Ok(applied),
        Err(ConfigError::UnknownKey(unknown)) => {
            let unknown = match written_in {
                OverridesIn::TurnConfig => unknown.found("in the turn's config"),
                OverridesIn::SettingsChange => unknown.under("solve").found("in the request"),
            };
            Err(ApiError::invalid(
                ApiErrorCode::UnknownConfigKey,
                unknown.to_string(),
            ))
        }
        Err(e) => Err(ApiError::invalid(
            ApiErrorCode::InvalidConfig,
            e.to_string(),
        )),
    }
}

/// A private directory for a turn whose tools need one (the same rule as the CLI's), held for
/// the turn.
fn workspace_for(state: &AppState, spec: &TurnSpec) -> Option<HeldWorkspace> {
    if !state.app.needs_workspace(&spec.tools) {
        return None;
    }
    let root = state.config.workspace_root.as_ref()?;
    let turn_id = spec.turn_id.as_str();
    match hold_workspace(root, turn_id) {
        Ok(held) => Some(held),
        Err(e) => {
            tracing::warn!(turn_id, error = %e, "no workspace for this turn");
            None
        }
    }
}

/// Run the turn to its end and record it. The engine runs on its own task so that a panic
/// inside it becomes a failed turn, not a turn stuck `running`. `held` is the turn's
/// workspace, let go once the end is recorded (its artifacts are in the store by then).
async fn drive(
    state: Arc<AppState>,
    spec: TurnSpec,
    cancel: tokio_util::sync::CancellationToken,
    held: Option<HeldWorkspace>,
) {
    let turn_id = spec.turn_id.clone();
    let user_id = spec.user_id.clone().unwrap_or_default();
    let workspace = spec.workspace.clone();
    let sink = Arc::new(state.writer.sink(&turn_id, spec.first_seq));
    let engine = state.app.engine().clone();
    let model = state.app.model().clone();
    let task_sink = sink.clone();
    let task = tokio::spawn(async move {
        engine
            .run_turn(model.as_ref(), spec, task_sink.as_ref(), cancel)
            .await
    });
    let finish = match task.await {
        Ok(Ok(outcome)) => {
            if let Some(ws) = &workspace {
                store_artifacts(&state, &turn_id, &user_id, ws, &outcome).await;
            }
            finish_of(&outcome)
        }
        Ok(Err(e)) => failed(&state, &sink, ErrorKind::TurnNotStarted, e.to_string()),
        Err(join) => {
            tracing::error!(turn_id, error = %join, "the engine task failed");
            failed(
                &state,
                &sink,
                ErrorKind::Internal,
                "the turn failed inside the server".into(),
            )
        }
    };
    state.writer.finish(&sink, finish).await;
    drop(held);
    state.unregister_turn(&turn_id);
}

fn failed(
    state: &AppState,
    sink: &crate::writer::TurnSink,
    kind: ErrorKind,
    message: String,
) -> TurnFinish {
    state.metrics.turn_ended("failed", 0, 0, 0);
    sink.send_extra(EventKind::Error {
        kind,
        message: message.clone(),
    });
    TurnFinish {
        status: Some(TurnStatus::Failed),
        error: Some(message),
        ..Default::default()
    }
}

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

/// Copy the files a turn produced into the store that were not stored as their call ended
/// (see [`ArtifactStore`]), so any replica can serve them. A file reported by several calls
/// and never stored live is stored once, as it was at the end.
async fn store_artifacts(
    state: &AppState,
    turn_id: &str,
    user_id: &str,
    workspace: &Path,
    outcome: &TurnOutcome,
) {
    let stored_live: std::collections::HashSet<&str> = (outcome.artifacts.iter())
        .filter(|a| a.id.is_some())
        .map(|a| a.path.as_str())
        .collect();
    let mut seen = std::collections::HashSet::new();
    for artifact in outcome.artifacts.iter().rev() {
        if stored_live.contains(artifact.path.as_str()) || !seen.insert(artifact.path.as_str()) {
            continue;
        }
        let owner = Owner {
            turn_id,
            user_id,
            workspace,
        };
        store_one(
            &state.store,
            state.config.max_artifact_bytes,
            &owner,
            artifact,
        )
        .await;
    }
}

/// Whose file an artifact is.
struct Owner<'a> {
    turn_id: &'a str,
    user_id: &'a str,
    workspace: &'a Path,
}

/// Copy one reported file into the store. Paths are resolved inside the workspace only: a
/// tool (or a model steering one) cannot make the server read `/etc/passwd` by naming it as
/// an artifact. `None` (logged): outside, too large, unreadable, or not stored.
async fn store_one(
    store: &Store,
    max_bytes: u64,
    owner: &Owner<'_>,
    artifact: &Artifact,
) -> Option<ArtifactMeta> {
    let turn_id = owner.turn_id;
    let Some(path) = inside(owner.workspace, &artifact.path) else {
        tracing::warn!(turn_id, path = %artifact.path, "artifact outside the workspace skipped");
        return None;
    };
    let content = match tokio::fs::metadata(&path).await {
        Ok(meta) if meta.len() <= max_bytes => tokio::fs::read(&path).await,
        Ok(_) => {
            tracing::warn!(turn_id, path = %artifact.path, "artifact too large; skipped");
            return None;
        }
        Err(e) => Err(e),
    };
    let content = match content {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(turn_id, path = %artifact.path, error = %e, "artifact unreadable");
            return None;
        }
    };
    let name = Path::new(&artifact.path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "artifact".into());
    let new = NewArtifact {
        turn_id: turn_id.to_string(),
        user_id: owner.user_id.to_string(),
        name,
        mime: artifact.mime.clone(),
        origin: origin(artifact, &content),
        content,
    };
    match store.put_artifact(new).await {
        Ok(meta) => Some(meta),
        Err(e) => {
            tracing::error!(turn_id, error = %e, "artifact not stored");
            None
        }
    }
}

/// A file is ours (drawn by deepsolve, shown inline) only when its tool recorded the hash of
/// what it wrote and the bytes read back still have it ([`is_rendered`]).
fn origin(artifact: &Artifact, content: &[u8]) -> ArtifactOrigin {
    if is_rendered(artifact, content) {
        ArtifactOrigin::Rendered
    } else {
        ArtifactOrigin::Workspace
    }
}

/// Stores a call's artifacts as the call ends, before its `tool_result` event, which then
/// carries each stored copy's `id` and `url` (the web UI shows a figure while the turn runs).
pub struct ArtifactStore {
    store: Store,
    max_bytes: u64,
}

impl ArtifactStore {
    /// `max_bytes`: the largest file copied (`ServerConfig::max_artifact_bytes`).
    pub fn new(store: Store, max_bytes: u64) -> Arc<Self> {
        Arc::new(ArtifactStore { store, max_bytes })
    }
}

#[async_trait::async_trait]
impl ArtifactRegistry for ArtifactStore {
    async fn register(&self, ctx: &ToolContext, artifacts: &mut [Artifact]) {
        let (Some(workspace), Some(user_id)) = (&ctx.workspace, &ctx.user_id) else {
            return;
        };
        let owner = Owner {
            turn_id: &ctx.turn_id,
            user_id,
            workspace,
        };
        for artifact in artifacts.iter_mut() {
            if let Some(meta) = store_one(&self.store, self.max_bytes, &owner, artifact).await {
                artifact.url = Some(format!("/api/v1/artifacts/{}", meta.id));
                artifact.id = Some(meta.id);
            }
        }
    }
}

/// `rel` resolved under `root`, or `None` if it would leave it (`..`, absolute paths,
/// symlinks pointing out).
fn inside(root: &Path, rel: &str) -> Option<PathBuf> {
    let root = root.canonicalize().ok()?;
    let candidate = root.join(rel.trim_start_matches('/'));
    let resolved = candidate.canonicalize().ok()?;
    resolved.starts_with(&root).then_some(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_unknown_config_key_is_named() {
        let defaults = SolveConfig::default();
        let mut map = Map::new();
        map.insert("max_rounds".into(), json!(5));
        map.insert("bogus".into(), json!(1));
        map.insert("also_bad".into(), json!(true));
        let err = turn_config(&defaults, &map).expect_err("refused");
        assert_eq!(err.code, ApiErrorCode::UnknownConfigKey);
        assert!(err.message.contains("bogus") && err.message.contains("also_bad"));
        map.remove("bogus");
        map.remove("also_bad");
        map.insert("max_rounds".into(), json!(500));
        let cfg = turn_config(&defaults, &map).expect("clamped, not refused");
        assert_eq!(cfg.max_rounds, 50);
        map.insert("max_rounds".into(), json!("lots"));
        assert_eq!(
            turn_config(&defaults, &map).err().map(|e| e.code),
            Some(ApiErrorCode::InvalidConfig)
        );
    }

    #[test]
    fn artifact_paths_cannot_leave_the_workspace() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("ok.txt"), "x").expect("write");
        assert!(inside(dir.path(), "ok.txt").is_some());
        assert!(inside(dir.path(), "/ok.txt").is_some());
        assert!(inside(dir.path(), "../../etc/passwd").is_none());
        assert!(inside(dir.path(), "missing.txt").is_none());
    }
}
