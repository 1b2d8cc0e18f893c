//! A file's text, page by page.
//!
//! The kind of a document is decided by its first bytes where the format has a signature (PDF,
//! ZIP for DOCX) and by its name otherwise (HTML, Markdown, plain text); anything else is
//! refused by name rather than guessed at. PDF is parsed out of process (see [`pdf`]): the
//! parser panics on some fonts and has no bound on time or memory. DOCX is read with caps on
//! what its zip may inflate (see [`docx`]); HTML is reduced to its article (see [`html`]).

mod docx;
mod html;
pub mod pdf;
mod text;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

pub use pdf::pdf_child_main;

/// The formats a knowledge base accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Pdf,
    Docx,
    Html,
    Markdown,
    Text,
}

/// How a page's text is written, which tells the chunker whether `#` lines are headings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Markup {
    /// Markdown: ATX headings (`# Title`) give the heading path.
    Markdown,
    /// Plain text: no structure beyond paragraphs.
    Plain,
}

/// One page of text. Formats without pages (HTML, Markdown, text) have a single page 1;
/// DOCX pages are the ones its author broke explicitly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    /// 1-based, as a reader would cite it.
    pub number: u32,
    pub text: String,
}

/// What extraction gives: the pages, a title, and how the text is marked up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extracted {
    pub kind: Kind,
    /// The document's own title where it has one, else its file name without the extension.
    pub title: String,
    pub markup: Markup,
    pub pages: Vec<Page>,
}

/// The program (and its leading arguments) that runs [`pdf_child_main`]. The `deepsolve`
/// binary passes its own executable and a hidden subcommand; tests and tools built from this
/// crate alone use the `deepsolve-kb-pdf` binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildCommand {
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

impl ChildCommand {
    /// The `deepsolve-kb-pdf` binary next to the running executable (or one directory up, where
    /// Cargo puts binaries relative to test executables in `deps/`), if it exists.
    pub fn sibling_binary() -> Option<Self> {
        let exe = std::env::current_exe().ok()?;
        let dir = exe.parent()?;
        [dir.to_path_buf(), dir.parent()?.to_path_buf()]
            .into_iter()
            .map(|d| d.join("deepsolve-kb-pdf"))
            .find(|p| p.is_file())
            .map(|program| ChildCommand {
                program,
                args: Vec::new(),
            })
    }
}

/// Bounds on one document's extraction. Every one is a refusal with a named error, never a
/// silent truncation: a student should learn that page 2 001 was not read.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest file accepted, in bytes.
    pub max_file_bytes: u64,
    /// Most pages accepted.
    pub max_pages: u32,
    /// Most bytes a DOCX part may inflate to (declared and actual).
    pub max_inflated_bytes: u64,
    /// Most entries a DOCX zip may list.
    pub max_zip_entries: usize,
    /// Wall-clock time the PDF child (and the `pdftotext` fallback) may take.
    pub pdf_timeout: Duration,
    /// Address space the PDF child may map (RLIMIT_AS), in bytes.
    pub pdf_memory_bytes: u64,
    /// The PDF child; `None` refuses PDFs with [`ExtractError::PdfChildMissing`].
    pub pdf_child: Option<ChildCommand>,
    /// `pdftotext` for PDFs the child cannot read; `None` disables the fallback.
    pub pdftotext: Option<PathBuf>,
    /// Cancelled: a running PDF child (or `pdftotext`) is killed within a poll, its error
    /// [`ExtractError::Stopped`].
    pub cancel: Option<CancellationToken>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_bytes: 50 * 1024 * 1024,
            max_pages: 2_000,
            max_inflated_bytes: 256 * 1024 * 1024,
            max_zip_entries: 10_000,
            pdf_timeout: Duration::from_secs(120),
            pdf_memory_bytes: 2 * 1024 * 1024 * 1024,
            pdf_child: ChildCommand::sibling_binary(),
            pdftotext: find_on_path("pdftotext"),
            cancel: None,
        }
    }
}

