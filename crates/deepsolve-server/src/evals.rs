//! `/api/v1/evals…`: evaluation runs (`deepsolve-eval`) started over HTTP, against the
//! server's configured model. A run is a problem set (a shipped one named, or JSONL uploaded
//! in the request) under one or more modes (`plain`, `deepsolve`); each deepsolve problem is
//! a turn of the caller, recorded like any other (its trace opens in the UI).
//!
//! A run lives in a directory of its own under [`EvalConfig::root`] — the layout the CLI's
//! `deepsolve eval --out DIR` writes (`results.jsonl`, `run.json`, `report/`), plus
//! `eval.json` (who owns it, what was asked, how it ended) and `problems.json` (the problems
//! chosen) — so finished runs survive a restart, and `deepsolve eval report DIR` reads them.
//! A run that was running when the server stopped is `interrupted` at the next start, its
//! finished results kept.
//!
//! Runs are the caller's: another user's is a 404 on every route. They are bounded: the
//! upload's size, the problems per run, the runs this replica runs at once.

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use axum::Json;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use deepsolve_app::eval::TurnSolver;
use deepsolve_eval::report::{Report, build, load_run, plots};
use deepsolve_eval::{
    DataError, ENDPOINT_DOWN_AFTER, Grader, Mode, ModeTally, PlainOptions, Problem, Progress,
    ResultRecord, RunConfig, Runner, Selection,
};
use deepsolve_protocol::api::ApiErrorCode;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::{OnceCell, watch};
use tokio_util::sync::CancellationToken;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiJson;
use crate::state::AppState;

type AppStateRef = State<Arc<AppState>>;

/// What a run's directory holds besides the runner's files.
const META_FILE: &str = "eval.json";
const PROBLEMS_FILE: &str = "problems.json";

/// The modes a server run may ask for.
const MODES: [&str; 2] = ["deepsolve", "plain"];

/// Limits and the place of evaluation runs (`server.evals`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalConfig {
    /// Where runs are kept (`<data dir>/evals/server` for `deepsolve serve`); `None`: the
    /// server runs no evaluations (503).
    pub root: Option<PathBuf>,
    /// The largest uploaded set, in bytes.
    pub max_upload_bytes: usize,
    /// Most problems per run (after `limit`/`sample`).
    pub max_problems: usize,
    /// Runs this replica runs at once; more are refused with 503.
    pub max_running: usize,
    /// Problems in flight at once within a run, at most (a request may ask for fewer).
    pub max_concurrency: usize,
}

impl Default for EvalConfig {
    fn default() -> Self {
        EvalConfig {
            root: None,
            max_upload_bytes: 5 * 1024 * 1024,
            max_problems: 500,
            max_running: 2,
            max_concurrency: 4,
        }
    }
}

impl EvalConfig {
    /// The request body a run may come in: the upload (JSON-escaped, at worst about twice its
    /// size for ASCII control-heavy text) and its options.
    pub fn max_request_bytes(&self) -> usize {
        self.max_upload_bytes
            .saturating_mul(2)
            .saturating_add(64 * 1024)
    }
}

/// `POST /api/v1/evals`: a shipped `set`, or `data`. Unknown fields are refused by name.
/// (Serialised only to describe it: what it writes is what it accepts.)
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateEval {
    /// A shipped set by name (`gsm-style-en`, `zh-arith`); or, with `data`, the upload's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<String>,
    /// The set itself: JSONL text (any layout `deepsolve eval` reads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// `deepsolve`, `plain` (default both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modes: Option<Vec<String>>,
    /// At most this many problems (the first, after `sample`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub limit: Option<usize>,
    /// This many problems chosen by `seed` (the same seed, the same problems).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub sample: Option<usize>,
    /// The sample's seed (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Problems in flight at once (default 2, at most the server's `max_concurrency`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub concurrency: Option<usize>,
    /// Tools for the deepsolve turns, as a turn asks for them (default: the server's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvalStatus {
    /// In progress: `done` of `total` so far.
    Running,
    /// Every (problem, mode) has a result.
    Finished,
    /// Stopped by its owner (`DELETE`); finished results kept.
    Cancelled,
    /// The server stopped while it ran; finished results kept.
    Interrupted,
    /// The run could not go on (its directory could not be written); `error` says why.
    Failed,
}

