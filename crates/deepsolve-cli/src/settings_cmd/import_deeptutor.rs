//! `deepsolve settings import-deeptutor DIR`: the reference's solve settings into ours, through
//! the same writer as `settings set` (validated, clamped, one atomic write). Importing twice
//! writes the same file.

use std::path::Path;

use crate::ConfigArgs;
use crate::output::{errln, outln};

pub(crate) fn run(dir: &Path, args: &ConfigArgs) -> anyhow::Result<()> {
    let found = deepsolve_settings::import::import_deeptutor(dir)?;
    for warning in &found.warnings {
        errln!("warning: {warning}");
    }
    let path = super::settings_path(args);
    if !found.took.is_empty() {
        let pairs: Vec<(&str, &str)> = (found.took.iter())
            .map(|(key, value, _)| (key.as_str(), value.as_str()))
            .collect();
        let clamped =
            deepsolve_settings::set_many_in_file(&path, &pairs, &deepsolve_app::tool_sections())?;
        for warning in clamped {
            errln!("warning: {warning}");
        }
    }
    outln!("read {}", found.dir.display());
    for (key, value, from) in &found.took {
        let shown = if key.starts_with("prompts.") {
            format!("{} characters", value.chars().count())
        } else {
            value.clone()
        };
        outln!("took {key} = {shown} (from {from})");
    }
    for skipped in &found.skipped {
        outln!("skipped {skipped}");
    }
    if found.took.is_empty() {
        outln!("nothing to write: {} is unchanged", path.display());
    } else {
        outln!("written to {}", path.display());
    }
    Ok(())
}
