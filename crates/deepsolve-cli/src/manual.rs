//! `deepsolve completions SHELL` and `deepsolve man`: generated from the command line's own
//! definition, so they always match the binary.

use std::path::Path;

use anyhow::Context;
use clap::CommandFactory;
use clap_complete::Shell;

use crate::Cli;
use crate::exit::Exit;
use crate::output::{errln, out_bytes};

/// The completion script for `shell` on stdout.
pub(crate) fn completions(shell: Shell) -> Exit {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "deepsolve", &mut script);
    out_bytes(&script);
    Exit::Answer
}

/// The man page on stdout, or with `dir` one page per command written there
/// (`deepsolve.1`, `deepsolve-solve.1`, …).
pub(crate) fn man(dir: Option<&Path>) -> anyhow::Result<Exit> {
    let command = Cli::command();
    match dir {
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(command).render(&mut page)?;
            out_bytes(&page);
        }
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(command, dir)
                .with_context(|| format!("cannot write the man pages to {}", dir.display()))?;
            errln!("man pages written to {}", dir.display());
        }
    }
    Ok(Exit::Answer)
}