impl EvalStatus {
    pub fn is_terminal(self) -> bool {
        self != EvalStatus::Running
    }
}

/// `eval.json`: a run's owner, request and state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EvalMeta {
    pub id: String,
    pub owner: String,
    /// The set's name (a shipped set's, or the upload's).
    pub set: String,
    /// `shipped` or `upload`.
    pub source: String,
    pub modes: Vec<String>,
    pub problems: usize,
    pub limit: Option<usize>,
    pub sample: Option<usize>,
    pub seed: Option<u64>,
    pub concurrency: usize,
    /// The model the run asked (the server's configured one).
    pub model: String,
    pub status: EvalStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<i64>,
}

/// A run as listed, and as each progress event carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EvalView {
    #[serde(flatten)]
    pub meta: EvalMeta,
    /// (problem, mode) pairs in the run, and how many have a result.
    pub total: usize,
    pub done: usize,
    /// Per mode: results so far, correct, endpoint errors.
    pub tallies: Vec<ModeTally>,
    pub url: String,
    pub events_url: String,
}

/// `GET /api/v1/evals`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EvalList {
    pub evals: Vec<EvalView>,
}

/// One (problem, mode) result as the API shows it: the record without the graded text, with
/// the problem's question and a link to the deepsolve turn.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EvalRow {
    #[serde(flatten)]
    pub record: ResultRecord,
    pub question: Option<String>,
    /// `/api/v1/turns/{turn_id}` for a deepsolve problem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_url: Option<String>,
}

/// `GET /api/v1/evals/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EvalDetail {
    #[serde(flatten)]
    pub view: EvalView,
    /// The report of the results so far (none before the first result).
    pub report: Option<Report>,
    /// The report's plots as SVG documents, by name (`accuracy`, `tokens`).
    pub plots: HashMap<String, String>,
    pub results: Vec<EvalRow>,
}

/// `DELETE` on a running run.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EvalCancelAccepted {
    pub id: String,
    /// `cancelling`: the run ends `cancelled` (its events stream says when).
    pub status: String,
}

/// A run of this replica in progress.
struct LiveRun {
    owner: String,
    cancel: CancellationToken,
    view: watch::Receiver<EvalView>,
}

/// This replica's running evaluations, and the grader they share.
#[derive(Default)]
pub struct EvalRuns {
    live: Mutex<HashMap<String, LiveRun>>,
    grader: OnceCell<Grader>,
}

impl EvalRuns {
    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<String, LiveRun>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Cancel every running evaluation (shutdown); their runs end `interrupted`.
    pub fn cancel_all(&self) {
        for run in self.live().values() {
            run.cancel.cancel();
        }
    }

    pub fn running(&self) -> usize {
        self.live().len()
    }

    /// The grader, with sympy in the sandbox when this machine has one (found once).
    async fn grader(&self) -> Grader {
        self.grader
            .get_or_init(|| async {
                match deepsolve_eval::grade::SandboxSympy::detect(
                    deepsolve_eval::grade::DEFAULT_SYMPY_TIMEOUT,
                )
                .await
                {
                    Ok(sympy) => Grader::with_symbolic(Arc::new(sympy)),
                    Err(why) => {
                        tracing::warn!(error = %why, "evaluations grade without sympy (no sandbox)");
                        Grader::new()
                    }
                }
            })
            .await
            .clone()
    }
}

fn root(state: &AppState) -> ApiResult<&Path> {
    state.config.evals.root.as_deref().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ApiErrorCode::Unavailable,
            "this server runs no evaluations: it has no directory for their results",
        )
    })
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::invalid(ApiErrorCode::InvalidRequest, message)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A run id: `ev_` and 32 hex digits (time-ordered).
fn new_eval_id() -> String {
    deepsolve_app::new_turn_id().replacen("turn_", "ev_", 1)
}

