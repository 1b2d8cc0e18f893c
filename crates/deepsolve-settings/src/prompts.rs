//! `prompts`: an operator's replacements for the texts the model reads, per language.
//!
//! - The playbook (the solve system prompt): `prompts.solve.system` (inline) or
//!   `prompts.solve.system_file` (a path, relative to the settings file's directory) for every
//!   language; `prompts.solve.<lang>.system` / `…system_file` for one language, which wins.
//! - Any text by its name (`nudge_act_now`, `progress_header`, `playbook`, … — core's
//!   `prompts/<lang>/<name>.md`): a file `prompts/<lang>/<name>.md` beside the settings file.
//!   A settings key wins over the directory's `playbook.md`.
//!
//! Resolved once per load ([`resolve`]): every override is read, capped at
//! [`MAX_PROMPT_BYTES`], its name checked against core's catalog (an unknown name is an error
//! listing the valid ones), and a playbook that never mentions `solve_plan` is warned about.

use std::path::{Path, PathBuf};

use deepsolve_core::solve::Language;
use deepsolve_core::{OverrideError, Texts};
use serde::{Deserialize, Serialize};

/// The largest override, in bytes (the built-in playbook is under 3 KiB).
pub const MAX_PROMPT_BYTES: usize = 64 * 1024;

/// The name of the playbook among the texts.
pub const PLAYBOOK: &str = "playbook";

/// The directory of per-name overrides, beside the settings file.
pub const PROMPTS_DIR: &str = "prompts";

/// `prompts` as written, and the overrides in force (filled by the loader).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PromptsSettings {
    pub solve: SolvePrompts,
    /// Every text in force that is not the built-in one, resolved at load; `settings get
    /// prompts` shows it (which text, which language, from where), never set in a file.
    #[serde(skip_deserializing)]
    pub overridden: Vec<PromptOverride>,
}

/// `prompts.solve`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SolvePrompts {
    pub system: Option<String>,
    pub system_file: Option<String>,
    pub en: SystemPrompt,
    pub zh: SystemPrompt,
}

/// One level's playbook: inline or from a file (at most one of them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SystemPrompt {
    pub system: Option<String>,
    pub system_file: Option<String>,
}

impl SolvePrompts {
    /// The level of `language`, or the every-language one (`None`).
    pub fn level(&self, language: Option<Language>) -> SystemPrompt {
        match language {
            Some(Language::En) => self.en.clone(),
            Some(Language::Zh) => self.zh.clone(),
            None => SystemPrompt {
                system: self.system.clone(),
                system_file: self.system_file.clone(),
            },
        }
    }

    /// Set a level's playbook inline (`None`: unset), its `_file` unset.
    pub fn set(&mut self, language: Option<Language>, system: Option<String>) {
        let (text, file) = match language {
            Some(Language::En) => (&mut self.en.system, &mut self.en.system_file),
            Some(Language::Zh) => (&mut self.zh.system, &mut self.zh.system_file),
            None => (&mut self.system, &mut self.system_file),
        };
        *text = system;
        *file = None;
    }

    /// The settings key of a level's inline playbook (`prompts.solve[.<lang>].system`).
    pub fn key(language: Option<Language>) -> String {
        match language {
            Some(language) => format!("prompts.solve.{}.system", language.code()),
            None => "prompts.solve.system".to_string(),
        }
    }
}

impl PromptsSettings {
    /// The texts of `language` with this language's overrides in place of the built-in ones.
    pub fn texts(&self, language: Language) -> Result<Texts, OverrideError> {
        Texts::with_overrides(
            language,
            self.overridden
                .iter()
                .filter(|o| o.language == language)
                .map(|o| (o.name.as_str(), o.text.as_str())),
        )
    }
}

/// One text in force that is not the built-in one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptOverride {
    /// `en` or `zh`.
    pub language: Language,
    /// The text's name (`playbook`, `nudge_act_now`, …).
    pub name: String,
    /// Where it comes from: a settings key (`prompts.solve.zh.system`) or a file's path.
    pub from: String,
    /// The settings key whose level set it (`prompts.solve.zh.system` or
    /// `prompts.solve.system`, inline or through its `_file`): removing that key and its
    /// `_file` resets it. `None` for a file of the `prompts/` directory.
    pub setting: Option<String>,
    /// Its length, in characters.
    pub chars: usize,
    /// The text itself.
    #[serde(skip)]
    pub text: String,
}

impl PromptOverride {
    /// `text` as it will be in force: like a built-in file, its final newline is not part of it.
    fn new(
        language: Language,
        name: &str,
        (from, setting): (String, Option<String>),
        mut text: String,
    ) -> Self {
        if text.ends_with('\n') {
            text.pop();
        }
        PromptOverride {
            language,
            name: name.to_string(),
            from,
            setting,
            chars: text.chars().count(),
            text,
        }
    }
}

