//! Starting turns from HTTP requests: validate a request in the API's terms (422s naming the
//! problem), then hand the turn to `deepsolve_app::life` — recorded under this replica's
//! instance id, run on its own task with every event logged through the shared event writer,
//! its end recorded — while this replica holds a slot for it.

use std::sync::Arc;

use deepsolve_app::ToolRequestError;
use deepsolve_app::life::{Recorder, SessionChoice, TurnPlan, TurnRun, hold_workspace_for};
use deepsolve_app::turn::HeldWorkspace;
use deepsolve_core::{ConfigError, SolveConfig, TurnSpec};
use deepsolve_protocol::api::{ApiErrorCode, CreateTurn, TurnCreated};
use deepsolve_protocol::{Language, Material, PriorTurn, TurnStatus};
use deepsolve_store::KnowledgeBase;
use serde_json::{Map, Value};

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::upload::Upload;
use deepsolve_kb::Knowledge;

/// Where this replica records its turns: the store, through the shared event writer (which
/// feeds the metrics), under its instance id.
pub(crate) fn recorder(state: &AppState) -> Recorder {
    Recorder::new(
        state.store.clone(),
        state.writer.clone(),
        state.config.instance_id.clone(),
    )
    .max_artifact_bytes(state.config.max_artifact_bytes)
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
    let mut plan = prepare(state, &req, has_material)?;
    plan.images = crate::images::for_new_turn(
        state,
        &req.images,
        uploaded.images,
        &plan.tools,
        plan.language,
    )
    .await?;
    let asked = asked_material(state, caller, &req, files).await?;
    let turn_id = plan.turn_id.clone();
    // Reserve the slot first: a refused turn must leave nothing behind.
    let cancel = state.register_turn(&turn_id)?;
    let mut attachments_kb = None;
    let result = async {
        if let Some(asked) = asked {
            plan.material = Some(asked.gather(caller, &turn_id, &mut attachments_kb).await?);
        }
        record_turn(state, caller, &req, history, plan, cancel.clone()).await
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

/// Record the turn in the session the request names (or a new one) and start it.
async fn record_turn(
    state: &Arc<AppState>,
    caller: &Caller,
    req: &CreateTurn,
    given_history: Option<Vec<PriorTurn>>,
    plan: TurnPlan,
    cancel: tokio_util::sync::CancellationToken,
) -> ApiResult<TurnCreated> {
    let session = match (&req.session_id, given_history) {
        (_, Some(history)) => SessionChoice::New { history },
        (Some(id), None) => SessionChoice::continuing(&state.store, id, &caller.user_id)
            .await?
            .ok_or_else(|| ApiError::not_found("session"))?,
        (None, None) => SessionChoice::new(),
    };
    let spec = recorder(state)
        .record(&caller.user_id, session, plan)
        .await?;
    Ok(launch(state, spec, cancel))
}

/// Run a recorded turn (new or resumed) on its own task; its slot is `cancel`'s. The
/// workspace is made here, once the turn exists: a refused turn leaves no directory, and a
/// resumed one finds the files it wrote before. The turn holds it until its end is recorded,
/// so no collection deletes it meanwhile.
pub(crate) fn launch(
    state: &Arc<AppState>,
    spec: TurnSpec,
    cancel: tokio_util::sync::CancellationToken,
) -> TurnCreated {
    let workspace = workspace_for(state, &spec);
    let created = TurnCreated {
        events_url: format!("/api/v1/turns/{}/events", spec.turn_id),
        turn_id: spec.turn_id.clone(),
        session_id: spec.session_id.clone().unwrap_or_default(),
        status: TurnStatus::Running,
    };
    let run = TurnRun::new(&state.app, spec)
        .workspace(workspace)
        .cancel(cancel);
    tokio::spawn(drive(state.clone(), run));
    created
}

/// Check the request. `has_material`: the turn asks for knowledge bases or attachments, and
/// so is offered the knowledge tools.
fn prepare(state: &AppState, req: &CreateTurn, has_material: bool) -> ApiResult<TurnPlan> {
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
    let tools = check_tools(state, &req.tools, has_material)?;
    let config = turn_config(&state.solve_defaults(), &req.config)?;
    Ok(TurnPlan::new(
        req.problem.clone(),
        language,
        tools,
        config,
        state.config.context_window,
    ))
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
/// the turn; none (logged) when it cannot be made.
fn workspace_for(state: &AppState, spec: &TurnSpec) -> Option<HeldWorkspace> {
    let root = state.config.workspace_root.clone()?;
    let turn_id = spec.turn_id.as_str();
    match hold_workspace_for(&state.app, &spec.tools, turn_id, || Ok(root)) {
        Ok(held) => held,
        Err(e) => {
            tracing::warn!(turn_id, error = %e, "no workspace for this turn");
            None
        }
    }
}

/// Run the turn to its end and record it (its outcome is in the store), then free its slot.
async fn drive(state: Arc<AppState>, run: TurnRun) {
    let turn_id = run.spec().turn_id.clone();
    let _ = recorder(&state).run(run).await;
    state.unregister_turn(&turn_id);
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
}
