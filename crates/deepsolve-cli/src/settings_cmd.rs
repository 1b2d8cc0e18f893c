//! `deepsolve settings get|set|path`.

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
    }
    Ok(ExitCode::SUCCESS)
}
