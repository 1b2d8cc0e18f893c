//! `GET|PUT /api/v1/capabilities/settings`: the solve knobs in force and their contracts, and
//! the playbook in force per language. Anyone signed in may read them; only an admin may change
//! them. A change is checked strictly by core (unknown keys named with the nearest known key,
//! values clamped and reported one by one), playbooks are capped and checked like a load, and
//! everything is written to the settings file in one atomic replace and applies to the next
//! turn without a restart (a running turn keeps the texts it started with).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use deepsolve_core::config::{FLAGS, KNOBS};
use deepsolve_core::{SolveConfig, Text, Texts};
use deepsolve_protocol::api::{
    ApiErrorCode, ClampedValue, FlagView, KnobView, PlaybookChange, PlaybookView,
    PromptOverrideView, PromptsView, PutSettings, SettingsView,
};
use deepsolve_settings::prompts::{MAX_PROMPT_BYTES, PLAYBOOK, PromptsSettings, SolvePrompts};
use serde_json::Value;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiJson;
use crate::runner::{OverridesIn, apply_overrides};
use crate::state::AppState;

fn describe(state: &AppState, caller: &Caller) -> SettingsView {
    let knobs = KNOBS
        .iter()
        .map(|k| KnobView {
            key: k.key.to_string(),
            default: k.default,
            min: k.min,
            max: k.max,
            integer: k.integer,
            help: k.help.to_string(),
            help_zh: k.help_zh.to_string(),
        })
        .collect();
    let flags = FLAGS
        .iter()
        .map(|f| FlagView {
            key: f.key.to_string(),
            default: f.default,
            help: f.help.to_string(),
            help_zh: f.help_zh.to_string(),
        })
        .collect();
    SettingsView {
        solve: state.solve_defaults().to_map(),
        knobs,
        flags,
        writable: caller.is_admin() && state.config.settings_path.is_some(),
        prompts: prompts_view(&state.prompts()),
        warnings: None,
        clamped: None,
    }
}

fn prompts_view(prompts: &PromptsSettings) -> PromptsView {
    let playbooks = Texts::LANGUAGES
        .into_iter()
        .map(|language| {
            let replaced =
                (prompts.overridden.iter()).find(|o| o.language == language && o.name == PLAYBOOK);
            match replaced {
                Some(o) => PlaybookView {
                    language,
                    text: o.text.clone(),
                    from: Some(o.from.clone()),
                    setting: o.setting.clone(),
                },
                None => PlaybookView {
                    language,
                    text: Texts::builtin(language).get(Text::Playbook).to_string(),
                    from: None,
                    setting: None,
                },
            }
        })
        .collect();
    let overridden = (prompts.overridden.iter())
        .map(|o| PromptOverrideView {
            language: o.language,
            name: o.name.clone(),
            from: o.from.clone(),
            chars: o.chars as u64,
        })
        .collect();
    PromptsView {
        playbooks,
        overridden,
        max_bytes: MAX_PROMPT_BYTES as u64,
    }
}

pub async fn get_settings(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> Json<SettingsView> {
    Json(describe(&state, &caller))
}

pub async fn put_settings(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiJson(req): ApiJson<PutSettings>,
) -> ApiResult<Json<SettingsView>> {
    if !caller.is_admin() {
        return Err(ApiError::forbidden("changing the settings needs an admin"));
    }
    let Some(path) = state.config.settings_path.clone() else {
        return Err(ApiError::conflict(
            "this server has no settings file to write",
        ));
    };
    let _one_writer = state.settings_write.lock().await;
    let (config, clamps) = apply_overrides(
        &state.solve_defaults(),
        &req.solve,
        OverridesIn::SettingsChange,
    )?;
    // Write the clamped values, so the file never says something it does not mean.
    let effective = config.to_map();
    let mut changes: Vec<(String, String)> = req
        .solve
        .keys()
        .filter_map(|k| effective.get(k).map(|v| (format!("solve.{k}"), raw(v))))
        .collect();
    let mut warnings: Vec<String> = clamps.iter().map(ToString::to_string).collect();
    warnings.extend(SolveConfig::legacy_warnings(&req.solve));
    let prompts = if req.playbooks.is_empty() {
        None
    } else {
        let (prompts, said) = changed_prompts(&state, &path, &req.playbooks, &mut changes)?;
        warnings.extend(said);
        Some(prompts)
    };
    let tool_sections = state.app.tool_sections();
    let written = tokio::task::spawn_blocking(move || {
        let pairs: Vec<(&str, &str)> = changes
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        deepsolve_settings::set_many_in_file(&path, &pairs, &tool_sections)
    })
    .await
    .map_err(|_| ApiError::internal())?;
    if let Err(e) = written {
        tracing::error!(error = %e, "settings write failed");
        return Err(ApiError::invalid(
            ApiErrorCode::SettingsNotWritten,
            e.to_string(),
        ));
    }
    state.set_solve_defaults(config);
    if let Some(prompts) = prompts {
        deepsolve_app::put_prompts_in_force(state.app.engine(), &prompts).map_err(|e| {
            tracing::error!(error = %e, "checked prompts not put in force");
            ApiError::internal()
        })?;
        state.set_prompts(prompts);
    }
    let mut body = describe(&state, &caller);
    body.warnings = Some(warnings);
    body.clamped = Some(
        clamps
            .into_iter()
            .map(|clamp| ClampedValue {
                asked: req.solve.get(&clamp.key).map_or(clamp.value.clone(), raw),
                key: format!("solve.{}", clamp.key),
                applied: clamp.used,
                min: clamp.min,
                max: clamp.max,
            })
            .collect(),
    );
    Ok(Json(body))
}

/// The prompts after `playbooks`, resolved and checked as a load would (size, names, files);
/// the settings writes they take are added to `writes`. Returns the load's warnings too.
fn changed_prompts(
    state: &AppState,
    settings_path: &std::path::Path,
    playbooks: &[PlaybookChange],
    writes: &mut Vec<(String, String)>,
) -> ApiResult<(PromptsSettings, Vec<String>)> {
    let invalid = |message: String| ApiError::invalid(ApiErrorCode::InvalidConfig, message);
    let mut prompts = state.prompts();
    for change in playbooks {
        let key = SolvePrompts::key(change.language);
        let text = change.system.clone().filter(|t| !t.trim().is_empty());
        if let Some(text) = &text
            && text.len() > MAX_PROMPT_BYTES
        {
            return Err(invalid(format!(
                "the playbook for {key} is {} bytes, over the cap of {MAX_PROMPT_BYTES} bytes",
                text.len()
            )));
        }
        prompts.solve.set(change.language, text.clone());
        writes.push((key.clone(), text.unwrap_or_default()));
        writes.push((format!("{key}_file"), String::new()));
    }
    let warnings = deepsolve_settings::prompts::resolve(&mut prompts, settings_path)
        .map_err(|e| invalid(e.to_string()))?;
    for language in Texts::LANGUAGES {
        prompts
            .texts(language)
            .map_err(|e| invalid(e.to_string()))?;
    }
    Ok((prompts, warnings))
}

/// A JSON scalar as the settings writer's raw text.
fn raw(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
