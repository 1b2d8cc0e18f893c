//! The model clients: the main model (`llm`: an OpenAI-compatible endpoint, or a GGUF model
//! run in this process), the reasoning model behind `reason` (`models.reason`, falling back to
//! the main one) and the vision model behind `geogebra_analysis` (`models.vision`, none when
//! unset).
//!
//! Which main model runs is [`main_choice`]: an endpoint when one is configured
//! (`llm.base_url` or `llm.model`), the in-process model when `llm.provider` is `local` or,
//! with no endpoint at all, when the default model file is in the model cache (the embedded
//! default, as SQLite is for storage).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use deepsolve_core::ChatModel;
use deepsolve_llm::{ClientConfig, OpenAiClient};
use deepsolve_local::LocalConfig;
pub use deepsolve_local::model_cache_dir;
use deepsolve_settings::{Loaded, ModelRef, Provider};
use deepsolve_tools::Unavailable;

use crate::AppError;

/// The endpoint used when `llm.base_url` is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The in-process model used when `llm.local.model` is not set: this file in the model cache
/// (`deepsolve_local::model_cache_dir`, which `scripts/fetch-model` fills).
pub const DEFAULT_LOCAL_MODEL: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";

/// Where the main model runs, as the settings decide it.
#[derive(Debug, Clone, PartialEq)]
pub enum MainChoice {
    /// An OpenAI-compatible endpoint.
    Endpoint { base_url: String, model: String },
    /// A GGUF model run in this process.
    Local(LocalConfig),
}

/// Decide where the main model runs; `model_dir` is the model cache (the embedded default's
/// home). An endpoint wins whenever one is configured; `llm.provider: local` always runs
/// in-process; with neither, the default model file in `model_dir` is used when present, and
/// otherwise the error names both ways to get a model.
pub fn main_choice(loaded: &Loaded, model_dir: Option<&Path>) -> Result<MainChoice, AppError> {
    let llm = &loaded.settings.llm;
    if llm.provider == Provider::Local {
        let path = local_model_path(loaded, model_dir).ok_or(AppError::NoModelCache)?;
        return Ok(MainChoice::Local(local_config(loaded, path)));
    }
    let model = llm.model.clone().filter(|m| !m.trim().is_empty());
    let endpoint_given = llm.base_url.is_some() || model.is_some();
    if !endpoint_given {
        let explicit = llm.local.model.is_some();
        if let Some(path) = local_model_path(loaded, model_dir)
            && (explicit || path.is_file())
        {
            return Ok(MainChoice::Local(local_config(loaded, path)));
        }
    }
    let Some(model) = model else {
        return Err(AppError::NoModel {
            settings_path: loaded.path.clone(),
            default_local: model_dir.map(|dir| dir.join(DEFAULT_LOCAL_MODEL)),
        });
    };
    let base_url = llm
        .base_url
        .clone()
        .unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
    Ok(MainChoice::Endpoint { base_url, model })
}

/// `llm.local.model`, else the default file in the model cache.
fn local_model_path(loaded: &Loaded, model_dir: Option<&Path>) -> Option<PathBuf> {
    match &loaded.settings.llm.local.model {
        Some(path) => Some(PathBuf::from(path)),
        None => model_dir.map(|dir| dir.join(DEFAULT_LOCAL_MODEL)),
    }
}

/// `llm.local.*` as the in-process model takes them.
fn local_config(loaded: &Loaded, model: PathBuf) -> LocalConfig {
    let local = &loaded.settings.llm.local;
    let mut config = LocalConfig::new(model);
    config.context = local.context;
    config.threads = local.threads;
    config.parallel = local.parallel;
    config
}

/// The main model's client.
#[derive(Clone)]
pub enum MainClient {
    /// An OpenAI-compatible endpoint.
    Endpoint(Arc<OpenAiClient>),
    /// The in-process model, loaded once per process and shared.
    #[cfg(feature = "local")]
    Local(Arc<deepsolve_local::LocalModel>),
}

impl std::fmt::Debug for MainClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MainClient::Endpoint(_) => f.write_str("MainClient::Endpoint"),
            #[cfg(feature = "local")]
            MainClient::Local(model) => write!(f, "MainClient::Local({model:?})"),
        }
    }
}

impl MainClient {
    /// The model turns run on.
    pub fn model(&self) -> Arc<dyn ChatModel> {
        match self {
            MainClient::Endpoint(client) => client.clone(),
            #[cfg(feature = "local")]
            MainClient::Local(model) => model.clone(),
        }
    }

    /// The HTTP client, when the model is behind an endpoint.
    pub fn endpoint(&self) -> Option<&Arc<OpenAiClient>> {
        match self {
            MainClient::Endpoint(client) => Some(client),
            #[cfg(feature = "local")]
            MainClient::Local(_) => None,
        }
    }

    /// The in-process model, when it runs here.
    #[cfg(feature = "local")]
    pub fn local(&self) -> Option<&Arc<deepsolve_local::LocalModel>> {
        match self {
            MainClient::Endpoint(_) => None,
            MainClient::Local(model) => Some(model),
        }
    }
}

