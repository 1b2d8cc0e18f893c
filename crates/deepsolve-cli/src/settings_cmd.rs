//! `deepsolve settings get|set|path|import-deeptutor`.

mod import_deeptutor;

use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;

use crate::ConfigArgs;
use crate::setup::load_settings;

#[derive(Subcommand)]
pub(crate) enum SettingsAction {
    /// Print the effective settings (or one key) as JSON; secrets are redacted.
    Get { key: Option<String> },
    /// Write KEY=VALUE into the settings file (validated and clamped, written atomically).
    Set { assignment: String },
    /// Print the settings file's path.
    Path,
    /// Carry a DeepTutor directory's solve settings over (data/user/settings/agents.yaml and
    /// main.yaml: temperature, max_tokens, max_rounds, max_replans, prompts.solve.system),
    /// clamped like any setting; prints what it took and what it skipped.
    ImportDeeptutor { dir: std::path::PathBuf },
}

pub(crate) fn run(action: SettingsAction, args: &ConfigArgs) -> anyhow::Result<ExitCode> {
    match action {
        SettingsAction::Path => {
            println!("{}", load_settings(args)?.path.display());
        }
        SettingsAction::Get { key } => {
            let loaded = load_settings(args)?;
            let value = deepsolve_settings::get(&loaded, key.as_deref())?;
            println!("{}", serde_json::to_string_pretty(&value)?);
        }
        SettingsAction::Set { assignment } => {
            let (key, value) = assignment
                .split_once('=')
                .with_context(|| format!("expected KEY=VALUE, got '{assignment}'"))?;
            let path = deepsolve_settings::resolve_path(&deepsolve_settings::LoadOptions {
                config_path: args.config.clone(),
                env: std::env::vars().collect(),
                ..Default::default()
            });
            let warnings = deepsolve_settings::set_in_file(
                &path,
                key.trim(),
                value.trim(),
                &deepsolve_app::tool_sections(),
            )?;
            for w in warnings {
                eprintln!("warning: {w}");
            }
            println!("{} written to {}", key.trim(), path.display());
        }
        SettingsAction::ImportDeeptutor { dir } => import_deeptutor::run(&dir, args)?,
    }
    Ok(ExitCode::SUCCESS)
}
