//! `deepsolve doctor`: is the configured endpoint usable for solving?

use std::process::ExitCode;

use console::style;

use crate::ConfigArgs;
use crate::setup::{load_settings, main_client};

pub async fn run(args: &ConfigArgs) -> anyhow::Result<ExitCode> {
    let loaded = load_settings(args)?;
    let llm = &loaded.settings.llm;
    let exists = if loaded.file_exists {
        ""
    } else {
        " (not created yet)"
    };
    println!("settings   {}{exists}", loaded.path.display());
    let client = main_client(&loaded)?;
    println!(
        "endpoint   {}",
        llm.base_url
            .as_deref()
            .unwrap_or(crate::setup::DEFAULT_BASE_URL)
    );
    let model = llm.model.clone().unwrap_or_default();
    println!("model      {model}");
    println!(
        "api key    {}",
        match &llm.api_key_source {
            Some(source) => format!("set (from {source})"),
            None => "not set".into(),
        }
    );
    let mut healthy = true;
    match client.list_models().await {
        Ok(models) => {
            ok(&format!(
                "endpoint reachable ({} models listed)",
                models.len()
            ));
            if models.iter().any(|m| m == &model) {
                ok(&format!("model '{model}' is listed"));
            } else {
                warn(&format!(
                    "model '{model}' is not in the endpoint's list{}",
                    preview(&models)
                ));
            }
        }
        Err(e) => {
            fail(&format!("endpoint not usable: {e}"));
            healthy = false;
        }
    }
    if healthy {
        healthy &= probe_protocols(&client).await;
    }
    Ok(if healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Native tool calling and stop sequences decide the protocol to use (DESIGN §5.8).
async fn probe_protocols(client: &deepsolve_llm::OpenAiClient) -> bool {
    let mut healthy = true;
    let native = match client.probe_native_tools().await {
        Ok(true) => {
            ok("native tool calling works");
            true
        }
        Ok(false) => {
            warn("no native tool calling");
            false
        }
        Err(e) => {
            fail(&format!("tool-calling probe failed: {e}"));
            healthy = false;
            false
        }
    };
    match client.probe_stop_sequences().await {
        Ok(true) => ok("stop sequences are honoured"),
        Ok(false) => warn(
            "stop sequences are ignored (the tags protocol still cuts any result the model invents)",
        ),
        Err(e) => {
            fail(&format!("stop-sequence probe failed: {e}"));
            healthy = false;
        }
    }
    let recommended = if native { "native" } else { "tags" };
    println!(
        "recommended protocol: {recommended}   (deepsolve settings set llm.protocol={recommended})"
    );
    healthy
}

fn preview(models: &[String]) -> String {
    if models.is_empty() {
        return String::new();
    }
    let shown: Vec<&str> = models.iter().take(5).map(String::as_str).collect();
    format!(" (e.g. {})", shown.join(", "))
}

fn ok(msg: &str) {
    println!("{} {msg}", style("✓").green());
}

fn warn(msg: &str) {
    println!("{} {msg}", style("!").yellow());
}

fn fail(msg: &str) {
    println!("{} {msg}", style("✗").red());
}