/// The main model's client, or the error naming the ways to configure one. An in-process
/// model is loaded off the async threads, once per process (see [`load_local`]).
pub async fn main_client(loaded: &Loaded) -> Result<MainClient, AppError> {
    let model_dir = deepsolve_local::model_cache_dir();
    match main_choice(loaded, model_dir.as_deref())? {
        MainChoice::Endpoint { base_url, model } => {
            let llm = &loaded.settings.llm;
            let mut config = ClientConfig::new(base_url, model);
            config.api_key = llm.api_key.clone();
            config.extra_body = llm.extra_body.clone();
            config.stream_idle_timeout = loaded.settings.solve.stream_idle_timeout();
            config.max_reply_bytes = max_reply_bytes(loaded);
            let client = OpenAiClient::new(config).map_err(AppError::Client)?;
            // What the endpoint honours, as the probe last found (see crate::probe).
            crate::probe::take_up_kept_verdict(&client);
            Ok(MainClient::Endpoint(Arc::new(client)))
        }
        MainChoice::Local(config) => local_client(config).await,
    }
}

#[cfg(feature = "local")]
async fn local_client(config: LocalConfig) -> Result<MainClient, AppError> {
    Ok(MainClient::Local(load_local(config).await?))
}

#[cfg(not(feature = "local"))]
async fn local_client(_config: LocalConfig) -> Result<MainClient, AppError> {
    Err(AppError::LocalNotBuilt)
}

/// The in-process model for `config`: the one this process already loaded with the same
/// settings, else loaded now (on a blocking thread; concurrent callers wait for the one load).
/// Every front end of the process — turns, the reasoning sub-call, the facade, `doctor` — thus
/// shares one copy of the weights and its contexts.
#[cfg(feature = "local")]
pub async fn load_local(config: LocalConfig) -> Result<Arc<deepsolve_local::LocalModel>, AppError> {
    use std::sync::Weak;
    use tokio::sync::Mutex;

    type Loaded = Vec<(LocalConfig, Weak<deepsolve_local::LocalModel>)>;
    static LOADED: Mutex<Loaded> = Mutex::const_new(Vec::new());

    let mut loaded = LOADED.lock().await;
    loaded.retain(|(_, model)| model.strong_count() > 0);
    if let Some(model) = (loaded.iter())
        .find(|(c, _)| *c == config)
        .and_then(|(_, model)| model.upgrade())
    {
        return Ok(model);
    }
    let started = std::time::Instant::now();
    tracing::info!(model = %config.model.display(), context = config.context, "loading the local model");
    let model = Arc::new(deepsolve_local::LocalModel::load_async(config.clone()).await?);
    tracing::info!(
        model = %config.model.display(),
        ms = started.elapsed().as_millis() as u64,
        "the local model is loaded"
    );
    loaded.push((config, Arc::downgrade(&model)));
    Ok(model)
}

/// `llm.max_reply_mb` in bytes: the cap on one reply of either model.
fn max_reply_bytes(loaded: &Loaded) -> usize {
    let mib = usize::try_from(loaded.settings.llm.max_reply_mb).unwrap_or(usize::MAX);
    mib.saturating_mul(1024 * 1024)
}

/// The reasoning model: `models.reason`, else `main`; or why it cannot be used (then only
/// the tools that need it are unavailable).
pub fn reasoning_model(
    loaded: &Loaded,
    main: &Arc<dyn ChatModel>,
) -> Result<Arc<dyn ChatModel>, Unavailable> {
    match &loaded.settings.models.reason {
        Some(reference) => other_model(loaded, reference, "models.reason"),
        None => Ok(main.clone()),
    }
}

/// The model that reads images, `models.vision` (`None`: not configured); or why the
/// configured one cannot be used (then only the tools that need it are unavailable).
pub fn vision_model(loaded: &Loaded) -> Result<Option<Arc<dyn ChatModel>>, Unavailable> {
    (loaded.settings.models.vision.as_ref())
        .map(|reference| other_model(loaded, reference, "models.vision"))
        .transpose()
}

/// A model of `models.*`: on the main endpoint and with the main key unless it names its
/// own, with the main model's stream limits.
fn other_model(
    loaded: &Loaded,
    reference: &ModelRef,
    key: &str,
) -> Result<Arc<dyn ChatModel>, Unavailable> {
    let ModelRef {
        model,
        base_url,
        api_key_env,
    } = reference.clone();
    let llm = &loaded.settings.llm;
    let base_url = base_url
        .or_else(|| llm.base_url.clone())
        .unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
    let mut config = ClientConfig::new(base_url, model);
    config.api_key = match api_key_env {
        Some(var) => std::env::var(&var).ok().map(Into::into),
        None => llm.api_key.clone(),
    };
    config.stream_idle_timeout = Duration::from_secs(loaded.settings.solve.stream_idle_timeout_s);
    config.max_reply_bytes = max_reply_bytes(loaded);
    match OpenAiClient::new(config) {
        Ok(client) => Ok(Arc::new(client)),
        Err(e) => Err(Unavailable(format!("cannot use {key}: {e}"))),
    }
}
