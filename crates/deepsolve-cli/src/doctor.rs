//! `deepsolve doctor`: is the configured endpoint (or the in-process model) usable for solving?

use crate::exit::Exit;

use console::style;
use std::sync::Arc;

use deepsolve_app::{
    AppBuilder, DEFAULT_BASE_URL, MainClient, main_client, reasoning_model, vision_model,
};
use deepsolve_core::ChatModel;
use deepsolve_settings::Loaded;
use deepsolve_tools::{DoctorLine, Policy, Sandbox, Unavailable};

use crate::ConfigArgs;
use crate::output::outln;
use crate::setup::load_settings;

pub(crate) async fn run(args: &ConfigArgs, recheck: bool, quick: bool) -> anyhow::Result<Exit> {
    let loaded = load_settings(args)?;
    let llm = &loaded.settings.llm;
    let exists = if loaded.file_exists {
        ""
    } else {
        " (not created yet)"
    };
    outln!("settings   {}{exists}", loaded.path.display());
    let (sandbox_ok, sandbox) = sandbox_section(&loaded.settings).await;
    let client = match main_client(&loaded).await? {
        MainClient::Endpoint(client) => client,
        MainClient::Local(model) => {
            let healthy = crate::doctor_local::section(&model, quick).await;
            models_section(&loaded.settings);
            let main: Arc<dyn ChatModel> = model;
            let tools = tools_section(&loaded, &main, sandbox);
            tool_reports(&loaded.settings);
            let healthy = healthy & sandbox_ok & tools;
            return Ok(if healthy { Exit::Answer } else { Exit::Failure });
        }
    };
    let base_url = crate::setup::base_url(&loaded);
    outln!("endpoint   {base_url}");
    let model = llm.model.clone().unwrap_or_default();
    outln!("model      {model}");
    outln!(
        "api key    {}",
        match &llm.api_key_source {
            Some(source) => format!("set (from {source})"),
            None => "not set".into(),
        }
    );
    models_section(&loaded.settings);
    let main: Arc<dyn ChatModel> = client.clone();
    let mut healthy = sandbox_ok & tools_section(&loaded, &main, sandbox);
    tool_reports(&loaded.settings);
    match client.list_models().await {
        Ok(models) => {
            ok(&format!(
                "endpoint reachable ({} models listed)",
                models.len()
            ));
            healthy &= model_listed(&model, &models);
        }
        Err(e) => {
            match e {
                deepsolve_core::ModelError::BadRequest { status: 404, .. } => fail(&format!(
                    "endpoint not usable: {e}\n  hint: {}",
                    crate::hints::not_found(&base_url, &model)
                )),
                _ => fail(&format!("endpoint not usable: {e}")),
            }
            healthy = false;
        }
    }
    if healthy {
        healthy &= probe_section(&loaded, &client, recheck).await;
        match crate::images::vision_line(loaded.settings.llm.vision, client.as_ref()).await {
            Ok(line) => ok(&line),
            Err(line) => warn(&line),
        }
    }
    Ok(if healthy { Exit::Answer } else { Exit::Failure })
}

/// What the endpoint honours at decoding time, from the probe's verdict (kept per endpoint
/// and model; probed now when none is kept, the kept one is stale, or `--recheck`), with the
/// context window turns get and the protocol the verdict points to. Capabilities not honoured
/// are findings, not failures; a probe that cannot reach the endpoint is a failure.
async fn probe_section(
    loaded: &Loaded,
    client: &deepsolve_llm::OpenAiClient,
    recheck: bool,
) -> bool {
    let stale = client.verdict().and_then(|v| v.stale);
    let (verdict, probed_now) =
        match deepsolve_app::probe::probed(client, recheck, PROBE_CHECK_TIMEOUT).await {
            Ok(found) => found,
            Err(e) => {
                fail(&format!("the endpoint probe failed: {e}"));
                return false;
            }
        };
    let taken = crate::history::utc_minute(
        i64::try_from(verdict.taken_at.saturating_mul(1000)).unwrap_or(i64::MAX),
    );
    let when = match (probed_now, stale) {
        (false, _) => format!("kept from {taken} (`deepsolve doctor --recheck` probes again)"),
        (true, Some(why)) => format!("probed now, {taken}: the kept verdict was stale ({why})"),
        (true, None) => format!("probed now, {taken}"),
    };
    outln!("probe      {when}");
    for capability in deepsolve_llm::Capability::ALL {
        let Some(finding) = verdict.finding(capability) else {
            continue;
        };
        let line = format!("{}: {}", capability.label(), finding.detail);
        if finding.honoured {
            ok(&line);
        } else {
            outln!("{} {line}", style("✗").yellow());
        }
    }
    if verdict.plans_unforced == Some(false) {
        warn("the model does not plan with solve_plan unless made to: the spine must be enforced");
    }
    let honours = deepsolve_core::ChatModel::honours(client);
    let (window, origin) = deepsolve_app::probe::context_window(&loaded.settings, &honours);
    let source = deepsolve_app::probe::describe_origin(origin, verdict.window_source);
    outln!("context    {window} tokens ({source})");
    if origin == deepsolve_app::probe::WindowOrigin::Configured
        && let Some(server) = verdict.context_window
        && server != window
    {
        warn(&format!(
            "llm.context_window is {window} but the server says {server} ({})",
            verdict.window_source.map_or("", |s| s.describe())
        ));
    }
    let recommended = verdict.recommended_protocol().as_str();
    outln!(
        "recommended protocol: {recommended}   (deepsolve settings set llm.protocol={recommended})"
    );
    true
}

