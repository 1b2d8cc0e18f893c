//! Where the answer goes: stdout — rendered as Markdown on a terminal, the Markdown itself
//! otherwise, so `deepsolve solve … > answer.md` holds just the answer — or, with `-o FILE`,
//! that file, written atomically. With `--json` stdout carries the events only.

use std::fs::OpenOptions;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::output::{errln, outln};
use crate::render::view::Answer;
use crate::render::{TurnView, source_line};

/// Where `deliver` puts the answer.
#[derive(Debug, Clone, Default)]
pub(crate) struct AnswerTarget {
    /// Stdout carries the events (`--json`): the answer goes only to `file`.
    pub(crate) json: bool,
    /// `-o FILE`.
    pub(crate) file: Option<PathBuf>,
}

/// Put the turn's answer (if it has one) where `target` says.
pub(crate) fn deliver(view: &TurnView, target: &AnswerTarget) -> anyhow::Result<()> {
    let Some(answer) = &view.answer else {
        return Ok(());
    };
    if let Some(path) = &target.file {
        write_atomically(path, &markdown(answer))
            .with_context(|| format!("cannot write the answer to {}", path.display()))?;
        errln!("answer written to {}", path.display());
        return Ok(());
    }
    if target.json {
        return Ok(());
    }
    if std::io::stdout().is_terminal() {
        let skin = termimad::MadSkin::default();
        outln!();
        outln!("{}", skin.term_text(&without_controls(&answer.text)));
        if !answer.sources.is_empty() {
            outln!("{}", console::style("Sources").bold());
            for source in &answer.sources {
                outln!("  {}", source_line(source));
            }
        }
    } else {
        outln!("{}", markdown(answer).trim_end());
    }
    Ok(())
}

/// The answer as Markdown, with its cited sources listed after it.
fn markdown(answer: &Answer) -> String {
    let mut text = answer.text.trim_end().to_string();
    text.push('\n');
    if !answer.sources.is_empty() {
        text.push_str("\nSources:\n");
        for source in &answer.sources {
            text.push_str(&format!("- {}\n", source.list_line()));
        }
    }
    text
}

/// The model's text without the control characters that would drive the terminal (escape
/// sequences); line breaks and tabs stay.
fn without_controls(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
        .collect()
}

/// A temporary file beside `path`, then a rename: a reader never sees half an answer, and a
/// failed write leaves any earlier file as it was.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "answer".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut file| {
            file.write_all(text.as_bytes())?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
