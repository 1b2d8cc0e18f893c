//! Where a problem comes from: the argument, `-` or a pipe (stdin), or `--file`.

use std::io::{IsTerminal, Read};
use std::path::Path;

use anyhow::Context;

use crate::exit::UsageError;

/// The largest problem read from stdin or a file (16 MiB): far past any context window (the
/// window check names the sizes), but a bound on what `… < /dev/zero` can cost.
const MAX_PROBLEM_BYTES: u64 = 16 << 20;

/// The problem: the argument (`-` reads stdin), else `--file` (`-` reads stdin), else stdin
/// when it is not a terminal. Clap already refuses an argument together with `--file`.
pub(crate) fn read_problem(arg: Option<&str>, file: Option<&Path>) -> anyhow::Result<String> {
    let (text, from) = match (arg, file) {
        (Some("-"), None) => (read_stdin()?, "stdin".to_string()),
        (Some(text), None) => (text.to_string(), "the argument".to_string()),
        (None, Some(path)) if path == Path::new("-") => (read_stdin()?, "stdin".to_string()),
        (None, Some(path)) => (read_file(path)?, path.display().to_string()),
        (None, None) if std::io::stdin().is_terminal() => {
            return Err(UsageError::error(
                "no problem given: pass it as an argument, with --file FILE, or on stdin (`… | deepsolve solve`)",
            ));
        }
        (None, None) => (read_stdin()?, "stdin".to_string()),
        (Some(_), Some(_)) => {
            return Err(UsageError::error(
                "the problem was given twice: as an argument and with --file; give one",
            ));
        }
    };
    if text.trim().is_empty() {
        return Err(UsageError::error(format!(
            "the problem is empty (read from {from})"
        )));
    }
    Ok(text)
}

fn read_stdin() -> anyhow::Result<String> {
    read_capped(std::io::stdin().lock(), "stdin")
}

fn read_file(path: &Path) -> anyhow::Result<String> {
    let file = std::fs::File::open(path).map_err(|e| {
        UsageError::error(format!(
            "cannot read the problem from {}: {e}",
            path.display()
        ))
    })?;
    read_capped(file, &path.display().to_string())
}

/// Read all of `reader` as UTF-8, up to [`MAX_PROBLEM_BYTES`].
fn read_capped(reader: impl Read, from: &str) -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    reader
        .take(MAX_PROBLEM_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read the problem from {from}"))?;
    if bytes.len() as u64 > MAX_PROBLEM_BYTES {
        return Err(UsageError::error(format!(
            "the problem from {from} is larger than {} MiB",
            MAX_PROBLEM_BYTES >> 20
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        UsageError::error(format!(
            "the problem from {from} is not UTF-8 text (byte {})",
            e.utf8_error().valid_up_to()
        ))
    })
}