/// Ids we made: nothing else names a directory.
fn is_eval_id(id: &str) -> bool {
    id.strip_prefix("ev_").is_some_and(|hex| {
        !hex.is_empty() && hex.len() <= 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

/// The set asked for, its name and where it came from, and the problems chosen.
fn read_set(
    req: &CreateEval,
    config: &EvalConfig,
) -> ApiResult<(String, &'static str, Vec<Problem>)> {
    let (name, source, parsed) = match (&req.data, &req.set) {
        (Some(data), name) => {
            if data.len() > config.max_upload_bytes {
                return Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    ApiErrorCode::PayloadTooLarge,
                    format!(
                        "the uploaded set is {} bytes; at most {} are accepted (upload fewer problems)",
                        data.len(),
                        config.max_upload_bytes
                    ),
                ));
            }
            let name = upload_name(name.as_deref());
            let parsed = deepsolve_eval::data::parse(Path::new(&name), data);
            (name, "upload", parsed)
        }
        (None, Some(name)) => {
            let Some((shipped, text)) = deepsolve_eval::sets::shipped(name) else {
                return Err(invalid(format!(
                    "no shipped set is named {name:?} (the shipped sets: {}); to run your own, send it as 'data' (JSONL)",
                    shipped_names()
                )));
            };
            let parsed = deepsolve_eval::data::parse(Path::new(shipped), text);
            (shipped.to_string(), "shipped", parsed)
        }
        (None, None) => {
            return Err(invalid(format!(
                "name a shipped set in 'set' ({}) or send one as 'data' (JSONL)",
                shipped_names()
            )));
        }
    };
    let problems = parsed.map_err(|e: DataError| invalid(e.to_string()))?;
    let selection = Selection {
        limit: req.limit,
        sample: req.sample.map(|n| (n, req.seed.unwrap_or(0))),
    };
    if req.limit == Some(0) || req.sample == Some(0) {
        return Err(invalid("'limit' and 'sample' must be at least 1"));
    }
    let problems = deepsolve_eval::select(problems, selection);
    if problems.is_empty() {
        return Err(invalid(format!("the set {name} has no problems")));
    }
    if problems.len() > config.max_problems {
        return Err(invalid(format!(
            "the run would have {} problems; at most {} per run on this server (pass 'limit' or 'sample')",
            problems.len(),
            config.max_problems
        )));
    }
    Ok((name, source, problems))
}

fn shipped_names() -> String {
    deepsolve_eval::sets::SHIPPED
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// An upload's name, reduced to safe characters (it is shown and written in `eval.json`).
fn upload_name(name: Option<&str>) -> String {
    let clean: String = name
        .unwrap_or("upload.jsonl")
        .chars()
        .filter(|c| !c.is_control())
        .take(120)
        .collect();
    let clean = clean.trim();
    if clean.is_empty() {
        "upload.jsonl".to_string()
    } else {
        clean.to_string()
    }
}

fn check_modes(modes: Option<&[String]>) -> ApiResult<Vec<String>> {
    let Some(modes) = modes else {
        return Ok(MODES.iter().map(|m| m.to_string()).collect());
    };
    if modes.is_empty() {
        return Err(invalid("'modes' is empty: name deepsolve, plain or both"));
    }
    let mut seen: Vec<String> = Vec::new();
    for mode in modes {
        if !MODES.contains(&mode.as_str()) {
            return Err(invalid(format!(
                "unknown mode {mode:?}: the modes are deepsolve and plain"
            )));
        }
        if seen.contains(mode) {
            return Err(invalid(format!("mode {mode} is given twice")));
        }
        seen.push(mode.clone());
    }
    Ok(seen)
}

/// `POST /api/v1/evals`: check the request, write the run's directory, start it.
pub async fn create_eval(
    State(state): AppStateRef,
    caller: Caller,
    ApiJson(req): ApiJson<CreateEval>,
) -> ApiResult<Response> {
    let root = root(&state)?.to_path_buf();
    let modes = check_modes(req.modes.as_deref())?;
    let (set, source, problems) = read_set(&req, &state.config.evals)?;
    let max_concurrency = state.config.evals.max_concurrency.max(1);
    let concurrency = match req.concurrency {
        Some(0) => return Err(invalid("'concurrency' must be at least 1")),
        Some(n) if n > max_concurrency => {
            return Err(invalid(format!(
                "'concurrency' is {n}; at most {max_concurrency} on this server"
            )));
        }
        Some(n) => n,
        None => max_concurrency.min(2),
    };
    let tools = if modes.iter().any(|m| m == "deepsolve") {
        state
            .app
            .tools_for_turn_with(&req.tools, false)
            .map_err(|e| ApiError::invalid(ApiErrorCode::UnknownTool, e.to_string()))?
    } else {
        Vec::new()
    };
    let meta = EvalMeta {
        id: new_eval_id(),
        owner: caller.user_id.clone(),
        set,
        source: source.to_string(),
        modes: modes.clone(),
        problems: problems.len(),
        limit: req.limit,
        sample: req.sample,
        seed: req.seed,
        concurrency,
        model: state.app.model().name().to_string(),
        status: EvalStatus::Running,
        error: None,
        created_at: now_ms(),
        finished_at: None,
    };
    let dir = root.join(&meta.id);
    let initial = view_of(meta.clone(), &[]);
    let (tx, rx) = watch::channel(initial.clone());
    let cancel = CancellationToken::new();
    {
        let mut live = state.evals.live();
        if live.len() >= state.config.evals.max_running.max(1) {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ApiErrorCode::Busy,
                format!(
                    "this server runs {} evaluations at once, all busy; retry when one ends",
                    state.config.evals.max_running.max(1)
                ),
            ));
        }
        live.insert(
            meta.id.clone(),
            LiveRun {
                owner: meta.owner.clone(),
                cancel: cancel.clone(),
                view: rx,
            },
        );
    }
    if let Err(e) = write_new_run(&dir, &meta, &problems) {
        state.evals.live().remove(&meta.id);
        tracing::error!(dir = %dir.display(), error = %e, "cannot write an evaluation's directory");
        return Err(ApiError::internal());
    }
    let run = PreparedRun {
        state: state.clone(),
        caller_id: caller.user_id.clone(),
        meta,
        dir,
        problems,
        tools,
        cancel,
        view: tx,
    };
    tokio::spawn(run.drive());
    Ok((StatusCode::CREATED, Json(initial)).into_response())
}

