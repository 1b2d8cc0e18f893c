//! `deepsolve settings get|set|path|import-deeptutor`.

mod import_deeptutor;

use crate::exit::{Exit, UsageError};

use clap::Subcommand;

use crate::ConfigArgs;
use crate::output::{errln, outln};
use crate::setup::load_settings;

#[derive(Subcommand)]
pub(crate) enum SettingsAction {
    /// Print the effective settings (or one key) as JSON; secrets are redacted.
    Get { key: Option<String> },
    /// Write KEY=VALUE into the settings file (validated and clamped, written atomically).
    Set { assignment: String },
    /// Print the settings file's path (also when it does not exist yet).
    Path,
    /// Carry a DeepTutor directory's solve settings over (data/user/settings/agents.yaml and
    /// main.yaml: temperature, max_tokens, max_rounds, max_replans, prompts.solve.system),
    /// clamped like any setting; prints what it took and what it skipped.
    ImportDeeptutor { dir: std::path::PathBuf },
}

pub(crate) fn run(action: SettingsAction, args: &ConfigArgs) -> anyhow::Result<Exit> {
    match action {
        SettingsAction::Path => {
            // The file `set` would write, whether or not it exists yet.
            let path = settings_path(args);
            outln!("{}", path.display());
            if !path.exists() {
                errln!("(not created yet: `deepsolve settings set KEY=VALUE` creates it)");
            }
        }
        SettingsAction::Get { key } => {
            let loaded = load_settings(args)?;
            let value = deepsolve_settings::get(&loaded, key.as_deref())?;
            outln!("{}", serde_json::to_string_pretty(&value)?);
        }
        SettingsAction::Set { assignment } => {
            let (key, value) = assignment.split_once('=').ok_or_else(|| {
                UsageError::error(format!("expected KEY=VALUE, got '{assignment}'"))
            })?;
            let path = settings_path(args);
            let warnings = deepsolve_settings::set_in_file(
                &path,
                key.trim(),
                value.trim(),
                &deepsolve_app::tool_sections(),
            )?;
            for w in warnings {
                errln!("warning: {w}");
            }
            outln!("{} written to {}", key.trim(), path.display());
        }
        SettingsAction::ImportDeeptutor { dir } => import_deeptutor::run(&dir, args)?,
    }
    Ok(Exit::Answer)
}

/// The settings file `--config`, `DEEPSOLVE_CONFIG` or the default names.
fn settings_path(args: &ConfigArgs) -> std::path::PathBuf {
    deepsolve_settings::resolve_path(&deepsolve_settings::LoadOptions {
        config_path: args.config.clone(),
        env: std::env::vars().collect(),
        ..Default::default()
    })
}
