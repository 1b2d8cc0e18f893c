//! `settings set`: change one key of the file, validated and clamped, written atomically.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

use crate::edit;
use crate::error::{Origin, SettingsError};
use crate::model::has_password;
use crate::schema::{Schema, ToolSection};
use crate::tree::{self, Origins};
use crate::validate;
use crate::yaml;

/// The only key that holds a secret; it is never written by us.
const SECRET_KEY: &str = "llm.api_key";
/// A key whose value may carry a secret (a password in the URL); written only without one.
const DATABASE_KEY: &str = "server.database";

/// Set `dotted_key` to `raw_value` in the settings file at `path`, whose `tools` may hold
/// `tool_sections` (as for [`load`](crate::load)) (created, with its parent
/// directories, if missing). Returns the warnings about the resulting file, e.g. that the value
/// was clamped — the clamped value is what gets written, so the file never holds a value that
/// loads differently from what it says.
///
/// The whole resulting file is checked as strictly as a load; on any error the file is left
/// untouched. An empty `raw_value` removes the key (back to its default). `llm.api_key` is
/// refused: secrets are never written in clear. The write goes through a temporary file in the
/// same directory, fsync and rename, so a crash leaves the old or the new file, never half of
/// one; the file's mode is 0600. The file is edited in its own text: its comments, blank lines,
/// key order and quoting stay, a new key goes at the end of its section. A file whose layout
/// the editor cannot follow (a flow-style `{…}` section, an anchor) is written afresh, with a
/// warning that its comments were not kept.
pub fn set_in_file(
    path: &Path,
    dotted_key: &str,
    raw_value: &str,
    tool_sections: &[ToolSection],
) -> Result<Vec<String>, SettingsError> {
    set_many_in_file(path, &[(dotted_key, raw_value)], tool_sections)
}

/// [`set_in_file`] for several keys at once, in **one** atomic write: either every change
/// lands (validated and clamped together) or none does. The server's settings endpoint uses
/// it, so a request that changes three knobs never leaves the file with only two of them.
pub fn set_many_in_file(
    path: &Path,
    changes: &[(&str, &str)],
    tool_sections: &[ToolSection],
) -> Result<Vec<String>, SettingsError> {
    let schema = Schema::new(tool_sections);
    let original = yaml::read_text(path)?.unwrap_or_default();
    let mut file = yaml::parse_file(path, &original)?;
    let mut keys = Vec::with_capacity(changes.len());
    for (dotted_key, raw_value) in changes {
        let key = tree::parse_key(dotted_key)?;
        if key.join(".") == SECRET_KEY {
            return Err(SettingsError::SecretNotWritable {
                key: SECRET_KEY.into(),
                path: path.to_path_buf(),
            });
        }
        let kind = tree::known_kind(schema, &key, &Origin::CommandLine)?;
        if key.join(".") == DATABASE_KEY && has_password(raw_value) {
            return Err(SettingsError::PasswordNotWritable {
                key: DATABASE_KEY.into(),
                path: path.to_path_buf(),
            });
        }
        let value = tree::raw_value(kind, raw_value, &key, &Origin::CommandLine)?;
        if value.is_null() {
            tree::replace(&mut file, &key, None);
        } else {
            tree::write(&mut file, &key, value);
        }
        keys.push(key);
    }
    let mut warnings = check_and_clamp(schema, path, &mut file, &keys)?;
    let text = match edited_in_place(&original, &file, &keys) {
        Some(text) => text,
        None => {
            if original.contains('#') {
                warnings.push(format!(
                    "{} was written afresh: its layout is beyond the in-place editor (a flow-style {{…}} section, an anchor, tabs), so its comments were not kept",
                    path.display()
                ));
            }
            yaml::render(path, &file)?
        }
    };
    write_atomically(path, &text)?;
    Ok(warnings)
}

/// `original` with each of `keys` set to its value in `file` (or removed), edited in place;
/// `None` when the editor cannot, or when the result would not read back as exactly `file`.
fn edited_in_place(
    original: &str,
    file: &Map<String, Value>,
    keys: &[Vec<String>],
) -> Option<String> {
    let mut text = original.to_string();
    for key in keys {
        text = edit::edit(&text, key, tree::get(file, key))?;
    }
    let same = match yaml::parse(&text).ok()? {
        Value::Null => file.is_empty(),
        Value::Object(back) => &back == file,
        _ => false,
    };
    same.then_some(text)
}

/// Check the would-be file strictly and replace the new values by their checked (clamped,
/// normalised) form.
fn check_and_clamp(
    schema: Schema<'_>,
    path: &Path,
    file: &mut Map<String, Value>,
    keys: &[Vec<String>],
) -> Result<Vec<String>, SettingsError> {
    let mut origins = Origins::new(Origin::File(path.to_path_buf()));
    for key in keys {
        origins.record(key, Origin::CommandLine);
    }
    let mut checked = file.clone();
    let result = validate::check(schema, &mut checked, &origins)?;
    for key in keys {
        tree::replace(file, key, tree::get(&checked, key).cloned());
    }
    Ok(result.warnings)
}

/// If `path` is a symlink, the file it points to: replacing the link itself would silently
/// detach a settings file kept elsewhere (dotfile repositories do this).
fn real_target(path: &Path) -> Result<PathBuf, SettingsError> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            fs::canonicalize(path).map_err(|source| SettingsError::Io {
                path: path.to_path_buf(),
                action: "resolve the link of",
                source,
            })
        }
        _ => Ok(path.to_path_buf()),
    }
}

/// Temp file in the same directory (so the rename is atomic), fsync, rename, fsync the directory.
fn write_atomically(path: &Path, text: &str) -> Result<(), SettingsError> {
    let target = real_target(path)?;
    let io = |action, source| SettingsError::Io {
        path: target.clone(),
        action,
        source,
    };
    let dir = match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    create_dirs(&dir).map_err(|e| io("create the directory of", e))?;
    let (tmp, mut file) =
        create_temp(&dir, &target).map_err(|e| io("create a temporary file for", e))?;
    let written = file
        .write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .and_then(|()| fs::rename(&tmp, &target));
    if let Err(e) = written {
        // Best effort: the temp file is ours, and leaving it would litter the config directory.
        let _ = fs::remove_file(&tmp);
        return Err(io("write", e));
    }
    // The rename is durable only once the directory is synced; not all systems allow it.
    if let Ok(dir) = File::open(&dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

fn create_dirs(dir: &Path) -> std::io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// A fresh file next to `target`, mode 0600 from the start (the settings may hold a hand-written
/// key), created exclusively so two writers never share one.
fn create_temp(dir: &Path, target: &Path) -> std::io::Result<(PathBuf, File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "settings.yaml".into());
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut last_error = None;
    for _ in 0..16 {
        let unique = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(
            ".{name}.{}.{nanos}.{unique}.tmp",
            std::process::id()
        ));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        match options.open(&tmp) {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => last_error = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last_error.unwrap_or_else(|| std::io::Error::other("no free temporary file name")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_files_are_unique_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("settings.yaml");
        let (a, _) = create_temp(dir.path(), &target).unwrap();
        let (b, _) = create_temp(dir.path(), &target).unwrap();
        assert_ne!(a, b);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&a).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[cfg(unix)]
    #[test]
    fn writing_through_a_symlink_keeps_the_link() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.yaml");
        let link = dir.path().join("settings.yaml");
        fs::write(&real, "").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        set_in_file(&link, "solve.max_rounds", "7", &[]).unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(fs::read_to_string(&real).unwrap().contains("max_rounds: 7"));
    }
}
