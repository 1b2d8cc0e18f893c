//! From flags and settings to a ready model client: shared by `solve` and `doctor`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use deepsolve_llm::{ClientConfig, OpenAiClient};
use deepsolve_settings::{LoadOptions, Loaded, ModelRef};

use crate::ConfigArgs;

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Load the layered settings; `--base-url` and `--model` are `--set`s of their keys.
/// Clamp warnings go to stderr (stdout may be an NDJSON stream).
pub fn load_settings(args: &ConfigArgs) -> anyhow::Result<Loaded> {
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
    };
    let loaded = deepsolve_settings::load(&options)?;
    for warning in &loaded.warnings {
        eprintln!("warning: {warning}");
    }
    Ok(loaded)
}

/// The main model's client, or the one-line error naming the three ways to configure one.
pub fn main_client(loaded: &Loaded) -> anyhow::Result<Arc<OpenAiClient>> {
    let llm = &loaded.settings.llm;
    let Some(model) = llm.model.clone().filter(|m| !m.trim().is_empty()) else {
        bail!(
            "no model configured: pass --model (and --base-url), or set DEEPSOLVE_MODEL (and DEEPSOLVE_BASE_URL), or run `deepsolve settings set llm.model=NAME` to write it in {}",
            loaded.path.display()
        );
    };
    let base_url = llm
        .base_url
        .clone()
        .unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
    let mut config = ClientConfig::new(base_url, model);
    config.api_key = llm.api_key.clone();
    config.extra_body = llm.extra_body.clone();
    config.stream_idle_timeout = loaded.settings.solve.stream_idle_timeout();
    let client = OpenAiClient::new(config).context("cannot use the configured model")?;
    Ok(Arc::new(client))
}

/// The `reason` tool's model: `models.reason`, falling back to the main model.
pub fn reason_client(
    loaded: &Loaded,
    main: &Arc<OpenAiClient>,
) -> anyhow::Result<Arc<OpenAiClient>> {
    let Some(ModelRef {
        model,
        base_url,
        api_key_env,
    }) = loaded.settings.models.reason.clone()
    else {
        return Ok(main.clone());
    };
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
    let client = OpenAiClient::new(config).context("cannot use models.reason")?;
    Ok(Arc::new(client))
}
