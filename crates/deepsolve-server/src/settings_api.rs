//! `GET|PUT /api/v1/capabilities/settings`: the solve knobs in force and their contracts. Anyone
//! signed in may read them; only an admin may change them. A change is checked strictly by core
//! (unknown keys named with the nearest known key, values clamped with warnings), written to the
//! settings file in one atomic replace, and applies to the next turn without a restart.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use deepsolve_core::config::{FLAGS, KNOBS};
use deepsolve_protocol::api::{
    ApiErrorCode, ClampedValue, FlagView, KnobView, PutSettings, SettingsView,
};
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
        })
        .collect();
    let flags = FLAGS
        .iter()
        .map(|f| FlagView {
            key: f.key.to_string(),
            default: f.default,
            help: f.help.to_string(),
        })
        .collect();
    SettingsView {
        solve: state.solve_defaults().to_map(),
        knobs,
        flags,
        writable: caller.is_admin() && state.config.settings_path.is_some(),
        warnings: None,
        clamped: None,
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
    let changes: Vec<(String, String)> = req
        .solve
        .keys()
        .filter_map(|k| effective.get(k).map(|v| (format!("solve.{k}"), raw(v))))
        .collect();
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
    let mut body = describe(&state, &caller);
    body.warnings = Some(clamps.iter().map(ToString::to_string).collect());
    body.clamped = Some(
        clamps
            .into_iter()
            .map(|clamp| ClampedValue {
                asked: req.solve.get(&clamp.key).cloned().unwrap_or(Value::Null),
                key: format!("solve.{}", clamp.key),
                applied: clamp.used,
                min: clamp.min,
                max: clamp.max,
            })
            .collect(),
    );
    Ok(Json(body))
}

/// A JSON scalar as the settings writer's raw text.
fn raw(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
