//! `deepsolve settings import-deeptutor DIR`: the reference's solve settings into ours, through
//! the same writer as `settings set` (validated, clamped, one atomic write). Importing twice
//! writes the same file.

use std::path::Path;

use crate::ConfigArgs;

pub(crate) fn run(dir: &Path, args: &ConfigArgs) -> anyhow::Result<()> {
    let found = deepsolve_settings::import::import_deeptutor(dir)?;
    for warning in &found.warnings {
        eprintln!("warning: {warning}");
    }
    let path = deepsolve_settings::resolve_path(&deepsolve_settings::LoadOptions {
        config_path: args.config.clone(),
        env: std::env::vars().collect(),
        ..Default::default()
    });
    if !found.took.is_empty() {
        let pairs: Vec<(&str, &str)> = (found.took.iter())
            .map(|(key, value, _)| (key.as_str(), value.as_str()))
            .collect();
        let clamped =
            deepsolve_settings::set_many_in_file(&path, &pairs, &deepsolve_app::tool_sections())?;
        for warning in clamped {
            eprintln!("warning: {warning}");
        }
    }
    println!("read {}", found.dir.display());
    for (key, value, from) in &found.took {
        let shown = if key.starts_with("prompts.") {
            format!("{} characters", value.chars().count())
        } else {
            value.clone()
        };
        println!("took {key} = {shown} (from {from})");
    }
    for skipped in &found.skipped {
        println!("skipped {skipped}");
    }
    if found.took.is_empty() {
        println!("nothing to write: {} is unchanged", path.display());
    } else {
        println!("written to {}", path.display());
    }
    Ok(())
}
