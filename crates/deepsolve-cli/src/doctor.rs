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
    let sandbox_ok = sandbox_section(&loaded.settings).await;
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
    let mut healthy = sandbox_ok;
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

/// The code tools' sandbox: which backend isolates model code, or exactly why there is none
/// (then `solve` does not mount `code_execution`/`exec`), and whether the sandbox's Python has
/// the maths stack. Unhealthy only when `tools.sandbox: bwrap` is required and missing.
async fn sandbox_section(settings: &deepsolve_settings::Settings) -> bool {
    let mode = settings.tools.sandbox.trim();
    let sandbox = match crate::solve::sandbox_tools::detect(settings).await {
        Ok(sandbox) => sandbox,
        Err(e) => {
            println!("sandbox    {mode}: none available");
            if mode == "bwrap" {
                fail(&format!("code tools cannot run: {e}"));
                return false;
            }
            warn(&format!("code tools are off (not mounted): {e}"));
            return true;
        }
    };
    println!("sandbox    {mode}: {}", sandbox.describe());
    match sandbox.warning() {
        Some(warning) => warn(&warning),
        None => ok("code tools mounted: code_execution, exec"),
    }
    let modules = ["numpy", "sympy", "scipy", "matplotlib"];
    match sandbox.check_modules(&modules).await {
        Ok(found) => {
            let (have, missing): (Vec<_>, Vec<_>) = found.into_iter().partition(|(_, r)| r.is_ok());
            let have: Vec<String> = have
                .into_iter()
                .map(|(m, r)| format!("{m} {}", r.unwrap_or_default()))
                .collect();
            let python = sandbox.config().python.display().to_string();
            if missing.is_empty() {
                ok(&format!("{python} has {}", have.join(", ")));
            } else {
                let missing: Vec<String> = missing
                    .into_iter()
                    .map(|(m, r)| format!("{m} ({})", r.err().unwrap_or_default()))
                    .collect();
                warn(&format!(
                    "{python} lacks {}: install python3-numpy python3-sympy python3-scipy python3-matplotlib",
                    missing.join(", ")
                ));
            }
        }
        Err(e) => warn(&format!(
            "could not check the sandbox's Python modules: {e}"
        )),
    }
    true
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
