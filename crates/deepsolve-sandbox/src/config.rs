//! What the operator chooses: the isolation mode, where bwrap and Python live, and the limits.

use std::path::PathBuf;
use std::str::FromStr;

use crate::error::SandboxError;

/// `sandbox.backend` in the settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxMode {
    /// bubblewrap when it works; otherwise the code tools are not mounted (fail closed).
    Auto,
    /// bubblewrap is required: not having it is an error, not a silent downgrade.
    Bwrap,
    /// No isolation at all: an explicit, loudly-warned opt-out.
    None,
}

impl FromStr for SandboxMode {
    type Err = SandboxError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "auto" | "" => Ok(SandboxMode::Auto),
            "bwrap" => Ok(SandboxMode::Bwrap),
            "none" => Ok(SandboxMode::None),
            other => Err(SandboxError::BadMode(other.to_string())),
        }
    }
}

impl SandboxMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Auto => "auto",
            SandboxMode::Bwrap => "bwrap",
            SandboxMode::None => "none",
        }
    }
}

/// Resource limits for every sandboxed process. Address space, CPU, file size and
/// open files are rlimits set before bwrap starts, so they hold for everything inside; the
/// process count is set inside the sandbox (see `python/driver.py` and `exec.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// RLIMIT_AS per process, bytes.
    pub address_space_bytes: u64,
    /// RLIMIT_CPU hard limit of a persistent interpreter, seconds (each cell also gets a soft
    /// limit of its own budget). A one-shot command gets its timeout plus one second.
    pub interpreter_cpu_s: u64,
    /// RLIMIT_FSIZE: the largest file a sandboxed process may write, bytes.
    pub file_size_bytes: u64,
    /// RLIMIT_NOFILE.
    pub open_files: u64,
    /// RLIMIT_NPROC inside the sandbox (threads count too). Not enforced by the kernel for a
    /// process whose host uid is root: that case relies on the pid namespace + group kill.
    pub processes: u64,
    /// Bytes of each output stream kept (head and tail halves); the rest is counted, not kept.
    pub output_bytes: usize,
    /// Size of the sandbox's private `/tmp` (a tmpfs, so it is memory).
    pub tmp_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            address_space_bytes: 4 << 30,
            interpreter_cpu_s: 3600,
            file_size_bytes: 256 << 20,
            open_files: 256,
            processes: 128,
            output_bytes: 1 << 20,
            tmp_bytes: 256 << 20,
        }
    }
}

/// Everything `Sandbox::detect` needs.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    pub mode: SandboxMode,
    /// The bwrap binary; when it does not exist, `bwrap` is looked up on `PATH`.
    pub bwrap: PathBuf,
    /// The Python used inside the sandbox: the system interpreter with the maths stack (not a
    /// developer's pyenv, whose site-packages the sandbox cannot see anyway).
    pub python: PathBuf,
    pub limits: Limits,
    /// When we are root: drop to uid 65534 before bwrap starts (the default), so the kernel
    /// enforces the process limit and the sandboxed code is `nobody` on the host too. Off,
    /// bwrap runs as root and a fork bomb is contained by the pid namespace and the kill alone.
    pub drop_root: bool,
    /// Install the seccomp filter (`seccomp.rs`) in every bwrap sandbox; when it cannot be
    /// built or installed, there is no sandbox (fail closed). Off is an explicit, loudly
    /// warned opt-out (`sandbox.seccomp: false`).
    pub seccomp: bool,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            mode: SandboxMode::Auto,
            bwrap: PathBuf::from("/usr/bin/bwrap"),
            python: PathBuf::from("/usr/bin/python3"),
            limits: Limits::default(),
            drop_root: true,
            seccomp: true,
        }
    }
}

impl SandboxConfig {
    pub fn with_mode(mode: SandboxMode) -> Self {
        SandboxConfig {
            mode,
            ..SandboxConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_by_name() {
        assert_eq!("auto".parse::<SandboxMode>().ok(), Some(SandboxMode::Auto));
        assert_eq!(
            " bwrap ".parse::<SandboxMode>().ok(),
            Some(SandboxMode::Bwrap)
        );
        assert_eq!("none".parse::<SandboxMode>().ok(), Some(SandboxMode::None));
        let e = "docker".parse::<SandboxMode>().err().map(|e| e.to_string());
        assert!(e.unwrap_or_default().contains("docker"));
    }
}