/// Why the overrides cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("both {key} and {key}_file are set; keep one")]
    BothSet { key: String },
    #[error("the prompt {from} is {bytes} bytes, over the cap of {limit} bytes")]
    TooLarge {
        from: String,
        bytes: usize,
        limit: usize,
    },
    #[error("cannot read the prompt file {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the prompt file {} is not UTF-8 text", path.display())]
    NotUtf8 { path: PathBuf },
    #[error("{}: {source}", path.display())]
    UnknownName {
        path: PathBuf,
        #[source]
        source: OverrideError,
    },
    #[error(
        "{}: unknown language directory '{name}'; the prompts directory holds en/ and zh/",
        dir.display()
    )]
    UnknownLanguage { dir: PathBuf, name: String },
}

/// Resolve the overrides in force for the settings file at `settings_path` into
/// `prompts.overridden`: the `prompts/` directory beside it, then the playbook keys (the
/// every-language one, then the language's own, each winning over what came before).
/// Returns the warnings: a playbook that never mentions `solve_plan`.
pub fn resolve(
    prompts: &mut PromptsSettings,
    settings_path: &Path,
) -> Result<Vec<String>, PromptError> {
    let base = match settings_path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut found = directory_overrides(&base.join(PROMPTS_DIR))?;
    for language in Texts::LANGUAGES {
        if let Some(playbook) = playbook_override(&prompts.solve, language, &base)? {
            found.retain(|o| !(o.language == language && o.name == PLAYBOOK));
            found.push(playbook);
        }
    }
    found.sort_by(|a, b| (a.language.code(), &a.name).cmp(&(b.language.code(), &b.name)));
    let warnings = found
        .iter()
        .filter(|o| o.name == PLAYBOOK && !o.text.contains("solve_plan"))
        .map(|o| {
            format!(
                "the {} playbook ({}) never mentions solve_plan: the engine still requires a plan first, but the model will be nudged more",
                o.language.code(),
                o.from
            )
        })
        .collect();
    prompts.overridden = found;
    Ok(warnings)
}

/// The playbook `language` gets from the settings keys: its own level, else the
/// every-language one; `None` when neither is set.
fn playbook_override(
    solve: &SolvePrompts,
    language: Language,
    base: &Path,
) -> Result<Option<PromptOverride>, PromptError> {
    for level in [Some(language), None] {
        let key = SolvePrompts::key(level);
        let set = solve.level(level);
        let inline = set.system.filter(|t| !t.trim().is_empty());
        let file = set.system_file.filter(|f| !f.trim().is_empty());
        let (text, from) = match (inline, file) {
            (Some(_), Some(_)) => {
                return Err(PromptError::BothSet { key });
            }
            (Some(text), None) => (capped(text, &key)?, key.clone()),
            (None, Some(file)) => {
                let path = base.join(file.trim());
                (read_capped(&path)?, path.display().to_string())
            }
            (None, None) => continue,
        };
        let origin = (from, Some(key));
        return Ok(Some(PromptOverride::new(language, PLAYBOOK, origin, text)));
    }
    Ok(None)
}

/// `prompts/<lang>/<name>.md`, each a text by its name. Hidden files and editor backups
/// (`…~`) are skipped; anything else that is not a known name is an error.
fn directory_overrides(dir: &Path) -> Result<Vec<PromptOverride>, PromptError> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut found = Vec::new();
    for (name, path) in entries(dir)? {
        let language = Texts::LANGUAGES
            .into_iter()
            .find(|l| l.code() == name && path.is_dir())
            .ok_or_else(|| PromptError::UnknownLanguage {
                dir: dir.to_path_buf(),
                name: name.clone(),
            })?;
        for (file, path) in entries(&path)? {
            let text_name = file.strip_suffix(".md").unwrap_or(&file);
            deepsolve_core::Text::by_name(text_name)
                .filter(|_| file.ends_with(".md"))
                .ok_or_else(|| PromptError::UnknownName {
                    path: path.clone(),
                    source: OverrideError::UnknownName {
                        name: text_name.to_string(),
                        valid: Texts::names().collect::<Vec<_>>().join(", "),
                    },
                })?;
            let text = read_capped(&path)?;
            let origin = (path.display().to_string(), None);
            found.push(PromptOverride::new(language, text_name, origin, text));
        }
    }
    Ok(found)
}

/// A directory's entries, by name, sorted; hidden ones and backups left out.
fn entries(dir: &Path) -> Result<Vec<(String, PathBuf)>, PromptError> {
    let unreadable = |source| PromptError::Unreadable {
        path: dir.to_path_buf(),
        source,
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name.ends_with('~') {
            continue;
        }
        out.push((name, entry.path()));
    }
    out.sort();
    Ok(out)
}

