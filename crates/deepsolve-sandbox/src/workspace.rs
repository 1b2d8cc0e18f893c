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

use rustix::fs::{AtFlags, CWD, Dir, FileType, Mode, OFlags, Stat, openat, statat};

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
        walk(root, MAX_DEPTH, &mut |entry| {
            if snap.files.len() >= MAX_ENTRIES {
                return Step::Stop;
            }
            if FileType::from_raw_mode(entry.stat.st_mode) == FileType::RegularFile {
                let stamp = Stamp {
                    size: entry.stat.st_size.max(0) as u64,
                    mtime: (entry.stat.st_mtime, entry.stat.st_mtime_nsec as i64),
                    ino: entry.stat.st_ino,
                };
                snap.files.insert(entry.rel(), stamp);
            }
            Step::Continue
        });
        snap
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

/// One entry the walk met.
struct Entry<'a> {
    /// The path of its directory, relative to the workspace (`""` at the top).
    prefix: &'a str,
    name: &'a CStr,
    stat: &'a Stat,
    /// 0 for the workspace's own entries. A directory at the walk's depth limit is reported
    /// but not entered.
    depth: usize,
}

impl Entry<'_> {
    /// Its path relative to the workspace, `/`-separated.
    fn rel(&self) -> String {
        join(self.prefix, self.name)
    }
}

enum Step {
    Continue,
    Stop,
}

/// Visit every entry under `root`, never following a symlink: each directory is opened
/// relative to its parent with `O_NOFOLLOW`, so a symlink (or a directory swapped for one
/// mid-walk) is reported as what it is and never entered.
fn walk(root: &Path, max_depth: usize, visit: &mut dyn FnMut(&Entry<'_>) -> Step) {
    if let Ok(fd) = openat(CWD, root, DIR_FLAGS, Mode::empty()) {
        walk_dir(&fd, "", 0, max_depth, visit);
    }
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// `Continue` when the walk should go on after this directory.
fn walk_dir(
    dir: &OwnedFd,
    prefix: &str,
    depth: usize,
    max_depth: usize,
    visit: &mut dyn FnMut(&Entry<'_>) -> Step,
) -> Step {
    let Ok(entries) = Dir::read_from(dir) else {
        return Step::Continue;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let Ok(stat) = statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        let seen = Entry {
            prefix,
            name,
            stat: &stat,
            depth,
        };
        if let Step::Stop = visit(&seen) {
            return Step::Stop;
        }
        let is_dir = FileType::from_raw_mode(stat.st_mode) == FileType::Directory;
        if is_dir
            && depth < max_depth
            && let Ok(sub) = openat(dir, name, DIR_FLAGS, Mode::empty())
            && let Step::Stop = walk_dir(&sub, &seen.rel(), depth + 1, max_depth, visit)
        {
            return Step::Stop;
        }
    }
    Step::Continue
}

/// How deep the quota walk goes. Anything below is uncountable, so a workspace nested deeper
/// is itself over a limit (it could otherwise hide files from the count).
pub(crate) const QUOTA_DEPTH: usize = 64;

/// What a workspace holds, as the quota counts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Allocated disk (blocks, so a sparse file counts what it really uses); a file with
    /// several hard links counts once.
    pub bytes: u64,
    /// Entries of every kind: files, directories, symlinks, the rest.
    pub entries: u64,
    /// A directory lies deeper than [`QUOTA_DEPTH`].
    pub too_deep: bool,
}

impl Usage {
    /// Count `root`, stopping once more than `max_entries` are seen (the count is then over
    /// its limit anyway, and the walk stays bounded whatever the workspace holds).
    pub(crate) fn of(root: &Path, max_entries: u64) -> Usage {
        let mut usage = Usage::default();
        let mut linked = std::collections::HashSet::new();
        walk(root, QUOTA_DEPTH, &mut |entry| {
            usage.entries += 1;
            let is_dir = FileType::from_raw_mode(entry.stat.st_mode) == FileType::Directory;
            if is_dir && entry.depth >= QUOTA_DEPTH {
                usage.too_deep = true;
            }
            let once = is_dir
                || entry.stat.st_nlink <= 1
                || linked.insert((entry.stat.st_dev, entry.stat.st_ino));
            if once {
                usage.bytes += (entry.stat.st_blocks.max(0) as u64).saturating_mul(512);
            }
            if usage.entries > max_entries || usage.too_deep {
                Step::Stop
            } else {
                Step::Continue
            }
        });
        usage
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
    fn usage_counts_blocks_and_entries_without_following_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/data"), vec![7u8; 1 << 20]).unwrap();
        std::fs::hard_link(root.join("sub/data"), root.join("again")).unwrap();
        std::os::unix::fs::symlink("/usr", root.join("usr")).unwrap();
        let usage = Usage::of(root, 100);
        assert_eq!(usage.entries, 4, "{usage:?}");
        assert!(usage.bytes >= 1 << 20 && usage.bytes < 2 << 20, "{usage:?}");
        assert!(!usage.too_deep);
        // The walk stops once the count is over the limit.
        assert_eq!(Usage::of(root, 2).entries, 3);
    }

    #[test]
    fn a_workspace_nested_past_the_quota_depth_is_flagged() {
        let dir = tempfile::tempdir().unwrap();
        let deep: PathBuf = std::iter::repeat_n("d", QUOTA_DEPTH + 2).collect();
        std::fs::create_dir_all(dir.path().join(&deep)).unwrap();
        assert!(Usage::of(dir.path(), 1000).too_deep);
        let shallow: PathBuf = std::iter::repeat_n("d", QUOTA_DEPTH).collect();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(&shallow)).unwrap();
        assert!(!Usage::of(dir.path(), 1000).too_deep);
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
