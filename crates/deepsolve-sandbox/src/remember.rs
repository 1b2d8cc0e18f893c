//! A probe's verdict, kept between processes.
//!
//! [`Sandbox::detect`] starts Python in a real sandbox: 15–25 ms, the longest wait before a
//! command-line turn's first request. What it finds depends on little that changes: the
//! kernel and its settings (this boot), the bwrap and Python binaries, the program probing
//! (this build), the user it runs as and the sandbox settings. [`Sandbox::detect_remembered`]
//! keeps the verdict in a file under a key of all of those and, while the key holds, sets the
//! sandbox up from it without probing; it then hands back a [`Recheck`], the full probe to run
//! beside the turn, which rewrites the file.
//!
//! Only a working sandbox is remembered. A failing one is probed every time: a fix (a sysctl
//! turned back on) shows in the very next turn, and a turn refused for want of a required
//! sandbox never starts, so a kept failure would have no recheck to correct it.
//!
//! A remembered verdict only ever picks among the candidates this host and these settings
//! would try, so the launch is the one a probe would have chosen; isolation itself and the
//! seccomp filter come from the settings, never from the file. A sandbox that stopped working
//! within the boot (a sysctl changed) shows when code runs — bwrap fails, nothing runs
//! unisolated — and the recheck says so and corrects the file for the next turn.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::{SandboxConfig, SandboxMode};
use crate::error::SandboxError;
use crate::launch::{Backend, HostUser};
use crate::sandbox::{Sandbox, find_bwrap, geteuid, stage_dir};

/// The file is a few hundred bytes; anything far larger is not ours.
const MAX_FILE_BYTES: u64 = 64 * 1024;

/// What the file holds.
#[derive(Debug, Serialize, Deserialize)]
struct Kept {
    key: String,
    verdict: Verdict,
}

/// The candidate that ran the probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Verdict {
    host: HostKind,
    disable_userns: bool,
    version: String,
}

/// [`HostUser`] without its paths (a stage directory is found again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum HostKind {
    Current,
    Nobody,
    Root,
}

impl Verdict {
    /// The working bwrap sandbox `detect` returned, as a verdict worth keeping.
    fn of(detected: &Result<Sandbox, SandboxError>) -> Option<Verdict> {
        let sandbox = detected.as_ref().ok()?;
        let Backend::Bwrap {
            host,
            disable_userns,
            ..
        } = sandbox.backend()
        else {
            return None;
        };
        Some(Verdict {
            host: match host {
                HostUser::Current => HostKind::Current,
                HostUser::Nobody { .. } => HostKind::Nobody,
                HostUser::Root => HostKind::Root,
            },
            disable_userns: *disable_userns,
            version: sandbox.version().to_string(),
        })
    }
}

/// The probe to run again beside a turn whose sandbox came from a remembered verdict.
#[derive(Debug)]
pub struct Recheck {
    config: SandboxConfig,
    file: PathBuf,
    key: String,
    kept: Verdict,
}

impl Recheck {
    /// Probe for real and keep what it finds. `Some(why)` when the sandbox the turn was given
    /// no longer works (its code calls fail; the next turn probes afresh and knows).
    pub async fn run(self) -> Option<String> {
        let fresh = Sandbox::detect(self.config).await;
        if Verdict::of(&fresh).as_ref() != Some(&self.kept) {
            keep(&self.file, &self.key, &fresh);
        }
        fresh.err().map(|e| e.to_string())
    }
}

impl Sandbox {
    /// [`Sandbox::detect`], from the verdict kept in `file` when nothing it depended on has
    /// changed (see the module docs), with the [`Recheck`] to run beside the turn; else probed
    /// now, and the verdict kept for the next process.
    pub async fn detect_remembered(
        config: SandboxConfig,
        file: &Path,
    ) -> (Result<Sandbox, SandboxError>, Option<Recheck>) {
        let Some(key) = key(&config) else {
            return (Sandbox::detect(config).await, None);
        };
        if let Some(kept) = read(file, &key)
            && let Some(sandbox) = from_verdict(&config, &kept)
        {
            let recheck = Recheck {
                config,
                file: file.to_path_buf(),
                key,
                kept,
            };
            return (sandbox, Some(recheck));
        }
        let detected = Sandbox::detect(config).await;
        keep(file, &key, &detected);
        (detected, None)
    }
}