fn write_new_run(dir: &Path, meta: &EvalMeta, problems: &[Problem]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    write_json(&dir.join(PROBLEMS_FILE), problems)?;
    write_meta(dir, meta)
}

fn write_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    // Written whole then renamed: a reader (or a crash) never sees half a file.
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(tmp, path)
}

fn write_meta(dir: &Path, meta: &EvalMeta) -> std::io::Result<()> {
    write_json(&dir.join(META_FILE), meta)
}

fn read_meta(dir: &Path) -> Option<EvalMeta> {
    let text = std::fs::read_to_string(dir.join(META_FILE)).ok()?;
    serde_json::from_str(&text).ok()
}

fn read_problems(dir: &Path) -> Vec<Problem> {
    std::fs::read_to_string(dir.join(PROBLEMS_FILE))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// Results so far (the latest per pair); none when there are none yet.
fn results_of(dir: &Path) -> Vec<ResultRecord> {
    load_run(dir).unwrap_or_default()
}

fn view_of(meta: EvalMeta, records: &[ResultRecord]) -> EvalView {
    let mut tallies: Vec<ModeTally> = meta
        .modes
        .iter()
        .map(|m| ModeTally {
            mode: m.clone(),
            ..ModeTally::default()
        })
        .collect();
    for r in records {
        if let Some(t) = tallies.iter_mut().find(|t| t.mode == r.mode) {
            t.done += 1;
            t.correct += usize::from(r.correct);
            t.errors += usize::from(r.error.is_some());
        }
    }
    let done = tallies.iter().map(|t| t.done).sum();
    EvalView {
        total: meta.problems * meta.modes.len(),
        done,
        tallies,
        url: format!("/api/v1/evals/{}", meta.id),
        events_url: format!("/api/v1/evals/{}/events", meta.id),
        meta,
    }
}

/// Everything a started run needs on its task.
struct PreparedRun {
    state: Arc<AppState>,
    caller_id: String,
    meta: EvalMeta,
    dir: PathBuf,
    problems: Vec<Problem>,
    tools: Vec<String>,
    cancel: CancellationToken,
    view: watch::Sender<EvalView>,
}

impl PreparedRun {
    fn modes(&self) -> Vec<Mode> {
        let app = &self.state.app;
        self.meta
            .modes
            .iter()
            .map(|name| {
                if name == "plain" {
                    return Mode::plain(
                        app.model().clone(),
                        PlainOptions::like_solve(&self.state.solve_defaults()),
                    );
                }
                let solver = TurnSolver::new(
                    app.clone(),
                    crate::runner::recorder(&self.state),
                    &self.caller_id,
                )
                .tools(self.tools.clone())
                .config(
                    self.state.solve_defaults(),
                    self.state.config.context_window,
                );
                Mode::deepsolve(Arc::new(solver))
            })
            .collect()
    }

    /// Run to the end (or the cancel), record how it ended, write the report, leave.
    async fn drive(self) {
        let grader = self.state.evals.grader().await;
        let config = RunConfig {
            concurrency: self.meta.concurrency,
            label: self.meta.set.clone(),
            model: self.meta.model.clone(),
            ..RunConfig::new(&self.dir)
        };
        let sender = self.view.clone();
        let progress = Arc::new(move |p: &Progress<'_>| {
            sender.send_modify(|view| {
                view.done = p.done;
                view.tallies = p.tallies.to_vec();
            });
        });
        let runner = Runner::new(config, grader).on_progress(progress);
        let outcome = runner
            .run(&self.problems, &self.modes(), &self.cancel)
            .await;
        let mut meta = self.meta.clone();
        meta.finished_at = Some(now_ms());
        meta.status = match &outcome {
            Ok(summary) if summary.cancelled => {
                // A cancel by the owner, or the server stopping (`cancel_all`).
                if self.state.evals_stopping() {
                    EvalStatus::Interrupted
                } else {
                    EvalStatus::Cancelled
                }
            }
            Ok(summary) if summary.endpoint_down.is_some() => {
                let error = summary
                    .endpoint_down
                    .as_ref()
                    .map_or(String::new(), |e| format!("{}: {}", e.kind, e.message));
                meta.error = Some(format!(
                    "stopped: the last {ENDPOINT_DOWN_AFTER} problems all failed at the endpoint ({error})"
                ));
                EvalStatus::Failed
            }
            Ok(_) => EvalStatus::Finished,
            Err(e) => {
                tracing::error!(eval = %meta.id, error = %e, "an evaluation failed");
                meta.error = Some(e.to_string());
                EvalStatus::Failed
            }
        };
        if let Err(e) = write_meta(&self.dir, &meta) {
            tracing::error!(eval = %meta.id, error = %e, "cannot record an evaluation's end");
        }
        if outcome.is_ok()
            && let Err(e) = deepsolve_eval::report(&self.dir)
        {
            tracing::debug!(eval = %meta.id, error = %e, "no report written");
        }
        let records = results_of(&self.dir);
        self.view.send_replace(view_of(meta, &records));
        self.state.evals.live().remove(&self.meta.id);
    }
}

