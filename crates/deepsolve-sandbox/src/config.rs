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

/// Resource limits. Two kinds:
/// - **per process**: address space, CPU, file size and open files are rlimits set before
///   bwrap starts, so they hold for everything inside;
/// - **per turn** (every sandbox started for one workspace counts together: the persistent
///   interpreter, each `exec`, every child): memory, processes and the workspace's size and
///   file count, enforced while code runs by a cgroup or the watchdog (see `budget`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// RLIMIT_AS per process, bytes; [`Limits::address_space_for`] derives it from the memory
    /// budget.
    pub address_space_bytes: u64,
    /// RLIMIT_CPU hard limit of a persistent interpreter, seconds (each cell also gets a soft
    /// limit of its own budget). A one-shot command gets its timeout plus one second.
    pub interpreter_cpu_s: u64,
    /// RLIMIT_FSIZE: the largest file a sandboxed process may write, bytes (never above the
    /// workspace quota).
    pub file_size_bytes: u64,
    /// RLIMIT_NOFILE.
    pub open_files: u64,
    /// Tasks (processes and threads) of the turn at once: the cgroup's `pids.max`, or the
    /// watchdog stops the turn when its count reaches it. Each sandbox's RLIMIT_NPROC
    /// ([`Limits::sandbox_nproc`]) holds it between the watchdog's looks.
    pub processes: u64,
    /// Memory of all the turn's sandboxed processes together (their private `/tmp` and
    /// `/dev/shm` included), bytes.
    pub memory_bytes: u64,
    /// Disk the turn's workspace may use (allocated blocks), bytes.
    pub workspace_bytes: u64,
    /// Files, directories and other entries the turn's workspace may hold.
    pub workspace_files: u64,
    /// Bytes of each output stream kept (head and tail halves); the rest is counted, not kept.
    pub output_bytes: usize,
    /// Size of the sandbox's private `/tmp` (a tmpfs, so it is memory: it counts against
    /// `memory_bytes`).
    pub tmp_bytes: u64,
}

/// The smallest RLIMIT_AS [`Limits::address_space_for`] gives: Python with numpy, scipy,
/// sympy and matplotlib imported maps about 390 MiB of address space before it computes
/// anything.
pub const MIN_ADDRESS_SPACE: u64 = 1 << 30;

impl Limits {
    /// RLIMIT_AS consistent with a per-turn memory budget: no single process may map more
    /// than the whole turn may use, but never so little that the maths stack cannot load.
    pub fn address_space_for(memory_bytes: u64) -> u64 {
        memory_bytes.max(MIN_ADDRESS_SPACE)
    }

    /// RLIMIT_NPROC of each sandbox, set inside its user namespace so the kernel counts only
    /// that sandbox's tasks (set outside, it would count every sandbox of uid 65534
    /// together). A little above the turn's limit: at the kernel's cap a fork storm's count,
    /// as a walk of `/proc` sees it, stays just below the cap (each refused fork holds a slot
    /// for a moment), so the cap must lie past the point where the watchdog acts.
    pub fn sandbox_nproc(&self) -> u64 {
        self.processes + (self.processes / 8).max(4)
    }

    /// RLIMIT_FSIZE as applied: a single file never exceeds the workspace quota either.
    pub fn effective_file_size(&self) -> u64 {
        self.file_size_bytes.min(self.workspace_bytes.max(1))
    }
}

impl Default for Limits {
    fn default() -> Self {
        let memory_bytes = 2048 << 20;
        Limits {
            address_space_bytes: Limits::address_space_for(memory_bytes),
            interpreter_cpu_s: 3600,
            file_size_bytes: 256 << 20,
            open_files: 256,
            processes: 64,
            memory_bytes,
            workspace_bytes: 1024 << 20,
            workspace_files: 10_000,
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
