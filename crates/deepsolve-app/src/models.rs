//! The model clients: the main model (`llm`), the reasoning model behind `reason`
//! (`models.reason`, falling back to the main one) and the vision model behind
//! `geogebra_analysis` (`models.vision`, none when unset).

use std::sync::Arc;
use std::time::Duration;

use deepsolve_core::ChatModel;
use deepsolve_llm::{ClientConfig, OpenAiClient};
use deepsolve_settings::{Loaded, ModelRef};
use deepsolve_tools::Unavailable;

use crate::AppError;

/// The endpoint used when `llm.base_url` is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The main model's client, or the error naming the ways to configure one.
pub fn main_client(loaded: &Loaded) -> Result<Arc<OpenAiClient>, AppError> {
    let llm = &loaded.settings.llm;
    if llm.provider == deepsolve_settings::Provider::Local {
        return Err(AppError::LocalProviderNotWired);
    }
    let Some(model) = llm.model.clone().filter(|m| !m.trim().is_empty()) else {
        return Err(AppError::NoModel {
            settings_path: loaded.path.clone(),
        });
    };
    let base_url = llm
        .base_url
        .clone()
        .unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
    let mut config = ClientConfig::new(base_url, model);
    config.api_key = llm.api_key.clone();
    config.extra_body = llm.extra_body.clone();
    config.stream_idle_timeout = loaded.settings.solve.stream_idle_timeout();
    config.max_reply_bytes = max_reply_bytes(loaded);
    let client = OpenAiClient::new(config).map_err(AppError::Client)?;
    // What the endpoint honours, as the probe last found (see crate::probe).
    crate::probe::take_up_kept_verdict(&client);
    Ok(Arc::new(client))
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
    main: &Arc<OpenAiClient>,
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
