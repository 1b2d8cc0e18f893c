//! deepsolve-sandbox: running model-written code out of process, isolated.
//!
//! - [`Sandbox::detect`] finds a working backend once — bubblewrap, probed for real — or
//!   says exactly why there is none (then the code tools are not mounted: fail closed).
//!   [`Sandbox::detect_remembered`] keeps that verdict between processes while nothing it
//!   depends on changes, and probes again beside the turn ([`Recheck`]).
//!   `sandbox: none` is an explicit opt-out with a loud [`Sandbox::warning`].
//! - [`Sandbox::run_command`] runs `sh -c` in the turn's workspace ([`ExecOutcome`]).
//! - [`Sandbox::start_python`] starts a persistent interpreter ([`Interpreter`]) whose names
//!   survive from one [`Interpreter::run`] to the next.
//! - [`Snapshot`] tells which workspace files a call created or changed (its artifacts).
//!
//! What every sandboxed process gets: no network (own network namespace), a clean
//! environment, a read-only system, a private `/tmp`, the workspace as the only writable
//! place, its own pid/ipc/uts/user namespaces, no capabilities, uid 65534, rlimits (address
//! space, CPU, file size, open files, processes), a seccomp filter ([`SeccompFilter`]:
//! ptrace, bpf, mounts, namespaces and the like refused), and a kill of the whole process
//! group (and with it the pid namespace) on timeout or cancel. Output is read with a cap while it
//! streams; what came before a timeout is kept.
//!
//! Every sandbox started for one workspace (one turn) shares that turn's budgets — memory,
//! processes, the workspace's size and file count — enforced while the code runs by a cgroup
//! v2 or the watchdog ([`Enforcement`]); a call a budget stopped says which ([`Stopped`]).
//!
//! Processes are spawned from async context: bwrap's `--die-with-parent` is tied to the
//! spawning *thread*, and tokio's worker threads live as long as the runtime.

mod budget;
mod capture;
mod config;
mod error;
mod exec;
mod launch;
mod pipe;
mod process;
mod python;
mod remember;
mod sandbox;
mod seccomp;
pub mod workspace;

pub use budget::{Enforcement, Stopped};
pub use capture::{Capture, Captured};
pub use config::{Limits, MIN_ADDRESS_SPACE, SandboxConfig, SandboxMode};
pub use error::SandboxError;
pub use exec::{ExecOutcome, ExitKind};
pub use launch::{Backend, HostUser, WORKDIR};
pub use python::{CellOutcome, CellStatus, INTERRUPT_GRACE, Interpreter, PythonOptions, ReadyInfo};
pub use remember::Recheck;
pub use sandbox::Sandbox;
pub use seccomp::SeccompFilter;
pub use workspace::{FileChange, Snapshot};
