//! What every turn gets before it runs, made here for the CLI and the server alike: its id
//! and its workspace.

use std::path::{Path, PathBuf};

/// A fresh turn id: `turn_` and a time-ordered UUID (v7), so ids sort by creation.
pub fn new_turn_id() -> String {
    format!("turn_{}", uuid::Uuid::now_v7().simple())
}

/// deepsolve's data directory: `$XDG_DATA_HOME/deepsolve` (`~/.local/share/deepsolve`), where
/// the embedded database and the turn workspaces live by default. Not created here.
pub fn data_dir() -> Result<PathBuf, WorkspaceError> {
    let base = dirs::data_dir()
        .or_else(|| dirs::home_dir().map(|h| h.join(".local/share")))
        .ok_or(WorkspaceError::NoDataDir)?;
    Ok(base.join("deepsolve"))
}

/// Where turn workspaces live by default: `<data dir>/turns`.
pub fn default_workspace_root() -> Result<PathBuf, WorkspaceError> {
    Ok(data_dir()?.join("turns"))
}

/// `<root>/<turn id>`, created if missing (with its parents) and private to this user: the
/// turn's files are the user's data. It is kept after the turn, so its artifacts survive and
/// a resumed turn finds what it wrote before.
pub fn create_workspace(root: &Path, turn_id: &str) -> Result<PathBuf, WorkspaceError> {
    if !is_plain_id(turn_id) {
        return Err(WorkspaceError::BadTurnId(turn_id.to_string()));
    }
    let dir = root.join(turn_id);
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(&dir)
        .map_err(|source| WorkspaceError::Create {
            path: dir.clone(),
            source,
        })?;
    Ok(dir)
}

/// A turn id is one path segment of letters, digits, `_` and `-`: it cannot name a directory
/// outside the root.
fn is_plain_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("no data directory for the database and turn workspaces (set XDG_DATA_HOME)")]
    NoDataDir,
    #[error("'{0}' is not a turn id a workspace can be made for")]
    BadTurnId(String),
    #[error("cannot create the turn's workspace {}", path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
