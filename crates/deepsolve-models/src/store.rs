//! The model store: one directory, `${DEEPSOLVE_MODELS:-~/.cache/deepsolve/models}`, holding
//! `<name>.gguf` files (the directory and names `scripts/fetch-model` and the local backend
//! use). A pull in progress keeps `<name>.gguf.part` (and, for a parted model, its
//! `.part-state` and wheel) beside them; only a whole, verified file is ever `<name>.gguf`.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::ModelsError;
use crate::catalog::{CatalogModel, load_catalog};

/// The first four bytes of every GGUF file.
pub const GGUF_MAGIC: &[u8; 4] = b"GGUF";

/// `$DEEPSOLVE_MODELS`, else `~/.cache/deepsolve/models`; `None` without either.
pub fn models_dir() -> Option<PathBuf> {
    match std::env::var_os("DEEPSOLVE_MODELS") {
        Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
        _ => {
            std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/deepsolve/models"))
        }
    }
}

/// Whether the file at `path` starts with the GGUF magic.
pub fn is_gguf(path: &Path) -> Result<bool, ModelsError> {
    let mut file = std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ModelsError::NoSuchFile(path.to_path_buf()),
        _ => ModelsError::io("cannot open", path)(e),
    })?;
    let mut magic = [0u8; 4];
    match file.read_exact(&mut magic) {
        Ok(()) => Ok(&magic == GGUF_MAGIC),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(ModelsError::io("cannot read", path)(e)),
    }
}

/// A store name: letters, digits, `.`, `_`, `-`, not starting with `.`, at most 200 bytes.
pub(crate) fn check_name(name: &str) -> Result<(), ModelsError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > 200 || name.starts_with('.') || !name.chars().all(allowed) {
        return Err(ModelsError::BadName(name.to_string()));
    }
    Ok(())
}

/// A model as `list` shows it: a catalog entry (present or not) or a stray `*.gguf`.
#[derive(Debug, Clone, Serialize)]
pub struct StoredModel {
    pub name: String,
    /// Whether `<name>.gguf` is in the store.
    pub present: bool,
    /// The file's size when present, else the catalog's.
    pub size: u64,
    /// The catalog entry's trained context (none for a file the catalog does not know).
    pub trained_context: Option<u32>,
    pub path: PathBuf,
    pub in_catalog: bool,
    pub description: Option<String>,
    /// Where the catalog fetches it from.
    pub source: Option<String>,
    /// Bytes of an interrupted pull waiting in `<name>.gguf.part`.
    pub partial: Option<u64>,
}

/// The store directory and its catalog.
#[derive(Debug, Clone)]
pub struct ModelStore {
    dir: PathBuf,
    catalog: Vec<CatalogModel>,
}

impl ModelStore {
    /// The store at [`models_dir`].
    pub fn open_default() -> Result<ModelStore, ModelsError> {
        ModelStore::open(models_dir().ok_or(ModelsError::NoStore)?)
    }