fn capped(text: String, from: &str) -> Result<String, PromptError> {
    if text.len() > MAX_PROMPT_BYTES {
        return Err(PromptError::TooLarge {
            from: from.to_string(),
            bytes: text.len(),
            limit: MAX_PROMPT_BYTES,
        });
    }
    Ok(text)
}

/// A prompt file, refused past the cap before it is read whole.
fn read_capped(path: &Path) -> Result<String, PromptError> {
    use std::io::Read;
    let unreadable = |source| PromptError::Unreadable {
        path: path.to_path_buf(),
        source,
    };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .map_err(unreadable)?
        .take(MAX_PROMPT_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() > MAX_PROMPT_BYTES {
        let size = std::fs::metadata(path).map_or(bytes.len(), |m| m.len() as usize);
        return Err(PromptError::TooLarge {
            from: path.display().to_string(),
            bytes: size,
            limit: MAX_PROMPT_BYTES,
        });
    }
    String::from_utf8(bytes).map_err(|_| PromptError::NotUtf8 {
        path: path.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn keys_win_over_the_directory_and_a_language_s_own_key_over_the_shared_one() {
        let dir = tempfile::tempdir().unwrap();
        let settings = dir.path().join("settings.yaml");
        write(
            &dir.path().join("prompts/zh/playbook.md"),
            "目录里的 solve_plan",
        );
        write(&dir.path().join("prompts/zh/nudge_act_now.md"), "现在行动");
        write(&dir.path().join("prompts/en/.hidden"), "x");
        write(&dir.path().join("shared.md"), "Shared playbook.");
        let mut prompts = PromptsSettings {
            solve: SolvePrompts {
                system_file: Some("shared.md".into()),
                zh: SystemPrompt {
                    system: Some("中文 solve_plan".into()),
                    system_file: None,
                },
                ..SolvePrompts::default()
            },
            overridden: Vec::new(),
        };
        let warnings = resolve(&mut prompts, &settings).unwrap();
        let got: Vec<(&str, &str, &str)> = prompts
            .overridden
            .iter()
            .map(|o| (o.language.code(), o.name.as_str(), o.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("en", "playbook", "Shared playbook."),
                ("zh", "nudge_act_now", "现在行动"),
                ("zh", "playbook", "中文 solve_plan"),
            ]
        );
        assert_eq!(prompts.overridden[2].from, "prompts.solve.zh.system");
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("en playbook") && warnings[0].contains("solve_plan"));
        let zh = prompts.texts(Language::Zh).unwrap();
        assert_eq!(zh.get(deepsolve_core::Text::NudgeActNow), "现在行动");
    }

    #[test]
    fn bad_overrides_are_errors_that_name_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let settings = dir.path().join("settings.yaml");
        let resolve_in = |prompts: &mut PromptsSettings| resolve(prompts, &settings);
        write(&dir.path().join("prompts/en/nudge_act.md"), "x");
        let err = resolve_in(&mut PromptsSettings::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("nudge_act.md") && err.contains("'nudge_act'"),
            "{err}"
        );
        assert!(err.contains("valid names are: playbook,"), "{err}");
        std::fs::remove_file(dir.path().join("prompts/en/nudge_act.md")).unwrap();
        write(&dir.path().join("prompts/fr/playbook.md"), "x");
        let err = resolve_in(&mut PromptsSettings::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown language directory 'fr'"), "{err}");
        std::fs::remove_dir_all(dir.path().join("prompts/fr")).unwrap();
        let mut big = PromptsSettings::default();
        big.solve.system = Some("x".repeat(MAX_PROMPT_BYTES + 1));
        let err = resolve_in(&mut big).unwrap_err().to_string();
        assert!(
            err.contains("prompts.solve.system") && err.contains("65537 bytes"),
            "{err}"
        );
        write(
            &dir.path().join("prompts/en/ultimatum.md"),
            &"y".repeat(MAX_PROMPT_BYTES + 5),
        );
        let err = resolve_in(&mut PromptsSettings::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("ultimatum.md") && err.contains("cap of 65536"),
            "{err}"
        );
        let mut both = PromptsSettings::default();
        both.solve.en.system = Some("a".into());
        both.solve.en.system_file = Some("b".into());
        std::fs::remove_file(dir.path().join("prompts/en/ultimatum.md")).unwrap();
        let err = resolve_in(&mut both).unwrap_err().to_string();
        assert!(
            err.contains("prompts.solve.en.system and prompts.solve.en.system_file"),
            "{err}"
        );
        let mut missing = PromptsSettings::default();
        missing.solve.system_file = Some("nope.md".into());
        let err = resolve_in(&mut missing).unwrap_err().to_string();
        assert!(err.contains("nope.md"), "{err}");
    }
}