/// The first executable file called `name` in `$PATH`.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Why a document could not be read. Each names the document, so a list of failures reads on
/// its own.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("{name}: cannot read the file: {source}")]
    Io {
        name: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{name}: unsupported format (PDF, DOCX, HTML, Markdown and plain text are accepted)")]
    Unsupported { name: String },
    #[error("{name}: {size} bytes is over the limit of {limit}")]
    TooLarge { name: String, size: u64, limit: u64 },
    #[error("{name}: {pages} pages is over the limit of {limit}")]
    TooManyPages {
        name: String,
        pages: u64,
        limit: u32,
    },
    #[error("{name}: not UTF-8 text (binary content at byte {offset})")]
    NotText { name: String, offset: usize },
    #[error("{name}: the document has no text")]
    Empty { name: String },
    #[error("{name}: not a readable DOCX: {reason}")]
    Docx { name: String, reason: String },
    #[error("{name}: refused as a zip bomb: {reason}")]
    ZipBomb { name: String, reason: String },
    #[error("{name}: not readable HTML: {reason}")]
    Html { name: String, reason: String },
    #[error("{name}: no PDF parser is configured")]
    PdfChildMissing { name: String },
    #[error("{name}: cannot start the PDF parser: {source}")]
    PdfSpawn {
        name: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{name}: the PDF parser took longer than {timeout:?}")]
    PdfTimeout { name: String, timeout: Duration },
    #[error("{name}: the PDF parser crashed (signal {signal}){}", stderr_suffix(.stderr))]
    PdfCrashed {
        name: String,
        signal: i32,
        stderr: String,
    },
    #[error("{name}: the PDF parser failed (exit code {code}){}", stderr_suffix(.stderr))]
    PdfFailed {
        name: String,
        code: i32,
        stderr: String,
    },
    #[error("{name}: the PDF parser's output is unreadable: {reason}")]
    PdfOutput { name: String, reason: String },
    #[error("{name}: the PDF parser was stopped")]
    Stopped { name: String },
}

fn stderr_suffix(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(": {stderr}")
    }
}

/// A document to extract: a file on disk, or bytes with the name they came under.
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    Path(&'a Path),
    Bytes { name: &'a str, bytes: &'a [u8] },
}

impl Input<'_> {
    /// The name errors and titles use: the file name, not the whole path.
    pub fn name(&self) -> String {
        match self {
            Input::Path(p) => p.file_name().map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            ),
            Input::Bytes { name, .. } => (*name).to_owned(),
        }
    }
}

/// Reads a document into pages, within `limits`.
pub fn extract(input: Input<'_>, limits: &Limits) -> Result<Extracted, ExtractError> {
    let name = input.name();
    let owned;
    let bytes = match input {
        Input::Path(path) => {
            owned = read_capped(path, &name, limits.max_file_bytes)?;
            owned.as_slice()
        }
        Input::Bytes { bytes, .. } => {
            check_size(&name, bytes.len() as u64, limits.max_file_bytes)?;
            bytes
        }
    };
    let kind =
        detect(&name, bytes).ok_or_else(|| ExtractError::Unsupported { name: name.clone() })?;
    let extracted = match kind {
        Kind::Pdf => pdf::extract(&name, bytes, limits)?,
        Kind::Docx => docx::extract(&name, bytes, limits)?,
        Kind::Html => html::extract(&name, bytes)?,
        Kind::Markdown => text::extract(&name, bytes, Kind::Markdown)?,
        Kind::Text => text::extract(&name, bytes, Kind::Text)?,
    };
    check_pages(&name, extracted.pages.len() as u64, limits.max_pages)?;
    if extracted.pages.iter().all(|p| p.text.trim().is_empty()) {
        return Err(ExtractError::Empty { name });
    }
    Ok(extracted)
}

/// The document's kind: signatures first (a PDF named `.txt` is still a PDF), then the name.
pub fn detect(name: &str, bytes: &[u8]) -> Option<Kind> {
    let ext = Path::new(name)
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    let ext = ext.as_deref();
    if bytes.starts_with(b"%PDF-") {
        return Some(Kind::Pdf);
    }
    if bytes.starts_with(b"PK\x03\x04") {
        // Only DOCX among zips; an .xlsx or .odt is refused, not read as a Word file.
        return (ext == Some("docx")).then_some(Kind::Docx);
    }
    match ext? {
        "pdf" => Some(Kind::Pdf),
        "html" | "htm" | "xhtml" => Some(Kind::Html),
        "md" | "markdown" => Some(Kind::Markdown),
        "txt" | "text" => Some(Kind::Text),
        _ => None,
    }
}

fn check_size(name: &str, size: u64, limit: u64) -> Result<(), ExtractError> {
    if size > limit {
        return Err(ExtractError::TooLarge {
            name: name.to_owned(),
            size,
            limit,
        });
    }
    Ok(())
}

pub(crate) fn check_pages(name: &str, pages: u64, limit: u32) -> Result<(), ExtractError> {
    if pages > u64::from(limit) {
        return Err(ExtractError::TooManyPages {
            name: name.to_owned(),
            pages,
            limit,
        });
    }
    Ok(())
}

/// Reads at most `limit + 1` bytes, so a huge file (or a device that never ends) costs no more
/// than the limit.
fn read_capped(path: &Path, name: &str, limit: u64) -> Result<Vec<u8>, ExtractError> {
    use std::io::Read;
    let io = |source| ExtractError::Io {
        name: name.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        let size = std::fs::metadata(path).map_or(bytes.len() as u64, |m| m.len());
        return Err(ExtractError::TooLarge {
            name: name.to_owned(),
            size,
            limit,
        });
    }
    Ok(bytes)
}

/// The file name without its extension: the title of a document that has none of its own.
pub(crate) fn stem_title(name: &str) -> String {
    Path::new(name)
        .file_stem()
        .map_or_else(|| name.to_owned(), |s| s.to_string_lossy().into_owned())
}
