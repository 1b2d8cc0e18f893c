//! What every turn gets before it runs, made here for the CLI and the server alike: its id
//! and its workspace, held while the turn runs so that no collection deletes it
//! ([`crate::gc`]).

use std::fs::File;
use std::os::unix::fs::MetadataExt;
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
/// turn's files are the user's data. It is kept after the turn (until a collection removes
/// it: [`crate::gc`]), so its artifacts survive and a resumed turn finds what it wrote before.
/// A turn about to run takes [`hold_workspace`] instead.
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

/// A turn's workspace, held for as long as this value lives: an open descriptor on the
/// directory with a shared `flock`. A collection (in this process or any other) takes the
/// lock exclusively before it deletes a workspace, so it never deletes a held one. The
/// descriptor is close-on-exec: sandboxed processes do not inherit it (nor the lock).
#[derive(Debug)]
pub struct HeldWorkspace {
    path: PathBuf,
    _lock: File,
}

impl HeldWorkspace {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// How often [`hold_workspace`] starts again when a collection removed the directory between
/// its creation and the lock (only an empty, fresh directory can be: once held it stays).
const HOLD_ATTEMPTS: usize = 8;

/// [`create_workspace`], then hold it for the turn ([`HeldWorkspace`]). Blocks while a
/// collection is deleting this very directory, then makes it again.
pub fn hold_workspace(root: &Path, turn_id: &str) -> Result<HeldWorkspace, WorkspaceError> {
    let mut last = std::io::Error::other("removed each time it was made");
    for _ in 0..HOLD_ATTEMPTS {
        let dir = create_workspace(root, turn_id)?;
        match lock_shared(&dir) {
            Ok(Some(lock)) => {
                return Ok(HeldWorkspace {
                    path: dir,
                    _lock: lock,
                });
            }
            // Collected between the creation and the lock: make it again.
            Ok(None) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => last = e,
        }
    }
    Err(WorkspaceError::Hold {
        path: root.join(turn_id),
        source: last,
    })
}

/// The directory opened and share-locked; `None` when what is at `dir` once the lock is
/// held is no longer the directory that was locked (a collection removed it meanwhile).
fn lock_shared(dir: &Path) -> std::io::Result<Option<File>> {
    let file = File::open(dir)?;
    file.lock_shared()?;
    let locked = file.metadata()?;
    let now_there = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let same =
        now_there.is_dir() && (now_there.dev(), now_there.ino()) == (locked.dev(), locked.ino());
    Ok(same.then_some(file))
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
    #[error("cannot hold the turn's workspace {} for the turn", path.display())]
    Hold {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