/// Runs left `running` by a previous start of this server are `interrupted` now (their
/// finished results stay). Returns how many.
pub fn mark_interrupted(root: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(root) else {
        return 0;
    };
    let mut count = 0;
    for entry in entries.flatten() {
        let dir = entry.path();
        let Some(mut meta) = read_meta(&dir) else {
            continue;
        };
        if meta.status == EvalStatus::Running {
            meta.status = EvalStatus::Interrupted;
            meta.finished_at = Some(now_ms());
            match write_meta(&dir, &meta) {
                Ok(()) => count += 1,
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "cannot mark an evaluation interrupted")
                }
            }
        }
    }
    count
}

/// The caller's run `id`: its current view (live, or from its files) and its directory.
fn owned_run(state: &AppState, caller: &Caller, id: &str) -> ApiResult<(EvalView, PathBuf)> {
    let root = root(state)?;
    if !is_eval_id(id) {
        return Err(ApiError::not_found("evaluation"));
    }
    let dir = root.join(id);
    if let Some(live) = state.evals.live().get(id) {
        if live.owner != caller.user_id {
            return Err(ApiError::not_found("evaluation"));
        }
        return Ok((live.view.borrow().clone(), dir));
    }
    let meta = read_meta(&dir)
        .filter(|m| m.owner == caller.user_id && m.id == id)
        .ok_or_else(|| ApiError::not_found("evaluation"))?;
    let records = results_of(&dir);
    Ok((view_of(meta, &records), dir))
}

