//! `GET /api/v1/capabilities`: what a turn on this server can have — the model, every work
//! tool with whether it is mounted (and why not), the request limits, the price, the sandbox.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use deepsolve_protocol::api::{CapabilitiesView, KnowledgeView, LimitsView, SandboxView, ToolView};

use crate::auth::Caller;
use crate::state::AppState;

pub async fn capabilities(
    State(state): State<Arc<AppState>>,
    _caller: Caller,
) -> Json<CapabilitiesView> {
    let app = &state.app;
    Json(CapabilitiesView {
        model: app.model().name().to_string(),
        tools: tools(&state),
        limits: LimitsView {
            max_problem_chars: state.config.max_problem_chars as u64,
            max_body_bytes: state.config.max_body_bytes as u64,
            max_image_bytes: state.config.images.max_bytes,
            max_images: deepsolve_app::images::MAX_IMAGES as u64,
        },
        price: state.config.price.clone(),
        sandbox: sandbox(&state),
        knowledge: knowledge(&state),
    })
}

fn tools(state: &AppState) -> Vec<ToolView> {
    let app = &state.app;
    let offered = app.tools_for_turn::<&str>(&[]).unwrap_or_default();
    app.tools()
        .status()
        .into_iter()
        .map(|status| ToolView {
            name: status.name.to_string(),
            description: description(state, status.name),
            available: status.unavailable.is_none(),
            reason: status.unavailable.map(|why| why.0.clone()),
            default: offered.iter().any(|name| name == status.name),
        })
        .collect()
}

/// The catalog's line for people (its English playbook line without the leading name), or the
/// tool's own description for a tool from outside the catalog.
fn description(state: &AppState, name: &str) -> String {
    if let Some(entry) = state.app.catalog().iter().find(|e| e.name == name) {
        let line = entry.playbook.en;
        let prefix = format!("`{name}`: ");
        return line.strip_prefix(&prefix).unwrap_or(line).to_string();
    }
    state
        .app
        .tools()
        .tools()
        .iter()
        .find(|tool| tool.spec().name == name)
        .map(|tool| tool.spec().description.clone())
        .unwrap_or_default()
}

fn sandbox(state: &AppState) -> SandboxView {
    match state.app.sandbox() {
        Ok(sandbox) => {
            let mut detail = sandbox.describe();
            if let Some(warning) = sandbox.warning() {
                detail = format!("{detail}; {warning}");
            }
            SandboxView {
                available: true,
                backend: Some(sandbox.backend_name().to_string()),
                detail,
            }
        }
        Err(why) => SandboxView {
            available: false,
            backend: None,
            detail: why.0.clone(),
        },
    }
}

fn knowledge(state: &AppState) -> KnowledgeView {
    let knowledge = state.app.knowledge();
    KnowledgeView {
        available: knowledge.is_some(),
        embedding_model: knowledge
            .and_then(|k| k.embedding_model())
            .map(str::to_string),
        max_upload_mb: state.config.kb.max_file_bytes / (1024 * 1024),
    }
}