    /// The store at `dir` (created on the first pull), with the built-in catalog and the
    /// store's own `catalog.json`.
    pub fn open(dir: impl Into<PathBuf>) -> Result<ModelStore, ModelsError> {
        let dir = dir.into();
        let catalog = load_catalog(&dir)?;
        Ok(ModelStore { dir, catalog })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn catalog(&self) -> &[CatalogModel] {
        &self.catalog
    }

    /// The catalog entry called `name` (a trailing `.gguf` is ignored).
    pub fn find(&self, name: &str) -> Option<&CatalogModel> {
        let name = name.strip_suffix(".gguf").unwrap_or(name);
        self.catalog.iter().find(|m| m.name == name)
    }

    /// The catalog's names, comma-separated (for an error).
    pub fn known_names(&self) -> String {
        let names: Vec<&str> = self.catalog.iter().map(|m| m.name.as_str()).collect();
        names.join(", ")
    }

    /// `<dir>/<name>.gguf`.
    pub fn path_of(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.gguf"))
    }

    /// `<dir>/<name>.gguf.part`: an unfinished pull.
    pub fn partial_of(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.gguf.part"))
    }

    /// Every catalog model (present or not), then every other `*.gguf` in the store by name.
    pub fn list(&self) -> Result<Vec<StoredModel>, ModelsError> {
        let mut models: Vec<StoredModel> = self
            .catalog
            .iter()
            .map(|m| {
                let path = self.path_of(&m.name);
                let on_disk = file_len(&path);
                StoredModel {
                    name: m.name.clone(),
                    present: on_disk.is_some(),
                    size: on_disk.unwrap_or(m.size),
                    trained_context: Some(m.trained_context),
                    path,
                    in_catalog: true,
                    description: Some(m.description.clone()),
                    source: Some(m.source.describe()),
                    partial: file_len(&self.partial_of(&m.name)),
                }
            })
            .collect();
        let mut others = Vec::new();
        for name in self.gguf_names()? {
            if self.find(&name).is_none() {
                let path = self.path_of(&name);
                others.push(StoredModel {
                    present: true,
                    size: file_len(&path).unwrap_or(0),
                    trained_context: None,
                    in_catalog: false,
                    description: None,
                    source: None,
                    partial: None,
                    name,
                    path,
                });
            }
        }
        others.sort_by(|a, b| a.name.cmp(&b.name));
        models.extend(others);
        Ok(models)
    }

    /// The stems of the store's `*.gguf` files.
    fn gguf_names(&self) -> Result<Vec<String>, ModelsError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(ModelsError::io("cannot list", &self.dir)(e)),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(ModelsError::io("cannot list", &self.dir))?;
            let file_name = entry.file_name();
            let Some(stem) = file_name.to_str().and_then(|n| n.strip_suffix(".gguf")) else {
                continue;
            };
            if !stem.starts_with('.') && entry.path().is_file() {
                names.push(stem.to_string());
            }
        }
        Ok(names)
    }

    /// Deletes `<name>.gguf` and any unfinished pull of it; the path removed.
    pub fn remove(&self, name: &str) -> Result<PathBuf, ModelsError> {
        let name = name.strip_suffix(".gguf").unwrap_or(name);
        check_name(name)?;
        let path = self.path_of(name);
        let partial = self.partial_of(name);
        let had_partial = partial.exists();
        for leftover in crate::pull::pull_leftovers(&self.dir, name) {
            let _ = std::fs::remove_file(leftover);
        }
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if had_partial {
                    Ok(partial)
                } else {
                    Err(ModelsError::Absent {
                        name: name.to_string(),
                        dir: self.dir.clone(),
                    })
                }
            }
            Err(e) => Err(ModelsError::io("cannot delete", path)(e)),
        }
    }
}

fn file_len(path: &Path) -> Option<u64> {
    std::fs::metadata(path)
        .ok()
        .filter(std::fs::Metadata::is_file)
        .map(|m| m.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for good in ["a", "qwen2.5-coder-0.5b-instruct-q4_k_m", "M_1"] {
            check_name(good).unwrap();
        }
        for bad in ["", ".hidden", "a/b", "../x", "a b", &"x".repeat(201)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn list_shows_the_catalog_and_stray_files_and_remove_deletes() {
        let dir = tempfile::tempdir().unwrap();
        let store = ModelStore::open(dir.path()).unwrap();
        std::fs::write(dir.path().join("mine.gguf"), b"GGUF....").unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"x").unwrap();
        let listed = store.list().unwrap();
        assert_eq!(listed.len(), 3);
        assert!(listed[..2].iter().all(|m| m.in_catalog && !m.present));
        assert_eq!(listed[2].name, "mine");
        assert_eq!(listed[2].size, 8);
        store.remove("mine").unwrap();
        assert!(matches!(
            store.remove("mine"),
            Err(ModelsError::Absent { .. })
        ));
    }

    #[test]
    fn gguf_magic_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        let (good, bad, short) = (
            dir.path().join("g"),
            dir.path().join("b"),
            dir.path().join("s"),
        );
        std::fs::write(&good, b"GGUF\x03\0\0\0").unwrap();
        std::fs::write(&bad, b"PK\x03\x04zip").unwrap();
        std::fs::write(&short, b"GG").unwrap();
        assert!(is_gguf(&good).unwrap());
        assert!(!is_gguf(&bad).unwrap());
        assert!(!is_gguf(&short).unwrap());
        assert!(matches!(
            is_gguf(&dir.path().join("none")),
            Err(ModelsError::NoSuchFile(_))
        ));
    }
}