/// `GET /api/v1/evals`: the caller's runs, newest first.
pub async fn list_evals(State(state): AppStateRef, caller: Caller) -> ApiResult<Json<EvalList>> {
    let root = root(&state)?.to_path_buf();
    let state2 = state.clone();
    let evals = tokio::task::spawn_blocking(move || {
        let mut views = Vec::new();
        let Ok(entries) = std::fs::read_dir(&root) else {
            return views;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !is_eval_id(&name) {
                continue;
            }
            let live = state2
                .evals
                .live()
                .get(&name)
                .filter(|l| l.owner == caller.user_id)
                .map(|l| l.view.borrow().clone());
            if let Some(view) = live {
                views.push(view);
                continue;
            }
            let dir = entry.path();
            if let Some(meta) = read_meta(&dir).filter(|m| m.owner == caller.user_id) {
                views.push(view_of(meta, &results_of(&dir)));
            }
        }
        views.sort_by_key(|v| std::cmp::Reverse(v.meta.created_at));
        views
    })
    .await
    .map_err(|_| ApiError::internal())?;
    Ok(Json(EvalList { evals }))
}

/// `GET /api/v1/evals/{id}`: the run, its report so far, its plots and every result.
pub async fn get_eval(
    State(state): AppStateRef,
    caller: Caller,
    UrlPath(id): UrlPath<String>,
) -> ApiResult<Json<EvalDetail>> {
    let (view, dir) = owned_run(&state, &caller, &id)?;
    let detail = tokio::task::spawn_blocking(move || detail_of(view, &dir))
        .await
        .map_err(|_| ApiError::internal())?;
    Ok(Json(detail))
}

fn detail_of(view: EvalView, dir: &Path) -> EvalDetail {
    let mut records = results_of(dir);
    let problems = read_problems(dir);
    // Rows in the set's order, each problem's modes in the run's order.
    let place: HashMap<&str, usize> = problems
        .iter()
        .enumerate()
        .map(|(i, p)| (p.id.as_str(), i))
        .collect();
    let mode_place = |mode: &str| view.meta.modes.iter().position(|m| m == mode);
    records.sort_by_key(|r| {
        (
            place.get(r.id.as_str()).copied().unwrap_or(usize::MAX),
            mode_place(&r.mode).unwrap_or(usize::MAX),
        )
    });
    let questions: HashMap<&str, &str> = problems
        .iter()
        .map(|p| (p.id.as_str(), p.question.as_str()))
        .collect();
    let report = (!records.is_empty()).then(|| build(&view.meta.set, &records));
    let plots = report
        .as_ref()
        .map(|r| {
            plots(r)
                .into_iter()
                .map(|(name, svg)| (name.to_string(), svg))
                .collect()
        })
        .unwrap_or_default();
    let results = records
        .into_iter()
        .map(|mut record| {
            record.output = None;
            EvalRow {
                question: questions.get(record.id.as_str()).map(|q| q.to_string()),
                turn_url: record
                    .turn_id
                    .as_ref()
                    .map(|t| format!("/api/v1/turns/{t}")),
                record,
            }
        })
        .collect();
    EvalDetail {
        view,
        report,
        plots,
        results,
    }
}

/// `GET /api/v1/evals/{id}/plots/{name}.svg`: a plot of the report so far, as an image.
pub async fn get_plot(
    State(state): AppStateRef,
    caller: Caller,
    UrlPath((id, file)): UrlPath<(String, String)>,
) -> ApiResult<Response> {
    let (view, dir) = owned_run(&state, &caller, &id)?;
    let name = file.strip_suffix(".svg").unwrap_or(&file).to_string();
    let svg = tokio::task::spawn_blocking(move || {
        let records = results_of(&dir);
        if records.is_empty() {
            return None;
        }
        let report = build(&view.meta.set, &records);
        plots(&report)
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, svg)| svg)
    })
    .await
    .map_err(|_| ApiError::internal())?
    .ok_or_else(|| ApiError::not_found("plot"))?;
    let headers = [
        (header::CONTENT_TYPE, "image/svg+xml"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (
            header::CONTENT_SECURITY_POLICY,
            "sandbox; default-src 'none'; style-src 'unsafe-inline'",
        ),
        (header::CACHE_CONTROL, "private, no-store"),
    ];
    Ok((headers, svg).into_response())
}