/// How long each of the probe's requests may take: a small local model on a busy CPU
/// prefills the playbook in tens of seconds.
const PROBE_CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// Whether the endpoint lists `model`: a listed model is a pass; one missing from a non-empty
/// list fails (naming the nearest listed name); an empty list says nothing either way.
fn model_listed(model: &str, models: &[String]) -> bool {
    if models.iter().any(|m| m == model) {
        ok(&format!("model '{model}' is listed"));
        return true;
    }
    if models.is_empty() {
        warn(&format!(
            "the endpoint lists no models: cannot check that '{model}' is served"
        ));
        return true;
    }
    let nearest = deepsolve_core::config::nearest(model, models)
        .map(|m| {
            format!(" — did you mean '{m}'? (--model, or `deepsolve settings set llm.model=…`)")
        })
        .unwrap_or_default();
    fail(&format!(
        "model '{model}' is not in the endpoint's list{}{nearest}",
        preview(models)
    ));
    false
}

fn preview(models: &[String]) -> String {
    if models.is_empty() {
        return String::new();
    }
    let shown: Vec<&str> = models.iter().take(5).map(String::as_str).collect();
    format!(" (e.g. {})", shown.join(", "))
}

/// The code tools' sandbox: which backend isolates model code, or exactly why there is none
/// (then `code_execution`/`exec` are not mounted), each turn's budgets and what enforces them
/// (a cgroup, or the watchdog and why), and whether the sandbox's Python has the maths stack.
/// Unhealthy only when `sandbox.backend: bwrap` is required and missing.
async fn sandbox_section(
    settings: &deepsolve_settings::Settings,
) -> (bool, Result<Sandbox, Unavailable>) {
    let mode = settings.sandbox.backend.trim();
    let sandbox = match deepsolve_app::sandbox::detect(settings).await {
        Ok(sandbox) => sandbox,
        Err(e) => {
            outln!("sandbox    {mode}: none available");
            let healthy = !deepsolve_app::sandbox::is_required(settings);
            if healthy {
                warn(&format!("code tools are off (not mounted): {e}"));
            } else {
                fail(&format!("code tools cannot run: {e}"));
            }
            return (healthy, Err(Unavailable(e.to_string())));
        }
    };
    outln!("sandbox    {mode}: {}", sandbox.describe());
    for line in sandbox.describe_budgets() {
        outln!("           {line}");
    }
    if let Some(warning) = sandbox.warning() {
        warn(&warning);
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
    (true, Ok(sandbox))
}

/// The other models: `reason`'s (`models.reason`) and the one that reads images
/// (`models.vision`, behind `geogebra_analysis`), each with its endpoint, or what stands in.
fn models_section(settings: &deepsolve_settings::Settings) {
    let line = |reference: &deepsolve_settings::ModelRef| {
        let endpoint = (reference.base_url.as_deref())
            .or(settings.llm.base_url.as_deref())
            .unwrap_or(DEFAULT_BASE_URL);
        let key = match &reference.api_key_env {
            Some(var) => format!(", key from {var}"),
            None => String::new(),
        };
        format!("{} at {endpoint}{key}", reference.model)
    };
    let models = &settings.models;
    outln!(
        "reasoning  {}",
        models.reason.as_ref().map_or_else(
            || "the main model (models.reason is not set)".to_string(),
            line
        )
    );
    outln!(
        "vision     {}",
        models.vision.as_ref().map_or_else(
            || "none (models.vision is not set): geogebra_analysis draws from text only"
                .to_string(),
            line
        )
    );
}

/// Every tool of the catalog: mounted (and how turns get it), or why not. Unhealthy only when
/// the tools cannot be mounted at all (`tools.enabled` names one that does not work).
fn tools_section(
    loaded: &Loaded,
    client: &Arc<dyn ChatModel>,
    sandbox: Result<Sandbox, Unavailable>,
) -> bool {
    let built = AppBuilder::new(loaded.settings.clone(), client.clone())
        .reasoning_model(reasoning_model(loaded, client))
        .vision_model(vision_model(loaded))
        .sandbox(sandbox)
        .build();
    let app = match built {
        Ok(app) => app,
        Err(e) => {
            outln!("tools      none mounted");
            fail(&e.to_string());
            return false;
        }
    };
    let status = app.tools().status();
    let mounted: Vec<String> = status
        .iter()
        .filter(|s| s.unavailable.is_none())
        .map(|s| format!("{} ({})", s.name, s.policy))
        .collect();
    outln!(
        "tools      {}",
        if mounted.is_empty() {
            "none mounted".to_string()
        } else {
            mounted.join(", ")
        }
    );
    for tool in &status {
        // Knowledge is a turn's own here: `solve` opens it from `--kb` and `--attach`.
        if tool.policy == Policy::WithMaterial {
            outln!(
                "           {} ({}): offered on a turn given --kb or --attach",
                tool.name,
                tool.policy
            );
            continue;
        }
        if let Some(why) = tool.unavailable {
            warn(&format!(
                "{} ({}) is not mounted: {why}",
                tool.name, tool.policy
            ));
        }
    }
    true
}

/// What each tool of the catalog adds to the report (its entry's `doctor` hook). Never
/// unhealthy: the hooks inform.
fn tool_reports(settings: &deepsolve_settings::Settings) {
    let hooks = deepsolve_tools::CATALOG
        .iter()
        .filter_map(|entry| entry.doctor);
    for line in hooks.flat_map(|hook| hook(settings)) {
        match line {
            DoctorLine::Note(text) => outln!("{text}"),
            DoctorLine::Warn(text) => warn(&text),
        }
    }
}

pub(crate) fn ok(msg: &str) {
    outln!("{} {msg}", style("✓").green());
}

fn warn(msg: &str) {
    outln!("{} {msg}", style("!").yellow());
}

pub(crate) fn fail(msg: &str) {
    outln!("{} {msg}", style("✗").red());
}
