//! The turn's workspace on the host: preparing it, and seeing which files a call created or
//! changed (those are the call's artifacts).
//!
//! The workspace is written by hostile code, so the walk never follows a symlink: every
//! directory is opened relative to its parent with `O_NOFOLLOW`, and only regular files are
//! reported. A symlink planted in the workspace (say, to `/etc/shadow`) is never an artifact.

use std::collections::HashMap;
use std::ffi::CStr;
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, CWD, Dir, FileType, Mode, OFlags, openat, statat};

use crate::error::SandboxError;

/// Walk limits: a workspace is a handful of files; a hostile one must not stall the host.
const MAX_ENTRIES: usize = 20_000;
const MAX_DEPTH: usize = 16;

/// Create the workspace if needed and return its canonical path. With `owner`, hand the
/// directory to that uid/gid (root dropping to `nobody` must still be able to write it).
pub fn prepare(dir: &Path, owner: Option<u32>) -> Result<PathBuf, SandboxError> {
    let fail = |reason: String| SandboxError::Workspace {
        path: dir.to_path_buf(),
        reason,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| fail(e.to_string()))?;
    let meta = std::fs::symlink_metadata(dir).map_err(|e| fail(e.to_string()))?;
    if !meta.is_dir() {
        return Err(fail("not a directory".into()));
    }
    let path = dir.canonicalize().map_err(|e| fail(e.to_string()))?;
    if let Some(id) = owner {
        std::os::unix::fs::chown(&path, Some(id), Some(id)).map_err(|e| fail(e.to_string()))?;
    }
    Ok(path)
}

/// Size and modification time of every regular file under a directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    files: HashMap<String, Stamp>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    size: u64,
    mtime: (i64, i64),
    ino: u64,
}

/// A file a call created or changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// Relative to the workspace, `/`-separated.
    pub path: String,
    pub size: u64,
    pub mime: String,
    pub created: bool,
}

impl Snapshot {
    pub fn take(root: &Path) -> Snapshot {
        let mut snap = Snapshot::default();
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        if let Ok(fd) = openat(CWD, root, flags, Mode::empty()) {
            snap.walk(&fd, "", 0);
        }
        snap
    }

    fn walk(&mut self, dir: &OwnedFd, prefix: &str, depth: usize) {
        let Ok(entries) = Dir::read_from(dir) else {
            return;
        };
        for entry in entries.flatten() {
            if self.files.len() >= MAX_ENTRIES {
                return;
            }
            let name = entry.file_name();
            if name == c"." || name == c".." {
                continue;
            }
            let Ok(stat) = statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            let rel = join(prefix, name);
            match FileType::from_raw_mode(stat.st_mode) {
                FileType::RegularFile => {
                    let stamp = Stamp {
                        size: stat.st_size.max(0) as u64,
                        mtime: (stat.st_mtime, stat.st_mtime_nsec as i64),
                        ino: stat.st_ino,
                    };
                    self.files.insert(rel, stamp);
                }
                FileType::Directory if depth < MAX_DEPTH => {
                    let flags =
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                    if let Ok(sub) = openat(dir, name, flags, Mode::empty()) {
                        self.walk(&sub, &rel, depth + 1);
                    }
                }
                _ => {}
            }
        }
    }

    /// Files in `self` that are new or changed since `before`, sorted by path.
    pub fn changes_since(&self, before: &Snapshot) -> Vec<FileChange> {
        let mut out: Vec<FileChange> = self
            .files
            .iter()
            .filter(|(path, stamp)| before.files.get(*path) != Some(stamp))
            .map(|(path, stamp)| FileChange {
                path: path.clone(),
                size: stamp.size,
                mime: mime_for(path).to_string(),
                created: !before.files.contains_key(path),
            })
            .collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

fn join(prefix: &str, name: &CStr) -> String {
    let name = name.to_string_lossy();
    if prefix.is_empty() {
        name.into_owned()
    } else {
        format!("{prefix}/{name}")
    }
}

/// A MIME type from the file name: what the CLI shows and what a server would send.
pub fn mime_for(path: &str) -> &'static str {
    let ext = path
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "txt" | "log" | "out" => "text/plain",
        "md" => "text/markdown",
        "json" => "application/json",
        "html" | "htm" => "text/html",
        "tex" => "application/x-tex",
        "py" => "text/x-python",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "zip" => "application/zip",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_and_changed_files_are_reported_symlinks_never() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("keep.txt"), "same").unwrap();
        std::fs::write(root.join("edit.csv"), "a").unwrap();
        let before = Snapshot::take(root);
        assert_eq!(before.len(), 2);
        std::fs::write(root.join("edit.csv"), "a,b").unwrap();
        std::fs::create_dir(root.join("out")).unwrap();
        std::fs::write(root.join("out/plot.png"), [0x89, b'P', b'N', b'G']).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join("link.txt")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("etc")).unwrap();
        let changes = Snapshot::take(root).changes_since(&before);
        let paths: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["edit.csv", "out/plot.png"]);
        assert_eq!(changes[1].mime, "image/png");
        assert_eq!(changes[1].size, 4);
        assert!(changes[1].created && !changes[0].created);
    }

    #[test]
    fn prepare_creates_and_canonicalises() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("a/b/../c");
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        let path = prepare(&ws, None).unwrap();
        assert!(path.is_absolute() && path.ends_with("a/c"));
        std::os::unix::fs::symlink(&path, dir.path().join("l")).unwrap();
        assert!(prepare(&dir.path().join("l"), None).is_err());
    }

    #[test]
    fn mime_by_extension() {
        assert_eq!(mime_for("figure_1.PNG"), "image/png");
        assert_eq!(mime_for("report.pdf"), "application/pdf");
        assert_eq!(mime_for("noext"), "application/octet-stream");
    }
}