/// The sandbox a verdict describes, set up without probing; `None` when it cannot be (the
/// candidate is not one this host and these settings would try now: probe instead).
fn from_verdict(
    config: &SandboxConfig,
    verdict: &Verdict,
) -> Option<Result<Sandbox, SandboxError>> {
    let root = geteuid() == 0;
    let host = match verdict.host {
        HostKind::Current if !root => HostUser::Current,
        HostKind::Root if root => HostUser::Root,
        HostKind::Nobody if root && config.drop_root => HostUser::Nobody {
            stage: stage_dir()?,
        },
        _ => return None,
    };
    let bwrap = find_bwrap(&config.bwrap)?;
    Some(Sandbox::with_backend(
        config.clone(),
        bwrap,
        host,
        verdict.disable_userns,
        verdict.version.clone(),
    ))
}

/// Everything a probe's verdict depends on, as one string; `None` when some of it cannot be
/// known (no boot id, a binary missing): then nothing is remembered.
fn key(config: &SandboxConfig) -> Option<String> {
    if config.mode == SandboxMode::None {
        return None;
    }
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let bwrap = find_bwrap(&config.bwrap)?;
    let program = std::env::current_exe().ok()?;
    Some(
        [
            "v1".to_string(),
            format!("boot {}", boot.trim()),
            format!("euid {}", geteuid()),
            format!(
                "settings {:?} seccomp={} drop_root={} {:?}",
                config.mode, config.seccomp, config.drop_root, config.limits
            ),
            stamp("bwrap", &bwrap)?,
            stamp("python", &config.python)?,
            stamp("program", &program)?,
        ]
        .join("\n"),
    )
}

/// `what path device:inode size mtime`: a binary replaced or upgraded changes it.
fn stamp(what: &str, path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    Some(format!(
        "{what} {} {}:{} {} {}.{}",
        path.display(),
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec()
    ))
}

/// The verdict kept under `key`, if the file holds one.
fn read(file: &Path, key: &str) -> Option<Verdict> {
    let mut text = String::new();
    std::fs::File::open(file)
        .ok()?
        .take(MAX_FILE_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    let kept: Kept = serde_json::from_str(&text).ok()?;
    (kept.key == key).then_some(kept.verdict)
}

/// Keep what a probe found: a working sandbox's verdict under `key`; nothing (the file
/// removed) for a failing one, so the next process probes.
fn keep(file: &Path, key: &str, detected: &Result<Sandbox, SandboxError>) {
    match Verdict::of(detected) {
        Some(verdict) => write(file, key, &verdict),
        None => {
            let _ = std::fs::remove_file(file);
        }
    }
}

/// Keep `verdict` under `key` (best effort: without the file, the next process probes). A
/// temporary file and a rename, so a reader never sees half of one.
fn write(file: &Path, key: &str, verdict: &Verdict) {
    let kept = Kept {
        key: key.to_string(),
        verdict: verdict.clone(),
    };
    let written = (|| -> std::io::Result<()> {
        let dir = file.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let tmp = dir.join(format!(
            ".{}.{}.tmp",
            file.file_name().map_or_else(
                || "sandbox-probe".into(),
                |n| n.to_string_lossy().into_owned()
            ),
            std::process::id()
        ));
        std::fs::write(&tmp, serde_json::to_vec(&kept)?)?;
        std::fs::rename(&tmp, file).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    })();
    if let Err(e) = written {
        tracing::debug!(file = %file.display(), error = %e, "the sandbox probe's verdict was not kept");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_follows_the_settings_and_the_binaries() {
        let config = SandboxConfig::default();
        let Some(base) = key(&config) else {
            // No bwrap or python3 on this machine: nothing to remember.
            return;
        };
        assert_eq!(key(&config).as_deref(), Some(base.as_str()), "stable");
        let no_filter = SandboxConfig {
            seccomp: false,
            ..config.clone()
        };
        assert_ne!(key(&no_filter), Some(base.clone()));
        let other_python = SandboxConfig {
            python: PathBuf::from("/nonexistent/python3"),
            ..config.clone()
        };
        assert_eq!(key(&other_python), None, "a missing binary: no key");
        let none = SandboxConfig {
            mode: SandboxMode::None,
            ..config
        };
        assert_eq!(key(&none), None, "nothing is probed without isolation");
    }

    #[test]
    fn a_verdict_is_read_back_only_under_its_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("cache").join("probe.json");
        let verdict = Verdict {
            host: HostKind::Current,
            disable_userns: true,
            version: "bubblewrap 0.8.0".into(),
        };
        write(&file, "k1", &verdict);
        assert_eq!(read(&file, "k1"), Some(verdict));
        assert_eq!(read(&file, "k2"), None);
        std::fs::write(&file, "not json").expect("write");
        assert_eq!(read(&file, "k1"), None);
    }
}