/// `GET /api/v1/evals/{id}/events`: progress over SSE. Each frame is `event: progress` with
/// the run's [`EvalView`] (after each finished problem; quick successions may be merged),
/// then one `event: finished` with its final view, and the stream ends. A run that is over
/// sends only `finished`.
pub async fn eval_events(
    State(state): AppStateRef,
    caller: Caller,
    UrlPath(id): UrlPath<String>,
) -> ApiResult<Response> {
    let (view, _) = owned_run(&state, &caller, &id)?;
    let receiver = state.evals.live().get(&id).map(|l| l.view.clone());
    let stream = progress_stream(view, receiver);
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response();
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

fn frame(view: &EvalView) -> Event {
    let name = if view.meta.status.is_terminal() {
        "finished"
    } else {
        "progress"
    };
    let data = serde_json::to_string(view).unwrap_or_else(|_| "{}".into());
    Event::default().event(name).data(data)
}

/// The current view first, then every change until the run is over.
fn progress_stream(
    first: EvalView,
    receiver: Option<watch::Receiver<EvalView>>,
) -> impl futures::Stream<Item = Result<Event, Infallible>> {
    enum Step {
        First(Box<EvalView>, Option<watch::Receiver<EvalView>>),
        Follow(watch::Receiver<EvalView>),
        Done,
    }
    futures::stream::unfold(Step::First(Box::new(first), receiver), |step| async move {
        match step {
            Step::First(view, receiver) => {
                let next = match receiver {
                    Some(mut rx) if !view.meta.status.is_terminal() => {
                        rx.mark_unchanged();
                        Step::Follow(rx)
                    }
                    _ => Step::Done,
                };
                Some((Ok(frame(&view)), next))
            }
            Step::Follow(mut rx) => {
                // The sender goes when the run's task ends, after its final view.
                let changed = rx.changed().await;
                let view = rx.borrow_and_update().clone();
                if changed.is_err() && !view.meta.status.is_terminal() {
                    return None;
                }
                let next = if view.meta.status.is_terminal() {
                    Step::Done
                } else {
                    Step::Follow(rx)
                };
                Some((Ok(frame(&view)), next))
            }
            Step::Done => None,
        }
    })
}

/// `DELETE /api/v1/evals/{id}`: a running run is cancelled (202; what finished stays, and the
/// run ends `cancelled`); a run that is over is deleted with its files (204). Its deepsolve
/// turns stay in the caller's history.
pub async fn delete_eval(
    State(state): AppStateRef,
    caller: Caller,
    UrlPath(id): UrlPath<String>,
) -> ApiResult<Response> {
    let (view, dir) = owned_run(&state, &caller, &id)?;
    if let Some(live) = state.evals.live().get(&id) {
        live.cancel.cancel();
        let body = EvalCancelAccepted {
            id: view.meta.id,
            status: "cancelling".into(),
        };
        return Ok((StatusCode::ACCEPTED, Json(body)).into_response());
    }
    tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&dir))
        .await
        .map_err(|_| ApiError::internal())?
        .map_err(|e| {
            tracing::error!(eval = %id, error = %e, "cannot delete an evaluation");
            ApiError::internal()
        })?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_ids_name_directories() {
        assert!(is_eval_id(&new_eval_id()));
        for bad in ["", "ev_", "ev_../x", "../ev_1", "turn_abc", "ev_12/3"] {
            assert!(!is_eval_id(bad), "{bad}");
        }
    }

    #[test]
    fn modes_are_checked() {
        assert_eq!(check_modes(None).expect("default").len(), 2);
        let twice = vec!["plain".to_string(), "plain".to_string()];
        assert!(check_modes(Some(&twice)).is_err());
        let unknown = vec!["magic".to_string()];
        let err = check_modes(Some(&unknown)).expect_err("unknown");
        assert!(err.message.contains("magic"), "{}", err.message);
    }
}
